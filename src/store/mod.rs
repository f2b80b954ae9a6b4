//! The store: one redb file, one writer thread, readers on snapshots.
//!
//! Owns the database file and every byte in it. Only [`writer`] opens a write
//! transaction; everything else reads through [`Store`]'s read methods, which
//! use redb's MVCC snapshots and never wait for the writer. The store does not
//! know HTTP, providers or config files: it takes a
//! [`VerifiedEvent`](crate::verify::VerifiedEvent) and answers with where it
//! landed.
//!
//! An engine and its operations, cut in layers, each only above what it
//! uses:
//!
//! - The engine: `open` (recover, then start; with `migrate` and
//!   `recover`), `writer` (one transaction per batch: group commit, the
//!   checkpoint beside it), `wal` and `durable` (the answer only once the
//!   frame is synced, and shipped when `ship` is set: frame → fsync → ship
//!   → answer), `handle` ([`Store`] and what its clones share), `status`,
//!   `backup`.
//! - `ops/`: one file per durable operation (ingest, claim, finish, change,
//!   sweep, meta, key, audit, apply from the stream, promote, interrupted,
//!   probe, ping): its `Store` method, its step in the batch's transaction,
//!   the entry it logs and its replay. `job` is the writer's side of the
//!   contract ([`job::Op`], the `Step` a job may touch); `reply` holds an
//!   answer until it is durable; `moves` what a batch did to the dedupe
//!   keys.
//! - `read/`: what readers see on a snapshot (one event, lists and
//!   searches with `payload`, the tail, stats, keys, the audit trail).
//! - `tables/`: what one transaction can do to each kind of record
//!   (events and their deliveries, keys, audit), over `index`, `pack` and
//!   `dedupe`.
//! - `types/`: the domain types callers and the store's files share
//!   (events, keys, audit); `options`, `error`, `progress`.
//! - The bytes: `format/` (every row and log entry, versioned; `entry` is
//!   a log entry as the rest of the store sees it), `schema`, `block`.

mod types;
mod options;
mod error;
mod progress;
mod handle;
mod open;
mod migrate;
mod recover;
mod status;
mod backup;
mod writer;
mod wal;
mod durable;
mod ship;
mod ops;
mod job;
mod reply;
mod moves;
mod read;
mod tables;
mod pack;
pub mod index;
mod dedupe;
mod payload;
pub mod schema;
mod block;
mod entry;
mod format;

pub use backup::DiskUsage;
pub use dedupe::Sizes as DedupeSizes;
pub use error::{Report, StoreError, WriteError};
pub use handle::{Store, WriterHandle};
pub use open::{DB_FILE, standby_dir};
pub use ops::PROBE_EVERY;
pub use options::{
    CHECKPOINT_EVERY, CheckpointHook, Checkpointed, CommitHook, MAX_BATCH, StoreOptions,
};
pub use payload::{PayloadMatch, PayloadView, SeenAs};
pub use read::{Counts, MAX_KEYS_EXAMINED, NO_TYPE, RouteStats, SourceStats};
pub use ship::{ShipError, ShippedFrame, Shipper};
pub use status::Shipping;
pub use types::audit::{
    AUDIT_SCAN, AuditEntry, AuditFilter, AuditOutcome, AuditPage, AuditRecord, AuditWrite,
};
pub use types::keys::{KeyAnswer, KeyOp, KeyPage, KeyRecord, KeyState, KeyStateKind, KeyWrite};
pub use types::{
    Budget, Change, ChangeError, Claimed, Delivery, Due, EventFilter, Finish, Ingested, Initial,
    Matching, Next, Route, SearchPage, StoredEvent, Swept,
};

#[cfg(test)]
pub(crate) mod tests;
