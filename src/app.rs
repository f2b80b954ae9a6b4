//! Wiring: from a validated config and a bound listener to a running inbox.
//!
//! The caller owns the world: it binds the socket (tests pass 127.0.0.1:0),
//! owns the shutdown signal and the clock, and can run two apps in one
//! process. Shutdown order: stop accepting → in-flight requests finish and get
//! their durable answer → the writer commits what is queued → the database
//! closes cleanly.

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::clock::Clock;
use crate::config::{Config, Secret, SourceName, load_or_generate_secret};
use crate::ingest::{self, IngestState};
use crate::listener::{self, ServeOptions};
use crate::metrics::Metrics;
use crate::store::{Store, StoreError, StoreOptions};

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

/// A secret generated on this start, to show the operator once.
#[derive(Debug, Clone)]
pub struct GeneratedSecret {
    pub source: SourceName,
    pub secret: Secret,
    pub path: std::path::PathBuf,
}

pub struct App {
    store: Store,
    metrics: Metrics,
    ingest_addr: SocketAddr,
    generated: Vec<GeneratedSecret>,
    task: tokio::task::JoinHandle<Result<(), AppError>>,
}

impl App {
    /// Opens the store and starts serving `ingest` until `shutdown` resolves.
    pub async fn start(
        mut config: Config,
        ingest: TcpListener,
        clock: Clock,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<App, AppError> {
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        let generated = ensure_generated_secrets(&mut config)?;
        let options = StoreOptions::new(&config.server.data_dir, config.retention.dedupe_ttl);
        let (store, writer) = tokio::task::spawn_blocking(move || Store::open(options))
            .await
            .map_err(|e| AppError::Io(std::io::Error::other(e)))??;
        let metrics = Metrics::new();
        let state = IngestState::new(&config, store.clone(), clock, metrics.clone())
            .map_err(AppError::Source)?;
        let ingest_addr = ingest.local_addr()?;
        let serve_options = ServeOptions {
            header_read_timeout: config.server.header_read_timeout,
            shutdown_timeout: config.server.shutdown_timeout,
        };
        tracing::info!(
            listen = %ingest_addr,
            data_dir = %config.server.data_dir.display(),
            sources = config.sources.len(),
            "hookinbox is receiving webhooks"
        );

        let (writer, writer_exited) = writer.with_exit_signal();
        let task = tokio::spawn(async move {
            let (died_tx, died_rx) = oneshot::channel::<()>();
            let stop = async move {
                tokio::select! {
                    () = shutdown => tracing::info!("shutdown requested"),
                    _ = writer_exited => {
                        let _ = died_tx.send(());
                    }
                }
            };
            listener::serve("ingest", ingest, ingest::router(state), serve_options, stop).await;
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
            generated,
            task,
        })
    }

    pub fn ingest_addr(&self) -> SocketAddr {
        self.ingest_addr
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
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
    for source in config.sources.iter_mut().filter(|s| s.generate_secret) {
        let (secret, fresh) =
            load_or_generate_secret(&config.server.data_dir, source.name.as_str(), source.kind)
                .map_err(|cause| AppError::Secret {
                    source_name: source.name.to_string(),
                    cause,
                })?;
        if fresh {
            created.push(GeneratedSecret {
                source: source.name.clone(),
                secret: secret.clone(),
                path: config
                    .server
                    .data_dir
                    .join("secrets")
                    .join(format!("{}.secret", source.name)),
            });
        }
        source.secrets = vec![secret];
    }
    Ok(created)
}
