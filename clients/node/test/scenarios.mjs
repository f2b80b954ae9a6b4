// The Node keys helper against a real hookinbox (run by the Rust test
// tests/it/key_clients.rs, which starts the server and names a scenario):
//
//   node scenarios.mjs SCENARIO   (HOOKINBOX_KEYS_URL, HOOKINBOX_KEYS_TOKEN set)
//
// Each scenario asserts what it promises and prints "ok SCENARIO".

import assert from 'node:assert/strict';
import { HookinboxUnavailable, KeyBusy, Keys, StaleFence } from '../index.js';

const keys = new Keys();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const scenarios = {
  // 20 callers with one key: the body runs once, all 20 get its result.
  async concurrent() {
    let runs = 0;
    const charge = keys.idempotent(async (event) => {
      runs += 1;
      await sleep(300);
      return { charge: 'ch_1', runs };
    }, { key: 'json:/id', lease: '5s' });
    const results = await Promise.all(Array.from({ length: 20 }, () => charge({ id: 'evt_node_concurrent' })));
    assert.equal(runs, 1);
    assert.deepEqual(results, Array(20).fill({ charge: 'ch_1', runs: 1 }));
  },

  // A worker past its lease without a heartbeat: its signal is not what
  // saves it; its completion throws StaleFence, the second's result stays.
  async stale() {
    const tokens = {};
    const slow = keys.idempotent(async ({ token }) => {
      tokens.first = token;
      await sleep(2500);
      return 'first';
    }, { key: 'k-node-stale', lease: '1s', heartbeat: false });
    const fast = keys.idempotent(async ({ token }) => {
      tokens.second = token;
      return 'second';
    }, { key: 'k-node-stale', lease: '1s', onBusy: 'raise' });
    const first = slow().then(() => null, (e) => e);
    await sleep(1600);
    assert.equal(await fast(), 'second');
    assert.ok((await first) instanceof StaleFence);
    assert.ok(tokens.second > tokens.first, JSON.stringify(tokens));
    assert.equal((await keys.get('k-node-stale')).result, 'second');
  },

  // Work of three leases under one token, its signal never aborted.
  async heartbeat() {
    const long = keys.idempotent(async ({ signal, token }) => {
      await sleep(3200);
      return { aborted: signal.aborted, token };
    }, { key: 'k-node-heartbeat', lease: '1s' });
    const result = await long();
    assert.equal(result.aborted, false);
    const state = await keys.get('k-node-heartbeat');
    assert.equal(state.state, 'done');
    assert.equal(state.claims, 1);
  },

  // An exception releases; the next call runs the body again.
  async exception() {
    let calls = 0;
    const flaky = keys.idempotent(async () => {
      calls += 1;
      if (calls === 1) throw new Error('the first try fails');
      return 'second try';
    }, { key: 'k-node-exception' });
    await assert.rejects(flaky(), /the first try fails/);
    assert.equal(await flaky(), 'second try');
    assert.equal(await flaky(), 'second try');
    assert.equal(calls, 2);
  },

  // The heartbeat finds the lease lost: the work's signal is aborted.
  async aborted() {
    let seen = null;
    const c = await keys.claim('k-node-aborted', { lease: '1s' });
    assert.equal(c.state, 'claimed');
    // Another claims the key once this lease has run out.
    const work = c.run(async ({ signal }) => {
      await sleep(1400);
      await keys.claim('k-node-aborted', { lease: '30s' });
      await new Promise((resolve) => {
        if (signal.aborted) resolve();
        signal.addEventListener('abort', resolve);
        setTimeout(resolve, 3000);
      });
      seen = signal.aborted;
      return 'late';
    }, { heartbeat: false });
    // Without a heartbeat nothing notices; one extend by hand does.
    await sleep(1600);
    await c.extend().catch(() => {});
    await assert.rejects(work, StaleFence);
    assert.equal(seen, true);
  },

  async busy() {
    const c = await keys.claim('k-node-busy', { lease: '10s' });
    const work = keys.idempotent(async () => assert.fail('must not run'), { key: 'k-node-busy', onBusy: 'raise' });
    await assert.rejects(work(), KeyBusy);
    await c.release();
  },

  async unreachable() {
    const down = new Keys({ url: 'http://127.0.0.1:9', token: 'unused', timeoutMs: 2000 });
    const closed = down.idempotent(async () => assert.fail('must not run'), { key: 'k-down' });
    await assert.rejects(closed(), HookinboxUnavailable);
    const opened = down.idempotent(async () => 'ran without a key', { key: 'k-down', failOpen: true });
    assert.equal(await opened(), 'ran without a key');
  },

  // The calls go over hookinbox's admin socket, named by
  // HOOKINBOX_KEYS_SOCKET (the URL names a port nobody listens on, so
  // nothing goes over TCP); `socketPath` names it the same way.
  async unix_socket() {
    const local = new Keys({ url: 'http://127.0.0.1:9' });
    assert.equal(local.socketPath, process.env.HOOKINBOX_KEYS_SOCKET);
    const once = local.idempotent(async () => ({ over: 'unix' }), { key: 'k-node-unix' });
    assert.deepEqual(await once(), { over: 'unix' });
    assert.deepEqual(await once(), { over: 'unix' });
    const named = new Keys({ url: 'http://127.0.0.1:9', socketPath: local.socketPath });
    assert.equal((await named.get('k-node-unix')).state, 'done');
    local.agent.destroy();
    named.agent.destroy();
  },
};

const name = process.argv[2];
await scenarios[name]();
console.log(`ok ${name}`);
