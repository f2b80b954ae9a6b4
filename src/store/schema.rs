//! The on-disk shape: tables, keys and record encodings.
//!
//! Every hot query is a range scan or a point lookup on a small key.
//!
//! An event owns a block of consecutive keys: its seq `e` and one key per
//! delivery, `e`, `e + 1`, … (one for each destination that takes it; one,
//! `e` itself, for a held or filtered event). The next event's seq follows
//! the block. So the deliveries of `e` are the `state` rows from `e` up to the
//! next `events` key, the event of a delivery key `k` is the last `events`
//! key at or below `k`, and every table keyed by a delivery key keeps one
//! event's deliveries side by side. A schema-5 event (one destination) is a
//! block of one: its seq is its delivery key, so old data reads unchanged.
//! Rows of a delivery exist only while its event's `events` row does: an
//! event is swept whole.
//!
//! - `events`   seq → record. Sequential keys: inserts append to the rightmost
//!   leaf instead of dirtying a random page each. Immutable once written.
//!   From schema 8 the row holds the record's place in `pack`; older rows
//!   and erased events' small records are the record itself.
//! - `pack`     chunk number → one page of record bytes (see [`super::pack`]):
//!   the records of `events`, end to end, so pages are full.
//! - `state`    delivery key → small mutable delivery state, so status
//!   changes never rewrite the payload. Its `source` field is the route: the
//!   destination's queue name (see [`route_source`]).
//! - `dedupe`   seq → (fingerprint, received_ms). The durable log of dedupe
//!   keys, appended in seq order (see [`super::dedupe`] for why it is not
//!   keyed by event id). Seq order is receipt order, so it doubles as the
//!   sweeper's expiry index for dedupe keys: expired keys are a prefix.
//!
//! Below, "seq" in a key is the delivery key except in `events`, `dedupe`,
//! `dedupe_kept` and `erased`, which are per event.
//!
//! - `schedule` (destination, due_ms, seq) → (). Each destination's queue:
//!   the scheduler ranges from its start to now, one destination at a time,
//!   so a paused or failing destination's backlog is never walked.
//! - `leases`   seq → attempt start. An attempt in flight. Written before the
//!   request goes out, removed with its outcome; a lease found at open is an
//!   attempt interrupted by a crash (recorded as such, the event stays due).
//! - `attempts` (seq, n) → one attempt's outcome. History, never rewritten.
//! - `dlq`      (destination, seq) → (). Dead-lettered events, by destination.
//! - `expiry`   (at_ms, seq) → (). When a finished event (delivered, dead,
//!   ignored) may be swept; `state.expires_ms` says which entry is current,
//!   so an entry left behind by a replay never deletes the event early.
//! - `ordered`  (destination, ordering key, seq) → (). The line of each key:
//!   events not yet done with (pending, or dead and blocking). An event goes
//!   out only when it is first in its key's line.
//! - `meta`     name → value: schema version and the database's id tag.
//! - `erased`   seq → [`Note`]: the event's payload and headers were deleted
//!   on request (its record keeps ids and times, its dedupe key stays).
//!
//! Secondary indexes and maintained counts (see [`super::index`]), written
//! in the same transaction as the `state` row they follow:
//! - `by_type` (source, event type, status, seq) → (). Lists, newest first:
//!   a list by status or source merges the ranges of the (source, type)
//!   pairs that `counts` holds in that status (schema 4 kept `by_status` and
//!   `by_source` as well; each table an event touches is pages in every
//!   commit, and these two answered nothing `by_type` cannot).
//! - `pending_since` (source, round start, seq) → (): the first entry of a
//!   source is its oldest pending event.
//! - `counts` (source, event type, tally) → events in that tally now.
//! - `minutes` (minute, source, kind) → how many in that minute: received,
//!   duplicates, delivered, dead-lettered; kept [`super::index::MINUTES_KEPT`].
//!
//! Rows hold bytes of [`super::format`]: each record's own serialized type,
//! with a version. The types below are the domain's, converted there.

use redb::TableDefinition;

pub const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
pub const PACK: TableDefinition<u64, &[u8]> = TableDefinition::new("pack");
pub const STATE: TableDefinition<u64, &[u8]> = TableDefinition::new("state");
pub const DEDUPE: TableDefinition<u64, (u128, u64)> = TableDefinition::new("dedupe");
/// Dedupe keys past their TTL whose event is still pending or held: kept
/// (live in the index) until the event finishes, then back in `dedupe`.
pub const DEDUPE_KEPT: TableDefinition<u64, (u128, u64)> = TableDefinition::new("dedupe_kept");
pub const SCHEDULE: TableDefinition<(&str, u64, u64), ()> = TableDefinition::new("schedule");
pub const LEASES: TableDefinition<u64, u64> = TableDefinition::new("leases");
pub const ATTEMPTS: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("attempts");
pub const DLQ: TableDefinition<(&str, u64), ()> = TableDefinition::new("dlq");
pub const EXPIRY: TableDefinition<(u64, u64), ()> = TableDefinition::new("expiry");
pub const ORDERED: TableDefinition<(&str, &str, u64), ()> = TableDefinition::new("ordered");
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub const BY_TYPE: TableDefinition<(&str, &str, u8, u64), ()> = TableDefinition::new("by_type");
pub const PENDING_SINCE: TableDefinition<(&str, u64, u64), ()> =
    TableDefinition::new("pending_since");
pub const COUNTS: TableDefinition<(&str, &str, u8), u64> = TableDefinition::new("counts");
pub const MINUTES: TableDefinition<(u64, &str, u8), u64> = TableDefinition::new("minutes");
pub const ERASED: TableDefinition<u64, &[u8]> = TableDefinition::new("erased");
/// Idempotency keys ([`super::types::keys`]), append-only: (namespace, seq) →
/// (the key's fingerprint, its row). A change writes the key's new row
/// under the next seq and removes the old one, which is near the end too:
/// keyed by the key itself, every new key was a random insert that dirtied
/// its own leaf (at 5M keys, 5.9 KB written per claim and complete). The
/// in-memory index ([`super::dedupe`]) finds a key's seq by fingerprint.
pub const KEY_LOG: TableDefinition<(&str, u64), (u128, &[u8])> = TableDefinition::new("key_log");
/// (expires_ms, namespace, seq) → (): when a key may be swept.
pub const KEY_DUE: TableDefinition<(u64, &str, u64), ()> = TableDefinition::new("key_due");
/// (namespace, seq) → (): the keys claimed and not done (few), so a list
/// of them reads only them.
pub const KEY_CLAIMED: TableDefinition<(&str, u64), ()> = TableDefinition::new("key_claimed");
/// The audit trail ([`super::types::audit`]): id → (when it was asked, the
/// record). Ids count up, so the oldest records, the sweeper's, are the
/// start; the time beside the row lets it judge them undecoded. Opened only
/// by the jobs that write it, and created by the first: a file no change
/// was recorded in has none, and a build before it ignores it.
pub const AUDIT: TableDefinition<u64, (u64, &[u8])> = TableDefinition::new("audit");
/// Schema 6's key tables: (namespace, key) → row (version 2), and
/// (expires_ms, namespace, key) → (). Read once by the migration to 7.
pub const KEYS_6: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("keys");
pub const KEY_EXPIRY_6: TableDefinition<(u64, &str, &str), ()> = TableDefinition::new("key_expiry");

/// The schema this build writes. Bump it with a migration when a table's key
/// or a record's layout changes.
pub const SCHEMA_VERSION: u8 = 8;
/// The oldest schema this build migrates at open: 3 → 7 builds the indexes
/// and counts; 4 → 7 drops [`DROPPED_IN_5`]; 5 → 6 changes no row (a
/// schema-5 event is a block of one delivery) but marks the file, so a
/// schema-5 build refuses it instead of misreading a block of several;
/// 6 → 7 moves idempotency keys into [`KEY_LOG`]; 7 → 8 adds [`PACK`] (old
/// `events` rows keep their records, read as before) and marks the file, so
/// a schema-7 build refuses the rows it cannot read.
pub const MIGRATES_FROM: u8 = 3;
/// Index tables of schema 4 that schema 5 answers from `by_type` and `counts`.
pub const DROPPED_IN_5: [&str; 2] = ["by_status", "by_source"];
pub const META_SCHEMA: &str = "schema_version";
/// A random tag made when the database is created. It is part of every public
/// event id, so a database recreated from scratch never hands the app a
/// `webhook-id` it has already seen for a different event.
pub const META_TAG: &str = "tag";

/// An event as received: immutable once stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub source: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub received_at_ms: u64,
    pub content_type: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Where an event is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Waiting for delivery: first try or a retry (its entry is in `schedule`).
    Pending,
    /// Its source has no destination: kept in the inbox, not delivered.
    Held,
    /// The destination answered 2xx.
    Delivered,
    /// Failed for good (its entry is in `dlq`) until replayed or ignored.
    Dead,
    /// A person marked it ignored, with a note.
    Ignored,
    /// No destination's filter took it: never delivered (unless replayed),
    /// swept like a delivered event.
    Filtered,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Pending,
        Status::Held,
        Status::Delivered,
        Status::Dead,
        Status::Ignored,
        Status::Filtered,
    ];

    /// Its byte in index keys. Stored: never renumber.
    pub fn code(self) -> u8 {
        match self {
            Status::Pending => 0,
            Status::Held => 1,
            Status::Delivered => 2,
            Status::Dead => 3,
            Status::Ignored => 4,
            Status::Filtered => 5,
        }
    }

    /// Still to be delivered or kept: never swept, its dedupe key live.
    pub fn is_live(self) -> bool {
        matches!(self, Status::Pending | Status::Held)
    }

    /// Not delivered yet and meant to be: what an ignore (or an erasure)
    /// stops.
    pub fn is_undelivered(self) -> bool {
        matches!(self, Status::Pending | Status::Dead | Status::Held)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Held => "held",
            Status::Delivered => "delivered",
            Status::Dead => "dead",
            Status::Ignored => "ignored",
            Status::Filtered => "filtered",
        }
    }
}

/// The source of a route: a source's own route (its unnamed destination,
/// and its held and filtered events) is its name; a named destination's is
/// `source.name` (source names hold no `.`).
pub fn route_source(route: &str) -> &str {
    route.split_once('.').map_or(route, |(source, _)| source)
}

/// The mutable part of one delivery of an event (one destination's), small
/// so that updates are cheap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventState {
    pub status: Status,
    /// The route: the destination's queue name, which `schedule`, `dlq`,
    /// `ordered` and the indexes are keyed by ([`route_source`] gives the
    /// source). Named `source` since schema 1, when the two were one.
    pub source: String,
    /// The provider's event type, copied here so stats never read payloads.
    pub event_type: Option<String>,
    /// Attempts in the current round (reset by a replay).
    pub attempts: u32,
    /// Rows in `attempts` for this event, across rounds.
    pub total_attempts: u32,
    /// When the current round began (receipt, or the last replay): `max_age`
    /// counts from here.
    pub round_started_ms: u64,
    /// Its key in `schedule` while pending.
    pub due_ms: Option<u64>,
    pub ordering_key: Option<String>,
    pub delivered_ms: Option<u64>,
    pub dead: Option<DeadLetter>,
    pub note: Option<Note>,
    pub replays: u32,
    /// When the sweeper may delete the event (its `expiry` entry), once it
    /// is delivered, dead or ignored; `None` while it is pending or held.
    pub expires_ms: Option<u64>,
}

impl EventState {
    pub fn new(
        source: &str,
        event_type: Option<&str>,
        status: Status,
        now_ms: u64,
        ordering_key: Option<String>,
    ) -> Self {
        EventState {
            status,
            source: source.to_owned(),
            event_type: event_type.map(str::to_owned),
            attempts: 0,
            total_attempts: 0,
            round_started_ms: now_ms,
            due_ms: (status == Status::Pending).then_some(now_ms),
            ordering_key,
            delivered_ms: None,
            dead: None,
            note: None,
            replays: 0,
            expires_ms: None,
        }
    }
}

/// Why an event was dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub reason: String,
    pub at_ms: u64,
    pub last_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub text: String,
    pub at_ms: u64,
}

/// What one attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptClass {
    /// 2xx.
    Delivered,
    /// A status the rules retry (by default 408, 425, 429, 5xx).
    RetryableStatus,
    /// Any other status: the app refused the event.
    RejectedStatus,
    /// No complete answer within the timeout.
    Timeout,
    /// Could not connect (refused, DNS, TLS handshake).
    Connect,
    /// The request or the answer broke off.
    Transport,
    /// hookinbox stopped while the attempt was in flight: the destination may
    /// or may not have received it.
    Interrupted,
}

impl AttemptClass {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptClass::Delivered => "delivered",
            AttemptClass::RetryableStatus => "retryable_status",
            AttemptClass::RejectedStatus => "rejected_status",
            AttemptClass::Timeout => "timeout",
            AttemptClass::Connect => "connect",
            AttemptClass::Transport => "transport",
            AttemptClass::Interrupted => "interrupted",
        }
    }
}

/// One delivery attempt, as recorded in `attempts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub started_ms: u64,
    pub latency_ms: u64,
    pub class: AttemptClass,
    pub status: Option<u16>,
    /// What went wrong, in words (no secrets, no body).
    pub error: Option<String>,
    /// The start of the destination's answer, for people reading the DLQ.
    pub response_snippet: Option<String>,
    /// What the delivery had been replayed when it was made: 0 for the
    /// first round of attempts, 1 after the first replay, …
    pub round: u32,
    /// From the start to the answer's status and headers (the rest of
    /// `latency_ms` read its body); `None`: no answer.
    pub first_byte_ms: Option<u64>,
    /// The request's headers that the event does not determine (the
    /// signature's start, the user agent, forwarded provider headers),
    /// each secret or signature cut to its first characters
    /// (`deliver::kept`; `standard_webhooks::Message::sent` rebuilds the rest).
    /// Empty for an attempt recorded before they were kept.
    pub request_headers: Vec<(String, String)>,
    /// The answer's headers (at most `deliver::MAX_ANSWER_HEADERS`), cut
    /// the same way.
    pub response_headers: Vec<(String, String)>,
}
