//! Accepting HTTP connections: header read timeout, keep-alive, and graceful
//! shutdown (stop accepting, let in-flight requests finish, then return).
//!
//! Owns the socket loop for every listener; knows nothing of routes.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// A client that has not sent a full request head by then is disconnected.
    pub header_read_timeout: Duration,
    /// How long in-flight requests get after shutdown begins.
    pub shutdown_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits (up to
/// `shutdown_timeout`) for open connections to finish their requests.
pub async fn serve(
    name: &'static str,
    listener: TcpListener,
    router: axum::Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => {
                let (stream, _peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(listener = name, error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(router.clone());
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                let watched = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(e) = watched.await {
                        tracing::debug!(listener = name, error = %e, "connection ended with an error");
                    }
                });
            }
        }
    }
    drop(listener);
    tracing::info!(
        listener = name,
        "stopped accepting; waiting for in-flight requests"
    );
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(options.shutdown_timeout) => {
            tracing::warn!(listener = name, "in-flight requests still open after the shutdown timeout; closing them");
        }
    }
}
