"""Receives hookinbox's deliveries and verifies each one with the official
Standard Webhooks library before acting on it.

    python3 -m pip install -r requirements.txt
    HOOKINBOX_DESTINATION_SECRET=whsec_... PORT=3000 python3 app.py

The secret is the source's destination_secret (hookinbox prints a generated
one once, and keeps it under its data_dir/secrets/).
"""
import json
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

hook = Webhook(os.environ["HOOKINBOX_DESTINATION_SECRET"])
# Demo only: keep processed webhook-ids in your database, in the same
# transaction as the work the event causes.
processed = set()


class Deliveries(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            # The raw bytes, as received: never a re-serialised JSON object.
            # Refuses a wrong signature and a timestamp more than 5 min off.
            hook.verify(body, headers, json_parse=False)
        except WebhookVerificationError as e:
            self.send_response(400)
            self.end_headers()
            self.wfile.write(f"not verified: {e}".encode())
            return
        # The same on every retry and replay of one event: dedupe on it.
        webhook_id = headers["webhook-id"]
        if webhook_id not in processed:
            processed.add(webhook_id)
            event = json.loads(body)
            print(f"verified {webhook_id} {headers.get('hookinbox-event-type')} {event.get('id', '')}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Deliveries).serve_forever()
