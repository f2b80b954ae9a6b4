//! What [`Store`] asks of the writer: each call queues one job and waits
//! for its durable answer (ingest, claim, finish, change, sweep, pause
//! states, ping); readiness (`ready`, `probe`, `keep_probing`) and the
//! scheduler's wake-up after a commit.

use std::sync::Arc;
use std::time::Duration;

use redb::{ReadableDatabase, ReadableTable};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::error::{StoreError, WriteError};
use super::handle::Store;
use super::job::{Job, Message};
use super::keys::{KeyAnswer, KeyOp};
use super::schema::META;
use super::types::{Change, ChangeError, Claimed, Finish, Ingested, Initial, Swept};
use crate::verify::VerifiedEvent;

/// How often an unwritable store is probed: a freed disk is noticed within
/// this, and each failing probe costs one commit of an event's size.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

/// `meta` keys of destinations' pause states.
const PAUSED_PREFIX: &str = "paused:";

impl Store {
    /// Stores a verified event, or finds it already stored. Returns once the
    /// answer is durable on disk.
    pub async fn ingest(
        &self,
        event: VerifiedEvent,
        initial: Initial,
    ) -> Result<Ingested, StoreError> {
        self.call(|reply| Job::Ingest {
            event,
            initial,
            reply,
        })
        .await
    }

    /// Changes idempotency key `key` of `namespace` as `op` asks, at
    /// `now_ms`. Returns once the answer is durable on disk.
    pub async fn key(
        &self,
        namespace: &str,
        key: &str,
        op: KeyOp,
        now_ms: u64,
    ) -> Result<KeyAnswer, StoreError> {
        self.call(|reply| Job::Key {
            namespace: namespace.to_owned(),
            key: key.to_owned(),
            op,
            now_ms,
            reply,
        })
        .await
    }

    /// A standby's: applies `frames` (number, payload), which continue the
    /// last frame applied without a gap; `stream_seq` is where the last of
    /// them is in the replication stream. Returns the last one's number,
    /// once readers see them.
    pub async fn apply_frames(
        &self,
        frames: Vec<(u64, Vec<u8>)>,
        stream_seq: u64,
    ) -> Result<u64, StoreError> {
        self.call(|reply| Job::Apply {
            frames,
            stream_seq,
            reply,
        })
        .await
    }

    /// A standby becomes the primary: it takes every kind of job from now
    /// on, numbering events and frames on from the last it applied.
    pub async fn promote(&self) -> Result<(), StoreError> {
        self.call(|reply| Job::Promote { reply }).await
    }

    pub(super) async fn call<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Job,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.shared
            .jobs
            .send(Message::Job(job(reply)))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Leases pending event `seq` for one attempt; `None` if it is not
    /// pending any more or already has an attempt in flight.
    pub async fn claim(&self, seq: u64, started_ms: u64) -> Result<Option<Claimed>, StoreError> {
        self.call(|reply| Job::Claim {
            seq,
            started_ms,
            reply,
        })
        .await
    }

    /// Records an attempt's outcome durably and releases its lease.
    pub async fn finish(&self, finish: Finish) -> Result<(), StoreError> {
        self.call(|reply| Job::Finish { finish, reply }).await
    }

    /// Replays or ignores event `seq`, durably.
    pub async fn change(
        &self,
        seq: u64,
        change: Change,
        now_ms: u64,
    ) -> Result<Result<(), ChangeError>, StoreError> {
        self.call(|reply| Job::Change {
            seq,
            change,
            now_ms,
            reply,
        })
        .await
    }

    /// Deletes up to `limit` expired things (events, then dedupe keys) as of
    /// `now_ms`, in one transaction through the writer. Call it again while
    /// `more` is set; each call is one bounded commit, so ingest never waits
    /// long behind the sweeper.
    pub async fn sweep(&self, now_ms: u64, limit: usize) -> Result<Swept, StoreError> {
        self.call(|reply| Job::Sweep {
            now_ms,
            limit,
            reply,
        })
        .await
    }

    /// Keeps a destination's pause state across restarts.
    pub async fn set_paused(&self, destination: &str, paused: bool) -> Result<(), StoreError> {
        let key = format!("{PAUSED_PREFIX}{destination}");
        self.call(|reply| Job::SetMeta {
            key,
            value: vec![u8::from(paused)],
            reply,
        })
        .await
    }

    /// Pause states set through [`Store::set_paused`], by destination.
    pub fn paused_states(&self) -> Result<std::collections::HashMap<String, bool>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let meta = txn.open_table(META)?;
        let mut out = std::collections::HashMap::new();
        for row in meta.iter()? {
            let (k, v) = row?;
            if let Some(name) = k.value().strip_prefix(PAUSED_PREFIX) {
                out.insert(name.to_owned(), v.value().first() == Some(&1));
            }
        }
        Ok(out)
    }

    /// Whether the writer thread is alive: it answers (an empty commit).
    /// Liveness, not readiness: on a full disk it still answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.call(|reply| Job::Ping { reply }).await
    }

    /// Whether the store can take events: the writer commits now, and no
    /// commit has failed since the last passing [`Store::probe`].
    pub async fn ready(&self) -> Result<(), StoreError> {
        if self.is_standby() {
            return Err(StoreError::Write(Arc::new(WriteError::Role {
                standby: true,
            })));
        }
        self.ping().await?;
        match self.shared.write_error.borrow().clone() {
            Some(cause) => Err(StoreError::Write(cause)),
            None => Ok(()),
        }
    }

    /// The newest frame the shipper took (replication): a snapshot taken at
    /// frame `n` is one of the stream's only once this reaches `n`.
    pub fn shipped(&self) -> u64 {
        self.shared.progress.shipped()
    }

    /// What this store shipped, readable after it closed (it holds no
    /// database): whether its disk kept frames the stream never took.
    pub fn shipping(&self) -> Shipping {
        Shipping(self.shared.progress.clone())
    }

    /// Whether the shipper found another primary writing the stream: this
    /// store answers no 2xx again, and its node steps down.
    pub fn replaced(&self) -> bool {
        self.shared.progress.replaced()
    }

    /// Whether this store is a standby (until promoted).
    pub fn is_standby(&self) -> bool {
        *self.shared.standby.borrow()
    }

    /// Resolves once this store is a primary (at once if it is one).
    pub async fn promoted(&self) {
        let mut watch = self.shared.standby.subscribe();
        let _ = watch.wait_for(|standby| !*standby).await;
    }

    /// No commit has failed since the last passing [`Store::probe`]: what
    /// [`Store::ready`] says without waiting for a commit.
    pub fn is_writable(&self) -> bool {
        self.shared.write_error.borrow().is_none()
    }

    /// Proves the store can take an event of `bytes`: commits a row that
    /// large, then removes it in a second commit. A failure marks the store
    /// unwritable (as any failed commit does); a pass clears that.
    pub async fn probe(&self, bytes: usize) -> Result<(), StoreError> {
        self.call(|reply| Job::Probe { bytes, reply }).await?;
        self.call(|reply| Job::Probe { bytes: 0, reply }).await
    }

    /// While a commit has failed and no probe has passed since, probes every
    /// [`PROBE_EVERY`], so readiness comes back by itself once the disk has
    /// room again, without waiting for a provider to send. Runs until
    /// `shutdown` resolves.
    pub async fn keep_probing(
        self,
        bytes: usize,
        shutdown: CancellationToken,
    ) -> Result<(), StoreError> {
        let mut failures = self.shared.write_error.subscribe();
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                failed = failures.wait_for(Option::is_some) => {
                    if failed.is_err() {
                        return Err(StoreError::Closed);
                    }
                }
            }
            loop {
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(PROBE_EVERY) => {}
                }
                match self.probe(bytes).await {
                    Ok(()) => {
                        tracing::info!(bytes, "the store can write events again");
                        break;
                    }
                    Err(e) => tracing::debug!(error = %e, "readiness probe failed"),
                }
            }
        }
    }

    /// Resolves after the next commit (or at once if one happened since the
    /// last call): the scheduler's wake-up.
    pub async fn schedule_changed(&self) {
        self.shared.schedule_changed.notified().await
    }
}

/// A replicating store's shipping, as [`Store::shipping`] hands it out.
#[derive(Clone)]
pub struct Shipping(std::sync::Arc<super::durable::Progress>);

impl Shipping {
    /// Whether the store's disk holds a frame the stream never took. Read
    /// once the store has closed: a replaced primary whose disk holds none
    /// is a prefix of the stream, and follows the new primary with its
    /// data; one that does must set its data aside.
    pub fn holds_unshipped(&self) -> bool {
        self.0.holds_unshipped()
    }
}
