//! Ingest: `POST /in/{source}` on the public listener (and `GET`, for
//! Meta's subscription check).
//!
//! Owns the HTTP contract with providers: body limits and read timeout, the
//! status code and JSON of every answer, and the one log line and counter per
//! decision. It refuses to judge a request itself (that is `verify`) or to
//! touch the database (that is `store`): it answers 2xx only with the store's
//! durable answer in hand.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use serde_json::json;

use crate::clock::Clock;
use crate::config::{Config, DeliveryFilter, SourceName, TypePattern};
use crate::metrics::Metrics;
use crate::secrets::SecretBook;
use crate::store::{Ingested, Initial, PayloadMatch, Route, Store, StoreError};
use crate::verify::{
    self, Handshake, HandshakeReply, Rejection, UnusableSecret, Verified, Verifier,
};
use crate::words::{RejectReason, UNKNOWN_SOURCE};

/// Seconds a provider is told to wait after a 503. Short: a full disk or a
/// reopening database is either fixed soon or needs a person, and providers
/// back off on their own schedule anyway.
const RETRY_AFTER_SECS: &str = "5";

struct Source {
    name: SourceName,
    verifier: Verifier,
    /// Each secret's use and match counter, in the verifier's order.
    secrets: Vec<(
        Arc<crate::secrets::SecretUse>,
        prometheus_client::metrics::counter::Counter,
    )>,
    max_body: usize,
    /// Where its events may go; none: they are held.
    destinations: Vec<Destination>,
}

/// What ingest needs of one destination to route an event to it.
struct Destination {
    /// Its queue's name.
    route: String,
    /// The JSON pointer of the ordering key, for a destination that takes
    /// events in order.
    ordering_key: Option<String>,
    /// Which events it takes; `None`: all.
    filter: Option<Filter>,
}

impl Source {
    /// How a verified event starts: held (no destination), filtered (no
    /// destination takes it), or due at each destination that takes it.
    fn route(&self, event_type: Option<&str>, body: &[u8]) -> Initial {
        if self.destinations.is_empty() {
            return Initial::Hold;
        }
        let routes: Vec<Route> = self
            .destinations
            .iter()
            .filter(|d| {
                d.filter
                    .as_ref()
                    .is_none_or(|f| f.accepts(event_type, body))
            })
            .map(|d| Route {
                destination: d.route.clone(),
                ordering_key: d
                    .ordering_key
                    .as_deref()
                    .and_then(|p| ordering_key(body, p)),
            })
            .collect();
        if routes.is_empty() {
            Initial::Filtered
        } else {
            Initial::Routes(routes)
        }
    }
}

/// A destination's filter, made once: its type patterns and its pointer
/// condition as the search's payload test.
struct Filter {
    types: Option<Vec<TypePattern>>,
    payload: Option<PayloadMatch>,
}

impl Filter {
    fn new(filter: &DeliveryFilter) -> Filter {
        Filter {
            types: filter.types.clone(),
            payload: filter.matching.clone().map(|pointer| PayloadMatch {
                text: None,
                pointer: Some(pointer),
                seen_as: None,
            }),
        }
    }

    /// Whether it takes an event of `event_type` with `body`: its type
    /// matches a pattern (when patterns are set) and the body holds the
    /// value at the pointer (when one is set). Runs after verification,
    /// like all parsing.
    fn accepts(&self, event_type: Option<&str>, body: &[u8]) -> bool {
        if let Some(patterns) = &self.types {
            let Some(t) = event_type else {
                return false;
            };
            if !patterns.iter().any(|p| p.matches(t)) {
                return false;
            }
        }
        self.payload
            .as_ref()
            .is_none_or(|m| m.matcher().matches(body))
    }
}

/// Longer keys are cut: a key names a line, it does not need to be whole.
const MAX_ORDERING_KEY: usize = 256;

/// The ordering key at `pointer` in a JSON body: a string as it is, any other
/// value as its JSON text. `None` (the event is unordered) when the body is
/// not JSON or has nothing there. Runs after verification, like all parsing.
fn ordering_key(body: &[u8], pointer: &str) -> Option<String> {
    let found = crate::json_pointer::value_at(body, &crate::json_pointer::tokens(pointer));
    let mut key = match found.ok()?? {
        serde_json::Value::Null => return None,
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    };
    if key.len() > MAX_ORDERING_KEY {
        let mut end = MAX_ORDERING_KEY;
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        key.truncate(end);
    }
    Some(key)
}

#[derive(Clone)]
pub struct IngestState {
    /// Swapped whole by a reload ([`IngestState::reconfigure`]): a request
    /// sees the sources before or after, never a mix.
    sources: Arc<ArcSwap<HashMap<String, Arc<Source>>>>,
    store: Store,
    clock: Clock,
    metrics: Metrics,
    body_read_timeout: Duration,
    budget: BodyBudget,
    /// On a replication node: the primary as last seen in the lease, which
    /// a standby's refusals name.
    primary: Option<crate::replicate::PrimaryWatch>,
    /// Each new event is offered to the payload drift watch (it never waits).
    drift: crate::drift::Watch,
    /// Each stored event's receipt becomes a span (`[telemetry]`).
    telemetry: crate::telemetry::Telemetry,
    /// Which secret verified what: a reload puts its sources' in force.
    secrets: SecretBook,
}

/// What watches ingest's events: the payload drift watch, traces, and the
/// secrets' use.
pub struct Watchers {
    pub drift: crate::drift::Watch,
    pub telemetry: crate::telemetry::Telemetry,
    pub secrets: SecretBook,
}

/// How long a request waits for room in the body budget before it gets 503.
/// Short: the provider retries later, and a queue of waiting requests would
/// be memory again (each holds a connection, which `max_connections` bounds).
const BUDGET_WAIT: Duration = Duration::from_secs(1);

/// A body of at most this many bytes is an ordinary webhook (nearly every
/// provider's event is a few KiB): it may use the reserve that large bodies
/// cannot take.
const SMALL_BODY: usize = 64 << 10;

/// The bytes of request bodies held in memory at once
/// (`server.max_buffered_body`), plus a reserve of a quarter of that for
/// bodies of at most [`SMALL_BODY`]. A request reserves what it may buffer
/// (its Content-Length, or its source's `max_body` without one) before
/// reading a byte, and holds it until it is answered — through
/// verification and the store's queue, where the body still lives.
///
/// The reserve is why clients that declare large bodies and stall cannot
/// refuse a provider's ordinary event: they exhaust the shared budget only.
#[derive(Clone)]
struct BodyBudget {
    /// Permits are KiB, so a reservation fits `acquire_many`'s u32.
    shared: Arc<tokio::sync::Semaphore>,
    /// Only for bodies of at most [`SMALL_BODY`].
    small: Arc<tokio::sync::Semaphore>,
}

impl BodyBudget {
    fn new(bytes: usize) -> BodyBudget {
        let kib = bytes.div_ceil(1024);
        BodyBudget {
            shared: Arc::new(tokio::sync::Semaphore::new(kib)),
            small: Arc::new(tokio::sync::Semaphore::new(kib.div_ceil(4))),
        }
    }

    /// Room for `bytes`, or `None` if none frees up within [`BUDGET_WAIT`].
    /// A small body takes the reserve first and the shared budget when the
    /// reserve is full; a large one only the shared budget.
    async fn reserve(&self, bytes: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let kib = u32::try_from(bytes.div_ceil(1024).max(1)).ok()?;
        let shared = self.shared.clone().acquire_many_owned(kib);
        if bytes > SMALL_BODY {
            return tokio::time::timeout(BUDGET_WAIT, shared).await.ok()?.ok();
        }
        if let Ok(permit) = self.small.clone().try_acquire_many_owned(kib) {
            return Some(permit);
        }
        let small = self.small.clone().acquire_many_owned(kib);
        let either = async {
            tokio::select! {
                permit = small => permit,
                permit = shared => permit,
            }
        };
        tokio::time::timeout(BUDGET_WAIT, either).await.ok()?.ok()
    }
}

impl IngestState {
    /// Builds every source's verifier; fails on a secret the kind cannot use.
    pub fn new(
        config: &Config,
        store: Store,
        clock: Clock,
        metrics: Metrics,
        primary: Option<crate::replicate::PrimaryWatch>,
        watchers: Watchers,
    ) -> Result<IngestState, UnusableSecret> {
        let Watchers {
            drift,
            telemetry,
            secrets,
        } = watchers;
        let sources = Sources::of(config, &secrets, &metrics)?;
        secrets.take(sources.secrets);
        Ok(IngestState {
            sources: Arc::new(ArcSwap::from_pointee(sources.table)),
            store,
            clock,
            metrics,
            body_read_timeout: config.server.body_read_timeout,
            budget: BodyBudget::new(config.server.max_buffered_body),
            primary,
            drift,
            telemetry,
            secrets,
        })
    }

    /// Takes `sources` from the next request on: their secrets, routes,
    /// filters and limits, sources added and removed. A request already
    /// verified finishes with the sources it started with.
    pub fn reconfigure(&self, sources: Sources) {
        self.sources.store(Arc::new(sources.table));
        self.secrets.take(sources.secrets);
    }
}

/// Every source of a config as ingest holds it, built
/// ([`Sources::of`]) before a reload takes anything.
pub struct Sources {
    table: HashMap<String, Arc<Source>>,
    secrets: Vec<crate::secrets::Entry>,
}

impl Sources {
    /// Fails on a secret a source's kind cannot use.
    pub fn of(
        config: &Config,
        book: &SecretBook,
        metrics: &Metrics,
    ) -> Result<Sources, UnusableSecret> {
        let secrets = book.handles(config);
        let mut table = HashMap::new();
        for s in &config.sources {
            let verifier = Verifier::new(s)?;
            let destinations = s
                .destinations
                .iter()
                .map(|d| Destination {
                    route: d.route.clone(),
                    ordering_key: d.ordering.as_ref().map(|o| o.pointer.clone()),
                    filter: d.filter.as_ref().map(Filter::new),
                })
                .collect();
            let used = secrets
                .iter()
                .filter(|e| e.source == s.name.as_str())
                .map(|e| {
                    let counter = metrics.signature_matches(&e.source, &e.name);
                    (e.used(), counter)
                })
                .collect();
            table.insert(
                s.name.as_str().to_owned(),
                Arc::new(Source {
                    name: s.name.clone(),
                    verifier,
                    secrets: used,
                    max_body: s.max_body,
                    destinations,
                }),
            );
        }
        Ok(Sources { table, secrets })
    }
}

impl IngestState {
    /// Stores an event, routed as its source's destinations take it, and
    /// counts it: received (offered to the drift watch) or a duplicate.
    async fn keep(
        &self,
        source: &Source,
        event: verify::VerifiedEvent,
        event_id: &str,
        started: Instant,
    ) -> Result<Ingested, StoreError> {
        let event_type = event.event_type().map(str::to_owned);
        let initial = source.route(event.event_type(), event.body());
        let filtered = initial == Initial::Filtered;
        let (body, at_ms) = (event.body().clone(), event.received_at_ms());
        let ingested = self.store.ingest(event, initial).await?;
        let ack = started.elapsed();
        let kind = event_type.as_deref().unwrap_or(crate::store::NO_TYPE);
        let (id, duplicate) = match &ingested {
            Ingested::New { id } => (id, false),
            Ingested::Duplicate { id } => (id, true),
        };
        if duplicate {
            self.metrics.duplicate(source.name.as_str(), kind, ack);
        } else {
            self.metrics.received(source.name.as_str(), kind, ack);
            if filtered {
                self.metrics.filtered(source.name.as_str());
            }
            self.drift
                .offer(source.name.as_str(), kind, &body, id, at_ms);
        }
        tracing::debug!(
            source = source.name.as_str(),
            event_id,
            event_type,
            id,
            duplicate,
            filtered,
            ack_ms = ack.as_secs_f64() * 1e3,
            trace_id = self.telemetry.trace_of(id).map(|t| t.trace_id),
            "stored"
        );
        Ok(ingested)
    }

    /// Where receipts are traced, for the reconcile passes' own spans.
    pub fn telemetry(&self) -> &crate::telemetry::Telemetry {
        &self.telemetry
    }

    /// Stores an event a reconcile pass fetched from its provider's API,
    /// as a received one is stored (routed, counted, deduped on its id).
    /// Whether it was new.
    pub async fn store_fetched(&self, event: verify::VerifiedEvent) -> Result<bool, StoreError> {
        let Some(source) = self.sources.load().get(event.source().as_str()).cloned() else {
            // The reconciler runs passes of configured sources only.
            return Ok(false);
        };
        let event_id = event.event_id().as_str().to_owned();
        let event_type = event.event_type().map(str::to_owned);
        let started = std::time::SystemTime::now();
        let ingested = self.keep(&source, event, &event_id, Instant::now()).await?;
        if let Ingested::New { id } = &ingested {
            // A fetched event's trace starts at the pass that found it.
            let stored = std::time::SystemTime::now();
            self.telemetry.received(crate::telemetry::Receipt {
                id,
                source: source.name.as_str(),
                event_id: &event_id,
                event_type: event_type.as_deref(),
                duplicate: false,
                fetched: true,
                headers: &http::HeaderMap::new(),
                started,
                verified: started,
                stored,
                answered: stored,
            });
        }
        Ok(matches!(ingested, Ingested::New { .. }))
    }

    /// The source a path names, and the rest of the path after it. The path
    /// is /in/{source} or /in/{source}/{*rest}: the router guarantees the prefix.
    fn source_of<'p>(&self, path: &'p str) -> Result<(Arc<Source>, &'p str), IngestError> {
        let path = path.strip_prefix("/in/").unwrap_or_default();
        let (name, rest) = match path.find('/') {
            Some(i) => (&path[..i], &path[i..]),
            None => (path, ""),
        };
        match self.sources.load().get(name) {
            Some(source) => Ok((source.clone(), rest)),
            None => Err(IngestError::UnknownSource(truncate_for_log(name))),
        }
    }
}

pub fn router(state: IngestState) -> Router {
    Router::new()
        .route("/in/{source}", post(receive).get(subscribe))
        .route("/in/{source}/{*rest}", post(receive))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                axum::Json(
                    json!({"error": "not_found", "reason": "webhooks go to POST /in/{source}"}),
                ),
            )
        })
        // One Arc: the router clones its state for each request.
        .with_state(Arc::new(state))
}

/// Why a request got no 2xx. [`IngestError::into_response`] is the one place
/// that maps it to a status, counts it and logs it.
#[derive(Debug, thiserror::Error)]
enum IngestError {
    #[error("no source named {0:?} is configured")]
    UnknownSource(String),
    #[error("the body is larger than the {limit} bytes this source accepts")]
    BodyTooLarge { limit: usize },
    #[error("the body was not received within {0:?}")]
    BodyTimeout(Duration),
    #[error("the body could not be read: {0}")]
    BodyRead(String),
    #[error("too many request bodies are being received at once; retry shortly")]
    Busy,
    /// A replication standby: the primary (last seen in the lease) takes
    /// webhooks.
    #[error("{}", crate::replicate::standby_refusal(.0.as_ref()))]
    Standby(Option<crate::replicate::Holder>),
    #[error(transparent)]
    Rejected(#[from] Rejection),
    #[error("the event could not be stored: {0}")]
    Store(#[from] StoreError),
}

impl IngestError {
    /// The public error code is the counter's reason, except that every
    /// authentication failure answers `invalid_signature` (the counter keeps
    /// which check failed).
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        let status = match self {
            IngestError::UnknownSource(_) => StatusCode::NOT_FOUND,
            IngestError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            IngestError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            IngestError::BodyRead(_) => StatusCode::BAD_REQUEST,
            IngestError::Busy | IngestError::Standby(_) => StatusCode::SERVICE_UNAVAILABLE,
            IngestError::Rejected(r) if r.is_authentication() => {
                return (StatusCode::UNAUTHORIZED, "invalid_signature");
            }
            IngestError::Rejected(_) => StatusCode::BAD_REQUEST,
            // Replaced as the replication primary: the provider's retry
            // finds the new one.
            IngestError::Store(e) if e.is_transient() || e.is_replaced() => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            IngestError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, self.reason().as_str())
    }

    /// The counter's reason: finer than the public code for signature failures.
    fn reason(&self) -> RejectReason {
        match self {
            IngestError::UnknownSource(_) => RejectReason::UnknownSource,
            IngestError::BodyTooLarge { .. } => RejectReason::BodyTooLarge,
            IngestError::BodyTimeout(_) => RejectReason::BodyTimeout,
            IngestError::BodyRead(_) => RejectReason::BodyUnreadable,
            IngestError::Busy => RejectReason::Busy,
            IngestError::Standby(_) => RejectReason::Standby,
            IngestError::Rejected(r) => r.reason(),
            IngestError::Store(e) if e.is_transient() || e.is_replaced() => {
                RejectReason::StoreUnavailable
            }
            IngestError::Store(_) => RejectReason::StoreError,
        }
    }

    fn into_response(
        self,
        source: Option<&SourceName>,
        event_id: Option<&str>,
        metrics: &Metrics,
    ) -> Response {
        let (status, code) = self.status_and_code();
        let source_label = source.map_or(UNKNOWN_SOURCE, |s| s.as_str());
        let loud = metrics.rejected(source_label, self.reason());
        let reason = self.to_string();
        if status.is_server_error() {
            crate::loud_or_debug!(loud, error, source = source_label, event_id, status = status.as_u16(), cause = %crate::store::Report(&self), "ingest failed");
        } else {
            crate::loud_or_debug!(loud, warn, source = source_label, event_id, status = status.as_u16(), reason = %reason, "ingest rejected");
        }
        let mut body = json!({"error": code, "reason": reason});
        if let IngestError::Standby(Some(primary)) = &self {
            body["primary"] = json!({"node": primary.node, "admin": primary.admin});
        }
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        response
    }
}

async fn receive(State(state): State<Arc<IngestState>>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let (source, rest) = match state.source_of(parts.uri.path()) {
        Ok(found) => found,
        Err(e) => return e.into_response(None, None, &state.metrics),
    };
    let reject = |e: IngestError, event_id: Option<&str>| {
        e.into_response(Some(&source.name), event_id, &state.metrics)
    };
    // A standby stores only its primary's frames: it says where that is
    // before reading a byte of the body.
    if state.store.is_standby() {
        let primary = state.primary.as_ref().and_then(|p| p.get());
        return reject(IngestError::Standby(primary), None);
    }

    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > source.max_body) {
        return reject(
            IngestError::BodyTooLarge {
                limit: source.max_body,
            },
            None,
        );
    }
    // Held until the answer is sent: the body lives until then.
    let Some(_budget) = state
        .budget
        .reserve(declared.unwrap_or(source.max_body))
        .await
    else {
        return reject(IngestError::Busy, None);
    };
    let body = match read_body(body, source.max_body, state.body_read_timeout).await {
        Ok(b) => b,
        Err(e) => return reject(e, None),
    };

    let now = state.clock.now();
    let request = verify::Request {
        headers: &parts.headers,
        body: &body,
        path_rest: rest,
        query: parts.uri.query(),
    };
    let event = match source.verifier.verify(&request, now) {
        Ok(Verified::Event(event)) => {
            if let Some((used, counter)) = event.secret().and_then(|i| source.secrets.get(i)) {
                used.matched(event.received_at_ms());
                counter.inc();
            }
            event
        }
        Ok(Verified::Handshake(handshake)) => return answer_handshake(&source.name, handshake),
        Err(rejection) => return reject(rejection.into(), None),
    };

    let verified = Instant::now();
    let event_id = event.event_id().as_str().to_owned();
    let event_type = state
        .telemetry
        .is_on()
        .then(|| event.event_type().map(str::to_owned))
        .flatten();
    let (id, duplicate) = match state.keep(&source, event, &event_id, started).await {
        Ok(Ingested::New { id }) => (id, false),
        Ok(Ingested::Duplicate { id }) => (id, true),
        Err(e) => return reject(e.into(), Some(&event_id)),
    };
    if state.telemetry.is_on() {
        // The span is recorded now, with the times each step was passed:
        // its ids are the event's, known once it is stored.
        let (now, answered) = (Instant::now(), std::time::SystemTime::now());
        let at = |t: Instant| answered - now.duration_since(t);
        state.telemetry.received(crate::telemetry::Receipt {
            id: &id,
            source: source.name.as_str(),
            event_id: &event_id,
            event_type: event_type.as_deref(),
            duplicate,
            fetched: false,
            headers: &parts.headers,
            started: at(started),
            verified: at(verified),
            stored: answered,
            answered,
        });
    }
    let mut answer = json!({"received": true, "id": id});
    if duplicate {
        answer["duplicate"] = serde_json::Value::Bool(true);
    }
    (StatusCode::OK, axum::Json(answer)).into_response()
}

/// A provider's URL check, answered as it asks; nothing is stored.
fn answer_handshake(source: &SourceName, handshake: Handshake) -> Response {
    tracing::info!(
        source = source.as_str(),
        handshake = handshake.what,
        "answered the provider's check of this URL"
    );
    match handshake.reply {
        HandshakeReply::Text(text) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response()
        }
        HandshakeReply::Json(value) => (StatusCode::OK, axum::Json(value)).into_response(),
    }
}

/// `GET /in/{source}`: Meta's subscription check, for a source that holds a
/// verify token; any other source has nothing to answer.
async fn subscribe(State(state): State<Arc<IngestState>>, request: Request) -> Response {
    let (source, _) = match state.source_of(request.uri().path()) {
        Ok(found) => found,
        Err(e) => return e.into_response(None, None, &state.metrics),
    };
    if !source.verifier.answers_get() {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "POST")],
            axum::Json(json!({"error": "method_not_allowed", "reason": "webhooks go to POST /in/{source}"})),
        )
            .into_response();
    }
    match source.verifier.subscribe(request.uri().query()) {
        Ok(handshake) => answer_handshake(&source.name, handshake),
        Err(rejection) => {
            IngestError::from(rejection).into_response(Some(&source.name), None, &state.metrics)
        }
    }
}

async fn read_body(
    body: axum::body::Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, IngestError> {
    let limited = Limited::new(body, limit);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Err(_) => Err(IngestError::BodyTimeout(timeout)),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(IngestError::BodyTooLarge { limit })
        }
        Ok(Err(e)) => Err(IngestError::BodyRead(e.to_string())),
    }
}

/// A caller-chosen name goes into a log line: bound it.
fn truncate_for_log(name: &str) -> String {
    name.chars().take(64).collect()
}
