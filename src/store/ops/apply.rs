//! Apply: a standby stores the frames its primary shipped, as recovery
//! applies them (nothing decided again), numbered as the primary numbered
//! them. A standby logs nothing of its own: the primary's stream holds
//! every frame, and after a crash the standby fetches again from the last
//! frame its file holds (`META_LSN`, and [`META_STREAM_SEQ`] for where that
//! frame is in the stream).
//!
//! [`META_STREAM_SEQ`]: super::super::job::META_STREAM_SEQ

use std::sync::Arc;

use redb::ReadableTable;

use super::super::error::{StoreError, WriteError};
use super::super::format::log as payload;
use super::super::handle::Store;
use super::super::job::{Applied, Op, Runs, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::wal::WalError;

impl Store {
    /// A standby's: applies `frames` (number, payload), which continue the
    /// last frame applied without a gap; `stream_seq` is where the last of
    /// them is in the replication stream. Returns the last one's number,
    /// once readers see them.
    pub async fn apply_frames(
        &self,
        frames: Vec<(u64, Vec<u8>)>,
        stream_seq: u64,
    ) -> Result<u64, StoreError> {
        self.call(|reply| {
            Box::new(Apply {
                frames,
                stream_seq,
                reply,
            })
        })
        .await
    }
}

struct Apply {
    frames: Vec<(u64, Vec<u8>)>,
    stream_seq: u64,
    reply: ReplyTo<u64>,
}

impl Op for Apply {
    fn runs_on(&self) -> Runs {
        Runs::Standby
    }

    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        // Refused alone, before the transaction sees it: frames that do not
        // continue are the follower's mistake, not a failed commit.
        if let Err(gap) = continues(step, &self.frames) {
            fail(self.reply, &Arc::new(gap));
            return Ok(());
        }
        let result = self.store(step);
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

/// The last frame applied so far: this batch's, or the last committed.
fn last_applied(step: &Step<'_, '_>) -> u64 {
    step.applied.as_ref().map_or(step.lsn, |a| a.lsn)
}

/// Whether `frames` continue the last frame applied without a gap.
fn continues(step: &Step<'_, '_>, frames: &[(u64, Vec<u8>)]) -> Result<(), WriteError> {
    let mut last = last_applied(step);
    for (lsn, _) in frames {
        if *lsn != last + 1 {
            return Err(WriteError::Gap {
                expected: last + 1,
                found: *lsn,
            });
        }
        last = *lsn;
    }
    Ok(())
}

impl Apply {
    /// Applies the frames; the index learns what they changed when the
    /// batch commits. Returns the number of the last.
    fn store(&self, step: &mut Step<'_, '_>) -> Result<u64, WriteError> {
        let mut last = last_applied(step);
        for (lsn, bytes) in &self.frames {
            for entry in payload::entries(*lsn, bytes).map_err(WalError::from)? {
                let keys = &mut *step.keys;
                super::replay(step.t, entry, step.ttls, &mut |kind, fp, old, new| {
                    keys.moved(kind, fp, old, new)
                })?;
            }
            last = *lsn;
        }
        *step.applied = Some(Applied {
            lsn: last,
            stream_seq: self.stream_seq,
        });
        // For listeners: the primary's events are this store's now.
        if let Some((seq, _)) = step.t.events.last()? {
            step.events.next_seq = step.events.next_seq.max(seq.value() + 1);
        }
        Ok(last)
    }
}
