//! Database rows: a version byte, then the postcard bytes of that version's
//! type ([`super::v1`]). Event records add a codec byte after the version:
//! the postcard bytes are LZ4-compressed when that saves at least an eighth,
//! which cuts the pages each commit writes (see benches/ingest.rs).
//!
//! Rows are always written in the newest version; every version this build
//! knows is read. A row of a version it does not know (written by a newer
//! build) is [`DecodeError::UnknownVersion`], never misread.

use serde::Deserialize;

use super::super::schema::{Attempt, EventRecord, EventState, Note};
use super::super::types::audit::AuditRecord;
use super::super::types::keys::KeyRecord;
use super::v1::{AttemptV1, EventV1, EventViewV1, NoteV1, StateV1};
use super::v2::KeyRowV2;
use super::v3::KeyRowV3;
use super::v5::AuditRowV5;
use super::v6::AttemptRowV6;

/// The version every row of format 1 is written in.
const ROW_V1: u8 = 1;
/// The version of rows new in format 2 (schema 6's `keys`).
const ROW_V2: u8 = 2;
/// The version of rows new in format 3 (`key_log`).
const ROW_V3: u8 = 3;
/// The version of an `events` row that holds no record but where its
/// record is in the pack: postcard `(at, len)` (see [`super::super::pack`]).
const ROW_PACKED: u8 = 4;
/// The version of an `audit` row (format 5's).
const ROW_AUDIT: u8 = 5;
/// The version of an `attempts` row with its round and headers (format 6's).
const ROW_ATTEMPT: u8 = 6;
/// Codec byte of an event record: postcard bytes as they are.
const CODEC_PLAIN: u8 = 0;
/// Codec byte of an event record: LZ4 block, decompressed size first.
const CODEC_LZ4: u8 = 1;
/// Smaller records are stored plain: compressing them saves too little.
const COMPRESS_FROM: usize = 256;
/// No record decompresses to more than this (bodies are capped far below).
const MAX_RECORD: usize = 64 << 20;

/// An event being stored, borrowed from what was received.
pub type EventRecordRef<'a> = EventV1<'a>;
/// A stored event borrowed from its row: what a search reads per event.
pub type EventRecordView<'a> = EventViewV1<'a>;

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
    #[error("corrupt record: its bytes at {at} in the pack are missing")]
    Unpacked { at: u64 },
}

/// Where an event's record is in the pack: `len` bytes from byte `at` of
/// its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub at: u64,
    pub len: u32,
}

/// What an `events` row holds: the record itself (rows written before the
/// pack, and erased events' small records) or its place in the pack.
#[derive(Debug)]
pub enum EventRow<'a> {
    Inline(&'a [u8]),
    Packed(Place),
}

/// The `events` row of a packed record.
pub fn encode_place(place: Place, out: &mut Vec<u8>) {
    encode_as(ROW_PACKED, &(place.at, place.len), out);
}

/// Reads an `events` row; an inline record is checked when decoded.
pub fn event_row(bytes: &[u8]) -> Result<EventRow<'_>, DecodeError> {
    match bytes.first() {
        Some(&ROW_PACKED) => {
            let (at, len) = decode_as::<(u64, u32)>(ROW_PACKED, bytes)?;
            Ok(EventRow::Packed(Place { at, len }))
        }
        _ => Ok(EventRow::Inline(bytes)),
    }
}

pub fn encode_state(state: &EventState, out: &mut Vec<u8>) {
    encode(&StateV1::from(state), out);
}

pub fn decode_state(bytes: &[u8]) -> Result<EventState, DecodeError> {
    decode::<StateV1<'_>>(bytes).map(EventState::from)
}

pub fn encode_attempt(attempt: &Attempt, out: &mut Vec<u8>) {
    encode_as(ROW_ATTEMPT, &AttemptRowV6::from(attempt), out);
}

/// An `attempts` row of either version: 1 (round 0, no headers) or 6.
pub fn decode_attempt(bytes: &[u8]) -> Result<Attempt, DecodeError> {
    match bytes.first() {
        Some(&ROW_ATTEMPT) => decode_as::<AttemptRowV6<'_>>(ROW_ATTEMPT, bytes).map(Attempt::from),
        _ => decode::<AttemptV1<'_>>(bytes).map(Attempt::from),
    }
}

/// An `attempts` row as builds before format 6 wrote it.
#[cfg(test)]
pub fn encode_attempt_v1(attempt: &Attempt, out: &mut Vec<u8>) {
    encode(&AttemptV1::from(attempt), out);
}

pub fn encode_note(note: &Note, out: &mut Vec<u8>) {
    encode(&NoteV1::from(note), out);
}

pub fn decode_note(bytes: &[u8]) -> Result<Note, DecodeError> {
    decode::<NoteV1<'_>>(bytes).map(Note::from)
}

/// A `key_log` row: the key and its record.
pub fn encode_key(key: &str, record: &KeyRecord, out: &mut Vec<u8>) {
    encode_as(ROW_V3, &KeyRowV3::of(key, record), out);
}

pub fn decode_key(bytes: &[u8]) -> Result<(String, KeyRecord), DecodeError> {
    decode_as::<KeyRowV3<'_>>(ROW_V3, bytes).map(KeyRowV3::into_parts)
}

/// A row of schema 6's `keys` table, which the migration to 7 reads.
pub fn decode_key_v2(bytes: &[u8]) -> Result<KeyRecord, DecodeError> {
    decode_as::<KeyRowV2<'_>>(ROW_V2, bytes).map(KeyRecord::from)
}

#[cfg(test)]
pub fn encode_key_v2(record: &KeyRecord, out: &mut Vec<u8>) {
    encode_as(ROW_V2, &KeyRowV2::from(record), out);
}

/// An `audit` row.
pub fn encode_audit(record: &AuditRecord, out: &mut Vec<u8>) {
    encode_as(ROW_AUDIT, &AuditRowV5::from(record), out);
}

pub fn decode_audit(bytes: &[u8]) -> Result<AuditRecord, DecodeError> {
    decode_as::<AuditRowV5<'_>>(ROW_AUDIT, bytes).map(AuditRecord::from)
}

fn encode<T: serde::Serialize>(value: &T, out: &mut Vec<u8>) {
    encode_as(ROW_V1, value, out);
}

fn encode_as<T: serde::Serialize>(version: u8, value: &T, out: &mut Vec<u8>) {
    out.clear();
    out.push(version);
    // Serializing plain structs into a Vec cannot fail.
    let encoded =
        postcard::to_extend(value, std::mem::take(out)).expect("postcard encodes into a Vec");
    *out = encoded;
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, DecodeError> {
    decode_as(ROW_V1, bytes)
}

fn decode_as<'a, T: Deserialize<'a>>(version: u8, bytes: &'a [u8]) -> Result<T, DecodeError> {
    match bytes.split_first() {
        None => Err(DecodeError::Empty),
        Some((&v, rest)) if v == version => Ok(postcard::from_bytes(rest)?),
        Some((&v, _)) => Err(DecodeError::UnknownVersion(v)),
    }
}

/// Encodes an event record: version, codec, then postcard bytes, compressed
/// when that pays. `scratch` keeps its allocation between calls.
pub fn encode_event(record: &EventRecordRef<'_>, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    scratch.clear();
    let plain =
        postcard::to_extend(record, std::mem::take(scratch)).expect("postcard encodes into a Vec");
    out.clear();
    out.push(ROW_V1);
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
    decode_event_view(bytes, &mut scratch).map(EventRecord::from)
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
        Some((&ROW_V1, rest)) => rest,
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
