//! Shipping: where a primary's log frames go before their batches are
//! answered (replication, `crate::replicate`). The store knows only this
//! trait; what a frame is shipped to, and how, is the implementor's.
//!
//! Every batch that changes the store has a frame (a checkpoint's too),
//! numbered without gaps, and with a shipper every frame is written to the
//! local log, which starts over only once every frame before is shipped:
//! what the stream lacks after a crash is in the log ([`catch_up`]). The
//! log thread ships a group's frames in order once they are on the local
//! disk, and answers the group only when the shipper says they are safe.
//! A frame the shipper could not take is kept and shipped first next time:
//! a follower never sees frame `n + 1` before frame `n`. Meanwhile the
//! batches it held are answered 503, their changes stored all the same (a
//! provider's retry is a duplicate, answered once the original has
//! shipped).

use super::wal::Wal;

/// One frame to ship: its number and payload (as recovery reads it,
/// [`super::format::log`]).
#[derive(Debug, Clone, Copy)]
pub struct ShippedFrame<'a> {
    pub lsn: u64,
    pub payload: &'a [u8],
}

/// Why frames were not shipped.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ShipError {
    /// Not taken within the shipper's budget (no quorum, unreachable):
    /// try again with the next group.
    #[error("the replication stream did not take frame {lsn}: {detail}")]
    Unavailable { lsn: u64, detail: String },
    /// Another writer appends to the stream: this store was replaced, and
    /// must never answer 2xx again.
    #[error("another primary writes the replication stream (frame {lsn}): {detail}")]
    Replaced { lsn: u64, detail: String },
    /// The stream does not continue this store: another inbox's frames,
    /// or frames this store does not hold. Found when the store opens.
    #[error("the replication stream does not continue this data dir: {detail}")]
    Mismatch { detail: String },
    /// Where the stream ends could not be read (no quorum, unreachable):
    /// nothing is known against this store; try again.
    #[error("the replication stream's end cannot be read: {detail}")]
    Unreadable { detail: String },
}

/// Takes frames, in order. Called from the log thread only, one call at a
/// time; it may block (up to its own budget).
pub trait Shipper: Send + Sync {
    /// Called once when the store opens, before anything is shipped, with
    /// the database's tag: the number of the last frame the stream holds
    /// (0: none), or why the stream is not this store's.
    fn attach(&self, tag: u32) -> Result<u64, ShipError>;

    /// Returns once every frame is safe, or why not. The frames continue
    /// the last ones it returned `Ok` for, without gaps.
    fn ship(&self, frames: &[ShippedFrame<'_>]) -> Result<(), ShipError>;
}

/// When the store opens: the frames of its log that the stream lacks (a
/// crash came after the local fsync, before the ship; the log keeps every
/// frame until it is shipped), shipped first. Refuses a stream that is
/// ahead of this store (another node went on from it) or that lacks frames
/// the log no longer has.
pub(super) fn catch_up(
    shipper: &dyn Shipper,
    tag: u32,
    lsn: u64,
    wal: &Wal,
) -> Result<(), ShipError> {
    let held = shipper.attach(tag)?;
    if held > lsn {
        return Err(ShipError::Mismatch {
            detail: format!(
                "it holds frame {held}, this data dir only up to {lsn}: another node went on from here (start this one as a standby, or restore the newer data)"
            ),
        });
    }
    if held == lsn {
        return Ok(());
    }
    let lacking = || ShipError::Mismatch {
        detail: format!(
            "this data dir holds frames up to {lsn}, the stream only up to {held}, and frame {} is no longer in this data dir's log",
            held + 1
        ),
    };
    let found = wal.read_after(held).map_err(|_| lacking())?.frames;
    let missing: Vec<ShippedFrame<'_>> = found
        .iter()
        .take_while(|(n, _)| *n <= lsn)
        .map(|(lsn, payload)| ShippedFrame { lsn: *lsn, payload })
        .collect();
    if missing.last().map(|f| f.lsn) != Some(lsn) {
        return Err(lacking());
    }
    tracing::warn!(
        from = held + 1,
        to = lsn,
        "shipping the frames the replication stream lacks before anything else"
    );
    shipper.ship(&missing)
}
