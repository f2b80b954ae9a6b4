//! How far the log thread got: the newest batch answered as durable, the
//! newest frame shipped, and whether the log failed or the stream has
//! another writer. The writer, the log thread and readers all see it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What the writer and the log thread both see (and readers: it lives in
/// the store's shared state).
#[derive(Default)]
pub(super) struct Progress {
    /// The number of the newest batch answered as durable.
    pub(super) durable: AtomicU64,
    /// The number of the newest frame the shipper took (with no shipper:
    /// as `durable`): the log may start over once it reaches the writer's.
    pub(super) shipped: AtomicU64,
    /// A write or sync failed; set until the writer settles the thread.
    pub(super) failed: AtomicBool,
    /// The shipper said another primary writes the stream: nothing is
    /// answered 2xx again.
    pub(super) replaced: AtomicBool,
}

impl Progress {
    /// Whether this disk holds a frame the stream never took: frames
    /// stored here past the last one shipped (refused by another writer,
    /// or not taken before the end).
    pub(super) fn holds_unshipped(&self) -> bool {
        self.durable.load(Ordering::Acquire) > self.shipped.load(Ordering::Acquire)
    }

    /// The newest frame number shipped.
    pub(super) fn shipped(&self) -> u64 {
        self.shipped.load(Ordering::Acquire)
    }

    pub(super) fn replaced(&self) -> bool {
        self.replaced.load(Ordering::Acquire)
    }
}
