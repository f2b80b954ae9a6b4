//! What the trace exporter records: spans ended (queued), and how each
//! export to the OTLP receiver went. Counted from the SDK's batch thread.

use super::Metrics;

impl Metrics {
    /// A sampled span ended and was queued for export.
    pub fn span_ended(&self) {
        self.inner.telemetry_spans_ended.inc();
    }

    /// An export of `spans` spans: taken by the receiver, or lost.
    pub fn spans_exported(&self, spans: u64, taken: bool) {
        if taken {
            self.inner.telemetry_spans_exported.inc_by(spans);
        } else {
            self.inner.telemetry_spans_failed.inc_by(spans);
        }
    }
}
