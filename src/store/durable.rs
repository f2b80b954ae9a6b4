//! The log thread: makes each committed batch durable and only then answers
//! its jobs. It refuses to answer anything before its batch is on disk.
//!
//! The writer applies a batch, commits it to redb (without durability, or
//! as a durable checkpoint) and hands it here as a [`Batch`]; it then goes
//! on to the next batch while this thread writes the frame and waits for
//! the disk. So the serial stage is the writer's CPU work, not an fsync:
//! this thread takes every batch queued, writes their frames one after
//! another, `fdatasync`s once, and answers all of them in order. A frame
//! followed in the same group by a checkpoint is not written at all: the
//! checkpoint's durable commit holds it already.
//!
//! With a shipper (replication), a second thread ships each synced group
//! and answers it, so the next group is written and synced while the
//! stream's quorum acknowledges the one before; groups queued meanwhile go
//! out together.
//!
//! A failed write or sync fails that group and every batch after it, with
//! the same cause, until the writer [settles](LogHandle::settle) the
//! thread: the writer then reopens the database and finds out which of
//! those batches it holds after all (redb's close may persist non-durable
//! commits; a frame written but not synced may be replayed). Answering 503
//! for a batch that is stored is allowed (the provider's retry is a
//! duplicate with the original id); answering 200 for one that is not never
//! happens.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

use super::error::{Report, WriteError};
use super::handle::Shared;
use super::options::CommitHook;
use super::progress::Progress;
use super::reply::Ready;
use super::ship::{ShipError, ShippedFrame, Shipper};
use super::wal::Frame;

/// One batch the writer committed to redb.
pub(super) struct Batch {
    /// The frame number the batch's transaction recorded (the previous
    /// one's when it logged nothing).
    pub lsn: u64,
    pub durability: Durability,
    pub replies: Vec<Ready>,
    /// The newest event key stored once the batch is (the writer's next
    /// key less one): listeners read up to it when it is answered.
    pub newest: u64,
    /// For the commit hook: jobs in the batch and when it began.
    pub jobs: usize,
    pub started: Instant,
}

pub(super) enum Durability {
    /// Durable once its frame is synced.
    Logged(Frame),
    /// Committed durably: a checkpoint. `probe`: it wrote an event-sized
    /// row, which proves the disk takes events again. `shipped`: its
    /// frame's payload, kept for the shipper (none without one).
    Checkpoint { probe: bool, shipped: Option<Frame> },
    /// Nothing to make durable (a ping); answered in order with the rest.
    Nothing,
}

enum Item {
    Batch(Batch),
    /// Answer once every batch before it is answered.
    Settle(mpsc::SyncSender<()>),
}

/// The writer's end of the log thread.
pub(super) struct LogHandle {
    items: Option<mpsc::SyncSender<Item>>,
    progress: Arc<Progress>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Batches queued to the log thread at most. Each holds its callers'
/// replies, whose requests are bounded by the connection limit anyway; a
/// writer this far ahead of the disk waits here instead of growing memory.
const QUEUE: usize = 1024;

impl LogHandle {
    pub fn spawn(
        shared: Arc<Shared>,
        on_commit: Option<CommitHook>,
        shipper: Option<Arc<dyn Shipper>>,
    ) -> std::io::Result<LogHandle> {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let progress = shared.progress.clone();
        let answerer = Answerer {
            shared: shared.clone(),
            on_commit,
            shipper,
            unshipped: VecDeque::new(),
            replaced: None,
            progress: progress.clone(),
        };
        // With a shipper, a thread of its own ships and answers: the next
        // group's write and sync go on while it waits for the stream.
        let after = if answerer.shipper.is_some() {
            let (queue, groups) = mpsc::sync_channel(QUEUE);
            let thread = std::thread::Builder::new()
                .name("store-ship".into())
                .spawn(move || answerer.run(groups))?;
            After::Shipping {
                queue: Some(queue),
                thread: Some(thread),
            }
        } else {
            After::Here(answerer)
        };
        let thread = {
            let progress = progress.clone();
            std::thread::Builder::new()
                .name("store-log".into())
                .spawn(move || {
                    LogThread {
                        shared,
                        progress,
                        failed: None,
                        after,
                    }
                    .run(rx)
                })?
        };
        Ok(LogHandle {
            items: Some(tx),
            progress,
            thread: Some(thread),
        })
    }

    /// Queues a committed batch. A log thread that is gone (it panicked)
    /// leaves no way to answer anything: the writer stops too, and the app
    /// with it.
    pub fn send(&self, batch: Batch) {
        self.items
            .as_ref()
            .expect("the log thread runs until the writer stops")
            .send(Item::Batch(batch))
            .expect("the log thread runs while the writer does");
    }

    /// The newest batch number answered as durable.
    pub fn durable(&self) -> u64 {
        self.progress.durable.load(Ordering::Acquire)
    }

    /// The newest frame number shipped.
    pub fn shipped(&self) -> u64 {
        self.progress.shipped.load(Ordering::Acquire)
    }

    /// Whether a write or sync failed since the last settle.
    pub fn failed(&self) -> bool {
        self.progress.failed.load(Ordering::Acquire)
    }

    /// Returns once every batch queued so far is answered (as durable or
    /// failed) and the thread answers new batches normally again.
    pub fn settle(&self) {
        let (tx, rx) = mpsc::sync_channel(1);
        if let Some(items) = &self.items
            && items.send(Item::Settle(tx)).is_ok()
        {
            let _ = rx.recv();
        }
    }

    /// Answers what is queued and ends the thread.
    pub fn stop(&mut self) {
        self.items.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct LogThread {
    shared: Arc<Shared>,
    progress: Arc<Progress>,
    /// Why the last write failed, until the writer settles.
    failed: Option<Arc<WriteError>>,
    /// Who ships and answers the groups on the local disk.
    after: After,
}

/// Groups on the local disk: shipped and answered in this thread (no
/// shipper), or queued to the ship thread.
enum After {
    Here(Answerer),
    /// The ship thread takes the same items as this one, each batch once
    /// it is synced.
    Shipping {
        queue: Option<mpsc::SyncSender<Item>>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

/// Takes `first` and every item queued behind it, up to a settle (nothing
/// queues behind one: its sender waits): the batches into `group`, in
/// order; returns the settles, to answer after them.
fn gather(
    rx: &mpsc::Receiver<Item>,
    first: Item,
    group: &mut Vec<Batch>,
) -> Vec<mpsc::SyncSender<()>> {
    let mut next = Some(first);
    let mut settles = Vec::new();
    while let Some(item) = next.take() {
        match item {
            Item::Batch(batch) => group.push(batch),
            Item::Settle(done) => settles.push(done),
        }
        if settles.is_empty() {
            next = rx.try_recv().ok();
        }
    }
    settles
}

impl After {
    fn deliver(&mut self, group: &mut Vec<Batch>) {
        match self {
            After::Here(answerer) => answerer.deliver(group),
            After::Shipping { queue, .. } => {
                let queue = queue
                    .as_ref()
                    .expect("the ship thread runs until the log thread stops");
                for batch in group.drain(..) {
                    queue
                        .send(Item::Batch(batch))
                        .expect("the ship thread runs while the log thread does");
                }
            }
        }
    }

    fn settle(&mut self, done: mpsc::SyncSender<()>) {
        match self {
            After::Here(_) => {
                let _ = done.send(());
            }
            After::Shipping { queue, .. } => {
                if let Some(queue) = queue {
                    let _ = queue.send(Item::Settle(done));
                }
            }
        }
    }

    /// Answers what is queued and ends the ship thread.
    fn stop(&mut self) {
        if let After::Shipping { queue, thread } = self {
            queue.take();
            if let Some(thread) = thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// Ships the groups on the local disk and answers them: in the log thread
/// without a shipper, in the ship thread with one.
struct Answerer {
    shared: Arc<Shared>,
    on_commit: Option<CommitHook>,
    shipper: Option<Arc<dyn Shipper>>,
    /// Frames on the local disk the shipper has not taken yet, oldest
    /// first: shipped before any later one.
    unshipped: VecDeque<(u64, Vec<u8>)>,
    /// Set for good once the shipper says another writer took over.
    replaced: Option<Arc<WriteError>>,
    progress: Arc<Progress>,
}

impl Answerer {
    /// The ship thread: every group queued since the last ship goes out
    /// together, in order; a settle is answered after the groups before it.
    fn run(mut self, rx: mpsc::Receiver<Item>) {
        let mut group: Vec<Batch> = Vec::new();
        while let Ok(first) = rx.recv() {
            let settles = gather(&rx, first, &mut group);
            if !group.is_empty() {
                self.deliver(&mut group);
            }
            for done in settles {
                let _ = done.send(());
            }
        }
    }

    /// Ships a group that is on the local disk, then answers it.
    fn deliver(&mut self, group: &mut Vec<Batch>) {
        // On the local disk now: what the writer counts as stored.
        let stored = group.iter().map(|b| b.lsn).max().unwrap_or(0);
        if let Err(cause) = self.ship(group) {
            for batch in group.drain(..) {
                for reply in batch.replies {
                    reply.fail(&cause);
                }
            }
            self.progress.durable.fetch_max(stored, Ordering::AcqRel);
            return;
        }
        let mut newest = 0;
        let mut events = 0;
        for batch in group.drain(..) {
            events = events.max(batch.newest);
            if let Some(hook) = &self.on_commit {
                hook(batch.jobs, batch.started.elapsed());
            }
            if matches!(batch.durability, Durability::Checkpoint { probe: true, .. }) {
                self.shared
                    .write_error
                    .send_if_modified(|e| e.take().is_some());
            }
            newest = newest.max(batch.lsn);
            for reply in batch.replies {
                reply.send();
            }
        }
        self.progress.durable.fetch_max(newest, Ordering::AcqRel);
        self.shared.stored.send_if_modified(|v| {
            let newer = events > *v;
            *v = (*v).max(events);
            newer
        });
        if self.shipper.is_none() {
            self.progress.shipped.fetch_max(newest, Ordering::AcqRel);
        }
        // The schedule may have changed: new events, retries, replays.
        self.shared.schedule_changed.notify_one();
    }

    /// Ships the frames left over from earlier groups, then the group's,
    /// in order (without a shipper: nothing to do). A frame not taken is
    /// kept, with every later one, for the next group.
    fn ship(&mut self, group: &[Batch]) -> Result<(), Arc<WriteError>> {
        let Some(shipper) = self.shipper.clone() else {
            return Ok(());
        };
        if let Some(cause) = &self.replaced {
            return Err(cause.clone());
        }
        let payload = |batch: &Batch| -> Option<Vec<u8>> {
            match &batch.durability {
                Durability::Logged(frame) => Some(frame.payload().to_vec()),
                Durability::Checkpoint { shipped, .. } => {
                    shipped.as_ref().map(|f| f.payload().to_vec())
                }
                Durability::Nothing => None,
            }
        };
        let result = {
            let mut frames: Vec<ShippedFrame<'_>> = self
                .unshipped
                .iter()
                .map(|(lsn, payload)| ShippedFrame { lsn: *lsn, payload })
                .collect();
            for batch in group {
                match &batch.durability {
                    Durability::Logged(frame) => frames.push(ShippedFrame {
                        lsn: batch.lsn,
                        payload: frame.payload(),
                    }),
                    Durability::Checkpoint {
                        shipped: Some(frame),
                        ..
                    } => frames.push(ShippedFrame {
                        lsn: batch.lsn,
                        payload: frame.payload(),
                    }),
                    _ => {}
                }
            }
            if frames.is_empty() {
                return Ok(());
            }
            (shipper.ship(&frames), frames.last().map(|f| f.lsn))
        };
        let (result, frames_last) = result;
        match result {
            Ok(()) => {
                self.unshipped.clear();
                if let Some(last) = frames_last {
                    self.progress.shipped.fetch_max(last, Ordering::AcqRel);
                }
                Ok(())
            }
            Err(e) => {
                let replaced = matches!(e, ShipError::Replaced { .. });
                let cause = Arc::new(WriteError::from(e));
                tracing::error!(cause = %Report(&*cause), "frames stored here were not shipped; answering 503");
                if replaced {
                    self.progress.replaced.store(true, Ordering::Release);
                    self.replaced = Some(cause.clone());
                    self.unshipped.clear();
                } else {
                    for batch in group {
                        if let Some(payload) = payload(batch) {
                            self.unshipped.push_back((batch.lsn, payload));
                        }
                    }
                }
                Err(cause)
            }
        }
    }
}

impl LogThread {
    fn run(mut self, rx: mpsc::Receiver<Item>) {
        let mut group: Vec<Batch> = Vec::new();
        while let Ok(first) = rx.recv() {
            let settles = gather(&rx, first, &mut group);
            if !group.is_empty() {
                self.answer(&mut group);
            }
            for done in settles {
                self.failed = None;
                self.progress.failed.store(false, Ordering::Release);
                self.after.settle(done);
            }
        }
        self.after.stop();
    }

    /// Makes the group durable, then has it shipped and answered.
    fn answer(&mut self, group: &mut Vec<Batch>) {
        if self.failed.is_none()
            && let Err(e) = self.write(group)
        {
            let cause = Arc::new(WriteError::Io(e));
            tracing::error!(cause = %Report(&*cause), batches = group.len(), "cannot write the write-ahead log; answering 503 and reopening the database");
            self.shared.write_error.send_replace(Some(cause.clone()));
            self.progress.failed.store(true, Ordering::Release);
            self.failed = Some(cause);
        }
        if let Some(cause) = &self.failed {
            for batch in group.drain(..) {
                for reply in batch.replies {
                    reply.fail(cause);
                }
            }
            return;
        }
        self.after.deliver(group);
    }

    /// Writes the group's frames that no later checkpoint covers, then
    /// syncs the file they went to. With a shipper every frame is written,
    /// a checkpoint's too: the log keeps each until it is shipped (the
    /// writer starts the log over only once everything before is shipped).
    fn write(&self, group: &mut [Batch]) -> std::io::Result<()> {
        let covered = match self.after {
            After::Shipping { .. } => 0,
            After::Here(_) => group
                .iter()
                .rposition(|b| matches!(b.durability, Durability::Checkpoint { .. }))
                .map_or(0, |i| i + 1),
        };
        let mut synced: Option<Arc<std::fs::File>> = None;
        for batch in &mut group[covered..] {
            let frame = match &mut batch.durability {
                Durability::Logged(frame) => Some(frame),
                Durability::Checkpoint {
                    shipped: Some(frame),
                    ..
                } => Some(frame),
                _ => None,
            };
            if let Some(frame) = frame {
                frame.write()?;
                if let Some(file) = &synced
                    && !Arc::ptr_eq(file, frame.file())
                {
                    file.sync_data()?;
                }
                synced = Some(frame.file().clone());
            }
        }
        if let Some(file) = synced {
            file.sync_data()?;
        }
        Ok(())
    }
}
