"""Receives hookinbox's deliveries, verifies each one with the official
Standard Webhooks library, and does the event's work once per webhook-id
with hookinbox's idempotency keys.

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
    HOOKINBOX_DESTINATION_SECRET=whsec_... \\
    HOOKINBOX_KEYS_URL=http://127.0.0.1:9090 HOOKINBOX_KEYS_TOKEN=... \\
    PORT=3000 .venv/bin/python app.py

(A venv: Debian's own Python refuses pip install outside one, PEP 668.)

The secret is the source's destination_secret (hookinbox prints a generated
one once, and keeps it under its data_dir/secrets/). The keys URL is
hookinbox's admin listener; the token is a [[keys.client]] token.
"""
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

hook = Webhook(os.environ["HOOKINBOX_DESTINATION_SECRET"])

# --- The keys helper: urllib only, nothing else. ------------------------------
KEYS_URL = os.environ.get("HOOKINBOX_KEYS_URL", "")
KEYS_TOKEN = os.environ.get("HOOKINBOX_KEYS_TOKEN", "")


def keys(key, action, body):
    """POST /api/keys/{key}/{action}: the status, the JSON answer, Retry-After."""
    req = urllib.request.Request(
        f"{KEYS_URL}/api/keys/{urllib.parse.quote(key, safe='')}/{action}",
        data=json.dumps(body).encode(),
        headers={"authorization": f"Bearer {KEYS_TOKEN}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, json.load(res), res.headers.get("retry-after")
    except urllib.error.HTTPError as res:  # 4xx and 5xx answers
        return res.code, json.load(res), res.headers.get("retry-after")


def once(key, work):
    """Runs work() at most once per key (to completion): ("done", result) when
    it was done before (work() is not run), ("busy", retry_after) when another
    worker holds the key now, else ("claimed", work()'s result), stored under
    the key. If work() raises, the key is released and the error raised on."""
    status, claim, retry_after = keys(key, "claim", {"lease": "30s"})
    if status == 200:
        return "done", claim["result"]
    if status == 409:
        return "busy", retry_after
    if status != 201:
        raise RuntimeError(f"claim {key}: {status} {claim}")
    token = claim["token"]
    try:
        result = work()
    except Exception:
        try:
            keys(key, "release", {"token": token})
        except Exception:
            pass  # the lease runs out instead
        raise
    status, done, _ = keys(key, "complete", {"token": token, "result": result})
    # 409 stale: the lease ran out mid-work and another worker took the key.
    if status != 200:
        raise RuntimeError(f"complete {key}: {status} {done}")
    return "claimed", result
# ------------------------------------------------------------------------------


def send_email(webhook_id, event, event_type):
    """The event's side effect, standing for "send the confirmation email":
    one line appended to OUTBOX_FILE."""
    with open(os.environ.get("OUTBOX_FILE", "outbox.txt"), "a") as outbox:
        outbox.write(f"{webhook_id} {event_type} {event.get('id', '')}\n")
    return {"sent": event.get("id")}


class Deliveries(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            # The raw bytes, as received: never a re-serialised JSON object.
            # Refuses a wrong signature and a timestamp more than 5 min off.
            hook.verify(body, headers, json_parse=False)
        except WebhookVerificationError as e:
            return self.answer(400, f"not verified: {e}")
        try:
            event = json.loads(body)
        except ValueError as e:
            return self.answer(400, f"not JSON: {e}")
        # The same on every retry and replay of one event: the idempotency key.
        # (A business key such as `order:123:confirmation-email` works too.)
        webhook_id = headers["webhook-id"]
        try:
            state, value = once(
                webhook_id,
                lambda: send_email(webhook_id, event, headers.get("hookinbox-event-type")),
            )
        except Exception as e:
            return self.answer(500, f"failed: {e}")  # hookinbox retries
        if state == "busy":
            # Another delivery of this event is at work: hookinbox retries later.
            return self.answer(503, "busy", {"retry-after": value} if value else {})
        # Test hook only: die after complete, before answering (the crash keys fix).
        if state == "claimed" and event.get("id") and event.get("id") == os.environ.get("EXAMPLE_CRASH_AFTER_COMPLETE"):
            os._exit(3)
        self.answer(204, "")  # done now, or done before: either way, taken

    def answer(self, status, text, headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(text.encode())

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Deliveries).serve_forever()
