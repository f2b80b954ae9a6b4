//! The pack: event records end to end in page-sized chunks.
//!
//! A B-tree leaf holds whole rows, so ≈ 1 KB records leave a quarter of each
//! 4 KiB page empty (three fit, a fourth does not), and a record just over a
//! page takes two. The pack instead writes every record's bytes into one
//! stream, cut into chunks that each fill a leaf exactly: chunk `n` of the
//! `pack` table holds stream bytes `n × DATA .. (n + 1) × DATA`. The event's
//! `events` row holds only its [`Place`] in the stream.
//!
//! A chunk starts with how many records have bytes in it. Removing a record
//! counts down each of its chunks and deletes the chunks it leaves empty, so
//! the space of swept events is given back a chunk at a time, in any order.
//! The last chunk always stays: the end of the stream is its number and
//! length, read again at each transaction's first append.
//!
//! Everything is in the same redb transaction as the event's other rows:
//! the pack adds no file and no new crash case.

use redb::{ReadableTable, StorageError, Table};

use super::format::row::{self, DecodeError, EventRow, Place};
use super::schema::EventRecord;

/// A chunk's row value: a leaf with one (u64, value) pair fills a 4 KiB page
/// exactly (redb's leaf: a 4-byte header, a 4-byte value end, the key).
const CHUNK: usize = 4096 - 4 - 4 - 8;
/// The count of records with bytes in the chunk, at its start.
const COUNT: usize = 4;
/// Stream bytes per chunk.
const DATA: u64 = (CHUNK - COUNT) as u64;

/// The chunks a record's bytes are in (a record of no bytes counts in one).
fn chunks(place: Place) -> std::ops::RangeInclusive<u64> {
    let last = place.at + u64::from(place.len.max(1)) - 1;
    place.at / DATA..=last / DATA
}

fn count(chunk: &[u8]) -> u32 {
    u32::from_le_bytes(chunk[..COUNT].try_into().expect("4 bytes"))
}

fn set_count(chunk: &mut [u8], n: u32) {
    chunk[..COUNT].copy_from_slice(&n.to_le_bytes());
}

/// Appends and removes records in one write transaction.
#[derive(Default)]
pub(super) struct Packer {
    /// The last chunk's number and bytes, once read in this transaction.
    tail: Option<(u64, Vec<u8>)>,
}

impl Packer {
    /// Appends `record` at the end of the stream; returns its place.
    pub fn append(
        &mut self,
        pack: &mut Table<'_, u64, &'static [u8]>,
        record: &[u8],
    ) -> Result<Place, StorageError> {
        let (no, chunk) = match &mut self.tail {
            Some(tail) => tail,
            tail => {
                let last = match pack.last()? {
                    Some((no, chunk)) => (no.value(), chunk.value().to_vec()),
                    None => (0, vec![0; COUNT]),
                };
                tail.insert(last)
            }
        };
        let len = u32::try_from(record.len()).expect("records are far below 4 GiB");
        let mut first = None;
        let mut rest = record;
        loop {
            if chunk.len() == CHUNK {
                *no += 1;
                chunk.clear();
                chunk.resize(COUNT, 0);
            }
            let at = *no * DATA + (chunk.len() - COUNT) as u64;
            let place = *first.get_or_insert(Place { at, len });
            let n = rest.len().min(CHUNK - chunk.len());
            chunk.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            let records = count(chunk) + 1;
            set_count(chunk, records);
            pack.insert(*no, chunk.as_slice())?;
            if rest.is_empty() {
                return Ok(place);
            }
        }
    }

    /// Removes the record at `place` from the stream: each of its chunks
    /// counts one record less, and goes when none is left (but the last).
    /// With `erase`, its bytes in the chunks that stay become zeros.
    pub fn remove(
        &mut self,
        pack: &mut Table<'_, u64, &'static [u8]>,
        place: Place,
        erase: bool,
    ) -> Result<(), StorageError> {
        self.tail = None;
        let Some(last) = pack.last()?.map(|(no, _)| no.value()) else {
            return Ok(());
        };
        let end = place.at + u64::from(place.len);
        for no in chunks(place) {
            let Some(mut chunk) = pack.get(no)?.map(|c| c.value().to_vec()) else {
                continue;
            };
            if chunk.len() < COUNT {
                continue;
            }
            let records = count(&chunk).saturating_sub(1);
            if records == 0 && no != last {
                pack.remove(no)?;
                continue;
            }
            set_count(&mut chunk, records);
            if erase {
                let from = place.at.max(no * DATA) - no * DATA;
                let to = end.min((no + 1) * DATA) - no * DATA;
                let data = &mut chunk[COUNT..];
                let to = (to as usize).min(data.len());
                let from = (from as usize).min(to);
                data[from..to].fill(0);
            }
            pack.insert(no, chunk.as_slice())?;
        }
        Ok(())
    }
}

/// The record bytes of an `events` row: the row itself when inline, else
/// read from the pack into `buf`.
pub(super) fn record<'a, E>(
    pack: &impl ReadableTable<u64, &'static [u8]>,
    raw: &'a [u8],
    buf: &'a mut Vec<u8>,
) -> Result<&'a [u8], E>
where
    E: From<StorageError> + From<DecodeError>,
{
    match row::event_row(raw)? {
        EventRow::Inline(bytes) => Ok(bytes),
        EventRow::Packed(place) => {
            read::<E>(pack, place, buf)?;
            Ok(buf.as_slice())
        }
    }
}

/// The place in the pack an `events` row names, if its record is there.
pub(super) fn place(raw: &[u8]) -> Result<Option<Place>, DecodeError> {
    Ok(match row::event_row(raw)? {
        EventRow::Packed(place) => Some(place),
        EventRow::Inline(_) => None,
    })
}

/// Decodes the event record of an `events` row.
pub(super) fn decode<E>(
    pack: &impl ReadableTable<u64, &'static [u8]>,
    raw: &[u8],
) -> Result<EventRecord, E>
where
    E: From<StorageError> + From<DecodeError>,
{
    let mut buf = Vec::new();
    let bytes = record::<E>(pack, raw, &mut buf)?;
    Ok(row::decode_event(bytes)?)
}

/// Copies the record at `place` into `buf`.
fn read<E>(
    pack: &impl ReadableTable<u64, &'static [u8]>,
    place: Place,
    buf: &mut Vec<u8>,
) -> Result<(), E>
where
    E: From<StorageError> + From<DecodeError>,
{
    buf.clear();
    let end = place.at + u64::from(place.len);
    let mut at = place.at;
    while at < end {
        let (no, from) = (at / DATA, (at % DATA) as usize);
        let n = (end - at).min(DATA - from as u64) as usize;
        let chunk = pack.get(no)?.ok_or(DecodeError::Unpacked { at })?;
        let data = chunk.value().get(COUNT..).unwrap_or_default();
        let bytes = data
            .get(from..from + n)
            .ok_or(DecodeError::Unpacked { at })?;
        buf.extend_from_slice(bytes);
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
