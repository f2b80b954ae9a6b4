//! The admin API on the admin listener: JSON for people and scripts.
//!
//! Every path but `/healthz`, `/readyz`, `/api/openapi.json` and the
//! dashboard's assets (`/`, `/ui/…`, see [`crate::dashboard`]) needs
//! `Authorization: Bearer <token>`, compared in constant time. Requests and answers are the types
//! of [`crate::api`], converted here from the store's; errors are
//! [`api::ApiError`] with a status, counted in
//! `hookinbox_admin_rejected{reason}` and logged without the token or any
//! body. Reads go to the store's snapshots; changes (replay, ignore) go
//! through the writer like everything else, and pause / resume through the
//! scheduler's handle.

use std::time::Duration;

use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use subtle::ConstantTimeEq;

use crate::api::{self, ErrorCode, EventQuery, EventStatus, Timestamp};
use crate::clock::Clock;
use crate::config::Secret;
use crate::metrics::{Exposition, Metrics, SourceGauges, StoreDisk};
use crate::schedule::{DeliveryHandle, PauseError};
use crate::store::index::MinuteKind;
use crate::store::schema::{self, Attempt, Status};
use crate::store::{
    Budget, Change, ChangeError, Delivery, EventFilter, PayloadMatch, Store, StoreError,
    StoredEvent,
};
use crate::sweep::SweepHandle;

/// Most events one bulk replay or ignore touches; narrow the filter for more.
const MAX_BULK: usize = 100_000;

/// Most events one list call returns.
const MAX_PAGE: usize = 500;

#[derive(Clone)]
pub struct AdminState {
    pub store: Store,
    pub metrics: Metrics,
    pub delivery: DeliveryHandle,
    pub sweep: SweepHandle,
    pub token: Secret,
    /// Stamps changes and judges ages, as every task does.
    pub clock: Clock,
    /// Every configured source, so stats list quiet ones too.
    pub sources: Vec<String>,
}

pub fn router(state: AdminState) -> Router {
    let api = Router::new()
        .route("/metrics", get(metrics))
        .route("/api/events", get(list_events))
        .route("/api/events/{id}", get(show_event).delete(erase_event))
        .route("/api/events/{id}/replay", post(replay_event))
        .route("/api/events/{id}/ignore", post(ignore_event))
        .route("/api/replay", post(bulk_replay))
        .route("/api/ignore", post(bulk_ignore))
        .route("/api/stats", get(stats))
        .route("/api/activity", get(activity))
        .route("/api/sweep", post(sweep_now))
        .route("/api/backup", get(backup))
        .route("/api/destinations", get(destinations))
        .route("/api/destinations/{name}/pause", post(pause))
        .route("/api/destinations/{name}/resume", post(resume))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/api/openapi.json", get(openapi_json))
        .route("/readyz", get(readyz))
        .merge(crate::dashboard::router())
        .merge(api)
        .fallback(|State(state): State<AdminState>| async move {
            AdminError::NotFound("no such admin path".into()).respond(&state.metrics)
        })
        .with_state(state)
}

/// Why an admin request failed; [`AdminError::respond`] is the one place
/// that maps it to a status, counts it and logs it.
#[derive(Debug, thiserror::Error)]
enum AdminError {
    #[error("a valid bearer token is required")]
    Unauthorized,
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A blocking task of the handler panicked or was cancelled.
    #[error("the request's work stopped unexpectedly")]
    Task(#[from] tokio::task::JoinError),
    #[error("cannot read the backup file")]
    Backup(#[source] std::io::Error),
}

impl AdminError {
    fn respond(self, metrics: &Metrics) -> Response {
        let (status, code) = match &self {
            AdminError::Unauthorized => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            AdminError::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            AdminError::BadRequest(_) => (StatusCode::BAD_REQUEST, ErrorCode::BadRequest),
            AdminError::Conflict(_) => (StatusCode::CONFLICT, ErrorCode::Conflict),
            AdminError::Store(e) if e.is_transient() => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::StoreUnavailable)
            }
            AdminError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::StoreError),
            AdminError::Task(_) | AdminError::Backup(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError)
            }
        };
        // The public error code is the counter's label, so the two never drift.
        metrics.admin_rejected(code);
        let reason = self.to_string();
        if status.is_server_error() {
            // The whole chain in the log; the caller gets the top message only.
            let cause = crate::store::Report(&self);
            tracing::error!(status = status.as_u16(), %cause, "admin request failed");
        } else {
            tracing::warn!(status = status.as_u16(), %reason, "admin request refused");
        }
        let body = api::ApiError {
            error: code,
            reason,
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

async fn require_token(State(state): State<AdminState>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .unwrap_or("");
    let expected = state.token.expose().as_bytes();
    if presented.as_bytes().ct_eq(expected).into() {
        next.run(request).await
    } else {
        AdminError::Unauthorized.respond(&state.metrics)
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is
/// case-insensitive (RFC 9110 §11.1), and clients send `bearer` and `BEARER`
/// too; spaces after it are skipped. The token itself is compared exactly.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

#[utoipa::path(get, path = "/healthz", tag = "health", security(()),
    responses((status = 200, description = "The process answers", body = api::Health)))]
async fn healthz() -> Json<api::Health> {
    Json(api::Health {
        status: "ok".into(),
    })
}

/// The admin API's contract as an OpenAPI 3.1 document, for other tools.
#[utoipa::path(get, path = "/api/openapi.json", tag = "health", security(()),
    responses((status = 200, description = "This document", content_type = "application/json", body = Object)))]
async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(openapi())
}

/// The admin API's contract as OpenAPI: every path of [`router`], with the
/// types of [`crate::api`] as its schemas.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

    #[derive(OpenApi)]
    #[openapi(
        info(title = "hookinbox admin API", description = "The admin listener's API: every path but /healthz, /readyz and /api/openapi.json needs `Authorization: Bearer <token>`."),
        security(("bearer" = [])),
        paths(
            healthz, readyz, openapi_json, metrics, list_events, show_event, replay_event,
            ignore_event, erase_event, bulk_replay, bulk_ignore, stats, activity, sweep_now,
            backup, destinations, pause, resume
        )
    )]
    struct Doc;

    let mut doc = Doc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    doc
}

#[utoipa::path(get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, description = "An event of the largest max_body can be stored and the scheduler runs", body = api::Readiness),
              (status = 503, description = "Not ready: the reason is in the body", body = api::Readiness)))]
async fn readyz(State(state): State<AdminState>) -> Response {
    let store = tokio::time::timeout(Duration::from_secs(5), state.store.ready()).await;
    let store_ok = matches!(store, Ok(Ok(())));
    let scheduler_ok = state.delivery.is_alive();
    let status = if store_ok && scheduler_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let store_text = match store {
        Ok(Ok(())) => "writable".to_owned(),
        Ok(Err(e)) => e.report().to_string(),
        Err(_) => "no commit within 5 s".to_owned(),
    };
    let body = api::Readiness {
        ready: status == StatusCode::OK,
        store: store_text,
        scheduler: if scheduler_ok { "running" } else { "stopped" }.to_owned(),
    };
    (status, Json(body)).into_response()
}

#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format 0.0.4, or OpenMetrics 1.0.0 when the Accept header prefers it", content_type = "text/plain", body = String), (status = 401, description = "No or a wrong bearer token", body = api::ApiError)))]
async fn metrics(State(state): State<AdminState>, headers: axum::http::HeaderMap) -> Response {
    // Gauges of what the store holds are read at scrape time, from counts
    // kept with every change and three `stat`s: the same cost at any size.
    state.metrics.set_store_writable(state.store.is_writable());
    let store = state.store.clone();
    let read = tokio::task::spawn_blocking(move || (store.stats(), store.disk_usage())).await;
    if let Ok((stats, disk)) = read {
        if let Ok(held) = stats {
            let now = state.clock.now_ms();
            for name in &state.sources {
                let s = held.get(name).cloned().unwrap_or_default();
                let oldest = s.oldest_pending_ms.map_or(0, |t| now.saturating_sub(t));
                let gauges = SourceGauges {
                    pending: s.counts.pending,
                    retrying: s.counts.retrying,
                    held: s.counts.held,
                    dead: s.counts.dead,
                    oldest_pending: Duration::from_millis(oldest),
                };
                state.metrics.set_source_gauges(name, gauges);
            }
        }
        match disk {
            Ok(d) => state.metrics.set_store_disk(StoreDisk {
                database_bytes: d.database_bytes,
                wal_bytes: d.wal_bytes,
                filesystem_available_bytes: d.filesystem_available_bytes,
                filesystem_size_bytes: d.filesystem_size_bytes,
            }),
            Err(e) => tracing::warn!(error = %e, "metrics: cannot read the store's file sizes"),
        }
    }
    for d in state.delivery.destinations() {
        let to = crate::metrics::DestinationLabel::new(&d.source, &d.name);
        state.metrics.set_circuit_state(&to, d.circuit.into());
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Exposition::negotiate(accept);
    (
        [(header::CONTENT_TYPE, format.content_type())],
        state.metrics.encode(format),
    )
        .into_response()
}

fn status_of(status: EventStatus) -> Status {
    match status {
        EventStatus::Pending => Status::Pending,
        EventStatus::Held => Status::Held,
        EventStatus::Delivered => Status::Delivered,
        EventStatus::Dead => Status::Dead,
        EventStatus::Ignored => Status::Ignored,
        EventStatus::Filtered => Status::Filtered,
    }
}

fn status_on_wire(status: Status) -> EventStatus {
    match status {
        Status::Pending => EventStatus::Pending,
        Status::Held => EventStatus::Held,
        Status::Delivered => EventStatus::Delivered,
        Status::Dead => EventStatus::Dead,
        Status::Ignored => EventStatus::Ignored,
        Status::Filtered => EventStatus::Filtered,
    }
}

/// The store's filter and payload match of a query.
fn filter_of(query: &EventQuery) -> Result<(EventFilter, PayloadMatch), AdminError> {
    let filter = EventFilter {
        source: query.source.clone(),
        destination: query.destination.clone(),
        status: query.status.map(status_of),
        event_type: query.event_type.clone(),
        event_id: query.event_id.clone(),
        from_ms: query.from.map(|t| t.0),
        to_ms: query.to.map(|t| t.0),
    };
    let pointer = match &query.pointer_match {
        None => None,
        Some(text) => {
            let (pointer, value) = text
                .split_once('=')
                .filter(|(pointer, _)| pointer.starts_with('/'))
                .ok_or_else(|| {
                    AdminError::BadRequest(format!(
                        "match {text:?}: expected /json/pointer=value, like /data/object/customer=cus_123"
                    ))
                })?;
            Some((pointer.to_owned(), value.to_owned()))
        }
    };
    if query.q.as_deref() == Some("") {
        return Err(AdminError::BadRequest(
            "q is empty: give the text to look for".into(),
        ));
    }
    let payload = PayloadMatch {
        text: query.q.clone(),
        pointer,
    };
    Ok((filter, payload))
}

fn note_on_wire(note: &schema::Note) -> api::Note {
    api::Note {
        text: note.text.clone(),
        at: Timestamp(note.at_ms),
    }
}

/// The event's status as a whole: pending while any delivery is, then
/// dead, held, delivered, ignored, filtered.
fn overall(e: &StoredEvent) -> Status {
    let has = |status| e.deliveries.iter().any(|d| d.state.status == status);
    [
        Status::Pending,
        Status::Dead,
        Status::Held,
        Status::Delivered,
        Status::Ignored,
    ]
    .into_iter()
    .find(|&s| has(s))
    .unwrap_or(Status::Filtered)
}

fn delivery_on_wire(s: &schema::EventState) -> api::DeliverySummary {
    api::DeliverySummary {
        destination: s.source.clone(),
        status: status_on_wire(s.status),
        attempts: s.attempts,
        next_attempt_at: s.due_ms.map(Timestamp),
        delivered_at: s.delivered_ms.map(Timestamp),
        dead_letter: s.dead.as_ref().map(|d| api::DeadLetter {
            reason: d.reason.clone(),
            at: Timestamp(d.at_ms),
            last_status: d.last_status,
        }),
        note: s.note.as_ref().map(note_on_wire),
        replays: s.replays,
    }
}

fn summary(e: &StoredEvent) -> api::EventSummary {
    let s = delivery_on_wire(&e.state);
    api::EventSummary {
        id: e.id.clone(),
        source: e.record.source.clone(),
        event_id: e.record.event_id.clone(),
        event_type: e.record.event_type.clone(),
        status: status_on_wire(overall(e)),
        destination: Some(s.destination),
        received_at: Timestamp(e.record.received_at_ms),
        attempts: s.attempts,
        next_attempt_at: s.next_attempt_at,
        delivered_at: s.delivered_at,
        dead_letter: s.dead_letter,
        note: s.note,
        replays: s.replays,
        erased: e.erased.as_ref().map(note_on_wire),
        deliveries: e
            .deliveries
            .iter()
            .map(|d| delivery_on_wire(&d.state))
            .collect(),
    }
}

fn attempt_on_wire(destination: &str, n: usize, a: &Attempt) -> api::AttemptRecord {
    api::AttemptRecord {
        destination: destination.to_owned(),
        n: n as u32 + 1,
        started_at: Timestamp(a.started_ms),
        latency_ms: a.latency_ms,
        outcome: a.class.into(),
        status: a.status,
        error: a.error.clone(),
        response_snippet: a.response_snippet.clone(),
    }
}

/// `GET /api/events`: a page of a list, or of a search when the query looks
/// inside payloads.
#[utoipa::path(get, path = "/api/events", tag = "events", params(EventQuery),
    responses((status = 200, description = "A page, newest first; a search when q or match is given", body = api::EventPage),
              (status = 400, description = "A bad filter", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn list_events(
    State(state): State<AdminState>,
    query: Result<Query<EventQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let run = || -> Result<api::EventPage, AdminError> {
        let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
        let (filter, payload) = filter_of(&query)?;
        let limit = query.limit.unwrap_or(50);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(AdminError::BadRequest(format!(
                "limit must be between 1 and {MAX_PAGE}"
            )));
        }
        if !query.is_search() {
            let (events, cursor) = state.store.list(&filter, query.cursor, limit)?;
            return Ok(api::EventPage {
                events: events.iter().map(summary).collect(),
                next_cursor: cursor,
                search: None,
            });
        }
        let budget = Budget {
            events: api::SEARCH_EVENTS,
            time: api::SEARCH_TIME,
        };
        let page = state
            .store
            .search(&filter, &payload, query.cursor, limit, budget)?;
        Ok(api::EventPage {
            events: page.events.iter().map(summary).collect(),
            next_cursor: page.cursor,
            search: Some(api::SearchProgress {
                examined: page.examined,
                scanned_back_to: page.scanned_back_to_ms.map(Timestamp),
            }),
        })
    };
    match run() {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

fn find(state: &AdminState, id: &str) -> Result<StoredEvent, AdminError> {
    let missing = || AdminError::NotFound(format!("no event {id:?}"));
    let seq = state.store.parse_public_id(id).ok_or_else(missing)?;
    state.store.get(seq)?.ok_or_else(missing)
}

#[utoipa::path(get, path = "/api/events/{id}", tag = "events",
    params(("id" = String, Path, description = "hookinbox's id (the webhook-id)")),
    responses((status = 200, description = "The event, its payload and every attempt", body = api::EventDetail),
              (status = 404, description = "No such event", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn show_event(State(state): State<AdminState>, Path(id): Path<String>) -> Response {
    let run = || -> Result<api::EventDetail, AdminError> {
        let e = find(&state, &id)?;
        let mut attempt_history = Vec::new();
        for d in &e.deliveries {
            let attempts = state.store.attempts(d.key)?;
            attempt_history.extend(
                attempts
                    .iter()
                    .enumerate()
                    .map(|(n, a)| attempt_on_wire(&d.state.source, n, a)),
            );
        }
        attempt_history.sort_by_key(|a| a.started_at);
        let payload = match std::str::from_utf8(&e.record.body) {
            Ok(text) => api::Payload {
                encoding: api::PayloadEncoding::Text,
                data: text.to_owned(),
            },
            Err(_) => api::Payload {
                encoding: api::PayloadEncoding::Base64,
                data: base64::engine::general_purpose::STANDARD.encode(&e.record.body),
            },
        };
        Ok(api::EventDetail {
            summary: summary(&e),
            content_type: e.record.content_type.clone(),
            headers: e.record.headers.clone(),
            payload,
            attempt_history,
        })
    };
    match run() {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

/// Which deliveries of `e` a person's replay or ignore goes to, and as
/// what change: `destination` names one; without it, every delivery the
/// change applies to (or the first, for the store to say why not).
fn plan(
    state: &AdminState,
    e: &StoredEvent,
    change: &Change,
    destination: Option<&str>,
) -> Result<Vec<(u64, Change)>, AdminError> {
    let replay = matches!(change, Change::Replay);
    let lanes = state.delivery.destinations();
    let ours: Vec<&str> = lanes
        .iter()
        .filter(|l| l.source == e.record.source)
        .map(|l| l.name.as_str())
        .collect();
    // A held or filtered event has one delivery, on its source's own route;
    // a replay sends it to a destination of the source.
    let unrouted = match e.deliveries.as_slice() {
        [only] if matches!(only.state.status, Status::Held | Status::Filtered) => Some(only),
        _ => None,
    };
    if let Some(name) = destination {
        if let Some(d) = e.deliveries.iter().find(|d| d.state.source == name) {
            if replay && !ours.contains(&name) {
                return Err(unconfigured(name));
            }
            return Ok(vec![(d.key, change.clone())]);
        }
        if !ours.contains(&name) {
            return Err(AdminError::NotFound(format!(
                "source {:?} has no destination {name:?}",
                e.record.source
            )));
        }
        return match unrouted {
            Some(only) if replay => Ok(vec![(
                only.key,
                Change::ReplayTo {
                    destination: name.to_owned(),
                },
            )]),
            _ => Err(AdminError::Conflict(format!(
                "the event was not routed to {name:?}"
            ))),
        };
    }
    if let Some(only) = unrouted
        && replay
    {
        return match ours.as_slice() {
            // No destination: the store refuses a held event's replay.
            [] => Ok(vec![(only.key, Change::Replay)]),
            _ if ours.contains(&only.state.source.as_str()) => Ok(vec![(only.key, Change::Replay)]),
            [one] => Ok(vec![(
                only.key,
                Change::ReplayTo {
                    destination: (*one).to_owned(),
                },
            )]),
            many => Err(AdminError::Conflict(format!(
                "name a destination to replay it to: one of {}",
                many.join(", ")
            ))),
        };
    }
    let applies = |s: Status| match change {
        Change::Replay => matches!(s, Status::Dead | Status::Delivered | Status::Ignored),
        _ => s.is_undelivered(),
    };
    let mut targets: Vec<&Delivery> = e
        .deliveries
        .iter()
        .filter(|d| applies(d.state.status))
        .collect();
    if targets.is_empty() {
        targets.extend(e.deliveries.first());
    }
    if replay
        && let Some(d) = targets
            .iter()
            .find(|d| !ours.contains(&d.state.source.as_str()))
    {
        return Err(unconfigured(&d.state.source));
    }
    Ok(targets.iter().map(|d| (d.key, change.clone())).collect())
}

/// A replay to a destination the config no longer has would wait on a
/// queue nothing serves.
fn unconfigured(destination: &str) -> AdminError {
    AdminError::Conflict(format!(
        "destination {destination:?} is not configured now: nothing would deliver the replay"
    ))
}

async fn change(
    state: &AdminState,
    id: &str,
    change: Change,
    destination: Option<&str>,
) -> Result<api::EventSummary, AdminError> {
    let e = find(state, id)?;
    let targets = match &change {
        Change::Erase { .. } => vec![(e.seq, change.clone())],
        _ => plan(state, &e, &change, destination)?,
    };
    let now = state.clock.now_ms();
    let source = e.record.source.as_str();
    let mut refused = None;
    let mut changed = Vec::new();
    for (key, c) in targets {
        match state.store.change(key, c.clone(), now).await? {
            Ok(()) => changed.push((key, c)),
            Err(ChangeError::NotFound) => {
                return Err(AdminError::NotFound(format!("no event {id:?}")));
            }
            Err(why) => {
                refused.get_or_insert(why);
            }
        }
    }
    if changed.is_empty()
        && let Some(why) = refused
    {
        return Err(AdminError::Conflict(why.to_string()));
    }
    for (key, c) in &changed {
        let to = e
            .deliveries
            .iter()
            .find(|d| d.key == *key)
            .map_or("", |d| d.state.source.as_str());
        let (action, to) = match c {
            Change::Replay => {
                state.metrics.replayed(source);
                ("replayed", to)
            }
            Change::ReplayTo { destination } => {
                state.metrics.replayed(source);
                ("replayed", destination.as_str())
            }
            Change::Ignore { .. } => {
                state.metrics.ignored(source);
                ("ignored", to)
            }
            Change::Erase { .. } => ("payload erased", ""),
        };
        tracing::info!(source, destination = to, id, event_id = %e.record.event_id, action, "event changed by an operator");
    }
    let after = find(state, id)?;
    Ok(summary(&after))
}

/// The `destination` of a replay or an ignore, from the query string.
fn destination_of(
    query: Result<Query<api::DeliveryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Option<String>, AdminError> {
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    Ok(query.destination)
}

#[utoipa::path(post, path = "/api/events/{id}/replay", tag = "events",
    params(("id" = String, Path, description = "hookinbox's id"), api::DeliveryQuery),
    responses((status = 200, description = "Pending again at the destination (each that finished, without one): attempts reset, same webhook-id", body = api::EventSummary),
              (status = 404, description = "No such event, or no such destination of its source", body = api::ApiError),
              (status = 409, description = "Pending, held or in flight", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn replay_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    query: Result<Query<api::DeliveryQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let run = async {
        let destination = destination_of(query)?;
        change(&state, &id, Change::Replay, destination.as_deref()).await
    };
    match run.await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

/// A person's note: required, trimmed, at most 2000 bytes.
fn note_text(note: Option<&str>, what: &str) -> Result<String, AdminError> {
    match note.map(str::trim) {
        Some(note) if !note.is_empty() && note.len() <= 2000 => Ok(note.to_owned()),
        _ => Err(AdminError::BadRequest(format!(
            "a note is required (at most 2000 bytes): {{\"note\": \"why {what}\"}}"
        ))),
    }
}

#[utoipa::path(post, path = "/api/events/{id}/ignore", tag = "events",
    params(("id" = String, Path, description = "hookinbox's id"), api::DeliveryQuery), request_body = api::NoteRequest,
    responses((status = 200, description = "Ignored at the destination (each still to deliver, without one), with the note", body = api::EventSummary),
              (status = 400, description = "No note", body = api::ApiError),
              (status = 404, description = "No such event, or no such destination of its source", body = api::ApiError),
              (status = 409, description = "Delivered, already ignored, or in flight", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn ignore_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    query: Result<Query<api::DeliveryQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Json<api::NoteRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let destination = match destination_of(query) {
        Ok(d) => d,
        Err(e) => return e.respond(&state.metrics),
    };
    noted_change(
        &state,
        &id,
        destination.as_deref(),
        body,
        "this event is ignored",
        |note| Change::Ignore { note },
    )
    .await
}

/// A change a person must explain (ignore, erase): the note from the JSON
/// body, required, then the change.
async fn noted_change(
    state: &AdminState,
    id: &str,
    destination: Option<&str>,
    body: Result<Json<api::NoteRequest>, axum::extract::rejection::JsonRejection>,
    why: &str,
    change_with: fn(String) -> Change,
) -> Response {
    let run = async {
        let Json(body) = body.map_err(|e| {
            AdminError::BadRequest(format!(
                "a note is required as JSON {{\"note\": \"why {why}\"}}: {}",
                e.body_text()
            ))
        })?;
        let note = note_text(Some(&body.note), why)?;
        change(state, id, change_with(note), destination).await
    };
    match run.await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

/// `DELETE /api/events/{id}` with a note: the payload and headers go for
/// good (a privacy request); the id, times, history, the note and the dedupe
/// key stay, so a provider's resend is still answered as a duplicate.
#[utoipa::path(delete, path = "/api/events/{id}", tag = "events",
    params(("id" = String, Path, description = "hookinbox's id")), request_body = api::NoteRequest,
    responses((status = 200, description = "Payload and headers deleted; the rest kept", body = api::EventSummary),
              (status = 400, description = "No note", body = api::ApiError),
              (status = 404, description = "No such event", body = api::ApiError),
              (status = 409, description = "Already erased, or in flight", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn erase_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: Result<Json<api::NoteRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    noted_change(&state, &id, None, body, "the payload is deleted", |note| {
        Change::Erase { note }
    })
    .await
}

/// The keys of a bulk filter, which the first bulk body (before 0.1.0's
/// typed contract) took at its top level.
const FILTER_KEYS: [&str; 7] = [
    "source",
    "destination",
    "status",
    "type",
    "event_id",
    "from",
    "to",
];

/// The bulk request of a JSON body, or a 400 that says what is expected:
/// a script written against the first, flat body learns where its keys go.
fn bulk_request(body: serde_json::Value) -> Result<api::BulkRequest, AdminError> {
    let flat: Vec<&str> = FILTER_KEYS
        .into_iter()
        .filter(|key| body.get(key).is_some())
        .collect();
    if !flat.is_empty() {
        return Err(AdminError::BadRequest(format!(
            "the filter goes under \"filter\": {{\"filter\": {{\"source\": …, \"status\": …}}, \"dry_run\": …, \"note\": …}}, \
             not at the top ({}); see /api/openapi.json",
            flat.join(", ")
        )));
    }
    // With the path of what is wrong (`filter.status: unknown variant`), as
    // axum's own JSON errors say it.
    serde_path_to_error::deserialize(body).map_err(|e| {
        AdminError::BadRequest(format!(
            "{e} (a bulk body is {{\"filter\": {{…}}, \"dry_run\": …, \"note\": …}}; see /api/openapi.json)"
        ))
    })
}

async fn bulk(
    state: &AdminState,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
    replay: bool,
) -> Result<api::BulkResult, AdminError> {
    let Json(body) = body.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let body = bulk_request(body)?;
    if body.filter.cursor.is_some() || body.filter.limit.is_some() || body.filter.is_search() {
        return Err(AdminError::BadRequest(
            "a bulk filter takes source, status, type, event_id, from and to (no cursor, limit, q or match)".into(),
        ));
    }
    let (filter, _) = filter_of(&body.filter)?;
    if filter == EventFilter::default() {
        return Err(AdminError::BadRequest(
            "give a filter (source, status, type, event_id, from, to): an empty one would take every event".into(),
        ));
    }
    let change = if replay {
        if body.note.is_some() {
            return Err(AdminError::BadRequest("replay takes no note".into()));
        }
        Change::Replay
    } else {
        Change::Ignore {
            note: note_text(body.note.as_deref(), "these events are ignored")?,
        }
    };
    // Keys and routes only: 100k matches never load 100k payloads.
    let (matched, more) = state.store.matching_ids(&filter, MAX_BULK)?;
    let lanes: std::collections::HashSet<String> = state
        .delivery
        .destinations()
        .into_iter()
        .map(|l| l.name)
        .collect();
    if more {
        return Err(AdminError::BadRequest(format!(
            "more than {MAX_BULK} events match: narrow the filter (source, status, from, to)"
        )));
    }
    if body.dry_run {
        return Ok(api::BulkResult {
            dry_run: true,
            matched: matched.len() as u64,
            changed: 0,
            refused: Vec::new(),
        });
    }
    let now = state.clock.now_ms();
    let mut changed = 0;
    let mut refused = Vec::new();
    let mut refusals = 0u64;
    // 256 at a time in flight: the writer group-commits what is queued.
    let mut results = Vec::with_capacity(matched.len());
    for chunk in matched.chunks(256) {
        let calls: Vec<_> = chunk
            .iter()
            .map(|(seq, route)| {
                let (store, change, seq) = (state.store.clone(), change.clone(), *seq);
                // A replay to a destination no longer configured would wait
                // on a queue nothing serves.
                let orphan = replay && !lanes.contains(route);
                tokio::spawn(async move {
                    if orphan {
                        return Ok(Err(ChangeError::Conflict(
                            "is routed to a destination that is not configured now",
                        )));
                    }
                    store.change(seq, change, now).await
                })
            })
            .collect();
        for call in calls {
            results.push(call.await?);
        }
    }
    for ((seq, route), result) in matched.iter().zip(results) {
        let source = schema::route_source(route);
        match result? {
            Ok(()) => {
                changed += 1;
                if replay {
                    state.metrics.replayed(source);
                } else {
                    state.metrics.ignored(source);
                }
            }
            Err(why) => {
                refusals += 1;
                // The answer lists the first 100: look up only their ids.
                if refused.len() < 100 {
                    refused.push(api::Refusal {
                        id: state.store.public_id_of_delivery(*seq)?,
                        reason: why.to_string(),
                    });
                }
            }
        }
    }
    tracing::info!(
        matched = matched.len(),
        changed,
        refused = refusals,
        action = if replay { "replay" } else { "ignore" },
        "bulk change by an operator"
    );
    refused.truncate(100);
    Ok(api::BulkResult {
        dry_run: false,
        matched: matched.len() as u64,
        changed,
        refused,
    })
}

#[utoipa::path(post, path = "/api/replay", tag = "events", request_body = api::BulkRequest,
    responses((status = 200, description = "What matched, changed and was refused", body = api::BulkResult),
              (status = 400, description = "A bad or empty filter, a note, or more than 100,000 matches", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn bulk_replay(
    State(state): State<AdminState>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Response {
    match bulk(&state, body, true).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

#[utoipa::path(post, path = "/api/ignore", tag = "events", request_body = api::BulkRequest,
    responses((status = 200, description = "What matched, changed and was refused", body = api::BulkResult),
              (status = 400, description = "A bad or empty filter, no note, or more than 100,000 matches", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn bulk_ignore(
    State(state): State<AdminState>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Response {
    match bulk(&state, body, false).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

/// Streams a consistent copy of the database (a redb file). The copy is
/// made from one read snapshot into a private temp file in the data dir,
/// which is unlinked as soon as it is open: nothing is left behind.
#[utoipa::path(get, path = "/api/backup", tag = "operations",
    responses((status = 200, description = "A consistent copy of the database (a redb file)", content_type = "application/octet-stream", body = Vec<u8>), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn backup(State(state): State<AdminState>) -> Response {
    let store = state.store.clone();
    let dir = store
        .path()
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let started = std::time::Instant::now();
    let stamp = state.clock.now_ms();
    let made = tokio::task::spawn_blocking(move || {
        let path = dir.join(format!(".backup-{}-{stamp}.redb", std::process::id()));
        let result = store
            .backup_to(&path)
            .map_err(AdminError::from)
            .and_then(|events| {
                let file = std::fs::File::open(&path).map_err(AdminError::Backup)?;
                let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                Ok((file, size, events))
            });
        let _ = std::fs::remove_file(&path);
        result
    })
    .await;
    let (file, size, events) = match made {
        Ok(Ok(made)) => made,
        Ok(Err(e)) => return e.respond(&state.metrics),
        Err(e) => return AdminError::Task(e).respond(&state.metrics),
    };
    tracing::info!(
        events,
        bytes = size,
        millis = started.elapsed().as_millis() as u64,
        "backup taken"
    );
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, size.to_string()),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"hookinbox-backup.redb\"".to_owned(),
            ),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}

/// Per source and event type: what the store holds (from its maintained
/// counts) and what this process has seen since it started.
#[utoipa::path(get, path = "/api/stats", tag = "operations",
    responses((status = 200, description = "Per source: stored now, and since the process started", body = api::Stats), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn stats(State(state): State<AdminState>) -> Response {
    let store = state.store.clone();
    let held = match tokio::task::spawn_blocking(move || store.stats()).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return AdminError::Store(e).respond(&state.metrics),
        Err(e) => return AdminError::Task(e).respond(&state.metrics),
    };
    let now = state.clock.now_ms();
    let mut names: Vec<String> = state.sources.clone();
    for name in held.keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let counts = |c: &crate::store::Counts| api::Counts {
        pending: c.pending - c.retrying,
        retrying: c.retrying,
        held: c.held,
        delivered: c.delivered,
        dead: c.dead,
        ignored: c.ignored,
        filtered: c.filtered,
    };
    let percentiles = |p: Option<(f64, f64)>| p.map(|(p50, p99)| api::Percentiles { p50, p99 });
    let lanes = state.delivery.destinations();
    let mut sources = std::collections::BTreeMap::new();
    for name in names {
        let s = held.get(&name).cloned().unwrap_or_default();
        let finished = s.counts.delivered + s.counts.dead;
        // Every destination of the source, quiet ones too, and any route
        // the store still holds deliveries of.
        let mut destinations: std::collections::BTreeMap<String, api::DestinationStats> = lanes
            .iter()
            .filter(|l| l.source == name)
            .map(|l| {
                let empty = api::DestinationStats {
                    stored: api::Counts::default(),
                    oldest_pending_age_ms: None,
                };
                (l.name.clone(), empty)
            })
            .collect();
        for (route, r) in &s.routes {
            destinations.insert(
                route.clone(),
                api::DestinationStats {
                    stored: counts(&r.counts),
                    oldest_pending_age_ms: r.oldest_pending_ms.map(|t| now.saturating_sub(t)),
                },
            );
        }
        sources.insert(
            name.clone(),
            api::SourceStats {
                stored: counts(&s.counts),
                by_type: s
                    .by_type
                    .iter()
                    .map(|(t, c)| (t.clone(), counts(c)))
                    .collect(),
                success_rate: (finished > 0).then(|| s.counts.delivered as f64 / finished as f64),
                oldest_pending_age_ms: s.oldest_pending_ms.map(|t| now.saturating_sub(t)),
                destinations,
                since_start: api::SinceStart {
                    received: state.metrics.received_count(&name),
                    duplicates: state.metrics.duplicate_count(&name),
                    rejected: state
                        .metrics
                        .rejected_by_reason(&name)
                        .into_iter()
                        .collect(),
                    ack_ms: percentiles(state.metrics.recent_ack_ms(&name)),
                    received_to_delivered_ms: percentiles(state.metrics.recent_delivery_ms(&name)),
                    by_type: state
                        .metrics
                        .by_type(&name)
                        .into_iter()
                        .map(|(t, received, duplicates)| {
                            (
                                t,
                                api::TypeSinceStart {
                                    received,
                                    duplicates,
                                },
                            )
                        })
                        .collect(),
                },
            },
        );
    }
    Json(api::Stats { sources }).into_response()
}

/// The last hours per minute, from the buckets kept with every change.
#[utoipa::path(get, path = "/api/activity", tag = "operations", params(api::ActivityQuery),
    responses((status = 200, description = "Per source and minute, oldest first", body = api::Activity),
              (status = 400, description = "hours outside 1–168", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn activity(
    State(state): State<AdminState>,
    query: Result<Query<api::ActivityQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let run = async {
        let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
        let hours = query.hours.unwrap_or(6);
        if !(1..=168).contains(&hours) {
            return Err(AdminError::BadRequest(
                "hours must be between 1 and 168 (the buckets keep a week)".into(),
            ));
        }
        let from = state.clock.now_ms().saturating_sub(hours * 3_600_000);
        let store = state.store.clone();
        let rows = tokio::task::spawn_blocking(move || store.activity(from)).await??;
        let mut minutes: Vec<api::MinuteCounts> = Vec::new();
        for (minute, source, kind, n) in rows {
            let at = Timestamp(minute * 60_000);
            let row = match minutes.last_mut() {
                Some(last) if last.minute == at && last.source == source => last,
                _ => {
                    minutes.push(api::MinuteCounts {
                        minute: at,
                        source,
                        received: 0,
                        duplicates: 0,
                        delivered: 0,
                        dead_lettered: 0,
                    });
                    minutes.last_mut().expect("just pushed")
                }
            };
            match kind {
                MinuteKind::Received => row.received += n,
                MinuteKind::Duplicate => row.duplicates += n,
                MinuteKind::Delivered => row.delivered += n,
                MinuteKind::DeadLettered => row.dead_lettered += n,
            }
        }
        Ok::<_, AdminError>(api::Activity { minutes })
    };
    match run.await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

#[utoipa::path(post, path = "/api/sweep", tag = "operations",
    responses((status = 200, description = "What the sweep removed", body = api::SweepResult), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn sweep_now(State(state): State<AdminState>) -> Response {
    match state.sweep.sweep_now().await {
        Ok(t) => Json(api::SweepResult {
            delivered: t.delivered,
            dead_or_ignored: t.dead_or_ignored,
            dedupe_keys: t.dedupe_keys,
            steps: t.steps,
            millis: t.millis,
        })
        .into_response(),
        Err(e) => AdminError::Store(e).respond(&state.metrics),
    }
}

#[utoipa::path(get, path = "/api/destinations", tag = "destinations",
    responses((status = 200, description = "Each destination's state", body = api::Destinations), (status = 401, description = "No or a wrong bearer token", body = api::ApiError)))]
async fn destinations(State(state): State<AdminState>) -> Response {
    let destinations = state
        .delivery
        .destinations()
        .into_iter()
        .map(|d| api::DestinationState {
            source: d.source.clone(),
            name: d.name,
            url: d.url,
            paused: d.paused,
            circuit: d.circuit.into(),
            in_flight: d.in_flight,
            max_concurrency: d.max_concurrency,
            last_failure: d.last_failure,
        })
        .collect();
    Json(api::Destinations { destinations }).into_response()
}

async fn set_paused(state: &AdminState, name: &str, paused: bool) -> Response {
    let result = if paused {
        state.delivery.pause(name).await
    } else {
        state.delivery.resume(name).await
    };
    match result {
        Ok(()) => Json(api::PauseResult {
            name: name.to_owned(),
            paused,
        })
        .into_response(),
        Err(PauseError::UnknownDestination(_)) => {
            AdminError::NotFound(format!("no destination named {name:?}")).respond(&state.metrics)
        }
        Err(PauseError::Store(e)) => AdminError::Store(e).respond(&state.metrics),
    }
}

#[utoipa::path(post, path = "/api/destinations/{name}/pause", tag = "destinations",
    params(("name" = String, Path, description = "The source's name")),
    responses((status = 200, description = "Paused: events accumulate", body = api::PauseResult),
              (status = 404, description = "No such destination", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn pause(State(state): State<AdminState>, Path(name): Path<String>) -> Response {
    set_paused(&state, &name, true).await
}

#[utoipa::path(post, path = "/api/destinations/{name}/resume", tag = "destinations",
    params(("name" = String, Path, description = "The source's name")),
    responses((status = 200, description = "Delivering again, oldest first", body = api::PauseResult),
              (status = 404, description = "No such destination", body = api::ApiError), (status = 401, description = "No or a wrong bearer token", body = api::ApiError), (status = 503, description = "The store cannot answer now (a full disk, a reopen): retry", body = api::ApiError)))]
async fn resume(State(state): State<AdminState>, Path(name): Path<String>) -> Response {
    set_paused(&state, &name, false).await
}
