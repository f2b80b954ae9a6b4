//! What a write-ahead log frame carries (its payload; [`super::super::wal`]
//! frames it on disk): the format byte, then the batch's entries, one after
//! another, each the postcard bytes of that format's entry type.
//!
//! The format byte is `0x40 | version` (format 1: `0x41`). Builds before
//! versioned records wrote no format byte ("format 0"): their payload
//! starts with an entry's variant index, one byte below 7 (a postcard
//! varint; there are seven kinds), so the two never mix up, and format 0's
//! entries are format 1's ([`super::v1`]). A payload of a version this build
//! does not know is [`FrameError::NewerFormat`]: recovery stops and leaves
//! the log as it is rather than misread what a newer build logged. A build
//! of format 0 reads a format byte as variant 65 or more, which it has not,
//! and refuses the frame too (a byte of 0x80 or more would not do: postcard
//! reads it as the start of a longer varint, which the next byte could make
//! a small, valid index).
//!
//! This payload is the unit replication sends, so a standby reads a
//! primary's frames with the same code as crash recovery.

use std::borrow::Cow;

use super::super::types::{Change, Finish, Initial};
use super::v1::EntryV1;

/// The version frames are written in.
pub const LOG_FORMAT: u8 = 1;
/// The first byte of every payload this build writes.
pub const FORMAT_BYTE: u8 = VERSIONED | LOG_FORMAT;
/// Set in the first byte of every versioned payload; never in format 0's.
const VERSIONED: u8 = 0x40;
/// Below [`VERSIONED`], a format byte's version.
const VERSION_BITS: u8 = 0x3f;
/// Bytes before the first entry of a payload this build writes.
pub const PREFIX: usize = 1;

/// What one job changed, enough to apply it again after a crash: an event
/// as stored (its encoded record and where), or a job's own inputs, which
/// the writer applies the same way to the same state.
#[derive(Debug)]
pub enum Entry<'a> {
    Ingest {
        seq: u64,
        initial: Cow<'a, Initial>,
        record: Cow<'a, [u8]>,
    },
    Duplicate {
        received_ms: u64,
        source: Cow<'a, str>,
    },
    Claim {
        seq: u64,
        started_ms: u64,
    },
    Finish(Cow<'a, Finish>),
    Change {
        seq: u64,
        change: Cow<'a, Change>,
        now_ms: u64,
    },
    Sweep {
        now_ms: u64,
        limit: usize,
    },
    SetMeta {
        key: Cow<'a, str>,
        value: Cow<'a, [u8]>,
    },
}

/// Why a frame's payload cannot be applied. Nothing was applied.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error(
        "frame {lsn} of the write-ahead log is in format {found}, newer than the {LOG_FORMAT} this build reads: upgrade hookinbox (the log is left as it is)"
    )]
    NewerFormat { lsn: u64, found: u8 },
    #[error("frame {lsn} of the write-ahead log does not decode: {detail}")]
    Corrupt { lsn: u64, detail: String },
}

/// Starts a payload in `out` (after whatever header it already holds).
pub fn begin(out: &mut Vec<u8>) {
    out.push(FORMAT_BYTE);
}

/// Appends one entry to a payload begun with [`begin`].
pub fn push(out: &mut Vec<u8>, entry: &Entry<'_>) {
    let frame = std::mem::take(out);
    *out = postcard::to_extend(&EntryV1::from(entry), frame).expect("postcard encodes into a Vec");
}

/// The entries of frame `lsn`'s payload, in the order they were applied.
pub fn entries(lsn: u64, payload: &[u8]) -> Result<Vec<Entry<'_>>, FrameError> {
    let mut rest = match payload.split_first() {
        // Format 0: entries from the first byte.
        Some((&first, _)) if first < VERSIONED => payload,
        Some((&FORMAT_BYTE, rest)) => rest,
        Some((&first, _))
            if first & !VERSION_BITS == VERSIONED && first & VERSION_BITS > LOG_FORMAT =>
        {
            return Err(FrameError::NewerFormat {
                lsn,
                found: first & VERSION_BITS,
            });
        }
        Some((&first, _)) => {
            return Err(FrameError::Corrupt {
                lsn,
                detail: format!("format byte {first:#04x}"),
            });
        }
        None => &[],
    };
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (entry, tail) =
            postcard::take_from_bytes::<EntryV1<'_>>(rest).map_err(|e| FrameError::Corrupt {
                lsn,
                detail: e.to_string(),
            })?;
        out.push(entry.into());
        rest = tail;
    }
    Ok(out)
}
