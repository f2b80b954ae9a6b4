// The Node keys helper's cost per call over raw HTTP (run by
// `cargo bench --bench keys -- --helpers`, which starts the server):
//
//   node overhead.mjs PAIRS ROUNDS CLIENTS SECONDS   (HOOKINBOX_KEYS_URL, HOOKINBOX_KEYS_TOKEN set)
//
// Three ways to do one key's claim + complete, alternated round by round on
// fresh keys: `raw` (the two POSTs with Node's fetch, kept-alive), `helper`
// (a call of a function wrapped by `keys.idempotent`: the claim, the
// heartbeat's timer set and cleared, the completion with the result as
// JSON) and `helper-no-heartbeat` (`heartbeat: false`). CLIENTS loops call
// at once. Prints one JSON line per round: {mode, clients, pairs, seconds}.
// Each round stops after PAIRS pairs per client or SECONDS, whichever first.
import { Keys } from '../../clients/node/index.js';

const URL = process.env.HOOKINBOX_KEYS_URL.replace(/\/$/, '');
const TOKEN = process.env.HOOKINBOX_KEYS_TOKEN;
const [PAIRS, ROUNDS, CLIENTS, SECONDS] = process.argv.slice(2, 6).map(Number);
const keys = new Keys({ url: URL, token: TOKEN });

async function post(path, body) {
  const res = await fetch(`${URL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = await res.json();
  if (res.status !== 200 && res.status !== 201) throw new Error(`${res.status} ${JSON.stringify(answer)}`);
  return answer;
}

async function rawClient(prefix, stop) {
  let n = 0;
  while (n < PAIRS && performance.now() < stop) {
    const key = `${prefix}-${n}`;
    const claim = await post(`/api/keys/${key}/claim`, { lease: '30s' });
    await post(`/api/keys/${key}/complete`, { token: claim.token, result: { n } });
    n += 1;
  }
  return n;
}

async function helperClient(prefix, stop, heartbeat) {
  const work = keys.idempotent(async (n) => ({ n }), { key: (n) => `${prefix}-${n}`, lease: '30s', heartbeat });
  let n = 0;
  while (n < PAIRS && performance.now() < stop) {
    const result = await work(n);
    if (result.n !== n) throw new Error(`result ${JSON.stringify(result)} for ${n}`);
    n += 1;
  }
  return n;
}

for (let number = 0; number < ROUNDS; number += 1) {
  for (const mode of ['raw', 'helper', 'helper-no-heartbeat']) {
    const stop = performance.now() + SECONDS * 1000;
    const started = performance.now();
    const clients = [];
    for (let c = 0; c < CLIENTS; c += 1) {
      const prefix = `js-${mode}-${CLIENTS}-${number}-${c}-${process.pid}`;
      clients.push(mode === 'raw' ? rawClient(prefix, stop) : helperClient(prefix, stop, mode === 'helper'));
    }
    const done = await Promise.all(clients);
    const seconds = (performance.now() - started) / 1000;
    console.log(JSON.stringify({ mode, clients: CLIENTS, pairs: done.reduce((a, b) => a + b, 0), seconds }));
  }
}
