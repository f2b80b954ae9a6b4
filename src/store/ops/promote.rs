//! Promote: a standby becomes the primary. Events are numbered on from the
//! last one applied, frames from the last frame; the promoted store's first
//! frame records the attempts its old primary had in flight (delivered
//! again from here) and fences that primary: with a shipper, the stream
//! takes it only if it ends at the last frame applied.

use std::sync::Arc;

use redb::ReadableTable;

use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Runs, Step};
use super::super::pack;
use super::super::reply::{ReplyTo, fail};
use super::super::ship::ShipError;
use super::interrupted;

impl Store {
    /// A standby becomes the primary: it takes every kind of job from now
    /// on, numbering events and frames on from the last it applied.
    pub async fn promote(&self) -> Result<(), StoreError> {
        self.call(|reply| Box::new(Promote { reply })).await
    }
}

struct Promote {
    reply: ReplyTo<()>,
}

impl Op for Promote {
    fn runs_on(&self) -> Runs {
        Runs::Either
    }

    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        let result = promote(step).and_then(|()| interrupted::record(step));
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

/// From now on a primary. With a shipper, the stream must end at the last
/// frame applied (drained, and no one else appended): this store's frames
/// continue it.
fn promote(step: &mut Step<'_, '_>) -> Result<(), WriteError> {
    if let Some(shipper) = &step.options.shipper {
        let held = shipper.attach(step.events.tag)?;
        if held != step.lsn {
            return Err(WriteError::Unshipped(ShipError::Mismatch {
                detail: format!(
                    "the stream ends at frame {held}, this standby applied up to {}: apply the rest first",
                    step.lsn
                ),
            }));
        }
    }
    let last_key = step.t.states.last()?.map(|(k, _)| k.value());
    if let Some((seq, raw)) = step.t.events.last()? {
        step.events.next_seq = seq.value().max(last_key.unwrap_or(0)) + 1;
        step.events.last_received_ms =
            pack::decode::<WriteError>(&step.t.pack, raw.value())?.received_at_ms;
    }
    *step.standby = false;
    step.promoted.send_replace(false);
    tracing::warn!(frame = step.lsn, "promoted: this store is the primary now");
    Ok(())
}
