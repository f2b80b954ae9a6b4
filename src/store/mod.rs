//! The store: one redb file, one writer thread, readers on snapshots.
//!
//! Owns the database file and every byte in it. Only [`writer`] opens a write
//! transaction; everything else reads through [`Store`]'s read methods, which
//! use redb's MVCC snapshots and never wait for the writer. The store does not
//! know HTTP, providers or config files: it takes a [`VerifiedEvent`] and
//! answers with where it landed.

mod dedupe;
mod entry;
mod format;
pub mod index;
mod payload;
pub mod schema;
mod tables;
mod durable;
mod wal;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::verify::VerifiedEvent;
use dedupe::{DedupeIndex, fingerprint};
use format::row;
use schema::{
    ATTEMPTS, Attempt, DEDUPE, DLQ, EVENTS, EXPIRY, EventRecord, EventState, LEASES, META,
    META_SCHEMA, META_TAG, MIGRATES_FROM, ORDERED, SCHEDULE, SCHEMA_VERSION, STATE,
};

pub use payload::PayloadMatch;
pub use writer::MAX_BATCH;

/// How often an unwritable store is probed: a freed disk is noticed within
/// this, and each failing probe costs one commit of an event's size.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

/// See [`StoreOptions::checkpoint_every`].
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// `meta` keys of destinations' pause states.
const PAUSED_PREFIX: &str = "paused:";

/// The database file's name inside the data dir.
pub const DB_FILE: &str = "hookinbox.redb";

/// How stats name the event type of events that have none.
pub const NO_TYPE: &str = "(none)";

/// How an event starts its life. Logged in the write-ahead log (as
/// [`format`] writes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Initial {
    /// Schema 5's form of `Routes` with one route, the source's own: read
    /// from a log an older build wrote.
    Deliver,
    /// Schema 5's ordered `Deliver`, read from an older build's log.
    Ordered(String),
    /// Its source has no destination: keep it in the inbox.
    Hold,
    /// No destination's filter takes it: stored, never delivered, swept
    /// after `payload_ttl` like a delivered event.
    Filtered,
    /// Deliver it to each of these destinations (at least one), each due
    /// now on its own queue: one delivery key per route, in this order.
    Routes(Vec<Route>),
}

/// One destination an event goes to, for [`Initial::Routes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The destination's queue name (see [`schema::route_source`]).
    pub destination: String,
    /// Deliver it after every earlier event of this key to this destination.
    pub ordering_key: Option<String>,
}

impl Initial {
    /// The routes of a new event of `source`, as delivery keys will follow
    /// them: `(route, status, ordering key)`, one for each key of its block.
    pub fn starts<'a>(
        &'a self,
        source: &'a str,
    ) -> Vec<(&'a str, schema::Status, Option<&'a str>)> {
        use schema::Status;
        match self {
            Initial::Deliver => vec![(source, Status::Pending, None)],
            Initial::Ordered(key) => vec![(source, Status::Pending, Some(key.as_str()))],
            Initial::Hold => vec![(source, Status::Held, None)],
            Initial::Filtered => vec![(source, Status::Filtered, None)],
            Initial::Routes(routes) => routes
                .iter()
                .map(|r| {
                    (
                        r.destination.as_str(),
                        Status::Pending,
                        r.ordering_key.as_deref(),
                    )
                })
                .collect(),
        }
    }
}

/// Where an ingested event landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ingested {
    /// Stored now, under this public id.
    New { id: String },
    /// Already stored within the dedupe TTL, under this public id.
    Duplicate { id: String },
}

/// A lease on one attempt, from [`Store::claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    /// 1 for the first attempt of the current round.
    pub attempt: u32,
    /// When the current round began: `max_age` counts from here.
    pub round_started_ms: u64,
}

/// What an attempt came to and what happens next, for [`Store::finish`].
#[derive(Debug, Clone)]
pub struct Finish {
    pub seq: u64,
    pub attempt: Attempt,
    pub next: Next,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Delivered {
        at_ms: u64,
    },
    RetryAt {
        due_ms: u64,
    },
    Dead {
        reason: String,
        at_ms: u64,
        /// Let later events of its ordering key go on (`skip`), or hold
        /// them until it is replayed or ignored (`block`).
        release_key: bool,
    },
}

/// A person's change to one delivery of an event (`Erase`: to the event).
/// Logged in the write-ahead log (as [`format`] writes it).
#[derive(Debug, Clone)]
pub enum Change {
    /// Deliver again: attempts reset, history kept, same `webhook-id`.
    Replay,
    /// Stop delivering it; the note says why.
    Ignore { note: String },
    /// Delete its payload and headers for good (a privacy request): the ids,
    /// times, attempts, the note and its dedupe key stay, so a provider's
    /// resend is still a duplicate. What was still to be delivered is
    /// ignored with the same note.
    Erase { note: String },
    /// Deliver a held or filtered event to this destination (its route
    /// becomes the destination's), or replay a delivery already on it.
    ReplayTo { destination: String },
}

/// Why a change was refused. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    #[error("no such event")]
    NotFound,
    #[error("an attempt is in flight; try again in a moment")]
    InFlight,
    #[error("the event {0}")]
    Conflict(&'static str),
}

/// Which events a listing (or a bulk change) takes. Empty fields match all.
/// `destination` and `status` are one delivery's: an event matches when one
/// of its deliveries does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub source: Option<String>,
    /// A route (a destination's queue name).
    pub destination: Option<String>,
    pub status: Option<schema::Status>,
    pub event_type: Option<String>,
    pub event_id: Option<String>,
    /// Received at or after, unix ms.
    pub from_ms: Option<u64>,
    /// Received before, unix ms.
    pub to_ms: Option<u64>,
}

impl EventFilter {
    /// The whole filter, checked on a loaded event. The indexes choose the
    /// candidates; this keeps the answer exact where an index is coarser
    /// (the time bounds, found by binary search over seq).
    fn matches(&self, record: &EventRecord, state: &EventState) -> bool {
        self.takes(state)
            && self
                .event_type
                .as_ref()
                .is_none_or(|t| record.event_type.as_deref() == Some(t.as_str()))
            && self.event_id.as_ref().is_none_or(|i| *i == record.event_id)
            && self.from_ms.is_none_or(|f| record.received_at_ms >= f)
            && self.to_ms.is_none_or(|t| record.received_at_ms < t)
    }

    /// The delivery's part of the filter: source, destination and status.
    fn takes(&self, state: &EventState) -> bool {
        self.source
            .as_ref()
            .is_none_or(|s| s == schema::route_source(&state.source))
            && self.destination.as_ref().is_none_or(|d| *d == state.source)
            && self.status.is_none_or(|s| s == state.status)
    }
}

/// One row of `events`, borrowed from the read snapshot.
type EventRow = redb::AccessGuard<'static, &'static [u8]>;

/// The `events` rows of the events that newest-first candidate delivery
/// keys belong to, each event once: a candidate's event is the last `events`
/// row at or below it (see [`schema`]). Near candidates (a filter that
/// matches many events) are reached by stepping a cursor down `events`, far
/// ones by a fresh lookup: a step is a fraction of a lookup.
struct Rows {
    events: redb::ReadOnlyTable<u64, &'static [u8]>,
    candidates: Box<dyn Iterator<Item = Result<u64, redb::Error>>>,
    cursor: Option<std::iter::Rev<redb::Range<'static, u64, &'static [u8]>>>,
    /// The seq of the cursor's last row.
    at: Option<u64>,
    /// The last event returned: candidates in its block are skipped.
    last: Option<u64>,
}

impl Rows {
    /// Rows the cursor may step over before a lookup is cheaper.
    const MAX_STEPS: usize = 16;

    fn step(&mut self) -> Result<Option<(u64, EventRow)>, StoreError> {
        let Some(cursor) = &mut self.cursor else {
            return Ok(None);
        };
        match cursor.next().transpose()? {
            Some((k, v)) => {
                self.at = Some(k.value());
                Ok(Some((k.value(), v)))
            }
            None => {
                self.cursor = None;
                self.at = None;
                Ok(None)
            }
        }
    }

    /// The row of the event whose block holds delivery `key`, if the
    /// snapshot holds one. Seqs are dense in `events` (blocks of a few
    /// keys; swept events leave holes), so the distance from the cursor's
    /// last row is about the rows to step over.
    fn row(&mut self, key: u64) -> Result<Option<(u64, EventRow)>, StoreError> {
        let near = self
            .at
            .is_some_and(|at| at > key && at - key <= Self::MAX_STEPS as u64);
        if near {
            for _ in 0..Self::MAX_STEPS {
                match self.step()? {
                    Some((k, _)) if k > key => continue,
                    found => return Ok(found),
                }
            }
        }
        self.cursor = Some(self.events.range(..=key)?.rev());
        self.step()
    }
}

impl Iterator for Rows {
    /// (the event's seq, the candidate that led to it, its row)
    type Item = Result<(u64, u64, EventRow), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let key = match self.candidates.next()? {
                Ok(key) => key,
                Err(e) => return Some(Err(e.into())),
            };
            if self.last.is_some_and(|last| key >= last) {
                continue;
            }
            match self.row(key) {
                Ok(Some((seq, row))) => {
                    self.last = Some(seq);
                    return Some(Ok((seq, key, row)));
                }
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// One delivery of an event: its key and state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub key: u64,
    pub state: EventState,
}

/// The deliveries of event `seq`: the `state` rows of its block, from `seq`
/// up to the next event's seq.
fn block<E>(
    events: &impl ReadableTable<u64, &'static [u8]>,
    states: &impl ReadableTable<u64, &'static [u8]>,
    seq: u64,
) -> Result<Vec<Delivery>, E>
where
    E: From<redb::StorageError> + From<row::DecodeError>,
{
    let next = seq.saturating_add(1);
    // Most events have one destination: the next event follows at once, and
    // two point lookups answer without building a range.
    if events.get(next)?.is_some() {
        return Ok(match states.get(seq)? {
            Some(raw) => vec![Delivery {
                key: seq,
                state: row::decode_state(raw.value())?,
            }],
            None => Vec::new(),
        });
    }
    let end = match events.range(next..)?.next() {
        Some(row) => row?.0.value(),
        None => u64::MAX,
    };
    let mut out = Vec::new();
    for row in states.range(seq..end)? {
        let (key, raw) = row?;
        out.push(Delivery {
            key: key.value(),
            state: row::decode_state(raw.value())?,
        });
    }
    Ok(out)
}

/// The seq of the event whose block holds delivery `key`.
fn event_of<E>(events: &impl ReadableTable<u64, &'static [u8]>, key: u64) -> Result<Option<u64>, E>
where
    E: From<redb::StorageError>,
{
    match events.range(..=key)?.next_back() {
        Some(row) => Ok(Some(row?.0.value())),
        None => Ok(None),
    }
}

/// How much one search call may examine before it answers with what it
/// has found so far.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub events: u64,
    pub time: std::time::Duration,
}

/// One call's worth of a list or search.
#[derive(Debug, Default)]
pub struct SearchPage {
    pub events: Vec<StoredEvent>,
    /// Where the next call starts (`None`: nothing older is left to examine).
    pub cursor: Option<u64>,
    /// Events whose payload was read.
    pub examined: u64,
    /// Receipt time of the oldest event examined.
    pub scanned_back_to_ms: Option<u64>,
}

/// Events by status, as stats count them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub pending: u64,
    /// Pending after at least one failed attempt.
    pub retrying: u64,
    pub held: u64,
    pub delivered: u64,
    pub dead: u64,
    pub ignored: u64,
    /// Not taken by the destination's filter.
    pub filtered: u64,
}

impl Counts {
    fn add(&mut self, tally: index::Tally, n: u64) {
        match tally {
            index::Tally::Retrying => {
                self.pending += n;
                self.retrying += n;
            }
            index::Tally::Pending => self.pending += n,
            index::Tally::Held => self.held += n,
            index::Tally::Delivered => self.delivered += n,
            index::Tally::Dead => self.dead += n,
            index::Tally::Ignored => self.ignored += n,
            index::Tally::Filtered => self.filtered += n,
        }
    }
}

/// What the store holds for one source. Counts are deliveries: an event
/// sent to two destinations counts once in each (held and filtered events
/// once, on the source's own route).
#[derive(Debug, Clone, Default)]
pub struct SourceStats {
    pub counts: Counts,
    pub by_type: std::collections::BTreeMap<String, Counts>,
    /// When the oldest pending delivery was received (or replayed).
    pub oldest_pending_ms: Option<u64>,
    /// The same by route (the source's own, then `source.name` ones).
    pub routes: std::collections::BTreeMap<String, RouteStats>,
}

/// What the store holds for one route (one destination's queue).
#[derive(Debug, Clone, Default)]
pub struct RouteStats {
    pub counts: Counts,
    pub oldest_pending_ms: Option<u64>,
}

/// What one sweep step removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Delivered events past `payload_ttl`: record, state and attempts.
    pub delivered: u64,
    /// Dead or ignored events past `dlq_ttl`.
    pub dead_or_ignored: u64,
    /// Dedupe keys past `dedupe_ttl`: a repeat of their event id is new again.
    pub dedupe_keys: u64,
    /// Per-minute counts older than `index::MINUTES_KEPT`.
    pub minute_buckets: u64,
    /// Whether more is due: the step stopped at its limit.
    pub more: bool,
}

/// One entry of a destination's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    pub seq: u64,
    pub due_ms: u64,
}

/// What went wrong in the store. [`StoreError::is_transient`] is the one rule
/// that tells a caller whether to answer 503 (try again later) or 500.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write could not be made durable (disk full, I/O error) or its batch
    /// failed. Nothing of the batch was stored; the caller may retry. Every
    /// job of the failed batch shares the cause.
    #[error("the store cannot commit right now")]
    Write(#[source] Arc<WriteError>),
    /// The database is being reopened after a failed write.
    #[error("the database is being reopened after a failed write; try again in a moment")]
    Reopening,
    /// The store is shutting down or was closed.
    #[error("the store is closed")]
    Closed,
    #[error("cannot open the database at {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: WriteError,
    },
    #[error(
        "the database at {path} has schema version {found}, newer than the {SCHEMA_VERSION} this build knows: upgrade hookinbox or restore a backup"
    )]
    NewerSchema { path: PathBuf, found: u8 },
    #[error(
        "the database at {path} has schema version {found}, written by a pre-release build this one cannot read: move it aside and start fresh"
    )]
    OlderSchema { path: PathBuf, found: u8 },
    #[error("the database holds a record this build cannot read")]
    Corrupt(#[from] row::DecodeError),
    #[error("event {seq} has a record but no state row: the database is damaged")]
    MissingState { seq: u64 },
    #[error("reading the database failed")]
    Read(#[from] redb::Error),
    #[error("writing the backup to {} failed", path.display())]
    Backup {
        path: PathBuf,
        #[source]
        source: WriteError,
    },
}

impl StoreError {
    /// Whether the failure may pass by itself (a full disk, an I/O error, a
    /// reopen, a shutdown): callers answer 503 + Retry-After. Anything else
    /// (a damaged record, a schema from another version) needs a person: 500.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Write(e) => e.is_transient(),
            StoreError::Reopening | StoreError::Closed => true,
            StoreError::Read(e) => is_io(e),
            StoreError::Backup { source, .. } => source.is_transient(),
            StoreError::Open { .. }
            | StoreError::NewerSchema { .. }
            | StoreError::OlderSchema { .. }
            | StoreError::Corrupt(_)
            | StoreError::MissingState { .. } => false,
        }
    }

    /// The error and every cause under it, for a log line:
    /// "the store cannot commit right now: I/O error: File too large".
    pub fn report(&self) -> Report<'_> {
        Report(self)
    }
}

/// Displays an error followed by its chain of sources.
pub struct Report<'a>(pub &'a dyn std::error::Error);

impl std::fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

/// What can go wrong writing a redb file (the writer's transactions, the
/// startup transactions, a backup): redb's own error, a stored record that
/// cannot be decoded on the way, or the file system.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Redb(#[from] redb::Error),
    #[error("a stored record cannot be read")]
    Corrupt(#[from] row::DecodeError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Wal(#[from] wal::WalError),
}

impl WriteError {
    fn is_transient(&self) -> bool {
        match self {
            WriteError::Redb(e) => is_io(e),
            WriteError::Corrupt(_) => false,
            WriteError::Io(_) => true,
            WriteError::Wal(e) => matches!(e, wal::WalError::Io { .. }),
        }
    }
}

/// redb's errors that come from the disk, not from the data: a full disk,
/// an I/O error, or a handle poisoned by one ("close and re-open").
fn is_io(e: &redb::Error) -> bool {
    matches!(
        e,
        redb::Error::Io(_) | redb::Error::PreviousIo | redb::Error::DatabaseClosed
    )
}

/// redb returns a specific error type per operation; each converts into
/// `redb::Error`, kept as the source (`?` works on every redb call).
macro_rules! from_redb {
    ($target:ty => $variant:path: $($source:ty),+) => {
        $(impl From<$source> for $target {
            fn from(e: $source) -> $target {
                $variant(redb::Error::from(e))
            }
        })+
    };
}
from_redb!(StoreError => StoreError::Read: redb::StorageError, redb::TableError, redb::TransactionError);
from_redb!(WriteError => WriteError::Redb: redb::StorageError, redb::TableError, redb::TransactionError,
    redb::CommitError, redb::DatabaseError, redb::SetDurabilityError);

/// Settings the store takes from config.
#[derive(Clone)]
pub struct StoreOptions {
    pub data_dir: PathBuf,
    pub dedupe_ttl: Duration,
    /// A delivered event is swept this long after its delivery.
    pub payload_ttl: Duration,
    /// A dead or ignored event is swept this long after it became so.
    pub dlq_ttl: Duration,
    /// redb's page cache. 256 MiB keeps the dedupe table and the hot ends of
    /// the sequential tables in memory on a small VM.
    pub cache_bytes: usize,
    /// Most events per transaction. 1 means one fsync per event (what
    /// benches/ingest.rs compares group commit against).
    pub max_batch: usize,
    /// How often a batch is committed to redb durably (a checkpoint) instead
    /// of through the write-ahead log (see [`wal`]). Longer: fewer bytes
    /// written per event; shorter: less log to replay after a crash.
    pub checkpoint_every: Duration,
    /// Told of every successful commit: jobs in it, and how long it took.
    pub on_commit: Option<CommitHook>,
}

/// See [`StoreOptions::on_commit`].
pub type CommitHook = Arc<dyn Fn(usize, Duration) + Send + Sync>;

impl StoreOptions {
    pub fn new(data_dir: impl Into<PathBuf>, dedupe_ttl: Duration) -> StoreOptions {
        StoreOptions {
            data_dir: data_dir.into(),
            dedupe_ttl,
            payload_ttl: Duration::from_secs(7 * 86_400),
            dlq_ttl: Duration::from_secs(30 * 86_400),
            cache_bytes: 256 << 20,
            max_batch: MAX_BATCH,
            checkpoint_every: CHECKPOINT_EVERY,
            on_commit: None,
        }
    }
}

/// An event as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub seq: u64,
    pub id: String,
    pub record: EventRecord,
    /// The delivery asked about ([`Store::delivery`]), else the first: the
    /// only one of an event with one destination (or held, or filtered).
    pub state: EventState,
    /// Every delivery of the event, by key (at least one); from
    /// [`Store::delivery`], only the one asked about.
    pub deliveries: Vec<Delivery>,
    /// Its payload and headers were deleted on request, and why.
    pub erased: Option<schema::Note>,
}

/// A cheap handle to the store. Clones share the writer and the database.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

struct Shared {
    /// `None` while the writer reopens the file after an I/O error, and after close.
    db: RwLock<Option<Arc<Database>>>,
    path: PathBuf,
    tag: u32,
    jobs: mpsc::Sender<writer::Message>,
    /// Live dedupe keys. Only the writer changes it, after a commit.
    dedupe: RwLock<DedupeIndex>,
    /// Signalled after every commit: the scheduler looks at its queues again.
    schedule_changed: Notify,
    /// Why the last commit failed; `None` again once a readiness probe (an
    /// event-sized write) commits. A small commit passing proves nothing: on
    /// a full disk, claims and empty commits fit where events do not.
    write_error: tokio::sync::watch::Sender<Option<Arc<WriteError>>>,
}

/// The writer thread, to be joined at shutdown.
pub struct WriterHandle {
    thread: Option<std::thread::JoinHandle<()>>,
    jobs: mpsc::Sender<writer::Message>,
    exited: Option<oneshot::Receiver<()>>,
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
        let _ = self.jobs.blocking_send(writer::Message::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn open_database(path: &Path, cache_bytes: usize) -> Result<Database, WriteError> {
    Ok(Database::builder()
        .set_cache_size(cache_bytes)
        .create(path)?)
}

impl Store {
    /// Opens (or creates) the database in `options.data_dir` and starts the writer.
    pub fn open(options: StoreOptions) -> Result<(Store, WriterHandle), StoreError> {
        let path = options.data_dir.join(DB_FILE);
        let open_err = |source: WriteError| StoreError::Open {
            path: path.clone(),
            source,
        };
        create_private_dir(&options.data_dir).map_err(|e| open_err(e.into()))?;
        let started = std::time::Instant::now();
        let db = open_database(&path, options.cache_bytes).map_err(open_err)?;
        let opened = started.elapsed();
        {
            use std::os::unix::fs::PermissionsExt;
            // Payloads are customer data: readable by the service user only.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| open_err(e.into()))?;
        }
        let tag = match init_meta(&db).map_err(open_err)? {
            Ok(tag) => tag,
            Err(found) if found > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema { path, found });
            }
            Err(found) if found >= MIGRATES_FROM => {
                migrate(&db, found).map_err(open_err)?;
                match init_meta(&db).map_err(open_err)? {
                    Ok(tag) => tag,
                    Err(found) => return Err(StoreError::OlderSchema { path, found }),
                }
            }
            Err(found) => return Err(StoreError::OlderSchema { path, found }),
        };
        // Before anything reads the tables: what the log holds beyond the
        // file's last checkpoint is as much the store as the file is.
        let mut wal = wal::Wal::open(&options.data_dir, tag).map_err(|e| open_err(e.into()))?;
        let replayed = writer::recover(&db, &mut wal, &writer::ttls(&options)).map_err(open_err)?;
        let replay_done = started.elapsed();
        let recovered = recover_leases(&db).map_err(open_err)?;
        if recovered > 0 {
            tracing::warn!(
                attempts = recovered,
                "attempts were in flight when hookinbox stopped; recorded as interrupted, delivering again"
            );
        }
        let (next_seq, last_received_ms) = last_event(&db)?.map_or((1, 0), |(s, r)| (s + 1, r));
        let before_dedupe = started.elapsed();
        let (dedupe, keys) = load_dedupe(&db)?;
        tracing::info!(
            database_ms = opened.as_millis() as u64,
            log_frames = replayed.frames,
            replay_ms = (replay_done - opened).as_millis() as u64,
            dedupe_keys = keys,
            dedupe_mib = dedupe.bytes() >> 20,
            dedupe_ms = (started.elapsed() - before_dedupe).as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "store opened"
        );
        // 4096 queued requests: a burst far beyond what one batch takes; past
        // it, handlers wait, which slows the senders instead of growing memory.
        let (jobs, rx) = mpsc::channel(4096);
        let shared = Arc::new(Shared {
            db: RwLock::new(Some(Arc::new(db))),
            path,
            tag,
            jobs: jobs.clone(),
            dedupe: RwLock::new(dedupe),
            schedule_changed: Notify::new(),
            write_error: tokio::sync::watch::Sender::new(None),
        });
        let (exit_tx, exited) = oneshot::channel();
        let thread_err = |e: std::io::Error| StoreError::Open {
            path: shared.path.clone(),
            source: e.into(),
        };
        let log = durable::LogHandle::spawn(shared.clone(), options.on_commit.clone())
            .map_err(thread_err)?;
        let thread = writer::spawn(
            writer::Writer::new(
                shared.clone(),
                options,
                next_seq,
                last_received_ms,
                wal,
                replayed.lsn,
                log,
            ),
            rx,
            exit_tx,
        )
        .map_err(thread_err)?;
        Ok((
            Store { shared },
            WriterHandle {
                thread: Some(thread),
                jobs,
                exited: Some(exited),
            },
        ))
    }

    /// Stores a verified event, or finds it already stored. Returns once the
    /// answer is durable on disk.
    pub async fn ingest(
        &self,
        event: VerifiedEvent,
        initial: Initial,
    ) -> Result<Ingested, StoreError> {
        self.call(|reply| writer::Job::Ingest {
            event,
            initial,
            reply,
        })
        .await
    }

    async fn call<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> writer::Job,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.shared
            .jobs
            .send(writer::Message::Job(job(reply)))
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Leases pending event `seq` for one attempt; `None` if it is not
    /// pending any more or already has an attempt in flight.
    pub async fn claim(&self, seq: u64, started_ms: u64) -> Result<Option<Claimed>, StoreError> {
        self.call(|reply| writer::Job::Claim {
            seq,
            started_ms,
            reply,
        })
        .await
    }

    /// Records an attempt's outcome durably and releases its lease.
    pub async fn finish(&self, finish: Finish) -> Result<(), StoreError> {
        self.call(|reply| writer::Job::Finish { finish, reply })
            .await
    }

    /// Replays or ignores event `seq`, durably.
    pub async fn change(
        &self,
        seq: u64,
        change: Change,
        now_ms: u64,
    ) -> Result<Result<(), ChangeError>, StoreError> {
        self.call(|reply| writer::Job::Change {
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
        self.call(|reply| writer::Job::Sweep {
            now_ms,
            limit,
            reply,
        })
        .await
    }

    /// Keeps a destination's pause state across restarts.
    pub async fn set_paused(&self, destination: &str, paused: bool) -> Result<(), StoreError> {
        let key = format!("{PAUSED_PREFIX}{destination}");
        self.call(|reply| writer::Job::SetMeta {
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
        self.call(|reply| writer::Job::Ping { reply }).await
    }

    /// Whether the store can take events: the writer commits now, and no
    /// commit has failed since the last passing [`Store::probe`].
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.ping().await?;
        match self.shared.write_error.borrow().clone() {
            Some(cause) => Err(StoreError::Write(cause)),
            None => Ok(()),
        }
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
        self.call(|reply| writer::Job::Probe { bytes, reply })
            .await?;
        self.call(|reply| writer::Job::Probe { bytes: 0, reply })
            .await
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

    /// Events matching `filter`, newest first, below `before` (a seq;
    /// `None`: from the newest), at most `limit`. The candidates come from
    /// the `by_type` ranges the filter allows (see [`index::matching`]), so
    /// a page costs its own events whatever the store holds. The cursor is where the next
    /// page starts (`None`: no more matches); an empty page means none.
    pub fn list(
        &self,
        filter: &EventFilter,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<StoredEvent>, Option<u64>), StoreError> {
        let page = self.walk(filter, before, limit, &PayloadMatch::default(), None)?;
        Ok((page.events, page.cursor))
    }

    /// Like [`Store::list`], and each payload must also match `payload`.
    /// Payloads are read one by one, so a call stops at `budget` (events
    /// examined, time) and says how far back it got: the caller continues
    /// from the cursor.
    pub fn search(
        &self,
        filter: &EventFilter,
        payload: &PayloadMatch,
        before: Option<u64>,
        limit: usize,
        budget: Budget,
    ) -> Result<SearchPage, StoreError> {
        self.walk(filter, before, limit, payload, Some(budget))
    }

    fn walk(
        &self,
        filter: &EventFilter,
        before: Option<u64>,
        limit: usize,
        payload: &PayloadMatch,
        budget: Option<Budget>,
    ) -> Result<SearchPage, StoreError> {
        let started = std::time::Instant::now();
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let erased = txn.open_table(schema::ERASED)?;
        let rows = Rows {
            events: txn.open_table(EVENTS)?,
            candidates: self.candidates(&txn, &events, &states, filter, before)?,
            cursor: None,
            at: None,
            last: None,
        };
        let matcher = payload.matcher();
        let searching = !payload.is_empty();
        let mut scratch = Vec::new();
        let mut page = SearchPage::default();
        for row in rows {
            let (seq, key, raw_event) = row?;
            if page.events.len() == limit {
                page.cursor = Some(key + 1);
                return Ok(page);
            }
            if let Some(budget) = &budget
                && (page.examined >= budget.events || started.elapsed() >= budget.time)
            {
                page.cursor = Some(key + 1);
                return Ok(page);
            }
            if searching {
                // Most payloads do not match: test the body on a borrowed
                // view first, and read the state only for those that do.
                let view = row::decode_event_view(raw_event.value(), &mut scratch)?;
                page.examined += 1;
                page.scanned_back_to_ms = Some(view.received_at_ms);
                if !matcher.matches(view.body) {
                    continue;
                }
            }
            let deliveries: Vec<Delivery> = block::<StoreError>(&events, &states, seq)?;
            let record = row::decode_event(raw_event.value())?;
            let Some(first) = deliveries
                .iter()
                .find(|d| filter.matches(&record, &d.state))
            else {
                continue;
            };
            page.events.push(StoredEvent {
                seq,
                id: self.public_id(seq),
                record,
                state: first.state.clone(),
                deliveries,
                erased: erased_note(&erased, seq)?,
            });
        }
        Ok(page)
    }

    /// The delivery key and route of each delivery matching `filter`,
    /// newest first, at most `limit` (and whether more match): what a bulk
    /// change needs. It reads state rows, and a record only to check a time
    /// bound, never 100k payloads for 100k matches.
    pub fn matching_ids(
        &self,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<(Vec<(u64, String)>, bool), StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let timed = filter.from_ms.is_some() || filter.to_ms.is_some();
        let mut out = Vec::new();
        for key in self.candidates(&txn, &events, &states, filter, None)? {
            let key = key?;
            let Some(raw) = states.get(key)? else {
                continue;
            };
            let state = row::decode_state(raw.value())?;
            let matches = if timed {
                let event = event_of::<StoreError>(&events, key)?;
                match event.map(|seq| events.get(seq)).transpose()?.flatten() {
                    Some(raw) => filter.matches(&row::decode_event(raw.value())?, &state),
                    None => false,
                }
            } else {
                // Source, status and type come exactly from the index, the
                // event id from the dedupe index: the state confirms.
                filter.takes(&state)
                    && filter
                        .event_type
                        .as_ref()
                        .is_none_or(|t| state.event_type.as_deref() == Some(t.as_str()))
            };
            if !matches {
                continue;
            }
            if out.len() == limit {
                return Ok((out, true));
            }
            out.push((key, state.source));
        }
        Ok((out, false))
    }

    /// The delivery keys that may match `filter` below `before`, newest
    /// first: for an event id, the deliveries of what one probe of the
    /// dedupe index per source finds; else the `by_type` ranges that
    /// `counts` says hold matching deliveries.
    fn candidates(
        &self,
        txn: &redb::ReadTransaction,
        events: &redb::ReadOnlyTable<u64, &'static [u8]>,
        states: &redb::ReadOnlyTable<u64, &'static [u8]>,
        filter: &EventFilter,
        before: Option<u64>,
    ) -> Result<Box<dyn Iterator<Item = Result<u64, redb::Error>>>, StoreError> {
        let range = self.seq_range(events, filter, before)?;
        let counts = index::counts(txn)?;
        if let Some(event_id) = &filter.event_id {
            let mut names: Vec<&str> = match &filter.source {
                Some(source) => vec![source.as_str()],
                None => counts
                    .iter()
                    .map(|(route, ..)| schema::route_source(route))
                    .collect(),
            };
            names.sort_unstable();
            names.dedup();
            let seqs: Vec<u64> = {
                let index = self.shared.dedupe.read().unwrap_or_else(|p| p.into_inner());
                names
                    .iter()
                    .filter_map(|name| index.get(fingerprint(name, event_id)))
                    .collect()
            };
            let mut keys = Vec::new();
            for seq in seqs {
                for d in block::<StoreError>(events, states, seq)? {
                    if (range.lo..range.hi).contains(&d.key) {
                        keys.push(d.key);
                    }
                }
            }
            keys.sort_unstable_by(|a, b| b.cmp(a));
            return Ok(Box::new(keys.into_iter().map(Ok)));
        }
        Ok(Box::new(index::matching(
            txn,
            &counts,
            index::Which {
                source: filter.source.as_deref(),
                destination: filter.destination.as_deref(),
                status: filter.status,
                event_type: filter.event_type.as_deref(),
            },
            range,
        )?))
    }

    /// The seqs `filter`'s time bounds and the cursor leave: receipt time
    /// grows with seq, so each bound is a binary search over `events`.
    fn seq_range(
        &self,
        events: &redb::ReadOnlyTable<u64, &'static [u8]>,
        filter: &EventFilter,
        before: Option<u64>,
    ) -> Result<index::SeqRange, StoreError> {
        let lo = match filter.from_ms {
            Some(from) => first_received_at_or_after(events, from)?,
            None => 0,
        };
        let mut hi = before.unwrap_or(u64::MAX);
        if let Some(to) = filter.to_ms {
            hi = hi.min(first_received_at_or_after(events, to)?);
        }
        Ok(index::SeqRange { lo, hi })
    }

    /// Resolves after the next commit (or at once if one happened since the
    /// last call): the scheduler's wake-up.
    pub async fn schedule_changed(&self) {
        self.shared.schedule_changed.notified().await
    }

    /// Up to `limit` entries of `destination`'s queue due at `now_ms`, oldest
    /// first, leaving out those `skip` says (attempts in flight). Also returns
    /// when the queue next needs a look: `Some(now_ms)` if it holds more due
    /// entries than `limit`, the next due time if later, `None` if empty.
    pub fn due(
        &self,
        destination: &str,
        now_ms: u64,
        limit: usize,
        skip: impl Fn(u64) -> bool,
    ) -> Result<(Vec<Due>, Option<u64>), StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let schedule = txn.open_table(SCHEDULE)?;
        let mut out = Vec::new();
        let mut next = None;
        for row in schedule.range((destination, 0, 0)..=(destination, u64::MAX, u64::MAX))? {
            let (key, _) = row?;
            let (_, due_ms, seq) = key.value();
            if skip(seq) {
                continue;
            }
            if due_ms > now_ms {
                next = Some(due_ms);
                break;
            }
            if out.len() == limit {
                next = Some(now_ms);
                break;
            }
            out.push(Due { seq, due_ms });
        }
        Ok((out, next))
    }

    /// Counts of every stored event by source, event type and status, from
    /// one snapshot. No scan: it reads the `counts` rows the writer keeps
    /// with every change, and the first `pending_since` entry of each route
    /// for the oldest pending age, so its cost does not grow with the
    /// events retained.
    pub fn stats(&self) -> Result<std::collections::BTreeMap<String, SourceStats>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let mut out: std::collections::BTreeMap<String, SourceStats> = Default::default();
        for (route, event_type, tally, n) in index::counts(&txn)? {
            let stats = out
                .entry(schema::route_source(&route).to_owned())
                .or_default();
            stats.counts.add(tally, n);
            stats.routes.entry(route).or_default().counts.add(tally, n);
            let kind = if event_type.is_empty() {
                NO_TYPE.to_owned()
            } else {
                event_type
            };
            stats.by_type.entry(kind).or_default().add(tally, n);
        }
        for stats in out.values_mut() {
            for (route, r) in stats.routes.iter_mut() {
                r.oldest_pending_ms = index::oldest_pending(&txn, route)?;
                stats.oldest_pending_ms = match (stats.oldest_pending_ms, r.oldest_pending_ms) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        Ok(out)
    }

    /// Per-minute counts (received, duplicates, delivered, dead-lettered per
    /// source) from `from_ms`'s minute on, oldest first: the last hours
    /// without a scan of events. Kept for `index::MINUTES_KEPT`.
    pub fn activity(&self, from_ms: u64) -> Result<Vec<index::MinuteRow>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let mut rows = index::minutes(&txn, from_ms)?;
        // Delivered and dead-lettered are counted by route: by source here.
        for row in &mut rows {
            if let Some((source, _)) = row.1.split_once('.') {
                row.1 = source.to_owned();
            }
        }
        Ok(rows)
    }

    /// Whether event `seq` must wait for an earlier event of its ordering
    /// key (one that is pending, in flight, or dead and blocking).
    pub fn waits_for_its_key(&self, seq: u64) -> Result<bool, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let states = txn.open_table(STATE)?;
        let Some(raw) = states.get(seq)? else {
            return Ok(false);
        };
        let state = row::decode_state(raw.value())?;
        let Some(key) = state.ordering_key.as_deref() else {
            return Ok(false);
        };
        let ordered = txn.open_table(ORDERED)?;
        let first = ordered
            .range((state.source.as_str(), key, 0)..=(state.source.as_str(), key, u64::MAX))?
            .next()
            .transpose()?
            .map(|(k, _)| k.value().2);
        Ok(first.is_some_and(|first| first != seq))
    }

    /// Every attempt of event `seq`, oldest first.
    pub fn attempts(&self, seq: u64) -> Result<Vec<Attempt>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let attempts = txn.open_table(ATTEMPTS)?;
        let mut out = Vec::new();
        for row in attempts.range((seq, 0)..=(seq, u32::MAX))? {
            let (_, v) = row?;
            out.push(row::decode_attempt(v.value())?);
        }
        Ok(out)
    }

    /// The seqs in `destination`'s dead-letter queue, oldest first.
    pub fn dead_letters(&self, destination: &str) -> Result<Vec<u64>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let dlq = txn.open_table(DLQ)?;
        let mut out = Vec::new();
        for row in dlq.range((destination, 0)..=(destination, u64::MAX))? {
            out.push(row?.0.value().1);
        }
        Ok(out)
    }

    /// The public id of the event stored under `seq`.
    pub fn public_id(&self, seq: u64) -> String {
        public_id(self.shared.tag, seq)
    }

    /// The public id of the event that delivery `key` belongs to.
    pub fn public_id_of_delivery(&self, key: u64) -> Result<String, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let seq = event_of::<StoreError>(&events, key)?.unwrap_or(key);
        Ok(self.public_id(seq))
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

    fn db(&self) -> Result<Arc<Database>, StoreError> {
        let slot = self.shared.db.read().unwrap_or_else(|p| p.into_inner());
        slot.clone().ok_or(StoreError::Reopening)
    }

    /// The event that delivery `key` belongs to, with `state` that
    /// delivery's (and `deliveries` that one only): what an attempt sends.
    /// One snapshot, two lookups beside the record's: the event's seq (the
    /// last `events` key at or below `key`) and the state row.
    pub fn delivery(&self, key: u64) -> Result<Option<StoredEvent>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let Some((seq, raw)) = events.range(..=key)?.next_back().transpose()? else {
            return Ok(None);
        };
        let seq = seq.value();
        let states = txn.open_table(STATE)?;
        let Some(state) = states.get(key)? else {
            return Ok(None);
        };
        let state = row::decode_state(state.value())?;
        let erased = txn.open_table(schema::ERASED)?;
        Ok(Some(StoredEvent {
            seq,
            id: self.public_id(seq),
            record: row::decode_event(raw.value())?,
            deliveries: vec![Delivery {
                key,
                state: state.clone(),
            }],
            state,
            erased: erased_note(&erased, seq)?,
        }))
    }

    /// The event stored under `seq`, with every delivery.
    pub fn get(&self, seq: u64) -> Result<Option<StoredEvent>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let Some(raw) = events.get(seq)? else {
            return Ok(None);
        };
        let record = row::decode_event(raw.value())?;
        let deliveries: Vec<Delivery> = block::<StoreError>(&events, &states, seq)?;
        let Some(state) = deliveries.first().map(|d| d.state.clone()) else {
            return Err(StoreError::MissingState { seq });
        };
        let erased = txn.open_table(schema::ERASED)?;
        Ok(Some(StoredEvent {
            seq,
            id: self.public_id(seq),
            record,
            state,
            deliveries,
            erased: erased_note(&erased, seq)?,
        }))
    }

    /// The event stored for `(source, event_id)`, if its dedupe key is live.
    pub fn find(&self, source: &str, event_id: &str) -> Result<Option<StoredEvent>, StoreError> {
        let found = self
            .shared
            .dedupe
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(dedupe::fingerprint(source, event_id));
        match found {
            Some(seq) => self.get(seq),
            None => Ok(None),
        }
    }

    /// Up to `limit` events with `seq > after`, oldest first.
    pub fn scan(&self, after: u64, limit: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let erased = txn.open_table(schema::ERASED)?;
        let mut out = Vec::new();
        for row in events.range(after.saturating_add(1)..)?.take(limit) {
            let (k, v) = row?;
            let seq = k.value();
            let deliveries: Vec<Delivery> = block::<StoreError>(&events, &states, seq)?;
            let state = deliveries
                .first()
                .ok_or(StoreError::MissingState { seq })?
                .state
                .clone();
            out.push(StoredEvent {
                seq,
                id: self.public_id(seq),
                record: row::decode_event(v.value())?,
                state,
                deliveries,
                erased: erased_note(&erased, seq)?,
            });
        }
        Ok(out)
    }

    /// How many events are stored.
    pub fn count(&self) -> Result<u64, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        Ok(events.len()?)
    }

    /// Writes a consistent copy of the whole database to `path` (a new redb
    /// file), from one read snapshot: ingest and delivery go on meanwhile.
    /// Blocking: call it from a blocking context. Returns the events copied.
    pub fn backup_to(&self, path: &Path) -> Result<u64, StoreError> {
        let db = self.db()?;
        let snapshot = db.begin_read()?;
        let events = snapshot.open_table(EVENTS)?.len()?;
        write_backup(&snapshot, path).map_err(|source| StoreError::Backup {
            path: path.to_owned(),
            source,
        })?;
        Ok(events)
    }

    /// Where the database file is.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The sizes of the store's files and the room on their filesystem:
    /// three `stat`s, whatever the store holds. (redb can also count its
    /// free pages, but only by walking every page under the write lock:
    /// 4.5 s at 5M events.)
    pub fn disk_usage(&self) -> std::io::Result<DiskUsage> {
        let dir = self.shared.path.parent().unwrap_or(Path::new("."));
        let size = |path: &Path| match std::fs::metadata(path) {
            Ok(m) => Ok(m.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e),
        };
        let fs = rustix::fs::statvfs(dir)?;
        Ok(DiskUsage {
            database_bytes: size(&self.shared.path)?,
            wal_bytes: size(&dir.join(wal::WAL_FILE))?,
            filesystem_available_bytes: fs.f_bavail.saturating_mul(fs.f_frsize),
            filesystem_size_bytes: fs.f_blocks.saturating_mul(fs.f_frsize),
        })
    }
}

/// [`Store::disk_usage`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskUsage {
    pub database_bytes: u64,
    pub wal_bytes: u64,
    /// Free for an unprivileged writer (statvfs `f_bavail`).
    pub filesystem_available_bytes: u64,
    pub filesystem_size_bytes: u64,
}

fn public_id(tag: u32, seq: u64) -> String {
    format!("hbx_{tag:08x}{seq:016x}")
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot create data dir {}: {e}", dir.display()),
        )),
    }
}

/// Creates every table and the meta rows on a new file; on an existing one
/// reads its schema version. Returns the database's tag, or `Err(version)`
/// for a file of a schema this build cannot use (nothing written then).
fn init_meta(db: &Database) -> Result<Result<u32, u8>, WriteError> {
    let txn = db.begin_write()?;
    let tag = {
        let mut meta = txn.open_table(META)?;
        let found = meta.get(META_SCHEMA)?.map(|v| v.value().first().copied());
        match found {
            // Dropping the transaction aborts it: nothing is written.
            Some(Some(v)) if v != SCHEMA_VERSION => return Ok(Err(v)),
            Some(_) => {}
            None => {
                meta.insert(META_SCHEMA, [SCHEMA_VERSION].as_slice())?;
            }
        }
        let existing = meta.get(META_TAG)?.map(|v| v.value().to_vec());
        match existing {
            Some(bytes) if bytes.len() == 4 => {
                u32::from_be_bytes(bytes.try_into().expect("4 bytes"))
            }
            _ => {
                let tag: u32 = rand::random();
                meta.insert(META_TAG, tag.to_be_bytes().as_slice())?;
                tag
            }
        }
    };
    // Create every table now so readers never meet a missing one.
    txn.open_table(EVENTS)?;
    txn.open_table(STATE)?;
    txn.open_table(DEDUPE)?;
    txn.open_table(schema::DEDUPE_KEPT)?;
    txn.open_table(SCHEDULE)?;
    txn.open_table(LEASES)?;
    txn.open_table(ATTEMPTS)?;
    txn.open_table(DLQ)?;
    txn.open_table(ORDERED)?;
    txn.open_table(EXPIRY)?;
    txn.open_table(schema::BY_TYPE)?;
    txn.open_table(schema::PENDING_SINCE)?;
    txn.open_table(schema::COUNTS)?;
    txn.open_table(schema::MINUTES)?;
    txn.open_table(schema::ERASED)?;
    txn.commit()?;
    Ok(Ok(tag))
}

/// The newest stored event's seq and receipt time.
/// The last key in use (an event's last delivery may be past its seq)
/// and the newest event's receipt time.
fn last_event(db: &Database) -> Result<Option<(u64, u64)>, StoreError> {
    let txn = db.begin_read()?;
    let events = txn.open_table(EVENTS)?;
    let states = txn.open_table(STATE)?;
    let last_key = states.last()?.map(|(k, _)| k.value());
    match events.last()? {
        Some((seq, raw)) => {
            let received = row::decode_event(raw.value())?.received_at_ms;
            Ok(Some((seq.value().max(last_key.unwrap_or(0)), received)))
        }
        None => Ok(None),
    }
}

/// Writes every table of `snapshot` into a new redb file at `path` (0600:
/// a backup holds every payload), committed durably.
fn write_backup(snapshot: &redb::ReadTransaction, path: &Path) -> Result<(), WriteError> {
    let target = Database::builder().create(path)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    let mut txn = target.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    copy_table(snapshot, &txn, META)?;
    copy_table(snapshot, &txn, EVENTS)?;
    copy_table(snapshot, &txn, STATE)?;
    copy_table(snapshot, &txn, DEDUPE)?;
    copy_table(snapshot, &txn, schema::DEDUPE_KEPT)?;
    copy_table(snapshot, &txn, SCHEDULE)?;
    copy_table(snapshot, &txn, LEASES)?;
    copy_table(snapshot, &txn, ATTEMPTS)?;
    copy_table(snapshot, &txn, DLQ)?;
    copy_table(snapshot, &txn, ORDERED)?;
    copy_table(snapshot, &txn, EXPIRY)?;
    copy_table(snapshot, &txn, schema::BY_TYPE)?;
    copy_table(snapshot, &txn, schema::PENDING_SINCE)?;
    copy_table(snapshot, &txn, schema::COUNTS)?;
    copy_table(snapshot, &txn, schema::MINUTES)?;
    copy_table(snapshot, &txn, schema::ERASED)?;
    txn.commit()?;
    Ok(())
}

/// Copies every row of `def` from a read snapshot into a write transaction.
fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    from: &redb::ReadTransaction,
    to: &redb::WriteTransaction,
    def: redb::TableDefinition<K, V>,
) -> Result<(), WriteError> {
    let source = from.open_table(def)?;
    let mut target = to.open_table(def)?;
    for row in source.iter()? {
        let (k, v) = row?;
        target.insert(k.value(), v.value())?;
    }
    Ok(())
}

/// The `meta` row that says how far the index build of a migration from
/// schema 3 got: a kill during it resumes there.
const META_INDEXED_UP_TO: &str = "migration_indexed_up_to";

/// Events indexed per transaction while migrating: each step is durable,
/// and a step's dirty pages stay small in memory.
const MIGRATION_STEP: usize = 50_000;

/// Brings a database of schema `from` (≥ [`MIGRATES_FROM`]) to
/// [`SCHEMA_VERSION`], before the writer starts. From 3: builds the indexes
/// and counts from `state`, in durable steps. From 4: drops the two indexes
/// schema 5 no longer kept, in one transaction. From 5: marks the file 6
/// (an event of schema 5 is a block of one delivery: no row changes).
fn migrate(db: &Database, from: u8) -> Result<(), WriteError> {
    if from >= 4 {
        // 4: drop the indexes `by_type` answers. 5: a schema-5 event is a
        // block of one delivery, so no row changes. Both: mark the file.
        let started = std::time::Instant::now();
        let mut txn = db.begin_write()?;
        txn.set_quick_repair(true);
        if from == 4 {
            for name in schema::DROPPED_IN_5 {
                txn.delete_table(redb::TableDefinition::<(), ()>::new(name))?;
            }
        }
        txn.open_table(META)?
            .insert(META_SCHEMA, [SCHEMA_VERSION].as_slice())?;
        txn.commit()?;
        tracing::info!(
            from,
            to = SCHEMA_VERSION,
            seconds = started.elapsed().as_secs_f64(),
            "migrated the database"
        );
        return Ok(());
    }
    let started = std::time::Instant::now();
    tracing::info!(
        from,
        to = SCHEMA_VERSION,
        "migrating the database: building its indexes"
    );
    let mut done = 0usize;
    loop {
        let mut txn = db.begin_write()?;
        txn.set_quick_repair(true);
        let finished = {
            let mut t = tables::Tables::open(&txn)?;
            let at = match t.meta.get(META_INDEXED_UP_TO)? {
                Some(v) => u64::from_be_bytes(v.value().try_into().map_err(|_| {
                    WriteError::Corrupt(row::DecodeError::Codec(
                        "migration progress is not 8 bytes".into(),
                    ))
                })?),
                None => 0,
            };
            let next = t.index_existing(at, MIGRATION_STEP)?;
            t.index.flush()?;
            match next {
                Some(next) => {
                    t.meta
                        .insert(META_INDEXED_UP_TO, next.to_be_bytes().as_slice())?;
                    done += MIGRATION_STEP;
                    false
                }
                None => {
                    t.meta.remove(META_INDEXED_UP_TO)?;
                    t.meta.insert(META_SCHEMA, [SCHEMA_VERSION].as_slice())?;
                    true
                }
            }
        };
        txn.commit()?;
        if finished {
            break;
        }
        tracing::info!(events = done, "migrating: indexed so far");
    }
    tracing::info!(
        seconds = started.elapsed().as_secs_f64(),
        "migration done: the database is at schema {SCHEMA_VERSION}"
    );
    Ok(())
}

/// Why event `seq`'s payload was erased, if it was.
fn erased_note(
    erased: &redb::ReadOnlyTable<u64, &'static [u8]>,
    seq: u64,
) -> Result<Option<schema::Note>, StoreError> {
    match erased.get(seq)? {
        Some(raw) => Ok(Some(row::decode_note(raw.value())?)),
        None => Ok(None),
    }
}

/// The first seq whose event was received at or after `at_ms` (one past the
/// last if none): a binary search over seq, since receipt time grows with
/// it. Each probe decodes one record: ≈ 25 of them at 10M events.
fn first_received_at_or_after(
    events: &redb::ReadOnlyTable<u64, &'static [u8]>,
    at_ms: u64,
) -> Result<u64, StoreError> {
    let (Some(first), Some(last)) = (events.first()?, events.last()?) else {
        return Ok(0);
    };
    let (mut lo, mut hi) = (first.0.value(), last.0.value() + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let Some((key, raw)) = events.range(mid..)?.next().transpose()? else {
            hi = mid;
            continue;
        };
        if row::decode_event(raw.value())?.received_at_ms >= at_ms {
            hi = mid;
        } else {
            lo = key.value() + 1;
        }
    }
    Ok(lo)
}

/// Records attempts that a crash interrupted (see `Tables::recover_leases`);
/// returns how many.
fn recover_leases(db: &Database) -> Result<usize, WriteError> {
    let mut txn = db.begin_write()?;
    txn.set_quick_repair(true);
    let recovered = {
        let mut t = tables::Tables::open(&txn)?;
        let recovered = t.recover_leases()?;
        t.index.flush()?;
        recovered
    };
    txn.commit()?;
    Ok(recovered)
}

/// Rebuilds the in-memory dedupe index from its durable log: one thread per
/// core reads a range of it (≈ 70 ns per row), each thread then builds a
/// range of the index's shards. Returns it and the number of rows read.
fn load_dedupe(db: &Database) -> Result<(DedupeIndex, usize), StoreError> {
    let txn = db.begin_read()?;
    let log = txn.open_table(DEDUPE)?;
    let rows = log.len()? as usize;
    let (first, last) = match (log.first()?, log.last()?) {
        (Some(first), Some(last)) => (first.0.value(), last.0.value()),
        _ => (1, 0),
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8) as u64;
    // Ranges of seqs: the log's rows are spread evenly enough over them.
    let span = last.saturating_sub(first) / threads + 1;
    let read = |from: u64| -> Result<dedupe::Loader, StoreError> {
        let mut loader = dedupe::Loader::new(threads as usize, rows / threads as usize);
        for row in log.range(from..from.saturating_add(span))? {
            let (seq, value) = row?;
            loader.push(value.value().0, seq.value());
        }
        Ok(loader)
    };
    let mut loaders = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..threads)
            .map(|i| scope.spawn(move || read(first + i * span)))
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().expect("a dedupe read thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    // Kept keys share no fingerprint with the log's (each is the one live
    // key of its event), so where they go among the loaders does not matter.
    let kept = txn.open_table(schema::DEDUPE_KEPT)?;
    let kept_rows = kept.len()? as usize;
    let mut extra = dedupe::Loader::new(threads as usize, kept_rows);
    for row in kept.iter()? {
        let (seq, value) = row?;
        extra.push(value.value().0, seq.value());
    }
    loaders.push(extra);
    Ok((
        DedupeIndex::from_loaders(loaders),
        rows + kept.len()? as usize,
    ))
}

#[cfg(test)]
pub(crate) mod tests;
