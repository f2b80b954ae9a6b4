//! Claim: a lease on a pending event before its attempt goes out. The
//! claim is answered only once everything before it is durable, so nothing
//! leaves hookinbox for an event its sender was not answered for.

use std::sync::Arc;

use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::tables::Tables;
use super::super::types::Claimed;

impl Store {
    /// Leases pending event `seq` for one attempt; `None` if it is not
    /// pending any more or already has an attempt in flight.
    pub async fn claim(&self, seq: u64, started_ms: u64) -> Result<Option<Claimed>, StoreError> {
        self.call(|reply| {
            Box::new(Claim {
                seq,
                started_ms,
                reply,
            })
        })
        .await
    }
}

struct Claim {
    seq: u64,
    started_ms: u64,
    reply: ReplyTo<Option<Claimed>>,
}

impl Op for Claim {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        step.log(&Entry::Claim {
            seq: self.seq,
            started_ms: self.started_ms,
        });
        let result = step.t.claim(self.seq, self.started_ms);
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

pub(super) fn replay(t: &mut Tables<'_>, seq: u64, started_ms: u64) -> Result<(), WriteError> {
    t.claim(seq, started_ms).map(drop)
}
