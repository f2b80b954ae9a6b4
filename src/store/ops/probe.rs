//! Probe: readiness proved by a durable write of an event's size (a row
//! that large committed, then removed), never by the log's; and the loop
//! that probes while the store is unwritable, so readiness comes back by
//! itself once the disk has room again.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Commit, Op, Step};
use super::super::reply::{ReplyTo, fail};

/// How often an unwritable store is probed: a freed disk is noticed within
/// this, and each failing probe costs one commit of an event's size.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);

/// The `meta` row a readiness probe writes and removes.
const PROBE_KEY: &str = "readiness-probe";

impl Store {
    /// Proves the store can take an event of `bytes`: commits a row that
    /// large, then removes it in a second commit. A failure marks the store
    /// unwritable (as any failed commit does); a pass clears that.
    pub async fn probe(&self, bytes: usize) -> Result<(), StoreError> {
        self.call(|reply| Box::new(Probe { bytes, reply })).await?;
        self.call(|reply| Box::new(Probe { bytes: 0, reply })).await
    }

    /// While a commit has failed and no probe has passed since, probes every
    /// [`PROBE_EVERY`], so readiness comes back by itself once the disk has
    /// room again, without waiting for a provider to send. Runs until
    /// `shutdown` resolves.
    pub async fn keep_probing(
        self,
        bytes: usize,
        shutdown: CancellationToken,
    ) -> Result<(), StoreError> {
        let mut failures = self.shared.write_error.subscribe();
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                failed = failures.wait_for(Option::is_some) => {
                    if failed.is_err() {
                        return Err(StoreError::Closed);
                    }
                }
            }
            loop {
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(PROBE_EVERY) => {}
                }
                match self.probe(bytes).await {
                    Ok(()) => {
                        tracing::info!(bytes, "the store can write events again");
                        break;
                    }
                    Err(e) => tracing::debug!(error = %e, "readiness probe failed"),
                }
            }
        }
    }
}

/// Writes a `bytes`-long row, or removes it with 0. A commit that writes an
/// event-sized row is what proves the store can take events again; only
/// this clears the last write failure.
struct Probe {
    bytes: usize,
    reply: ReplyTo<()>,
}

impl Op for Probe {
    /// Always a checkpoint: nothing to log.
    fn commit(&self) -> Commit {
        Commit::Checkpoint {
            event_sized: self.bytes > 0,
        }
    }

    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        let result = if self.bytes == 0 {
            step.t.meta.remove(PROBE_KEY).map(drop)
        } else {
            step.t
                .meta
                .insert(PROBE_KEY, vec![0u8; self.bytes].as_slice())
                .map(drop)
        };
        step.settle(self.reply, result.map_err(WriteError::from))
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}
