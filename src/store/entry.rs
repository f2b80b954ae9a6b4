//! A log entry as the writer and recovery see it: the domain side of what
//! [`super::format::log`] writes into a frame and reads back.

use std::borrow::Cow;

use super::types::audit::AuditRecord;
use super::types::keys::{KeyOp, KeyWrite};
use super::types::{Change, Finish, Initial};

/// What one job changed, enough to apply it again after a crash: an event
/// as stored (its encoded record and where), or a job's own inputs, which
/// the writer applies the same way to the same state.
#[derive(Debug)]
pub enum Entry<'a> {
    Ingest {
        seq: u64,
        initial: Cow<'a, Initial>,
        record: Cow<'a, [u8]>,
    },
    Duplicate {
        received_ms: u64,
        source: Cow<'a, str>,
    },
    Claim {
        seq: u64,
        started_ms: u64,
    },
    Finish(Cow<'a, Finish>),
    Change {
        seq: u64,
        change: Cow<'a, Change>,
        now_ms: u64,
    },
    Sweep {
        now_ms: u64,
        limit: usize,
    },
    SetMeta {
        key: Cow<'a, str>,
        value: Cow<'a, [u8]>,
    },
    /// Every attempt still leased when the store last stopped, recorded as
    /// interrupted (format 4).
    Interrupted,
    /// An audit record as written, whole, under its id (format 5).
    Audit {
        id: u64,
        record: Cow<'a, AuditRecord>,
    },
    /// What a change of an idempotency key wrote (format 3).
    KeyWrite(Cow<'a, KeyWrite>),
    /// A change of an idempotency key as format 2 logged it: the operation,
    /// decided again on replay. Read, never written.
    Key {
        namespace: Cow<'a, str>,
        key: Cow<'a, str>,
        op: Cow<'a, KeyOp>,
        now_ms: u64,
    },
}
