//! Reading keys: one by its fingerprint's place in the dedupe index, and a
//! namespace's most recently changed first. Readers never wait for the
//! writer.

use std::time::Duration;

use redb::{ReadableDatabase, ReadableTableMetadata};

use super::super::error::StoreError;
use super::super::format::row;
use super::super::handle::Store;
use super::super::schema::{KEY_CLAIMED, KEY_LOG};
use super::super::types::keys::{KeyPage, KeyRecord, KeyStateKind, fingerprint};

/// The most rows one [`Store::list_keys`] call reads: a filter that matches
/// one key in a million still answers in milliseconds, with a cursor.
pub const MAX_KEYS_EXAMINED: usize = 10_000;

/// How often [`Store::key_record`] looks again when the index names a row
/// its snapshot no longer holds.
const LOOKS: usize = 50;

impl Store {
    /// Idempotency key `key` of `namespace` as stored, unless it expired by
    /// `now_ms` (the sweeper may not have reached it yet).
    pub fn key_record(
        &self,
        namespace: &str,
        key: &str,
        now_ms: u64,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let fp = fingerprint(namespace, key);
        let db = self.db()?;
        // The index learns a commit just after it: a snapshot may already
        // hold the change that removed the row the index still names (the
        // key was completed, released or swept a moment ago). The index
        // names its new place, or none, once it learns that change.
        for _ in 0..LOOKS {
            let at = self
                .shared
                .dedupe
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(fp)
                .map_err(StoreError::Dedupe)?;
            let Some(seq) = at else {
                return Ok(None);
            };
            let txn = db.begin_read()?;
            let log = txn.open_table(KEY_LOG)?;
            if let Some(value) = log.get((namespace, seq))? {
                let (stored, record) = row::decode_key(value.value().1)?;
                return Ok((stored == key && record.is_live(now_ms)).then_some(record));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(None)
    }

    /// Up to `limit` live keys of `namespace` changed before seq `before`
    /// (from the newest without it), the most recently changed first, of
    /// state `kind` if given. Reads at most [`MAX_KEYS_EXAMINED`] rows, so a
    /// filter that matches few costs a bounded page: `next_before` then says
    /// where to go on even if the page is short. Claimed keys are read from
    /// their own table, whatever the namespace holds.
    pub fn list_keys(
        &self,
        namespace: &str,
        kind: Option<KeyStateKind>,
        before: Option<u64>,
        limit: usize,
        now_ms: u64,
    ) -> Result<KeyPage, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let log = txn.open_table(KEY_LOG)?;
        let claimed = txn.open_table(KEY_CLAIMED)?;
        let range = (namespace, 0)..(namespace, before.unwrap_or(u64::MAX));
        let seqs: Box<dyn Iterator<Item = Result<u64, redb::StorageError>>> = match kind {
            Some(KeyStateKind::Claimed) => Box::new(
                claimed
                    .range(range)?
                    .rev()
                    .map(|r| r.map(|(k, _)| k.value().1)),
            ),
            _ => Box::new(log.range(range)?.rev().map(|r| r.map(|(k, _)| k.value().1))),
        };
        let mut page = KeyPage {
            keys: Vec::new(),
            next_before: None,
        };
        for (examined, seq) in seqs.enumerate() {
            let seq = seq?;
            if page.keys.len() == limit || examined == MAX_KEYS_EXAMINED {
                // `seq` is the first not read: the next page starts with it.
                page.next_before = Some(seq + 1);
                break;
            }
            let Some(value) = log.get((namespace, seq))? else {
                continue;
            };
            let (key, record) = row::decode_key(value.value().1)?;
            if record.is_live(now_ms) && kind.is_none_or(|kind| record.state.kind() == kind) {
                page.keys.push((key, record));
            }
        }
        Ok(page)
    }

    /// How many keys are stored, expired ones the sweeper has not reached
    /// yet included: redb keeps a table's length, so this costs the same at
    /// any size (read at each scrape).
    pub fn keys_stored(&self) -> Result<u64, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        Ok(txn.open_table(KEY_LOG)?.len()?)
    }
}
