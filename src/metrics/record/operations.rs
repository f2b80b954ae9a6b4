//! What operators and watches record: alerts posted, events replayed or
//! ignored, admin API refusals, the event streams open, payload drift and
//! reconcile passes.

use super::Metrics;
use crate::metrics::labels::{
    AlertLabels, DriftLabels, ReasonLabel, ReconcileRunLabels, ReconciledLabels, SourceLabel,
};
use crate::words::{
    AdminReason, AlertKind, AlertStatus, DriftChange, ReconcileOutcome, ReconciledHow,
};

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

    /// A reconcile pass of `source` ended with `outcome`.
    pub fn reconcile_run(&self, source: &str, outcome: ReconcileOutcome) {
        self.inner
            .reconcile_runs
            .get_or_create(&ReconcileRunLabels {
                source: source.to_owned(),
                outcome,
            })
            .inc();
    }

    /// One event `source` never received, recovered `how`.
    pub fn reconciled(&self, source: &str, how: ReconciledHow) {
        self.inner
            .reconciled
            .get_or_create(&ReconciledLabels {
                source: source.to_owned(),
                how,
            })
            .inc();
    }

    /// A reconcile pass of `source` that began at `at_s` (unix seconds)
    /// succeeded.
    pub fn reconcile_succeeded(&self, source: &str, at_s: u64) {
        self.inner
            .reconcile_last_success
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .set(i64::try_from(at_s).unwrap_or(i64::MAX));
    }

    /// Whether the provider still sends to `source`, as a pass read it.
    pub fn subscription_active(&self, source: &str, active: bool) {
        self.inner
            .subscription_active
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .set(i64::from(active));
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
