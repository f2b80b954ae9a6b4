//! The app's long-running tasks: started by name and tier, watched, stopped
//! tier by tier.
//!
//! Every task is `run(…, stop: CancellationToken) -> Result<(), TaskError>`
//! and runs until its token is cancelled. Its [`Tier`] is named once, where
//! it is spawned: that decides which token it gets and when [`Tasks::stop`]
//! cancels it and waits for it. One that ends before (returns, fails or
//! panics) is reported by name with how it ended, so `App` can stop the rest
//! and exit non-zero for the service manager to restart it: a live process
//! with a dead subsystem is worse than a restart.

use std::collections::HashMap;
use std::future::Future;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::store::StoreError;

/// The app's long-running parts, named when one of them ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskName {
    Ingest,
    Admin,
    /// The admin API on `server.admin_socket`.
    AdminSocket,
    Scheduler,
    Sweeper,
    Alerter,
    Summary,
    Prober,
    Writer,
    /// A replicating primary's lease renewals.
    Lease,
    /// A replicating primary's snapshots.
    Snapshots,
    /// The reader that feeds the admin API's event streams.
    Streams,
    /// The payload drift watch's learner.
    Drift,
    /// Keeps the source secrets' use in the store.
    Secrets,
    /// Reconcile passes of the sources' provider APIs.
    Reconcile,
}

/// When a task is stopped: the tiers stop in this order, each once every
/// task of the tier before has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Takes new work (the listeners, the sweeper, the prober, the
    /// alerter, snapshots, the event streams): stopped first.
    Front,
    /// Finishes work in flight (the scheduler records its attempts; the
    /// summary counts them): stopped once the front has ended.
    Back,
    /// Gives up what the node holds for others (the replication lease):
    /// stopped once nothing more is written but the writer's last frames.
    Last,
    /// Watches something that ends by itself (the writer thread): never
    /// cancelled and never waited for; its end while the app runs is a
    /// failure like any other.
    Watch,
}

impl Tier {
    const STOPPED: [Tier; 3] = [Tier::Front, Tier::Back, Tier::Last];
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TaskName::Ingest => "ingest listener",
            TaskName::Admin => "admin listener",
            TaskName::AdminSocket => "admin socket listener",
            TaskName::Scheduler => "delivery scheduler",
            TaskName::Sweeper => "sweeper",
            TaskName::Drift => "drift",
            TaskName::Secrets => "secrets keeper",
            TaskName::Reconcile => "reconciler",
            TaskName::Alerter => "alerter",
            TaskName::Summary => "log summary",
            TaskName::Prober => "readiness prober",
            TaskName::Writer => "store writer",
            TaskName::Lease => "replication lease",
            TaskName::Snapshots => "replication snapshots",
            TaskName::Streams => "event-stream reader",
        })
    }
}

/// Why a task could not go on.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The writer thread ended while the app still needed it (a panic
    /// inside a commit, most likely; its message is in the log).
    #[error("the store writer thread ended")]
    WriterStopped,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another node holds the replication lease: this one was replaced and
    /// must take no more webhooks.
    #[error("node {holder:?} took over the replication lease: this node was replaced")]
    Replaced { holder: String },
    /// A standby that cannot follow its stream (not one that waits for it
    /// to answer): its data is kept, and the process exits.
    #[error(transparent)]
    Standby(Box<crate::replicate::LeaseEnd>),
}

impl From<crate::replicate::LeaseEnd> for TaskError {
    fn from(end: crate::replicate::LeaseEnd) -> TaskError {
        match end {
            crate::replicate::LeaseEnd::Replaced { holder } => TaskError::Replaced { holder },
            other => TaskError::Standby(Box::new(other)),
        }
    }
}

/// How a task ended.
#[derive(Debug)]
pub enum TaskEnd {
    /// `run` returned `Ok` before it was asked to stop.
    Returned,
    Failed(TaskError),
    Panicked(String),
    /// Aborted from outside (the runtime shutting down).
    Aborted,
}

impl std::fmt::Display for TaskEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskEnd::Returned => f.write_str("it returned"),
            TaskEnd::Failed(e) => write!(f, "failed: {e}"),
            TaskEnd::Panicked(message) => write!(f, "panicked: {message}"),
            TaskEnd::Aborted => f.write_str("aborted"),
        }
    }
}

/// The running tasks, each with its tier, the tiers' stop tokens, and the
/// ends not yet taken.
pub struct Tasks {
    running: HashMap<TaskName, Tier>,
    stops: HashMap<Tier, CancellationToken>,
    ended_tx: mpsc::UnboundedSender<(TaskName, TaskEnd)>,
    ended: mpsc::UnboundedReceiver<(TaskName, TaskEnd)>,
}

impl Default for Tasks {
    fn default() -> Tasks {
        let (ended_tx, ended) = mpsc::unbounded_channel();
        Tasks {
            running: HashMap::new(),
            stops: [Tier::Front, Tier::Back, Tier::Last, Tier::Watch]
                .into_iter()
                .map(|tier| (tier, CancellationToken::new()))
                .collect(),
            ended_tx,
            ended,
        }
    }
}

impl Tasks {
    /// The token `tier` is stopped with: for what the app builds before
    /// the tasks start and must end with them (the admin API's open
    /// streams end with the front).
    pub fn stopping(&self, tier: Tier) -> CancellationToken {
        self.stops[&tier].clone()
    }

    /// Runs `run` with `tier`'s token as its own tokio task, watched under
    /// `name`.
    pub fn spawn<E, F, Fut>(&mut self, name: TaskName, tier: Tier, run: F)
    where
        E: Into<TaskError>,
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        let run = run(self.stopping(tier));
        self.running.insert(name, tier);
        let handle = tokio::spawn(async move { run.await.map_err(Into::into) });
        let ended = self.ended_tx.clone();
        tokio::spawn(async move {
            let end = match handle.await {
                Ok(Ok(())) => TaskEnd::Returned,
                Ok(Err(e)) => TaskEnd::Failed(e),
                Err(e) if e.is_panic() => {
                    let panic = e.into_panic();
                    let text = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic without a message".to_owned());
                    TaskEnd::Panicked(text)
                }
                Err(_) => TaskEnd::Aborted,
            };
            let _ = ended.send((name, end));
        });
    }

    /// The next task to end, however it ended.
    pub async fn next_end(&mut self) -> (TaskName, TaskEnd) {
        let (name, end) = self
            .ended
            .recv()
            .await
            .expect("`Tasks` keeps a sender, so the channel stays open");
        self.running.remove(&name);
        (name, end)
    }

    /// Cancels `tier` and every tier before it, and waits until none of
    /// their tasks runs any more.
    pub async fn stop(&mut self, tier: Tier) {
        let upto = Tier::STOPPED
            .iter()
            .position(|t| *t == tier)
            .map_or(&[][..], |at| &Tier::STOPPED[..=at]);
        for t in upto {
            self.stops[t].cancel();
        }
        while self.running.values().any(|t| upto.contains(t)) {
            self.next_end().await;
        }
    }

    pub fn is_running(&self, name: TaskName) -> bool {
        self.running.contains_key(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task that panics, fails or returns before shutdown is reported by
    /// name and how it ended, so `App` stops everything and exits non-zero.
    #[tokio::test]
    async fn a_task_that_ends_early_is_reported_by_name_and_end() {
        let mut tasks = Tasks::default();
        tasks.spawn(TaskName::Scheduler, Tier::Back, |_| async {
            panic!("overflow when adding duration to instant");
            #[allow(unreachable_code)]
            Ok::<_, TaskError>(())
        });
        let (name, end) = tasks.next_end().await;
        assert_eq!(name, TaskName::Scheduler);
        assert_eq!(
            end.to_string(),
            "panicked: overflow when adding duration to instant"
        );

        tasks.spawn(TaskName::Writer, Tier::Watch, |_| async {
            Err(TaskError::WriterStopped)
        });
        let (name, end) = tasks.next_end().await;
        assert_eq!(name, TaskName::Writer);
        assert!(matches!(end, TaskEnd::Failed(TaskError::WriterStopped)));
        assert_eq!(end.to_string(), "failed: the store writer thread ended");
    }

    /// A tier stops in order: its own token and the tiers' before it are
    /// cancelled and every task of them awaited; later tiers and watches
    /// run on.
    #[tokio::test]
    async fn stop_cancels_and_awaits_a_tier_and_those_before_it() {
        let mut tasks = Tasks::default();
        let until_stopped = |stop: CancellationToken| async move {
            stop.cancelled().await;
            Ok::<_, TaskError>(())
        };
        tasks.spawn(TaskName::Ingest, Tier::Front, until_stopped);
        tasks.spawn(TaskName::Scheduler, Tier::Back, until_stopped);
        tasks.spawn(TaskName::Lease, Tier::Last, until_stopped);
        tasks.spawn(TaskName::Writer, Tier::Watch, |_| {
            std::future::pending::<Result<(), TaskError>>()
        });
        tasks.stop(Tier::Front).await;
        assert!(!tasks.is_running(TaskName::Ingest));
        assert!(tasks.is_running(TaskName::Scheduler));
        assert!(!tasks.stopping(Tier::Back).is_cancelled());
        tasks.stop(Tier::Last).await;
        assert!(!tasks.is_running(TaskName::Scheduler));
        assert!(!tasks.is_running(TaskName::Lease));
        assert!(tasks.is_running(TaskName::Writer));
        assert!(!tasks.stopping(Tier::Watch).is_cancelled());
    }
}
