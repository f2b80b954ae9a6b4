//! What ingest records: an event received, a duplicate, a refusal (counted
//! and budgeted in one call), a filtered event; and the per-source counts,
//! ack latencies and event types that stats reads back.

use super::Metrics;
use crate::metrics::labels::{RejectedLabels, SecretLabels, SourceLabel};
use crate::metrics::tally::Totals;
use crate::words::RejectReason;

impl Metrics {
    /// A new event of `event_type` (`store::NO_TYPE` for none) stored.
    pub fn received(&self, source: &str, event_type: &str, ack: std::time::Duration) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.received.get_or_create(&label).inc();
        Totals::add(&self.inner.totals.received);
        self.inner.by_type.count(source, event_type, false);
        self.inner
            .ack_seconds
            .get_or_create(&label)
            .observe(ack.as_secs_f64());
        self.inner.recent_acks.remember(source, ack);
    }

    /// The counter of events `secret` of `source` verifies: held by ingest,
    /// which counts on it without a lookup.
    pub fn signature_matches(
        &self,
        source: &str,
        secret: &str,
    ) -> prometheus_client::metrics::counter::Counter {
        let label = SecretLabels {
            source: source.to_owned(),
            secret: secret.to_owned(),
        };
        self.inner.signature_matches.get_or_create(&label).clone()
    }

    /// p50 and p99 of the last acks of `source`, in ms.
    pub fn recent_ack_ms(&self, source: &str) -> Option<(f64, f64)> {
        self.inner.recent_acks.percentiles(source)
    }

    /// Every (reason, count) of `source`'s rejections since start, in the
    /// order of the reasons' text.
    pub fn rejected_by_reason(&self, source: &str) -> Vec<(RejectReason, u64)> {
        let seen = self
            .inner
            .rejected_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut counts: Vec<(RejectReason, u64)> = seen
            .into_iter()
            .filter(|(s, _)| s == source)
            .map(|(s, r)| (r, self.rejected_count(&s, r)))
            .collect();
        counts.sort_by_key(|(r, _)| r.as_str());
        counts
    }

    /// A repeat of a stored event of `event_type` answered as a duplicate.
    pub fn duplicate(&self, source: &str, event_type: &str, ack: std::time::Duration) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.duplicates.get_or_create(&label).inc();
        Totals::add(&self.inner.totals.duplicates);
        self.inner.by_type.count(source, event_type, true);
        self.inner
            .ack_seconds
            .get_or_create(&label)
            .observe(ack.as_secs_f64());
        self.inner.recent_acks.remember(source, ack);
    }

    /// `source` is the configured name, or
    /// [`UNKNOWN_SOURCE`](crate::words::UNKNOWN_SOURCE). Returns whether the
    /// refusal's log line may be loud (within this minute's
    /// [`Budget`](crate::metrics::Budget)).
    #[must_use = "says at which level to log the refusal"]
    pub fn rejected(&self, source: &str, reason: RejectReason) -> bool {
        Totals::add(&self.inner.totals.rejected);
        self.inner
            .rejected_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((source.to_owned(), reason));
        self.inner
            .rejected
            .get_or_create(&RejectedLabels {
                source: source.to_owned(),
                reason,
            })
            .inc();
        self.inner.loud_rejections.take()
    }

    /// A new event the destination's filter did not take.
    pub fn filtered(&self, source: &str) {
        self.inner
            .filtered
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .inc();
    }

    /// (event type, received, duplicates) of `source` since the start.
    pub fn by_type(&self, source: &str) -> Vec<(String, u64, u64)> {
        self.inner.by_type.of(source)
    }

    pub fn received_count(&self, source: &str) -> u64 {
        self.inner
            .received
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .get()
    }

    pub fn duplicate_count(&self, source: &str) -> u64 {
        self.inner
            .duplicates
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .get()
    }

    pub fn rejected_count(&self, source: &str, reason: RejectReason) -> u64 {
        self.inner
            .rejected
            .get_or_create(&RejectedLabels {
                source: source.to_owned(),
                reason,
            })
            .get()
    }
}
