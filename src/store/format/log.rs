//! What a write-ahead log frame carries (its payload; [`super::super::wal`]
//! frames it on disk): the format byte, then the batch's entries, one after
//! another, each the postcard bytes of that format's entry type.
//!
//! The format byte is `0x40 | version`. This build writes format 7
//! ([`super::v7`], release 0.2.0: every kind of entry in one flat enum) and
//! reads every format an earlier build wrote: format 6 (release 0.1.0) and
//! the formats it was built on, each wrapping the one before behind variant
//! 0 (1 `0x41`: builds of 26 Nov 2026 before keys; 2, idempotency keys
//! ([`super::v2`]); 3, what a key change wrote ([`super::v3`]); 4, the
//! attempts a stop interrupted ([`super::v4`]); 5, the audit trail
//! ([`super::v5`]); 6, attempts in full ([`super::v6`])). Builds before
//! versioned records wrote no format byte ("format 0"): their payload
//! starts with an entry's variant index, one byte below 7 (a postcard
//! varint; there were seven kinds), so the two never mix up, and format 0's
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

use super::super::entry::Entry;
use super::v1::EntryV1;
use super::v2::EntryV2;
use super::v3::EntryV3;
use super::v4::EntryV4;
use super::v5::EntryV5;
use super::v6::EntryV6;
use super::v7::EntryV7;

/// The version frames are written in.
pub const LOG_FORMAT: u8 = 7;
/// The first byte of every payload this build writes.
pub const FORMAT_BYTE: u8 = VERSIONED | LOG_FORMAT;
/// The first byte of a format-1 payload (builds of 26 Nov 2026 before keys).
const FORMAT_1: u8 = VERSIONED | 1;
/// The first byte of a format-2 payload (key operations, 26 Nov 2026).
const FORMAT_2: u8 = VERSIONED | 2;
/// The first byte of a format-3 payload (key writes, 26 Nov 2026).
const FORMAT_3: u8 = VERSIONED | 3;
/// The first byte of a format-4 payload (interrupted attempts, 27 Nov 2026).
const FORMAT_4: u8 = VERSIONED | 4;
/// The first byte of a format-5 payload (the audit trail, 27 Nov 2026).
const FORMAT_5: u8 = VERSIONED | 5;
/// The first byte of a format-6 payload (attempts in full, 28 Nov 2026;
/// release 0.1.0).
const FORMAT_6: u8 = VERSIONED | 6;
/// Set in the first byte of every versioned payload; never in format 0's.
const VERSIONED: u8 = 0x40;
/// Below [`VERSIONED`], a format byte's version.
const VERSION_BITS: u8 = 0x3f;
/// Bytes before the first entry of a payload this build writes.
pub const PREFIX: usize = 1;

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
    *out = postcard::to_extend(&EntryV7::from(entry), frame).expect("postcard encodes into a Vec");
}

/// The entries of frame `lsn`'s payload, in the order they were applied.
pub fn entries(lsn: u64, payload: &[u8]) -> Result<Vec<Entry<'_>>, FrameError> {
    match payload.split_first() {
        // Format 0: format 1's entries from the first byte.
        Some((&first, _)) if first < VERSIONED => decode::<EntryV1<'_>>(lsn, payload),
        Some((&FORMAT_1, rest)) => decode::<EntryV1<'_>>(lsn, rest),
        Some((&FORMAT_2, rest)) => decode::<EntryV2<'_>>(lsn, rest),
        Some((&FORMAT_3, rest)) => decode::<EntryV3<'_>>(lsn, rest),
        Some((&FORMAT_4, rest)) => decode::<EntryV4<'_>>(lsn, rest),
        Some((&FORMAT_5, rest)) => decode::<EntryV5<'_>>(lsn, rest),
        Some((&FORMAT_6, rest)) => decode::<EntryV6<'_>>(lsn, rest),
        Some((&FORMAT_BYTE, rest)) => decode::<EntryV7<'_>>(lsn, rest),
        Some((&first, _))
            if first & !VERSION_BITS == VERSIONED && first & VERSION_BITS > LOG_FORMAT =>
        {
            Err(FrameError::NewerFormat {
                lsn,
                found: first & VERSION_BITS,
            })
        }
        Some((&first, _)) => Err(FrameError::Corrupt {
            lsn,
            detail: format!("format byte {first:#04x}"),
        }),
        None => Ok(Vec::new()),
    }
}

/// Entries of one format, one after another, to their end.
fn decode<'a, T>(lsn: u64, mut rest: &'a [u8]) -> Result<Vec<Entry<'a>>, FrameError>
where
    T: serde::Deserialize<'a> + Into<Entry<'a>>,
{
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (entry, tail) =
            postcard::take_from_bytes::<T>(rest).map_err(|e| FrameError::Corrupt {
                lsn,
                detail: e.to_string(),
            })?;
        out.push(entry.into());
        rest = tail;
    }
    Ok(out)
}

/// `entries` as a build of an older format wrote them (0: no format byte,
/// 1, 2, 3, 4, 5 or 6), for the tests that replay such logs. `None` if that format
/// has not every entry's kind.
#[cfg(test)]
pub fn older_payload(format: u8, entries: &[Entry<'_>]) -> Option<Vec<u8>> {
    let mut out = match format {
        0 => Vec::new(),
        1 => vec![FORMAT_1],
        2 => vec![FORMAT_2],
        3 => vec![FORMAT_3],
        4 => vec![FORMAT_4],
        5 => vec![FORMAT_5],
        6 => vec![FORMAT_6],
        _ => return None,
    };
    for entry in entries {
        out = match format {
            6 => postcard::to_extend(&EntryV6::from(entry), out),
            5 => postcard::to_extend(&EntryV5::from(entry), out),
            4 => match entry {
                Entry::Audit { .. } => return None,
                _ => postcard::to_extend(&EntryV4::from(entry), out),
            },
            3 => postcard::to_extend(&EntryV3::of(entry)?, out),
            2 => postcard::to_extend(&EntryV2::of(entry)?, out),
            _ => postcard::to_extend(&EntryV1::of(entry)?, out),
        }
        .expect("postcard encodes into a Vec");
    }
    Some(out)
}
