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

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::admin::{self, AdminState};
use crate::alert::Alerter;
use crate::clock::Clock;
use crate::config::{Config, Kind, Secret, SourceName, load_or_generate_secret};
use crate::deliver::Destination;
use crate::ingest::{self, IngestState};
use crate::listener::{self, ServeOptions};
use crate::metrics::Metrics;
use crate::schedule::{DeliveryHandle, Scheduler};
use crate::store::{Store, StoreError, StoreOptions};
use crate::sweep::Sweeper;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("source {source_name:?}: cannot keep its generated secret: {cause}")]
    Secret {
        source_name: String,
        cause: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid source: {0}")]
    Source(String),
    #[error("the store writer stopped unexpectedly; nothing can be stored")]
    WriterDied,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The sockets the app serves on; the caller binds them (tests use port 0).
pub struct Listeners {
    pub ingest: TcpListener,
    pub admin: TcpListener,
}

/// A secret generated on this start, to show the operator once.
#[derive(Debug, Clone)]
pub struct GeneratedSecret {
    pub source: SourceName,
    pub purpose: SecretPurpose,
    pub secret: Secret,
    pub path: std::path::PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretPurpose {
    /// The provider signs with it; ingest verifies.
    Ingest,
    /// hookinbox signs deliveries with it; the app verifies.
    Destination,
    /// The admin API's bearer token.
    Admin,
}

pub struct App {
    store: Store,
    metrics: Metrics,
    ingest_addr: SocketAddr,
    admin_addr: SocketAddr,
    generated: Vec<GeneratedSecret>,
    delivery: DeliveryHandle,
    task: tokio::task::JoinHandle<Result<(), AppError>>,
}

impl App {
    /// Opens the store and starts serving until `shutdown` resolves.
    pub async fn start(
        mut config: Config,
        listeners: Listeners,
        clock: Clock,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<App, AppError> {
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        let generated = ensure_generated_secrets(&mut config)?;
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
            tracing::error!(error = %e, bytes = probe_bytes, "the store cannot write an event this large; not ready until it can");
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
            token: config
                .admin
                .token
                .clone()
                .expect("ensure_generated_secrets sets the admin token"),
        };
        let serve_options = ServeOptions {
            header_read_timeout: config.server.header_read_timeout,
            shutdown_timeout: config.server.shutdown_timeout,
        };
        tracing::info!(
            listen = %ingest_addr,
            admin = %admin_addr,
            data_dir = %config.server.data_dir.display(),
            sources = config.sources.len(),
            "hookinbox is receiving webhooks"
        );

        let (writer, writer_exited) = writer.with_exit_signal();
        let prober_store = store.clone();
        let task = tokio::spawn(async move {
            let (died_tx, died_rx) = oneshot::channel::<()>();
            let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
            tokio::spawn(async move {
                tokio::select! {
                    () = shutdown => tracing::info!("shutdown requested"),
                    _ = writer_exited => {
                        let _ = died_tx.send(());
                    }
                }
                let _ = stop_tx.send(true);
            });
            let stop_signal = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
                let _ = rx.wait_for(|stop| *stop).await;
            };
            let sweeper = tokio::spawn(sweeper.run(stop_signal(stop_rx.clone())));
            let prober =
                tokio::spawn(prober_store.keep_probing(probe_bytes, stop_signal(stop_rx.clone())));
            let alerter = alerter.map(|a| tokio::spawn(a.run(stop_signal(stop_rx.clone()))));
            let admin_server = tokio::spawn(listener::serve(
                "admin",
                admin,
                admin::router(admin_state),
                serve_options,
                stop_signal(stop_rx.clone()),
            ));
            let (stop_scheduler, stopped) = oneshot::channel::<()>();
            let scheduler = tokio::spawn(scheduler.run(async move {
                let _ = stopped.await;
            }));
            listener::serve(
                "ingest",
                ingest,
                ingest::router(state),
                serve_options,
                stop_signal(stop_rx),
            )
            .await;
            let _ = admin_server.await;
            let _ = sweeper.await;
            let _ = prober.await;
            if let Some(alerter) = alerter {
                let _ = alerter.await;
            }
            // Ingest has drained: no new events. Let attempts in flight be recorded.
            let _ = stop_scheduler.send(());
            if let Err(e) = scheduler.await {
                tracing::error!(error = %e, "the scheduler ended abnormally");
            }
            tokio::task::spawn_blocking(move || writer.shutdown())
                .await
                .map_err(|e| AppError::Io(std::io::Error::other(e)))?;
            if died_rx.await.is_ok() {
                return Err(AppError::WriterDied);
            }
            tracing::info!("hookinbox stopped cleanly");
            Ok(())
        });
        Ok(App {
            store,
            metrics,
            ingest_addr,
            admin_addr,
            generated,
            delivery,
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

    /// Secrets generated on this start (first start only).
    pub fn generated_secrets(&self) -> &[GeneratedSecret] {
        &self.generated
    }

    /// Waits until the app has shut down and the database is closed.
    pub async fn wait(self) -> Result<(), AppError> {
        drop(self.store);
        self.task
            .await
            .map_err(|e| AppError::Io(std::io::Error::other(e)))?
    }
}

fn ensure_generated_secrets(config: &mut Config) -> Result<Vec<GeneratedSecret>, AppError> {
    let mut created = Vec::new();
    let data_dir = config.server.data_dir.clone();
    let mut generate = |source: &SourceName, purpose: SecretPurpose, kind: Kind| {
        let name = match purpose {
            SecretPurpose::Ingest => source.to_string(),
            SecretPurpose::Destination => format!("{source}.destination"),
            // Source names cannot contain '.', so no source's file clashes.
            SecretPurpose::Admin => "admin.token".to_owned(),
        };
        let (secret, fresh) =
            load_or_generate_secret(&data_dir, &name, kind).map_err(|cause| AppError::Secret {
                source_name: source.to_string(),
                cause,
            })?;
        if fresh {
            created.push(GeneratedSecret {
                source: source.clone(),
                purpose,
                secret: secret.clone(),
                path: data_dir.join("secrets").join(format!("{name}.secret")),
            });
        }
        Ok::<_, AppError>(secret)
    };
    if config.admin.token.is_none() {
        let admin = SourceName::parse("admin").expect("a valid name");
        config.admin.token = Some(generate(&admin, SecretPurpose::Admin, Kind::Hmac)?);
    }
    for source in config.sources.iter_mut() {
        if source.generate_secret {
            source.secrets = vec![generate(&source.name, SecretPurpose::Ingest, source.kind)?];
        }
        if let Some(dl) = &mut source.delivery
            && dl.secret.is_none()
        {
            dl.secret = Some(generate(
                &source.name,
                SecretPurpose::Destination,
                Kind::Standard,
            )?);
        }
    }
    Ok(created)
}
