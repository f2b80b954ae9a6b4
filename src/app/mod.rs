//! Wiring: from a validated config and a bound listener to a running inbox.
//!
//! The caller owns the world: it binds the socket (tests pass 127.0.0.1:0),
//! owns the shutdown signal and the clock, and can run two apps in one
//! process. Shutdown order: stop accepting → in-flight requests finish and get
//! their durable answer → the writer commits what is queued → the database
//! closes cleanly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::admin::{self, AdminContext, AdminState};
use crate::alert::{Alerter, Watched};
use crate::clock::Clock;
use crate::config::Config;
use crate::ingest::{self, IngestState};
use crate::listener::{self, ServeOptions};
use crate::metrics::Metrics;
use crate::schedule::{DeliveryHandle, Scheduler};
use crate::secrets::SecretBook;
use crate::store::{Store, StoreError, StoreOptions, WriterHandle};
use crate::supervise::{TaskEnd, TaskError, TaskName, Tasks, Tier};
use crate::sweep::Sweeper;
use crate::tls::{Tls, TlsError};
use crate::words::Listener;

mod parts;
mod reload;
mod replication;

use parts::{
    admin_max_connections, alert_settings, declare, declared_metrics, destinations,
    expected_within, serve_options,
};
pub use reload::{ReloadError, Reloader};
use replication::{LeaseTask, Replicated, ReplicationTasks, replication, replication_tasks};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A source's secret its kind cannot use.
    #[error("invalid source: {0}")]
    Source(#[from] crate::verify::UnusableSecret),
    #[error("invalid source: {0}")]
    Destination(#[from] crate::deliver::SetupError),
    #[error(transparent)]
    Alerts(#[from] crate::alert::ClientError),
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TelemetryError),
    #[error("reconcile: {0}")]
    Reconcile(#[from] crate::reconcile::ApiError),
    #[error(
        "the {task} task ended unexpectedly ({end}); hookinbox stopped so that it can be restarted"
    )]
    TaskEnded { task: TaskName, end: TaskEnd },
    #[error("ingest TLS: {0}")]
    Tls(#[from] TlsError),
    #[error(transparent)]
    AdminSocket(#[from] crate::listener::unix::SocketError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("replication: {0}")]
    Replication(String),
    /// Configured as the primary while another node holds the lease: the
    /// operator must make this node a standby (restarting changes nothing).
    #[error(
        "replication: node {holder:?} holds the lease, so this node ({node}) cannot start as the primary: set role = \"standby\" in [replication] to follow it (or stop it first)"
    )]
    NotPrimary { node: String, holder: String },
    /// Another live process goes by this node's name.
    #[error("replication: {0}")]
    NameTaken(String),
    /// A part of the app's own work (opening the store, the app's task,
    /// closing the writer) panicked or was cancelled: a bug, said so.
    #[error("hookinbox's {what} stopped unexpectedly: {cause}")]
    Panicked {
        what: &'static str,
        #[source]
        cause: tokio::task::JoinError,
    },
}

impl AppError {
    /// Whether only the operator can fix this (the config or another
    /// node), so that restarting would fail the same way: `serve` exits 2,
    /// which the packaged unit does not restart.
    pub fn needs_operator(&self) -> bool {
        matches!(
            self,
            AppError::NotPrimary { .. }
                | AppError::NameTaken(_)
                | AppError::Source(_)
                | AppError::Destination(crate::deliver::SetupError::CaFile { .. })
        )
    }

    /// The node that took the replication lease, when this app stopped
    /// because it was replaced as the primary.
    pub fn replaced_by(&self) -> Option<&str> {
        match self {
            AppError::TaskEnded {
                end: TaskEnd::Failed(TaskError::Replaced { holder }),
                ..
            } => Some(holder),
            _ => None,
        }
    }
}

/// How long a stopping node waits for its lease task to give the lease up:
/// a release is one key-value call (2 s to answer at most), tried once.
const LEASE_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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
    reloader: Reloader,
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
        shutdown: CancellationToken,
    ) -> Result<App, AppError> {
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        // A source that never sent is quiet since this moment.
        let started_ms = clock.now_ms();
        let metrics = declared_metrics(&config);
        let telemetry = crate::telemetry::Telemetry::start(config.telemetry.as_ref(), &metrics)?;
        // Before the store opens: a socket another process serves stops the
        // start at once.
        let admin_socket = config
            .server
            .admin_socket
            .as_ref()
            .map(crate::listener::unix::bind)
            .transpose()?;
        if let Some(socket) = &config.server.admin_socket {
            tracing::info!(path = %socket.path.display(), mode = %format!("{:04o}", socket.mode),
                group = socket.group.as_deref().unwrap_or("(the process's)"),
                "the admin API also listens on a Unix socket");
        }
        let replicated = replication(&config, listeners.admin.local_addr()?, &metrics).await?;
        let (shipper, standby_of) = match &replicated {
            None => (None, None),
            Some(Replicated::Primary { shipper, .. }) => (Some(shipper.clone()), None),
            Some(Replicated::Standby { shipper, tag, .. }) => (Some(shipper.clone()), Some(*tag)),
        };
        let (store, writer) =
            open_store(&config, &metrics, &telemetry, shipper, standby_of).await?;
        let replication = match (replicated, &config.replication) {
            (Some(replicated), Some(r)) => {
                Some(replication_tasks(replicated, r, &config.server.data_dir, &store).await?)
            }
            _ => None,
        };
        let destinations = destinations(&config)?;
        let paused_states = store.paused_states()?;
        let (drift, learner, learned) = crate::drift::watch(store.clone(), metrics.clone());
        let secrets = SecretBook::new(clock.clone());
        // After every read at startup: a failed probe makes the writer reopen
        // the file, and reads in that moment are refused.
        let probe_bytes = probe_largest_event(&store, &config).await;
        let (scheduler, delivery) = Scheduler::new(
            store.clone(),
            metrics.clone(),
            clock.clone(),
            destinations,
            &paused_states,
            telemetry.clone(),
        );
        let (sweeper, sweep) = Sweeper::new(
            store.clone(),
            metrics.clone(),
            config.retention.sweep_interval,
            clock.clone(),
        );
        let sweeper = sweeper.traced(telemetry.clone());
        let state = IngestState::new(
            &config,
            store.clone(),
            clock.clone(),
            metrics.clone(),
            replication.as_ref().map(|r| r.control.lease.primary()),
            crate::ingest::Watchers {
                drift,
                telemetry: telemetry.clone(),
                secrets: secrets.clone(),
            },
        )?;
        let (reconciler, reconcile) = crate::reconcile::Reconciler::new(
            &config,
            store.clone(),
            state.clone(),
            metrics.clone(),
            clock.clone(),
        )?;
        let Listeners { ingest, admin } = listeners;
        let ingest_addr = ingest.local_addr()?;
        let admin_addr = admin.local_addr()?;
        let watched = Watched {
            store: store.clone(),
            metrics: metrics.clone(),
            delivery: delivery.clone(),
            started_ms,
            admin: admin_addr,
            drift: learned.clone(),
            reconcile: reconcile.clone(),
            secrets: secrets.clone(),
        };
        let (alert_settings, settings) = tokio::sync::watch::channel(alert_settings(&config));
        let alerter = Alerter::new(watched, settings, clock.clone())?;
        // The tasks' stop tokens exist before the tasks: the admin's open
        // event streams end with the front, however the app ends.
        let tasks = Tasks::default();
        let front = tasks.stopping(Tier::Front);
        let (streams, hub) = crate::admin::Streams::new(store.clone());
        let tls = config.server.tls.clone().map(Tls::new).transpose()?;
        let access = Arc::new(arc_swap::ArcSwap::from_pointee(reload::access_of(&config)));
        let reloader = Reloader::new(
            config.clone(),
            reload::Live {
                ingest: state.clone(),
                delivery: delivery.clone(),
                access: access.clone(),
                alerts: alert_settings,
                secrets: secrets.clone(),
                metrics: metrics.clone(),
                store: store.clone(),
                tls: tls.clone(),
            },
        );
        let admin_state = AdminState::new(AdminContext {
            store: store.clone(),
            metrics: metrics.clone(),
            delivery: delivery.clone(),
            sweep,
            access,
            reload: {
                let reloader = reloader.clone();
                Arc::new(move || {
                    reloader.reload().map_err(|e| match e {
                        ReloadError::Invalid(why) => admin::ReloadRefused::Invalid(why),
                        e @ ReloadError::Store(_) => {
                            admin::ReloadRefused::Unavailable(e.to_string())
                        }
                    })
                })
            },
            clock,
            started_ms,
            shapes: learned,
            secrets: secrets.clone(),
            reconcile,
            replication: replication.as_ref().map(|r| r.control.clone()),
            stopping: front,
            streams,
            telemetry: telemetry.clone(),
        });
        log_receiving(&config, ingest_addr, admin_addr, store.is_standby());

        let (writer, writer_exited) = writer.with_exit_signal();
        let wiring = Wiring {
            ingest,
            ingest_state: state,
            admin,
            admin_state,
            admin_socket,
            serve_options: serve_options(&config),
            tls: tls.clone(),
            metrics: metrics.clone(),
            sweeper,
            prober: store.clone(),
            probe_bytes,
            alerter,
            scheduler,
            summary_interval: config.log.summary_interval,
            writer_exited,
            replication,
            hub,
            learner,
            keeper: crate::secrets::Keeper {
                book: secrets.clone(),
                store: store.clone(),
            },
            reconciler,
            telemetry,
        };
        let task = tokio::spawn(run(wiring, writer, shutdown, tasks));
        Ok(App {
            store,
            metrics,
            ingest_addr,
            admin_addr,
            delivery,
            tls,
            reloader,
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

    /// What the store shipped to the replication stream, readable once
    /// the app has stopped.
    pub fn shipping(&self) -> crate::store::Shipping {
        self.store.shipping()
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Pause and resume destinations.
    pub fn delivery(&self) -> &DeliveryHandle {
        &self.delivery
    }

    /// The ingest listener's TLS; `None` without TLS.
    pub fn tls(&self) -> Option<Tls> {
        self.tls.clone()
    }

    /// Reads the config again and takes what may change live (SIGHUP).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// Waits until the app has shut down and the database is closed.
    pub async fn wait(self) -> Result<(), AppError> {
        drop(self.store);
        self.task.await.map_err(|cause| AppError::Panicked {
            what: "main task",
            cause,
        })?
    }
}

/// Opens the store on a blocking thread (recovery may replay the log), each
/// commit counted in `metrics`. Starts the writer thread, which the returned
/// handle owns and `run` drains last.
async fn open_store(
    config: &Config,
    metrics: &Metrics,
    telemetry: &crate::telemetry::Telemetry,
    shipper: Option<Arc<dyn crate::store::Shipper>>,
    standby_of: Option<u32>,
) -> Result<(Store, WriterHandle), AppError> {
    let commits = metrics.clone();
    // Each checkpoint a span of its own ([telemetry]).
    let checkpoints = telemetry.clone();
    let options = StoreOptions {
        on_commit: Some(Arc::new(move |jobs, took| commits.commit(jobs, took))),
        on_checkpoint: telemetry.is_on().then(|| -> crate::store::CheckpointHook {
            Arc::new(move |c| checkpoints.checkpoint(c))
        }),
        shipper,
        standby: standby_of.is_some(),
        tag: standby_of,
        payload_ttl: config.retention.payload_ttl,
        dlq_ttl: config.retention.dlq_ttl,
        audit_ttl: config.retention.audit_ttl,
        ..StoreOptions::new(&config.server.data_dir, config.retention.dedupe_ttl)
    };
    Ok(tokio::task::spawn_blocking(move || Store::open(options))
        .await
        .map_err(|cause| AppError::Panicked {
            what: "store opening",
            cause,
        })??)
}

/// Probes the store once with an event of the largest `max_body`, and
/// returns that size for the prober task to keep using. Starts nothing.
async fn probe_largest_event(store: &Store, config: &Config) -> usize {
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
    // A standby writes only its primary's frames: its disk is proved by
    // them, and by the writes once it is promoted.
    if store.is_standby() {
        return probe_bytes;
    }
    if let Err(e) = store.probe(probe_bytes).await {
        tracing::error!(error = %e.report(), bytes = probe_bytes, "the store cannot write an event this large; not ready until it can");
    }
    probe_bytes
}

/// The one line that says the app is up, and where: receiving webhooks,
/// or (a replication standby) following its primary, which takes them.
fn log_receiving(config: &Config, ingest_addr: SocketAddr, admin_addr: SocketAddr, standby: bool) {
    let data_dir = config.server.data_dir.display();
    let tls = config.server.tls.is_some();
    let sources = config.sources.len();
    if standby {
        tracing::info!(listen = %ingest_addr, admin = %admin_addr, %data_dir, sources, tls,
            "hookinbox is following the primary as a standby: it answers webhooks 503 until it takes over");
    } else {
        tracing::info!(listen = %ingest_addr, admin = %admin_addr, %data_dir, sources, tls,
            "hookinbox is receiving webhooks");
    }
}

/// What each long-running task runs, built by `App::start` before any of
/// them starts; `run` moves each part into its task.
struct Wiring {
    ingest: TcpListener,
    ingest_state: IngestState,
    admin: TcpListener,
    admin_state: AdminState,
    /// `server.admin_socket`, bound: the admin API for apps on this VM.
    admin_socket: Option<crate::listener::unix::BoundSocket>,
    serve_options: ServeOptions,
    tls: Option<Tls>,
    metrics: Metrics,
    sweeper: Sweeper,
    prober: Store,
    probe_bytes: usize,
    alerter: Alerter,
    scheduler: Scheduler,
    summary_interval: Duration,
    /// Resolves when the writer thread has exited.
    writer_exited: oneshot::Receiver<()>,
    /// A replicating node's lease and snapshot tasks.
    replication: Option<ReplicationTasks>,
    /// The reader that feeds the admin API's event streams.
    hub: crate::admin::HubReader,
    /// The payload drift watch's learner.
    learner: crate::drift::Learner,
    /// Keeps the secrets' use.
    keeper: crate::secrets::Keeper,
    /// Every reconciled source's passes.
    reconciler: crate::reconcile::Reconciler,
    /// Flushed once every task has stopped: the last attempts' spans.
    telemetry: crate::telemetry::Telemetry,
}

/// The app's life after `start`: starts every task, runs until `shutdown`
/// or until one of them ends on its own, then stops them in order and
/// drains the writer. Owns the tasks and the writer; returns once the
/// database is closed.
async fn run(
    wiring: Wiring,
    writer: WriterHandle,
    shutdown: CancellationToken,
    mut tasks: Tasks,
) -> Result<(), AppError> {
    let lease = wiring.replication.as_ref().map(|r| r.control.lease.clone());
    let telemetry = wiring.telemetry.clone();
    spawn_tasks(&mut tasks, wiring);

    // Every task runs until shutdown. One that ends first (a panic,
    // or a loop that gave up) would leave a zombie subsystem behind a
    // live process: stop everything instead and exit non-zero, so the
    // service manager restarts hookinbox.
    let failure = tokio::select! {
        () = shutdown.cancelled() => {
            tracing::info!("shutdown requested");
            None
        }
        (task, end) = tasks.next_end() => {
            tracing::error!(%task, %end, "a background task ended unexpectedly; shutting down");
            Some(AppError::TaskEnded { task, end })
        }
    };
    let stopped = stop_in_order(tasks, failure, writer).await;
    // Only now, with the writer closed and its last frames shipped: a new
    // primary waits for this before it writes (`replicate::stand_by`), and
    // this node's next start need not wait for the name to lapse.
    if let Some(lease) = lease {
        lease.depart().await;
    }
    // Bounded by the exporter's timeout; a panic there loses only spans.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    stopped
}

/// Starts every long-running task under supervision, each in its tier
/// ([`Tier`]): the listeners, the event-stream reader, the sweeper, the
/// prober, the alerter and snapshots take new work (front); the scheduler
/// and the summary finish it (back); the lease is given up last; the
/// writer thread is watched.
fn spawn_tasks(tasks: &mut Tasks, wiring: Wiring) {
    let Wiring {
        ingest,
        ingest_state,
        admin,
        admin_state,
        admin_socket,
        serve_options,
        tls,
        metrics,
        sweeper,
        prober,
        probe_bytes,
        alerter,
        scheduler,
        summary_interval,
        writer_exited,
        replication,
        hub,
        learner,
        keeper,
        reconciler,
        telemetry: _,
    } = wiring;
    {
        let metrics = metrics.clone();
        tasks.spawn(TaskName::Ingest, Tier::Front, |stop| {
            listener::serve(
                Listener::Ingest,
                ingest,
                ingest::router(ingest_state),
                serve_options,
                metrics,
                tls,
                stop,
            )
        });
    }
    {
        let metrics = metrics.clone();
        let options = ServeOptions {
            max_connections: admin_max_connections(&admin_state, &serve_options),
            ..serve_options
        };
        if let Some(socket) = admin_socket {
            let (metrics, router) = (metrics.clone(), admin::router(admin_state.clone()));
            tasks.spawn(TaskName::AdminSocket, Tier::Front, move |stop| async move {
                let crate::listener::unix::BoundSocket { listener, file } = socket;
                let served = listener::serve(
                    Listener::AdminSocket,
                    listener,
                    router,
                    options,
                    metrics,
                    None,
                    stop,
                )
                .await;
                // Once no connection is served: a client then finds no file.
                drop(file);
                served
            });
        }
        tasks.spawn(TaskName::Admin, Tier::Front, |stop| {
            listener::serve(
                Listener::Admin,
                admin,
                admin::router(admin_state),
                options,
                metrics,
                None,
                stop,
            )
        });
    }
    tasks.spawn(TaskName::Streams, Tier::Front, |stop| async move {
        hub.run(stop).await;
        Ok::<(), TaskError>(())
    });
    // A standby's scheduler and sweeper start when it is promoted.
    let gate = |store: Store, stop: CancellationToken| async move {
        tokio::select! {
            () = store.promoted() => true,
            () = stop.cancelled() => false,
        }
    };
    let store = prober.clone();
    tasks.spawn(TaskName::Sweeper, Tier::Front, |stop| async move {
        if gate(store, stop.clone()).await {
            sweeper.run(stop).await
        } else {
            Ok(())
        }
    });
    // Stopped after ingest, so it keeps what the last events taught.
    let store = prober.clone();
    tasks.spawn(TaskName::Drift, Tier::Back, |stop| async move {
        if gate(store, stop.clone()).await {
            learner.run(stop).await
        } else {
            Ok(())
        }
    });
    // Stopped after ingest, so it keeps the last matches.
    let store = prober.clone();
    tasks.spawn(TaskName::Secrets, Tier::Back, |stop| async move {
        if gate(store, stop.clone()).await {
            keeper.run(stop).await
        } else {
            Ok(())
        }
    });
    // Passes run on the primary; a pass under way ends with the front (its
    // cursor is kept page by page).
    let store = prober.clone();
    tasks.spawn(TaskName::Reconcile, Tier::Front, |stop| async move {
        if gate(store, stop.clone()).await {
            reconciler.run(stop).await
        } else {
            Ok(())
        }
    });
    let store = prober.clone();
    tasks.spawn(TaskName::Prober, Tier::Front, |stop| {
        store.keep_probing(probe_bytes, stop)
    });
    tasks.spawn(TaskName::Alerter, Tier::Front, |stop| alerter.run(stop));
    let store = prober.clone();
    tasks.spawn(TaskName::Scheduler, Tier::Back, |stop| async move {
        if gate(store, stop.clone()).await {
            scheduler.run(stop).await
        } else {
            Ok(())
        }
    });
    // Stopped with the scheduler: its last line counts the attempts
    // that finished while ingest drained.
    {
        let metrics = metrics.clone();
        tasks.spawn(TaskName::Summary, Tier::Back, |stop| {
            crate::logs::summarize(metrics, summary_interval, stop)
        });
    }
    tasks.spawn(TaskName::Writer, Tier::Watch, |_| async move {
        let _ = writer_exited.await;
        Err::<(), _>(TaskError::WriterStopped)
    });
    if let Some(ReplicationTasks {
        lease: task,
        control: _,
        every,
        snapshots,
        snapshot_every,
        data_dir,
    }) = replication
    {
        // A primary's snapshots (a standby's once promoted).
        let (store, snapshot_metrics) = (prober.clone(), metrics.clone());
        tasks.spawn(TaskName::Snapshots, Tier::Front, |stop| async move {
            if gate(store.clone(), stop.clone()).await {
                crate::replicate::snapshot::keep_taking(
                    snapshots,
                    store,
                    data_dir,
                    snapshot_every,
                    stop,
                    snapshot_metrics,
                )
                .await;
            }
            Ok::<(), TaskError>(())
        });
        // Given up once the scheduler has recorded its attempts, when
        // nothing new is written.
        let store = prober;
        tasks.spawn(TaskName::Lease, Tier::Last, |stop| async move {
            match task {
                LeaseTask::Keep(lease) => {
                    crate::replicate::keep_lease(lease, store, every, stop, metrics).await
                }
                LeaseTask::StandBy(follower, tag, control) => {
                    crate::replicate::stand_by(store, *follower, tag, control, every, stop, metrics)
                        .await
                }
            }
            .map_err(TaskError::from)
        });
    }
}

/// Stops the tasks front first (no new work), then back (attempts in
/// flight recorded), then drains and closes the writer. Returns the
/// `failure` that began the stop, else a writer that had died on its own.
async fn stop_in_order(
    mut tasks: Tasks,
    failure: Option<AppError>,
    writer: WriterHandle,
) -> Result<(), AppError> {
    tasks.stop(Tier::Front).await;
    // Ingest has drained: no new events. Let attempts in flight be recorded.
    tasks.stop(Tier::Back).await;
    // The lease given up (a clean stop) before the writer closes: a standby
    // takes it at once instead of waiting for it to lapse. Bounded: with the
    // NATS servers gone, it lapses by itself.
    if tokio::time::timeout(LEASE_RELEASE_WAIT, tasks.stop(Tier::Last))
        .await
        .is_err()
    {
        tracing::warn!("the replication lease could not be given up in time; it lapses by itself");
    }
    let writer_died = failure.is_none() && !tasks.is_running(TaskName::Writer);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .map_err(|cause| AppError::Panicked {
            what: "store writer's shutdown",
            cause,
        })?;
    if let Some(failure) = failure {
        return Err(failure);
    }
    if writer_died {
        return Err(AppError::TaskEnded {
            task: TaskName::Writer,
            end: TaskEnd::Failed(TaskError::WriterStopped),
        });
    }
    tracing::info!("hookinbox stopped cleanly");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::AppError;
    use crate::config::SourceName;
    use crate::standard_webhooks::StandardKeyError;
    use crate::verify::UnusableSecret;

    /// A secret its source's kind cannot use fails the same way on every
    /// start: `serve` exits 2 (the operator's), not 1 (restarted). Its
    /// message names the source, as it did when it was a string.
    #[test]
    fn an_unusable_source_secret_is_the_operators_to_fix() {
        let e = AppError::from(UnusableSecret {
            name: SourceName::parse("shop").unwrap(),
            cause: StandardKeyError::NotBase64,
        });
        assert!(e.needs_operator());
        assert!(
            e.to_string()
                .starts_with("invalid source: source \"shop\": a Standard Webhooks secret"),
            "{e}"
        );
    }
}
