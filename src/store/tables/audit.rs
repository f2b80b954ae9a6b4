//! What the writer does with the `audit` table: a record or an outcome
//! written, a record put as the log holds it, the oldest swept.

use redb::ReadableTable;

use super::super::error::WriteError;
use super::super::format::row;
use super::super::schema::AUDIT;
use super::super::tables::Tables;
use super::super::types::audit::{AuditRecord, AuditWrite};

impl Tables<'_> {
    /// Applies a writer's [`AuditWrite`]: the id and the whole record as
    /// written, which the log carries (`None`: an outcome for a record no
    /// longer there, nothing written).
    pub(in crate::store) fn audit(
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
    pub(in crate::store) fn put_audit(
        &mut self,
        id: u64,
        record: &AuditRecord,
    ) -> Result<(), WriteError> {
        row::encode_audit(record, &mut self.buf);
        self.txn
            .open_table(AUDIT)?
            .insert(id, (record.at_ms, self.buf.as_slice()))?;
        Ok(())
    }

    /// Deletes up to `limit` records made at or before `cutoff_ms`, oldest
    /// first; says how many, and whether it stopped at `limit`.
    pub(in crate::store) fn sweep_audit(
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
