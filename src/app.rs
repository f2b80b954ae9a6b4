//! Wiring: from a validated config and a bound listener to a running inbox.
//!
//! The caller owns the world: it binds the socket (tests pass 127.0.0.1:0),
//! owns the shutdown signal and the clock, and can run two apps in one
//! process. Shutdown order: stop accepting → in-flight requests finish and get
//! their durable answer → the writer commits what is queued → the database
//! closes cleanly.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use std::collections::HashSet;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, AdminState};
use crate::alert::Alerter;
use crate::clock::Clock;
use crate::config::Config;
use crate::deliver::Destination;
use crate::ingest::{self, IngestState};
use crate::listener::{self, ServeOptions};
use crate::metrics::Listener;
use crate::metrics::Metrics;
use crate::schedule::{DeliveryHandle, Scheduler};
use crate::store::{Store, StoreError, StoreOptions};
use crate::sweep::Sweeper;
use crate::tls::{Tls, TlsError};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid source: {0}")]
    Source(String),
    #[error(
        "the {task} task ended unexpectedly ({reason}); hookinbox stopped so that it can be restarted"
    )]
    TaskEnded { task: TaskName, reason: String },
    #[error("ingest TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The admin listener's connection cap: a handful of operators, scrapers
/// and the dashboard; an ingest flood never takes these slots.
const ADMIN_MAX_CONNECTIONS: usize = 64;

/// The app's long-running parts, named when one of them ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskName {
    Ingest,
    Admin,
    Scheduler,
    Sweeper,
    Alerter,
    Prober,
    Writer,
}

impl std::fmt::Display for TaskName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TaskName::Ingest => "ingest listener",
            TaskName::Admin => "admin listener",
            TaskName::Scheduler => "delivery scheduler",
            TaskName::Sweeper => "sweeper",
            TaskName::Alerter => "alerter",
            TaskName::Prober => "readiness prober",
            TaskName::Writer => "store writer",
        })
    }
}

type BoxFuture = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs `run` as its own task and reports on `ended` when it ends: how
/// (returned, or the panic's message).
fn watch(name: TaskName, run: BoxFuture, ended: mpsc::UnboundedSender<(TaskName, String)>) {
    let handle = tokio::spawn(run);
    tokio::spawn(async move {
        let why = match handle.await {
            Ok(()) => "it returned".to_owned(),
            Err(e) if e.is_panic() => {
                let panic = e.into_panic();
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                format!("panicked: {text}")
            }
            Err(e) => format!("cancelled: {e}"),
        };
        let _ = ended.send((name, why));
    });
}

/// Waits until none of `names` is in `running`, taking ends off `ended`.
async fn wait_for_end(
    ended: &mut mpsc::UnboundedReceiver<(TaskName, String)>,
    running: &mut HashSet<TaskName>,
    names: &[TaskName],
) {
    while names.iter().any(|n| running.contains(n)) {
        match ended.recv().await {
            Some((name, _)) => {
                running.remove(&name);
            }
            None => return,
        }
    }
}

/// The sockets the app serves on; the caller binds them (tests use port 0).
pub struct Listeners {
    pub ingest: TcpListener,
    pub admin: TcpListener,
}

pub struct App {
    store: Store,
    metrics: Metrics,
    ingest_addr: SocketAddr,
    admin_addr: SocketAddr,
    delivery: DeliveryHandle,
    tls: Option<Tls>,
    task: tokio::task::JoinHandle<Result<(), AppError>>,
}

impl App {
    /// Opens the store and starts serving until `shutdown` resolves. The
    /// config's secrets are resolved (`Config::resolve`): the caller shows
    /// the ones generated on this start.
    pub async fn start(
        config: Config,
        listeners: Listeners,
        clock: Clock,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<App, AppError> {
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        let metrics = Metrics::new();
        let commits = metrics.clone();
        let options = StoreOptions {
            on_commit: Some(Arc::new(move |jobs, took| commits.commit(jobs, took))),
            payload_ttl: config.retention.payload_ttl,
            dlq_ttl: config.retention.dlq_ttl,
            ..StoreOptions::new(&config.server.data_dir, config.retention.dedupe_ttl)
        };
        let (store, writer) = tokio::task::spawn_blocking(move || Store::open(options))
            .await
            .map_err(|e| AppError::Io(std::io::Error::other(e)))??;
        let destinations = config
            .sources
            .iter()
            .filter_map(|s| {
                let dl = s.delivery.clone()?;
                Some(Destination::new(s.name.clone(), dl).map_err(AppError::Source))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let paused_states = store.paused_states()?;
        // After every read at startup: a failed probe makes the writer reopen
        // the file, and reads in that moment are refused.
        // Ready means an event of the largest size a source accepts can be
        // stored: prove it now, not at the first provider's request. On a
        // full disk the app still serves (health, admin, 503 to providers)
        // and the prober below finds out when there is room again.
        let probe_bytes = config
            .sources
            .iter()
            .map(|s| s.max_body)
            .max()
            .unwrap_or(64 << 10);
        if let Err(e) = store.probe(probe_bytes).await {
            tracing::error!(error = %e.report(), bytes = probe_bytes, "the store cannot write an event this large; not ready until it can");
        }
        let (scheduler, delivery) =
            Scheduler::new(store.clone(), metrics.clone(), destinations, &paused_states);
        let (sweeper, sweep) = Sweeper::new(
            store.clone(),
            metrics.clone(),
            config.retention.sweep_interval,
        );
        let state = IngestState::new(&config, store.clone(), clock, metrics.clone())
            .map_err(AppError::Source)?;
        let alerter = match config.alerts.clone() {
            Some(alerts) => Some(
                Alerter::new(
                    alerts,
                    store.clone(),
                    metrics.clone(),
                    delivery.clone(),
                    config.sources.iter().map(|s| s.name.to_string()).collect(),
                )
                .map_err(AppError::Source)?,
            ),
            None => None,
        };
        let Listeners { ingest, admin } = listeners;
        let ingest_addr = ingest.local_addr()?;
        let admin_addr = admin.local_addr()?;
        let admin_state = AdminState {
            store: store.clone(),
            metrics: metrics.clone(),
            delivery: delivery.clone(),
            sweep,
            sources: config.sources.iter().map(|s| s.name.to_string()).collect(),
            token: config.admin.token.clone(),
        };
        let serve_options = ServeOptions {
            header_read_timeout: config.server.header_read_timeout,
            shutdown_timeout: config.server.shutdown_timeout,
            max_connections: config.server.max_connections,
        };
        tracing::info!(
            listen = %ingest_addr,
            admin = %admin_addr,
            data_dir = %config.server.data_dir.display(),
            sources = config.sources.len(),
            tls = config.server.tls.is_some(),
            "hookinbox is receiving webhooks"
        );

        let tls = config.server.tls.clone().map(Tls::new).transpose()?;
        let tls_for_ingest = tls.clone();
        let (writer, writer_exited) = writer.with_exit_signal();
        let prober_store = store.clone();
        let metrics_for_tasks = metrics.clone();
        let task = tokio::spawn(async move {
            let metrics = metrics_for_tasks;
            // `front` stops everything that takes new work; the scheduler
            // stops after ingest has drained, so attempts in flight are recorded.
            let front = CancellationToken::new();
            let back = CancellationToken::new();
            let (ended_tx, mut ended) = mpsc::unbounded_channel();
            let mut running = HashSet::new();
            let mut start = |name: TaskName, run: BoxFuture| {
                running.insert(name);
                watch(name, run, ended_tx.clone());
            };
            start(
                TaskName::Ingest,
                Box::pin(listener::serve(
                    Listener::Ingest,
                    ingest,
                    ingest::router(state),
                    serve_options,
                    metrics.clone(),
                    tls_for_ingest,
                    front.clone().cancelled_owned(),
                )),
            );
            start(
                TaskName::Admin,
                Box::pin(listener::serve(
                    Listener::Admin,
                    admin,
                    admin::router(admin_state),
                    ServeOptions {
                        max_connections: ADMIN_MAX_CONNECTIONS,
                        ..serve_options
                    },
                    metrics,
                    None,
                    front.clone().cancelled_owned(),
                )),
            );
            start(
                TaskName::Sweeper,
                Box::pin(sweeper.run(front.clone().cancelled_owned())),
            );
            start(
                TaskName::Prober,
                Box::pin(prober_store.keep_probing(probe_bytes, front.clone().cancelled_owned())),
            );
            if let Some(alerter) = alerter {
                start(
                    TaskName::Alerter,
                    Box::pin(alerter.run(front.clone().cancelled_owned())),
                );
            }
            start(
                TaskName::Scheduler,
                Box::pin(scheduler.run(back.clone().cancelled_owned())),
            );
            start(
                TaskName::Writer,
                Box::pin(async move {
                    let _ = writer_exited.await;
                }),
            );

            // Every task runs until shutdown. One that ends first (a panic,
            // or a loop that gave up) would leave a zombie subsystem behind a
            // live process: stop everything instead and exit non-zero, so the
            // service manager restarts hookinbox.
            let failure = tokio::select! {
                () = shutdown => {
                    tracing::info!("shutdown requested");
                    None
                }
                Some((name, why)) = ended.recv() => {
                    running.remove(&name);
                    tracing::error!(task = %name, reason = %why, "a background task ended unexpectedly; shutting down");
                    Some((name, why))
                }
            };
            front.cancel();
            let front_tasks = [
                TaskName::Ingest,
                TaskName::Admin,
                TaskName::Sweeper,
                TaskName::Prober,
                TaskName::Alerter,
            ];
            wait_for_end(&mut ended, &mut running, &front_tasks).await;
            // Ingest has drained: no new events. Let attempts in flight be recorded.
            back.cancel();
            wait_for_end(&mut ended, &mut running, &[TaskName::Scheduler]).await;
            let writer_died = !running.contains(&TaskName::Writer)
                && failure
                    .as_ref()
                    .is_none_or(|(name, _)| *name != TaskName::Writer);
            tokio::task::spawn_blocking(move || writer.shutdown())
                .await
                .map_err(|e| AppError::Io(std::io::Error::other(e)))?;
            if let Some((task, reason)) = failure {
                return Err(AppError::TaskEnded { task, reason });
            }
            if writer_died {
                return Err(AppError::TaskEnded {
                    task: TaskName::Writer,
                    reason: "the store writer stopped during shutdown".into(),
                });
            }
            tracing::info!("hookinbox stopped cleanly");
            Ok(())
        });
        Ok(App {
            store,
            metrics,
            ingest_addr,
            admin_addr,
            delivery,
            tls,
            task,
        })
    }

    pub fn ingest_addr(&self) -> SocketAddr {
        self.ingest_addr
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Pause and resume destinations.
    pub fn delivery(&self) -> &DeliveryHandle {
        &self.delivery
    }

    /// The ingest listener's TLS, to reload on SIGHUP; `None` without TLS.
    pub fn tls(&self) -> Option<Tls> {
        self.tls.clone()
    }

    /// Waits until the app has shut down and the database is closed.
    pub async fn wait(self) -> Result<(), AppError> {
        drop(self.store);
        self.task
            .await
            .map_err(|e| AppError::Io(std::io::Error::other(e)))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task that panics or returns before shutdown is reported by name
    /// and reason, so `App::start`'s task stops everything and exits non-zero.
    #[tokio::test]
    async fn a_task_that_ends_early_is_reported_with_its_reason() {
        let (tx, mut ended) = mpsc::unbounded_channel();
        watch(
            TaskName::Scheduler,
            Box::pin(async { panic!("overflow when adding duration to instant") }),
            tx.clone(),
        );
        watch(TaskName::Sweeper, Box::pin(async {}), tx);
        let mut got = [ended.recv().await.unwrap(), ended.recv().await.unwrap()];
        got.sort_by_key(|(name, _)| *name == TaskName::Sweeper);
        assert_eq!(got[0].0, TaskName::Scheduler);
        assert_eq!(
            got[0].1,
            "panicked: overflow when adding duration to instant"
        );
        assert_eq!(got[1], (TaskName::Sweeper, "it returned".to_owned()));

        let mut running: HashSet<TaskName> = [TaskName::Ingest].into();
        let (tx, mut ended) = mpsc::unbounded_channel();
        watch(TaskName::Ingest, Box::pin(async {}), tx);
        wait_for_end(&mut ended, &mut running, &[TaskName::Ingest]).await;
        assert!(running.is_empty());
    }
}
