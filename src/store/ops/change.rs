//! Change: a person's change to one event (replay, replay to one
//! destination, ignore with a note, erase), refused with the reason when
//! the event's state does not allow it.

use std::borrow::Cow;
use std::sync::Arc;

use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::tables::{Tables, Ttls};
use super::super::types::{Change, ChangeError};

impl Store {
    /// Replays or ignores event `seq`, durably.
    pub async fn change(
        &self,
        seq: u64,
        change: Change,
        now_ms: u64,
    ) -> Result<Result<(), ChangeError>, StoreError> {
        self.call(|reply| {
            Box::new(ChangeJob {
                seq,
                change,
                now_ms,
                reply,
            })
        })
        .await
    }
}

struct ChangeJob {
    seq: u64,
    change: Change,
    now_ms: u64,
    reply: ReplyTo<Result<(), ChangeError>>,
}

impl Op for ChangeJob {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        step.log(&Entry::Change {
            seq: self.seq,
            change: Cow::Borrowed(&self.change),
            now_ms: self.now_ms,
        });
        let result = step
            .t
            .change(self.seq, &self.change, self.now_ms, step.ttls);
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

pub(super) fn replay(
    t: &mut Tables<'_>,
    seq: u64,
    change: &Change,
    now_ms: u64,
    ttls: &Ttls,
) -> Result<(), WriteError> {
    t.change(seq, change, now_ms, ttls).map(drop)
}
