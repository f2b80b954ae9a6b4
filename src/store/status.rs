//! What the writer reports to the store's handles: readiness (the writer
//! commits and no commit failed since the last passing probe), the role
//! (standby or primary), shipping, and the scheduler's wake-up after a
//! commit.

use std::sync::Arc;

use super::error::{StoreError, WriteError};
use super::handle::Store;

impl Store {
    /// Whether the store can take events: the writer commits now, and no
    /// commit has failed since the last passing [`Store::probe`].
    pub async fn ready(&self) -> Result<(), StoreError> {
        if self.is_standby() {
            return Err(StoreError::Write(Arc::new(WriteError::Role {
                standby: true,
            })));
        }
        self.ping().await?;
        match self.shared.write_error.borrow().clone() {
            Some(cause) => Err(StoreError::Write(cause)),
            None => Ok(()),
        }
    }

    /// The newest frame the shipper took (replication): a snapshot taken at
    /// frame `n` is one of the stream's only once this reaches `n`.
    pub fn shipped(&self) -> u64 {
        self.shared.progress.shipped()
    }

    /// What this store shipped, readable after it closed (it holds no
    /// database): whether its disk kept frames the stream never took.
    pub fn shipping(&self) -> Shipping {
        Shipping(self.shared.progress.clone())
    }

    /// Whether the shipper found another primary writing the stream: this
    /// store answers no 2xx again, and its node steps down.
    pub fn replaced(&self) -> bool {
        self.shared.progress.replaced()
    }

    /// Whether this store is a standby (until promoted).
    pub fn is_standby(&self) -> bool {
        *self.shared.standby.borrow()
    }

    /// Resolves once this store is a primary (at once if it is one).
    pub async fn promoted(&self) {
        let mut watch = self.shared.standby.subscribe();
        let _ = watch.wait_for(|standby| !*standby).await;
    }

    /// No commit has failed since the last passing [`Store::probe`]: what
    /// [`Store::ready`] says without waiting for a commit.
    pub fn is_writable(&self) -> bool {
        self.shared.write_error.borrow().is_none()
    }

    /// Resolves after the next commit (or at once if one happened since the
    /// last call): the scheduler's wake-up.
    pub async fn schedule_changed(&self) {
        self.shared.schedule_changed.notified().await
    }
}

/// A replicating store's shipping, as [`Store::shipping`] hands it out.
#[derive(Clone)]
pub struct Shipping(std::sync::Arc<super::progress::Progress>);

impl Shipping {
    /// Whether the store's disk holds a frame the stream never took. Read
    /// once the store has closed: a replaced primary whose disk holds none
    /// is a prefix of the stream, and follows the new primary with its
    /// data; one that does must set its data aside.
    pub fn holds_unshipped(&self) -> bool {
        self.0.holds_unshipped()
    }
}
