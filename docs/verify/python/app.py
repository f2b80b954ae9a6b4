"""Receives hookinbox's deliveries, verifies each one with the official
Standard Webhooks library, and does the event's work once per webhook-id
with hookinbox's idempotency keys, through the keys helper (clients/python).

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
import math
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from hookinbox_keys import KeyBusy, Keys
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

hook = Webhook(os.environ["HOOKINBOX_DESTINATION_SECRET"])
keys = Keys()  # HOOKINBOX_KEYS_URL and HOOKINBOX_KEYS_TOKEN
sent_here = set()  # for the test hook below only


# Once per webhook-id (the first argument): done before, the stored result
# comes back and nothing runs; another delivery of it at work now, KeyBusy
# (answered 503, hookinbox retries); the work raising, the key is released.
@keys.idempotent(key=lambda webhook_id, event, event_type: webhook_id, on_busy="raise")
def send_email(webhook_id, event, event_type):
    """The event's side effect, standing for "send the confirmation email":
    one line appended to OUTBOX_FILE."""
    with open(os.environ.get("OUTBOX_FILE", "outbox.txt"), "a") as outbox:
        outbox.write(f"{webhook_id} {event_type} {event.get('id', '')}\n")
    sent_here.add(webhook_id)
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
            send_email(webhook_id, event, headers.get("hookinbox-event-type"))
        except KeyBusy as busy:
            # Another delivery of this event is at work: hookinbox retries later.
            wait = {"retry-after": str(math.ceil(busy.retry_after))} if busy.retry_after else {}
            return self.answer(503, "busy", wait)
        except Exception as e:
            return self.answer(500, f"failed: {e}")  # hookinbox retries
        # Test hook only: die after complete, before answering (the crash keys fix).
        crash = os.environ.get("EXAMPLE_CRASH_AFTER_COMPLETE")
        if crash and event.get("id") == crash and webhook_id in sent_here:
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
