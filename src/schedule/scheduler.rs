//! `Scheduler`: the one task that finds due events and starts their
//! attempts. Its loop sleeps until something can change what is due, then
//! `dispatch`es: for each lane, its room, then that many due events.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::attempt::{Attempt, Done};
use super::handle::{AliveGuard, DeliveryHandle, LaneStatus, Reconfigure, Wanted};
use super::lane::{Lane, STORE_RETRY};
use crate::clock::Clock;
use crate::deliver::Destination;
use crate::deliver::breaker::CircuitState;
use crate::metrics::Metrics;
use crate::store::{Due, Store};
use crate::supervise::TaskError;

pub struct Scheduler {
    store: Store,
    metrics: Metrics,
    clock: Clock,
    lanes: Vec<Lane>,
    wake: Arc<Notify>,
    published: Arc<std::sync::Mutex<Vec<LaneStatus>>>,
    alive: Arc<AtomicBool>,
    telemetry: crate::telemetry::Telemetry,
    /// The handle's pause flags, which a reload's new lanes join.
    paused: Arc<std::sync::RwLock<HashMap<String, Arc<AtomicBool>>>>,
    reconfigured: mpsc::UnboundedReceiver<Reconfigure>,
}

/// At most this many due events waiting for their ordering key are stepped
/// over in one look at a destination; the rest are seen on the next look.
const MAX_WAITING_SCAN: usize = 10_000;

/// How long a stopping scheduler waits for attempts in flight to finish and
/// be recorded; past it they are abandoned and recovered as interrupted.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

impl Scheduler {
    /// `paused_states`: pauses kept by the store, which win over the
    /// config's `paused` (the config is the state before any pause/resume).
    /// Each attempt is a span of its event's trace in `telemetry`.
    pub fn new(
        store: Store,
        metrics: Metrics,
        clock: Clock,
        destinations: Vec<Destination>,
        paused_states: &HashMap<String, bool>,
        telemetry: crate::telemetry::Telemetry,
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
                Lane::new(d, flag)
            })
            .collect();
        let published = Arc::new(std::sync::Mutex::new(Vec::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let paused = Arc::new(std::sync::RwLock::new(paused));
        let (reconfigure, reconfigured) = mpsc::unbounded_channel();
        let handle = DeliveryHandle {
            store: store.clone(),
            paused: paused.clone(),
            wake: wake.clone(),
            lanes: published.clone(),
            alive: alive.clone(),
            reconfigure,
        };
        let scheduler = Scheduler {
            store,
            metrics,
            clock,
            lanes,
            wake,
            published,
            alive,
            telemetry,
            paused,
            reconfigured,
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
                Some(reconfigure) = self.reconfigured.recv() => self.reconfigure(reconfigure),
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

    /// Takes a reload's destinations: each lane whose destination is still
    /// there gets its new settings, a new one gets a lane (paused as the
    /// store or its config says), and a lane whose destination is gone is
    /// retired.
    fn reconfigure(&mut self, reconfigure: Reconfigure) {
        let Reconfigure {
            destinations,
            paused_states,
        } = reconfigure;
        let mut wanted: Vec<Option<Wanted>> = destinations.into_iter().map(Some).collect();
        let mut flags = self.paused.write().unwrap_or_else(|p| p.into_inner());
        for lane in &mut self.lanes {
            let name = lane.destination.name().to_owned();
            match wanted
                .iter_mut()
                .find(|w| w.as_ref().is_some_and(|w| w.name() == name))
                .and_then(Option::take)
            {
                Some(wanted) => {
                    if let Wanted::Set(destination) = wanted {
                        lane.reconfigure(*destination);
                    }
                    lane.retired = false;
                    flags.insert(name, lane.paused.clone());
                }
                None if !lane.retired => {
                    lane.retired = true;
                    flags.remove(&name);
                    tracing::info!(
                        destination = name,
                        in_flight = lane.in_flight.len(),
                        "reload: destination removed; its attempts in flight finish, its due events wait in the store"
                    );
                }
                None => {}
            }
        }
        for wanted in wanted.into_iter().flatten() {
            // A destination the reloader took as unchanged has a lane.
            let Wanted::Set(destination) = wanted else {
                continue;
            };
            let name = destination.name().to_owned();
            let initial = paused_states
                .get(&name)
                .copied()
                .unwrap_or(destination.config.paused);
            let flag = Arc::new(AtomicBool::new(initial));
            flags.insert(name.clone(), flag.clone());
            tracing::info!(
                destination = name,
                paused = initial,
                "reload: destination added"
            );
            self.lanes.push(Lane::new(*destination, flag));
        }
    }

    /// Shares each destination's state with the admin surfaces.
    fn publish(&self) {
        let statuses = self
            .lanes
            .iter()
            .filter(|lane| !lane.retired)
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
        if let Some(state) = lane.settle(done.seq, done.ended, Instant::now()) {
            log_circuit(&self.metrics, lane, state);
        }
    }

    /// Starts every attempt that may go out now: for each lane, what it
    /// has room for ([`Lane::room`]), then that many of its due events
    /// ([`find_due`]). Returns when to look again if nothing else wakes the
    /// loop first.
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
            let room = lane.room(now);
            if let Some(state) = room.circuit {
                log_circuit(&self.metrics, lane, state);
            }
            if let Some(at) = room.again {
                wake_at(at);
            }
            if room.attempts == 0 {
                continue;
            }
            let found = find_due(&self.store, lane, now_ms, room.attempts);
            if found.failed {
                wake_at(now + STORE_RETRY);
            }
            if let Some(next_ms) = found.next
                && next_ms > now_ms
            {
                wake_at(now + Duration::from_millis(next_ms - now_ms));
            }
            for entry in found.due {
                lane.start(entry.seq);
                let task = Attempt {
                    store: self.store.clone(),
                    metrics: self.metrics.clone(),
                    clock: self.clock.clone(),
                    destination: lane.destination.clone(),
                    label: lane.label.clone(),
                    lane: index,
                    seq: entry.seq,
                    done: done_tx.clone(),
                    telemetry: self.telemetry.clone(),
                };
                tasks.spawn(task.run());
            }
        }
        wake
    }
}

/// What [`find_due`] found of one lane's queue.
#[derive(Default)]
struct Found {
    /// The events to attempt now, oldest first.
    due: Vec<Due>,
    /// When the next entry of the queue is due, if any.
    next: Option<u64>,
    /// The store could not be read: look again after [`STORE_RETRY`].
    failed: bool,
}

/// Up to `room` due events of `lane`'s queue at `now_ms`, oldest first,
/// skipping those in flight; with per-key ordering, stepping over (up to
/// [`MAX_WAITING_SCAN`]) those that wait for an earlier one of their key.
fn find_due(store: &Store, lane: &Lane, now_ms: u64, room: usize) -> Found {
    let ordered = lane.destination.config.ordering.is_some();
    let name = lane.destination.name();
    let mut found = Found::default();
    // Seqs taken into `due` and seqs stepped over, both skipped by the next
    // read: kept as they grow, not rebuilt each pass.
    let mut taken: HashSet<u64> = HashSet::new();
    let mut waiting: HashSet<u64> = HashSet::new();
    while found.due.len() < room && waiting.len() <= MAX_WAITING_SCAN {
        let read = store.due(name, now_ms, room - found.due.len(), |seq| {
            lane.in_flight.contains(&seq) || waiting.contains(&seq) || taken.contains(&seq)
        });
        let (batch, more) = match read {
            Ok(read) => read,
            Err(e) => {
                tracing::error!(destination = name, error = %e.report(), "cannot read the schedule; retrying soon");
                found.failed = true;
                return found;
            }
        };
        found.next = more;
        let full = batch.len();
        for entry in batch {
            match ordered.then(|| store.waits_for_its_key(entry.seq)) {
                Some(Err(e)) => {
                    tracing::error!(destination = name, error = %e.report(), "cannot read an ordering key; retrying soon");
                    found.failed = true;
                    return found;
                }
                Some(Ok(true)) => {
                    waiting.insert(entry.seq);
                }
                Some(Ok(false)) | None => {
                    taken.insert(entry.seq);
                    found.due.push(entry);
                }
            }
        }
        if full == 0 || found.next != Some(now_ms) {
            break;
        }
    }
    found
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
