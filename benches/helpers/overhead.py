"""The Python keys helper's cost per call over raw HTTP (run by
`cargo bench --bench keys -- --helpers`, which starts the server):

    python overhead.py PAIRS ROUNDS CLIENTS SECONDS   (HOOKINBOX_KEYS_URL, HOOKINBOX_KEYS_TOKEN set)

Three ways to do one key's claim + complete, alternated round by round on
fresh keys: `raw` (http.client on a kept-alive connection per client, the
two POSTs by hand), `helper` (a call of a function decorated with
`@keys.idempotent`: the claim, a heartbeat thread started and stopped, the
completion with the return value as JSON) and `helper-no-heartbeat`
(`heartbeat=False`). CLIENTS threads call at once. Prints one JSON line per
round: {"mode", "clients", "pairs", "seconds"}. Each round stops after PAIRS
pairs per client or SECONDS, whichever comes first.
"""

import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

from hookinbox_keys import Keys

URL = os.environ["HOOKINBOX_KEYS_URL"]
TOKEN = os.environ["HOOKINBOX_KEYS_TOKEN"]
PAIRS, ROUNDS, CLIENTS, SECONDS = (int(a) for a in sys.argv[1:5])
keys = Keys(URL, TOKEN)


def raw_client(prefix: str, stop: float, done: list) -> None:
    netloc = urllib.parse.urlsplit(URL).netloc
    conn = http.client.HTTPConnection(netloc)
    headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}

    def post(path: str, body: dict) -> dict:
        conn.request("POST", path, body=json.dumps(body), headers=headers)
        res = conn.getresponse()
        answer = json.loads(res.read())
        assert res.status in (200, 201), (res.status, answer)
        return answer

    n = 0
    while n < PAIRS and time.monotonic() < stop:
        key = f"{prefix}-{n}"
        claim = post(f"/api/keys/{key}/claim", {"lease": "30s"})
        post(f"/api/keys/{key}/complete", {"token": claim["token"], "result": {"n": n}})
        n += 1
    done.append(n)


def helper_client(prefix: str, stop: float, done: list, heartbeat: bool) -> None:
    @keys.idempotent(key=lambda n: f"{prefix}-{n}", lease="30s", heartbeat=heartbeat)
    def work(n: int) -> dict:
        return {"n": n}

    n = 0
    while n < PAIRS and time.monotonic() < stop:
        assert work(n) == {"n": n}
        n += 1
    done.append(n)


def round_of(mode: str, number: int) -> None:
    done: list = []
    stop = time.monotonic() + SECONDS
    threads = []
    for c in range(CLIENTS):
        prefix = f"py-{mode}-{CLIENTS}-{number}-{c}-{os.getpid()}"
        if mode == "raw":
            target, extra = raw_client, ()
        else:
            target, extra = helper_client, (mode == "helper",)
        threads.append(threading.Thread(target=target, args=(prefix, stop, done, *extra)))
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    print(json.dumps({"mode": mode, "clients": CLIENTS, "pairs": sum(done), "seconds": seconds}), flush=True)


for number in range(ROUNDS):
    for mode in ("raw", "helper", "helper-no-heartbeat"):
        round_of(mode, number)
