//! One attempt of one event, from lease to recorded outcome (`Attempt`),
//! on a task of its own; how it ended (`Ended`) goes back to the
//! scheduler's loop as a `Done`. Never touches the lane: the loop owns it.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::deliver::{Destination, policy};
use crate::metrics::{DestinationLabel, Metrics};
use crate::store::schema::AttemptClass;
use crate::store::{Finish, Next, Store, StoreError};
use crate::words::AttemptOutcome;

/// How an attempt of a due event ended, for its lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ended {
    /// None went out: the event was no longer pending (delivered,
    /// replayed or changed since it was found due).
    NotAttempted,
    /// One went out and its outcome is recorded. `healthy`: the
    /// destination answered as a working app does (a 2xx, or a 4xx that is
    /// the app's verdict), which the breaker counts; `failure`: what went
    /// wrong, in words, unless it was delivered.
    Attempted {
        healthy: bool,
        failure: Option<String>,
    },
    /// The store failed before it went out (reading the event, or leasing
    /// it): the event stays due, and the lane waits a moment.
    StoreFailed,
}

/// An attempt's end, reported back to the scheduler loop.
pub(super) struct Done {
    pub(super) lane: usize,
    pub(super) seq: u64,
    pub(super) ended: Ended,
}

/// One attempt of one event, from lease to recorded outcome.
pub(super) struct Attempt {
    pub(super) store: Store,
    pub(super) metrics: Metrics,
    pub(super) clock: Clock,
    pub(super) destination: Arc<Destination>,
    pub(super) label: Arc<DestinationLabel>,
    pub(super) lane: usize,
    pub(super) seq: u64,
    pub(super) done: mpsc::UnboundedSender<Done>,
    /// Each attempt is a span of its event's trace (`[telemetry]`).
    pub(super) telemetry: crate::telemetry::Telemetry,
}

impl Attempt {
    pub(super) async fn run(self) {
        let ended = self.deliver().await.unwrap_or_else(|e| {
            tracing::error!(seq = self.seq, error = %e.report(), "no attempt made: the store failed; the event stays due");
            Ended::StoreFailed
        });
        // The loop may be gone at shutdown; nothing left to tell it then.
        let _ = self.done.send(Done {
            lane: self.lane,
            seq: self.seq,
            ended,
        });
    }

    /// How the attempt ended (`NotAttempted` when the event was no longer
    /// pending); `Err` when the store failed before it went out.
    async fn deliver(&self) -> Result<Ended, StoreError> {
        let source = self.destination.source.as_str();
        let destination = self.destination.name();
        // Read first, lease second: once the lease is on disk nothing may
        // fail before the outcome is recorded, or the lease would hold the
        // event until a restart (and the restart would call it interrupted).
        // The record is immutable, so reading it before the lease is safe;
        // the claim checks that the event is still pending.
        let Some(event) = self.store.delivery(self.seq)? else {
            return Ok(Ended::NotAttempted);
        };
        let started_ms = self.clock.now_ms();
        let Some(claimed) = self.store.claim(self.seq, started_ms).await? else {
            return Ok(Ended::NotAttempted);
        };
        let span = self.telemetry.attempt(crate::telemetry::AttemptOf {
            id: &event.id,
            route: destination,
            attempt: claimed.attempt,
            round: event.state.replays,
            round_started_ms: claimed.round_started_ms,
        });
        let (attempt, retry_after) = self
            .destination
            .attempt(&event, claimed.attempt, &self.clock, span.headers())
            .await;
        let now_ms = self.clock.now_ms();
        let draw: f64 = rand::rng().random();
        let next = policy::decide(
            &self.destination.config,
            claimed,
            &attempt,
            retry_after,
            now_ms,
            draw,
        );
        let healthy = !matches!(
            attempt.class,
            AttemptClass::RetryableStatus
                | AttemptClass::Timeout
                | AttemptClass::Connect
                | AttemptClass::Transport
        );
        self.metrics.attempt(
            &self.label,
            attempt.class.into(),
            Duration::from_millis(attempt.latency_ms),
        );
        let outcome = policy::describe(&attempt);
        // The attempt's log lines name its span ([telemetry]).
        let ids = span.ids();
        let (trace_id, span_id) = (
            ids.as_ref().map(|i| i.0.as_str()),
            ids.as_ref().map(|i| i.1.as_str()),
        );
        span.end(
            attempt.status,
            AttemptOutcome::from(attempt.class).as_str(),
            (attempt.class != AttemptClass::Delivered).then_some(outcome.as_str()),
        );
        match &next {
            Next::Delivered { .. } => {
                self.metrics.delivered(
                    &self.label,
                    Duration::from_millis(now_ms.saturating_sub(claimed.round_started_ms)),
                );
                tracing::debug!(source, destination, id = %event.id, event_id = %event.record.event_id, attempt = claimed.attempt, latency_ms = attempt.latency_ms, trace_id, span_id, "delivered");
            }
            Next::RetryAt { due_ms } => tracing::debug!(
                source, destination, id = %event.id, event_id = %event.record.event_id, attempt = claimed.attempt,
                latency_ms = attempt.latency_ms, %outcome, trace_id, span_id,
                retry_in_ms = due_ms.saturating_sub(now_ms), "attempt failed; will retry"
            ),
            Next::Dead { reason, .. } => {
                let loud = self.metrics.dead_lettered(&self.label);
                crate::loud_or_debug!(loud, warn, source, destination, id = %event.id, event_id = %event.record.event_id, attempt = claimed.attempt, %reason, trace_id, span_id, "dead-lettered");
            }
        }
        let attempt_class = attempt.class;
        let finish = Finish {
            seq: self.seq,
            attempt,
            next,
        };
        // The outcome must be recorded, or the lease would hold the event
        // until a restart: keep trying while the store cannot commit.
        let mut wait = Duration::from_millis(100);
        loop {
            match self.store.finish(finish.clone()).await {
                Ok(()) => {
                    let failure = (attempt_class != AttemptClass::Delivered).then_some(outcome);
                    return Ok(Ended::Attempted { healthy, failure });
                }
                // Closed: shutting down; the lease is recovered at the next start.
                Err(e) if e.is_transient() && !matches!(e, StoreError::Closed) => {
                    tracing::error!(source, destination, seq = self.seq, cause = %e.report(), "cannot record a delivery outcome; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                Err(e) => return Err(e),
            }
        }
    }
}
