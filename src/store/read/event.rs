//! Lookups on a read snapshot: one event (by seq, delivery key or provider
//! id) with its deliveries, a range of events, a destination's due queue
//! and dead letters, an event's attempts and its place in its key's line.
//! Readers never wait for the writer (but `get_acked`, for an event just
//! answered while a checkpoint ran).

use std::sync::atomic::Ordering;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTableMetadata};

use super::super::block::{block, event_of};
use super::super::dedupe;
use super::super::error::StoreError;
use super::super::format::row;
use super::super::handle::Store;
use super::super::pack;
use super::super::schema::{self, ATTEMPTS, Attempt, DLQ, EVENTS, ORDERED, PACK, SCHEDULE, STATE};
use super::super::types::{Delivery, Due, StoredEvent};

impl Store {
    /// Up to `limit` entries of `destination`'s queue due at `now_ms`, oldest
    /// first, leaving out those `skip` says (attempts in flight). Also returns
    /// when the queue next needs a look: `Some(now_ms)` if it holds more due
    /// entries than `limit`, the next due time if later, `None` if empty.
    pub fn due(
        &self,
        destination: &str,
        now_ms: u64,
        limit: usize,
        skip: impl Fn(u64) -> bool,
    ) -> Result<(Vec<Due>, Option<u64>), StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let schedule = txn.open_table(SCHEDULE)?;
        let mut out = Vec::new();
        let mut next = None;
        for row in schedule.range((destination, 0, 0)..=(destination, u64::MAX, u64::MAX))? {
            let (key, _) = row?;
            let (_, due_ms, seq) = key.value();
            if skip(seq) {
                continue;
            }
            if due_ms > now_ms {
                next = Some(due_ms);
                break;
            }
            if out.len() == limit {
                next = Some(now_ms);
                break;
            }
            out.push(Due { seq, due_ms });
        }
        Ok((out, next))
    }

    /// Whether event `seq` must wait for an earlier event of its ordering
    /// key (one that is pending, in flight, or dead and blocking).
    pub fn waits_for_its_key(&self, seq: u64) -> Result<bool, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let states = txn.open_table(STATE)?;
        let Some(raw) = states.get(seq)? else {
            return Ok(false);
        };
        let state = row::decode_state(raw.value())?;
        let Some(key) = state.ordering_key.as_deref() else {
            return Ok(false);
        };
        let ordered = txn.open_table(ORDERED)?;
        let first = ordered
            .range((state.source.as_str(), key, 0)..=(state.source.as_str(), key, u64::MAX))?
            .next()
            .transpose()?
            .map(|(k, _)| k.value().2);
        Ok(first.is_some_and(|first| first != seq))
    }

    /// Every attempt of event `seq`, oldest first.
    pub fn attempts(&self, seq: u64) -> Result<Vec<Attempt>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let attempts = txn.open_table(ATTEMPTS)?;
        let mut out = Vec::new();
        for row in attempts.range((seq, 0)..=(seq, u32::MAX))? {
            let (_, v) = row?;
            out.push(row::decode_attempt(v.value())?);
        }
        Ok(out)
    }

    /// The seqs in `destination`'s dead-letter queue, oldest first.
    pub fn dead_letters(&self, destination: &str) -> Result<Vec<u64>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let dlq = txn.open_table(DLQ)?;
        let mut out = Vec::new();
        for row in dlq.range((destination, 0)..=(destination, u64::MAX))? {
            out.push(row?.0.value().1);
        }
        Ok(out)
    }

    /// The public id of the event that delivery `key` belongs to.
    pub fn public_id_of_delivery(&self, key: u64) -> Result<String, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let seq = event_of::<StoreError>(&events, key)?.unwrap_or(key);
        Ok(self.public_id(seq))
    }

    /// The event that delivery `key` belongs to, with `state` that
    /// delivery's (and `deliveries` that one only): what an attempt sends.
    /// One snapshot, two lookups beside the record's: the event's seq (the
    /// last `events` key at or below `key`) and the state row.
    pub fn delivery(&self, key: u64) -> Result<Option<StoredEvent>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let packed = txn.open_table(PACK)?;
        let Some((seq, raw)) = events.range(..=key)?.next_back().transpose()? else {
            return Ok(None);
        };
        let seq = seq.value();
        let states = txn.open_table(STATE)?;
        let Some(state) = states.get(key)? else {
            return Ok(None);
        };
        let state = row::decode_state(state.value())?;
        let erased = txn.open_table(schema::ERASED)?;
        Ok(Some(StoredEvent {
            seq,
            id: self.public_id(seq),
            record: pack::decode::<StoreError>(&packed, raw.value())?,
            deliveries: vec![Delivery {
                key,
                state: state.clone(),
            }],
            state,
            erased: erased_note(&erased, seq)?,
        }))
    }

    /// The event stored under `seq`, with every delivery.
    pub fn get(&self, seq: u64) -> Result<Option<StoredEvent>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let Some(raw) = events.get(seq)? else {
            return Ok(None);
        };
        let record = pack::decode::<StoreError>(&txn.open_table(PACK)?, raw.value())?;
        let deliveries: Vec<Delivery> = block::<StoreError>(&events, &states, seq)?;
        let Some(state) = deliveries.first().map(|d| d.state.clone()) else {
            return Err(StoreError::MissingState { seq });
        };
        let erased = txn.open_table(schema::ERASED)?;
        Ok(Some(StoredEvent {
            seq,
            id: self.public_id(seq),
            record,
            state,
            deliveries,
            erased: erased_note(&erased, seq)?,
        }))
    }

    /// [`Store::get`] for an id its sender may just have been answered
    /// for: an event answered while a checkpoint held the database is in the
    /// log a few milliseconds before the database has it (see the writer's
    /// `beside`), so a miss there waits for the writer to apply it (5 s at
    /// most).
    pub async fn get_acked(&self, seq: u64) -> Result<Option<StoredEvent>, StoreError> {
        if let Some(found) = self.get(seq)? {
            return Ok(Some(found));
        }
        let decided = self.shared.decided.load(Ordering::Acquire);
        if seq > decided || seq <= *self.shared.stored.borrow() {
            return Ok(None);
        }
        let mut stored = self.shared.stored.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(5), stored.wait_for(|v| *v >= seq)).await;
        self.get(seq)
    }

    /// The event stored for `(source, event_id)`, if its dedupe key is live.
    pub fn find(&self, source: &str, event_id: &str) -> Result<Option<StoredEvent>, StoreError> {
        match self.find_seq(source, event_id)? {
            Some(seq) => self.get(seq),
            None => Ok(None),
        }
    }

    /// The seq of the event stored for `(source, event_id)`, if its dedupe
    /// key is live: the dedupe index's answer alone.
    pub fn find_seq(&self, source: &str, event_id: &str) -> Result<Option<u64>, StoreError> {
        self.shared
            .dedupe
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(dedupe::fingerprint(source, event_id))
            .map_err(StoreError::Dedupe)
    }

    /// Up to `limit` events with `seq > after`, oldest first.
    pub fn scan(&self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let erased = txn.open_table(schema::ERASED)?;
        let packed = txn.open_table(PACK)?;
        let mut out = Vec::new();
        for row in events.range(after.saturating_add(1)..)?.take(limit) {
            let (k, v) = row?;
            let seq = k.value();
            let deliveries: Vec<Delivery> = block::<StoreError>(&events, &states, seq)?;
            let state = deliveries
                .first()
                .ok_or(StoreError::MissingState { seq })?
                .state
                .clone();
            out.push(StoredEvent {
                seq,
                id: self.public_id(seq),
                record: pack::decode::<StoreError>(&packed, v.value())?,
                state,
                deliveries,
                erased: erased_note(&erased, seq)?,
            });
        }
        Ok(out)
    }

    /// How many events are stored.
    pub fn count(&self) -> Result<u64, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        Ok(events.len()?)
    }
}

/// Why event `seq`'s payload was erased, if it was.
pub(super) fn erased_note(
    erased: &redb::ReadOnlyTable<u64, &'static [u8]>,
    seq: u64,
) -> Result<Option<schema::Note>, StoreError> {
    match erased.get(seq)? {
        Some(raw) => Ok(Some(row::decode_note(raw.value())?)),
        None => Ok(None),
    }
}

impl Store {
    /// The number of the last frame the database holds, and where it is in
    /// the replication stream (0 when it applied none): where a standby
    /// fetches from.
    pub fn last_frame(&self) -> Result<(u64, u64), StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let meta = txn.open_table(schema::META)?;
        let read = |name: &str| -> Result<u64, StoreError> {
            Ok(meta.get(name)?.map_or(0, |v| {
                u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8]))
            }))
        };
        Ok((
            read(super::super::wal::META_LSN)?,
            read(super::super::job::META_STREAM_SEQ)?,
        ))
    }
}
