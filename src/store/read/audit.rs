//! The audit trail's reads on [`Store`]: a page of the trail from a
//! snapshot (records are written by `ops/audit.rs`).

use redb::ReadableDatabase;

use super::super::error::StoreError;
use super::super::format::row;
use super::super::handle::Store;
use super::super::schema::AUDIT;
use super::super::types::audit::{AUDIT_SCAN, AuditEntry, AuditFilter, AuditPage};

impl Store {
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
