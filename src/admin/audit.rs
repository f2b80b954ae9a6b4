//! The audit trail: every change a person asks of the admin API (the CLI
//! and the dashboard go through it too), and every one refused them, with
//! who, when, what, the note and how it ended; and `GET /api/audit`, which
//! lists it. Owns what of a request goes into its record: the path's
//! target, the query's and the JSON body's arguments and the note (which
//! requests are recorded, and as what action, is their route's, in
//! [`super::routes`]). Refuses to record a payload, a header or a token:
//! a record takes only those fields.
//!
//! A change is recorded durably before it runs, and its outcome before it
//! is answered, so a change answered 2xx is in the trail with its outcome,
//! and one the process stopped in is there without. When the record cannot
//! be written (a full disk, a standby) the change is refused with 503, not
//! run unrecorded; a backup and a promotion, which a standby serves, are
//! recorded once they are answered.

use std::collections::BTreeMap;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Query, RawPathParams, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, RequestExt};

use super::AdminState;
use super::error::{AdminError, StoreUnavailable, Told, Unauthorized};
use crate::api::{self, AuditAction, Role, Timestamp};
use crate::store::{AuditFilter, AuditOutcome, AuditRecord};

/// Most records one page returns.
const MAX_PAGE: usize = 500;
/// The longest request body read for its note and filter: admin bodies are
/// a note and a filter, far below this.
const MAX_BODY: usize = 1 << 20;
/// A note longer than this is cut in the record (the handlers refuse one
/// over 2,000 bytes; a refused request's is still recorded).
const MAX_NOTE: usize = 2_000;
/// A filter's value, or a target, longer than this is cut in the record.
const MAX_VALUE: usize = 256;

/// Who asks: a person's name and role (the token check's `Person`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Who<'a> {
    pub name: &'a str,
    pub role: Role,
}

/// Whether `action` is recorded before it runs. A backup, a promotion and
/// a reload are recorded after: a standby, which writes nothing of its
/// own, serves them.
fn recorded_before(action: AuditAction) -> bool {
    !matches!(
        action,
        AuditAction::Backup | AuditAction::Promote | AuditAction::Reload
    )
}

/// A bulk change's counts, left on its response for the trail.
#[derive(Clone, Copy, Debug)]
pub(super) struct Counted {
    pub matched: u64,
    pub changed: u64,
}

/// The record of `person`'s request, its outcome still open: the path's
/// target, and the query's and the JSON body's arguments (`body`: its
/// bytes, if read).
async fn record_of(
    state: &AdminState,
    who: Who<'_>,
    action: AuditAction,
    request: &mut Request,
    body: &[u8],
) -> AuditRecord {
    let target = request
        .extract_parts::<RawPathParams>()
        .await
        .ok()
        .and_then(|params| params.iter().next().map(|(_, value)| cut(value, MAX_VALUE)));
    let mut filter = BTreeMap::new();
    let mut note = None;
    let mut dry_run = false;
    // A query that does not parse is the handler's to refuse.
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(request.uri())
        .map(|Query(pairs)| pairs)
        .unwrap_or_default();
    for (key, value) in pairs {
        match key.as_str() {
            "note" => note = Some(cut(&value, MAX_NOTE)),
            _ => {
                filter.insert(cut(&key, MAX_VALUE), cut(&value, MAX_VALUE));
            }
        }
    }
    if let Ok(serde_json::Value::Object(json)) = serde_json::from_slice(body) {
        for (key, value) in json {
            match (key.as_str(), value) {
                ("note", serde_json::Value::String(text)) => note = Some(cut(&text, MAX_NOTE)),
                ("dry_run", serde_json::Value::Bool(yes)) => dry_run = yes,
                ("filter", serde_json::Value::Object(fields)) => {
                    for (key, value) in fields {
                        filter.insert(cut(&key, MAX_VALUE), cut(&text_of(value), MAX_VALUE));
                    }
                }
                // Anything else a body holds is the handler's to refuse.
                _ => {}
            }
        }
    }
    AuditRecord {
        at_ms: state.clock.now_ms(),
        person: who.name.to_owned(),
        role: who.role,
        action,
        target,
        filter: filter.into_iter().collect(),
        dry_run,
        note,
        outcome: None,
    }
}

fn text_of(value: serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    }
}

/// `text`, cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The outcome of a request answered `response`.
fn outcome_of(state: &AdminState, response: &Response) -> AuditOutcome {
    let counted = response.extensions().get::<Counted>();
    AuditOutcome {
        status: response.status().as_u16(),
        at_ms: state.clock.now_ms(),
        error: response.extensions().get::<Told>().map(|t| t.0.clone()),
        matched: counted.map(|c| c.matched),
        changed: counted.map(|c| c.changed),
    }
}

/// `request` with its body read whole, and the body's bytes: for its
/// record, and for the handler after it. `None`: longer than
/// [`MAX_BODY`] (the request is left with no body).
async fn read_whole(request: Request) -> (Request, Option<Bytes>) {
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(bytes) => (
            Request::from_parts(parts, Body::from(bytes.clone())),
            Some(bytes),
        ),
        Err(_) => (Request::from_parts(parts, Body::empty()), None),
    }
}

/// Runs a person's recorded request: the record first (a 503 if it cannot
/// be written, the change not run), then the request, then its outcome.
pub(super) async fn run(
    state: &AdminState,
    who: Who<'_>,
    action: AuditAction,
    request: Request,
    next: Next,
) -> Response {
    let (mut request, body) = match read_whole(request).await {
        (request, Some(body)) => (request, body),
        (_, None) => {
            return AdminError::TooLarge(format!(
                "an admin request's body is at most {MAX_BODY} bytes"
            ))
            .into_response();
        }
    };
    let mut record = record_of(state, who, action, &mut request, &body).await;
    let id = if recorded_before(action) {
        match state.store.audit(record.clone()).await {
            Ok(id) => Some(id),
            Err(e) => {
                tracing::error!(person = who.name, action = action.as_str(), error = %crate::store::Report(&e), "the audit trail cannot be written: the change is refused");
                return AdminError::Store(e).into_response();
            }
        }
    } else {
        None
    };
    let response = next.run(request).await;
    let outcome = outcome_of(state, &response);
    let written = match id {
        Some(id) => state.store.audit_outcome(id, outcome).await,
        None => {
            record.outcome = Some(outcome);
            state.store.audit(record).await.map(drop)
        }
    };
    if let Err(e) = written {
        tracing::error!(person = who.name, action = action.as_str(), error = %crate::store::Report(&e), "the audit trail cannot record how a request ended");
    }
    response
}

/// Records that `who` read whole a payload others see masked (`target`:
/// the event, or none for a stream, `filter` its filters), before the
/// answer goes out: a read that cannot be recorded is refused (503).
pub(super) async fn read_unredacted(
    state: &AdminState,
    who: Who<'_>,
    target: Option<String>,
    filter: Vec<(String, String)>,
) -> Result<(), AdminError> {
    let at_ms = state.clock.now_ms();
    let record = AuditRecord {
        at_ms,
        person: who.name.to_owned(),
        role: who.role,
        action: AuditAction::ReadUnredacted,
        target,
        filter,
        dry_run: false,
        note: None,
        outcome: Some(AuditOutcome {
            status: 200,
            at_ms,
            error: None,
            matched: None,
            changed: None,
        }),
    };
    state.store.audit(record).await.map(drop).map_err(|e| {
        tracing::error!(person = who.name, error = %crate::store::Report(&e), "the audit trail cannot be written: an unredacted read is refused");
        AdminError::Store(e)
    })
}

/// Records a request refused before it ran (the role, an expired token),
/// with what the caller is told; a record that cannot be written is
/// logged, and the refusal stands. The record holds what was asked, as an
/// accepted change's does: a bulk change's filter, the note. (A body too
/// large to read is recorded without them.)
pub(super) async fn refused(
    state: &AdminState,
    who: Who<'_>,
    action: AuditAction,
    request: Request,
    error: AdminError,
) -> Response {
    let (mut request, body) = read_whole(request).await;
    let body = body.unwrap_or_default();
    let mut record = record_of(state, who, action, &mut request, &body).await;
    let response = error.into_response();
    record.outcome = Some(outcome_of(state, &response));
    if let Err(e) = state.store.audit(record).await {
        tracing::error!(person = who.name, action = action.as_str(), error = %crate::store::Report(&e), "the audit trail cannot record a refusal");
    }
    response
}

/// `GET /api/audit`: the trail, newest first.
#[utoipa::path(get, path = "/api/audit", tag = "operations", params(api::AuditQuery),
    responses((status = 200, description = "A page of what people did and tried, newest first", body = api::AuditPage),
              (status = 400, description = "A bad filter", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn audit_trail(
    State(state): State<AdminState>,
    query: Result<Query<api::AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<api::AuditPage>, AdminError> {
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(AdminError::BadRequest(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    let filter = AuditFilter {
        person: query.person,
        action: query.action,
        from_ms: query.from.map(|t| t.0),
        to_ms: query.to.map(|t| t.0),
    };
    let page = state.store.audit_page(&filter, query.cursor, limit)?;
    Ok(Json(api::AuditPage {
        entries: page
            .entries
            .into_iter()
            .map(|e| {
                let r = e.record;
                api::AuditEntry {
                    id: e.id,
                    at: Timestamp(r.at_ms),
                    person: r.person,
                    role: r.role,
                    action: r.action,
                    target: r.target,
                    filter: r.filter.into_iter().collect(),
                    dry_run: r.dry_run,
                    note: r.note,
                    outcome: r.outcome.map(|o| api::AuditOutcome {
                        status: o.status,
                        at: Timestamp(o.at_ms),
                        error: o.error,
                        matched: o.matched,
                        changed: o.changed,
                    }),
                }
            })
            .collect(),
        next_cursor: page.next,
    }))
}

/// Where a request was routed: the path template the route table knows it by.
pub(super) fn route_of(request: &Request) -> String {
    request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default()
}
