//! Replication of the store's log to a NATS JetStream stream, so that an
//! acknowledged event survives the loss of this machine.
//!
//! The store ships each batch's frame before it answers the batch
//! ([`crate::store::Shipper`]); [`publish::Publisher`] is that shipper for
//! a primary: each frame one message of the stream, in order, fenced so
//! that only one writer can ever append. A standby's store applies them
//! ([`follow::Follower`]) and is promoted when the primary is gone.

pub mod follow;
pub mod lease;
pub mod publish;
pub mod snapshot;

pub use follow::{FollowError, Follower};
pub use lease::{Lease, LeaseError};
pub use publish::{ConnectError, Publisher, StreamSettings};
pub use snapshot::{Snapshot, SnapshotError, Snapshots};

use std::sync::Arc;

/// A replicating node as the admin API sees it: its lease (who holds it)
/// and, on a standby, the way to make it take over now.
#[derive(Clone)]
pub struct Control {
    pub lease: Arc<Lease>,
    pub stream: String,
    promote: Arc<tokio::sync::Notify>,
}

impl Control {
    pub fn new(lease: Arc<Lease>, stream: String) -> Control {
        Control {
            lease,
            stream,
            promote: Arc::default(),
        }
    }

    /// Asks the standby to take the lease now, whoever holds it, and take
    /// over (`hookinbox promote`); remembered until it looks.
    pub fn promote(&self) {
        self.promote.notify_one();
    }
}

/// The primary's renewals of its lease, a few times a lease, until
/// `stop`; then it gives the lease up. Ends with the new holder's name
/// when another node took it, or when the stream refused `store`'s frames
/// because another primary writes it (the app then steps down: it was
/// replaced). A renewal the bucket does not answer is tried again at the
/// next tick.
pub async fn keep_lease(
    lease: Arc<Lease>,
    store: crate::store::Store,
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
) -> Result<(), String> {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => {
                if let Err(e) = lease.release().await {
                    tracing::warn!(error = %e, "could not give up the replication lease; it lapses by itself");
                }
                return Ok(());
            }
        }
        if store.replaced() {
            // Given up if this node still holds it: the stream has another
            // writer, and whoever follows it may take over sooner.
            let _ = lease.release().await;
            let holder = lease.holder().await.ok().flatten();
            return Err(holder.unwrap_or_else(|| "another node".to_owned()));
        }
        match lease.renew().await {
            Ok(()) => {}
            Err(LeaseError::Held { holder }) => return Err(holder),
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the replication lease; trying again")
            }
        }
    }
}

/// A standby's life: follows the stream until the primary's lease is free
/// and this node takes it, then applies what is left, is promoted, and
/// keeps the lease as the primary ([`keep_lease`]). Ends `Ok` at `stop`;
/// with why, when following fails or another node took the lease.
pub async fn stand_by(
    store: crate::store::Store,
    follower: Follower,
    tag: u32,
    control: Control,
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
) -> Result<(), String> {
    let lease = control.lease.clone();
    let taken = std::sync::atomic::AtomicBool::new(false);
    let lease_free = async {
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = control.promote.notified() => {
                    match lease.take_over().await {
                        Ok(holder) => {
                            tracing::warn!(previous_holder = holder.as_deref().unwrap_or("none"), "promote asked for: this node took the replication lease");
                            taken.store(true, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "promote asked for, but the lease cannot be taken; still a standby");
                            continue;
                        }
                    }
                }
                () = stop.cancelled() => return,
            }
            match lease.acquire().await {
                Ok(()) => {
                    taken.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                Err(LeaseError::Held { .. }) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the replication lease; trying again")
                }
            }
        }
    };
    follower
        .follow(&store, tag, None, lease_free)
        .await
        .map_err(|e| e.to_string())?;
    if !taken.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    tracing::warn!(
        "the primary's lease lapsed and this node took it: applying the rest of the stream"
    );
    // The old primary may still append until its next renewal fails: apply
    // to the stream's end and promote, again until the two meet.
    let mut tries = 0;
    loop {
        let end = follower.end().await.map_err(|e| e.to_string())?;
        follower
            .follow(&store, tag, Some(end), std::future::pending())
            .await
            .map_err(|e| e.to_string())?;
        match store.promote().await {
            Ok(()) => break,
            Err(e) if tries < 50 => {
                tries += 1;
                tracing::info!(error = %crate::store::Report(&e), "not promoted yet; applying again");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => return Err(crate::store::Report(&e).to_string()),
        }
    }
    keep_lease(lease, store, every, stop).await
}
