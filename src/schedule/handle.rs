//! `DeliveryHandle`: what the admin surfaces, the alerter and the watchdog
//! may do to and see of the running scheduler (pause, resume, each
//! destination's state as of its last look, whether it runs). Holds no
//! lane itself: the scheduler publishes them here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::{Notify, mpsc};

use crate::deliver::Destination;

use crate::deliver::breaker::CircuitState;
use crate::store::{Store, StoreError};

/// Control of the running scheduler, for the admin surfaces.
#[derive(Clone)]
pub struct DeliveryHandle {
    pub(super) store: Store,
    /// Each configured destination's pause flag (a reload adds and
    /// removes them).
    pub(super) paused: Arc<RwLock<HashMap<String, Arc<AtomicBool>>>>,
    /// The destinations a reload configured, to the scheduler's loop.
    pub(super) reconfigure: mpsc::UnboundedSender<Reconfigure>,
    pub(super) wake: Arc<Notify>,
    pub(super) lanes: Arc<std::sync::Mutex<Vec<LaneStatus>>>,
    pub(super) alive: Arc<AtomicBool>,
}

/// A reload's destinations, every one the config now has.
pub struct Reconfigure {
    pub destinations: Vec<Wanted>,
    /// Pauses kept by the store, which win over a new destination's
    /// `paused` (as at start).
    pub paused_states: HashMap<String, bool>,
}

/// One destination a reload keeps or sets.
pub enum Wanted {
    /// Configured as before (by its route): its lane goes on as it is.
    Unchanged(String),
    /// New, or configured anew: built for this reload.
    Set(Box<Destination>),
}

impl Wanted {
    pub fn name(&self) -> &str {
        match self {
            Wanted::Unchanged(name) => name,
            Wanted::Set(destination) => destination.name(),
        }
    }
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
pub(super) struct AliveGuard(pub(super) Arc<AtomicBool>);

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
        self.flag(destination).map(|p| p.load(Ordering::Relaxed))
    }

    /// Delivers to `destinations` from the scheduler's next look on: a
    /// new one gets its lane, a changed one its new settings, one no
    /// longer there stops starting attempts. `false`: the scheduler is not
    /// running.
    pub fn reconfigure(&self, reconfigure: Reconfigure) -> bool {
        self.reconfigure.send(reconfigure).is_ok()
    }

    fn flag(&self, destination: &str) -> Option<Arc<AtomicBool>> {
        self.paused
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(destination)
            .cloned()
    }

    async fn set_paused(&self, destination: &str, paused: bool) -> Result<(), PauseError> {
        let flag = self
            .flag(destination)
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
