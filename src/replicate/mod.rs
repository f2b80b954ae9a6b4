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
pub use lease::{Holder, Lease, LeaseError, PrimaryWatch, standby_refusal};
pub use publish::{ConnectError, Publisher, StreamSettings};
pub use snapshot::{Snapshot, SnapshotError, Snapshots};

use std::sync::Arc;
use std::time::Duration;

/// How long a standby waits before following again after the stream did
/// not answer (its NATS servers down, an election): first, and at most.
const FOLLOW_RETRY_FIRST: Duration = Duration::from_millis(250);
const FOLLOW_RETRY_MOST: Duration = Duration::from_secs(5);

/// Why a replicating node's lease task ended before it was asked to stop.
#[derive(Debug, thiserror::Error)]
pub enum LeaseEnd {
    /// Another node holds the lease, or writes the stream: this one was
    /// replaced as the primary.
    #[error("node {holder:?} took over the replication lease: this node was replaced")]
    Replaced { holder: String },
    /// The standby cannot go on following, whatever it waits for: the
    /// stream holds another inbox's frames, or applying them failed. Its
    /// data is kept; the operator decides.
    #[error("this standby cannot follow the stream: {0}")]
    CannotFollow(#[source] FollowError),
}

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

/// The primary's renewals of its lease (and of its name's presence), a few
/// times a lease, until `stop`; then it gives the lease up. Ends
/// `Replaced` with the new holder's name when another node took it, or
/// when the stream refused `store`'s frames because another primary
/// writes it (the app then steps down). A renewal the bucket does not
/// answer is tried again at the next tick.
pub async fn keep_lease(
    lease: Arc<Lease>,
    store: crate::store::Store,
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
    metrics: crate::metrics::Metrics,
) -> Result<(), LeaseEnd> {
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
            return Err(LeaseEnd::Replaced {
                holder: holder.unwrap_or_else(|| "another node".to_owned()),
            });
        }
        match lease.renew().await {
            Ok(()) => {}
            Err(LeaseError::Held { holder }) => {
                return Err(LeaseEnd::Replaced {
                    holder: holder.node,
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the replication lease; trying again")
            }
        }
        let _ = lease.keep_present().await;
        observe_lease(&lease, &metrics).await;
    }
}

/// The lease as read now, into the metrics (left as they were when the
/// bucket does not answer).
async fn observe_lease(lease: &Lease, metrics: &crate::metrics::Metrics) {
    if let Ok(held) = lease.held_by().await {
        metrics.set_lease(held.as_ref().map(|h| (h.holder.node.as_str(), h.written)));
    }
}

/// After this node took the lease from `previous`: waits (a lease and a
/// margin at most) for that process to be gone, its last frames shipped,
/// before this node applies the stream to its end and writes. An old
/// primary that steps down then holds nothing the stream lacks, and
/// follows with its data (no copy set aside, no snapshot to restore); one
/// that died or froze let its presence lapse with its lease.
async fn step_down_of(lease: &Lease, previous: &Holder) {
    let within = lease.lease() + Duration::from_secs(2);
    let started = std::time::Instant::now();
    if lease.await_departure(previous, within).await {
        tracing::info!(previous = %previous, waited_ms = started.elapsed().as_millis() as u64, "the previous primary is gone");
    } else {
        tracing::warn!(previous = %previous, "the previous primary did not step down within a lease; taking over anyway (what it stores from now on is refused by the stream)");
    }
}

/// Whether following may work again after this failure by waiting: the
/// stream or its servers did not answer. A foreign stream or a store that
/// cannot apply will not mend by itself.
fn passing(e: &FollowError) -> bool {
    matches!(e, FollowError::Connect(_) | FollowError::Stream { .. })
}

/// Retries `step` while it fails in a [`passing`] way, waiting longer each
/// time up to [`FOLLOW_RETRY_MOST`]; a warning at the first failure and
/// then once a minute, and a line when it works again. Ends with `step`'s
/// answer, a lasting failure, or `None` at `stop`.
async fn until_followed<T, F: Future<Output = Result<T, FollowError>>>(
    what: &str,
    stop: &tokio_util::sync::CancellationToken,
    metrics: &crate::metrics::Metrics,
    mut step: impl FnMut() -> F,
) -> Option<Result<T, FollowError>> {
    let mut wait = FOLLOW_RETRY_FIRST;
    let mut failing_since: Option<std::time::Instant> = None;
    let mut warned_at: Option<std::time::Instant> = None;
    loop {
        let result = tokio::select! {
            result = step() => result,
            () = stop.cancelled() => return None,
        };
        match result {
            Err(e) if passing(&e) => {
                metrics.follow_failed();
                let now = std::time::Instant::now();
                let since = *failing_since.get_or_insert(now);
                if warned_at.is_none_or(|at| now - at >= Duration::from_secs(60)) {
                    warned_at = Some(now);
                    tracing::warn!(error = %e, failing_for_s = (now - since).as_secs(), "{what}: the stream does not answer; trying again (the data is kept)");
                }
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = stop.cancelled() => return None,
                }
                wait = (wait * 2).min(FOLLOW_RETRY_MOST);
            }
            result => {
                if let Some(since) = failing_since
                    && result.is_ok()
                {
                    tracing::info!(
                        after_s = since.elapsed().as_secs(),
                        "{what}: the stream answers again"
                    );
                }
                return Some(result);
            }
        }
    }
}

/// A standby's life: follows the stream until the primary's lease is free
/// and this node takes it, then applies what is left, is promoted, and
/// keeps the lease as the primary ([`keep_lease`]). Ends `Ok` at `stop`.
/// A stream that does not answer (its servers gone, an election) is
/// followed again from where the store left off, its data kept, for as
/// long as it takes; only a lasting failure (`CannotFollow`) or another
/// node's lease after the takeover (`Replaced`) ends it.
pub async fn stand_by(
    store: crate::store::Store,
    follower: Follower,
    tag: u32,
    control: Control,
    every: std::time::Duration,
    stop: tokio_util::sync::CancellationToken,
    metrics: crate::metrics::Metrics,
) -> Result<(), LeaseEnd> {
    let lease = control.lease.clone();
    let taken = std::sync::atomic::AtomicBool::new(false);
    let lease_free = async {
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = control.promote.notified() => {
                    match lease.take_over().await {
                        Ok(holder) => {
                            tracing::warn!(previous_holder = holder.as_ref().map_or("none", |h| h.node.as_str()), "promote asked for: this node took the replication lease");
                            if let Some(previous) = holder.filter(|h| !lease.is_mine(h)) {
                                step_down_of(&lease, &previous).await;
                            }
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
            let _ = lease.keep_present().await;
            // Whom this node saw holding the lease last, for its departure.
            let before = lease.primary().get();
            match lease.acquire().await {
                Ok(()) => {
                    if let Some(previous) = before.filter(|h| !lease.is_mine(h)) {
                        step_down_of(&lease, &previous).await;
                    }
                    taken.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                Err(LeaseError::Held { .. }) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the replication lease; trying again")
                }
            }
            observe_lease(&lease, &metrics).await;
            if let Ok((_, applied)) = store.last_frame()
                && let Ok(lag) = follower.lag(applied).await
            {
                metrics.set_standby_lag(lag);
            }
        }
    };
    // Following ends when the lease is taken (or at stop); a failure of
    // the stream meanwhile follows again, the same wait for the lease
    // going on.
    let lease_free = futures_util::FutureExt::shared(Box::pin(lease_free));
    let followed = until_followed("following as a standby", &stop, &metrics, || {
        follower.follow(&store, tag, None, lease_free.clone())
    })
    .await;
    drop(lease_free);
    match followed {
        None => return Ok(()),
        Some(Err(e)) => return Err(LeaseEnd::CannotFollow(e)),
        Some(Ok(_)) => {}
    }
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
        let applied = until_followed(
            "applying the rest of the stream",
            &stop,
            &metrics,
            || async {
                let end = follower.end().await?;
                follower
                    .follow(&store, tag, Some(end), std::future::pending())
                    .await
            },
        )
        .await;
        match applied {
            None => return Ok(()),
            Some(Err(e)) => return Err(LeaseEnd::CannotFollow(e)),
            Some(Ok(_)) => {}
        }
        match store.promote().await {
            Ok(()) => {
                tracing::warn!(
                    node = lease.node(),
                    "promoted: this node is the primary now, and hookinbox is receiving webhooks"
                );
                metrics.set_replication_role(crate::words::ReplicationRole::Primary);
                metrics.set_standby_lag(crate::metrics::StandbyLag::default());
                break;
            }
            Err(e) if tries < 50 => {
                tries += 1;
                tracing::info!(error = %crate::store::Report(&e), "not promoted yet; applying again");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => return Err(LeaseEnd::CannotFollow(FollowError::Apply(e))),
        }
    }
    keep_lease(lease, store, every, stop, metrics).await
}

#[cfg(test)]
mod tests {
    use super::{FollowError, until_followed};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn unanswered() -> FollowError {
        FollowError::Stream {
            stream: "INBOX".to_owned(),
            detail: "timed out".to_owned(),
        }
    }

    /// Regression (issue 44): any failure of a standby's following ended
    /// it as "replaced", and its data was set aside. A stream that does
    /// not answer is followed again (the wait growing to its cap) until it
    /// does; a stream of another inbox ends it at once.
    #[tokio::test(start_paused = true)]
    async fn a_stream_that_does_not_answer_is_followed_again_until_it_does() {
        let stop = tokio_util::sync::CancellationToken::new();
        let calls = AtomicUsize::new(0);
        let started = tokio::time::Instant::now();
        let metrics = crate::metrics::Metrics::new();
        let followed = until_followed("test", &stop, &metrics, || async {
            match calls.fetch_add(1, Ordering::Relaxed) {
                0..20 => Err(unanswered()),
                _ => Ok(7_u64),
            }
        })
        .await;
        assert!(matches!(followed, Some(Ok(7))), "{followed:?}");
        assert_eq!(calls.load(Ordering::Relaxed), 21);
        // 0.25 + 0.5 + 1 + 2 + 4, then 5 s for each of the other 15.
        assert_eq!(started.elapsed().as_millis(), 7_750 + 15 * 5_000);

        let calls = AtomicUsize::new(0);
        let foreign = until_followed("test", &stop, &metrics, || async {
            calls.fetch_add(1, Ordering::Relaxed);
            Err::<u64, _>(FollowError::Foreign {
                sequence: 1,
                id: "00000001-1".to_owned(),
                tag: 2,
            })
        })
        .await;
        assert!(matches!(foreign, Some(Err(FollowError::Foreign { .. }))));
        assert_eq!(calls.load(Ordering::Relaxed), 1, "not tried again");

        stop.cancel();
        let stopped = until_followed("test", &stop, &metrics, || async {
            Err::<u64, _>(unanswered())
        })
        .await;
        assert!(stopped.is_none());
    }
}
