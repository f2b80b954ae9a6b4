//! Every table of one write transaction, and the state changes the writer
//! makes with them. Each method keeps the cross-table invariants together:
//! an event is `Pending` iff it has a `schedule` entry at `state.due_ms`;
//! `Dead` iff it has a `dlq` entry; a lease exists only on a pending event.

use redb::{ReadableTable, Table, WriteTransaction};

use super::schema::{
    self, ATTEMPTS, Attempt, AttemptClass, DEDUPE, DLQ, DeadLetter, EVENTS, EventState, LEASES,
    Note, ORDERED, SCHEDULE, STATE, Status,
};
use super::{Change, ChangeError, Claimed, Finish, Next};

pub(super) struct Tables<'t> {
    pub events: Table<'t, u64, &'static [u8]>,
    pub states: Table<'t, u64, &'static [u8]>,
    pub dedupe: Table<'t, u64, (u128, u64)>,
    pub schedule: Table<'t, (&'static str, u64, u64), ()>,
    pub leases: Table<'t, u64, u64>,
    pub attempts: Table<'t, (u64, u32), &'static [u8]>,
    pub dlq: Table<'t, (&'static str, u64), ()>,
    pub ordered: Table<'t, (&'static str, &'static str, u64), ()>,
    buf: Vec<u8>,
}

impl<'t> Tables<'t> {
    pub fn open(txn: &'t WriteTransaction) -> Result<Tables<'t>, redb::Error> {
        Ok(Tables {
            events: txn.open_table(EVENTS)?,
            states: txn.open_table(STATE)?,
            dedupe: txn.open_table(DEDUPE)?,
            schedule: txn.open_table(SCHEDULE)?,
            leases: txn.open_table(LEASES)?,
            attempts: txn.open_table(ATTEMPTS)?,
            dlq: txn.open_table(DLQ)?,
            ordered: txn.open_table(ORDERED)?,
            buf: Vec::with_capacity(256),
        })
    }

    pub fn put_state(&mut self, seq: u64, state: &EventState) -> Result<(), redb::Error> {
        schema::encode(state, &mut self.buf);
        self.states.insert(seq, self.buf.as_slice())?;
        Ok(())
    }

    fn state(&self, seq: u64) -> Result<Option<EventState>, redb::Error> {
        match self.states.get(seq)? {
            None => Ok(None),
            Some(raw) => schema::decode(raw.value())
                .map(Some)
                .map_err(|e| redb::Error::Corrupted(format!("state of event {seq}: {e}"))),
        }
    }

    fn add_attempt(
        &mut self,
        seq: u64,
        state: &mut EventState,
        attempt: &Attempt,
    ) -> Result<(), redb::Error> {
        schema::encode(attempt, &mut self.buf);
        self.attempts
            .insert((seq, state.total_attempts), self.buf.as_slice())?;
        state.total_attempts += 1;
        state.attempts += 1;
        Ok(())
    }

    fn unschedule(&mut self, seq: u64, state: &mut EventState) -> Result<(), redb::Error> {
        if let Some(due) = state.due_ms.take() {
            self.schedule.remove((state.source.as_str(), due, seq))?;
        }
        Ok(())
    }

    fn reschedule(
        &mut self,
        seq: u64,
        state: &mut EventState,
        due: u64,
    ) -> Result<(), redb::Error> {
        self.unschedule(seq, state)?;
        self.schedule
            .insert((state.source.as_str(), due, seq), ())?;
        state.due_ms = Some(due);
        Ok(())
    }

    /// Takes the event out of its key's line: later events of the key may go.
    fn leave_line(&mut self, seq: u64, state: &EventState) -> Result<(), redb::Error> {
        if let Some(key) = &state.ordering_key {
            self.ordered
                .remove((state.source.as_str(), key.as_str(), seq))?;
        }
        Ok(())
    }

    /// Puts the event back in its key's line, at its place by seq.
    fn join_line(&mut self, seq: u64, state: &EventState) -> Result<(), redb::Error> {
        if let Some(key) = &state.ordering_key {
            self.ordered
                .insert((state.source.as_str(), key.as_str(), seq), ())?;
        }
        Ok(())
    }

    /// Leases a pending event that has no attempt in flight.
    pub fn claim(&mut self, seq: u64, started_ms: u64) -> Result<Option<Claimed>, redb::Error> {
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
    pub fn finish(&mut self, finish: &Finish) -> Result<(), redb::Error> {
        let seq = finish.seq;
        let Some(mut state) = self.state(seq)? else {
            return Ok(());
        };
        let leased = self.leases.remove(seq)?.is_some();
        self.add_attempt(seq, &mut state, &finish.attempt)?;
        if leased && state.status == Status::Pending {
            match &finish.next {
                Next::Delivered { at_ms } => {
                    self.unschedule(seq, &mut state)?;
                    self.leave_line(seq, &state)?;
                    state.status = Status::Delivered;
                    state.delivered_ms = Some(*at_ms);
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
                    state.dead = Some(DeadLetter {
                        reason: reason.clone(),
                        at_ms: *at_ms,
                        last_status: finish.attempt.status,
                    });
                    self.dlq.insert((state.source.as_str(), seq), ())?;
                }
            }
        }
        self.put_state(seq, &state)
    }

    /// A person's replay or ignore. Errors inside `Ok` are refusals that
    /// change nothing; `Err` is a storage failure.
    pub fn change(
        &mut self,
        seq: u64,
        change: &Change,
        now_ms: u64,
    ) -> Result<Result<(), ChangeError>, redb::Error> {
        let Some(mut state) = self.state(seq)? else {
            return Ok(Err(ChangeError::NotFound));
        };
        if self.leases.get(seq)?.is_some() {
            return Ok(Err(ChangeError::InFlight));
        }
        match change {
            Change::Replay => match state.status {
                Status::Dead | Status::Delivered | Status::Ignored => {
                    self.dlq.remove((state.source.as_str(), seq))?;
                    state.status = Status::Pending;
                    state.attempts = 0;
                    state.round_started_ms = now_ms;
                    state.dead = None;
                    state.delivered_ms = None;
                    state.replays += 1;
                    self.reschedule(seq, &mut state, now_ms)?;
                    self.join_line(seq, &state)?;
                }
                Status::Pending => return Ok(Err(ChangeError::Conflict("is already pending"))),
                Status::Held => {
                    return Ok(Err(ChangeError::Conflict(
                        "is held: its source has no destination",
                    )));
                }
            },
            Change::Ignore { note } => match state.status {
                Status::Pending | Status::Dead | Status::Held => {
                    self.unschedule(seq, &mut state)?;
                    self.dlq.remove((state.source.as_str(), seq))?;
                    self.leave_line(seq, &state)?;
                    state.status = Status::Ignored;
                    state.note = Some(Note {
                        text: note.clone(),
                        at_ms: now_ms,
                    });
                }
                Status::Delivered => {
                    return Ok(Err(ChangeError::Conflict("was already delivered")));
                }
                Status::Ignored => return Ok(Err(ChangeError::Conflict("is already ignored"))),
            },
        }
        self.put_state(seq, &state)?;
        Ok(Ok(()))
    }

    /// Attempts that were in flight when the process stopped: recorded as
    /// interrupted, the lease dropped; the event stays due (its schedule entry
    /// is in the past), so it goes out again first thing. Returns how many.
    pub fn recover_leases(&mut self) -> Result<usize, redb::Error> {
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
                },
            )?;
            self.put_state(seq, &state)?;
        }
        Ok(leased.len())
    }
}
