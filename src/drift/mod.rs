//! Payload drift: per (source, event type), the shape of the events' JSON
//! learned from traffic ([`shape`]), and each departure from it kept as a
//! [`Drift`]: `GET /api/shapes` lists them, `payload_drift_total` counts
//! them and a warn line names them (the pointer, never a value). A drift is
//! a warning, never a refusal: the provider is answered as before.
//!
//! Ingest offers each new event ([`Watch::offer`]). At most
//! [`LEARN_PER_SECOND`] events a second per shape are learned, off the
//! request path, by one task ([`Learner::run`]): the cost is bounded
//! whatever the rate. In a burst some events go unlearned; a field that
//! went missing is still seen in the next learned event that lacks it.
//!
//! Bounded: [`MAX_SHAPES`] shapes of at most [`shape::MAX_FIELDS`] pointers,
//! the newest [`MAX_DRIFTS`] departures, a queue of [`QUEUE`] events (when
//! full an event is skipped and counted).

pub mod shape;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use shape::{Change, Shape};

/// Events learned per second per (source, event type).
pub const LEARN_PER_SECOND: u32 = 50;
/// Shapes kept; events of a new (source, type) past it are not learned.
pub const MAX_SHAPES: usize = 512;
/// Departures kept, newest last.
pub const MAX_DRIFTS: usize = 1000;
/// Events waiting to be learned.
pub const QUEUE: usize = 1024;

/// One departure of one event from its shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drift {
    pub source: String,
    pub event_type: String,
    pub pointer: String,
    pub change: Change,
    /// The types learned before, `|`-joined (empty for an added field).
    pub was: String,
    /// The type in this event (empty for a missing field).
    pub now: String,
    /// When the event that showed it was received (unix ms).
    pub at_ms: u64,
    /// That event's public id.
    pub event: String,
}

/// What is learned: every shape, and the departures kept.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Learned {
    pub shapes: BTreeMap<(String, String), Shape>,
    pub drifts: VecDeque<Drift>,
}

/// An event offered for learning.
struct Offered {
    source: String,
    event_type: String,
    body: Bytes,
    event: String,
    at_ms: u64,
}

/// Ingest's side: offers events, cheaply, and never waits.
#[derive(Clone)]
pub struct Watch {
    queue: mpsc::Sender<Offered>,
    /// Per (source, type): the second and how many were offered in it.
    budget: Arc<Mutex<HashMap<(String, String), (u64, u32)>>>,
}

impl Watch {
    /// Offers a new event for learning: taken when its shape's budget for
    /// this second and the queue have room. Whether it was taken.
    pub fn offer(&self, source: &str, event_type: &str, body: &Bytes, event: &str, at_ms: u64) -> bool {
        let second = at_ms / 1000;
        {
            let mut budget = self.budget.lock().unwrap_or_else(|p| p.into_inner());
            let slot = budget
                .entry((source.to_owned(), event_type.to_owned()))
                .or_insert((second, 0));
            if slot.0 != second {
                *slot = (second, 0);
            }
            if slot.1 >= LEARN_PER_SECOND {
                return false;
            }
            slot.1 += 1;
        }
        self.queue
            .try_send(Offered {
                source: source.to_owned(),
                event_type: event_type.to_owned(),
                body: body.clone(),
                event: event.to_owned(),
                at_ms,
            })
            .is_ok()
    }
}

/// The task's side: learns what is offered.
pub struct Learner {
    queue: mpsc::Receiver<Offered>,
    learned: Arc<Mutex<Learned>>,
}

/// A watch and its learner, starting from what was `learned` before.
pub fn watch(learned: Learned) -> (Watch, Learner, Arc<Mutex<Learned>>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let learned = Arc::new(Mutex::new(learned));
    (
        Watch {
            queue: tx,
            budget: Arc::default(),
        },
        Learner {
            queue: rx,
            learned: learned.clone(),
        },
        learned,
    )
}

impl Learned {
    /// Learns one event's body; the departures it showed, also kept.
    /// A body that is not a JSON object or array teaches nothing.
    fn learn(&mut self, offered: &Offered) -> Vec<Drift> {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&offered.body) else {
            return Vec::new();
        };
        if !(value.is_object() || value.is_array()) {
            return Vec::new();
        }
        let key = (offered.source.clone(), offered.event_type.clone());
        if !self.shapes.contains_key(&key) && self.shapes.len() >= MAX_SHAPES {
            return Vec::new();
        }
        let departures = self.shapes.entry(key).or_default().learn(&value);
        let drifts: Vec<Drift> = departures
            .into_iter()
            .map(|d| Drift {
                source: offered.source.clone(),
                event_type: offered.event_type.clone(),
                pointer: d.pointer,
                change: d.change,
                was: d.was.names(),
                now: d.now.names(),
                at_ms: offered.at_ms,
                event: offered.event.clone(),
            })
            .collect();
        for drift in &drifts {
            if self.drifts.len() >= MAX_DRIFTS {
                self.drifts.pop_front();
            }
            self.drifts.push_back(drift.clone());
        }
        drifts
    }
}

impl Learner {
    /// Learns until the watch is dropped; each departure is logged.
    pub async fn run(mut self) {
        while let Some(offered) = self.queue.recv().await {
            let drifts = self
                .learned
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .learn(&offered);
            for d in drifts {
                tracing::warn!(
                    source = d.source,
                    event_type = d.event_type,
                    pointer = d.pointer,
                    change = ?d.change,
                    was = d.was,
                    now = d.now,
                    event = d.event,
                    "an event's payload departs from what its source sent before"
                );
            }
        }
    }
}
