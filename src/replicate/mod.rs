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
