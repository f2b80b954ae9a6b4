//! What the writer's queue carries: a [`Job`] per call of [`super::Store`]
//! that goes through the writer, each with its own typed reply channel,
//! and the [`Message`] that shuts the writer down.

use tokio::sync::oneshot;

use super::audit::AuditWrite;
use super::error::StoreError;
use super::keys::{KeyAnswer, KeyOp};
use super::types::{Change, ChangeError, Claimed, Finish, Ingested, Initial, Swept};
use crate::verify::VerifiedEvent;

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
    /// Change one idempotency key.
    Key {
        namespace: String,
        key: String,
        op: KeyOp,
        now_ms: u64,
        reply: oneshot::Sender<Result<KeyAnswer, StoreError>>,
    },
    /// Write to the audit trail; answers the record's id.
    Audit {
        write: AuditWrite,
        reply: oneshot::Sender<Result<u64, StoreError>>,
    },
    /// A standby's: frames its primary shipped, applied in order; answers
    /// the number of the last. `stream_seq`: where the last is in the
    /// stream, recorded with it.
    Apply {
        frames: Vec<(u64, Vec<u8>)>,
        stream_seq: u64,
        reply: oneshot::Sender<Result<u64, StoreError>>,
    },
    /// Record every attempt still leased as interrupted, through the log
    /// (a shipping primary's first job at open).
    Interrupted {
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// A standby becomes the primary.
    Promote {
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
}

/// What the writer's queue carries.
pub(super) enum Message {
    Job(Job),
    /// Finish what is queued, refuse new jobs, close the database.
    Shutdown,
}
