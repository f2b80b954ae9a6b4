//! Events as they are stored, for listeners (`GET /api/events/stream`):
//! a watch of the newest event key answered, and the events after a
//! cursor, oldest first, read forward from it. A listener costs nothing
//! until events arrive, and then only the new rows: N listeners are N
//! short range reads, never a scan of what was stored before.

use redb::ReadableDatabase;

use super::super::block::block;
use super::super::error::StoreError;
use super::super::handle::Store;
use super::super::pack;
use super::super::schema::{self, EVENTS, STATE};
use super::super::types::{Delivery, EventFilter, StoredEvent};
use super::event::erased_note;
use super::list::first_received_at_or_after;

/// Rows one call reads at most, matching or not: a filter that matches
/// little costs a bounded read per call, and the caller goes on from the
/// cursor returned.
const MAX_ROWS: usize = 4096;

impl Store {
    /// The key of the newest event answered as stored (0: none yet); it
    /// changes each time a batch holding new events is answered. On a
    /// standby, as frames are applied.
    pub fn stored(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.stored.subscribe()
    }

    /// The cursor before the first event received at or after `at_ms`: a
    /// binary search over seq, a few dozen rows read at 10M events.
    pub fn cursor_at(&self, at_ms: u64) -> Result<u64, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let packed = txn.open_table(schema::PACK)?;
        Ok(first_received_at_or_after(&events, &packed, at_ms)?.saturating_sub(1))
    }

    /// Events matching `filter` stored after `after` (a seq), oldest
    /// first, at most `limit`, reading at most a few thousand rows. Returns
    /// them and the cursor to go on from: the seq of the last row read
    /// (`after` itself when there was none).
    pub fn events_after(
        &self,
        filter: &EventFilter,
        after: u64,
        limit: usize,
    ) -> Result<(Vec<StoredEvent>, u64), StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let erased = txn.open_table(schema::ERASED)?;
        let packed = txn.open_table(schema::PACK)?;
        let mut found = Vec::new();
        let mut cursor = after;
        for row in events.range(after.saturating_add(1)..)?.take(MAX_ROWS) {
            if found.len() == limit {
                break;
            }
            let (seq, raw) = row?;
            let seq = seq.value();
            cursor = seq;
            let record = pack::decode::<StoreError>(&packed, raw.value())?;
            let deliveries: Vec<Delivery> = block::<StoreError>(&events, &states, seq)?;
            let Some(first) = deliveries
                .iter()
                .find(|d| filter.matches(&record, &d.state))
            else {
                continue;
            };
            found.push(StoredEvent {
                seq,
                id: self.public_id(seq),
                state: first.state.clone(),
                record,
                deliveries,
                erased: erased_note(&erased, seq)?,
            });
        }
        Ok((found, cursor))
    }
}
