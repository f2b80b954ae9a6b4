"""Receives hookinbox's deliveries, verifies each one with the official
Standard Webhooks library, and continues hookinbox's trace with the
official OpenTelemetry SDK: the app's span is a child of the delivery
attempt that carried it (its `traceparent` header), so one trace runs from
the provider's request to the app's work.

    python3 -m venv .venv && .venv/bin/pip install -r requirements.txt \\
        opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
    HOOKINBOX_DESTINATION_SECRET=whsec_... \\
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=shop-app \\
    PORT=3000 .venv/bin/python traced.py

hookinbox exports to the same collector with `[telemetry]`. The
`traceparent` header is outside what the signature covers: verify first,
then trust it as any incoming context.
"""
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

# OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_SERVICE_NAME configure both.
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("shop-app")

hook = Webhook(os.environ["HOOKINBOX_DESTINATION_SECRET"])


class Deliveries(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            hook.verify(body, headers, json_parse=False)
        except WebhookVerificationError as e:
            return self.answer(400, f"not verified: {e}")
        # The attempt's context: this span joins the event's trace.
        context = propagate.extract(headers)
        with tracer.start_as_current_span(
            "handle webhook", context=context, kind=trace.SpanKind.SERVER
        ) as span:
            event = json.loads(body)
            span.set_attribute("webhook.id", headers["webhook-id"])
            span.set_attribute("order.id", str(event.get("id", "")))
            # ... the event's work, under its span ...
        self.answer(204, "")

    def answer(self, status, text):
        self.send_response(status)
        self.end_headers()
        self.wfile.write(text.encode())

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Deliveries)
    try:
        server.serve_forever()
    finally:
        provider.shutdown()
