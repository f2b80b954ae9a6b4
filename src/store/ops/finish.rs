//! Finish: an attempt's outcome recorded and its lease released, with what
//! happens next (delivered, a retry at a time, or dead).

use std::borrow::Cow;
use std::sync::Arc;

use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::tables::{Tables, Ttls};
use super::super::types::Finish;

impl Store {
    /// Records an attempt's outcome durably and releases its lease.
    pub async fn finish(&self, finish: Finish) -> Result<(), StoreError> {
        self.call(|reply| Box::new(FinishJob { finish, reply }))
            .await
    }
}

struct FinishJob {
    finish: Finish,
    reply: ReplyTo<()>,
}

impl Op for FinishJob {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        step.log(&Entry::Finish(Cow::Borrowed(&self.finish)));
        let result = step.t.finish(&self.finish, step.ttls);
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

pub(super) fn replay(t: &mut Tables<'_>, finish: &Finish, ttls: &Ttls) -> Result<(), WriteError> {
    t.finish(finish, ttls)
}
