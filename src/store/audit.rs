//! The audit trail: what people did through the admin API, who, when, with
//! which note and how it ended (`admin::audit` decides what is recorded).
//! Owns the `audit` table's rows and their reads; refuses payloads and
//! secrets by holding no field for them.
//!
//! A record is written through the writer like every change, so it is in
//! the log, replayed after a crash and shipped to a standby. A change is
//! recorded before it runs ([`Store::audit`]) and its outcome once it has
//! answered ([`Store::audit_outcome`]): a record without an outcome is a
//! change the process stopped in. Ids count up from 1 in the order records
//! are written, so the newest are the end of the table and the oldest, the
//! sweeper's, its start.

use std::borrow::Cow;

use redb::{ReadableDatabase, ReadableTable};

use super::error::{StoreError, WriteError};
use super::format::row;
use super::handle::Store;
use super::job::Job;
use super::schema::AUDIT;
use super::tables::Tables;
use crate::metrics::{AuditAction, Role};

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

impl Store {
    /// Records a person's request before it runs; answers its id once the
    /// record is durable.
    pub async fn audit(&self, record: AuditRecord) -> Result<u64, StoreError> {
        self.call(|reply| Job::Audit {
            write: AuditWrite::New(record),
            reply,
        })
        .await
    }

    /// Records how request `id` ended, durably.
    pub async fn audit_outcome(&self, id: u64, outcome: AuditOutcome) -> Result<(), StoreError> {
        self.call(|reply| Job::Audit {
            write: AuditWrite::Outcome { id, outcome },
            reply,
        })
        .await
        .map(drop)
    }

    /// Up to `limit` records that `filter` takes, newest first, from just
    /// below `before` (`None`: the newest). Reads at most [`AUDIT_SCAN`]
    /// rows.
    pub fn audit_page(
        &self,
        filter: &AuditFilter,
        before: Option<u64>,
        limit: usize,
    ) -> Result<AuditPage, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let table = match txn.open_table(AUDIT) {
            Ok(table) => table,
            // A database no change was ever recorded in.
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(AuditPage::default()),
            Err(e) => return Err(e.into()),
        };
        let mut page = AuditPage::default();
        let rows = table.range(..before.unwrap_or(u64::MAX))?.rev();
        for (scanned, row) in rows.enumerate() {
            let (id, value) = row?;
            let (id, (at_ms, bytes)) = (id.value(), value.value());
            if filter.from_ms.is_some_and(|from| at_ms < from) {
                return Ok(page);
            }
            if page.entries.len() == limit || scanned == AUDIT_SCAN {
                page.next = Some(id + 1);
                return Ok(page);
            }
            if filter.to_ms.is_some_and(|to| at_ms >= to) {
                continue;
            }
            let record = row::decode_audit(bytes)?;
            if filter.person.as_ref().is_some_and(|p| *p != record.person)
                || filter.action.is_some_and(|a| a != record.action)
            {
                continue;
            }
            page.entries.push(AuditEntry { id, record });
        }
        Ok(page)
    }
}

impl Tables<'_> {
    /// Applies a writer's [`AuditWrite`]: the id and the whole record as
    /// written, which the log carries (`None`: an outcome for a record no
    /// longer there, nothing written).
    pub(super) fn audit(
        &mut self,
        write: AuditWrite,
    ) -> Result<Option<(u64, AuditRecord)>, WriteError> {
        let mut table = self.txn.open_table(AUDIT)?;
        let (id, record) = match write {
            AuditWrite::New(record) => {
                let last = table.last()?.map_or(0, |(id, _)| id.value());
                (last + 1, record)
            }
            AuditWrite::Outcome { id, outcome } => {
                let found = match table.get(id)? {
                    Some(value) => Some(row::decode_audit(value.value().1)?),
                    None => None,
                };
                let Some(mut record) = found else {
                    return Ok(None);
                };
                record.outcome = Some(outcome);
                (id, record)
            }
        };
        row::encode_audit(&record, &mut self.buf);
        table.insert(id, (record.at_ms, self.buf.as_slice()))?;
        Ok(Some((id, record)))
    }

    /// Writes record `id` as it is (recovery, a standby).
    pub(super) fn put_audit(&mut self, id: u64, record: &AuditRecord) -> Result<(), WriteError> {
        row::encode_audit(record, &mut self.buf);
        self.txn
            .open_table(AUDIT)?
            .insert(id, (record.at_ms, self.buf.as_slice()))?;
        Ok(())
    }

    /// Deletes up to `limit` records made at or before `cutoff_ms`, oldest
    /// first; says how many, and whether it stopped at `limit`.
    pub(super) fn sweep_audit(
        &mut self,
        cutoff_ms: u64,
        limit: usize,
    ) -> Result<(u64, bool), WriteError> {
        let mut table = self.txn.open_table(AUDIT)?;
        let mut old = Vec::new();
        let mut more = false;
        for row in table.iter()? {
            let (id, value) = row?;
            if value.value().0 > cutoff_ms {
                break;
            }
            if old.len() == limit {
                more = true;
                break;
            }
            old.push(id.value());
        }
        for &id in &old {
            table.remove(id)?;
        }
        Ok((old.len() as u64, more))
    }
}

/// The log's entry of a written record.
pub(super) fn entry(id: u64, record: &AuditRecord) -> super::entry::Entry<'_> {
    super::entry::Entry::Audit {
        id,
        record: Cow::Borrowed(record),
    }
}
