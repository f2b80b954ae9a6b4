//! What replication records: this node's role, the lease's holder as last
//! read, a standby's lag behind the stream, the primary's last current
//! snapshot, and the frames or follows that failed. Set by the lease task
//! at each of its ticks (a few times a lease), not at scrape time: each
//! value costs a round trip to NATS.

use super::Metrics;
use crate::metrics::labels::NodeLabel;
use crate::words::ReplicationRole;

/// How far a standby is behind the stream at one look.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StandbyLag {
    /// Messages of the stream not applied yet.
    pub frames: u64,
    /// The age of the oldest of them; zero when none.
    pub age: std::time::Duration,
}

fn unix_seconds(at: std::time::SystemTime) -> i64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Metrics {
    /// With `[replication]`: its snapshot interval, and the role at start.
    pub fn replicating(&self, role: ReplicationRole, snapshot_interval: std::time::Duration) {
        self.set_replication_role(role);
        self.inner
            .replication_snapshot_interval
            .set(i64::try_from(snapshot_interval.as_secs()).unwrap_or(i64::MAX));
    }

    pub fn set_replication_role(&self, role: ReplicationRole) {
        self.inner.replication_role.set(match role {
            ReplicationRole::Standby => 1,
            ReplicationRole::Primary => 2,
        });
    }

    /// The lease as last read: its holder's node and last renewal, or none.
    pub fn set_lease(&self, holder: Option<(&str, std::time::SystemTime)>) {
        let family = &self.inner.replication_lease_holder;
        let label = holder.map(|(node, _)| NodeLabel {
            node: node.to_owned(),
        });
        // One series at most: the holder's.
        if label
            .as_ref()
            .is_none_or(|l| family.get(l).is_none_or(|g| g.get() != 1))
        {
            family.clear();
        }
        if let Some(label) = label {
            family.get_or_create(&label).set(1);
        }
        self.inner
            .replication_lease_renewed
            .set(holder.map_or(0, |(_, at)| unix_seconds(at)));
    }

    pub fn set_standby_lag(&self, lag: StandbyLag) {
        self.inner
            .replication_frames_behind
            .set(i64::try_from(lag.frames).unwrap_or(i64::MAX));
        self.inner
            .replication_lag_seconds
            .set(i64::try_from(lag.age.as_secs()).unwrap_or(i64::MAX));
    }

    /// The primary's snapshot is current as of `at`: one was taken, or
    /// there was nothing new to take.
    pub fn snapshot_current(&self, at: std::time::SystemTime) {
        self.inner.replication_snapshot_ok.set(unix_seconds(at));
    }

    pub fn publish_failed(&self) {
        self.inner.replication_publish_failures.inc();
    }

    /// A group of frames went to the stream: `plain` bytes as the log holds
    /// them, `sent` as published.
    pub fn frames_shipped(&self, plain: u64, sent: u64) {
        self.inner.replication_frame_bytes.inc_by(plain);
        self.inner.replication_sent_bytes.inc_by(sent);
    }

    pub fn follow_failed(&self) {
        self.inner.replication_follow_failures.inc();
    }
}
