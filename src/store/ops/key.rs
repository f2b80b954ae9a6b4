//! Key: one change of an idempotency key (claim, complete, release,
//! extend, delete), decided against the dedupe index's place for it and
//! logged as what it wrote, so that recovery and a standby write the same
//! without deciding again.

use std::borrow::Cow;
use std::sync::Arc;

use super::super::dedupe::Kind;
use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::tables::Tables;
use super::super::types::keys::{self, KeyAnswer, KeyOp, KeyWrite};
use super::Moved;

impl Store {
    /// Changes idempotency key `key` of `namespace` as `op` asks, at
    /// `now_ms`. Returns once the answer is durable on disk.
    pub async fn key(
        &self,
        namespace: &str,
        key: &str,
        op: KeyOp,
        now_ms: u64,
    ) -> Result<KeyAnswer, StoreError> {
        self.call(|reply| {
            Box::new(Key {
                namespace: namespace.to_owned(),
                key: key.to_owned(),
                op,
                now_ms,
                reply,
            })
        })
        .await
    }
}

struct Key {
    namespace: String,
    key: String,
    op: KeyOp,
    now_ms: u64,
    reply: ReplyTo<KeyAnswer>,
}

impl Op for Key {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        let result = self.decide(step);
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

impl Key {
    fn decide(&self, step: &mut Step<'_, '_>) -> Result<KeyAnswer, WriteError> {
        let fp = keys::fingerprint(&self.namespace, &self.key);
        let at = step.keys.live(step.index, Kind::Key, fp)?;
        let (answer, write) = step
            .t
            .key(&self.namespace, &self.key, at, &self.op, self.now_ms)?;
        if let Some(write) = write {
            let new = match &write {
                KeyWrite::Put { seq, .. } => Some(*seq),
                KeyWrite::Remove { .. } => None,
            };
            step.keys.moved(Kind::Key, fp, at, new);
            step.log(&Entry::KeyWrite(Cow::Owned(write)));
        }
        Ok(answer)
    }
}

/// What a key change wrote, written again.
pub(super) fn replay(
    t: &mut Tables<'_>,
    write: &KeyWrite,
    moved: &mut Moved<'_>,
) -> Result<(), WriteError> {
    let fp = t.write_key(write)?;
    match write {
        KeyWrite::Put { seq, replaces, .. } => moved(Kind::Key, fp, *replaces, Some(*seq)),
        KeyWrite::Remove { seq, .. } => moved(Kind::Key, fp, Some(*seq), None),
    }
    Ok(())
}

/// A key change as format 2 logged it (the operation), decided again as
/// the build that logged it decided it.
pub(super) fn replay_op(
    t: &mut Tables<'_>,
    namespace: &str,
    key: &str,
    op: &KeyOp,
    now_ms: u64,
) -> Result<(), WriteError> {
    t.key_by_op(namespace, key, op, now_ms)
}
