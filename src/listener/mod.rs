//! Accepting HTTP connections: a cap on open connections (past it, the
//! connection that has waited longest for a request head makes room),
//! header read timeout, keep-alive, half-close, and graceful shutdown (stop
//! accepting, let in-flight requests finish, then return).
//!
//! Owns the socket loop for every listener; knows nothing of routes.

mod room;
pub mod unix;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::supervise::TaskError;
use crate::tls::Tls;
use crate::words::Listener;
use room::{Busy, Conn, Room};

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
    /// Connections open at once at most. Past it a new connection closes
    /// the open one that has waited longest for a request head (a slow
    /// head, or an idle keep-alive connection); when every open one has a
    /// request in progress, it waits until one ends.
    pub max_connections: usize,
}

/// A socket that accepts connections: TCP (`listen`, `admin_listen`) or a
/// Unix domain socket (`admin_socket`).
pub trait Accept: Send + 'static {
    type Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static;
    fn next_stream(&self) -> impl Future<Output = std::io::Result<Self::Io>> + Send;
}

impl Accept for TcpListener {
    type Io = tokio::net::TcpStream;
    async fn next_stream(&self) -> std::io::Result<Self::Io> {
        let (stream, _peer) = self.accept().await?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

impl Accept for UnixListener {
    type Io = tokio::net::UnixStream;
    async fn next_stream(&self) -> std::io::Result<Self::Io> {
        Ok(self.accept().await?.0)
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits (up to
/// `shutdown_timeout`) for open connections to finish their requests.
pub async fn serve<L: Accept>(
    name: Listener,
    listener: L,
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
    let room = Arc::new(Room::default());
    let mut full = Full::new(name, options.max_connections, metrics.clone());
    loop {
        let stream = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            accepted = listener.next_stream() => match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(listener = name.as_str(), error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => match full.make_room(&slots, &room, &shutdown).await {
                Some(slot) => slot,
                None => break,
            },
        };
        let conn = room.admit();
        let connection = Connection {
            name,
            builder: builder.clone(),
            router: router.clone(),
            watcher: graceful.watcher(),
            metrics: metrics.clone(),
            handshake_timeout: options.header_read_timeout,
            conn: conn.clone(),
            room: room.clone(),
        };
        let tls = tls.as_ref().map(Tls::acceptor);
        metrics.connection(name, 1);
        tokio::spawn(async move {
            let metrics = connection.metrics.clone();
            tokio::select! {
                () = connection.serve_stream(stream, tls) => {}
                () = conn.evicted() => {
                    tracing::debug!(listener = name.as_str(), "closed a connection waiting for a request head to admit a new one");
                }
            }
            conn.close();
            metrics.connection(name, -1);
            drop(slot);
        });
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

/// The listener at its cap: room for a new connection, once it is accepted.
struct Full {
    name: Listener,
    max_connections: usize,
    metrics: Metrics,
    /// Under a flood the cap is met once per connection: say so once a minute.
    warned_at: Option<Instant>,
}

/// How long an eviction may take to free its slot before another is made:
/// the evicted task only has to be polled once, so this is only reached
/// when the runtime is starved.
const EVICTION_GRACE: Duration = Duration::from_secs(1);

/// How often a connection waiting while every open one is busy looks again
/// for one that has become idle.
const BUSY_RECHECK: Duration = Duration::from_millis(50);

impl Full {
    fn new(name: Listener, max_connections: usize, metrics: Metrics) -> Full {
        Full {
            name,
            max_connections,
            metrics,
            warned_at: None,
        }
    }

    /// A slot for the connection just accepted: the longest-waiting open
    /// connection is closed for it, or, while every open one has a request
    /// in progress, it waits for one to end. `None` once shutdown begins.
    async fn make_room(
        &mut self,
        slots: &Arc<Semaphore>,
        room: &Room,
        shutdown: &CancellationToken,
    ) -> Option<OwnedSemaphorePermit> {
        self.warn();
        let mut counted_wait = false;
        loop {
            let grace = if room.evict_oldest() {
                self.metrics.connection_evicted(self.name);
                EVICTION_GRACE
            } else {
                if !counted_wait {
                    counted_wait = true;
                    self.metrics.connection_limit_wait(self.name);
                }
                BUSY_RECHECK
            };
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                slot = slots.clone().acquire_owned() => return Some(slot.expect("the semaphore is never closed")),
                () = tokio::time::sleep(grace) => {}
            }
        }
    }

    fn warn(&mut self) {
        if self
            .warned_at
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(60))
        {
            self.warned_at = Some(Instant::now());
            tracing::warn!(
                listener = self.name.as_str(),
                max_connections = self.max_connections,
                "connection limit reached; a new connection closes the one that has waited longest for a request head, or waits while every open one has a request in progress"
            );
        }
    }
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
    conn: Arc<Conn>,
    room: Arc<Room>,
}

impl Connection {
    async fn serve_stream<I>(self, stream: I, tls: Option<tokio_rustls::TlsAcceptor>)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        match tls {
            None => self.serve(stream).await,
            Some(acceptor) => self.serve_tls(acceptor, stream).await,
        }
    }

    async fn serve<I>(self, io: I)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = Tracked {
            inner: TowerToHyperService::new(self.router),
            conn: self.conn,
            room: self.room,
        };
        let connection = self.builder.serve_connection(TokioIo::new(io), service);
        if let Err(e) = self.watcher.watch(connection).await {
            tracing::debug!(listener = self.name.as_str(), error = %e, "connection ended with an error");
        }
    }

    async fn serve_tls<I>(self, acceptor: tokio_rustls::TlsAcceptor, tcp: I)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
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

/// The router, telling the room when each request begins and when its
/// answer is done, so that only a connection between requests is evicted.
struct Tracked {
    inner: TowerToHyperService<axum::Router>,
    conn: Arc<Conn>,
    room: Arc<Room>,
}

type TrackedFuture =
    Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Tracked {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = TrackedFuture;

    fn call(&self, request: Request<Incoming>) -> TrackedFuture {
        let Some(busy) = self.room.begin(&self.conn) else {
            // Evicted an instant before this head arrived: its task is
            // dropping the connection, so nothing is worked on.
            let mut closing = Response::new(TrackedBody {
                inner: Body::empty(),
                _busy: None,
            });
            *closing.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            closing
                .headers_mut()
                .insert(header::CONNECTION, http::HeaderValue::from_static("close"));
            return Box::pin(std::future::ready(Ok(closing)));
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await?;
            Ok(answer.map(|inner| TrackedBody {
                inner,
                _busy: Some(busy),
            }))
        })
    }
}

/// An answer's body; the request stays in progress until it is dropped
/// (hyper drops it once written, or when the connection ends).
struct TrackedBody {
    inner: Body,
    _busy: Option<Busy>,
}

impl hyper::body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
