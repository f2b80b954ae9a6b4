//! What `[replication]` makes of this node: at start, the primary that
//! ships its log and holds the lease, or the standby that follows the
//! stream (its data dir restored from a snapshot when it must be); and the
//! tasks that keep them going.

use std::sync::Arc;
use std::time::Duration;

use super::AppError;
use crate::config::Config;
use crate::store::Store;

/// What `[replication]` makes of this node: how it ships its log, and
/// the task that keeps (or waits for) the primary's lease.
pub(super) enum Replicated {
    Primary {
        shipper: Arc<dyn crate::store::Shipper>,
        lease: Arc<crate::replicate::Lease>,
        snapshots: crate::replicate::Snapshots,
    },
    Standby {
        shipper: Arc<dyn crate::store::Shipper>,
        lease: Arc<crate::replicate::Lease>,
        follower: Box<crate::replicate::Follower>,
        tag: u32,
        snapshots: crate::replicate::Snapshots,
        /// The snapshot its data dir was restored from at this start.
        restored: Option<crate::replicate::Snapshot>,
    },
}

/// A replicating node's tasks, for `run`.
pub(super) struct ReplicationTasks {
    pub(super) lease: LeaseTask,
    /// What the admin API sees of it.
    pub(super) control: crate::replicate::Control,
    /// How often the lease is renewed or looked at.
    pub(super) every: Duration,
    pub(super) snapshots: crate::replicate::Snapshots,
    pub(super) snapshot_every: Duration,
    pub(super) data_dir: std::path::PathBuf,
}

/// What `replicated` runs once the store is open; a standby restored from
/// a snapshot records where the snapshot is in the stream first (it
/// follows from there).
pub(super) async fn replication_tasks(
    replicated: Replicated,
    config: &crate::config::ReplicationConfig,
    data_dir: &std::path::Path,
    store: &Store,
) -> Result<ReplicationTasks, AppError> {
    let (lease, control, snapshots) = match replicated {
        Replicated::Primary {
            lease, snapshots, ..
        } => {
            let control = crate::replicate::Control::new(lease.clone(), config.stream.clone());
            (LeaseTask::Keep(lease), control, snapshots)
        }
        Replicated::Standby {
            lease,
            follower,
            tag,
            snapshots,
            restored,
            ..
        } => {
            if let Some(snapshot) = restored {
                store.apply_frames(Vec::new(), snapshot.stream_seq).await?;
            }
            let control = crate::replicate::Control::new(lease, config.stream.clone());
            (
                LeaseTask::StandBy(follower, tag, control.clone()),
                control,
                snapshots,
            )
        }
    };
    Ok(ReplicationTasks {
        lease,
        control,
        every: config.lease / 4,
        snapshots,
        snapshot_every: config.snapshot_interval,
        data_dir: data_dir.to_owned(),
    })
}

/// The lease task's work, for `run`.
pub(super) enum LeaseTask {
    Keep(Arc<crate::replicate::Lease>),
    StandBy(
        Box<crate::replicate::Follower>,
        u32,
        crate::replicate::Control,
    ),
}

/// With `[replication]`: the publisher that ships the log (a standby's
/// for when it is promoted) and the lease; a primary takes it at once
/// (refused if another node holds it), a standby its follower and the
/// tag of the stream's database.
pub(super) async fn replication(
    config: &Config,
    admin: std::net::SocketAddr,
    metrics: &crate::metrics::Metrics,
) -> Result<Option<Replicated>, AppError> {
    use crate::replicate::{Follower, Lease, Publisher, Snapshots, StreamSettings};
    use crate::words::ReplicationRole;
    let Some(r) = &config.replication else {
        return Ok(None);
    };
    let settings = StreamSettings {
        urls: r
            .urls
            .iter()
            .map(|u| u.as_str().trim_end_matches('/').to_owned())
            .collect::<Vec<_>>()
            .join(","),
        stream: r.stream.clone(),
        replicas: r.replicas,
        creds_file: r.creds_file.clone(),
        token: r.token.as_ref().map(|t| t.value.clone()),
        ca: r.ca_file.clone(),
        ack_timeout: Duration::from_secs(2),
        budget: r.lease,
        max_part: None,
        compression: r.compression,
    };
    let failed = |e: &dyn std::fmt::Display| AppError::Replication(e.to_string());
    let lease = Arc::new(
        Lease::connect(&settings, &r.node, r.lease, Some(admin))
            .await
            .map_err(|e| failed(&e))?,
    );
    lease.announce().await.map_err(|e| match e {
        crate::replicate::LeaseError::NameTaken { .. } => AppError::NameTaken(e.to_string()),
        e => failed(&e),
    })?;
    if r.role == ReplicationRole::Standby {
        let follower = Follower::connect(&settings).await.map_err(|e| failed(&e))?;
        // Tried for a budget: right after the NATS servers start, the
        // stream answers only once it has elected its leader.
        let started = std::time::Instant::now();
        let first = loop {
            match follower.first().await {
                Ok(first) => break first,
                Err(e) if started.elapsed() >= r.lease => return Err(failed(&e)),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        };
        let Some((tag, first)) = first else {
            return Err(failed(
                &"the stream holds no frame yet: start the primary first",
            ));
        };
        let snapshots = Snapshots::connect(&settings)
            .await
            .map_err(|e| failed(&e))?;
        let restored = standby_data(&config.server.data_dir, first, &snapshots).await?;
        let publisher = Publisher::connect(&settings)
            .await
            .map_err(|e| failed(&e))?
            .counted(metrics.clone());
        metrics.replicating(ReplicationRole::Standby, r.snapshot_interval);
        // Who the primary is, for the refusals until the first renewal tick.
        let primary = lease.held_by().await.ok().flatten();
        tracing::info!(node = %r.node, stream = %r.stream, primary = primary.as_ref().map(|p| p.holder.node.as_str()), "following the stream as a standby");
        return Ok(Some(Replicated::Standby {
            shipper: Arc::new(publisher),
            lease,
            follower: Box::new(follower),
            tag,
            snapshots,
            restored,
        }));
    }
    take_lease(&lease, r).await?;
    let publisher = Publisher::connect(&settings)
        .await
        .map_err(|e| failed(&e))?
        .counted(metrics.clone());
    metrics.replicating(ReplicationRole::Primary, r.snapshot_interval);
    let snapshots = Snapshots::connect(&settings)
        .await
        .map_err(|e| failed(&e))?;
    tracing::info!(node = %r.node, stream = %r.stream, "replicating the log as the primary");
    Ok(Some(Replicated::Primary {
        shipper: Arc::new(publisher),
        lease,
        snapshots,
    }))
}

/// A standby's data dir, ready to follow the stream whose first frame is
/// `first`: kept if the stream still holds every frame after its last;
/// else (set aside, if it was behind) restored from the newest snapshot.
/// Returns the snapshot restored, if one was.
async fn standby_data(
    data_dir: &std::path::Path,
    first: u64,
    snapshots: &crate::replicate::Snapshots,
) -> Result<Option<crate::replicate::Snapshot>, AppError> {
    use crate::store::standby_dir;
    let failed = |e: &dyn std::fmt::Display| AppError::Replication(e.to_string());
    if let Some(last) = standby_dir::last_frame(data_dir)? {
        if last + 1 >= first {
            return Ok(None);
        }
        let aside = standby_dir::set_aside(data_dir)?;
        tracing::warn!(
            last_frame = last,
            stream_first_frame = first,
            set_aside = %aside.display(),
            "this standby's data ends before the stream begins (its frames were forgotten after a snapshot): starting over from the newest snapshot"
        );
    }
    let restored = snapshots
        .restore_newest(data_dir)
        .await
        .map_err(|e| failed(&crate::store::Report(&e)))?;
    match &restored {
        Some(snapshot) if snapshot.lsn + 1 < first => Err(failed(&format!(
            "the newest snapshot ends at frame {}, the stream begins at frame {first}: the frames between are lost",
            snapshot.lsn
        ))),
        None if first > 1 => Err(failed(&format!(
            "the stream begins at frame {first} and no snapshot holds the frames before it"
        ))),
        _ => Ok(restored),
    }
}

/// A primary's start: takes the lease. Held under this node's own name by
/// another process, it is this node's own before a crash (a live one was
/// refused by [`crate::replicate::Lease::announce`]): waited for, at most a
/// lease and a margin, as it lapses. Held by another node: `NotPrimary`.
async fn take_lease(
    lease: &crate::replicate::Lease,
    r: &crate::config::ReplicationConfig,
) -> Result<(), AppError> {
    use crate::replicate::LeaseError;
    let deadline = std::time::Instant::now() + r.lease + Duration::from_secs(2);
    loop {
        match lease.acquire().await {
            Ok(()) => return Ok(()),
            // The refusal names the holder it read: no second read.
            Err(LeaseError::Held { holder }) => {
                if holder.node != r.node || std::time::Instant::now() >= deadline {
                    return Err(AppError::NotPrimary {
                        node: r.node.clone(),
                        holder: holder.node,
                    });
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(AppError::Replication(e.to_string())),
        }
    }
}
