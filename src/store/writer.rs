//! The single writer: the only code that opens a redb write transaction.
//!
//! Group commit: the thread blocks for one job, then takes everything else
//! already queued (up to [`MAX_BATCH`]), applies the whole batch in ONE
//! transaction, commits durably (fsync) and only then answers each waiter.
//! While it commits, new requests queue up and form the next batch, so the
//! batch size follows the load; under load it lingers a few microseconds for
//! the producers it just answered (see [`LINGER_FROM`]); idle, it never waits.
//!
//! Duplicates inside one batch resolve in arrival order: the batch is applied
//! in queue order and each event is checked against the batch's own new keys
//! before the dedupe index, so the second copy sees the first one's key.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Database, Durability};
use tokio::sync::{mpsc, oneshot};

use super::dedupe::{Fingerprint, fingerprint};
use super::schema::{self, EventRecordRef, EventState, Status};
use super::tables::{Tables, Ttls};
use super::{
    Change, ChangeError, Claimed, Finish, Ingested, Initial, Shared, StoreError, StoreOptions,
    Swept, open_database, public_id,
};

/// The `meta` row a readiness probe writes and removes.
const PROBE_KEY: &str = "readiness-probe";
use crate::verify::VerifiedEvent;

/// 512 events per transaction at most. benches/ingest.rs shows throughput
/// flat beyond ~256 per commit on 2 cores while a larger batch only makes the
/// first waiter's ack later.
pub const MAX_BATCH: usize = 512;

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

pub(super) enum Job {
    Ingest {
        event: VerifiedEvent,
        initial: Initial,
        reply: oneshot::Sender<Result<Ingested, StoreError>>,
    },
    /// Take a lease on a pending event before its attempt goes out.
    Claim {
        seq: u64,
        started_ms: u64,
        reply: oneshot::Sender<Result<Option<Claimed>, StoreError>>,
    },
    /// Record an attempt's outcome and what happens next.
    Finish {
        finish: Finish,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// A person's change to one event: replay or ignore.
    Change {
        seq: u64,
        change: Change,
        now_ms: u64,
        reply: oneshot::Sender<Result<Result<(), ChangeError>, StoreError>>,
    },
    /// Delete up to `limit` expired things.
    Sweep {
        now_ms: u64,
        limit: usize,
        reply: oneshot::Sender<Result<Swept, StoreError>>,
    },
    /// Set one `meta` row (a destination's pause state, …).
    SetMeta {
        key: String,
        value: Vec<u8>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// Commit (an empty transaction if alone): proves the writer alive.
    Ping {
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// Readiness probe: write a `bytes`-long row (or remove it, with 0). A
    /// commit that writes an event-sized row is what proves the store can
    /// take events again; only this clears the last write failure.
    Probe {
        bytes: usize,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// Finish what is queued, refuse new jobs, close the database.
    Shutdown,
}

/// Dedupe keys a batch added and removed, for the index once it commits.
struct Keys {
    added: HashMap<Fingerprint, u64>,
    removed: HashSet<(Fingerprint, u64)>,
}

enum Answer {
    Ingested(Ingested),
    Claimed(Option<Claimed>),
    Finished,
    Changed(Result<(), ChangeError>),
    Pong,
    Swept(Swept),
}

// A dropped receiver is a caller that went away: what was committed stands.
impl Job {
    /// Answers with `cause` instead of a result: the batch did not commit.
    fn fail(self, cause: &str) {
        let err = || StoreError::Unavailable(cause.to_owned());
        match self {
            Job::Ingest { reply, .. } => drop(reply.send(Err(err()))),
            Job::Claim { reply, .. } => drop(reply.send(Err(err()))),
            Job::Finish { reply, .. } => drop(reply.send(Err(err()))),
            Job::Change { reply, .. } => drop(reply.send(Err(err()))),
            Job::Ping { reply } | Job::Probe { reply, .. } => drop(reply.send(Err(err()))),
            Job::Sweep { reply, .. } => drop(reply.send(Err(err()))),
            Job::SetMeta { reply, .. } => drop(reply.send(Err(err()))),
            Job::Shutdown => {}
        }
    }

    fn answer(self, answer: Answer) {
        match (self, answer) {
            (Job::Ingest { reply, .. }, Answer::Ingested(a)) => drop(reply.send(Ok(a))),
            (Job::Claim { reply, .. }, Answer::Claimed(a)) => drop(reply.send(Ok(a))),
            (Job::Finish { reply, .. }, Answer::Finished) => drop(reply.send(Ok(()))),
            (Job::Change { reply, .. }, Answer::Changed(a)) => drop(reply.send(Ok(a))),
            (Job::Ping { reply }, Answer::Pong) => drop(reply.send(Ok(()))),
            (Job::Sweep { reply, .. }, Answer::Swept(a)) => drop(reply.send(Ok(a))),
            (Job::SetMeta { reply, .. }, Answer::Finished) => drop(reply.send(Ok(()))),
            (Job::Probe { reply, .. }, Answer::Finished) => drop(reply.send(Ok(()))),
            _ => unreachable!("apply answers each job with its own kind"),
        }
    }
}

pub(super) struct Writer {
    shared: Arc<Shared>,
    options: StoreOptions,
    next_seq: u64,
    record_buf: Vec<u8>,
    scratch: Vec<u8>,
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
    mut rx: mpsc::Receiver<Job>,
    exit: oneshot::Sender<()>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("store-writer".into())
        .spawn(move || {
            let _exit = ExitSignal(Some(exit));
            let max_batch = writer.options.max_batch.max(1);
            let mut batch: Vec<Job> = Vec::with_capacity(max_batch);
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
                            Job::Shutdown => {
                                rx.close();
                                closed = true;
                            }
                            job => batch.push(job),
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
                    writer.commit(&mut batch);
                }
            }
            writer.close();
        })
}

impl Writer {
    pub(super) fn new(shared: Arc<Shared>, options: StoreOptions, next_seq: u64) -> Writer {
        Writer {
            shared,
            options,
            next_seq,
            record_buf: Vec::with_capacity(4096),
            scratch: Vec::with_capacity(4096),
        }
    }

    fn commit(&mut self, batch: &mut Vec<Job>) {
        let first_seq = self.next_seq;
        let started = Instant::now();
        match self.apply(batch) {
            Ok((answers, keys)) => {
                if let Some(hook) = &self.options.on_commit {
                    hook(batch.len(), started.elapsed());
                }
                if batch
                    .iter()
                    .any(|job| matches!(job, Job::Probe { bytes, .. } if *bytes > 0))
                {
                    self.shared
                        .write_error
                        .send_if_modified(|e| e.take().is_some());
                }
                let mut index = self
                    .shared
                    .dedupe
                    .write()
                    .unwrap_or_else(|p| p.into_inner());
                for (fp, seq) in keys.removed {
                    index.remove(fp, seq);
                }
                for (fp, seq) in keys.added {
                    index.insert(fp, seq);
                }
                drop(index);
                for (job, answer) in batch.drain(..).zip(answers) {
                    job.answer(answer);
                }
                // The schedule may have changed: new events, retries, replays.
                self.shared.schedule_changed.notify_one();
            }
            Err(cause) => {
                self.next_seq = first_seq;
                self.shared.write_error.send_replace(Some(cause.clone()));
                tracing::error!(%cause, jobs = batch.len(), "store commit failed; answering 503 and reopening the database");
                for job in batch.drain(..) {
                    job.fail(&cause);
                }
                self.reopen();
            }
        }
    }

    fn database(&self) -> Result<Arc<Database>, String> {
        if let Some(db) = self
            .shared
            .db
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Ok(db);
        }
        let db = Arc::new(
            open_database(&self.shared.path, self.options.cache_bytes)
                .map_err(|e| e.to_string())?,
        );
        *self.shared.db.write().unwrap_or_else(|p| p.into_inner()) = Some(db.clone());
        tracing::info!(path = %self.shared.path.display(), "database reopened");
        Ok(db)
    }

    /// Applies `batch` in one durable transaction. Returns each job's answer
    /// and the dedupe keys it added and removed, for the index once the commit stands.
    fn apply(&mut self, batch: &[Job]) -> Result<(Vec<Answer>, Keys), String> {
        let db = self.database()?;
        let mut txn = db.begin_write().map_err(|e| e.to_string())?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| e.to_string())?;
        // Quick repair saves the allocator state with each commit, so that
        // reopening after kill -9 is instant instead of a walk of the file.
        txn.set_quick_repair(true);
        let mut added: HashMap<Fingerprint, u64> = HashMap::with_capacity(batch.len());
        let mut removed: HashSet<(Fingerprint, u64)> = HashSet::new();
        let mut answers = Vec::with_capacity(batch.len());
        {
            let err = |e: redb::Error| e.to_string();
            let mut t = Tables::open(&txn).map_err(err)?;
            let shared = self.shared.clone();
            let index = shared.dedupe.read().unwrap_or_else(|p| p.into_inner());
            for job in batch {
                let answer = match job {
                    Job::Ingest { event, initial, .. } => {
                        let fp = fingerprint(event.source().as_str(), event.event_id().as_str());
                        // Earlier in this batch first: the index learns the batch's keys after the commit.
                        let live = index.get(fp).filter(|seq| !removed.contains(&(fp, *seq)));
                        if let Some(&seq) = added.get(&fp).or(live.as_ref()) {
                            Answer::Ingested(Ingested::Duplicate {
                                id: public_id(self.shared.tag, seq),
                            })
                        } else {
                            let seq = self.next_seq;
                            self.next_seq += 1;
                            self.insert_event(&mut t, seq, fp, event, initial)
                                .map_err(err)?;
                            added.insert(fp, seq);
                            Answer::Ingested(Ingested::New {
                                id: public_id(self.shared.tag, seq),
                            })
                        }
                    }
                    Job::Claim {
                        seq, started_ms, ..
                    } => Answer::Claimed(t.claim(*seq, *started_ms).map_err(err)?),
                    Job::Finish { finish, .. } => {
                        t.finish(finish, &self.ttls()).map_err(err)?;
                        Answer::Finished
                    }
                    Job::Change {
                        seq,
                        change,
                        now_ms,
                        ..
                    } => {
                        Answer::Changed(t.change(*seq, change, *now_ms, &self.ttls()).map_err(err)?)
                    }
                    Job::Ping { .. } => Answer::Pong,
                    Job::Probe { bytes: 0, .. } => {
                        t.meta.remove(PROBE_KEY).map_err(|e| err(e.into()))?;
                        Answer::Finished
                    }
                    Job::Probe { bytes, .. } => {
                        t.meta
                            .insert(PROBE_KEY, vec![0u8; *bytes].as_slice())
                            .map_err(|e| err(e.into()))?;
                        Answer::Finished
                    }
                    Job::SetMeta { key, value, .. } => {
                        t.meta
                            .insert(key.as_str(), value.as_slice())
                            .map_err(|e| err(e.into()))?;
                        Answer::Finished
                    }
                    Job::Sweep { now_ms, limit, .. } => {
                        let (swept, forgotten) =
                            t.sweep(*now_ms, *limit, &self.ttls()).map_err(err)?;
                        removed.extend(forgotten);
                        Answer::Swept(swept)
                    }
                    Job::Shutdown => unreachable!("shutdown never enters a batch"),
                };
                answers.push(answer);
            }
        }
        txn.commit().map_err(|e| e.to_string())?;
        Ok((answers, Keys { added, removed }))
    }

    fn ttls(&self) -> Ttls {
        Ttls {
            dedupe_ms: self.options.dedupe_ttl.as_millis() as u64,
            payload_ms: self.options.payload_ttl.as_millis() as u64,
            dlq_ms: self.options.dlq_ttl.as_millis() as u64,
        }
    }

    fn insert_event(
        &mut self,
        t: &mut Tables<'_>,
        seq: u64,
        fp: Fingerprint,
        ev: &VerifiedEvent,
        initial: &Initial,
    ) -> Result<(), redb::Error> {
        let received = ev.received_at_ms();
        schema::encode_event(
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
        t.events.insert(seq, self.record_buf.as_slice())?;
        let source = ev.source().as_str();
        let (status, key) = match initial {
            Initial::Deliver => (Status::Pending, None),
            Initial::Ordered(key) => (Status::Pending, Some(key.clone())),
            Initial::Hold => (Status::Held, None),
        };
        if let Some(key) = &key {
            t.ordered.insert((source, key.as_str(), seq), ())?;
        }
        t.put_state(
            seq,
            &EventState::new(source, ev.event_type(), status, received, key),
        )?;
        t.dedupe.insert(seq, (fp, received))?;
        if status == Status::Pending {
            t.schedule.insert((source, received, seq), ())?;
        }
        Ok(())
    }

    /// After a failed commit redb refuses further writes (and reads) until
    /// the file is reopened ("close and re-open the database"). Take the
    /// handle out of the shared slot, wait for readers to let go of it, drop
    /// it and open the file again at once, so readers are refused only for
    /// that moment. If the open fails too, the next batch tries again; until
    /// then readers get `Unavailable`.
    fn reopen(&mut self) {
        self.release_database();
        if let Err(cause) = self.database() {
            tracing::error!(%cause, "cannot reopen the database; trying again with the next write");
        }
    }

    fn close(&mut self) {
        self.release_database();
        tracing::info!("store closed");
    }

    fn release_database(&mut self) {
        let taken = self
            .shared
            .db
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(db) = taken {
            close_when_unshared(db);
        }
    }
}

/// Readers hold the database only for one read; give them up to 5 s to finish.
fn close_when_unshared(mut db: Arc<Database>) {
    for _ in 0..500 {
        match Arc::try_unwrap(db) {
            Ok(db) => {
                if let Err(e) = db.close() {
                    tracing::warn!(error = %e, "closing the database reported an error");
                }
                return;
            }
            Err(shared) => {
                db = shared;
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    tracing::warn!("readers still hold the database after 5 s; it closes when they finish");
}
