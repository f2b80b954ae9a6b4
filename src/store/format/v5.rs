//! Format 5: the audit trail ([`super::super::types::audit`]).
//!
//! A log entry of format 5 is either one of format 4's, unchanged behind
//! variant 0, or an audit record as written, whole, under its id: recovery
//! and a standby put it as it is. The `audit` row is version 5: the
//! record's fields, the role and action as their texts (an action a newer
//! build names reads as `other`). Frozen like `v1`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::super::entry::Entry;
use super::super::types::audit::{AuditOutcome, AuditRecord};
use super::v4::EntryV4;
use crate::words::{AuditAction, Role};

/// An `audit` row.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AuditRowV5<'a> {
    at_ms: u64,
    #[serde(borrow)]
    person: Cow<'a, str>,
    role: Cow<'a, str>,
    action: Cow<'a, str>,
    target: Option<Cow<'a, str>>,
    filter: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    dry_run: bool,
    note: Option<Cow<'a, str>>,
    outcome: Option<OutcomeV5<'a>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct OutcomeV5<'a> {
    status: u16,
    at_ms: u64,
    #[serde(borrow)]
    error: Option<Cow<'a, str>>,
    matched: Option<u64>,
    changed: Option<u64>,
}

/// One entry of a format-5 frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum EntryV5<'a> {
    /// Any kind of entry format 4 has, as format 4 writes it.
    #[serde(borrow)]
    V4(EntryV4<'a>),
    Audit {
        id: u64,
        row: AuditRowV5<'a>,
    },
}

impl<'a> From<&'a AuditRecord> for AuditRowV5<'a> {
    fn from(r: &'a AuditRecord) -> Self {
        AuditRowV5 {
            at_ms: r.at_ms,
            person: Cow::Borrowed(&r.person),
            role: Cow::Borrowed(r.role.as_str()),
            action: Cow::Borrowed(r.action.as_str()),
            target: r.target.as_deref().map(Cow::Borrowed),
            filter: r
                .filter
                .iter()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), Cow::Borrowed(v.as_str())))
                .collect(),
            dry_run: r.dry_run,
            note: r.note.as_deref().map(Cow::Borrowed),
            outcome: r.outcome.as_ref().map(|o| OutcomeV5 {
                status: o.status,
                at_ms: o.at_ms,
                error: o.error.as_deref().map(Cow::Borrowed),
                matched: o.matched,
                changed: o.changed,
            }),
        }
    }
}

impl From<AuditRowV5<'_>> for AuditRecord {
    fn from(r: AuditRowV5<'_>) -> Self {
        let action = AuditAction::ALL
            .iter()
            .copied()
            .find(|a| a.as_str() == r.action)
            .unwrap_or(AuditAction::Other);
        // A role a newer build names: the least, never more than was held.
        let role = Role::ALL
            .iter()
            .copied()
            .find(|a| a.as_str() == r.role)
            .unwrap_or(Role::Viewer);
        AuditRecord {
            at_ms: r.at_ms,
            person: r.person.into_owned(),
            role,
            action,
            target: r.target.map(Cow::into_owned),
            filter: r
                .filter
                .into_iter()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            dry_run: r.dry_run,
            note: r.note.map(Cow::into_owned),
            outcome: r.outcome.map(|o| AuditOutcome {
                status: o.status,
                at_ms: o.at_ms,
                error: o.error.map(Cow::into_owned),
                matched: o.matched,
                changed: o.changed,
            }),
        }
    }
}

/// Only the tests write format 5 now.
#[cfg(test)]
impl<'a> From<&'a Entry<'_>> for EntryV5<'a> {
    fn from(entry: &'a Entry<'_>) -> Self {
        match entry {
            Entry::Audit { id, record } => EntryV5::Audit {
                id: *id,
                row: AuditRowV5::from(&**record),
            },
            other => EntryV5::V4(EntryV4::from(other)),
        }
    }
}

impl<'a> From<EntryV5<'a>> for Entry<'a> {
    fn from(entry: EntryV5<'a>) -> Self {
        match entry {
            EntryV5::V4(v4) => v4.into(),
            EntryV5::Audit { id, row } => Entry::Audit {
                id,
                record: Cow::Owned(row.into()),
            },
        }
    }
}
