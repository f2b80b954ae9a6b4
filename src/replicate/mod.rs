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

pub use follow::{FollowError, Follower};
pub use lease::{Lease, LeaseError};
pub use publish::{ConnectError, Publisher, StreamSettings};

/// The primary's renewals of its lease, a few times a lease, until
/// `stop`; then it gives the lease up. Ends with the new holder's name
/// when another node took it (the app then stops: it was replaced). A
/// renewal the bucket does not answer is tried again at the next tick.
pub async fn keep_lease(
    lease: Lease,
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
        match lease.renew().await {
            Ok(()) => {}
            Err(LeaseError::Held { holder }) => return Err(holder),
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the replication lease; trying again")
            }
        }
    }
}
