"""Verifies one delivery with the official Standard Webhooks library.

stdin: {"secret": "whsec_...", "headers": {...}, "body_b64": "..."}
exit 0 and prints "verified" if the signature verifies, else exit 1 with the
library's error.
"""
import base64
import json
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

request = json.load(sys.stdin)
body = base64.b64decode(request["body_b64"])
try:
    Webhook(request["secret"]).verify(body, request["headers"], json_parse=False)
except WebhookVerificationError as e:
    print(f"not verified: {e}")
    sys.exit(1)
print("verified")
