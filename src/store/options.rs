//! [`StoreOptions`]: the settings the store takes from config, and their
//! defaults.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::ship::Shipper;

/// 512 events per transaction at most. benches/ingest.rs shows throughput
/// flat beyond ~256 per commit on 2 cores while a larger batch only makes the
/// first waiter's ack later.
pub const MAX_BATCH: usize = 512;

/// See [`StoreOptions::checkpoint_every`].
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Settings the store takes from config.
#[derive(Clone)]
pub struct StoreOptions {
    pub data_dir: PathBuf,
    pub dedupe_ttl: Duration,
    /// A delivered event is swept this long after its delivery.
    pub payload_ttl: Duration,
    /// A dead or ignored event is swept this long after it became so.
    pub dlq_ttl: Duration,
    /// An audit record is swept this long after it was made.
    pub audit_ttl: Duration,
    /// redb's page cache. 256 MiB keeps the dedupe table and the hot ends of
    /// the sequential tables in memory on a small VM.
    pub cache_bytes: usize,
    /// Most events per transaction. 1 means one fsync per event (what
    /// benches/ingest.rs compares group commit against).
    pub max_batch: usize,
    /// How often a batch is committed to redb durably (a checkpoint) instead
    /// of through the write-ahead log (see [`wal`](super::wal)). Longer: fewer bytes
    /// written per event; shorter: less log to replay after a crash.
    pub checkpoint_every: Duration,
    /// Event keys per sealed run of the dedupe index
    /// ([`dedupe::SEAL_KEYS`](super::dedupe::SEAL_KEYS); tests use a few).
    pub dedupe_seal_keys: usize,
    /// Told of every successful commit: jobs in it, and how long it took.
    pub on_commit: Option<CommitHook>,
    /// Told of every checkpoint when it ends (from the writer's thread or
    /// the checkpoint's: it must not block).
    pub on_checkpoint: Option<CheckpointHook>,
    /// Where each batch's frame goes before the batch is answered
    /// (replication); `None`: the local disk alone.
    pub shipper: Option<Arc<dyn Shipper>>,
    /// A standby: its writer applies only the frames its primary shipped
    /// ([`super::Store::apply_frames`]) until [promoted](super::Store::promote).
    pub standby: bool,
    /// The tag a new database takes (a standby takes its primary's, which
    /// public ids carry); an existing one must already have it. `None`: a
    /// new database draws one, an existing one keeps its own.
    pub tag: Option<u32>,
}

impl StoreOptions {
    pub fn new(data_dir: impl Into<PathBuf>, dedupe_ttl: Duration) -> StoreOptions {
        StoreOptions {
            data_dir: data_dir.into(),
            dedupe_ttl,
            payload_ttl: Duration::from_secs(7 * 86_400),
            dlq_ttl: Duration::from_secs(30 * 86_400),
            // A year as the config reads "1year": 365.25 days.
            audit_ttl: Duration::from_secs(31_557_600),
            cache_bytes: 256 << 20,
            max_batch: MAX_BATCH,
            checkpoint_every: CHECKPOINT_EVERY,
            dedupe_seal_keys: super::dedupe::SEAL_KEYS,
            on_commit: None,
            on_checkpoint: None,
            shipper: None,
            standby: false,
            tag: None,
        }
    }
}

/// See [`StoreOptions::on_commit`].
pub type CommitHook = Arc<dyn Fn(usize, Duration) + Send + Sync>;

/// See [`StoreOptions::on_checkpoint`].
pub type CheckpointHook = Arc<dyn Fn(&Checkpointed) + Send + Sync>;

/// A checkpoint that ended: every frame up to `lsn` durable in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointed {
    pub lsn: u64,
    pub took: Duration,
    /// On its own thread while the writer went on (else the writer's own
    /// commit made it).
    pub beside: bool,
    /// Why it failed (the database is reopened), if it did.
    pub failure: Option<String>,
}
