//! `POST /api/replay` and `POST /api/ignore`: one change to every event a
//! filter matches, the way dead letters are redriven (or set aside) after an
//! outage. Owns the bulk body and the batching of changes to the writer;
//! refuses more than `MAX_BULK` matches and an empty filter.

use axum::extract::State;
use axum::{Extension, Json};

use super::AdminState;
use super::audit::Counted;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use super::events::{filter_of, note_text};
use crate::api;
use crate::store::schema;
use crate::store::{Change, ChangeError, EventFilter};

/// Most events one bulk replay or ignore touches; narrow the filter for more.
const MAX_BULK: usize = 100_000;
/// Most payloads a bulk change with `q` or `match` reads to find its
/// events (≈ 10 s at 10 µs each); narrow the filter (from, to) for more.
const MAX_EXAMINED: u64 = 1_000_000;

/// The keys of a bulk filter, which the first bulk body (before 0.1.0's
/// typed contract) took at its top level.
const FILTER_KEYS: [&str; 9] = [
    "source",
    "destination",
    "status",
    "type",
    "event_id",
    "from",
    "to",
    "q",
    "match",
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
    role: api::Role,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
    replay: bool,
) -> Result<api::BulkResult, AdminError> {
    let Json(body) = body.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let body = bulk_request(body)?;
    if body.filter.cursor.is_some() || body.filter.limit.is_some() {
        return Err(AdminError::BadRequest(
            "a bulk filter takes source, destination, status, type, event_id, from, to, q and match (no cursor or limit)".into(),
        ));
    }
    let (filter, payload) = filter_of(&body.filter, super::events::seen_as(state, role))?;
    if filter == EventFilter::default() && payload.is_empty() {
        return Err(AdminError::BadRequest(
            "give a filter (source, status, type, event_id, from, to, q, match): an empty one would take every event".into(),
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
    // Keys and routes only: without q or match, 100k matches never load
    // 100k payloads; with one, each candidate's payload is read once.
    let store = state.store.clone();
    let found = tokio::task::spawn_blocking(move || {
        store.matching_ids(&filter, &payload, MAX_BULK, MAX_EXAMINED)
    })
    .await??;
    if found.cut {
        return Err(AdminError::BadRequest(format!(
            "q or match looked inside {MAX_EXAMINED} payloads without reaching the end of the filter: narrow it (from, to, source, type)"
        )));
    }
    let (matched, more) = (found.ids, found.more);
    let examined = body.filter.is_search().then_some(found.examined);
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
            examined,
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
        examined,
    })
}

#[utoipa::path(post, path = "/api/replay", tag = "events", request_body = api::BulkRequest,
    responses((status = 200, description = "What matched, changed and was refused", body = api::BulkResult),
              (status = 400, description = "A bad or empty filter, a note, or more than 100,000 matches", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn bulk_replay(
    State(state): State<AdminState>,
    Extension(person): Extension<super::auth::Person>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<(Extension<Counted>, Json<api::BulkResult>), AdminError> {
    bulk(&state, person.role, body, true).await.map(counted)
}

/// The answer, with its counts left for the audit trail.
fn counted(result: api::BulkResult) -> (Extension<Counted>, Json<api::BulkResult>) {
    let counts = Counted {
        matched: result.matched,
        changed: result.changed,
    };
    (Extension(counts), Json(result))
}

#[utoipa::path(post, path = "/api/ignore", tag = "events", request_body = api::BulkRequest,
    responses((status = 200, description = "What matched, changed and was refused", body = api::BulkResult),
              (status = 400, description = "A bad or empty filter, no note, or more than 100,000 matches", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn bulk_ignore(
    State(state): State<AdminState>,
    Extension(person): Extension<super::auth::Person>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<(Extension<Counted>, Json<api::BulkResult>), AdminError> {
    bulk(&state, person.role, body, false).await.map(counted)
}
