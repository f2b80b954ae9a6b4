//! The checkpoint beside the writer.
//!
//! A checkpoint is redb's durable commit: it writes every page dirtied
//! since the last one and syncs the file, with the write lock held. On the
//! writer's thread that stalled ingest for its whole length (12–40 ms at
//! 5M events stored, several times a second under load), and the p99 answer
//! time with it. So under load (a batch of [`LINGER_FROM`](super::LINGER_FROM) jobs or more)
//! the writer commits the batch that makes a checkpoint due like any other,
//! sends its frame to the start of the log's other segment, and hands the
//! checkpoint to its own thread: an empty write transaction, committed
//! durably, which makes everything committed before it durable.
//!
//! While it runs the writer cannot open a transaction, so it
//! [defers](Writer::defer): each new event is decided against the dedupe
//! index alone (a duplicate, or the next seq), logged, and answered once its
//! frame is synced, as always; the frame is kept in the backlog, which the
//! first transaction after the checkpoint applies before anything else,
//! entry by entry as recovery does. Every other job waits for that
//! transaction, in order, since it needs the database. So an event answered
//! during a checkpoint is in the log, not yet in the database: a reader
//! finds it a few milliseconds later ([`super::super::Store::get_acked`]
//! waits for it).
//!
//! Idle, or with a shipper or as a standby, the checkpoint stays on the
//! writer's thread as before.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Instant;

use redb::Database;

use super::super::dedupe::Frozen;
use super::super::durable::{Batch, Durability as Made};
use super::super::error::{Report, WriteError};
use super::super::job::{Beside, Deciding, Job};
use super::super::recover::commit_checkpoint;
use super::super::reply::Ready;
use super::super::wal::META_LSN;
use super::{InFlight, Keys, Writer};

/// A durable commit's thread, and the checkpoint it runs, if any.
pub(in crate::store) struct Checkpointer {
    work: Option<mpsc::Sender<(Arc<Database>, u64)>>,
    done: mpsc::Receiver<Result<(), WriteError>>,
    thread: Option<std::thread::JoinHandle<()>>,
    running: Option<Running>,
}

/// The checkpoint under way.
struct Running {
    /// The frame it makes durable, with everything before.
    lsn: u64,
    /// The recent dedupe keys frozen when it began: sealed once it is
    /// durable, put back if it fails.
    frozen: Option<Frozen>,
    started: Instant,
}

impl Checkpointer {
    /// Starts the thread; `wake` tells an idle writer a checkpoint is done.
    pub fn spawn(wake: Box<dyn Fn() + Send>) -> std::io::Result<Checkpointer> {
        let (work, jobs) = mpsc::channel::<(Arc<Database>, u64)>();
        let (finished, done) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || {
                while let Ok((db, lsn)) = jobs.recv() {
                    let result = checkpoint(&db, lsn);
                    drop(db);
                    if finished.send(result).is_err() {
                        return;
                    }
                    wake();
                }
            })?;
        Ok(Checkpointer {
            work: Some(work),
            done,
            thread: Some(thread),
            running: None,
        })
    }

    pub fn running(&self) -> bool {
        self.running.is_some()
    }

    /// Ends the thread (after the checkpoint under way, if any).
    pub fn stop(&mut self) {
        self.work.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// An empty transaction committed durably, which records `lsn` again: it
/// makes every commit before it durable.
fn checkpoint(db: &Database, lsn: u64) -> Result<(), WriteError> {
    let txn = db.begin_write()?;
    {
        let mut meta = txn.open_table(super::super::schema::META)?;
        meta.insert(META_LSN, lsn.to_le_bytes().as_slice())?;
    }
    commit_checkpoint(txn)
}

impl Writer {
    /// Whether a checkpoint due now can run beside the writer: the frame
    /// being built has entries and fits an empty segment, no checkpoint
    /// runs, and the log is local (a shipper keeps each frame until it is
    /// shipped; a standby logs nothing of its own).
    pub(super) fn beside_eligible(&self) -> bool {
        self.options.shipper.is_none()
            && !self.standby
            && self.applied.is_none()
            && self.wal.has_entries()
            && self.wal.fits_empty()
            && !self.checkpointer.running()
    }

    /// Hands the checkpoint of everything up to `lsn` to its thread. The
    /// recent dedupe keys are frozen now (all are in the database) and
    /// sealed once the checkpoint made them durable.
    pub(super) fn start_checkpoint(&mut self, db: &Arc<Database>, lsn: u64) {
        let frozen = {
            let mut index = self
                .shared
                .dedupe
                .write()
                .unwrap_or_else(|p| p.into_inner());
            index.freeze(self.events.next_seq - 1, self.options.dedupe_seal_keys)
        };
        self.last_checkpoint = Instant::now();
        self.checkpointer.running = Some(Running {
            lsn,
            frozen,
            started: Instant::now(),
        });
        let sent = self
            .checkpointer
            .work
            .as_ref()
            .is_some_and(|w| w.send((db.clone(), lsn)).is_ok());
        if !sent {
            self.finish_checkpoint(Err(gone()), true);
        }
    }

    /// Takes the result of a checkpoint that finished, if one did.
    pub(super) fn poll_checkpoint(&mut self) {
        if self.checkpointer.running()
            && let Ok(result) = self.checkpointer.done.try_recv()
        {
            self.finish_checkpoint(result, true);
        }
    }

    /// Waits for the checkpoint under way, if any, and takes its result;
    /// `reopen`: after a failure, reopen the database (not when the caller
    /// is letting go of it anyway).
    pub(super) fn wait_checkpoint(&mut self, reopen: bool) {
        if self.checkpointer.running() {
            let result = self
                .checkpointer
                .done
                .recv()
                .unwrap_or_else(|_| Err(gone()));
            self.finish_checkpoint(result, reopen);
        }
    }

    /// A checkpoint ended: its frozen keys go to the sealer; or, if it
    /// failed, back to the recent map, and the database is reopened (which
    /// replays the log, backlog included).
    fn finish_checkpoint(&mut self, result: Result<(), WriteError>, reopen: bool) {
        let Some(running) = self.checkpointer.running.take() else {
            return;
        };
        let frozen = running.frozen;
        if let Some(hook) = &self.options.on_checkpoint {
            hook(&super::super::Checkpointed {
                lsn: running.lsn,
                took: running.started.elapsed(),
                beside: true,
                failure: result.as_ref().err().map(|e| Report(e).to_string()),
            });
        }
        match result {
            Ok(()) => {
                tracing::debug!(
                    lsn = running.lsn,
                    ms = running.started.elapsed().as_millis() as u64,
                    "checkpoint"
                );
                if let Some(frozen) = frozen {
                    let swept = self
                        .shared
                        .dedupe
                        .read()
                        .unwrap_or_else(|p| p.into_inner())
                        .swept();
                    self.sealer.seal(frozen, swept);
                }
            }
            Err(e) => {
                let cause = Arc::new(e);
                tracing::error!(cause = %Report(&*cause), lsn = running.lsn, "checkpoint failed; reopening the database");
                if frozen.is_some() {
                    self.shared
                        .dedupe
                        .write()
                        .unwrap_or_else(|p| p.into_inner())
                        .thaw();
                }
                self.shared.write_error.send_replace(Some(cause));
                if reopen {
                    self.reopen();
                }
            }
        }
    }

    /// While a checkpoint holds the database: each new event of `batch` is
    /// decided and logged as one frame (kept in the backlog), pings are
    /// answered with it, and every other job is held, in order. If the
    /// log's segment fills up, the rest waits for the checkpoint too.
    pub(super) fn defer(&mut self, batch: &mut Vec<Job>, ready: &mut Vec<Ready>) {
        let started = Instant::now();
        let jobs = batch.len();
        self.wal.begin();
        let mut keys = Keys::with_capacity(jobs);
        let mut full = false;
        {
            let shared = self.shared.clone();
            let index = shared.dedupe.read().unwrap_or_else(|p| p.into_inner());
            let mut step = Deciding {
                index: &index,
                keys: &mut keys,
                wal: &mut self.wal,
                ready,
                events: &mut self.events,
                decided: &shared.decided,
            };
            for job in batch.drain(..) {
                if full {
                    self.held.push(job);
                    continue;
                }
                match job.beside(&mut step) {
                    Beside::Done => {}
                    Beside::Held(job) => self.held.push(job),
                    Beside::NoRoom(job) => {
                        full = true;
                        self.held.push(job);
                    }
                }
            }
        }
        let durability = if self.wal.has_entries() {
            let lsn = self.lsn + 1;
            self.learn(&keys, false);
            self.in_flight.push_back(InFlight {
                lsn,
                keys,
                learned: true,
            });
            self.lsn = lsn;
            let frame = self.wal.take_frame(lsn);
            self.backlog.push((lsn, frame.payload().to_vec()));
            Some(Made::Logged(frame))
        } else {
            (!ready.is_empty()).then_some(Made::Nothing)
        };
        if let Some(durability) = durability {
            self.forget_durable();
            self.log.send(Batch {
                lsn: self.lsn,
                durability,
                // Readers find only what the database holds.
                newest: self.applied_seq,
                replies: std::mem::replace(ready, Vec::with_capacity(jobs)),
                jobs,
                started,
            });
        }
        if full {
            self.wait_checkpoint(true);
        }
    }

    /// Whether the writer still has a backlog or held jobs to apply.
    pub(super) fn deferred(&self) -> bool {
        !self.backlog.is_empty() || !self.held.is_empty()
    }
}

fn gone() -> WriteError {
    WriteError::Io(std::io::Error::other("the checkpoint thread is gone"))
}
