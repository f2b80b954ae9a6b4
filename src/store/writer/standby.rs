//! A standby's writer: the frames its primary shipped, applied as recovery
//! applies them (nothing decided again), numbered as the primary numbered
//! them; and the promotion that makes it a primary, going on from there.
//!
//! A standby logs nothing of its own: the primary's stream holds every
//! frame, and after a crash the standby fetches again from the last frame
//! its file holds ([`META_LSN`], and [`META_STREAM_SEQ`] for where that
//! frame is in the stream).

use redb::ReadableTable;

use super::super::entry::Entry;
use super::super::error::WriteError;
use super::super::format::log as payload;
use super::super::pack;
use super::super::recover::replay_moving;
use super::super::ship::ShipError;
use super::super::tables::Tables;
use super::super::wal::{META_LSN, WalError};
use super::{Keys, Writer, ttls};

/// The `meta` row holding the stream sequence of the last frame applied.
pub const META_STREAM_SEQ: &str = "replicated_seq";

/// The last frame a batch applied, and where it is in the stream.
pub(in super::super) struct Applied {
    pub lsn: u64,
    stream_seq: u64,
}

impl Applied {
    /// Records it in the batch's transaction.
    pub(super) fn record(&self, t: &mut Tables<'_>) -> Result<(), WriteError> {
        t.meta.insert(META_LSN, self.lsn.to_le_bytes().as_slice())?;
        t.meta
            .insert(META_STREAM_SEQ, self.stream_seq.to_le_bytes().as_slice())?;
        Ok(())
    }
}

impl Writer {
    /// Whether `frames` continue the last frame applied without a gap.
    pub(super) fn continues(&self, frames: &[(u64, Vec<u8>)]) -> Result<(), WriteError> {
        let mut last = self.applied.as_ref().map_or(self.lsn, |a| a.lsn);
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

    /// Applies `frames`, which must continue the last one applied without a
    /// gap; the index learns what they changed when the batch commits.
    /// Returns the number of the last.
    pub(super) fn apply_frames(
        &mut self,
        t: &mut Tables<'_>,
        keys: &mut Keys,
        frames: &[(u64, Vec<u8>)],
        stream_seq: u64,
    ) -> Result<u64, WriteError> {
        let ttls = ttls(&self.options);
        let mut last = self.applied.as_ref().map_or(self.lsn, |a| a.lsn);
        for (lsn, bytes) in frames {
            if *lsn != last + 1 {
                return Err(WriteError::Gap {
                    expected: last + 1,
                    found: *lsn,
                });
            }
            for entry in payload::entries(*lsn, bytes).map_err(WalError::from)? {
                replay_moving(t, entry, &ttls, &mut |kind, fp, old, new| {
                    keys.moved(kind, fp, old, new)
                })?;
            }
            last = *lsn;
        }
        self.applied = Some(Applied {
            lsn: last,
            stream_seq,
        });
        // For listeners: the primary's events are this store's now.
        if let Some((seq, _)) = t.events.last()? {
            self.next_seq = self.next_seq.max(seq.value() + 1);
        }
        Ok(last)
    }

    /// Records the attempts in flight when the last primary stopped (this
    /// store's own process, or the one it was promoted from) as
    /// interrupted, their deliveries due again; logged, so shipped.
    pub(super) fn interrupted(&mut self, t: &mut Tables<'_>) -> Result<(), WriteError> {
        self.wal.push(&Entry::Interrupted);
        let attempts = t.recover_leases()?;
        if attempts > 0 {
            tracing::warn!(
                attempts,
                "attempts were in flight when the primary stopped; recorded as interrupted, delivering again"
            );
        }
        Ok(())
    }

    /// From now on a primary: events are numbered on from the last one
    /// applied, frames from the last frame. With a shipper, the stream must
    /// end at the last frame applied (drained, and no one else appended):
    /// this store's frames continue it.
    pub(super) fn promote(&mut self, t: &mut Tables<'_>) -> Result<(), WriteError> {
        if let Some(shipper) = &self.options.shipper {
            let held = shipper.attach(self.shared.tag)?;
            if held != self.lsn {
                return Err(WriteError::Unshipped(ShipError::Mismatch {
                    detail: format!(
                        "the stream ends at frame {held}, this standby applied up to {}: apply the rest first",
                        self.lsn
                    ),
                }));
            }
        }
        let last_key = t.states.last()?.map(|(k, _)| k.value());
        if let Some((seq, raw)) = t.events.last()? {
            self.next_seq = seq.value().max(last_key.unwrap_or(0)) + 1;
            self.last_received_ms =
                pack::decode::<WriteError>(&t.pack, raw.value())?.received_at_ms;
        }
        self.standby = false;
        self.shared.standby.send_replace(false);
        tracing::warn!(frame = self.lsn, "promoted: this store is the primary now");
        Ok(())
    }
}
