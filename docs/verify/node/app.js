// Receives hookinbox's deliveries, verifies each one with the official
// Standard Webhooks library, and does the event's work once per webhook-id
// with hookinbox's idempotency keys.
//
//   npm ci
//   HOOKINBOX_DESTINATION_SECRET=whsec_... \
//   HOOKINBOX_KEYS_URL=http://127.0.0.1:9090 HOOKINBOX_KEYS_TOKEN=... \
//   PORT=3000 node app.js
//
// The secret is the source's destination_secret (hookinbox prints a
// generated one once, and keeps it under its data_dir/secrets/). The keys
// URL is hookinbox's admin listener; the token is a [[keys.client]] token.
"use strict";
const fs = require("node:fs");
const http = require("node:http");
const { Webhook } = require("standardwebhooks");

const hook = new Webhook(process.env.HOOKINBOX_DESTINATION_SECRET);

// --- The keys helper: Node's own fetch, nothing else. ---------------------
const KEYS_URL = process.env.HOOKINBOX_KEYS_URL;
const KEYS_TOKEN = process.env.HOOKINBOX_KEYS_TOKEN;

// POST /api/keys/{key}/{action}: the status, the JSON answer, Retry-After.
async function keys(key, action, body) {
  const res = await fetch(`${KEYS_URL}/api/keys/${encodeURIComponent(key)}/${action}`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEYS_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json(), retryAfter: res.headers.get("retry-after") };
}

// Runs work() at most once per key (to completion): "done" when it was
// done before (work() is not run), "busy" when another worker holds the
// key now, else work()'s result, stored under the key. If work() throws,
// the key is released for the next delivery and the error thrown on.
async function once(key, work) {
  const claim = await keys(key, "claim", { lease: "30s" });
  if (claim.status === 200) return { state: "done", result: claim.body.result };
  if (claim.status === 409) return { state: "busy", retryAfter: claim.retryAfter };
  if (claim.status !== 201) throw new Error(`claim ${key}: ${claim.status} ${JSON.stringify(claim.body)}`);
  const token = claim.body.token;
  let result;
  try {
    result = await work();
  } catch (e) {
    await keys(key, "release", { token }).catch(() => {});
    throw e;
  }
  const done = await keys(key, "complete", { token, result: result ?? null });
  // 409 stale: the lease ran out mid-work and another worker took the key.
  if (done.status !== 200) throw new Error(`complete ${key}: ${done.status} ${JSON.stringify(done.body)}`);
  return { state: "claimed", result };
}
// ---------------------------------------------------------------------------

// The event's side effect, standing for "send the confirmation email":
// one line appended to OUTBOX_FILE.
function sendEmail(webhookId, event, type) {
  const line = `${webhookId} ${type} ${event.id ?? ""}\n`;
  fs.appendFileSync(process.env.OUTBOX_FILE || "outbox.txt", line);
  return { sent: event.id ?? null };
}

async function handle(body, headers) {
  try {
    // The raw bytes, as received: never a re-serialised JSON object.
    // Refuses a wrong signature and a timestamp more than 5 min off.
    hook.verify(body, headers);
  } catch (e) {
    return [400, {}, `not verified: ${e.message}`];
  }
  let event;
  try {
    event = JSON.parse(body.toString("utf8"));
  } catch (e) {
    return [400, {}, `not JSON: ${e.message}`];
  }
  // The same on every retry and replay of one event: the idempotency key.
  // (A business key such as `order:123:confirmation-email` works too.)
  const id = headers["webhook-id"];
  let outcome;
  try {
    outcome = await once(id, async () => sendEmail(id, event, headers["hookinbox-event-type"]));
  } catch (e) {
    return [500, {}, `failed: ${e.message}`]; // hookinbox retries
  }
  if (outcome.state === "busy") {
    // Another delivery of this event is at work: hookinbox retries later.
    return [503, outcome.retryAfter ? { "retry-after": outcome.retryAfter } : {}, "busy"];
  }
  // Test hook only: die after complete, before answering (the crash keys fix).
  if (outcome.state === "claimed" && event.id && event.id === process.env.EXAMPLE_CRASH_AFTER_COMPLETE) {
    process.exit(3);
  }
  return [204, {}, ""]; // done now, or done before: either way, taken
}

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", async () => {
      const [status, headers, text] = await handle(Buffer.concat(chunks), req.headers);
      res.writeHead(status, headers).end(text);
    });
  })
  .listen(Number(process.env.PORT || 3000), "127.0.0.1");
