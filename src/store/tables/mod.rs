//! Every table of one write transaction, and the state changes the writer
//! makes with them. Each method keeps the cross-table invariants together:
//! a delivery is `Pending` iff it has a `schedule` entry at `state.due_ms`;
//! `Dead` iff it has a `dlq` entry; a lease exists only on a pending one;
//! an event is deleted whole, never one delivery of it;
//! the indexes and counts follow every `state` row (`put_state`,
//! `delete_event` and [`super::index`]).

mod audit;
pub(super) mod keys;

use redb::{ReadableTable, ReadableTableMetadata, Table, WriteTransaction};

use super::block;
use super::dedupe::{self, Fingerprint, Kind};
use super::error::WriteError;
use super::format::row::{self, EventRecordRef};
use super::index::{IndexTables, Indexed, MinuteKind};
use super::pack::{self, Packer};
use super::schema::{
    self, ATTEMPTS, Attempt, AttemptClass, DEDUPE, DLQ, DeadLetter, ERASED, EVENTS, EXPIRY,
    EventRecord, EventState, LEASES, META, Note, ORDERED, SCHEDULE, STATE, Status,
};
use super::types::{Change, ChangeError, Claimed, Delivery, Finish, Initial, Next, Swept};
use keys::KeyTables;

/// Retention, in ms, as the writer applies it.
pub(super) struct Ttls {
    pub dedupe_ms: u64,
    pub payload_ms: u64,
    pub dlq_ms: u64,
    pub audit_ms: u64,
}

pub(super) struct Tables<'t> {
    pub events: Table<'t, u64, &'static [u8]>,
    /// The records of `events`, packed (see [`super::pack`]).
    pub pack: Table<'t, u64, &'static [u8]>,
    pub packer: Packer,
    pub states: Table<'t, u64, &'static [u8]>,
    pub dedupe: Table<'t, u64, (u128, u64)>,
    pub dedupe_kept: Table<'t, u64, (u128, u64)>,
    pub schedule: Table<'t, (&'static str, u64, u64), ()>,
    pub leases: Table<'t, u64, u64>,
    pub attempts: Table<'t, (u64, u32), &'static [u8]>,
    pub dlq: Table<'t, (&'static str, u64), ()>,
    pub ordered: Table<'t, (&'static str, &'static str, u64), ()>,
    pub expiry: Table<'t, (u64, u64), ()>,
    pub meta: Table<'t, &'static str, &'static [u8]>,
    pub erased: Table<'t, u64, &'static [u8]>,
    /// The secondary indexes and counts, moved with every `state` write.
    pub index: IndexTables<'t>,
    /// The idempotency keys' tables, opened when a job first needs them,
    /// so other batches do not pay for them.
    pub keys: Option<KeyTables<'t>>,
    /// The last key seq handed out, once read in this transaction.
    pub key_seq: Option<u64>,
    pub txn: &'t WriteTransaction,
    pub buf: Vec<u8>,
}

impl<'t> Tables<'t> {
    pub fn open(txn: &'t WriteTransaction) -> Result<Tables<'t>, WriteError> {
        Ok(Tables {
            events: txn.open_table(EVENTS)?,
            pack: txn.open_table(schema::PACK)?,
            packer: Packer::default(),
            states: txn.open_table(STATE)?,
            dedupe: txn.open_table(DEDUPE)?,
            dedupe_kept: txn.open_table(schema::DEDUPE_KEPT)?,
            schedule: txn.open_table(SCHEDULE)?,
            leases: txn.open_table(LEASES)?,
            attempts: txn.open_table(ATTEMPTS)?,
            dlq: txn.open_table(DLQ)?,
            ordered: txn.open_table(ORDERED)?,
            expiry: txn.open_table(EXPIRY)?,
            meta: txn.open_table(META)?,
            erased: txn.open_table(ERASED)?,
            index: IndexTables::open(txn)?,
            keys: None,
            key_seq: None,
            txn,
            buf: Vec::with_capacity(256),
        })
    }

    /// Writes event `seq`'s state and moves its index entries and count
    /// from `before` (what it was; `None` for a new event).
    pub fn put_state(
        &mut self,
        seq: u64,
        before: Option<&Indexed<'_>>,
        state: &EventState,
    ) -> Result<(), WriteError> {
        row::encode_state(state, &mut self.buf);
        self.states.insert(seq, self.buf.as_slice())?;
        self.index.reindex(seq, before, Some(&Indexed::of(state)))
    }

    fn state(&self, seq: u64) -> Result<Option<EventState>, WriteError> {
        match self.states.get(seq)? {
            None => Ok(None),
            Some(raw) => Ok(Some(row::decode_state(raw.value())?)),
        }
    }

    /// The seq of the event whose block holds delivery `key`.
    fn event_of(&self, key: u64) -> Result<Option<u64>, WriteError> {
        block::event_of(&self.events, key)
    }

    /// Every delivery of event `seq`.
    fn block(&self, seq: u64) -> Result<Vec<Delivery>, WriteError> {
        block::block(&self.events, &self.states, seq)
    }

    fn add_attempt(
        &mut self,
        seq: u64,
        state: &mut EventState,
        attempt: &Attempt,
    ) -> Result<(), WriteError> {
        row::encode_attempt(attempt, &mut self.buf);
        self.attempts
            .insert((seq, state.total_attempts), self.buf.as_slice())?;
        state.total_attempts += 1;
        state.attempts += 1;
        // The destination's minute: what its error rate and latency
        // percentiles are made of (`GET /api/activity`).
        let (at, route) = (attempt.started_ms, state.source.as_str());
        self.index.count_minute(at, route, MinuteKind::Attempted);
        if attempt.class != AttemptClass::Delivered {
            self.index.count_minute(at, route, MinuteKind::Failed);
        }
        if attempt.class != AttemptClass::Interrupted {
            self.index
                .count_minute(at, route, MinuteKind::latency(attempt.latency_ms));
        }
        Ok(())
    }

    fn unschedule(&mut self, seq: u64, state: &mut EventState) -> Result<(), WriteError> {
        if let Some(due) = state.due_ms.take() {
            self.schedule.remove((state.source.as_str(), due, seq))?;
        }
        Ok(())
    }

    fn reschedule(&mut self, seq: u64, state: &mut EventState, due: u64) -> Result<(), WriteError> {
        self.unschedule(seq, state)?;
        self.schedule
            .insert((state.source.as_str(), due, seq), ())?;
        state.due_ms = Some(due);
        Ok(())
    }

    /// Takes the event out of its key's line: later events of the key may go.
    fn leave_line(&mut self, seq: u64, state: &EventState) -> Result<(), WriteError> {
        if let Some(key) = &state.ordering_key {
            self.ordered
                .remove((state.source.as_str(), key.as_str(), seq))?;
        }
        Ok(())
    }

    /// Puts the event back in its key's line, at its place by seq.
    fn join_line(&mut self, seq: u64, state: &EventState) -> Result<(), WriteError> {
        if let Some(key) = &state.ordering_key {
            self.ordered
                .insert((state.source.as_str(), key.as_str(), seq), ())?;
        }
        Ok(())
    }

    /// Makes `at` the time the sweeper may delete delivery `seq` (and its
    /// event, once every delivery's time has come). It is finished: if its
    /// event's other deliveries are too, a dedupe key kept past its TTL for
    /// the event goes back to the log, where the next sweep lets it expire.
    pub(super) fn expire_at(
        &mut self,
        seq: u64,
        state: &mut EventState,
        at: u64,
    ) -> Result<(), WriteError> {
        // Almost always empty: then no event lookup on the delivery path.
        if !self.dedupe_kept.is_empty()?
            && let Some(event) = self.event_of(seq)?
            && self.dedupe_kept.get(event)?.is_some()
            && self
                .block(event)?
                .iter()
                .all(|d| d.key == seq || !d.state.status.is_live())
            && let Some(key) = self.dedupe_kept.remove(event)?
        {
            let key = key.value();
            self.dedupe.insert(event, key)?;
        }
        self.keep(seq, state)?;
        self.expiry.insert((at, seq), ())?;
        state.expires_ms = Some(at);
        Ok(())
    }

    /// The event is live again (replayed): the sweeper must not take it.
    fn keep(&mut self, seq: u64, state: &mut EventState) -> Result<(), WriteError> {
        if let Some(old) = state.expires_ms.take() {
            self.expiry.remove((old, seq))?;
        }
        Ok(())
    }

    /// Deletes event `seq` and everything of it but its dedupe key (which
    /// expires on its own clock): every delivery in `deliveries` (its block).
    fn delete_event(&mut self, seq: u64, deliveries: &[Delivery]) -> Result<(), WriteError> {
        let packed = match self.events.remove(seq)? {
            Some(old) => pack::place(old.value())?,
            None => None,
        };
        if let Some(place) = packed {
            self.packer.remove(&mut self.pack, place, false)?;
        }
        self.erased.remove(seq)?;
        for Delivery { key, state } in deliveries {
            let key = *key;
            self.states.remove(key)?;
            self.index.reindex(key, Some(&Indexed::of(state)), None)?;
            self.attempts
                .retain_in((key, 0)..=(key, u32::MAX), |_, _| false)?;
            self.dlq.remove((state.source.as_str(), key))?;
            self.leave_line(key, state)?;
            if let Some(at) = state.expires_ms {
                self.expiry.remove((at, key))?;
            }
        }
        Ok(())
    }

    /// One bounded sweep step at `now_ms`: finished events whose expiry has
    /// come (checked against their state: never a pending, held or replayed
    /// one), then dedupe keys past their TTL — a prefix of the `dedupe` log.
    /// Returns the counts and what the in-memory index must learn.
    pub fn sweep(
        &mut self,
        now_ms: u64,
        limit: usize,
        ttls: &Ttls,
    ) -> Result<(Swept, Forgotten), WriteError> {
        let mut swept = Swept::default();
        let mut due = Vec::new();
        for row in self.expiry.range((0, 0)..=(now_ms, u64::MAX))? {
            let (key, _) = row?;
            if due.len() == limit {
                swept.more = true;
                break;
            }
            due.push(key.value());
        }
        for &(at, key) in &due {
            self.expiry.remove((at, key))?;
            let Some(seq) = self.event_of(key)? else {
                continue;
            };
            let deliveries = self.block(seq)?;
            // A stale entry (the delivery was replayed since, or its event
            // is gone) is just dropped.
            let current = deliveries
                .iter()
                .any(|d| d.key == key && d.state.expires_ms == Some(at));
            if !current {
                continue;
            }
            // The event goes whole, at the last of its deliveries' times: an
            // earlier one's entry is dropped, the last one's deletes it.
            let done = deliveries.iter().all(|d| {
                !d.state.status.is_live() && d.state.expires_ms.is_some_and(|t| t <= now_ms)
            });
            if !done {
                continue;
            }
            for d in &deliveries {
                match d.state.status {
                    // Finished without a delivery: counted with the delivered.
                    Status::Delivered | Status::Filtered => swept.delivered += 1,
                    Status::Dead | Status::Ignored => swept.dead_or_ignored += 1,
                    Status::Pending | Status::Held => {}
                }
            }
            self.delete_event(seq, &deliveries)?;
        }
        let room = limit.saturating_sub(due.len());
        let mut expired = Vec::new();
        let cutoff = now_ms.saturating_sub(ttls.dedupe_ms);
        for row in self.dedupe.iter()? {
            let (seq, value) = row?;
            let (fp, received) = value.value();
            if received > cutoff {
                break;
            }
            if expired.len() == room {
                swept.more = true;
                break;
            }
            expired.push((seq.value(), (fp, received)));
        }
        // The key of an event still pending or held stays live (kept aside,
        // out of the log's expiring prefix): a provider's retry of it must
        // stay a duplicate, not become a second pending event.
        let mut forgotten = Forgotten::default();
        for &(seq, key) in &expired {
            self.dedupe.remove(seq)?;
            let live = self.block(seq)?.iter().any(|d| d.state.status.is_live());
            if live {
                self.dedupe_kept.insert(seq, key)?;
                forgotten.kept.push((key.0, seq));
            } else {
                forgotten.events.push((key.0, seq));
            }
        }
        // The index's `swept`: every event key at or below it is gone from
        // the log (or kept), which is how its sealed runs tell theirs apart.
        if let Some(&(last, _)) = expired.last() {
            let before = self.meta.get(dedupe::META_SWEPT)?.map_or(0, |v| {
                u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8]))
            });
            if last > before {
                self.meta
                    .insert(dedupe::META_SWEPT, last.to_le_bytes().as_slice())?;
            }
        }
        swept.dedupe_keys = forgotten.events.len() as u64;
        let room = room.saturating_sub(expired.len());
        let (minutes, more) = self.index.sweep_minutes(now_ms, room)?;
        swept.minute_buckets = minutes;
        swept.more |= more;
        let room = room.saturating_sub(minutes as usize);
        let (keys, more) = self.sweep_keys(now_ms, room)?;
        swept.keys = keys.len() as u64;
        swept.more |= more;
        let room = room.saturating_sub(keys.len());
        let (audit, more) = self.sweep_audit(now_ms.saturating_sub(ttls.audit_ms), room)?;
        swept.audit = audit;
        swept.more |= more;
        forgotten.keys = keys;
        Ok((swept, forgotten))
    }

    /// Builds the indexes and counts of the events in `from..` (at most
    /// `limit` of them) from their `state` rows; returns the next seq to do,
    /// or `None` when done. The migration from schema 3 runs this in steps.
    pub(super) fn index_existing(
        &mut self,
        from: u64,
        limit: usize,
    ) -> Result<Option<u64>, WriteError> {
        let mut rows = Vec::with_capacity(limit);
        let mut next = None;
        for row in self.states.range(from..)? {
            let (seq, raw) = row?;
            if rows.len() == limit {
                next = Some(seq.value());
                break;
            }
            let state = row::decode_state(raw.value())?;
            rows.push((seq.value(), state));
        }
        for (seq, state) in &rows {
            self.index.reindex(*seq, None, Some(&Indexed::of(state)))?;
            // The dedupe log has the receipt time of events younger than
            // its TTL: enough for the buckets, which keep a week.
            let received = self.dedupe.get(*seq)?.map(|v| v.value().1);
            if let Some(at) = received {
                self.index
                    .count_minute(at, &state.source, MinuteKind::Received);
            }
            if let Some(at) = state.delivered_ms {
                self.index
                    .count_minute(at, &state.source, MinuteKind::Delivered);
            }
            if let Some(dead) = &state.dead {
                self.index
                    .count_minute(dead.at_ms, &state.source, MinuteKind::DeadLettered);
            }
        }
        Ok(next)
    }

    /// Leases a pending event that has no attempt in flight.
    pub fn claim(&mut self, seq: u64, started_ms: u64) -> Result<Option<Claimed>, WriteError> {
        let Some(state) = self.state(seq)? else {
            return Ok(None);
        };
        if state.status != Status::Pending || self.leases.get(seq)?.is_some() {
            return Ok(None);
        }
        self.leases.insert(seq, started_ms)?;
        Ok(Some(Claimed {
            attempt: state.attempts + 1,
            round_started_ms: state.round_started_ms,
        }))
    }

    /// Records an attempt and applies what comes next. An outcome for an
    /// event that is no longer leased (it cannot be, but a stale worker must
    /// not resurrect it) is recorded in the history and changes nothing else.
    pub fn finish(&mut self, finish: &Finish, ttls: &Ttls) -> Result<(), WriteError> {
        let seq = finish.seq;
        let Some(mut state) = self.state(seq)? else {
            return Ok(());
        };
        let before = Indexed::of(&state).into_owned();
        let leased = self.leases.remove(seq)?.is_some();
        self.add_attempt(seq, &mut state, &finish.attempt)?;
        if leased && state.status == Status::Pending {
            match &finish.next {
                Next::Delivered { at_ms } => {
                    self.unschedule(seq, &mut state)?;
                    self.leave_line(seq, &state)?;
                    state.status = Status::Delivered;
                    state.delivered_ms = Some(*at_ms);
                    self.index
                        .count_minute(*at_ms, &state.source, MinuteKind::Delivered);
                    self.expire_at(seq, &mut state, at_ms.saturating_add(ttls.payload_ms))?;
                }
                Next::RetryAt { due_ms } => self.reschedule(seq, &mut state, *due_ms)?,
                Next::Dead {
                    reason,
                    at_ms,
                    release_key,
                } => {
                    self.unschedule(seq, &mut state)?;
                    if *release_key {
                        self.leave_line(seq, &state)?;
                    }
                    state.status = Status::Dead;
                    self.index
                        .count_minute(*at_ms, &state.source, MinuteKind::DeadLettered);
                    state.dead = Some(DeadLetter {
                        reason: reason.clone(),
                        at_ms: *at_ms,
                        last_status: finish.attempt.status,
                    });
                    self.dlq.insert((state.source.as_str(), seq), ())?;
                    self.expire_at(seq, &mut state, at_ms.saturating_add(ttls.dlq_ms))?;
                }
            }
        }
        self.put_state(seq, Some(&before), &state)
    }

    /// A person's replay or ignore of delivery `seq`, or erasure of its
    /// event. Errors inside `Ok` are refusals that change nothing; `Err` is
    /// a storage failure.
    pub fn change(
        &mut self,
        seq: u64,
        change: &Change,
        now_ms: u64,
        ttls: &Ttls,
    ) -> Result<Result<(), ChangeError>, WriteError> {
        let Some(mut state) = self.state(seq)? else {
            return Ok(Err(ChangeError::NotFound));
        };
        let before = Indexed::of(&state).into_owned();
        if self.leases.get(seq)?.is_some() {
            return Ok(Err(ChangeError::InFlight));
        }
        match change {
            Change::Replay => {
                if let Err(refused) = self.replay(seq, &mut state, None, now_ms)? {
                    return Ok(Err(refused));
                }
            }
            Change::ReplayTo { destination } => {
                if let Err(refused) = self.replay(seq, &mut state, Some(destination), now_ms)? {
                    return Ok(Err(refused));
                }
            }
            Change::Ignore { note } => match state.status {
                Status::Pending | Status::Dead | Status::Held => {
                    self.ignore(seq, &mut state, note, now_ms, ttls)?;
                }
                Status::Delivered => {
                    return Ok(Err(ChangeError::Conflict("was already delivered")));
                }
                Status::Filtered => {
                    return Ok(Err(ChangeError::Conflict(
                        "was filtered out: it is not to be delivered",
                    )));
                }
                Status::Ignored => return Ok(Err(ChangeError::Conflict("is already ignored"))),
            },
            Change::Erase { note } => {
                let Some(event) = self.event_of(seq)? else {
                    return Ok(Err(ChangeError::NotFound));
                };
                if self.erased.get(event)?.is_some() {
                    return Ok(Err(ChangeError::Conflict("is already erased")));
                }
                let deliveries = self.block(event)?;
                for d in &deliveries {
                    if d.key != seq && self.leases.get(d.key)?.is_some() {
                        return Ok(Err(ChangeError::InFlight));
                    }
                }
                self.erase_payload(event)?;
                let at = Note {
                    text: note.clone(),
                    at_ms: now_ms,
                };
                row::encode_note(&at, &mut self.buf);
                self.erased.insert(event, self.buf.as_slice())?;
                // Nothing may deliver an empty body: what was still to go,
                // to any destination, is ignored with the same note.
                for Delivery {
                    key,
                    state: mut other,
                } in deliveries
                {
                    if key == seq || !other.status.is_undelivered() {
                        continue;
                    }
                    let was = Indexed::of(&other).into_owned();
                    self.ignore(key, &mut other, note, now_ms, ttls)?;
                    self.put_state(key, Some(&was), &other)?;
                }
                if state.status.is_undelivered() {
                    self.ignore(seq, &mut state, note, now_ms, ttls)?;
                }
            }
        }
        self.put_state(seq, Some(&before), &state)?;
        Ok(Ok(()))
    }

    /// Makes delivery `seq` pending again, from now; `to`: on that route
    /// (only a held or filtered event may change its route).
    fn replay(
        &mut self,
        seq: u64,
        state: &mut EventState,
        to: Option<&str>,
        now_ms: u64,
    ) -> Result<Result<(), ChangeError>, WriteError> {
        let moves = to.is_some_and(|route| route != state.source);
        match state.status {
            Status::Pending => return Ok(Err(ChangeError::Conflict("is already pending"))),
            Status::Held if !moves => {
                return Ok(Err(ChangeError::Conflict(
                    "is held: its source has no destination",
                )));
            }
            Status::Dead | Status::Delivered | Status::Ignored if moves => {
                return Ok(Err(ChangeError::Conflict(
                    "was never routed to that destination",
                )));
            }
            Status::Held
            | Status::Dead
            | Status::Delivered
            | Status::Ignored
            | Status::Filtered => {}
        }
        self.dlq.remove((state.source.as_str(), seq))?;
        if let Some(route) = to {
            state.source = route.to_owned();
        }
        state.status = Status::Pending;
        state.attempts = 0;
        state.round_started_ms = now_ms;
        state.dead = None;
        state.delivered_ms = None;
        state.replays += 1;
        self.keep(seq, state)?;
        self.reschedule(seq, state, now_ms)?;
        self.join_line(seq, state)?;
        Ok(Ok(()))
    }

    /// Marks the event ignored with `note`: out of its queue, the DLQ and
    /// its key's line, swept after `dlq_ttl`.
    fn ignore(
        &mut self,
        seq: u64,
        state: &mut EventState,
        note: &str,
        now_ms: u64,
        ttls: &Ttls,
    ) -> Result<(), WriteError> {
        self.unschedule(seq, state)?;
        self.dlq.remove((state.source.as_str(), seq))?;
        self.leave_line(seq, state)?;
        state.status = Status::Ignored;
        state.note = Some(Note {
            text: note.to_owned(),
            at_ms: now_ms,
        });
        self.expire_at(seq, state, now_ms.saturating_add(ttls.dlq_ms))
    }

    /// Rewrites the event's record without its body and headers; ids,
    /// type, content type and receipt time stay.
    fn erase_payload(&mut self, seq: u64) -> Result<(), WriteError> {
        let (record, packed): (EventRecord, _) = match self.events.get(seq)? {
            Some(raw) => (
                pack::decode::<WriteError>(&self.pack, raw.value())?,
                pack::place(raw.value())?,
            ),
            None => return Ok(()),
        };
        // The old bytes become zeros; the small record left is the row.
        if let Some(place) = packed {
            self.packer.remove(&mut self.pack, place, true)?;
        }
        let mut scratch = Vec::new();
        let mut out = Vec::new();
        row::encode_event(
            &EventRecordRef {
                source: &record.source,
                event_id: &record.event_id,
                event_type: record.event_type.as_deref(),
                received_at_ms: record.received_at_ms,
                content_type: record.content_type.as_deref(),
                headers: &[],
                body: &[],
            },
            &mut scratch,
            &mut out,
        );
        self.events.insert(seq, out.as_slice())?;
        Ok(())
    }

    /// Attempts that were in flight when the process stopped: recorded as
    /// interrupted, the lease dropped; the event stays due (its schedule entry
    /// is in the past), so it goes out again first thing. Returns how many.
    pub fn recover_leases(&mut self) -> Result<usize, WriteError> {
        let mut leased = Vec::new();
        for row in self.leases.iter()? {
            let (seq, started) = row?;
            leased.push((seq.value(), started.value()));
        }
        for &(seq, started_ms) in &leased {
            self.leases.remove(seq)?;
            let Some(mut state) = self.state(seq)? else {
                continue;
            };
            let before = Indexed::of(&state).into_owned();
            let round = state.replays;
            self.add_attempt(
                seq,
                &mut state,
                &Attempt {
                    started_ms,
                    latency_ms: 0,
                    class: AttemptClass::Interrupted,
                    status: None,
                    error: Some(
                        "hookinbox stopped during this attempt; the destination may or may not have received it".into(),
                    ),
                    response_snippet: None,
                    round,
                    first_byte_ms: None,
                    request_headers: Vec::new(),
                    response_headers: Vec::new(),
                },
            )?;
            self.put_state(seq, Some(&before), &state)?;
        }
        Ok(leased.len())
    }
}

/// Where and as what a new event is stored.
pub(super) struct StoredAs<'a> {
    pub seq: u64,
    pub fp: Fingerprint,
    pub source: &'a str,
    pub event_type: Option<&'a str>,
    pub received: u64,
}

/// Stores a new event: its encoded `record`, dedupe key, and per delivery
/// (`initial`'s routes, keys `seq`, `seq + 1`, …) its state, indexes and
/// place in its destination's queue. Returns how many keys the event took.
pub(super) fn store_event(
    t: &mut Tables<'_>,
    at: &StoredAs<'_>,
    record: &[u8],
    initial: &Initial,
    ttls: &Ttls,
) -> Result<u64, WriteError> {
    let (seq, source, received) = (at.seq, at.source, at.received);
    let place = t.packer.append(&mut t.pack, record)?;
    row::encode_place(place, &mut t.buf);
    t.events.insert(seq, t.buf.as_slice())?;
    t.index.count_minute(received, source, MinuteKind::Received);
    t.dedupe.insert(seq, (at.fp, received))?;
    let starts = initial.starts(source);
    for (key, (route, status, ordering)) in (seq..).zip(&starts) {
        let ordering = ordering.map(str::to_owned);
        if let Some(line) = &ordering {
            t.ordered.insert((*route, line.as_str(), key), ())?;
        }
        let mut state = EventState::new(route, at.event_type, *status, received, ordering);
        if *status == Status::Filtered {
            t.expire_at(key, &mut state, received.saturating_add(ttls.payload_ms))?;
        }
        t.put_state(key, None, &state)?;
        if *status == Status::Pending {
            t.schedule.insert((*route, received, key), ())?;
        }
    }
    Ok(starts.len() as u64)
}

/// The keys a sweep took from the logs, for the dedupe index: event keys
/// gone, event keys kept live for their pending or held events (the index
/// pins them), idempotency keys gone.
#[derive(Debug, Default)]
pub struct Forgotten {
    events: Vec<(Fingerprint, u64)>,
    kept: Vec<(Fingerprint, u64)>,
    keys: Vec<(Fingerprint, u64)>,
}

impl Forgotten {
    /// Tells `moved` each key's change: (kind, fingerprint, the seq it was
    /// at, the seq it is at now).
    pub fn tell(&self, moved: &mut dyn FnMut(Kind, Fingerprint, Option<u64>, Option<u64>)) {
        for &(fp, seq) in &self.events {
            moved(Kind::Event, fp, Some(seq), None);
        }
        for &(fp, seq) in &self.kept {
            moved(Kind::Event, fp, Some(seq), Some(seq));
        }
        for &(fp, seq) in &self.keys {
            moved(Kind::Key, fp, Some(seq), None);
        }
    }
}
