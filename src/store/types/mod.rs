//! The store's domain types: what callers hand to the store and get back
//! (how an event starts, what an attempt came to, a person's change, a
//! filter, an event as stored) and what the store's own files share. Plain
//! data: no redb, no I/O. How each is written to disk is `format`'s.

pub mod audit;
pub mod keys;

use super::schema::{self, Attempt, EventRecord, EventState};

/// How an event starts its life. Logged in the write-ahead log (as
/// [`format`] writes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Initial {
    /// Schema 5's form of `Routes` with one route, the source's own: read
    /// from a log an older build wrote.
    Deliver,
    /// Schema 5's ordered `Deliver`, read from an older build's log.
    Ordered(String),
    /// Its source has no destination: keep it in the inbox.
    Hold,
    /// No destination's filter takes it: stored, never delivered, swept
    /// after `payload_ttl` like a delivered event.
    Filtered,
    /// Deliver it to each of these destinations (at least one), each due
    /// now on its own queue: one delivery key per route, in this order.
    Routes(Vec<Route>),
}

impl Initial {
    /// The routes of a new event of `source`, as delivery keys will follow
    /// them: `(route, status, ordering key)`, one for each key of its block.
    pub fn starts<'a>(
        &'a self,
        source: &'a str,
    ) -> Vec<(&'a str, schema::Status, Option<&'a str>)> {
        use schema::Status;
        match self {
            Initial::Deliver => vec![(source, Status::Pending, None)],
            Initial::Ordered(key) => vec![(source, Status::Pending, Some(key.as_str()))],
            Initial::Hold => vec![(source, Status::Held, None)],
            Initial::Filtered => vec![(source, Status::Filtered, None)],
            Initial::Routes(routes) => routes
                .iter()
                .map(|r| {
                    (
                        r.destination.as_str(),
                        Status::Pending,
                        r.ordering_key.as_deref(),
                    )
                })
                .collect(),
        }
    }
}

/// One destination an event goes to, for [`Initial::Routes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The destination's queue name (see [`schema::route_source`]).
    pub destination: String,
    /// Deliver it after every earlier event of this key to this destination.
    pub ordering_key: Option<String>,
}

/// Where an ingested event landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ingested {
    /// Stored now, under this public id.
    New { id: String },
    /// Already stored within the dedupe TTL, under this public id.
    Duplicate { id: String },
}

/// A lease on one attempt, from [`Store::claim`](super::Store::claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    /// 1 for the first attempt of the current round.
    pub attempt: u32,
    /// When the current round began: `max_age` counts from here.
    pub round_started_ms: u64,
}

/// What an attempt came to and what happens next, for [`Store::finish`](super::Store::finish).
#[derive(Debug, Clone)]
pub struct Finish {
    pub seq: u64,
    pub attempt: Attempt,
    pub next: Next,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Delivered {
        at_ms: u64,
    },
    RetryAt {
        due_ms: u64,
    },
    Dead {
        reason: String,
        at_ms: u64,
        /// Let later events of its ordering key go on (`skip`), or hold
        /// them until it is replayed or ignored (`block`).
        release_key: bool,
    },
}

/// A person's change to one delivery of an event (`Erase`: to the event).
/// Logged in the write-ahead log (as [`format`] writes it).
#[derive(Debug, Clone)]
pub enum Change {
    /// Deliver again: attempts reset, history kept, same `webhook-id`.
    Replay,
    /// Stop delivering it; the note says why.
    Ignore { note: String },
    /// Delete its payload and headers for good (a privacy request): the ids,
    /// times, attempts, the note and its dedupe key stay, so a provider's
    /// resend is still a duplicate. What was still to be delivered is
    /// ignored with the same note.
    Erase { note: String },
    /// Deliver a held or filtered event to this destination (its route
    /// becomes the destination's), or replay a delivery already on it.
    ReplayTo { destination: String },
}

/// Why a change was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    #[error("no such event")]
    NotFound,
    #[error("an attempt is in flight; try again in a moment")]
    InFlight,
    #[error("the event {0}")]
    Conflict(&'static str),
}

/// Which events a listing (or a bulk change) takes. Empty fields match all.
/// `destination` and `status` are one delivery's: an event matches when one
/// of its deliveries does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub source: Option<String>,
    /// A route (a destination's queue name).
    pub destination: Option<String>,
    pub status: Option<schema::Status>,
    pub event_type: Option<String>,
    pub event_id: Option<String>,
    /// Received at or after, unix ms.
    pub from_ms: Option<u64>,
    /// Received before, unix ms.
    pub to_ms: Option<u64>,
}

impl EventFilter {
    /// The whole filter, checked on a loaded event. The indexes choose the
    /// candidates; this keeps the answer exact where an index is coarser
    /// (the time bounds, found by binary search over seq).
    pub fn matches(&self, record: &EventRecord, state: &EventState) -> bool {
        self.takes(state)
            && self
                .event_type
                .as_ref()
                .is_none_or(|t| record.event_type.as_deref() == Some(t.as_str()))
            && self.event_id.as_ref().is_none_or(|i| *i == record.event_id)
            && self.from_ms.is_none_or(|f| record.received_at_ms >= f)
            && self.to_ms.is_none_or(|t| record.received_at_ms < t)
    }

    /// The delivery's part of the filter: source, destination and status.
    pub(super) fn takes(&self, state: &EventState) -> bool {
        self.source
            .as_ref()
            .is_none_or(|s| s == schema::route_source(&state.source))
            && self.destination.as_ref().is_none_or(|d| *d == state.source)
            && self.status.is_none_or(|s| s == state.status)
    }
}

/// One delivery of an event: its key and state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub key: u64,
    pub state: EventState,
}

/// How much one search call may examine before it answers with what it
/// has found so far.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub events: u64,
    pub time: std::time::Duration,
}

/// One call's worth of a list or search.
#[derive(Debug, Default)]
pub struct SearchPage {
    pub events: Vec<StoredEvent>,
    /// Where the next call starts (`None`: nothing older is left to examine).
    pub cursor: Option<u64>,
    /// Events whose payload was read.
    pub examined: u64,
    /// Receipt time of the oldest event examined.
    pub scanned_back_to_ms: Option<u64>,
}

/// What [`super::Store::matching_ids`] found.
#[derive(Debug, Default)]
pub struct Matching {
    /// Each matching delivery's key and route, newest first.
    pub ids: Vec<(u64, String)>,
    /// More matched than the limit.
    pub more: bool,
    /// Payloads read (with a payload match).
    pub examined: u64,
    /// It stopped after reading as many payloads as it was given: what
    /// matched among the rest is not known.
    pub cut: bool,
}

/// What one sweep step removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Delivered events past `payload_ttl`: record, state and attempts.
    pub delivered: u64,
    /// Dead or ignored events past `dlq_ttl`.
    pub dead_or_ignored: u64,
    /// Dedupe keys past `dedupe_ttl`: a repeat of their event id is new again.
    pub dedupe_keys: u64,
    /// Per-minute counts older than `index::MINUTES_KEPT`.
    pub minute_buckets: u64,
    /// Idempotency keys past their expiry.
    pub keys: u64,
    /// Audit records past `audit_ttl`.
    pub audit: u64,
    /// Whether more is due: the step stopped at its limit.
    pub more: bool,
}

/// One entry of a destination's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    pub seq: u64,
    pub due_ms: u64,
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub seq: u64,
    pub id: String,
    pub record: EventRecord,
    /// The delivery asked about ([`Store::delivery`](super::Store::delivery)), else the first: the
    /// only one of an event with one destination (or held, or filtered).
    pub state: EventState,
    /// Every delivery of the event, by key (at least one); from
    /// [`Store::delivery`](super::Store::delivery), only the one asked about.
    pub deliveries: Vec<Delivery>,
    /// Its payload and headers were deleted on request, and why.
    pub erased: Option<schema::Note>,
}
