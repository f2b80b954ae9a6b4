//! Format 1: the serialized form of every database row and log entry, and
//! the conversions from and to the domain types.
//!
//! Its bytes are exactly those the builds before versioned records wrote
//! (their rows already began with version byte 1; their log frames, "format
//! 0", held these entries with no version byte), so everything those builds
//! left decodes with these types. Frozen: a type here is never changed. A new
//! form is a new module (`v2.rs`) whose decoder also reads this one.
//!
//! Postcard is not self-describing: fields are read in declaration order
//! and enum variants by their index, so the order of both is the format.
//! Strings are `Cow` so that encoding borrows from the domain value (no copy
//! on the write path) while decoding owns.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::super::entry::Entry;
use super::super::schema::{
    Attempt, AttemptClass, DeadLetter, EventRecord, EventState, Note, Status,
};
use super::super::types::{Change, Finish, Initial, Next, Route};

// ---------------------------------------------------------------- rows

/// A `state` row: one delivery's mutable state.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct StateV1<'a> {
    status: StatusV1,
    source: Cow<'a, str>,
    event_type: Option<Cow<'a, str>>,
    attempts: u32,
    total_attempts: u32,
    round_started_ms: u64,
    due_ms: Option<u64>,
    ordering_key: Option<Cow<'a, str>>,
    delivered_ms: Option<u64>,
    dead: Option<DeadLetterV1<'a>>,
    note: Option<NoteV1<'a>>,
    replays: u32,
    expires_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) enum StatusV1 {
    Pending,
    Held,
    Delivered,
    Dead,
    Ignored,
    Filtered,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct DeadLetterV1<'a> {
    reason: Cow<'a, str>,
    at_ms: u64,
    last_status: Option<u16>,
}

/// A `erased` row, and a state's note.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct NoteV1<'a> {
    text: Cow<'a, str>,
    at_ms: u64,
}

/// An `attempts` row, and the attempt of a logged [`FinishV1`].
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AttemptV1<'a> {
    started_ms: u64,
    latency_ms: u64,
    class: AttemptClassV1,
    status: Option<u16>,
    error: Option<Cow<'a, str>>,
    response_snippet: Option<Cow<'a, str>>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) enum AttemptClassV1 {
    Delivered,
    RetryableStatus,
    RejectedStatus,
    Timeout,
    Connect,
    Transport,
    Interrupted,
}

/// An `events` row's postcard bytes (after the version and codec bytes), as
/// written: borrowed from the event being stored.
#[derive(Serialize)]
pub struct EventV1<'a> {
    pub source: &'a str,
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    pub received_at_ms: u64,
    pub content_type: Option<&'a str>,
    pub headers: &'a [(String, String)],
    #[serde(with = "serde_bytes")]
    pub body: &'a [u8],
}

/// The same bytes as read: borrowed from the row (or from the buffer it was
/// decompressed into), so a search reads an event without an allocation per
/// field.
#[derive(Debug, Deserialize)]
pub struct EventViewV1<'a> {
    pub source: &'a str,
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    pub received_at_ms: u64,
    pub content_type: Option<&'a str>,
    #[serde(borrow)]
    pub headers: Vec<(&'a str, &'a str)>,
    #[serde(with = "serde_bytes")]
    pub body: &'a [u8],
}

// ---------------------------------------------------------------- log entries

/// One entry of a log frame: what one job changed.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum EntryV1<'a> {
    Ingest {
        seq: u64,
        initial: InitialV1<'a>,
        #[serde(borrow, with = "serde_bytes")]
        record: Cow<'a, [u8]>,
    },
    Duplicate {
        received_ms: u64,
        #[serde(borrow)]
        source: Cow<'a, str>,
    },
    Claim {
        seq: u64,
        started_ms: u64,
    },
    Finish(FinishV1<'a>),
    Change {
        seq: u64,
        change: ChangeV1<'a>,
        now_ms: u64,
    },
    Sweep {
        now_ms: u64,
        /// A `usize` in format 0: postcard writes both as the same varint.
        limit: u64,
    },
    SetMeta {
        #[serde(borrow)]
        key: Cow<'a, str>,
        #[serde(borrow, with = "serde_bytes")]
        value: Cow<'a, [u8]>,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) enum InitialV1<'a> {
    Deliver,
    Ordered(Cow<'a, str>),
    Hold,
    Filtered,
    Routes(Vec<RouteV1<'a>>),
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct RouteV1<'a> {
    destination: Cow<'a, str>,
    ordering_key: Option<Cow<'a, str>>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct FinishV1<'a> {
    seq: u64,
    attempt: AttemptV1<'a>,
    next: NextV1<'a>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) enum NextV1<'a> {
    Delivered {
        at_ms: u64,
    },
    RetryAt {
        due_ms: u64,
    },
    Dead {
        reason: Cow<'a, str>,
        at_ms: u64,
        release_key: bool,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) enum ChangeV1<'a> {
    Replay,
    Ignore { note: Cow<'a, str> },
    Erase { note: Cow<'a, str> },
    ReplayTo { destination: Cow<'a, str> },
}

// ---------------------------------------------------------------- to the format

fn borrowed(s: &Option<String>) -> Option<Cow<'_, str>> {
    s.as_deref().map(Cow::Borrowed)
}

fn owned(s: Option<Cow<'_, str>>) -> Option<String> {
    s.map(Cow::into_owned)
}

impl<'a> From<&'a EventState> for StateV1<'a> {
    fn from(s: &'a EventState) -> Self {
        StateV1 {
            status: s.status.into(),
            source: Cow::Borrowed(&s.source),
            event_type: borrowed(&s.event_type),
            attempts: s.attempts,
            total_attempts: s.total_attempts,
            round_started_ms: s.round_started_ms,
            due_ms: s.due_ms,
            ordering_key: borrowed(&s.ordering_key),
            delivered_ms: s.delivered_ms,
            dead: s.dead.as_ref().map(|d| DeadLetterV1 {
                reason: Cow::Borrowed(&d.reason),
                at_ms: d.at_ms,
                last_status: d.last_status,
            }),
            note: s.note.as_ref().map(NoteV1::from),
            replays: s.replays,
            expires_ms: s.expires_ms,
        }
    }
}

impl From<Status> for StatusV1 {
    fn from(s: Status) -> Self {
        match s {
            Status::Pending => StatusV1::Pending,
            Status::Held => StatusV1::Held,
            Status::Delivered => StatusV1::Delivered,
            Status::Dead => StatusV1::Dead,
            Status::Ignored => StatusV1::Ignored,
            Status::Filtered => StatusV1::Filtered,
        }
    }
}

impl<'a> From<&'a Note> for NoteV1<'a> {
    fn from(n: &'a Note) -> Self {
        NoteV1 {
            text: Cow::Borrowed(&n.text),
            at_ms: n.at_ms,
        }
    }
}

impl<'a> From<&'a Attempt> for AttemptV1<'a> {
    fn from(a: &'a Attempt) -> Self {
        AttemptV1 {
            started_ms: a.started_ms,
            latency_ms: a.latency_ms,
            class: a.class.into(),
            status: a.status,
            error: borrowed(&a.error),
            response_snippet: borrowed(&a.response_snippet),
        }
    }
}

impl From<AttemptClass> for AttemptClassV1 {
    fn from(c: AttemptClass) -> Self {
        match c {
            AttemptClass::Delivered => AttemptClassV1::Delivered,
            AttemptClass::RetryableStatus => AttemptClassV1::RetryableStatus,
            AttemptClass::RejectedStatus => AttemptClassV1::RejectedStatus,
            AttemptClass::Timeout => AttemptClassV1::Timeout,
            AttemptClass::Connect => AttemptClassV1::Connect,
            AttemptClass::Transport => AttemptClassV1::Transport,
            AttemptClass::Interrupted => AttemptClassV1::Interrupted,
        }
    }
}

impl<'a> EntryV1<'a> {
    /// `entry` in format 1, if format 1 has its kind (it has no key entries).
    pub(super) fn of(entry: &'a Entry<'_>) -> Option<Self> {
        Some(match entry {
            Entry::Ingest {
                seq,
                initial,
                record,
            } => EntryV1::Ingest {
                seq: *seq,
                initial: InitialV1::from(&**initial),
                record: Cow::Borrowed(record),
            },
            Entry::Duplicate {
                received_ms,
                source,
            } => EntryV1::Duplicate {
                received_ms: *received_ms,
                source: Cow::Borrowed(source),
            },
            Entry::Claim { seq, started_ms } => EntryV1::Claim {
                seq: *seq,
                started_ms: *started_ms,
            },
            Entry::Finish(f) => EntryV1::Finish(FinishV1 {
                seq: f.seq,
                attempt: AttemptV1::from(&f.attempt),
                next: match &f.next {
                    Next::Delivered { at_ms } => NextV1::Delivered { at_ms: *at_ms },
                    Next::RetryAt { due_ms } => NextV1::RetryAt { due_ms: *due_ms },
                    Next::Dead {
                        reason,
                        at_ms,
                        release_key,
                    } => NextV1::Dead {
                        reason: Cow::Borrowed(reason),
                        at_ms: *at_ms,
                        release_key: *release_key,
                    },
                },
            }),
            Entry::Change {
                seq,
                change,
                now_ms,
            } => EntryV1::Change {
                seq: *seq,
                change: match &**change {
                    Change::Replay => ChangeV1::Replay,
                    Change::Ignore { note } => ChangeV1::Ignore {
                        note: Cow::Borrowed(note),
                    },
                    Change::Erase { note } => ChangeV1::Erase {
                        note: Cow::Borrowed(note),
                    },
                    Change::ReplayTo { destination } => ChangeV1::ReplayTo {
                        destination: Cow::Borrowed(destination),
                    },
                },
                now_ms: *now_ms,
            },
            Entry::Sweep { now_ms, limit } => EntryV1::Sweep {
                now_ms: *now_ms,
                limit: *limit as u64,
            },
            Entry::SetMeta { key, value } => EntryV1::SetMeta {
                key: Cow::Borrowed(key),
                value: Cow::Borrowed(value),
            },
            Entry::Key { .. } | Entry::KeyWrite(_) | Entry::Interrupted | Entry::Audit { .. } => {
                return None;
            }
        })
    }
}

impl<'a> From<&'a Initial> for InitialV1<'a> {
    fn from(i: &'a Initial) -> Self {
        match i {
            Initial::Deliver => InitialV1::Deliver,
            Initial::Ordered(key) => InitialV1::Ordered(Cow::Borrowed(key)),
            Initial::Hold => InitialV1::Hold,
            Initial::Filtered => InitialV1::Filtered,
            Initial::Routes(routes) => InitialV1::Routes(
                routes
                    .iter()
                    .map(|r| RouteV1 {
                        destination: Cow::Borrowed(&r.destination),
                        ordering_key: borrowed(&r.ordering_key),
                    })
                    .collect(),
            ),
        }
    }
}

// ---------------------------------------------------------------- from the format

impl From<StateV1<'_>> for EventState {
    fn from(s: StateV1<'_>) -> Self {
        EventState {
            status: s.status.into(),
            source: s.source.into_owned(),
            event_type: owned(s.event_type),
            attempts: s.attempts,
            total_attempts: s.total_attempts,
            round_started_ms: s.round_started_ms,
            due_ms: s.due_ms,
            ordering_key: owned(s.ordering_key),
            delivered_ms: s.delivered_ms,
            dead: s.dead.map(|d| DeadLetter {
                reason: d.reason.into_owned(),
                at_ms: d.at_ms,
                last_status: d.last_status,
            }),
            note: s.note.map(Note::from),
            replays: s.replays,
            expires_ms: s.expires_ms,
        }
    }
}

impl From<StatusV1> for Status {
    fn from(s: StatusV1) -> Self {
        match s {
            StatusV1::Pending => Status::Pending,
            StatusV1::Held => Status::Held,
            StatusV1::Delivered => Status::Delivered,
            StatusV1::Dead => Status::Dead,
            StatusV1::Ignored => Status::Ignored,
            StatusV1::Filtered => Status::Filtered,
        }
    }
}

impl From<NoteV1<'_>> for Note {
    fn from(n: NoteV1<'_>) -> Self {
        Note {
            text: n.text.into_owned(),
            at_ms: n.at_ms,
        }
    }
}

impl From<AttemptV1<'_>> for Attempt {
    fn from(a: AttemptV1<'_>) -> Self {
        Attempt {
            started_ms: a.started_ms,
            latency_ms: a.latency_ms,
            class: a.class.into(),
            status: a.status,
            error: owned(a.error),
            response_snippet: owned(a.response_snippet),
            round: 0,
            first_byte_ms: None,
            request_headers: Vec::new(),
            response_headers: Vec::new(),
        }
    }
}

impl From<AttemptClassV1> for AttemptClass {
    fn from(c: AttemptClassV1) -> Self {
        match c {
            AttemptClassV1::Delivered => AttemptClass::Delivered,
            AttemptClassV1::RetryableStatus => AttemptClass::RetryableStatus,
            AttemptClassV1::RejectedStatus => AttemptClass::RejectedStatus,
            AttemptClassV1::Timeout => AttemptClass::Timeout,
            AttemptClassV1::Connect => AttemptClass::Connect,
            AttemptClassV1::Transport => AttemptClass::Transport,
            AttemptClassV1::Interrupted => AttemptClass::Interrupted,
        }
    }
}

impl From<EventViewV1<'_>> for EventRecord {
    fn from(v: EventViewV1<'_>) -> Self {
        EventRecord {
            source: v.source.to_owned(),
            event_id: v.event_id.to_owned(),
            event_type: v.event_type.map(str::to_owned),
            received_at_ms: v.received_at_ms,
            content_type: v.content_type.map(str::to_owned),
            headers: v
                .headers
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            body: v.body.to_vec(),
        }
    }
}

impl<'a> From<EntryV1<'a>> for Entry<'a> {
    fn from(entry: EntryV1<'a>) -> Self {
        match entry {
            EntryV1::Ingest {
                seq,
                initial,
                record,
            } => Entry::Ingest {
                seq,
                initial: Cow::Owned(initial.into()),
                record,
            },
            EntryV1::Duplicate {
                received_ms,
                source,
            } => Entry::Duplicate {
                received_ms,
                source,
            },
            EntryV1::Claim { seq, started_ms } => Entry::Claim { seq, started_ms },
            EntryV1::Finish(f) => Entry::Finish(Cow::Owned(Finish {
                seq: f.seq,
                attempt: f.attempt.into(),
                next: match f.next {
                    NextV1::Delivered { at_ms } => Next::Delivered { at_ms },
                    NextV1::RetryAt { due_ms } => Next::RetryAt { due_ms },
                    NextV1::Dead {
                        reason,
                        at_ms,
                        release_key,
                    } => Next::Dead {
                        reason: reason.into_owned(),
                        at_ms,
                        release_key,
                    },
                },
            })),
            EntryV1::Change {
                seq,
                change,
                now_ms,
            } => Entry::Change {
                seq,
                change: Cow::Owned(match change {
                    ChangeV1::Replay => Change::Replay,
                    ChangeV1::Ignore { note } => Change::Ignore {
                        note: note.into_owned(),
                    },
                    ChangeV1::Erase { note } => Change::Erase {
                        note: note.into_owned(),
                    },
                    ChangeV1::ReplayTo { destination } => Change::ReplayTo {
                        destination: destination.into_owned(),
                    },
                }),
                now_ms,
            },
            EntryV1::Sweep { now_ms, limit } => Entry::Sweep {
                now_ms,
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            },
            EntryV1::SetMeta { key, value } => Entry::SetMeta { key, value },
        }
    }
}

impl From<InitialV1<'_>> for Initial {
    fn from(i: InitialV1<'_>) -> Self {
        match i {
            InitialV1::Deliver => Initial::Deliver,
            InitialV1::Ordered(key) => Initial::Ordered(key.into_owned()),
            InitialV1::Hold => Initial::Hold,
            InitialV1::Filtered => Initial::Filtered,
            InitialV1::Routes(routes) => Initial::Routes(
                routes
                    .into_iter()
                    .map(|r| Route {
                        destination: r.destination.into_owned(),
                        ordering_key: owned(r.ordering_key),
                    })
                    .collect(),
            ),
        }
    }
}
