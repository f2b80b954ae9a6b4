//! Accepting HTTP connections: a cap on open connections, header read
//! timeout, keep-alive, half-close, and graceful shutdown (stop accepting,
//! let in-flight requests finish, then return).
//!
//! Owns the socket loop for every listener; knows nothing of routes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Listener, Metrics};
use crate::supervise::TaskError;
use crate::tls::Tls;

/// hyper's read buffer per connection at most (its default is ≈ 400 KiB).
/// It holds a request head and the body bytes not yet handed on; 64 KiB
/// takes any provider's headers and bounds a connection's share of memory.
pub const MAX_READ_BUFFER: usize = 64 << 10;

#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// A client that has not sent a full request head by then is disconnected.
    pub header_read_timeout: Duration,
    /// How long in-flight requests get after shutdown begins.
    pub shutdown_timeout: Duration,
    /// Connections open at once at most. Past it the loop stops accepting:
    /// new connections wait in the kernel's backlog (or are refused when it
    /// is full) while open ones keep working.
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits (up to
/// `shutdown_timeout`) for open connections to finish their requests.
pub async fn serve(
    name: Listener,
    listener: TcpListener,
    router: axum::Router,
    options: ServeOptions,
    metrics: Metrics,
    tls: Option<Tls>,
    shutdown: CancellationToken,
) -> Result<(), TaskError> {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .max_buf_size(MAX_READ_BUFFER)
        // A client may send its request and shut down its write side while
        // it waits for the answer; without this hyper drops the connection
        // on that EOF and the stored event is never acknowledged.
        .half_close(true)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(options.max_connections));
    // Under a flood the limit is hit once per connection: say so once a minute.
    let mut warned_at: Option<Instant> = None;
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                metrics.connection_limit_wait(name);
                if warned_at.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                    warned_at = Some(Instant::now());
                    tracing::warn!(
                        listener = name.as_str(),
                        max_connections = options.max_connections,
                        "connection limit reached; new connections wait until one closes"
                    );
                }
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break,
                    slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
                }
            }
        };
        tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => {
                let (stream, _peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(listener = name.as_str(), error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let connection = Connection {
                    name,
                    builder: builder.clone(),
                    router: router.clone(),
                    watcher: graceful.watcher(),
                    metrics: metrics.clone(),
                    handshake_timeout: options.header_read_timeout,
                };
                let tls = tls.as_ref().map(Tls::acceptor);
                metrics.connection(name, 1);
                tokio::spawn(async move {
                    let metrics = connection.metrics.clone();
                    match tls {
                        None => connection.serve(stream).await,
                        Some(acceptor) => connection.serve_tls(acceptor, stream).await,
                    }
                    metrics.connection(name, -1);
                    drop(slot);
                });
            }
        }
    }
    drop(listener);
    tracing::info!(
        listener = name.as_str(),
        "stopped accepting; waiting for in-flight requests"
    );
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(options.shutdown_timeout) => {
            tracing::warn!(listener = name.as_str(), "in-flight requests still open after the shutdown timeout; closing them");
        }
    }
    Ok(())
}

/// One accepted connection, served on its own task.
struct Connection {
    name: Listener,
    builder: hyper::server::conn::http1::Builder,
    router: axum::Router,
    watcher: Watcher,
    metrics: Metrics,
    /// A TLS handshake not done by then is dropped, like a slow request head.
    handshake_timeout: Duration,
}

impl Connection {
    async fn serve<I>(self, io: I)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = TowerToHyperService::new(self.router);
        let connection = self.builder.serve_connection(TokioIo::new(io), service);
        if let Err(e) = self.watcher.watch(connection).await {
            tracing::debug!(listener = self.name.as_str(), error = %e, "connection ended with an error");
        }
    }

    async fn serve_tls(self, acceptor: tokio_rustls::TlsAcceptor, tcp: tokio::net::TcpStream) {
        match tokio::time::timeout(self.handshake_timeout, acceptor.accept(tcp)).await {
            Ok(Ok(stream)) => self.serve(stream).await,
            Ok(Err(e)) => {
                self.metrics.tls_handshake_failed(self.name);
                tracing::debug!(listener = self.name.as_str(), error = %e, "TLS handshake failed");
            }
            Err(_) => {
                self.metrics.tls_handshake_failed(self.name);
                tracing::debug!(listener = self.name.as_str(), "TLS handshake timed out");
            }
        }
    }
}
