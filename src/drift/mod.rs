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
//! full an event is skipped and counted). What was learned outlives a
//! restart: the store's `meta` row `drift` (postcard behind a version
//! byte), written at most every [`KEEP_EVERY`] when it changed, and at stop.

pub mod shape;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::store::Store;
use crate::supervise::TaskError;

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

/// Per source, per event type: a second, and the events offered in it.
/// Nested so that an offer looks up by borrowed names and allocates only
/// for a pair it has not seen.
type Budgets = HashMap<String, HashMap<String, (u64, u32)>>;

/// Ingest's side: offers events, cheaply, and never waits.
#[derive(Clone)]
pub struct Watch {
    queue: mpsc::Sender<Offered>,
    /// Per (source, type): the second and how many were offered in it.
    budget: Arc<Mutex<Budgets>>,
    metrics: Metrics,
}

impl Watch {
    /// Offers a new event for learning. It is taken when its shape's
    /// budget for this second and the queue have room; else it is counted
    /// as skipped.
    pub fn offer(&self, source: &str, event_type: &str, body: &Bytes, event: &str, at_ms: u64) {
        if !self.within_budget(source, event_type, at_ms / 1000) {
            self.metrics.drift_skipped(source);
            return;
        }
        let offered = Offered {
            source: source.to_owned(),
            event_type: event_type.to_owned(),
            body: body.clone(),
            event: event.to_owned(),
            at_ms,
        };
        if self.queue.try_send(offered).is_err() {
            self.metrics.drift_skipped(source);
        }
    }

    fn within_budget(&self, source: &str, event_type: &str, second: u64) -> bool {
        let mut budget = self.budget.lock().unwrap_or_else(|p| p.into_inner());
        if !budget
            .get(source)
            .is_some_and(|t| t.contains_key(event_type))
        {
            budget
                .entry(source.to_owned())
                .or_default()
                .insert(event_type.to_owned(), (second, 0));
        }
        let slot = budget
            .get_mut(source)
            .and_then(|t| t.get_mut(event_type))
            .expect("inserted above");
        if slot.0 != second {
            *slot = (second, 0);
        }
        slot.1 += 1;
        slot.1 <= LEARN_PER_SECOND
    }
}

/// How often what was learned is written to the store, when it changed.
pub const KEEP_EVERY: Duration = Duration::from_secs(60);

/// The first byte of what is kept: the encoding's version.
const KEPT_VERSION: u8 = 1;

/// The task's side: learns what is offered and keeps it in the store.
pub struct Learner {
    queue: mpsc::Receiver<Offered>,
    learned: Arc<Mutex<Learned>>,
    store: Store,
    metrics: Metrics,
    /// Learned since it was last kept.
    changed: bool,
}

/// A watch and its learner. The shared [`Learned`] is what the admin API
/// reads: empty until the learner starts and reads what `store` kept.
pub fn watch(store: Store, metrics: Metrics) -> (Watch, Learner, Arc<Mutex<Learned>>) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let learned = Arc::new(Mutex::new(Learned::default()));
    let watch = Watch {
        queue: tx,
        budget: Arc::default(),
        metrics: metrics.clone(),
    };
    let learner = Learner {
        queue: rx,
        learned: learned.clone(),
        store,
        metrics,
        changed: false,
    };
    (watch, learner, learned)
}

/// What `store` kept (nothing, and a warn line, when it cannot be read).
fn kept(store: &Store) -> Learned {
    match store.drift_state() {
        Ok(Some(bytes)) => decode(&bytes).unwrap_or_else(|| {
            tracing::warn!("payload drift: what was learned before cannot be read; learning again");
            Learned::default()
        }),
        Ok(None) => Learned::default(),
        Err(e) => {
            tracing::warn!(error = %e.report(), "payload drift: cannot read what was learned before; learning again");
            Learned::default()
        }
    }
}

fn encode(learned: &Learned) -> Vec<u8> {
    let mut out = vec![KEPT_VERSION];
    out.extend(postcard::to_allocvec(learned).expect("what was learned serialises"));
    out
}

fn decode(bytes: &[u8]) -> Option<Learned> {
    match bytes.split_first() {
        Some((&KEPT_VERSION, rest)) => postcard::from_bytes(rest).ok(),
        _ => None,
    }
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
    /// Learns until `stop`, keeping what it learned every [`KEEP_EVERY`]
    /// and once more at the end. Starts from what the store kept (nothing,
    /// and a warn line, when that cannot be read), read here rather than at
    /// start-up: a standby runs this at its promotion, after the primary it
    /// followed kept its last row.
    pub async fn run(mut self, stop: CancellationToken) -> Result<(), TaskError> {
        let store = self.store.clone();
        if let Ok(now) = tokio::task::spawn_blocking(move || kept(&store)).await {
            *self.learned.lock().unwrap_or_else(|p| p.into_inner()) = now;
        }
        let mut keep = tokio::time::interval(KEEP_EVERY);
        keep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        keep.tick().await;
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                _ = keep.tick() => self.keep().await,
                offered = self.queue.recv() => match offered {
                    Some(offered) => self.learn(&offered),
                    None => break,
                },
            }
        }
        self.keep().await;
        Ok(())
    }

    fn learn(&mut self, offered: &Offered) {
        let drifts = self
            .learned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .learn(offered);
        self.changed = true;
        for d in drifts {
            self.metrics.drift(&d.source, d.change);
            tracing::warn!(
                source = d.source,
                event_type = d.event_type,
                pointer = d.pointer,
                change = d.change.as_str(),
                was = d.was,
                now = d.now,
                event = d.event,
                "an event's payload departs from what its source sent before"
            );
        }
    }

    /// Writes what was learned to the store, if it changed since.
    async fn keep(&mut self) {
        if !self.changed {
            return;
        }
        let bytes = encode(&self.learned.lock().unwrap_or_else(|p| p.into_inner()));
        match self.store.set_drift_state(bytes).await {
            Ok(()) => self.changed = false,
            Err(e) => {
                tracing::warn!(error = %e.report(), "payload drift: cannot keep what was learned; trying again later")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(body: &str, event: &str) -> Offered {
        Offered {
            source: "shop".into(),
            event_type: "order.paid".into(),
            body: Bytes::copy_from_slice(body.as_bytes()),
            event: event.into(),
            at_ms: 1_000,
        }
    }

    #[test]
    fn what_is_kept_reads_back_and_another_version_is_refused() {
        let mut learned = Learned::default();
        for i in 0..shape::WARM {
            learned.learn(&offered(r#"{"a":1,"b":"x"}"#, &format!("e{i}")));
        }
        assert_eq!(learned.learn(&offered(r#"{"a":1}"#, "odd")).len(), 1);
        let bytes = encode(&learned);
        let back = decode(&bytes).expect("reads back");
        assert_eq!(back.shapes, learned.shapes);
        assert_eq!(back.drifts, learned.drifts);
        let mut other = bytes.clone();
        other[0] = KEPT_VERSION + 1;
        assert!(decode(&other).is_none());
        assert!(decode(&[]).is_none());
    }

    #[test]
    fn a_body_that_is_not_a_json_object_or_array_teaches_nothing() {
        let mut learned = Learned::default();
        for body in ["not json", "42", "\"text\""] {
            assert!(learned.learn(&offered(body, "e")).is_empty());
        }
        assert!(learned.shapes.is_empty());
    }

    #[test]
    fn the_newest_departures_are_kept_up_to_the_bound() {
        let mut learned = Learned::default();
        for i in 0..MAX_DRIFTS + 5 {
            learned.drifts.push_back(Drift {
                source: "shop".into(),
                event_type: "t".into(),
                pointer: format!("/f{i}"),
                change: Change::Added,
                was: String::new(),
                now: "number".into(),
                at_ms: 0,
                event: String::new(),
            });
            if learned.drifts.len() > MAX_DRIFTS {
                learned.drifts.pop_front();
            }
        }
        for i in 0..shape::WARM {
            learned.learn(&offered(r#"{"a":1}"#, &format!("e{i}")));
        }
        learned.learn(&offered(r#"{"a":1,"new":2}"#, "odd"));
        assert_eq!(learned.drifts.len(), MAX_DRIFTS);
        assert_eq!(learned.drifts.back().unwrap().pointer, "/new");
    }

    #[tokio::test]
    async fn each_shape_offers_at_most_its_rate_a_second_and_counts_the_rest() {
        let (tx, mut rx) = mpsc::channel(QUEUE);
        let metrics = Metrics::new();
        let watch = Watch {
            queue: tx,
            budget: Arc::default(),
            metrics: metrics.clone(),
        };
        let body = Bytes::from_static(b"{}");
        for _ in 0..LEARN_PER_SECOND + 10 {
            watch.offer("shop", "a", &body, "e", 5_000);
        }
        // Another type has its own budget; the next second starts again.
        watch.offer("shop", "b", &body, "e", 5_000);
        watch.offer("shop", "a", &body, "e", 6_000);
        let mut taken = 0;
        while rx.try_recv().is_ok() {
            taken += 1;
        }
        assert_eq!(taken, LEARN_PER_SECOND + 2);
        let text = metrics.encode(crate::metrics::Exposition::Prometheus);
        assert!(
            text.contains("hookinbox_drift_skipped_total{source=\"shop\"} 10"),
            "{text}"
        );
    }
}
