#!/usr/bin/env python3
"""A kill -9 drill, run by hand (not part of the test command):

    python3 tests/py/kill9_drill.py target/release/hookinbox 12 /tmp/drill

Rounds of load (128 threads sending signed ~1 KB events to a Standard
Webhooks source on loopback, every tenth a resend of an earlier one)
against the binary, killed with SIGKILL at a random moment 1.5-4 s in and
started again. After each restart every id answered 2xx so far must be
found by GET /api/events/{id} with its own event id, and a resend must
have been answered with the first id. At full load checkpoints run beside
the writer, so kills land with both log segments in use. Prints each
round and the total lost (0 expected); exits 1 at a second id for one
event. Every request goes to 127.0.0.1 and every round ends by itself."""
import base64, hashlib, hmac, http.client, json, os, random, socket, subprocess, sys, threading, time

BIN = sys.argv[1]
ROUNDS = int(sys.argv[2])
DIR = sys.argv[3]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
KEY = base64.b64decode(SECRET[len("whsec_"):])
TOKEN = "drill-admin-token-0123456789abcdef"

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

os.makedirs(DIR, exist_ok=True)
data = os.path.join(DIR, "data")
open(os.path.join(DIR, "token"), "w").write(TOKEN)

def start():
    ingest, admin = free_port(), free_port()
    cfg = os.path.join(DIR, "hookinbox.toml")
    open(cfg, "w").write(
        f'[server]\nlisten = "127.0.0.1:{ingest}"\nadmin_listen = "127.0.0.1:{admin}"\ndata_dir = "{data}"\n'
        f'[log]\nlevel = "warn"\n[admin]\ntoken_file = "{DIR}/token"\n'
        f'[[source]]\nname = "stripe"\nkind = "standard"\nsecret = "{SECRET}"\n')
    p = subprocess.Popen([BIN, "serve", "--config", cfg], stdout=subprocess.DEVNULL, stderr=open(os.path.join(DIR, "server.log"), "a"))
    t0 = time.time()
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", admin, timeout=2)
            c.request("GET", "/readyz"); r = c.getresponse(); r.read()
            if r.status == 200:
                return p, ingest, admin, time.time() - t0
        except OSError:
            pass
        time.sleep(0.01)

def sign(msg_id, body):
    ts = str(int(time.time()))
    mac = hmac.new(KEY, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": ts, "webhook-signature": "v1," + base64.b64encode(mac).decode(), "content-type": "application/json"}

acked = {}  # event id -> hookinbox id
lock = threading.Lock()
counter = [0]
lost_total = 0
for rnd in range(ROUNDS):
    p, ingest, admin, ready = start()
    stop = threading.Event()
    def worker():
        c = http.client.HTTPConnection("127.0.0.1", ingest, timeout=5)
        while not stop.is_set():
            with lock:
                n = counter[0]; counter[0] += 1
            # every 10th a resend of an earlier event
            eid = f"evt_{random.randrange(n)}" if n > 10 and n % 10 == 0 else f"evt_{n}"
            body = json.dumps({"id": eid, "type": "drill", "pad": "x" * 900}).encode()
            try:
                c.request("POST", "/in/stripe", body, sign(eid, body))
                r = c.getresponse(); raw = r.read()
                if r.status == 200:
                    hid = json.loads(raw)["id"]
                    with lock:
                        prev = acked.setdefault(eid, hid)
                        if prev != hid:
                            print(f"TWO IDS for {eid}: {prev} {hid}"); sys.exit(1)
            except Exception:
                c.close(); c = http.client.HTTPConnection("127.0.0.1", ingest, timeout=5)
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(128)]
    for t in threads: t.start()
    time.sleep(random.uniform(1.5, 4.0))
    p.kill(); p.wait()
    stop.set()
    for t in threads: t.join()
    p, ingest, admin, ready = start()
    c = http.client.HTTPConnection("127.0.0.1", admin, timeout=10)
    lost = 0
    for eid, hid in list(acked.items()):
        c.request("GET", f"/api/events/{hid}", headers={"authorization": f"Bearer {TOKEN}"})
        r = c.getresponse(); raw = r.read()
        if r.status != 200 or json.loads(raw)["event_id"] != eid:
            lost += 1
    lost_total += lost
    print(f"round {rnd + 1}: {len(acked)} acked so far, lost {lost}, ready {ready:.2f} s after restart", flush=True)
    p.terminate(); p.wait()
print(f"TOTAL lost {lost_total} over {ROUNDS} rounds, {len(acked)} acked event ids")
