//! The audit trail: what people did through the admin API, who, when, with
//! which note and how it ended (`admin::audit` decides what is recorded).
//! Owns the `audit` table's rows and their reads; refuses payloads and
//! secrets by holding no field for them.
//!
//! A record is written through the writer like every change, so it is in
//! the log, replayed after a crash and shipped to a standby. A change is
//! recorded before it runs ([`super::super::Store::audit`]) and its outcome once it has
//! answered ([`super::super::Store::audit_outcome`]): a record without an outcome is a
//! change the process stopped in. Ids count up from 1 in the order records
//! are written, so the newest are the end of the table and the oldest, the
//! sweeper's, its start.
//!
//! This file holds the domain types; `read.rs` the [`super::super::Store`] calls
//! (through the writer, and the reads), `tables.rs` what the writer does
//! with the `audit` table.

use crate::words::{AuditAction, Role};

/// One thing a person did, or tried to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// When it was asked, Unix ms.
    pub at_ms: u64,
    /// The person's name (`admin` for the `[admin]` token).
    pub person: String,
    /// Their role then.
    pub role: Role,
    pub action: AuditAction,
    /// What the path named: an event's id, a destination, a key.
    pub target: Option<String>,
    /// The request's other arguments: a bulk change's filter, the
    /// destination of a replay, a key's namespace. Never a payload.
    pub filter: Vec<(String, String)>,
    pub dry_run: bool,
    /// The person's note, as given.
    pub note: Option<String>,
    /// `None` until it answered.
    pub outcome: Option<AuditOutcome>,
}

/// How a recorded request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditOutcome {
    /// The HTTP status it was answered with.
    pub status: u16,
    /// When, Unix ms.
    pub at_ms: u64,
    /// Why it was refused or failed, as the caller was told.
    pub error: Option<String>,
    /// A bulk change's events matched and changed.
    pub matched: Option<u64>,
    pub changed: Option<u64>,
}

/// What a writer job does to the trail.
#[derive(Debug)]
pub enum AuditWrite {
    /// A new record, under the next id.
    New(AuditRecord),
    /// The outcome of record `id`.
    Outcome { id: u64, outcome: AuditOutcome },
}

/// A record and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: u64,
    pub record: AuditRecord,
}

/// Which records a read returns; every field narrows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub person: Option<String>,
    pub action: Option<AuditAction>,
    pub from_ms: Option<u64>,
    pub to_ms: Option<u64>,
}

/// A page of the trail, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// Where the next page starts (pass it as `before`); `None`: the end.
    pub next: Option<u64>,
}

/// Most rows one page reads, matching or not: a narrow filter over a long
/// trail answers with a cursor rather than reading it all.
pub const AUDIT_SCAN: usize = 20_000;
