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
//! The writer knows no operation by name: each job is an [`Op`] of
//! `ops/`, which says where it runs and how its batch commits, and does its
//! step in the batch's transaction through a [`Step`] the writer lends it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::Durability;
use tokio::sync::{mpsc, oneshot};

use super::dedupe::seal::Sealer;
use super::durable::{Batch, Durability as Made, LogHandle};
use super::error::{Report, WriteError};
use super::format::log as log_format;
use super::handle::Shared;
use super::job::{Applied, Commit, Job, Message, Numbering, Runs, Step};
use super::moves::Keys;
use super::options::StoreOptions;
use super::recover::{commit_checkpoint, replay};
use super::reply::Ready;
use super::tables::{Tables, Ttls};
use super::wal::{META_LSN, Wal, WalError};

mod beside;
mod runs;
mod reopen;
pub(super) use beside::Checkpointer;

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
// Sleeping between looks instead of yielding was measured (issue 48): the
// writer's CPU per ingest event at 128 connections fell from 10.1 to 9.1
// µs, but keys over the admin socket lost 10–16 % of their pairs/s, which
// wait on each commit: a yield that finds nothing else to run looks again
// at once, a nap wakes late. Not kept.

pub(super) struct Writer {
    shared: Arc<Shared>,
    options: StoreOptions,
    /// How events are numbered and stamped, lent to each step.
    events: Numbering,
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
    /// (jobs that run on a standby), until promoted.
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
            events: Numbering {
                next_seq,
                last_received_ms,
                tag: shared.tag,
                record_buf: Vec::with_capacity(4096),
                scratch: Vec::with_capacity(4096),
            },
            shared,
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
        let first_seq = self.events.next_seq;
        let started = Instant::now();
        let jobs = batch.len();
        // A probe proves a durable write of an event's size: never the log's.
        let probe = batch
            .iter()
            .any(|job| job.commit() == Commit::Checkpoint { event_sized: true });
        let checkpoint = batch
            .iter()
            .any(|job| matches!(job.commit(), Commit::Checkpoint { .. }));
        match self.apply(batch, ready, checkpoint, probe, busy) {
            Ok((lsn, durability)) => {
                self.applied_seq = self.events.next_seq - 1;
                self.forget_durable();
                self.log.send(Batch {
                    lsn,
                    durability,
                    newest: self.events.next_seq - 1,
                    replies: std::mem::replace(ready, Vec::with_capacity(jobs)),
                    jobs,
                    started,
                });
            }
            Err(cause) => {
                self.events.next_seq = first_seq;
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
            let mut step = Step {
                t: &mut t,
                index: &index,
                keys: &mut keys,
                wal: &mut self.wal,
                ready,
                ttls: &ttls,
                events: &mut self.events,
                options: &self.options,
                standby: &mut self.standby,
                applied: &mut self.applied,
                lsn: self.lsn,
                promoted: &shared.standby,
            };
            // Drained, not taken: the batch keeps its capacity for the next one.
            let mut jobs = batch.drain(..);
            let mut failed = None;
            for job in jobs.by_ref() {
                if let Err(cause) = run(job, &mut step) {
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
            let started = Instant::now();
            let committed = commit_checkpoint(txn);
            if let Some(hook) = &self.options.on_checkpoint {
                hook(&super::Checkpointed {
                    lsn,
                    took: started.elapsed(),
                    beside: false,
                    failure: committed.as_ref().err().map(|e| e.to_string()),
                });
            }
            committed
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

    fn ttls(&self) -> Ttls {
        ttls(&self.options)
    }
}

/// One job's step, or its refusal: a standby stores only its primary's
/// frames, a primary none.
fn run(job: Job, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
    let standby = *step.standby;
    let refused = match job.runs_on() {
        Runs::Primary => standby,
        Runs::Standby => !standby,
        Runs::Either => false,
    };
    if refused {
        job.fail(&Arc::new(WriteError::Role { standby }));
        return Ok(());
    }
    job.apply(step)
}

pub(super) fn ttls(options: &StoreOptions) -> Ttls {
    Ttls {
        dedupe_ms: options.dedupe_ttl.as_millis() as u64,
        payload_ms: options.payload_ttl.as_millis() as u64,
        dlq_ms: options.dlq_ttl.as_millis() as u64,
        audit_ms: options.audit_ttl.as_millis() as u64,
    }
}
