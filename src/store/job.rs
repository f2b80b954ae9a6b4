//! What the writer's queue carries ([`Message`]: a [`Job`] or the shutdown)
//! and what a job may touch when the writer runs it ([`Step`]): the one
//! contract between the writer and the operations in `ops/`.
//!
//! A job is one call of a [`super::Store`] method that writes: an
//! operation's own type, holding its inputs and its reply channel, behind
//! the [`Op`] trait. The writer knows no operation by name: it asks each
//! job where it may run ([`Op::runs_on`]), how its batch must commit
//! ([`Op::commit`]), and runs it in the batch's transaction ([`Op::apply`])
//! or, while a checkpoint holds the database, without it ([`Op::beside`]).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::dedupe::DedupeIndex;
use super::entry::Entry;
use super::error::WriteError;
use super::moves::Keys;
use super::options::StoreOptions;
use super::reply::{Ready, ReplyTo, fail};
use super::tables::{Tables, Ttls};
use super::wal::{META_LSN, Wal};

/// One call of a writing [`super::Store`] method, queued for the writer.
pub(super) type Job = Box<dyn Op>;

/// What the writer's queue carries.
pub(super) enum Message {
    Job(Job),
    /// Finish what is queued, refuse new jobs, close the database.
    Shutdown,
}

/// Which stores take a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runs {
    /// A primary only (every job that changes what the store holds).
    Primary,
    /// A standby only: its primary's frames.
    Standby,
    /// Either.
    Either,
}

/// How the batch holding a job commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Commit {
    /// As its batch would: logged, or a checkpoint when one is due.
    AsDue,
    /// As a checkpoint (a durable redb commit), never the log's;
    /// `event_sized`: it writes a row the size of an event.
    Checkpoint { event_sized: bool },
}

/// What a job did while a checkpoint held the database.
pub(super) enum Beside {
    /// Decided and logged (or answered) without the database.
    Done,
    /// Needs the database: run once the checkpoint is over, in order.
    Held(Job),
    /// The log's segment is full: this job and every later one wait.
    NoRoom(Job),
}

/// A writing operation: its inputs and its reply.
pub(super) trait Op: AsJob + Send + 'static {
    /// Which stores take it; the writer fails it on the others.
    fn runs_on(&self) -> Runs {
        Runs::Primary
    }

    fn commit(&self) -> Commit {
        Commit::AsDue
    }

    /// Its step in the batch's transaction: what it does to the tables, the
    /// entry it logs, and its answer pushed to `step.ready` (sent once the
    /// batch is durable). An `Err` fails the whole batch with the cause;
    /// this job is answered already.
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>>;

    /// While a checkpoint holds the database: most jobs wait for it.
    fn beside(self: Box<Self>, _step: &mut Deciding<'_>) -> Beside {
        Beside::Held(self.as_job())
    }

    /// Answers a job that never ran with its batch's cause.
    fn fail(self: Box<Self>, cause: &Arc<WriteError>);
}

/// A boxed operation as a [`Job`]: what lets [`Op::beside`]'s default hand
/// the job back.
pub(super) trait AsJob {
    fn as_job(self: Box<Self>) -> Job;
}

impl<T: Op> AsJob for T {
    fn as_job(self: Box<Self>) -> Job {
        self
    }
}

/// How events are numbered and stamped, and the buffers their records are
/// encoded in: the writer's, lent to each step.
pub(super) struct Numbering {
    /// The seq the next stored event takes.
    pub next_seq: u64,
    /// The receipt time of the newest stored event: a new event is stamped
    /// no earlier, so receipt time never decreases along seq and a time
    /// range is a seq range (`Store::list` finds it by binary search).
    pub last_received_ms: u64,
    /// The database's tag, which public ids carry.
    pub tag: u32,
    pub record_buf: Vec<u8>,
    pub scratch: Vec<u8>,
}

/// The last frame of its primary's that a standby's batch applied, and
/// where it is in the stream.
pub(super) struct Applied {
    pub lsn: u64,
    pub stream_seq: u64,
}

/// The `meta` row holding the stream sequence of the last frame applied.
pub const META_STREAM_SEQ: &str = "replicated_seq";

impl Applied {
    /// Records it in the batch's transaction.
    pub(super) fn record(&self, t: &mut Tables<'_>) -> Result<(), WriteError> {
        t.meta.insert(META_LSN, self.lsn.to_le_bytes().as_slice())?;
        t.meta
            .insert(META_STREAM_SEQ, self.stream_seq.to_le_bytes().as_slice())?;
        Ok(())
    }
}

/// What a job may touch in its batch's transaction, lent by the writer.
pub(super) struct Step<'s, 't> {
    pub t: &'s mut Tables<'t>,
    /// The dedupe index as of the batch's start; `keys` holds what the
    /// batch changed so far (read it through [`Keys::live`]).
    pub index: &'s DedupeIndex,
    pub keys: &'s mut Keys,
    /// The batch's log frame being built.
    pub wal: &'s mut Wal,
    pub ready: &'s mut Vec<Ready>,
    pub ttls: &'s Ttls,
    pub events: &'s mut Numbering,
    pub options: &'s StoreOptions,
    /// Whether this store is a standby; a promotion clears it.
    pub standby: &'s mut bool,
    /// A standby's: the last frame applied in this batch.
    pub applied: &'s mut Option<Applied>,
    /// The number of the last frame committed before this batch.
    pub lsn: u64,
    /// Tells the store's handles that it is a primary now.
    pub promoted: &'s tokio::sync::watch::Sender<bool>,
}

impl Step<'_, '_> {
    /// Logs `entry` in the batch's frame.
    pub fn log(&mut self, entry: &Entry<'_>) {
        self.wal.push(entry);
    }

    /// Pairs a job's result with its reply: `Ok` waits for the commit;
    /// `Err` fails this job now and ends the batch with the cause.
    pub fn settle<T: Send + 'static>(
        &mut self,
        reply: ReplyTo<T>,
        result: Result<T, WriteError>,
    ) -> Result<(), Arc<WriteError>> {
        match result {
            Ok(answer) => {
                self.ready.push(Ready::new(reply, answer));
                Ok(())
            }
            Err(e) => {
                let cause = Arc::new(e);
                fail(reply, &cause);
                Err(cause)
            }
        }
    }
}

/// What a job may touch while a checkpoint holds the database: no tables.
pub(super) struct Deciding<'s> {
    pub index: &'s DedupeIndex,
    pub keys: &'s mut Keys,
    pub wal: &'s mut Wal,
    pub ready: &'s mut Vec<Ready>,
    pub events: &'s mut Numbering,
    /// The newest event key given out while the checkpoint runs: readers
    /// look in the log above what the database holds.
    pub decided: &'s AtomicU64,
}
