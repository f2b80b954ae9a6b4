//! The on-disk shape: tables, keys and record encodings.
//!
//! Every hot query is a range scan or a point lookup on a small key:
//! - `events`   seq → record. Sequential keys: inserts append to the rightmost
//!   leaf instead of dirtying a random page each. Immutable once written.
//! - `state`    seq → small mutable delivery state, so status changes never
//!   rewrite the payload.
//! - `dedupe`   "source\0event_id" → seq. The only random-key table; its
//!   entries are small so its pages stay few and cached.
//! - `schedule` (due_ms, seq) → (). The scheduler's queue: range from 0 to now.
//! - `expiry`   (at_ms, seq) → what expires. The sweeper's index: range from 0 to now.
//! - `meta`     name → value: schema version and the database's id tag.
//!
//! Records are a version byte followed by postcard. Postcard is not
//! self-describing: a field added to a record means a new version byte and a
//! decoder for the old one.

use redb::TableDefinition;
use serde::{Deserialize, Serialize};

pub const EVENTS: TableDefinition<u64, &[u8]> = TableDefinition::new("events");
pub const STATE: TableDefinition<u64, &[u8]> = TableDefinition::new("state");
pub const DEDUPE: TableDefinition<&[u8], u64> = TableDefinition::new("dedupe");
pub const SCHEDULE: TableDefinition<(u64, u64), ()> = TableDefinition::new("schedule");
pub const EXPIRY: TableDefinition<(u64, u64), u8> = TableDefinition::new("expiry");
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// The schema this build writes. Bump it with a migration when a table's key
/// or a record's layout changes.
pub const SCHEMA_VERSION: u8 = 1;
pub const META_SCHEMA: &str = "schema_version";
/// A random tag made when the database is created. It is part of every public
/// event id, so a database recreated from scratch never hands the app a
/// `webhook-id` it has already seen for a different event.
pub const META_TAG: &str = "tag";

/// Bits of an `expiry` entry's value: what the sweeper removes at that time.
pub const EXPIRE_DEDUPE: u8 = 1;

const RECORD_V1: u8 = 1;

/// The dedupe key of `(source, event_id)`. Source names cannot contain NUL,
/// so the key is unambiguous.
pub fn dedupe_key(source: &str, event_id: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(source.len() + 1 + event_id.len());
    key.extend_from_slice(source.as_bytes());
    key.push(0);
    key.extend_from_slice(event_id.as_bytes());
    key
}

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
    /// Waiting for delivery (its entry is in `schedule`).
    Pending,
    /// Its source has no destination: kept in the inbox, not delivered.
    Held,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventState {
    pub status: Status,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("record version {0} is not one this build reads: upgrade hookinbox")]
    UnknownVersion(u8),
    #[error("empty record")]
    Empty,
    #[error("corrupt record: {0}")]
    Postcard(#[from] postcard::Error),
}

pub fn encode<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    out.clear();
    out.push(RECORD_V1);
    // Serializing plain structs into a Vec cannot fail.
    let encoded =
        postcard::to_extend(value, std::mem::take(out)).expect("postcard encodes into a Vec");
    *out = encoded;
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

    #[test]
    fn record_round_trips_and_the_ref_encodes_identically() {
        let rec = EventRecord {
            source: "stripe".into(),
            event_id: "evt_1".into(),
            event_type: Some("charge.succeeded".into()),
            received_at_ms: 1_700_000_000_000,
            content_type: Some("application/json".into()),
            headers: vec![("stripe-signature".into(), "t=1,v1=ab".into())],
            body: "{\"café\":1}".as_bytes().to_vec(),
        };
        let mut owned = Vec::new();
        encode(&rec, &mut owned);
        let mut borrowed = Vec::new();
        encode(
            &EventRecordRef {
                source: &rec.source,
                event_id: &rec.event_id,
                event_type: rec.event_type.as_deref(),
                received_at_ms: rec.received_at_ms,
                content_type: rec.content_type.as_deref(),
                headers: &rec.headers,
                body: &rec.body,
            },
            &mut borrowed,
        );
        assert_eq!(owned, borrowed);
        assert_eq!(owned[0], RECORD_V1);
        assert_eq!(decode::<EventRecord>(&owned).unwrap(), rec);
    }

    #[test]
    fn unknown_versions_are_refused_not_misread() {
        assert!(matches!(
            decode::<EventState>(&[9, 0]),
            Err(DecodeError::UnknownVersion(9))
        ));
        assert!(matches!(decode::<EventState>(&[]), Err(DecodeError::Empty)));
    }

    #[test]
    fn dedupe_keys_separate_source_and_id() {
        assert_ne!(dedupe_key("a", "bc"), dedupe_key("ab", "c"));
    }
}
