//! Sweep: up to a limit of expired things deleted in one bounded commit
//! (events, then dedupe keys, idempotency keys and audit records), the
//! dedupe index told what it forgot.

use std::sync::Arc;

use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::tables::{Tables, Ttls};
use super::super::types::Swept;
use super::Moved;

impl Store {
    /// Deletes up to `limit` expired things (events, then dedupe keys) as of
    /// `now_ms`, in one transaction through the writer. Call it again while
    /// `more` is set; each call is one bounded commit, so ingest never waits
    /// long behind the sweeper.
    pub async fn sweep(&self, now_ms: u64, limit: usize) -> Result<Swept, StoreError> {
        self.call(|reply| {
            Box::new(Sweep {
                now_ms,
                limit,
                reply,
            })
        })
        .await
    }
}

struct Sweep {
    now_ms: u64,
    limit: usize,
    reply: ReplyTo<Swept>,
}

impl Op for Sweep {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        step.log(&Entry::Sweep {
            now_ms: self.now_ms,
            limit: self.limit,
        });
        let keys = &mut *step.keys;
        let result = step
            .t
            .sweep(self.now_ms, self.limit, step.ttls)
            .map(|(swept, forgotten)| {
                forgotten.tell(&mut |kind, fp, old, new| keys.moved(kind, fp, old, new));
                swept
            });
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

pub(super) fn replay(
    t: &mut Tables<'_>,
    now_ms: u64,
    limit: usize,
    ttls: &Ttls,
    moved: &mut Moved<'_>,
) -> Result<(), WriteError> {
    let (_, forgotten) = t.sweep(now_ms, limit, ttls)?;
    forgotten.tell(moved);
    Ok(())
}
