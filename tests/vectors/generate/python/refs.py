"""Vectors for providers with no official SDK that verifies their webhooks:
signed with plain hmac from the formula each provider documents (named in the
`function` field). Nothing independent checks these, so they are `_ref`.

Usage: python python/refs.py OUT_DIR
"""

import hashlib
import hmac
import json
import secrets
import sys
import time

from common import Writer, finish, random_alnum, random_hex

out = Writer(sys.argv[1] if len(sys.argv) > 1 else sys.exit("usage: python python/refs.py OUT_DIR"))


def hmac_hex(key, text):
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()


def compact(value):
    """JSON as providers send it: no spaces, non-ASCII left as UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def rfc3339_nanos(ns):
    """Twitch's timestamps carry nanoseconds: 2023-11-14T22:13:20.123456789Z."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{fraction:09d}Z"


# ---- GitLab ---------------------------------------------------------------
token = random_alnum(32)
out.write("gitlab_ref", {
    "provider": "gitlab",
    "sdk": None,
    "function": "no signature: X-Gitlab-Token carries the configured secret verbatim (compare in constant time); docs.gitlab.com/ee/user/project/integrations/webhooks.html#validate-payloads-by-using-a-secret-token",
    "secret": token,
    "timestamp": None,
    "method": "POST",
    "content_type": "application/json",
    "body": '{"object_kind":"push","ref":"refs/heads/main","message":"café"}',
    "headers": {
        "X-Gitlab-Token": token,
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e",
        "X-Gitlab-Webhook-UUID": "02affd2d-2cba-4033-917d-ec22d5dc4b38",
        "Idempotency-Key": "f5e5f430-f57b-4e6e-9fac-d9128cd7232f",
        "X-Gitlab-Instance": "https://gitlab.example",
    },
})

# ---- Twitch EventSub ----------------------------------------------------------
TWITCH_FUNCTION = (
    "hmac only (Twitch publishes no official EventSub SDK): "
    "sha256= + hex(HMAC_SHA256(secret, message_id + message_timestamp + body)), "
    "formula from dev.twitch.tv/docs/eventsub/handling-webhook-events (Verifying the event message)"
)
SUBSCRIPTION_ID = "f1c2a387-aebb-43f2-8c86-b6a2e4c8b3a1"


# Bodies keep fixed event times (the same 2023 instant as the other providers'
# bodies), so a regeneration changes only secrets, signed timestamps and
# signatures; the time Twitch signs sits in its headers. Meta signs none.
CREATED_AT = "2023-11-14T22:13:19.634234626Z"
MESSAGE_TIME = "1700000000"


def twitch(file, message_type, message_id, body, expect=None):
    # EventSub secrets are 10-100 ASCII characters chosen by the subscriber.
    secret = random_alnum(32)
    stamp = rfc3339_nanos(time.time_ns())
    vector = {
        "provider": "twitch",
        "sdk": None,
        "function": TWITCH_FUNCTION,
        "secret": secret,
        "timestamp": stamp,
        "method": "POST",
        "content_type": "application/json",
        "body": body,
        "headers": {
            "Twitch-Eventsub-Message-Id": message_id,
            "Twitch-Eventsub-Message-Timestamp": stamp,
            "Twitch-Eventsub-Message-Type": message_type,
            "Twitch-Eventsub-Message-Retry": "0",
            "Twitch-Eventsub-Message-Signature": "sha256=" + hmac_hex(secret, message_id + stamp + body),
            "Twitch-Eventsub-Subscription-Type": "channel.follow",
            "Twitch-Eventsub-Subscription-Version": "2",
        },
    }
    if expect is not None:
        vector["expect"] = expect
    out.write(file, vector)


def subscription(status):
    # The non-ASCII character sits in an extra condition field, where no
    # receiver looks, so the subscription itself stays realistic.
    return {
        "id": SUBSCRIPTION_ID,
        "status": status,
        "type": "channel.follow",
        "version": "2",
        "cost": 1,
        "condition": {"broadcaster_user_id": "12826", "moderator_user_id": "12826", "label": "café"},
        "transport": {"method": "webhook", "callback": "https://hookinbox.example/in/twitch"},
        "created_at": CREATED_AT,
    }


twitch(
    "twitch_ref", "notification", "befa7b53-d79d-478f-86b9-120f112b044e",
    '{"subscription":{"id":"f1c2a387","type":"channel.follow","version":"2"},"event":{"user_name":"café"}}',
)

CHALLENGE = "pogchamp-kappa-360noscope-vohiyo"
twitch(
    "twitch_verification_ref", "webhook_callback_verification", "e76c6bd4-55c9-4987-8304-da1588d8988b",
    compact({"challenge": CHALLENGE, "subscription": subscription("webhook_callback_verification_pending")}),
    expect={"challenge": CHALLENGE},
)

twitch(
    "twitch_revocation_ref", "revocation", "84c1e79a-2a4b-4c13-ba0b-4312293e9308",
    compact({"subscription": subscription("authorization_revoked")}),
)

# ---- Meta / WhatsApp Cloud API ------------------------------------------------------
# One app: the POST is signed with the app secret, the GET subscription check
# carries the verify token chosen when the webhook was set up.
app_secret = random_hex(16)
whatsapp = compact({
    "object": "whatsapp_business_account",
    "entry": [{
        "id": "102290129340398",
        "changes": [{
            "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
                "messages": [{
                    "from": "16505551234",
                    "id": "wamid.HBgLMTY1MDU1NTEyMzQVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=",
                    "timestamp": MESSAGE_TIME,
                    "text": {"body": "Olá café"},
                    "type": "text",
                }],
            },
            "field": "messages",
        }],
    }],
})
out.write("meta_ref", {
    "provider": "meta",
    "sdk": None,
    "function": (
        "hmac only (no official Meta SDK verifies webhooks): X-Hub-Signature-256: sha256= + "
        "hex(HMAC_SHA256(app_secret, raw body)), formula from "
        "developers.facebook.com/docs/graph-api/webhooks/getting-started (Validating Payloads); Meta signs no timestamp"
    ),
    "secret": app_secret,
    "timestamp": None,
    "method": "POST",
    "content_type": "application/json",
    "body": whatsapp,
    "headers": {"X-Hub-Signature-256": "sha256=" + hmac_hex(app_secret, whatsapp)},
})

verify_token = secrets.token_urlsafe(24)
challenge = "1158201444"
out.write("meta_verify_ref", {
    "provider": "meta",
    "sdk": None,
    "function": (
        "no signature: the GET subscription check; answer hub.challenge verbatim when hub.mode=subscribe "
        "and hub.verify_token equals the configured token, as documented at "
        "developers.facebook.com/docs/graph-api/webhooks/getting-started (Verification Requests)"
    ),
    "secret": app_secret,
    "verify_token": verify_token,
    "timestamp": None,
    "method": "GET",
    "url": f"https://hookinbox.example/in/whatsapp?hub.mode=subscribe&hub.verify_token={verify_token}&hub.challenge={challenge}",
    "content_type": None,
    "body": "",
    "headers": {},
    "expect": {"challenge": challenge},
})

finish("refs", out)
