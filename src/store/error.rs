//! The store's errors: [`StoreError`], what callers see, with
//! [`StoreError::is_transient`], the one 503-vs-500 rule; [`WriteError`],
//! what goes wrong writing a redb file; [`Report`], an error with its chain
//! for a log line.

use std::path::PathBuf;
use std::sync::Arc;

use super::format::row;
use super::schema::SCHEMA_VERSION;
use super::ship::ShipError;
use super::wal;

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
    /// A sealed run of the dedupe index (`<data_dir>/dedupe/`) could not be
    /// read or written.
    #[error("reading or writing a dedupe run failed")]
    Dedupe(#[source] std::io::Error),
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
            StoreError::Dedupe(_) => true,
            StoreError::Backup { source, .. } => source.is_transient(),
            StoreError::Open { .. }
            | StoreError::NewerSchema { .. }
            | StoreError::OlderSchema { .. }
            | StoreError::Corrupt(_)
            | StoreError::MissingState { .. } => false,
        }
    }

    /// Whether another primary writes the replication stream: this store
    /// answers nothing again, and its node steps down (not transient here,
    /// but a caller elsewhere is served: answered 503 to providers).
    pub fn is_replaced(&self) -> bool {
        match self {
            StoreError::Write(e) => {
                matches!(**e, WriteError::Unshipped(ShipError::Replaced { .. }))
            }
            _ => false,
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
    /// Stored on the local disk, but not shipped to the replication stream
    /// in time (or this store was replaced): not answered 2xx.
    #[error(transparent)]
    Unshipped(#[from] ShipError),
    /// A job of the other role: a standby stores only its primary's
    /// frames; a primary takes none.
    #[error("{}", if *standby { "this is a standby: it stores only what its primary ships" } else { "this is a primary: it applies no frames of another" })]
    Role { standby: bool },
    /// Frames that do not continue the last one applied.
    #[error("frame {found} does not continue frame {}, the last applied", expected - 1)]
    Gap { expected: u64, found: u64 },
}

impl WriteError {
    fn is_transient(&self) -> bool {
        match self {
            WriteError::Redb(e) => is_io(e),
            WriteError::Corrupt(_) => false,
            WriteError::Io(_) => true,
            WriteError::Wal(e) => matches!(e, wal::WalError::Io { .. }),
            WriteError::Unshipped(e) => matches!(
                e,
                ShipError::Unavailable { .. } | ShipError::Unreadable { .. }
            ),
            // A standby refuses now; the primary (or this node, promoted)
            // takes it: a provider's retry finds one.
            WriteError::Role { .. } => true,
            WriteError::Gap { .. } => false,
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
