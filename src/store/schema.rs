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
//! Records are a version byte followed by postcard. Postcard is not
//! self-describing: a field added to a record means a new version byte and a
//! decoder for the old one. Event records add a codec byte after the version:
//! the postcard bytes are LZ4-compressed when that saves at least an eighth,
//! which cuts the pages each commit writes (see benches/ingest.rs).

use redb::TableDefinition;
use serde::{Deserialize, Serialize};

pub const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
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

/// The schema this build writes. Bump it with a migration when a table's key
/// or a record's layout changes.
pub const SCHEMA_VERSION: u8 = 6;
/// The oldest schema this build migrates at open: 3 → 6 builds the indexes
/// and counts; 4 → 6 drops [`DROPPED_IN_5`]; 5 → 6 changes no row (a
/// schema-5 event is a block of one delivery) but marks the file, so a
/// schema-5 build refuses it instead of misreading a block of several.
pub const MIGRATES_FROM: u8 = 3;
/// Index tables of schema 4 that schema 5 answers from `by_type` and `counts`.
pub const DROPPED_IN_5: [&str; 2] = ["by_status", "by_source"];
pub const META_SCHEMA: &str = "schema_version";
/// A random tag made when the database is created. It is part of every public
/// event id, so a database recreated from scratch never hands the app a
/// `webhook-id` it has already seen for a different event.
pub const META_TAG: &str = "tag";

const RECORD_V1: u8 = 1;
/// Codec byte of an event record: postcard bytes as they are.
const CODEC_PLAIN: u8 = 0;
/// Codec byte of an event record: LZ4 block, decompressed size first.
const CODEC_LZ4: u8 = 1;
/// Smaller records are stored plain: compressing them saves too little.
const COMPRESS_FROM: usize = 256;
/// No record decompresses to more than this (bodies are capped far below).
const MAX_RECORD: usize = 64 << 20;

/// An event as received: immutable once stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRecord {
    pub source: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub received_at_ms: u64,
    pub content_type: Option<String>,
    pub headers: Vec<(String, String)>,
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
}

/// The borrowed twin of [`EventRecord`], to encode without copying the body.
#[derive(Serialize)]
pub struct EventRecordRef<'a> {
    pub source: &'a str,
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    pub received_at_ms: u64,
    pub content_type: Option<&'a str>,
    pub headers: &'a [(String, String)],
    #[serde(with = "serde_bytes")]
    pub body: &'a [u8],
}

/// Where an event is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub reason: String,
    pub at_ms: u64,
    pub last_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub text: String,
    pub at_ms: u64,
}

/// What one attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub started_ms: u64,
    pub latency_ms: u64,
    pub class: AttemptClass,
    pub status: Option<u16>,
    /// What went wrong, in words (no secrets, no body).
    pub error: Option<String>,
    /// The start of the destination's answer, for people reading the DLQ.
    pub response_snippet: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("record version {0} is not one this build reads: upgrade hookinbox")]
    UnknownVersion(u8),
    #[error("empty record")]
    Empty,
    #[error("corrupt record")]
    Postcard(#[from] postcard::Error),
    #[error("corrupt record: {0}")]
    Codec(String),
}

pub fn encode<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    out.clear();
    out.push(RECORD_V1);
    // Serializing plain structs into a Vec cannot fail.
    let encoded =
        postcard::to_extend(value, std::mem::take(out)).expect("postcard encodes into a Vec");
    *out = encoded;
}

/// Encodes an event record: version, codec, then postcard bytes, compressed
/// when that pays. `scratch` keeps its allocation between calls.
pub fn encode_event(record: &EventRecordRef<'_>, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    scratch.clear();
    let plain =
        postcard::to_extend(record, std::mem::take(scratch)).expect("postcard encodes into a Vec");
    out.clear();
    out.push(RECORD_V1);
    if plain.len() >= COMPRESS_FROM {
        out.push(CODEC_LZ4);
        out.extend_from_slice(&(plain.len() as u32).to_le_bytes());
        let start = out.len();
        out.resize(
            start + lz4_flex::block::get_maximum_output_size(plain.len()),
            0,
        );
        let written = lz4_flex::block::compress_into(&plain, &mut out[start..])
            .expect("the output holds the worst case");
        out.truncate(start + written);
        if written + written / 8 < plain.len() {
            *scratch = plain;
            return;
        }
        out.truncate(1);
    }
    out.push(CODEC_PLAIN);
    out.extend_from_slice(&plain);
    *scratch = plain;
}

/// Decodes what [`encode_event`] wrote.
pub fn decode_event(bytes: &[u8]) -> Result<EventRecord, DecodeError> {
    let mut scratch = Vec::new();
    Ok(postcard::from_bytes(plain_event(bytes, &mut scratch)?)?)
}

/// An event record borrowed from its stored bytes (or from the scratch
/// buffer it was decompressed into): what a search reads per event, without
/// an allocation per field.
#[derive(Debug, Deserialize)]
pub struct EventRecordView<'a> {
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

/// [`decode_event`] without copying: `scratch` is reused across calls.
pub fn decode_event_view<'a>(
    bytes: &'a [u8],
    scratch: &'a mut Vec<u8>,
) -> Result<EventRecordView<'a>, DecodeError> {
    Ok(postcard::from_bytes(plain_event(bytes, scratch)?)?)
}

/// The postcard bytes of a stored event record: borrowed when stored plain,
/// else decompressed into `scratch` (grown, never cleared: LZ4 writes every
/// byte it returns).
fn plain_event<'a>(bytes: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<&'a [u8], DecodeError> {
    let rest = match bytes.split_first() {
        None => return Err(DecodeError::Empty),
        Some((&RECORD_V1, rest)) => rest,
        Some((&v, _)) => return Err(DecodeError::UnknownVersion(v)),
    };
    match rest.split_first() {
        Some((&CODEC_PLAIN, plain)) => Ok(plain),
        Some((&CODEC_LZ4, packed)) if packed.len() >= 4 => {
            let (size, block) = packed.split_at(4);
            let size = u32::from_le_bytes(size.try_into().expect("4 bytes")) as usize;
            if size > MAX_RECORD {
                return Err(DecodeError::Codec(format!(
                    "declared size {size} is too large"
                )));
            }
            if scratch.len() < size {
                scratch.resize(size, 0);
            }
            let written = lz4_flex::block::decompress_into(block, &mut scratch[..size])
                .map_err(|e| DecodeError::Codec(e.to_string()))?;
            if written != size {
                return Err(DecodeError::Codec(format!(
                    "decompressed {written} bytes, the record says {size}"
                )));
            }
            Ok(&scratch[..size])
        }
        Some((&codec, _)) => Err(DecodeError::Codec(format!("unknown codec {codec}"))),
        None => Err(DecodeError::Empty),
    }
}

pub fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, DecodeError> {
    match bytes.split_first() {
        None => Err(DecodeError::Empty),
        Some((&RECORD_V1, rest)) => Ok(postcard::from_bytes(rest)?),
        Some((&v, _)) => Err(DecodeError::UnknownVersion(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(body: Vec<u8>) -> EventRecord {
        EventRecord {
            source: "stripe".into(),
            event_id: "evt_1".into(),
            event_type: Some("charge.succeeded".into()),
            received_at_ms: 1_700_000_000_000,
            content_type: Some("application/json".into()),
            headers: vec![("stripe-signature".into(), "t=1,v1=ab".into())],
            body,
        }
    }

    fn encoded(rec: &EventRecord) -> Vec<u8> {
        let mut out = Vec::new();
        encode_event(
            &EventRecordRef {
                source: &rec.source,
                event_id: &rec.event_id,
                event_type: rec.event_type.as_deref(),
                received_at_ms: rec.received_at_ms,
                content_type: rec.content_type.as_deref(),
                headers: &rec.headers,
                body: &rec.body,
            },
            &mut Vec::new(),
            &mut out,
        );
        out
    }

    #[test]
    fn small_records_are_stored_plain_and_round_trip() {
        let rec = record("{\"café\":1}".as_bytes().to_vec());
        let bytes = encoded(&rec);
        assert_eq!(&bytes[..2], &[RECORD_V1, CODEC_PLAIN]);
        assert_eq!(decode_event(&bytes).unwrap(), rec);
    }

    #[test]
    fn compressible_records_are_compressed_and_round_trip() {
        let rec = record(b"{\"amount\":100,\"currency\":\"eur\"}".repeat(40));
        let bytes = encoded(&rec);
        assert_eq!(&bytes[..2], &[RECORD_V1, CODEC_LZ4]);
        assert!(bytes.len() < rec.body.len() / 4, "{} bytes", bytes.len());
        assert_eq!(decode_event(&bytes).unwrap(), rec);
    }

    #[test]
    fn incompressible_records_are_stored_plain() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..2000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let rec = record(noise);
        let bytes = encoded(&rec);
        assert_eq!(&bytes[..2], &[RECORD_V1, CODEC_PLAIN]);
        assert_eq!(decode_event(&bytes).unwrap(), rec);
    }

    #[test]
    fn corrupt_compressed_records_are_errors_not_panics() {
        let rec = record(b"abcdefgh".repeat(100));
        let mut bytes = encoded(&rec);
        bytes.truncate(bytes.len() - 5);
        assert!(decode_event(&bytes).is_err());
        let mut huge = encoded(&rec);
        huge[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode_event(&huge), Err(DecodeError::Codec(_))));
        assert!(matches!(
            decode_event(&[RECORD_V1, 7, 0]),
            Err(DecodeError::Codec(_))
        ));
    }

    #[test]
    fn unknown_versions_are_refused_not_misread() {
        assert!(matches!(
            decode::<EventState>(&[9, 0]),
            Err(DecodeError::UnknownVersion(9))
        ));
        assert!(matches!(decode::<EventState>(&[]), Err(DecodeError::Empty)));
        let state = EventState::new("s", Some("t"), Status::Pending, 5, Some("k".into()));
        let mut bytes = Vec::new();
        encode(&state, &mut bytes);
        assert_eq!(decode::<EventState>(&bytes).unwrap(), state);
    }
}
