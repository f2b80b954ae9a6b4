//! The admin API on the admin listener: JSON for people and scripts.
//!
//! Every path but `/healthz` and `/readyz` needs `Authorization: Bearer
//! <token>`, compared in constant time. Errors are `{"error", "reason"}`
//! with a status, counted in `hookinbox_admin_rejected{reason}` and logged
//! without the token or any body. Reads go to the store's snapshots; changes
//! (replay, ignore) go through the writer like everything else, and pause /
//! resume through the scheduler's handle.

use std::time::Duration;

use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::clock::{Clock, from_unix_ms, unix_ms};
use crate::config::Secret;
use crate::metrics::{AdminReason, Metrics};
use crate::schedule::{DeliveryHandle, PauseError};
use crate::store::schema::{Attempt, Status};
use crate::store::{Change, ChangeError, EventFilter, Store, StoreError, StoredEvent};
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
        .route("/api/events/{id}", get(show_event))
        .route("/api/events/{id}/replay", post(replay_event))
        .route("/api/events/{id}/ignore", post(ignore_event))
        .route("/api/replay", post(bulk_replay))
        .route("/api/ignore", post(bulk_ignore))
        .route("/api/stats", get(stats))
        .route("/api/sweep", post(sweep_now))
        .route("/api/backup", get(backup))
        .route("/api/destinations", get(destinations))
        .route("/api/destinations/{name}/pause", post(pause))
        .route("/api/destinations/{name}/resume", post(resume))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
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
            AdminError::Unauthorized => (StatusCode::UNAUTHORIZED, AdminReason::Unauthorized),
            AdminError::NotFound(_) => (StatusCode::NOT_FOUND, AdminReason::NotFound),
            AdminError::BadRequest(_) => (StatusCode::BAD_REQUEST, AdminReason::BadRequest),
            AdminError::Conflict(_) => (StatusCode::CONFLICT, AdminReason::Conflict),
            AdminError::Store(e) if e.is_transient() => (
                StatusCode::SERVICE_UNAVAILABLE,
                AdminReason::StoreUnavailable,
            ),
            AdminError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, AdminReason::StoreError),
            AdminError::Task(_) | AdminError::Backup(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                AdminReason::InternalError,
            ),
        };
        metrics.admin_rejected(code);
        // The public error code is the counter's label, so the two never drift.
        let code = code.as_str();
        let reason = self.to_string();
        if status.is_server_error() {
            // The whole chain in the log; the caller gets the top message only.
            let cause = crate::store::Report(&self);
            tracing::error!(status = status.as_u16(), %cause, "admin request failed");
        } else {
            tracing::warn!(status = status.as_u16(), %reason, "admin request refused");
        }
        let mut response = (status, Json(json!({"error": code, "reason": reason}))).into_response();
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
    (
        status,
        Json(json!({
            "ready": status == StatusCode::OK,
            "store": store_text,
            "scheduler": if scheduler_ok { "running" } else { "stopped" },
        })),
    )
        .into_response()
}

async fn metrics(State(state): State<AdminState>) -> Response {
    // Gauges of what the store holds are read at scrape time.
    let store = state.store.clone();
    if let Ok(Ok(held)) = tokio::task::spawn_blocking(move || store.stats()).await {
        let now = state.clock.now_ms();
        for name in &state.sources {
            let s = held.get(name).cloned().unwrap_or_default();
            let oldest = s.oldest_pending_ms.map_or(0, |t| now.saturating_sub(t));
            state.metrics.set_source_gauges(
                name,
                s.counts.pending,
                s.counts.retrying,
                s.counts.dead,
                Duration::from_millis(oldest),
            );
        }
    }
    for d in state.delivery.destinations() {
        state.metrics.set_circuit_state(&d.name, d.circuit.into());
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    source: Option<String>,
    status: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    event_id: Option<String>,
    /// RFC 3339.
    from: Option<String>,
    to: Option<String>,
    cursor: Option<u64>,
    limit: Option<usize>,
}

fn parse_status(text: &str) -> Result<Status, AdminError> {
    [
        Status::Pending,
        Status::Held,
        Status::Delivered,
        Status::Dead,
        Status::Ignored,
    ]
    .into_iter()
    .find(|s| s.as_str() == text)
    .ok_or_else(|| {
        AdminError::BadRequest(format!(
            "status {text:?}: expected pending, held, delivered, dead or ignored"
        ))
    })
}

fn parse_time(key: &str, text: &str) -> Result<u64, AdminError> {
    humantime::parse_rfc3339_weak(text)
        .map(unix_ms)
        .map_err(|_| {
            AdminError::BadRequest(format!(
                "{key} {text:?}: expected an RFC 3339 time like 2026-11-22T10:00:00Z"
            ))
        })
}

/// A filter as written in a query or a bulk body.
struct FilterFields {
    source: Option<String>,
    status: Option<String>,
    event_type: Option<String>,
    event_id: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

impl FilterFields {
    fn filter(self) -> Result<EventFilter, AdminError> {
        Ok(EventFilter {
            source: self.source,
            status: self.status.as_deref().map(parse_status).transpose()?,
            event_type: self.event_type,
            event_id: self.event_id,
            from_ms: self
                .from
                .as_deref()
                .map(|t| parse_time("from", t))
                .transpose()?,
            to_ms: self
                .to
                .as_deref()
                .map(|t| parse_time("to", t))
                .transpose()?,
        })
    }
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(from_unix_ms(ms)).to_string()
}

fn summary(e: &StoredEvent) -> Value {
    let s = &e.state;
    json!({
        "id": e.id,
        "source": s.source,
        "event_id": e.record.event_id,
        "event_type": e.record.event_type,
        "status": s.status.as_str(),
        "received_at": rfc3339(e.record.received_at_ms),
        "attempts": s.attempts,
        "next_attempt_at": s.due_ms.map(rfc3339),
        "delivered_at": s.delivered_ms.map(rfc3339),
        "dead_letter": s.dead.as_ref().map(|d| json!({
            "reason": d.reason,
            "at": rfc3339(d.at_ms),
            "last_status": d.last_status,
        })),
        "note": s.note.as_ref().map(|n| json!({"text": n.text, "at": rfc3339(n.at_ms)})),
        "replays": s.replays,
    })
}

fn attempt_json(n: usize, a: &Attempt) -> Value {
    json!({
        "n": n + 1,
        "started_at": rfc3339(a.started_ms),
        "latency_ms": a.latency_ms,
        "outcome": a.class.as_str(),
        "status": a.status,
        "error": a.error,
        "response_snippet": a.response_snippet,
    })
}

async fn list_events(
    State(state): State<AdminState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let run = || -> Result<Value, AdminError> {
        let Query(q) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
        let filter = FilterFields {
            source: q.source,
            status: q.status,
            event_type: q.event_type,
            event_id: q.event_id,
            from: q.from,
            to: q.to,
        }
        .filter()?;
        let limit = q.limit.unwrap_or(50);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(AdminError::BadRequest(format!(
                "limit must be between 1 and {MAX_PAGE}"
            )));
        }
        let (events, cursor) = state.store.list(&filter, q.cursor, limit)?;
        Ok(json!({
            "events": events.iter().map(summary).collect::<Vec<_>>(),
            "next_cursor": cursor,
        }))
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

async fn show_event(State(state): State<AdminState>, Path(id): Path<String>) -> Response {
    let run = || -> Result<Value, AdminError> {
        let e = find(&state, &id)?;
        let attempts = state.store.attempts(e.seq)?;
        let mut body = summary(&e);
        let payload = match std::str::from_utf8(&e.record.body) {
            Ok(text) => json!({"encoding": "text", "data": text}),
            Err(_) => json!({
                "encoding": "base64",
                "data": base64::engine::general_purpose::STANDARD.encode(&e.record.body),
            }),
        };
        body["content_type"] = json!(e.record.content_type);
        body["headers"] = json!(
            e.record
                .headers
                .iter()
                .map(|(k, v)| json!([k, v]))
                .collect::<Vec<_>>()
        );
        body["payload"] = payload;
        body["attempt_history"] = json!(
            attempts
                .iter()
                .enumerate()
                .map(|(n, a)| attempt_json(n, a))
                .collect::<Vec<_>>()
        );
        Ok(body)
    };
    match run() {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

async fn change(state: &AdminState, id: &str, change: Change) -> Result<Value, AdminError> {
    let e = find(state, id)?;
    let done = state
        .store
        .change(e.seq, change.clone(), state.clock.now_ms())
        .await?;
    match done {
        Ok(()) => {}
        Err(ChangeError::NotFound) => return Err(AdminError::NotFound(format!("no event {id:?}"))),
        Err(refused) => return Err(AdminError::Conflict(refused.to_string())),
    }
    let action = match change {
        Change::Replay => {
            state.metrics.replayed(&e.state.source);
            "replayed"
        }
        Change::Ignore { .. } => {
            state.metrics.ignored(&e.state.source);
            "ignored"
        }
    };
    tracing::info!(source = %e.state.source, id, event_id = %e.record.event_id, action, "event changed by an operator");
    let after = find(state, id)?;
    Ok(summary(&after))
}

async fn replay_event(State(state): State<AdminState>, Path(id): Path<String>) -> Response {
    match change(&state, &id, Change::Replay).await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

#[derive(Debug, Deserialize)]
struct IgnoreBody {
    note: Option<String>,
}

async fn ignore_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: Result<Json<IgnoreBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let note = match body {
        Ok(Json(IgnoreBody { note: Some(note) })) if !note.trim().is_empty() => note,
        Ok(_) => {
            return AdminError::BadRequest(
                "a note is required: {\"note\": \"why this event is ignored\"}".into(),
            )
            .respond(&state.metrics);
        }
        Err(e) => {
            return AdminError::BadRequest(format!(
                "a note is required as JSON {{\"note\": \"why this event is ignored\"}}: {}",
                e.body_text()
            ))
            .respond(&state.metrics);
        }
    };
    if note.len() > 2000 {
        return AdminError::BadRequest("the note is longer than 2000 bytes".into())
            .respond(&state.metrics);
    }
    match change(&state, &id, Change::Ignore { note }).await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

/// The body of a bulk replay or ignore: a filter, and `dry_run` to count first.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkBody {
    source: Option<String>,
    status: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
    event_id: Option<String>,
    from: Option<String>,
    to: Option<String>,
    #[serde(default)]
    dry_run: bool,
    note: Option<String>,
}

impl BulkBody {
    fn filter(&self) -> Result<EventFilter, AdminError> {
        FilterFields {
            source: self.source.clone(),
            status: self.status.clone(),
            event_type: self.event_type.clone(),
            event_id: self.event_id.clone(),
            from: self.from.clone(),
            to: self.to.clone(),
        }
        .filter()
    }
}

/// Every event matching `filter`, up to [`MAX_BULK`].
fn matching(state: &AdminState, filter: &EventFilter) -> Result<Vec<StoredEvent>, AdminError> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let (page, next) = state.store.list(filter, cursor, MAX_PAGE)?;
        out.extend(page);
        if out.len() > MAX_BULK {
            return Err(AdminError::BadRequest(format!(
                "more than {MAX_BULK} events match: narrow the filter (source, status, from, to)"
            )));
        }
        match next {
            Some(c) => cursor = Some(c),
            None => return Ok(out),
        }
    }
}

async fn bulk(
    state: &AdminState,
    body: Result<Json<BulkBody>, axum::extract::rejection::JsonRejection>,
    replay: bool,
) -> Result<Value, AdminError> {
    let Json(body) = body.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let filter = body.filter()?;
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
        match body.note.as_deref().map(str::trim) {
            Some(note) if !note.is_empty() && note.len() <= 2000 => Change::Ignore {
                note: note.to_owned(),
            },
            _ => {
                return Err(AdminError::BadRequest(
                    "a note is required (at most 2000 bytes): {\"note\": \"why these events are ignored\"}".into(),
                ));
            }
        }
    };
    let events = matching(state, &filter)?;
    if body.dry_run {
        return Ok(json!({"dry_run": true, "matched": events.len()}));
    }
    let now = state.clock.now_ms();
    let mut done = 0;
    let mut refused = Vec::new();
    // 256 at a time in flight: the writer group-commits what is queued.
    let mut results = Vec::with_capacity(events.len());
    for chunk in events.chunks(256) {
        let calls: Vec<_> = chunk
            .iter()
            .map(|e| {
                let (store, change, seq) = (state.store.clone(), change.clone(), e.seq);
                tokio::spawn(async move { store.change(seq, change, now).await })
            })
            .collect();
        for call in calls {
            results.push(call.await?);
        }
    }
    for (e, result) in events.iter().zip(results) {
        match result? {
            Ok(()) => {
                done += 1;
                if replay {
                    state.metrics.replayed(&e.state.source);
                } else {
                    state.metrics.ignored(&e.state.source);
                }
            }
            Err(why) => refused.push(json!({"id": e.id, "reason": why.to_string()})),
        }
    }
    let action = if replay { "replayed" } else { "ignored" };
    tracing::info!(
        matched = events.len(),
        changed = done,
        refused = refused.len(),
        action,
        "bulk change by an operator"
    );
    refused.truncate(100);
    Ok(json!({"dry_run": false, "matched": events.len(), action: done, "refused": refused}))
}

async fn bulk_replay(
    State(state): State<AdminState>,
    body: Result<Json<BulkBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    match bulk(&state, body, true).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

async fn bulk_ignore(
    State(state): State<AdminState>,
    body: Result<Json<BulkBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    match bulk(&state, body, false).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.respond(&state.metrics),
    }
}

/// Streams a consistent copy of the database (a redb file). The copy is
/// made from one read snapshot into a private temp file in the data dir,
/// which is unlinked as soon as it is open: nothing is left behind.
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

/// Per source and event type: what the store holds (counts by status,
/// oldest pending, DLQ size, received → delivered latency) and what this
/// process has seen since it started (received, duplicates, rejected by
/// reason, recent ack latency).
async fn stats(State(state): State<AdminState>) -> Response {
    let store = state.store.clone();
    let held = match tokio::task::spawn_blocking(move || store.stats()).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return AdminError::Store(e).respond(&state.metrics),
        Err(e) => return AdminError::Task(e).respond(&state.metrics),
    };
    let now = state.clock.now_ms();
    let mut sources = serde_json::Map::new();
    let mut names: Vec<String> = state.sources.clone();
    for name in held.keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    for name in names {
        let s = held.get(&name).cloned().unwrap_or_default();
        let finished = s.counts.delivered + s.counts.dead;
        let rejected: serde_json::Map<String, Value> = state
            .metrics
            .rejected_by_reason(&name)
            .into_iter()
            .map(|(r, n)| (r.as_str().to_owned(), json!(n)))
            .collect();
        sources.insert(
            name.clone(),
            json!({
                "stored": s.counts,
                "dlq_size": s.counts.dead,
                "success_rate": (finished > 0).then(|| s.counts.delivered as f64 / finished as f64),
                "oldest_pending_age_ms": s.oldest_pending_ms.map(|t| now.saturating_sub(t)),
                "received_to_delivered_ms": state.metrics.recent_delivery_ms(&name).map(|(p50, p99)| json!({"p50": p50, "p99": p99})),
                "by_type": s.by_type,
                "since_start": {
                    "received": state.metrics.received_count(&name),
                    "duplicates": state.metrics.duplicate_count(&name),
                    "rejected": rejected,
                    "ack_ms": state.metrics.recent_ack_ms(&name).map(|(p50, p99)| json!({"p50": p50, "p99": p99})),
                },
            }),
        );
    }
    Json(json!({"sources": sources})).into_response()
}

async fn sweep_now(State(state): State<AdminState>) -> Response {
    match state.sweep.sweep_now().await {
        Ok(totals) => Json(json!({"swept": totals})).into_response(),
        Err(e) => AdminError::Store(e).respond(&state.metrics),
    }
}

async fn destinations(State(state): State<AdminState>) -> Response {
    let list: Vec<Value> = state
        .delivery
        .destinations()
        .into_iter()
        .map(|d| {
            json!({
                "name": d.name,
                "url": d.url,
                "paused": d.paused,
                "circuit": d.circuit.as_str(),
                "in_flight": d.in_flight,
                "max_concurrency": d.max_concurrency,
            })
        })
        .collect();
    Json(json!({"destinations": list})).into_response()
}

async fn set_paused(state: &AdminState, name: &str, paused: bool) -> Response {
    let result = if paused {
        state.delivery.pause(name).await
    } else {
        state.delivery.resume(name).await
    };
    match result {
        Ok(()) => Json(json!({"name": name, "paused": paused})).into_response(),
        Err(PauseError::UnknownDestination(_)) => {
            AdminError::NotFound(format!("no destination named {name:?}")).respond(&state.metrics)
        }
        Err(PauseError::Store(e)) => AdminError::Store(e).respond(&state.metrics),
    }
}

async fn pause(State(state): State<AdminState>, Path(name): Path<String>) -> Response {
    set_paused(&state, &name, true).await
}

async fn resume(State(state): State<AdminState>, Path(name): Path<String>) -> Response {
    set_paused(&state, &name, false).await
}
