//! What operators and watches record: alerts posted, events replayed or
//! ignored, admin API refusals, the event streams open, and payload drift.

use super::Metrics;
use crate::metrics::labels::{AlertLabels, DriftLabels, ReasonLabel, SourceLabel};
use crate::words::{AdminReason, AlertKind, AlertStatus, DriftChange};

impl Metrics {
    pub fn alert(&self, kind: AlertKind, status: AlertStatus, sent: bool) {
        self.inner
            .alerts
            .get_or_create(&AlertLabels { kind, status, sent })
            .inc();
    }

    pub fn replayed(&self, source: &str) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.replayed.get_or_create(&label).inc();
    }

    pub fn ignored(&self, source: &str) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.ignored.get_or_create(&label).inc();
    }

    pub fn admin_rejected(&self, reason: AdminReason) {
        self.inner
            .admin_rejected
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    pub fn admin_rejected_count(&self, reason: AdminReason) -> u64 {
        self.inner
            .admin_rejected
            .get_or_create(&ReasonLabel { reason })
            .get()
    }

    /// One departure of a `source` payload from its shape.
    pub fn drift(&self, source: &str, change: DriftChange) {
        self.inner
            .payload_drift
            .get_or_create(&DriftLabels {
                source: source.to_owned(),
                change,
            })
            .inc();
    }

    /// A new `source` event the drift watch did not learn.
    pub fn drift_skipped(&self, source: &str) {
        self.inner
            .drift_skipped
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .inc();
    }

    /// One more event stream open, until the guard is dropped.
    pub fn event_stream_opened(&self) -> StreamOpen {
        self.inner.event_streams.inc();
        StreamOpen(self.clone())
    }
}

/// An open event stream, counted in `hookinbox_event_streams` while it lives.
pub struct StreamOpen(Metrics);

impl Drop for StreamOpen {
    fn drop(&mut self) {
        self.0.inner.event_streams.dec();
    }
}
