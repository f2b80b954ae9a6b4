//! The app's long-running tasks: started by name, watched, stopped in order.
//!
//! Every task is `run(…, shutdown: CancellationToken) -> Result<(), TaskError>`
//! and runs until its token is cancelled. One that ends before (returns,
//! fails or panics) is reported by name with how it ended, so `App` can stop
//! the rest and exit non-zero for the service manager to restart it: a live
//! process with a dead subsystem is worse than a restart.

use std::collections::HashSet;
use std::future::Future;

use tokio::sync::mpsc;

use crate::store::StoreError;

/// The app's long-running parts, named when one of them ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskName {
    Ingest,
    Admin,
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
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TaskName::Ingest => "ingest listener",
            TaskName::Admin => "admin listener",
            TaskName::Scheduler => "delivery scheduler",
            TaskName::Sweeper => "sweeper",
            TaskName::Alerter => "alerter",
            TaskName::Summary => "log summary",
            TaskName::Prober => "readiness prober",
            TaskName::Writer => "store writer",
            TaskName::Lease => "replication lease",
            TaskName::Snapshots => "replication snapshots",
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

/// The running tasks and the ends not yet taken.
pub struct Tasks {
    running: HashSet<TaskName>,
    ended_tx: mpsc::UnboundedSender<(TaskName, TaskEnd)>,
    ended: mpsc::UnboundedReceiver<(TaskName, TaskEnd)>,
}

impl Default for Tasks {
    fn default() -> Tasks {
        let (ended_tx, ended) = mpsc::unbounded_channel();
        Tasks {
            running: HashSet::new(),
            ended_tx,
            ended,
        }
    }
}

impl Tasks {
    /// Runs `run` as its own tokio task, watched under `name`.
    pub fn spawn<E: Into<TaskError>>(
        &mut self,
        name: TaskName,
        run: impl Future<Output = Result<(), E>> + Send + 'static,
    ) {
        self.running.insert(name);
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

    /// Waits until none of `names` runs any more.
    pub async fn wait_for(&mut self, names: &[TaskName]) {
        while names.iter().any(|n| self.running.contains(n)) {
            self.next_end().await;
        }
    }

    pub fn is_running(&self, name: TaskName) -> bool {
        self.running.contains(&name)
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
        tasks.spawn(TaskName::Scheduler, async {
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

        tasks.spawn(TaskName::Writer, async { Err(TaskError::WriterStopped) });
        let (name, end) = tasks.next_end().await;
        assert_eq!(name, TaskName::Writer);
        assert!(matches!(end, TaskEnd::Failed(TaskError::WriterStopped)));
        assert_eq!(end.to_string(), "failed: the store writer thread ended");

        tasks.spawn(TaskName::Sweeper, async { Ok::<_, TaskError>(()) });
        tasks.spawn(
            TaskName::Prober,
            std::future::pending::<Result<(), TaskError>>(),
        );
        tasks.wait_for(&[TaskName::Sweeper]).await;
        assert!(!tasks.is_running(TaskName::Sweeper));
        assert!(tasks.is_running(TaskName::Prober));
    }
}
