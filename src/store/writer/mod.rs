//! The single writer: the only code that opens a redb write transaction.
//!
//! Group commit: the thread blocks for one job, then takes everything else
//! already queued (up to [`MAX_BATCH`](super::options::MAX_BATCH)), applies the whole batch in ONE
//! transaction and commits it: to redb without durability, its entries
//! sealed as one write-ahead log frame ([`super::wal`]); or, once per
//! `checkpoint_every`, durably (a checkpoint, after which the log starts
//! over). The batch then goes to the log thread ([`super::durable`]), which
//! answers each waiter once the frame is synced; the writer meanwhile
//! applies the next batch. New requests queue up while it works, so the
//! batch size follows the load; under load it lingers a few microseconds for
//! the producers just answered (see [`LINGER_FROM`]); idle, it never waits.
//!
//! Under load a checkpoint runs beside the writer instead ([`beside`]):
//! while it holds the database, new events are decided and logged without
//! it, and applied by the next transaction.
//!
//! Readers see a batch as soon as redb has it, before it is durable (as
//! they see anything the writer committed): a lookup may find an event a
//! moment before its sender's answer (or, for one answered while a
//! checkpoint ran beside, a moment after). Nothing leaves hookinbox on the
//! strength of it: a delivery first claims the event through this writer,
//! and that claim is answered only after everything before it is durable.
//!
//! Duplicates inside one batch resolve in arrival order: the batch is applied
//! in queue order and each event is checked against the batch's own new keys
//! before the dedupe index, so the second copy sees the first one's key.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::borrow::Cow;

use redb::Durability;
use tokio::sync::{mpsc, oneshot};

use super::dedupe::seal::Sealer;
use super::dedupe::{DedupeIndex, Fingerprint, Kind, fingerprint};
use super::durable::{Batch, Durability as Made, LogHandle, Ready, Reply, fail};
use super::entry::Entry;
use super::error::{Report, StoreError, WriteError};
use super::format::log as log_format;
use super::format::row::{self, EventRecordRef};
use super::handle::{Shared, public_id};
use super::index::MinuteKind;
use super::job::{Job, Message};
use super::keys::{self, KeyWrite};
use super::options::StoreOptions;
use super::recover::{commit_checkpoint, replay};
use super::tables::{StoredAs, Tables, Ttls, store_event};
use super::types::{Ingested, Initial};
use super::wal::{META_LSN, Wal, WalError};

mod beside;
mod moves;
mod runs;
mod reopen;
mod standby;
pub(super) use beside::Checkpointer;
pub(super) use moves::Keys;
use standby::Applied;
pub(super) use standby::META_STREAM_SEQ;

/// The `meta` row a readiness probe writes and removes.
const PROBE_KEY: &str = "readiness-probe";
use crate::verify::VerifiedEvent;

/// Linger: a commit answers its whole batch at once, and those producers
/// come back together a few microseconds later — after the writer has already
/// taken whatever else was queued. Without a pause the batches settle at about
/// half the producers. So when the last batch shows load (≥ `LINGER_FROM`
/// events), the writer keeps collecting until the queue has been quiet for
/// `LINGER_QUIET`, at most `LINGER_MAX` — small next to a commit (≈ 1.5 ms),
/// and never when idle, where one event is one commit. benches/ingest.rs:
/// 64 producers went from ≈ 32 to ≈ 62 events per commit.
const LINGER_FROM: usize = 4;
const LINGER_QUIET: Duration = Duration::from_micros(50);
const LINGER_MAX: Duration = Duration::from_micros(400);

impl Job {
    /// Answers a job that never ran with its batch's cause.
    fn fail(self, cause: &Arc<WriteError>) {
        match self {
            Job::Ingest { reply, .. } => fail(reply, cause),
            Job::Claim { reply, .. } => fail(reply, cause),
            Job::Finish { reply, .. }
            | Job::SetMeta { reply, .. }
            | Job::Ping { reply }
            | Job::Probe { reply, .. } => fail(reply, cause),
            Job::Change { reply, .. } => fail(reply, cause),
            Job::Sweep { reply, .. } => fail(reply, cause),
            Job::Key { reply, .. } => fail(reply, cause),
            Job::Apply { reply, .. } | Job::Audit { reply, .. } => fail(reply, cause),
            Job::Promote { reply } | Job::Interrupted { reply } => fail(reply, cause),
        }
    }
}

/// Pairs a job's result with its reply: `Ok` waits for the commit in
/// `ready`; `Err` fails this job now and ends the batch with the cause.
fn settle<T>(
    reply: oneshot::Sender<Result<T, StoreError>>,
    result: Result<T, WriteError>,
    ready: &mut Vec<Ready>,
    wrap: fn(Reply<T>) -> Ready,
) -> Result<(), Arc<WriteError>> {
    match result {
        Ok(answer) => {
            ready.push(wrap(Reply { to: reply, answer }));
            Ok(())
        }
        Err(e) => {
            let cause = Arc::new(e);
            fail(reply, &cause);
            Err(cause)
        }
    }
}

pub(super) struct Writer {
    shared: Arc<Shared>,
    options: StoreOptions,
    next_seq: u64,
    /// The receipt time of the newest stored event: a new event is stamped
    /// no earlier, so receipt time never decreases along seq and a time
    /// range is a seq range (`Store::list` finds it by binary search).
    last_received_ms: u64,
    record_buf: Vec<u8>,
    scratch: Vec<u8>,
    wal: Wal,
    /// The number of the last frame or checkpoint committed to redb.
    lsn: u64,
    last_checkpoint: Instant,
    log: LogHandle,
    /// Batches committed to redb and not yet answered as durable, oldest
    /// first, with the dedupe keys each changed. The index learns a batch's
    /// keys when redb commits it (the next batch must see them); if its frame
    /// then fails, the reopened database says whether it holds the batch,
    /// and the index keeps or forgets the keys to match ([`Writer::database`]).
    in_flight: VecDeque<InFlight>,
    /// A standby's writer: it stores only the frames its primary shipped
    /// ([`Job::Apply`]), until promoted.
    standby: bool,
    /// The last frame the batch being applied brought, if it applied any.
    applied: Option<Applied>,
    /// Writes the dedupe index's frozen maps as runs, merges runs, deletes
    /// expired ones.
    sealer: Sealer,
    /// A merge is under way on the sealer; `merge_paused`: the last one
    /// failed, so none until the next run is sealed.
    merging: bool,
    merge_paused: bool,
    /// The runs changed (or the writer just started): look for a merge.
    runs_changed: bool,
    /// Runs a checkpoint beside the writer ([`beside`]).
    checkpointer: Checkpointer,
    /// Frames logged while a checkpoint held the database, not yet applied
    /// to it (number, payload), oldest first: the next transaction applies
    /// them first, from these bytes, as recovery would.
    backlog: Vec<(u64, Vec<u8>)>,
    /// Jobs taken while a checkpoint held the database that need it (all
    /// but new events and pings), in order: applied after the backlog.
    held: Vec<Job>,
    /// The newest event key the database holds: readers find it.
    applied_seq: u64,
}

struct InFlight {
    lsn: u64,
    keys: Keys,
    /// Whether the index has the keys: not when redb's commit itself failed.
    learned: bool,
}

/// Sends on drop, so the signal fires on a normal exit and on a panic alike.
struct ExitSignal(Option<oneshot::Sender<()>>);

impl Drop for ExitSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

pub(super) fn spawn(
    mut writer: Writer,
    mut rx: mpsc::Receiver<Message>,
    exit: oneshot::Sender<()>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || {
            let _exit = ExitSignal(Some(exit));
            let max_batch = writer.options.max_batch.max(1);
            let mut batch: Vec<Job> = Vec::with_capacity(max_batch);
            let mut ready: Vec<Ready> = Vec::with_capacity(max_batch);
            let mut last_batch = 0;
            let mut closed = false;
            while let Some(job) = rx.blocking_recv() {
                let started = Instant::now();
                let mut quiet_since = started;
                let mut next = Some(job);
                loop {
                    while let Some(job) = next.take() {
                        quiet_since = Instant::now();
                        match job {
                            // Closing the receiver refuses new sends; what is already
                            // queued is still received and committed below.
                            Message::Shutdown => {
                                rx.close();
                                closed = true;
                            }
                            Message::Job(job) => batch.push(job),
                        }
                        if batch.len() < max_batch {
                            next = rx.try_recv().ok();
                        }
                    }
                    if closed || batch.len() >= max_batch || last_batch < LINGER_FROM {
                        break;
                    }
                    let now = Instant::now();
                    if now - quiet_since >= LINGER_QUIET || now - started >= LINGER_MAX {
                        break;
                    }
                    std::thread::yield_now();
                    next = rx.try_recv().ok();
                }
                last_batch = batch.len();
                if !batch.is_empty() {
                    writer.commit(&mut batch, &mut ready);
                }
            }
            writer.close();
        })
}

impl Writer {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        shared: Arc<Shared>,
        sealer: Sealer,
        options: StoreOptions,
        next_seq: u64,
        last_received_ms: u64,
        wal: Wal,
        lsn: u64,
        log: LogHandle,
        checkpointer: Checkpointer,
    ) -> Writer {
        Writer {
            shared,
            next_seq,
            last_received_ms,
            record_buf: Vec::with_capacity(4096),
            scratch: Vec::with_capacity(4096),
            wal,
            lsn,
            last_checkpoint: Instant::now(),
            standby: options.standby,
            options,
            log,
            in_flight: VecDeque::new(),
            applied: None,
            sealer,
            merging: false,
            merge_paused: false,
            runs_changed: true,
            checkpointer,
            backlog: Vec::new(),
            held: Vec::new(),
            applied_seq: next_seq - 1,
        }
    }

    /// Applies `batch` in one transaction, commits it and hands it to the
    /// log thread, which answers every job once it is durable; or answers
    /// all of them with the cause if anything failed (nothing of the batch
    /// is then stored, or it is stored and answered 503, which a retry
    /// turns into a duplicate).
    fn commit(&mut self, batch: &mut Vec<Job>, ready: &mut Vec<Ready>) {
        self.tend_runs();
        if self.log.failed() {
            // A frame did not reach the disk: its batch and every later one
            // were answered 503. Reopen, which finds out what is stored.
            self.reopen();
        }
        let busy = batch.len() >= LINGER_FROM;
        self.poll_checkpoint();
        if self.checkpointer.running() {
            self.defer(batch, ready);
            return;
        }
        if !self.held.is_empty() {
            // Taken while the checkpoint ran: before the new ones.
            let mut jobs = std::mem::take(&mut self.held);
            jobs.append(batch);
            *batch = jobs;
        }
        if batch.is_empty() && self.backlog.is_empty() {
            return;
        }
        self.apply_batch(batch, ready, busy);
    }

    /// [`Writer::commit`] once no checkpoint holds the database: the
    /// backlog, then `batch`, in one transaction.
    fn apply_batch(&mut self, batch: &mut Vec<Job>, ready: &mut Vec<Ready>, busy: bool) {
        let first_seq = self.next_seq;
        let started = Instant::now();
        let jobs = batch.len();
        let probe = batch
            .iter()
            .any(|job| matches!(job, Job::Probe { bytes, .. } if *bytes > 0));
        // A probe proves a durable write of an event's size: never the log's.
        let checkpoint = batch.iter().any(|job| matches!(job, Job::Probe { .. }));
        match self.apply(batch, ready, checkpoint, probe, busy) {
            Ok((lsn, durability)) => {
                self.applied_seq = self.next_seq - 1;
                self.forget_durable();
                self.log.send(Batch {
                    lsn,
                    durability,
                    newest: self.next_seq - 1,
                    replies: std::mem::replace(ready, Vec::with_capacity(jobs)),
                    jobs,
                    started,
                });
            }
            Err(cause) => {
                self.next_seq = first_seq;
                tracing::error!(cause = %Report(&*cause), jobs, "store commit failed; answering 503 and reopening the database");
                for reply in ready.drain(..) {
                    reply.fail(&cause);
                }
                for job in batch.drain(..) {
                    job.fail(&cause);
                }
                self.shared.write_error.send_replace(Some(cause));
                self.reopen();
            }
        }
    }

    /// Applies the jobs of `batch` in one transaction, in queue order,
    /// moving each into `ready` with its answer, and commits it: without
    /// durability with its log frame sealed, or as a checkpoint (always when
    /// `checkpoint`; `probe`: it wrote an event-sized row). Returns its
    /// frame number and how it is made durable;
    /// the index has learned its dedupe keys. On failure, jobs not yet
    /// applied stay in `batch`; a job whose own step failed is answered here.
    fn apply(
        &mut self,
        batch: &mut Vec<Job>,
        ready: &mut Vec<Ready>,
        checkpoint: bool,
        probe: bool,
        busy: bool,
    ) -> Result<(u64, Made), Arc<WriteError>> {
        let db = self.database().map_err(Arc::new)?;
        let mut txn = db.begin_write().map_err(|e| Arc::new(e.into()))?;
        self.applied = None;
        let lsn = self.lsn + 1;
        self.wal.begin();
        let mut keys = Keys::with_capacity(batch.len());
        let backlog = std::mem::take(&mut self.backlog);
        let caught_up = backlog.last().map(|(n, _)| *n);
        let (durable, beside) = {
            let mut t = Tables::open(&txn).map_err(Arc::new)?;
            // Logged and answered while a checkpoint ran: applied first. If
            // this fails, the reopen that follows replays them from the log.
            let ttls = self.ttls();
            for (n, payload) in &backlog {
                for entry in log_format::entries(*n, payload)
                    .map_err(|e| Arc::new(WriteError::from(WalError::from(e))))?
                {
                    replay(&mut t, entry, &ttls).map_err(Arc::new)?;
                }
            }
            let shared = self.shared.clone();
            let index = shared.dedupe.read().unwrap_or_else(|p| p.into_inner());
            // Drained, not taken: the batch keeps its capacity for the next one.
            let mut jobs = batch.drain(..);
            let mut failed = None;
            for job in jobs.by_ref() {
                if let Err(cause) = self.apply_one(&mut t, &index, &mut keys, job, ready) {
                    failed = Some(cause);
                    break;
                }
            }
            if let Some(cause) = failed {
                let rest: Vec<Job> = jobs.collect();
                batch.extend(rest);
                return Err(cause);
            }
            drop(jobs);
            let due = checkpoint
                || !self.wal.fits()
                || self.last_checkpoint.elapsed() >= self.options.checkpoint_every;
            let beside = due && !checkpoint && busy && self.beside_eligible();
            let durable = due && !beside;
            if let Some(applied) = &self.applied {
                // A standby's frames: numbered by its primary.
                applied.record(&mut t).map_err(Arc::new)?;
            } else if !self.standby && (durable || self.wal.has_entries()) {
                t.meta
                    .insert(META_LSN, lsn.to_le_bytes().as_slice())
                    .map_err(|e| Arc::new(e.into()))?;
            } else if let Some(last) = caught_up {
                t.meta
                    .insert(META_LSN, last.to_le_bytes().as_slice())
                    .map_err(|e| Arc::new(e.into()))?;
            }
            t.index.flush().map_err(Arc::new)?;
            (durable, beside)
        };
        // Only jobs that log change keys: a batch without entries is a ping,
        // with no frame number and nothing to make durable.
        let applied = self.applied.take().map(|a| a.lsn);
        let lsn = applied.unwrap_or(lsn);
        // A standby numbers nothing itself: only its primary's frames move it.
        let logs = applied.is_some() || (!self.standby && (durable || self.wal.has_entries()));
        let committed = if durable {
            commit_checkpoint(txn)
        } else {
            txn.set_durability(Durability::None)
                .map_err(WriteError::from)
                .and_then(|()| txn.commit().map_err(WriteError::from))
        };
        if let Err(e) = committed {
            // A failed commit may still have reached the file: the reopen
            // that follows decides by the frame number it holds.
            if logs {
                self.in_flight.push_back(InFlight {
                    lsn,
                    keys,
                    learned: false,
                });
            }
            return Err(Arc::new(e));
        }
        if !logs {
            return Ok((self.lsn, Made::Nothing));
        }
        self.learn(&keys, durable);
        self.in_flight.push_back(InFlight {
            lsn,
            keys,
            learned: true,
        });
        self.lsn = lsn;
        if applied.is_some() {
            // Its primary's log holds it: nothing of its own to log or ship.
            if durable {
                self.wal.rewind();
                self.last_checkpoint = Instant::now();
                return Ok((
                    lsn,
                    Made::Checkpoint {
                        probe,
                        shipped: None,
                    },
                ));
            }
            return Ok((lsn, Made::Nothing));
        }
        if durable {
            self.last_checkpoint = Instant::now();
            if self.options.shipper.is_none() {
                // Not logged: the file holds it.
                self.wal.rewind();
                return Ok((
                    lsn,
                    Made::Checkpoint {
                        probe,
                        shipped: None,
                    },
                ));
            }
            // Logged and shipped all the same, so that a follower's frames
            // have no gap and every frame not yet shipped is in the log; the
            // log starts over only when every frame before is shipped.
            if self.log.shipped() + 1 >= lsn {
                self.wal.rewind();
            }
            let frame = self.wal.take_frame(lsn);
            Ok((
                lsn,
                Made::Checkpoint {
                    probe,
                    shipped: Some(frame),
                },
            ))
        } else if beside {
            // The frame starts the other segment; the checkpoint makes
            // everything before durable meanwhile (this batch too).
            self.wal.switch();
            let frame = self.wal.take_frame(lsn);
            self.start_checkpoint(&db, lsn);
            Ok((lsn, Made::Logged(frame)))
        } else {
            Ok((lsn, Made::Logged(self.wal.take_frame(lsn))))
        }
    }

    /// One job's step in the batch's transaction.
    fn apply_one(
        &mut self,
        t: &mut Tables<'_>,
        index: &DedupeIndex,
        keys: &mut Keys,
        job: Job,
        ready: &mut Vec<Ready>,
    ) -> Result<(), Arc<WriteError>> {
        let refused = match &job {
            Job::Apply { .. } => !self.standby,
            Job::Ping { .. } | Job::Promote { .. } => false,
            _ => self.standby,
        };
        if refused {
            // A standby stores only its primary's frames; a primary none.
            let cause = Arc::new(WriteError::Role {
                standby: self.standby,
            });
            job.fail(&cause);
            return Ok(());
        }
        match job {
            Job::Apply {
                frames,
                stream_seq,
                reply,
            } => {
                // Refused alone, before the transaction sees it: frames
                // that do not continue are the follower's mistake, not a
                // failed commit.
                if let Err(gap) = self.continues(&frames) {
                    fail(reply, &Arc::new(gap));
                    return Ok(());
                }
                let result = self.apply_frames(t, keys, &frames, stream_seq);
                settle(reply, result, ready, Ready::Applied)
            }
            Job::Promote { reply } => {
                // The promoted store's first frame records the attempts its
                // old primary had in flight: delivered again from here. It
                // also fences that primary: the stream takes it only if
                // nothing was appended since the check.
                let result = self.promote(t).and_then(|()| self.interrupted(t));
                settle(reply, result, ready, Ready::Done)
            }
            Job::Interrupted { reply } => {
                let result = self.interrupted(t);
                settle(reply, result, ready, Ready::Done)
            }
            Job::Ingest {
                event,
                initial,
                reply,
            } => {
                let result = self.ingest(t, index, keys, &event, &initial);
                settle(reply, result, ready, Ready::Ingested)
            }
            Job::Claim {
                seq,
                started_ms,
                reply,
            } => {
                self.wal.push(&Entry::Claim { seq, started_ms });
                settle(reply, t.claim(seq, started_ms), ready, Ready::Claimed)
            }
            Job::Finish { finish, reply } => {
                self.wal.push(&Entry::Finish(Cow::Borrowed(&finish)));
                settle(reply, t.finish(&finish, &self.ttls()), ready, Ready::Done)
            }
            Job::Change {
                seq,
                change,
                now_ms,
                reply,
            } => {
                self.wal.push(&Entry::Change {
                    seq,
                    change: Cow::Borrowed(&change),
                    now_ms,
                });
                settle(
                    reply,
                    t.change(seq, &change, now_ms, &self.ttls()),
                    ready,
                    Ready::Changed,
                )
            }
            Job::Ping { reply } => settle(reply, Ok(()), ready, Ready::Done),
            // Always in a checkpoint (see `commit`): nothing to log.
            Job::Probe { bytes, reply } => {
                let result = if bytes == 0 {
                    t.meta.remove(PROBE_KEY).map(drop)
                } else {
                    t.meta
                        .insert(PROBE_KEY, vec![0u8; bytes].as_slice())
                        .map(drop)
                };
                settle(reply, result.map_err(WriteError::from), ready, Ready::Done)
            }
            Job::Key {
                namespace,
                key,
                op,
                now_ms,
                reply,
            } => {
                let fp = keys::fingerprint(&namespace, &key);
                let result = keys
                    .live(index, Kind::Key, fp)
                    .map_err(WriteError::from)
                    .and_then(|at| Ok((at, t.key(&namespace, &key, at, &op, now_ms)?)))
                    .map(|(at, (answer, write))| {
                        if let Some(write) = write {
                            let new = match &write {
                                KeyWrite::Put { seq, .. } => Some(*seq),
                                KeyWrite::Remove { .. } => None,
                            };
                            keys.moved(Kind::Key, fp, at, new);
                            self.wal.push(&Entry::KeyWrite(Cow::Owned(write)));
                        }
                        answer
                    });
                settle(reply, result, ready, Ready::Key)
            }
            Job::Audit { write, reply } => {
                let result = t.audit(write).map(|written| match written {
                    Some((id, record)) => {
                        self.wal.push(&Entry::Audit {
                            id,
                            record: Cow::Borrowed(&record),
                        });
                        id
                    }
                    None => 0,
                });
                settle(reply, result, ready, Ready::Audited)
            }
            Job::SetMeta { key, value, reply } => {
                self.wal.push(&Entry::SetMeta {
                    key: Cow::Borrowed(&key),
                    value: Cow::Borrowed(&value),
                });
                let result = t.meta.insert(key.as_str(), value.as_slice()).map(drop);
                settle(reply, result.map_err(WriteError::from), ready, Ready::Done)
            }
            Job::Sweep {
                now_ms,
                limit,
                reply,
            } => {
                self.wal.push(&Entry::Sweep { now_ms, limit });
                let result = t
                    .sweep(now_ms, limit, &self.ttls())
                    .map(|(swept, forgotten)| {
                        forgotten.tell(&mut |kind, fp, old, new| keys.moved(kind, fp, old, new));
                        swept
                    });
                settle(reply, result, ready, Ready::Swept)
            }
        }
    }

    /// An event's step: a duplicate of a live key (one this batch added
    /// first, then the index's, unless this batch removed it), or stored
    /// under the next seq.
    fn ingest(
        &mut self,
        t: &mut Tables<'_>,
        index: &DedupeIndex,
        keys: &mut Keys,
        event: &VerifiedEvent,
        initial: &Initial,
    ) -> Result<Ingested, WriteError> {
        let fp = fingerprint(event.source().as_str(), event.event_id().as_str());
        // Earlier in this batch first: the index learns the batch's keys after the commit.
        match keys.live(index, Kind::Event, fp)? {
            Some(seq) => {
                let (received_ms, source) = (event.received_at_ms(), event.source().as_str());
                t.index
                    .count_minute(received_ms, source, MinuteKind::Duplicate);
                self.wal.push(&Entry::Duplicate {
                    received_ms,
                    source: Cow::Borrowed(source),
                });
                Ok(Ingested::Duplicate {
                    id: public_id(self.shared.tag, seq),
                })
            }
            None => {
                let seq = self.next_seq;
                self.insert_event(t, seq, fp, event, initial).map(|taken| {
                    self.next_seq += taken;
                    keys.moved(Kind::Event, fp, None, Some(seq));
                    self.wal.push(&Entry::Ingest {
                        seq,
                        initial: Cow::Borrowed(initial),
                        record: Cow::Borrowed(&self.record_buf),
                    });
                    Ingested::New {
                        id: public_id(self.shared.tag, seq),
                    }
                })
            }
        }
    }

    fn ttls(&self) -> Ttls {
        ttls(&self.options)
    }

    fn insert_event(
        &mut self,
        t: &mut Tables<'_>,
        seq: u64,
        fp: Fingerprint,
        ev: &VerifiedEvent,
        initial: &Initial,
    ) -> Result<u64, WriteError> {
        let received = self.encode_record(ev);
        let stored = StoredAs {
            seq,
            fp,
            source: ev.source().as_str(),
            event_type: ev.event_type(),
            received,
        };
        store_event(t, &stored, &self.record_buf, initial, &self.ttls())
    }
}

impl Writer {
    /// Encodes `ev`'s record into `record_buf`; returns its receipt time.
    fn encode_record(&mut self, ev: &VerifiedEvent) -> u64 {
        // Verified a moment apart, queued in another order: keep the stored
        // times in seq order (a clock stepping back waits here too).
        let received = ev.received_at_ms().max(self.last_received_ms);
        self.last_received_ms = received;
        row::encode_event(
            &EventRecordRef {
                source: ev.source().as_str(),
                event_id: ev.event_id().as_str(),
                event_type: ev.event_type(),
                received_at_ms: received,
                content_type: ev.content_type(),
                headers: ev.headers(),
                body: ev.body(),
            },
            &mut self.scratch,
            &mut self.record_buf,
        );
        received
    }
}

pub(super) fn ttls(options: &StoreOptions) -> Ttls {
    Ttls {
        dedupe_ms: options.dedupe_ttl.as_millis() as u64,
        payload_ms: options.payload_ttl.as_millis() as u64,
        dlq_ms: options.dlq_ttl.as_millis() as u64,
        audit_ms: options.audit_ttl.as_millis() as u64,
    }
}
