//! Interrupted: every attempt still leased when the last primary stopped
//! (this store's own process, or the one it was promoted from) recorded as
//! interrupted, its delivery due again; logged, so shipped. A shipping
//! primary's first job at open, and part of a promotion.

use std::sync::Arc;

use super::super::entry::Entry;
use super::super::error::WriteError;
use super::super::job::{Job, Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::tables::Tables;

/// The job, for the store's open.
pub(in crate::store) fn job(reply: ReplyTo<()>) -> Job {
    Box::new(Interrupted { reply })
}

struct Interrupted {
    reply: ReplyTo<()>,
}

impl Op for Interrupted {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        let result = record(step);
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

/// Logs the entry and records the leased attempts as interrupted.
pub(super) fn record(step: &mut Step<'_, '_>) -> Result<(), WriteError> {
    step.log(&Entry::Interrupted);
    let attempts = step.t.recover_leases()?;
    if attempts > 0 {
        tracing::warn!(
            attempts,
            "attempts were in flight when the primary stopped; recorded as interrupted, delivering again"
        );
    }
    Ok(())
}

pub(super) fn replay(t: &mut Tables<'_>) -> Result<(), WriteError> {
    t.recover_leases().map(drop)
}
