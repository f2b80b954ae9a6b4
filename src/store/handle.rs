//! [`Store`], the cheap handle callers hold, and what its clones share with
//! the writer and the log thread ([`Shared`]: the database slot, the job
//! queue, the dedupe index, the commit signal, the last write failure);
//! [`WriterHandle`], the writer thread to join at shutdown; public ids.
//! `Store`'s methods live with what they do: `open.rs`, `ops/` (one file
//! per durable operation, each queuing its job through [`Store::call`]),
//! `status.rs`, `read.rs`, `list.rs` and `stats.rs` (snapshots),
//! `backup.rs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use redb::Database;
use tokio::sync::{Notify, mpsc, oneshot};

use super::dedupe::DedupeIndex;
use super::error::{StoreError, WriteError};
use super::job::{self, Job, Message};
use super::reply::ReplyTo;

/// A cheap handle to the store. Clones share the writer and the database.
#[derive(Clone)]
pub struct Store {
    pub(super) shared: Arc<Shared>,
}

pub(super) struct Shared {
    /// `None` while the writer reopens the file after an I/O error, and after close.
    pub(super) db: RwLock<Option<Arc<Database>>>,
    pub(super) path: PathBuf,
    pub(super) tag: u32,
    pub(super) jobs: mpsc::Sender<job::Message>,
    /// Live dedupe keys. Only the writer changes them, after a commit; the
    /// sealer puts a run in the place of the keys it holds.
    pub(super) dedupe: Arc<RwLock<DedupeIndex>>,
    /// Signalled after every commit: the scheduler looks at its queues again.
    pub(super) schedule_changed: Notify,
    /// Why the last commit failed; `None` again once a readiness probe (an
    /// event-sized write) commits. A small commit passing proves nothing: on
    /// a full disk, claims and empty commits fit where events do not.
    pub(super) write_error: tokio::sync::watch::Sender<Option<Arc<WriteError>>>,
    /// A standby until promoted: the writer takes only its primary's frames.
    pub(super) standby: tokio::sync::watch::Sender<bool>,
    /// The key of the newest event answered as stored ([`Store::stored`]).
    pub(super) stored: tokio::sync::watch::Sender<u64>,
    /// The newest event key the writer gave out while a checkpoint held
    /// the database: above `stored`, an event may be answered and in the
    /// log, not yet in the database ([`Store::get_acked`]).
    pub(super) decided: std::sync::atomic::AtomicU64,
    /// What the log thread answered as durable and shipped.
    pub(super) progress: Arc<super::progress::Progress>,
}

/// The writer thread, to be joined at shutdown.
pub struct WriterHandle {
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
    pub(super) jobs: mpsc::Sender<job::Message>,
    pub(super) exited: Option<oneshot::Receiver<()>>,
}

impl WriterHandle {
    /// Splits off a signal that resolves when the writer thread ends, for
    /// whatever reason (shutdown, or a panic that would leave ingest unable to store).
    pub fn with_exit_signal(mut self) -> (WriterHandle, oneshot::Receiver<()>) {
        let exited = self.exited.take().expect("the exit signal is taken once");
        (self, exited)
    }

    /// Finishes what is queued, closes the database cleanly and returns.
    /// Blocking: call it from a blocking context.
    pub fn shutdown(mut self) {
        // A send error means the writer already stopped.
        let _ = self.jobs.blocking_send(job::Message::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(super) fn public_id(tag: u32, seq: u64) -> String {
    format!("hbx_{tag:08x}{seq:016x}")
}

impl Store {
    /// The database's tag, which its public ids carry (a standby takes its
    /// primary's).
    pub fn tag(&self) -> u32 {
        self.shared.tag
    }

    /// The public id of the event stored under `seq`.
    pub fn public_id(&self, seq: u64) -> String {
        public_id(self.shared.tag, seq)
    }

    /// The `seq` behind a public id of this database.
    pub fn parse_public_id(&self, id: &str) -> Option<u64> {
        let rest = id.strip_prefix("hbx_")?;
        if rest.len() != 24 || !rest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let tag = u32::from_str_radix(&rest[..8], 16).ok()?;
        (tag == self.shared.tag)
            .then(|| u64::from_str_radix(&rest[8..], 16).ok())
            .flatten()
    }

    /// Queues the job `job` makes of a reply channel and waits for its
    /// answer, which the writer sends once the job's batch is durable.
    pub(super) async fn call<T>(
        &self,
        job: impl FnOnce(ReplyTo<T>) -> Job,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.shared
            .jobs
            .send(Message::Job(job(reply)))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    pub(super) fn db(&self) -> Result<Arc<Database>, StoreError> {
        let slot = self.shared.db.read().unwrap_or_else(|p| p.into_inner());
        slot.clone().ok_or(StoreError::Reopening)
    }

    /// Where the database file is.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }
}
