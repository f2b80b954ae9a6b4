//! What delivery records: each attempt and its outcome, a delivery and its
//! latency from receipt, a dead letter (counted and budgeted in one call),
//! circuit changes; and the counts read back.

use super::Metrics;
use crate::metrics::labels::{CircuitLabels, DestinationLabel, OutcomeLabels, circuit_level};
use crate::metrics::tally::Totals;
use crate::words::{AttemptOutcome, Circuit};

impl Metrics {
    /// p50 and p99 of `source`'s last received → delivered latencies, in ms.
    pub fn recent_delivery_ms(&self, source: &str) -> Option<(f64, f64)> {
        self.inner.recent_deliveries.percentiles(source)
    }

    pub fn attempt(
        &self,
        to: &DestinationLabel,
        outcome: AttemptOutcome,
        took: std::time::Duration,
    ) {
        if outcome != AttemptOutcome::Delivered {
            Totals::add(&self.inner.totals.failed_attempts);
        }
        self.inner
            .attempts
            .get_or_create(&OutcomeLabels {
                source: to.source.clone(),
                destination: to.destination.clone(),
                outcome,
            })
            .inc();
        self.inner
            .attempt_seconds
            .get_or_create(to)
            .observe(took.as_secs_f64());
    }

    pub fn delivered(&self, to: &DestinationLabel, since_received: std::time::Duration) {
        self.inner.delivered.get_or_create(to).inc();
        Totals::add(&self.inner.totals.delivered);
        self.inner
            .received_to_delivered
            .get_or_create(to)
            .observe(since_received.as_secs_f64());
        self.inner
            .recent_deliveries
            .remember(&to.source, since_received);
    }

    pub fn set_circuit_state(&self, to: &DestinationLabel, state: Circuit) {
        self.inner
            .circuit_state
            .get_or_create(to)
            .set(circuit_level(state));
    }

    /// Returns whether the dead letter's log line may be loud (within this
    /// minute's [`Budget`](crate::metrics::Budget)).
    #[must_use = "says at which level to log the dead letter"]
    pub fn dead_lettered(&self, to: &DestinationLabel) -> bool {
        self.inner.dead_lettered.get_or_create(to).inc();
        Totals::add(&self.inner.totals.dead_lettered);
        self.inner.loud_dead_letters.take()
    }

    pub fn circuit(&self, to: &DestinationLabel, state: Circuit) {
        self.inner
            .circuit
            .get_or_create(&CircuitLabels {
                source: to.source.clone(),
                destination: to.destination.clone(),
                state,
            })
            .inc();
    }

    /// Attempts at `destination` (a source's own is named after it).
    pub fn attempt_count(&self, source: &str, destination: &str, outcome: AttemptOutcome) -> u64 {
        self.inner
            .attempts
            .get_or_create(&OutcomeLabels {
                source: source.to_owned(),
                destination: destination.to_owned(),
                outcome,
            })
            .get()
    }

    pub fn circuit_count(&self, source: &str, destination: &str, state: Circuit) -> u64 {
        self.inner
            .circuit
            .get_or_create(&CircuitLabels {
                source: source.to_owned(),
                destination: destination.to_owned(),
                state,
            })
            .get()
    }
}
