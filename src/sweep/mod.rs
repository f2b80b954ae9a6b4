//! The sweeper: a background task that deletes what retention says is over.
//!
//! Every `sweep_interval` (or when the admin API asks) it calls
//! `Store::sweep` in bounded steps of [`BATCH`] until nothing expired is
//! left. Each step is one writer commit that queues like any other job, so
//! ingest waits at most one step behind it. What expires, and why nothing
//! pending or held ever does, is decided in `store::tables`.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};
use crate::supervise::TaskError;
use crate::words::SweptKind;

/// Deletions per commit. benches/sweep.rs (quick run, 100k expired events,
/// 2,000 ingests/s): 1,000 per step swept 90k events/s but raised ingest
/// ack p99 2.6× (a step's commit took up to 12 ms, and ingest queued behind
/// it); 500 gave 2.4×; 250 sweeps 76k events/s at 1.5× — steps of ≈ 3 ms.
pub const BATCH: usize = 250;

/// What one sweep run removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepTotals {
    pub delivered: u64,
    pub dead_or_ignored: u64,
    pub dedupe_keys: u64,
    /// Idempotency keys.
    pub keys: u64,
    /// Audit records past `audit_ttl`.
    pub audit: u64,
    pub steps: u64,
    pub millis: u64,
}

/// Asks the running sweeper for a sweep now.
#[derive(Clone)]
pub struct SweepHandle {
    requests: mpsc::Sender<oneshot::Sender<Result<SweepTotals, StoreError>>>,
}

impl SweepHandle {
    /// Sweeps now and returns what was removed.
    pub async fn sweep_now(&self) -> Result<SweepTotals, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(reply)
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }
}

pub struct Sweeper {
    store: Store,
    metrics: Metrics,
    interval: Duration,
    clock: Clock,
    requests: mpsc::Receiver<oneshot::Sender<Result<SweepTotals, StoreError>>>,
    /// Each sweep is a span (`[telemetry]`).
    telemetry: crate::telemetry::Telemetry,
}

impl Sweeper {
    pub fn new(
        store: Store,
        metrics: Metrics,
        interval: Duration,
        clock: Clock,
    ) -> (Sweeper, SweepHandle) {
        let (tx, rx) = mpsc::channel(8);
        (
            Sweeper {
                store,
                metrics,
                interval,
                clock,
                requests: rx,
                telemetry: crate::telemetry::Telemetry::off(),
            },
            SweepHandle { requests: tx },
        )
    }

    /// Each sweep a span of `telemetry`'s.
    pub fn traced(self, telemetry: crate::telemetry::Telemetry) -> Sweeper {
        Sweeper { telemetry, ..self }
    }

    /// Sweeps every interval and on request until `shutdown` is cancelled.
    /// A failed sweep is logged and tried again at the next interval.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), TaskError> {
        let mut next = Instant::now() + self.interval;
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(next) => {
                    next = Instant::now() + self.interval;
                    if let Err(e) = self.sweep().await {
                        tracing::error!(error = %e.report(), "sweep failed; trying again next interval");
                    }
                }
                Some(reply) = self.requests.recv() => {
                    let _ = reply.send(self.sweep().await);
                }
            }
        }
    }

    async fn sweep(&self) -> Result<SweepTotals, StoreError> {
        let mut span = self.telemetry.task("sweep", &[]);
        let swept = self.sweep_steps().await;
        match &swept {
            Ok(totals) => {
                span.count("hookinbox.swept.delivered", totals.delivered);
                span.count("hookinbox.swept.dead_or_ignored", totals.dead_or_ignored);
                span.count("hookinbox.swept.dedupe_keys", totals.dedupe_keys);
                span.count("hookinbox.swept.keys", totals.keys);
                span.count("hookinbox.swept.audit", totals.audit);
                span.count("hookinbox.sweep.steps", totals.steps);
                span.end(None);
            }
            Err(e) => span.end(Some(&e.to_string())),
        }
        swept
    }

    async fn sweep_steps(&self) -> Result<SweepTotals, StoreError> {
        let started = Instant::now();
        let mut totals = SweepTotals::default();
        loop {
            let step = self.store.sweep(self.clock.now_ms(), BATCH).await?;
            totals.steps += 1;
            totals.delivered += step.delivered;
            totals.dead_or_ignored += step.dead_or_ignored;
            totals.dedupe_keys += step.dedupe_keys;
            totals.keys += step.keys;
            totals.audit += step.audit;
            self.metrics.swept(SweptKind::Delivered, step.delivered);
            self.metrics
                .swept(SweptKind::DeadOrIgnored, step.dead_or_ignored);
            self.metrics.swept(SweptKind::DedupeKey, step.dedupe_keys);
            self.metrics.swept(SweptKind::IdempotencyKey, step.keys);
            self.metrics.swept(SweptKind::AuditRecord, step.audit);
            if !step.more {
                break;
            }
            // Let whatever queued behind this step go first.
            tokio::task::yield_now().await;
        }
        totals.millis = started.elapsed().as_millis() as u64;
        if totals.delivered
            + totals.dead_or_ignored
            + totals.dedupe_keys
            + totals.keys
            + totals.audit
            > 0
        {
            tracing::info!(
                delivered = totals.delivered,
                dead_or_ignored = totals.dead_or_ignored,
                dedupe_keys = totals.dedupe_keys,
                keys = totals.keys,
                audit = totals.audit,
                steps = totals.steps,
                millis = totals.millis,
                "swept expired data"
            );
        }
        Ok(totals)
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::clock::hold_still;
    use crate::store::Initial;
    use crate::store::tests::{close, deliver, new_seq, options};

    /// The sweeper judges expiry by the app's clock, on request and on its
    /// interval: a day passes on tokio's paused clock without a sleep.
    #[tokio::test(start_paused = true)]
    async fn expiry_is_judged_by_the_apps_clock_on_request_and_on_the_interval() {
        let _still = hold_still();
        let dir = tempfile::tempdir().unwrap();
        // Dedupe keys live an hour (`options`); the sweeper runs daily.
        let (store, writer) = Store::open(options(dir.path())).unwrap();
        let clock = Clock::following_tokio(SystemTime::now());
        let day = Duration::from_secs(86_400);
        let (sweeper, handle) = Sweeper::new(store.clone(), Metrics::new(), day, clock.clone());
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(sweeper.run(shutdown.clone()));

        // Delivered events: a pending or held one's key would be kept.
        let a = new_seq(&store, "s", "a", Initial::Deliver).await;
        deliver(&store, a, clock.now_ms()).await;
        assert_eq!(handle.sweep_now().await.unwrap().dedupe_keys, 0);
        tokio::time::advance(Duration::from_secs(2 * 3600)).await;
        assert_eq!(handle.sweep_now().await.unwrap().dedupe_keys, 1);
        assert!(store.find("s", "a").unwrap().is_none());

        // Expired by the time the daily sweep comes round. The timer is due
        // before the request arrives, so the request waits behind that sweep
        // and finds nothing left.
        let b = new_seq(&store, "s", "b", Initial::Deliver).await;
        deliver(&store, b, clock.now_ms()).await;
        tokio::time::advance(day).await;
        assert_eq!(handle.sweep_now().await.unwrap().dedupe_keys, 0);
        assert!(store.find("s", "b").unwrap().is_none());

        shutdown.cancel();
        running.await.unwrap().unwrap();
        close(store, writer).await;
    }
}
