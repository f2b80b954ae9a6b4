//! A real destination for delivery tests: an HTTP server on 127.0.0.1:0 that
//! records every request and answers as the test says, switchable mid-test:
//! 200, any status (with an optional `Retry-After`), slow, or hanging — or
//! not listening at all yet (a reserved port that refuses connections).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

#[derive(Debug, Clone)]
pub enum Mode {
    Ok,
    Status(u16, &'static str),
    StatusRetryAfter(u16, &'static str),
    Slow(Duration),
    Hang,
    /// 500 for every `n`th request (the 1st, the n+1st, …), 200 otherwise.
    FailEvery(usize),
    /// 400 for a body containing the text, 200 otherwise.
    RejectBodyWith(&'static str),
}

#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub answered: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
            .to_str()
            .unwrap()
    }
}

#[derive(Default)]
struct Shared {
    mode: Mutex<Option<Mode>>,
    received: Mutex<Vec<Received>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    requests: AtomicUsize,
}

pub struct Destination {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _server: tokio::task::JoinHandle<()>,
}

/// A destination's port, bound but not listening: every connection to it is
/// refused (the kernel answers a SYN with RST, as for a stopped app) until
/// [`Reserved::start`] listens on it, and no other socket can take the port
/// in between.
pub struct Reserved {
    pub addr: SocketAddr,
    socket: tokio::net::TcpSocket,
}

impl Reserved {
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// The app comes up: the reserved port starts listening, answering as `mode`.
    pub fn start(self, mode: Mode) -> Destination {
        Destination::serve(self.socket.listen(1024).unwrap(), mode)
    }
}

impl Destination {
    pub async fn start(mode: Mode) -> Destination {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Destination::serve(listener, mode)
    }

    /// A port for a destination that is down (connection refused) until started.
    pub fn reserve() -> Reserved {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        Reserved {
            addr: socket.local_addr().unwrap(),
            socket,
        }
    }

    fn serve(listener: tokio::net::TcpListener, mode: Mode) -> Destination {
        let shared = Arc::new(Shared::default());
        *shared.mode.lock().unwrap() = Some(mode);
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(handle))
            .with_state(shared.clone());
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Destination {
            addr,
            shared,
            _server: server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn set(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = Some(mode);
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.shared.received.lock().unwrap().len()
    }

    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    /// The most requests that arrived within any span of `window` (a
    /// half-open interval `[t, t + window)`), from the arrival instants.
    pub fn max_in_window(&self, window: Duration) -> usize {
        let mut at: Vec<Instant> = self.received().iter().map(|r| r.at).collect();
        at.sort();
        let mut first = 0;
        let mut most = 0;
        for last in 0..at.len() {
            while at[last] - at[first] >= window {
                first += 1;
            }
            most = most.max(last - first + 1);
        }
        most
    }

    /// Waits until `n` requests arrived; panics after `limit`.
    pub async fn wait_for(&self, n: usize, limit: Duration) -> Vec<Received> {
        crate::support::eventually(
            &format!("{n} requests arrive"),
            limit,
            Duration::from_millis(10),
            async || match self.received() {
                got if got.len() >= n => Ok(got),
                got => Err(format!("{} requests", got.len())),
            },
        )
        .await
    }
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let at = Instant::now();
    let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    shared.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let mode = shared.mode.lock().unwrap().clone().unwrap();
    let n = shared.requests.fetch_add(1, Ordering::SeqCst);
    let mode = match mode {
        Mode::FailEvery(every) if n % every == 0 => Mode::Status(500, "flaky"),
        Mode::FailEvery(_) => Mode::Ok,
        Mode::RejectBodyWith(text) if body.windows(text.len()).any(|w| w == text.as_bytes()) => {
            Mode::Status(400, "rejected")
        }
        Mode::RejectBodyWith(_) => Mode::Ok,
        other => other,
    };
    let answered = match &mode {
        Mode::Ok | Mode::Slow(_) => 200,
        Mode::Status(code, _) | Mode::StatusRetryAfter(code, _) => *code,
        Mode::Hang => 0,
        Mode::FailEvery(_) | Mode::RejectBodyWith(_) => unreachable!("resolved above"),
    };
    // Recorded on arrival, so a hanging request is seen too.
    shared.received.lock().unwrap().push(Received {
        at,
        headers,
        body,
        answered,
    });
    let response = match mode {
        Mode::Ok => (StatusCode::OK, "ok").into_response(),
        Mode::Status(code, text) => (StatusCode::from_u16(code).unwrap(), text).into_response(),
        Mode::StatusRetryAfter(code, after) => (
            StatusCode::from_u16(code).unwrap(),
            [("retry-after", after)],
            "slow down",
        )
            .into_response(),
        Mode::Slow(d) => {
            tokio::time::sleep(d).await;
            (StatusCode::OK, "ok").into_response()
        }
        Mode::Hang => {
            // Longer than any test's delivery timeout; hookinbox gives up first.
            tokio::time::sleep(Duration::from_secs(60)).await;
            (StatusCode::OK, "too late").into_response()
        }
        Mode::FailEvery(_) | Mode::RejectBodyWith(_) => unreachable!("resolved above"),
    };
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    response
}
