// hookinbox's idempotency keys from Node (18+, built-ins only: fetch, and
// node:http for a Unix domain socket): run a function once per key.
//
//   import { Keys } from 'hookinbox-keys';
//   const keys = new Keys({ url: 'http://127.0.0.1:8081' }); // token: $HOOKINBOX_KEYS_TOKEN
//   const charge = keys.idempotent(async (event, { signal, token }) => pay(event), { key: 'json:/id' });
//
// A call claims the key. Claimed: the work runs with an AbortSignal that is
// aborted if the lease is lost, a heartbeat extends the lease at half its
// length, and the work's result (as JSON) completes the key. Done before:
// the stored result is returned without running. Busy: wait (Retry-After)
// or throw KeyBusy. A completion refused as stale throws StaleFence: the
// side effect may have run twice. hookinbox unreachable: fail closed
// (HookinboxUnavailable) unless failOpen was asked for.

import http from 'node:http';

export class KeysError extends Error {}
export class HookinboxUnavailable extends KeysError {}
export class KeyBusy extends KeysError {
  constructor(key, retryAfter) {
    super(`key ${JSON.stringify(key)} is held by another worker`);
    this.key = key;
    this.retryAfter = retryAfter;
  }
}
export class StaleFence extends KeysError {
  constructor(key, token) {
    super(`key ${JSON.stringify(key)}: the lease of token ${token} was lost and the key claimed again; this worker's work may have run twice`);
    this.key = key;
    this.token = token;
  }
}

const UNITS = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

/** "30s", "5m", "7d", "500ms" or a number of seconds, in seconds. */
export function seconds(value) {
  if (typeof value === 'number') return value;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(String(value).trim());
  if (!m) throw new TypeError(`${JSON.stringify(value)} is not a duration: use e.g. '30s', '5m', '7d'`);
  return Number(m[1]) * UNITS[m[2]];
}

const wire = (s) => `${Math.max(1, Math.round(s * 1000))}ms`;

function pointer(doc, ptr) {
  if (ptr === '') return doc;
  if (!ptr.startsWith('/')) throw new TypeError(`JSON pointer ${JSON.stringify(ptr)} must start with '/'`);
  let here = doc;
  for (const raw of ptr.slice(1).split('/')) {
    const token = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (here === null || typeof here !== 'object' || !(token in here)) throw new KeysError(`nothing at ${ptr}`);
    here = here[token];
  }
  return here;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Keys {
  constructor({ url, token, socketPath, timeoutMs = 10_000 } = {}) {
    this.url = (url || process.env.HOOKINBOX_KEYS_URL || 'http://127.0.0.1:8081').replace(/\/$/, '');
    this.socketPath = socketPath ?? (process.env.HOOKINBOX_KEYS_SOCKET || null);
    // Kept-alive connections over the socket, as fetch keeps them over TCP.
    this.agent = this.socketPath ? new http.Agent({ keepAlive: true }) : null;
    this.token = token ?? process.env.HOOKINBOX_KEYS_TOKEN;
    if (!this.token) throw new KeysError('no token: pass token or set HOOKINBOX_KEYS_TOKEN (a [[keys.client]] token)');
    this.timeoutMs = timeoutMs;
  }

  async call(method, key, action, body) {
    const path = `${this.url}/api/keys/${encodeURIComponent(key)}${action ? `/${action}` : ''}`;
    if (this.socketPath) return this.callUnix(method, new URL(path).pathname, body);
    let res;
    try {
      res = await fetch(path, {
        method,
        headers: { authorization: `Bearer ${this.token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new HookinboxUnavailable(`hookinbox cannot be reached: ${e.message}`, { cause: e });
    }
    return this.answer(res.status, await res.text(), res.headers.get('retry-after'));
  }

  /** The same call over the Unix domain socket `socketPath` (fetch has no such option; node:http has). */
  callUnix(method, path, body) {
    const data = body ? JSON.stringify(body) : null;
    return new Promise((resolve, reject) => {
      const req = http.request({
        socketPath: this.socketPath,
        path,
        method,
        agent: this.agent,
        timeout: this.timeoutMs,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
        },
      }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          try {
            resolve(this.answer(res.statusCode, Buffer.concat(chunks).toString('utf8'), res.headers['retry-after'] ?? null));
          } catch (e) {
            reject(e);
          }
        });
        res.on('error', (e) => reject(new HookinboxUnavailable(`hookinbox cannot be reached: ${e.message}`, { cause: e })));
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (e) => reject(new HookinboxUnavailable(`hookinbox cannot be reached: ${e.message}`, { cause: e })));
      req.end(data ?? undefined);
    });
  }

  answer(status, text, retry) {
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch { parsed = text; }
    if (status >= 500) throw new HookinboxUnavailable(`hookinbox answered ${status}: ${text}`);
    if (status === 401 || status === 403) throw new KeysError(`hookinbox refused the token (${status}): ${text}`);
    return { status, body: parsed, retryAfter: retry ? Number(retry) : null };
  }

  /** The key's state, or null when it has none. */
  async get(key) {
    const a = await this.call('GET', key, '', null);
    if (a.status === 404) return null;
    if (a.status !== 200) throw new KeysError(`get ${key}: ${a.status}`);
    return a.body;
  }

  /** One claim: a Claim whose state is "claimed", "done" or "busy". */
  async claim(key, { lease = '30s', ttl } = {}) {
    const body = { lease: wire(seconds(lease)) };
    if (ttl !== undefined) body.ttl = wire(seconds(ttl));
    const a = await this.call('POST', key, 'claim', body);
    if (a.status === 201) return new Claim(this, key, 'claimed', { token: a.body.token, lease: seconds(lease) });
    if (a.status === 200) return new Claim(this, key, 'done', { result: a.body.result });
    if (a.status === 409) return new Claim(this, key, 'busy', { retryAfter: a.retryAfter });
    throw new KeysError(`claim ${key}: ${a.status} ${JSON.stringify(a.body)}`);
  }

  /**
   * `work(...args, { signal, token })` once per key. Options: key (a
   * function of the arguments, "json:/pointer" into the first, or a fixed
   * string), lease, ttl, onBusy ("wait" | "raise"), waitTimeout, onError
   * ("release" | "keep"), failOpen, heartbeat.
   */
  idempotent(work, {
    key, lease = '30s', ttl, onBusy = 'wait', waitTimeout = '60s', onError = 'release',
    failOpen = false, heartbeat = true,
  } = {}) {
    if (!['wait', 'raise'].includes(onBusy)) throw new TypeError("onBusy must be 'wait' or 'raise'");
    if (!['release', 'keep'].includes(onError)) throw new TypeError("onError must be 'release' or 'keep'");
    const keyOf = (args) => {
      if (typeof key === 'function') return String(key(...args));
      if (typeof key === 'string' && key.startsWith('json:')) {
        let event = args[0];
        if (typeof event === 'string' || event instanceof Uint8Array) event = JSON.parse(String(event instanceof Uint8Array ? Buffer.from(event) : event));
        const v = pointer(event, key.slice(5));
        return typeof v === 'string' ? v : JSON.stringify(v);
      }
      if (typeof key === 'string') return key;
      throw new TypeError('key is required: a function of the arguments, "json:/pointer", or a string');
    };
    const deadline = seconds(waitTimeout) * 1000;
    return async (...args) => {
      const k = keyOf(args);
      const started = Date.now();
      for (;;) {
        let c;
        try {
          c = await this.claim(k, { lease, ttl });
        } catch (e) {
          if (failOpen && e instanceof HookinboxUnavailable) {
            return work(...args, { signal: new AbortController().signal, token: null });
          }
          throw e;
        }
        if (c.state === 'done') return c.result;
        if (c.state === 'busy') {
          const waited = Date.now() - started;
          if (onBusy === 'raise' || waited >= deadline) throw new KeyBusy(k, c.retryAfter);
          const pause = Math.min((c.retryAfter ?? 0.5), 5) * 1000 * (0.5 + Math.random());
          await sleep(Math.min(pause, Math.max(0, deadline - waited)));
          continue;
        }
        return c.run((ctx) => work(...args, ctx), { onError, heartbeat });
      }
    };
  }
}

export class Claim {
  constructor(keys, key, state, { token = null, lease = 0, result = null, retryAfter = null } = {}) {
    Object.assign(this, { keys, key, state, token, lease, result, retryAfter });
    this.controller = new AbortController();
  }

  get signal() { return this.controller.signal; }

  async extend(lease) {
    const s = lease === undefined ? this.lease : seconds(lease);
    const a = await this.keys.call('POST', this.key, 'extend', { token: this.token, lease: wire(s) });
    if (a.status === 409) {
      this.controller.abort(new StaleFence(this.key, this.token));
      throw new StaleFence(this.key, this.token);
    }
    if (a.status !== 200) throw new KeysError(`extend ${this.key}: ${a.status}`);
  }

  async complete(result = null) {
    const value = JSON.parse(JSON.stringify(result ?? null));
    const a = await this.keys.call('POST', this.key, 'complete', { token: this.token, result: value });
    if (a.status === 409) throw new StaleFence(this.key, this.token);
    if (a.status !== 200) throw new KeysError(`complete ${this.key}: ${a.status}`);
    this.state = 'done';
    this.result = value;
  }

  async release() {
    const a = await this.keys.call('POST', this.key, 'release', { token: this.token });
    if (![200, 404, 409].includes(a.status)) throw new KeysError(`release ${this.key}: ${a.status}`);
  }

  /** Runs `work({ signal, token })` under this claim: heartbeat, complete or release. */
  async run(work, { onError = 'release', heartbeat = true } = {}) {
    let timer = null;
    if (heartbeat) {
      const beat = async () => {
        try {
          await this.extend();
        } catch (e) {
          if (e instanceof StaleFence) return; // the signal is aborted
        }
        if (!this.controller.signal.aborted && timer !== null) timer = setTimeout(beat, this.lease * 500);
      };
      timer = setTimeout(beat, this.lease * 500);
    }
    let result;
    try {
      result = await work({ signal: this.signal, token: this.token });
    } catch (e) {
      clearTimeout(timer); timer = null;
      if (onError === 'release') await this.release().catch(() => {});
      throw e;
    }
    clearTimeout(timer); timer = null;
    await this.complete(result);
    return this.result;
  }
}
