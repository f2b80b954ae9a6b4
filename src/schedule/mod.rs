//! The scheduler: finds due events and hands them to delivery.
//!
//! One task. It sleeps until something can change what is due — a commit
//! (new events, retries, replays: the store signals each one), an attempt
//! finishing (a concurrency slot frees up), the earliest future due time, a
//! circuit's cooldown ending, a rate token, or a pause/resume — then walks
//! each destination's queue from its oldest entry, taking only as many due
//! events as the destination may receive right now. No polling.
//!
//! Each attempt is leased in the store before it goes out and recorded with
//! its outcome after (see `store::tables`), so a crash at any point leaves
//! the event due again with the interrupted attempt on record.
//!
//! What it keeps in memory per destination — attempts in flight, the circuit
//! breaker, the rate bucket, the pause flag — is rebuilt empty at start: in
//! flight is empty after a restart by definition (leases were recovered), a
//! closed circuit re-learns failure in `breaker_failures` attempts.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::Rng;
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::deliver::breaker::{Allow, Breaker, CircuitState};
use crate::deliver::{Destination, policy};
use crate::metrics::{DestinationLabel, Metrics};
use crate::store::schema::AttemptClass;
use crate::store::{Due, Finish, Next, Store, StoreError};
use crate::supervise::TaskError;

/// Control of the running scheduler, for the admin surfaces.
#[derive(Clone)]
pub struct DeliveryHandle {
    store: Store,
    paused: Arc<HashMap<String, Arc<AtomicBool>>>,
    wake: Arc<Notify>,
    lanes: Arc<std::sync::Mutex<Vec<LaneStatus>>>,
    alive: Arc<AtomicBool>,
}

/// What the scheduler knows of one destination right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneStatus {
    /// The route: the source's name, or `source.name`.
    pub name: String,
    pub source: String,
    pub url: String,
    pub paused: bool,
    pub circuit: CircuitState,
    pub in_flight: usize,
    pub max_concurrency: usize,
    /// The last failed attempt, in words (for alerts and people).
    pub last_failure: Option<String>,
}

/// Sets the flag false when the scheduler's task ends, however it ends.
struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PauseError {
    #[error("no destination named {0:?}")]
    UnknownDestination(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl DeliveryHandle {
    /// Stops calling `destination`; its events wait, in order, on the
    /// schedule. Kept in the store: a restart stays paused.
    pub async fn pause(&self, destination: &str) -> Result<(), PauseError> {
        self.set_paused(destination, true).await
    }

    /// Calls `destination` again; what accumulated goes out oldest first.
    pub async fn resume(&self, destination: &str) -> Result<(), PauseError> {
        self.set_paused(destination, false).await
    }

    /// Every destination's state, as of the scheduler's last look.
    pub fn destinations(&self) -> Vec<LaneStatus> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the scheduler task is running.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }

    pub fn is_paused(&self, destination: &str) -> Option<bool> {
        self.paused
            .get(destination)
            .map(|p| p.load(Ordering::Relaxed))
    }

    async fn set_paused(&self, destination: &str, paused: bool) -> Result<(), PauseError> {
        let flag = self
            .paused
            .get(destination)
            .ok_or_else(|| PauseError::UnknownDestination(destination.to_owned()))?;
        // Durable first: a pause the store could not keep is not reported done.
        self.store.set_paused(destination, paused).await?;
        if flag.swap(paused, Ordering::Relaxed) != paused {
            tracing::info!(
                destination,
                paused,
                "destination {}",
                if paused { "paused" } else { "resumed" }
            );
        }
        self.wake.notify_one();
        Ok(())
    }
}

/// A token bucket: `rate` per second, bursts up to one second's worth.
struct Rate {
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Rate {
    fn new(per_second: f64) -> Rate {
        Rate {
            per_second,
            tokens: per_second.max(1.0),
            at: Instant::now(),
        }
    }

    fn available(&mut self, now: Instant) -> usize {
        let burst = self.per_second.max(1.0);
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.per_second).min(burst);
        self.at = now;
        self.tokens.floor() as usize
    }

    fn take(&mut self) {
        self.tokens -= 1.0;
    }

    fn next_token(&self, now: Instant) -> Instant {
        now + Duration::from_secs_f64(((1.0 - self.tokens).max(0.0)) / self.per_second)
    }
}

struct Lane {
    destination: Arc<Destination>,
    /// Its metrics' labels.
    label: Arc<DestinationLabel>,
    in_flight: HashSet<u64>,
    breaker: Breaker,
    rate: Option<Rate>,
    paused: Arc<AtomicBool>,
    last_failure: Option<String>,
    /// After the store failed an attempt (it could not read the event or
    /// commit the lease), the lane waits until then instead of spinning.
    store_retry_at: Option<Instant>,
}

/// An attempt's end, reported back to the scheduler loop.
struct Done {
    lane: usize,
    seq: u64,
    /// `None`: no attempt was made (the event was no longer pending).
    healthy: Option<bool>,
    /// What went wrong, if the attempt failed.
    failure: Option<String>,
    /// The store failed before the attempt could go out.
    store_failed: bool,
}

pub struct Scheduler {
    store: Store,
    metrics: Metrics,
    clock: Clock,
    lanes: Vec<Lane>,
    wake: Arc<Notify>,
    published: Arc<std::sync::Mutex<Vec<LaneStatus>>>,
    alive: Arc<AtomicBool>,
}

/// At most this many due events waiting for their ordering key are stepped
/// over in one look at a destination; the rest are seen on the next look.
const MAX_WAITING_SCAN: usize = 10_000;

/// How long a destination waits after the store failed one of its attempts
/// (a read or a lease commit) before the scheduler tries again: a full disk
/// or a reopening database is not fixed by asking again at once.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// How long a stopping scheduler waits for attempts in flight to finish and
/// be recorded; past it they are abandoned and recovered as interrupted.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

impl Scheduler {
    /// `paused_states`: pauses kept by the store, which win over the
    /// config's `paused` (the config is the state before any pause/resume).
    pub fn new(
        store: Store,
        metrics: Metrics,
        clock: Clock,
        destinations: Vec<Destination>,
        paused_states: &HashMap<String, bool>,
    ) -> (Scheduler, DeliveryHandle) {
        let wake = Arc::new(Notify::new());
        let mut paused = HashMap::new();
        let lanes = destinations
            .into_iter()
            .map(|d| {
                let initial = paused_states
                    .get(d.name())
                    .copied()
                    .unwrap_or(d.config.paused);
                let flag = Arc::new(AtomicBool::new(initial));
                paused.insert(d.name().to_owned(), flag.clone());
                Lane {
                    label: Arc::new(DestinationLabel::new(d.source.as_str(), d.name())),
                    breaker: Breaker::new(d.config.breaker_failures, d.config.breaker_cooldown),
                    rate: d.config.max_rate.map(Rate::new),
                    in_flight: HashSet::new(),
                    paused: flag,
                    last_failure: None,
                    store_retry_at: None,
                    destination: Arc::new(d),
                }
            })
            .collect();
        let published = Arc::new(std::sync::Mutex::new(Vec::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let handle = DeliveryHandle {
            store: store.clone(),
            paused: Arc::new(paused),
            wake: wake.clone(),
            lanes: published.clone(),
            alive: alive.clone(),
        };
        let scheduler = Scheduler {
            store,
            metrics,
            clock,
            lanes,
            wake,
            published,
            alive,
        };
        scheduler.publish();
        (scheduler, handle)
    }

    /// Runs until `shutdown` resolves, then waits up to [`DRAIN_TIMEOUT`] for
    /// attempts in flight to be recorded.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), TaskError> {
        let _alive = AliveGuard(self.alive.clone());
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
        let mut tasks = JoinSet::new();
        loop {
            let wake_at = self.dispatch(&done_tx, &mut tasks);
            self.publish();
            let sleep = async {
                match wake_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.store.schedule_changed() => {}
                () = self.wake.notified() => {}
                Some(done) = done_rx.recv() => {
                    self.settle(done);
                    while let Ok(done) = done_rx.try_recv() {
                        self.settle(done);
                    }
                }
                () = sleep => {}
                // Reap finished tasks so the set does not grow.
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        let in_flight = tasks.len();
        if in_flight > 0 {
            tracing::info!(in_flight, "waiting for delivery attempts in flight");
            let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
                while tasks.join_next().await.is_some() {}
            })
            .await;
            if drained.is_err() {
                tracing::warn!(
                    abandoned = tasks.len(),
                    "delivery attempts still in flight at shutdown; they will be recorded as interrupted and retried on the next start"
                );
                tasks.abort_all();
            }
        }
        Ok(())
    }

    /// Shares each destination's state with the admin surfaces.
    fn publish(&self) {
        let statuses = self
            .lanes
            .iter()
            .map(|lane| {
                let d = &lane.destination;
                LaneStatus {
                    name: d.name().to_owned(),
                    source: d.source.to_string(),
                    // The query or the user info may carry a credential: never shown.
                    url: crate::config::redact_url(&d.config.url),
                    paused: lane.paused.load(Ordering::Relaxed),
                    circuit: lane.breaker.state(),
                    in_flight: lane.in_flight.len(),
                    max_concurrency: d.config.max_concurrency,
                    last_failure: lane.last_failure.clone(),
                }
            })
            .collect();
        *self.published.lock().unwrap_or_else(|p| p.into_inner()) = statuses;
    }

    fn settle(&mut self, done: Done) {
        let lane = &mut self.lanes[done.lane];
        lane.in_flight.remove(&done.seq);
        if done.store_failed {
            lane.store_retry_at = Some(Instant::now() + STORE_RETRY);
        }
        if done.failure.is_some() {
            lane.last_failure = done.failure;
        }
        if let Some(healthy) = done.healthy
            && let Some(state) = lane.breaker.record(healthy, Instant::now())
        {
            log_circuit(&self.metrics, lane, state);
        }
    }

    /// Starts every attempt that may go out now; returns when to look again
    /// if nothing else wakes the loop first.
    fn dispatch(
        &mut self,
        done_tx: &mpsc::UnboundedSender<Done>,
        tasks: &mut JoinSet<()>,
    ) -> Option<Instant> {
        let now = Instant::now();
        let now_ms = self.clock.now_ms();
        let mut wake: Option<Instant> = None;
        let mut wake_at = |at: Instant| wake = Some(wake.map_or(at, |w| w.min(at)));
        for (index, lane) in self.lanes.iter_mut().enumerate() {
            if lane.paused.load(Ordering::Relaxed) {
                continue;
            }
            if let Some(at) = lane.store_retry_at {
                if at > now {
                    wake_at(at);
                    continue;
                }
                lane.store_retry_at = None;
            }
            let mut room = lane
                .destination
                .config
                .max_concurrency
                .saturating_sub(lane.in_flight.len());
            let (allow, changed) = lane.breaker.allow(now);
            if let Some(state) = changed {
                log_circuit(&self.metrics, lane, state);
            }
            match allow {
                Allow::All => {}
                Allow::Probe => room = room.min(1),
                Allow::Until(at) => {
                    wake_at(at);
                    continue;
                }
                Allow::Wait => continue,
            }
            if let Some(rate) = &mut lane.rate {
                let tokens = rate.available(now);
                if tokens < room {
                    room = tokens;
                    wake_at(rate.next_token(now));
                }
            }
            if room == 0 {
                continue;
            }
            let ordered = lane.destination.config.ordering.is_some();
            let name = lane.destination.name();
            let mut due: Vec<Due> = Vec::new();
            let mut next = None;
            // Events waiting for an earlier one of their key stay due; step
            // over them (up to a bound) to find ones that may go.
            let mut waiting: HashSet<u64> = HashSet::new();
            let mut failed = false;
            while due.len() < room && waiting.len() <= MAX_WAITING_SCAN {
                let in_flight = &lane.in_flight;
                let taken: HashSet<u64> = due.iter().map(|d| d.seq).collect();
                let found = self.store.due(name, now_ms, room - due.len(), |seq| {
                    in_flight.contains(&seq) || waiting.contains(&seq) || taken.contains(&seq)
                });
                let (batch, more) = match found {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::error!(destination = name, error = %e.report(), "cannot read the schedule; retrying soon");
                        failed = true;
                        break;
                    }
                };
                next = more;
                let full = batch.len();
                for entry in batch {
                    match ordered.then(|| self.store.waits_for_its_key(entry.seq)) {
                        Some(Err(e)) => {
                            tracing::error!(destination = name, error = %e.report(), "cannot read an ordering key; retrying soon");
                            failed = true;
                            break;
                        }
                        Some(Ok(true)) => {
                            waiting.insert(entry.seq);
                        }
                        Some(Ok(false)) | None => due.push(entry),
                    }
                }
                if failed || full == 0 || next != Some(now_ms) {
                    break;
                }
            }
            if failed {
                wake_at(now + STORE_RETRY);
            }
            if let Some(next_ms) = next
                && next_ms > now_ms
            {
                wake_at(now + Duration::from_millis(next_ms - now_ms));
            }
            for entry in due {
                lane.in_flight.insert(entry.seq);
                lane.breaker.dispatched();
                if let Some(rate) = &mut lane.rate {
                    rate.take();
                }
                let task = Attempt {
                    store: self.store.clone(),
                    metrics: self.metrics.clone(),
                    clock: self.clock.clone(),
                    destination: lane.destination.clone(),
                    label: lane.label.clone(),
                    lane: index,
                    seq: entry.seq,
                    done: done_tx.clone(),
                };
                tasks.spawn(task.run());
            }
        }
        wake
    }
}

fn log_circuit(metrics: &Metrics, lane: &Lane, state: CircuitState) {
    let destination = lane.destination.name();
    metrics.circuit(&lane.label, state.into());
    match state {
        CircuitState::Open => tracing::warn!(
            destination,
            cooldown = %humantime::format_duration(lane.destination.config.breaker_cooldown),
            "circuit opened: the destination keeps failing; due events wait without spending attempts"
        ),
        CircuitState::HalfOpen => {
            tracing::info!(destination, "circuit half-open: sending one probe")
        }
        CircuitState::Closed => tracing::info!(destination, "circuit closed: destination healthy"),
    }
}

/// One attempt of one event, from lease to recorded outcome.
struct Attempt {
    store: Store,
    metrics: Metrics,
    clock: Clock,
    destination: Arc<Destination>,
    label: Arc<DestinationLabel>,
    lane: usize,
    seq: u64,
    done: mpsc::UnboundedSender<Done>,
}

impl Attempt {
    async fn run(self) {
        let (healthy, failure, store_failed) = match self.deliver().await {
            Ok((healthy, failure)) => (healthy, failure, false),
            Err(e) => {
                tracing::error!(seq = self.seq, error = %e.report(), "no attempt made: the store failed; the event stays due");
                (None, None, true)
            }
        };
        // The loop may be gone at shutdown; nothing left to tell it then.
        let _ = self.done.send(Done {
            lane: self.lane,
            seq: self.seq,
            healthy,
            failure,
            store_failed,
        });
    }

    /// Returns whether the destination looked healthy, or `None` if no
    /// attempt was made.
    async fn deliver(&self) -> Result<(Option<bool>, Option<String>), StoreError> {
        let source = self.destination.source.as_str();
        let destination = self.destination.name();
        // Read first, lease second: once the lease is on disk nothing may
        // fail before the outcome is recorded, or the lease would hold the
        // event until a restart (and the restart would call it interrupted).
        // The record is immutable, so reading it before the lease is safe;
        // the claim checks that the event is still pending.
        let Some(event) = self.store.delivery(self.seq)? else {
            return Ok((None, None));
        };
        let started_ms = self.clock.now_ms();
        let Some(claimed) = self.store.claim(self.seq, started_ms).await? else {
            return Ok((None, None));
        };
        let (attempt, retry_after) = self
            .destination
            .attempt(&event, claimed.attempt, &self.clock)
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
        match &next {
            Next::Delivered { .. } => {
                self.metrics.delivered(
                    &self.label,
                    Duration::from_millis(now_ms.saturating_sub(claimed.round_started_ms)),
                );
                tracing::debug!(source, destination, id = %event.id, event_id = %event.record.event_id, attempt = claimed.attempt, latency_ms = attempt.latency_ms, "delivered");
            }
            Next::RetryAt { due_ms } => tracing::debug!(
                source, destination, id = %event.id, event_id = %event.record.event_id, attempt = claimed.attempt,
                latency_ms = attempt.latency_ms, %outcome,
                retry_in_ms = due_ms.saturating_sub(now_ms), "attempt failed; will retry"
            ),
            Next::Dead { reason, .. } => {
                let loud = self.metrics.dead_lettered(&self.label);
                crate::loud_or_debug!(loud, warn, source, destination, id = %event.id, event_id = %event.record.event_id, attempt = claimed.attempt, %reason, "dead-lettered");
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
                    return Ok((Some(healthy), failure));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A second's worth of burst, then the rate; time moves only when the
    /// test moves tokio's paused clock.
    #[tokio::test(start_paused = true)]
    async fn the_rate_bucket_allows_a_seconds_burst_then_the_rate() {
        let mut rate = Rate::new(10.0);
        assert_eq!(rate.available(Instant::now()), 10);
        for _ in 0..10 {
            rate.take();
        }
        let now = Instant::now();
        assert_eq!(rate.available(now), 0);
        assert_eq!(rate.next_token(now), now + Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(rate.available(Instant::now()), 2);
        // Idle time does not bank more than the burst.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(rate.available(Instant::now()), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_below_one_per_second_still_sends_one_then_waits() {
        let mut rate = Rate::new(0.5);
        assert_eq!(rate.available(Instant::now()), 1);
        rate.take();
        let now = Instant::now();
        assert_eq!(rate.available(now), 0);
        assert_eq!(rate.next_token(now), now + Duration::from_secs(2));
        tokio::time::advance(Duration::from_millis(1_999)).await;
        assert_eq!(rate.available(Instant::now()), 0);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(rate.available(Instant::now()), 1);
    }
}
