//! Audit: a person's request recorded before it runs, and how it ended,
//! written whole under its id so that recovery and a standby put it as it
//! is.

use std::borrow::Cow;
use std::sync::Arc;

use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::tables::Tables;
use super::super::types::audit::{AuditOutcome, AuditRecord, AuditWrite};

impl Store {
    /// Records a person's request before it runs; answers its id once the
    /// record is durable.
    pub async fn audit(&self, record: AuditRecord) -> Result<u64, StoreError> {
        self.call(|reply| {
            Box::new(Audit {
                write: AuditWrite::New(record),
                reply,
            })
        })
        .await
    }

    /// Records how request `id` ended, durably.
    pub async fn audit_outcome(&self, id: u64, outcome: AuditOutcome) -> Result<(), StoreError> {
        self.call(|reply| {
            Box::new(Audit {
                write: AuditWrite::Outcome { id, outcome },
                reply,
            })
        })
        .await
        .map(drop)
    }
}

struct Audit {
    write: AuditWrite,
    reply: ReplyTo<u64>,
}

impl Op for Audit {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        let result = step.t.audit(self.write).map(|written| match written {
            Some((id, record)) => {
                step.wal.push(&Entry::Audit {
                    id,
                    record: Cow::Borrowed(&record),
                });
                id
            }
            None => 0,
        });
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

pub(super) fn replay(t: &mut Tables<'_>, id: u64, record: &AuditRecord) -> Result<(), WriteError> {
    t.put_audit(id, record)
}
