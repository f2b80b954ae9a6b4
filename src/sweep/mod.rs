//! The sweeper: a background task that deletes what retention says is over.
//!
//! Every `sweep_interval` (or when the admin API asks) it calls
//! `Store::sweep` in bounded steps of [`BATCH`] until nothing expired is
//! left. Each step is one writer commit that queues like any other job, so
//! ingest waits at most one step behind it. What expires, and why nothing
//! pending or held ever does, is decided in `store::tables`.

use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, oneshot};

use crate::deliver::unix_ms;
use crate::metrics::{Metrics, SweptKind};
use crate::store::{Store, StoreError};

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
    requests: mpsc::Receiver<oneshot::Sender<Result<SweepTotals, StoreError>>>,
}

impl Sweeper {
    pub fn new(store: Store, metrics: Metrics, interval: Duration) -> (Sweeper, SweepHandle) {
        let (tx, rx) = mpsc::channel(8);
        (
            Sweeper {
                store,
                metrics,
                interval,
                requests: rx,
            },
            SweepHandle { requests: tx },
        )
    }

    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut next = Instant::now() + self.interval;
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep_until(next.into()) => {
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
        let started = Instant::now();
        let mut totals = SweepTotals::default();
        loop {
            let step = self.store.sweep(unix_ms(SystemTime::now()), BATCH).await?;
            totals.steps += 1;
            totals.delivered += step.delivered;
            totals.dead_or_ignored += step.dead_or_ignored;
            totals.dedupe_keys += step.dedupe_keys;
            self.metrics.swept(SweptKind::Delivered, step.delivered);
            self.metrics
                .swept(SweptKind::DeadOrIgnored, step.dead_or_ignored);
            self.metrics.swept(SweptKind::DedupeKey, step.dedupe_keys);
            if !step.more {
                break;
            }
            // Let whatever queued behind this step go first.
            tokio::task::yield_now().await;
        }
        totals.millis = started.elapsed().as_millis() as u64;
        if totals.delivered + totals.dead_or_ignored + totals.dedupe_keys > 0 {
            tracing::info!(
                delivered = totals.delivered,
                dead_or_ignored = totals.dead_or_ignored,
                dedupe_keys = totals.dedupe_keys,
                steps = totals.steps,
                millis = totals.millis,
                "swept expired data"
            );
        }
        Ok(totals)
    }
}
