//! The store: one redb file, one writer thread, readers on snapshots.
//!
//! Owns the database file and every byte in it. Only [`writer`] opens a write
//! transaction; everything else reads through [`Store`]'s read methods, which
//! use redb's MVCC snapshots and never wait for the writer. The store does not
//! know HTTP, providers or config files: it takes a
//! [`VerifiedEvent`](crate::verify::VerifiedEvent) and answers with where it
//! landed.
//!
//! Files by what they own, in the order an event meets them: `types` (the
//! domain types callers and the store's files share), `options`,
//! `error`; `handle` ([`Store`] and what its clones share with the
//! writer), `open` (with `migrate` and `recover`); the write side,
//! `write` (a job per call) → `job` → `writer` (one transaction per
//! batch, over `tables`, `index`, `dedupe`) → `wal` and
//! `durable` (the answer once durable, and shipped when `ship` is set); the read side, `read`,
//! `list` (with `payload`) and `stats`; `backup`; `audit` (what people did through the admin API). `schema`,
//! `block` and `format` (with `entry`) are the file's shape and bytes.

mod types;
mod options;
mod error;
mod handle;
mod open;
mod migrate;
mod recover;
mod write;
mod job;
mod writer;
mod tables;
mod pack;
pub mod index;
mod dedupe;
mod wal;
mod durable;
mod ship;
mod read;
mod list;
mod tail;
mod payload;
mod stats;
mod backup;
pub mod schema;
mod block;
mod entry;
mod format;
mod keys;
mod audit;

pub use audit::{
    AUDIT_SCAN, AuditEntry, AuditFilter, AuditOutcome, AuditPage, AuditRecord, AuditWrite,
};
pub use backup::DiskUsage;
pub use dedupe::Sizes as DedupeSizes;
pub use error::{Report, StoreError, WriteError};
pub use handle::{Store, WriterHandle};
pub use keys::{
    KeyAnswer, KeyOp, KeyPage, KeyRecord, KeyState, KeyStateKind, KeyWrite, MAX_KEYS_EXAMINED,
};
pub use open::{DB_FILE, standby_dir};
pub use options::{CHECKPOINT_EVERY, CommitHook, MAX_BATCH, StoreOptions};
pub use payload::PayloadMatch;
pub use ship::{ShipError, ShippedFrame, Shipper};
pub use stats::{Counts, NO_TYPE, RouteStats, SourceStats};
pub use types::{
    Budget, Change, ChangeError, Claimed, Delivery, Due, EventFilter, Finish, Ingested, Initial,
    Matching, Next, Route, SearchPage, StoredEvent, Swept,
};
pub use write::{PROBE_EVERY, Shipping};

#[cfg(test)]
pub(crate) mod tests;
