//! The service manager's side of the contract (systemd `Type=notify`):
//! `READY=1` once the store is open and both listeners are bound, `WATCHDOG=1`
//! while the store writer and the delivery scheduler are alive, `STOPPING=1`
//! when a graceful stop begins.
//!
//! Owns the notify protocol (through the `sd-notify` crate) and the liveness
//! rule; refuses to judge readiness (that is `/readyz`: a full disk is not
//! ready, but alive — restarting would not free it). Without `NOTIFY_SOCKET`
//! (a terminal, tests, another supervisor) every call does nothing.

use std::time::Duration;

use sd_notify::NotifyState;

use crate::schedule::DeliveryHandle;
use crate::store::Store;

/// Tells the service manager that hookinbox serves.
pub fn ready() {
    notify(&[
        NotifyState::Ready,
        NotifyState::Status("receiving webhooks"),
    ]);
}

/// Tells the service manager that a reload has begun; [`ready`] says it
/// ended (with `Type=notify`, `systemctl status` shows "reloading" between;
/// `Type=notify-reload` would also send the SIGHUP).
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading];
    if let Ok(now) = NotifyState::monotonic_usec_now() {
        states.push(now);
    }
    notify(&states);
}

/// Tells the service manager that a graceful stop has begun.
pub fn stopping() {
    notify(&[
        NotifyState::Stopping,
        NotifyState::Status("stopping: finishing in-flight requests"),
    ]);
}

/// Whether stderr is a journald stream: systemd sets `JOURNAL_STREAM` to
/// the stream's `device:inode` for a service whose output goes to the
/// journal. Compared with stderr itself, as sd_journal_stream_fd(3) advises:
/// a child that inherited the variable but writes elsewhere is not one.
pub fn stderr_is_the_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr()) else {
        return false;
    };
    dev.parse::<u64>().ok() == Some(stat.st_dev) && ino.parse::<u64>().ok() == Some(stat.st_ino)
}

fn notify(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify the service manager");
    }
}

/// What must be alive for the process to be worth keeping: the writer (it
/// answers a commit) and the scheduler (its task runs). A wedged writer or a
/// dead scheduler leaves a process that answers HTTP but stores or delivers
/// nothing; the watchdog lets systemd restart it.
#[derive(Clone)]
pub struct Liveness {
    pub store: Store,
    pub delivery: DeliveryHandle,
}

/// Why the process is not alive: the part that is not.
#[derive(Debug, thiserror::Error)]
pub enum NotAlive {
    #[error("the delivery scheduler is not running")]
    Scheduler,
    #[error("the store writer does not answer: {0}")]
    Writer(#[source] crate::store::StoreError),
    #[error("the store writer did not answer within {0:?}")]
    WriterSlow(Duration),
}

impl Liveness {
    /// Alive, or why not, checked within `limit`.
    pub async fn check(&self, limit: Duration) -> Result<(), NotAlive> {
        if !self.delivery.is_alive() {
            return Err(NotAlive::Scheduler);
        }
        match tokio::time::timeout(limit, self.store.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(NotAlive::Writer(e)),
            Err(_) => Err(NotAlive::WriterSlow(limit)),
        }
    }
}

/// Feeds the watchdog every half of `WatchdogSec` while [`Liveness::check`]
/// passes; when it fails, stops feeding (and says why), so systemd kills and
/// restarts the process. Returns at once when no watchdog is configured,
/// and when `stopping` resolves (a stop is governed by `TimeoutStopSec`).
pub async fn watchdog(liveness: Liveness, stopping: tokio_util::sync::CancellationToken) {
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return;
    };
    let every = interval / 2;
    tracing::info!(interval = ?interval, "feeding the systemd watchdog");
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = stopping.cancelled() => return,
            _ = ticks.tick() => {}
        }
        match liveness.check(every).await {
            Ok(()) => notify(&[NotifyState::Watchdog]),
            Err(why) => {
                tracing::error!(reason = %why, "not alive: the systemd watchdog is not fed and will restart hookinbox");
            }
        }
    }
}
