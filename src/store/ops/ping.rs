//! Ping: an empty commit that proves the writer alive (liveness, not
//! readiness: on a full disk it still answers). Runs beside a checkpoint.

use std::sync::Arc;

use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Beside, Deciding, Job, Op, Runs, Step};
use super::super::reply::{Ready, ReplyTo, fail};

impl Store {
    /// Whether the writer thread is alive: it answers (an empty commit).
    /// Liveness, not readiness: on a full disk it still answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.call(job).await
    }
}

/// The job, for the store's open (its wake-ups of the writer).
pub(in crate::store) fn job(reply: ReplyTo<()>) -> Job {
    Box::new(Ping { reply })
}

struct Ping {
    reply: ReplyTo<()>,
}

impl Op for Ping {
    fn runs_on(&self) -> Runs {
        Runs::Either
    }

    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        step.settle(self.reply, Ok(()))
    }

    fn beside(self: Box<Self>, step: &mut Deciding<'_>) -> Beside {
        step.ready.push(Ready::new(self.reply, ()));
        Beside::Done
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}
