// Helpers shared by the Node generator: fresh test secrets, a frozen clock for
// the SDKs' verifiers, the checks every vector must pass, and the writer.

import { randomBytes, randomInt } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

export const random = {
  hex: (bytes) => randomBytes(bytes).toString("hex"),
  base64: (bytes) => randomBytes(bytes).toString("base64"),
  base64url: (bytes) => randomBytes(bytes).toString("base64url"),
  alnum: (n) => Array.from({ length: n }, () => ALNUM[randomInt(ALNUM.length)]).join(""),
  lower32: (n) => Array.from({ length: n }, () => "0123456789abcdefghjkmnpqrstvwxyz"[randomInt(32)]).join(""),
};

// The SDKs read the time through Date.now() or new Date(); swapping the global
// Date is the one way to freeze all of them without touching their code.
export async function atClock(unixSeconds, fn) {
  const RealDate = globalThis.Date;
  const ms = unixSeconds * 1000;
  class FrozenDate extends RealDate {
    constructor(...args) {
      super(...(args.length === 0 ? [ms] : args));
    }
    static now() {
      return ms;
    }
  }
  globalThis.Date = FrozenDate;
  try {
    return await fn();
  } finally {
    globalThis.Date = RealDate;
  }
}

// The same change the Rust test makes: the last ASCII letter or digit, so a
// JSON body stays JSON and a form stays a form, but the MAC no longer fits.
export function tamper(text) {
  const chars = [...text];
  for (let i = chars.length - 1; i >= 0; i--) {
    if (/[A-Za-z0-9]/.test(chars[i])) {
      chars[i] = chars[i] === "0" ? "1" : "0";
      return chars.join("");
    }
  }
  throw new Error(`nothing to tamper with in ${JSON.stringify(text)}`);
}

// An SDK verifier either returns false or throws to refuse; both count as a
// refusal, and only a truthy return without a throw counts as acceptance.
async function accepts(fn) {
  try {
    return Boolean(await fn());
  } catch {
    return false;
  }
}

const failures = [];
let checks = 0;

// Runs one named check; records a failure instead of stopping, so one run
// reports every check that broke.
export async function expect(file, what, wanted, fn) {
  checks += 1;
  const got = await accepts(fn);
  if (got !== wanted) {
    failures.push(`${file}: ${what}: expected ${wanted ? "accept" : "reject"}, got ${got ? "accept" : "reject"}`);
  }
  return got === wanted;
}

export function expectEqual(file, what, actual, wanted) {
  checks += 1;
  if (actual !== wanted) {
    failures.push(`${file}: ${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(wanted)}`);
    return false;
  }
  return true;
}

// Field order follows the files the Rust tests were written against.
const ORDER = [
  "provider", "sdk", "function", "verified_by", "sdk_verified", "sdk_result",
  "secret", "secrets_all", "verify_token", "timestamp", "method", "url", "params",
  "content_type", "body", "headers", "expect",
];

export function write(outDir, file, vector) {
  for (const key of Object.keys(vector)) {
    if (!ORDER.includes(key)) throw new Error(`${file}: unknown field ${key}`);
  }
  const ordered = {};
  for (const key of ORDER) if (key in vector) ordered[key] = vector[key];
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, `${file}.json`), JSON.stringify(ordered, null, 2) + "\n");
}

// Exits non-zero when any check failed, after listing them all.
export function finish(label, written) {
  if (failures.length > 0) {
    for (const f of failures) console.error(`FAIL ${f}`);
    console.error(`${label}: ${failures.length} check(s) failed`);
    process.exit(1);
  }
  console.log(`${label}: ${written} vectors written, all ${checks} checks passed`);
}
