//! `/api/events`: the list and search of events, one event's detail, and a
//! person's changes to one event (replay, ignore, erase). Owns the query's
//! filter and which deliveries a change goes to; refuses bulk changes
//! (`bulk`) and any write but through the store's writer.

use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use base64::Engine;

use super::AdminState;
use super::audit::read_unredacted;
use super::auth::Person;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use super::redaction::{SearchView, Sight};
use super::wire::{attempt_on_wire, status_of, summary};
use crate::api::{self, EventOrigin, EventQuery, Timestamp};
use crate::store::schema::Status;
use crate::store::{
    Budget, Change, ChangeError, Delivery, EventFilter, PayloadMatch, SeenAs, StoredEvent,
};

/// Most events one list call returns.
const MAX_PAGE: usize = 500;

/// The store's filter and payload match of a query.
pub(super) fn filter_of(
    query: &EventQuery,
    seen_as: Option<SeenAs>,
) -> Result<(EventFilter, PayloadMatch), AdminError> {
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
        seen_as,
    };
    Ok((filter, payload))
}

/// `GET /api/events`: a page of a list, or of a search when the query looks
/// inside payloads.
#[utoipa::path(get, path = "/api/events", tag = "events", params(EventQuery),
    responses((status = 200, description = "A page, newest first; a search when q or match is given", body = api::EventPage),
              (status = 400, description = "A bad filter", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn list_events(
    State(state): State<AdminState>,
    Extension(person): Extension<Person>,
    query: Result<Query<EventQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<api::EventPage>, AdminError> {
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let (filter, payload) = filter_of(&query, seen_as(&state, person.role))?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(AdminError::BadRequest(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    if !query.is_search() {
        let (events, cursor) = state.store.list(&filter, query.cursor, limit)?;
        return Ok(Json(api::EventPage {
            events: events.iter().map(summary).collect(),
            next_cursor: cursor,
            search: None,
        }));
    }
    let budget = Budget {
        events: api::SEARCH_EVENTS,
        time: api::SEARCH_TIME,
    };
    let page = state
        .store
        .search(&filter, &payload, query.cursor, limit, budget)?;
    Ok(Json(api::EventPage {
        events: page.events.iter().map(summary).collect(),
        next_cursor: page.cursor,
        search: Some(api::SearchProgress {
            examined: page.examined,
            scanned_back_to: page.scanned_back_to_ms.map(Timestamp),
        }),
    }))
}

/// What a search by `role` tests payloads on, when some source masks
/// values for it: a search never matches inside a value its caller may
/// not read.
pub(super) fn seen_as(state: &AdminState, role: api::Role) -> Option<SeenAs> {
    let access = state.access();
    access
        .redactions
        .masks_for(role)
        .then(|| SeenAs(std::sync::Arc::new(SearchView { access, role })))
}

/// A payload on the wire: as text when it is UTF-8, else base64.
pub(super) fn payload_of(body: &[u8]) -> api::Payload {
    match std::str::from_utf8(body) {
        Ok(text) => api::Payload {
            encoding: api::PayloadEncoding::Text,
            data: text.to_owned(),
        },
        Err(_) => api::Payload {
            encoding: api::PayloadEncoding::Base64,
            data: base64::engine::general_purpose::STANDARD.encode(body),
        },
    }
}

async fn find(state: &AdminState, id: &str) -> Result<StoredEvent, AdminError> {
    let missing = || AdminError::NotFound(format!("no event {id:?}"));
    let seq = state.store.parse_public_id(id).ok_or_else(missing)?;
    state.store.get_acked(seq).await?.ok_or_else(missing)
}

#[utoipa::path(get, path = "/api/events/{id}", tag = "events",
    params(("id" = String, Path, description = "hookinbox's id (the webhook-id)")),
    responses((status = 200, description = "The event, its payload and every attempt", body = api::EventDetail),
              (status = 404, description = "No such event", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn show_event(
    State(state): State<AdminState>,
    Extension(person): Extension<Person>,
    Path(id): Path<String>,
) -> Result<Json<api::EventDetail>, AdminError> {
    let e = find(&state, &id).await?;
    let access = state.access();
    let sight = access.redactions.sight(&e.record.source, person.role);
    let shown = sight.show(&e.record.body);
    if sight == Sight::Unmasked && e.erased.is_none() {
        read_unredacted(&state, person.who(), Some(e.id.clone()), Vec::new()).await?;
    }
    let mut attempt_history = Vec::new();
    for d in &e.deliveries {
        let attempts = state.store.attempts(d.key)?;
        // A replay starts its attempts at 1 again.
        let mut in_round = (0, 0);
        for (n, a) in attempts.iter().enumerate() {
            in_round = match in_round {
                (round, k) if round == a.round => (round, k + 1),
                _ => (a.round, 1),
            };
            attempt_history.push(attempt_on_wire(&e, &d.state.source, n, in_round.1, a));
        }
    }
    attempt_history.sort_by_key(|a| a.started_at);
    let payload = payload_of(shown.bytes());
    let trace = state.telemetry.trace_of(&e.id);
    Ok(Json(api::EventDetail {
        summary: summary(&e),
        origin: match crate::standard_webhooks::origin_of(&e.record.headers) {
            Some(crate::standard_webhooks::RECONCILED) => EventOrigin::Reconciled,
            _ => EventOrigin::Received,
        },
        content_type: e.record.content_type.clone(),
        headers: e.record.headers.clone(),
        payload,
        redacted: !shown.is_raw(),
        attempt_history,
        trace_id: trace.as_ref().map(|t| t.trace_id.clone()),
        trace_url: trace.and_then(|t| t.url),
    }))
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
    let e = find(state, id).await?;
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
    let after = find(state, id).await?;
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
              (status = 409, description = "Pending, held or in flight", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn replay_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    query: Result<Query<api::DeliveryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<api::EventSummary>, AdminError> {
    let destination = destination_of(query)?;
    change(&state, &id, Change::Replay, destination.as_deref())
        .await
        .map(Json)
}

/// A person's note: required, trimmed, at most 2000 bytes.
pub(super) fn note_text(note: Option<&str>, what: &str) -> Result<String, AdminError> {
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
              (status = 409, description = "Delivered, already ignored, or in flight", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn ignore_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    query: Result<Query<api::DeliveryQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Json<api::NoteRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<api::EventSummary>, AdminError> {
    let destination = destination_of(query)?;
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
) -> Result<Json<api::EventSummary>, AdminError> {
    let Json(body) = body.map_err(|e| {
        AdminError::BadRequest(format!(
            "a note is required as JSON {{\"note\": \"why {why}\"}}: {}",
            e.body_text()
        ))
    })?;
    let note = note_text(Some(&body.note), why)?;
    change(state, id, change_with(note), destination)
        .await
        .map(Json)
}

/// `DELETE /api/events/{id}` with a note: the payload and headers go for
/// good (a privacy request); the id, times, history, the note and the dedupe
/// key stay, so a provider's resend is still answered as a duplicate.
#[utoipa::path(delete, path = "/api/events/{id}", tag = "events",
    params(("id" = String, Path, description = "hookinbox's id")), request_body = api::NoteRequest,
    responses((status = 200, description = "Payload and headers deleted; the rest kept", body = api::EventSummary),
              (status = 400, description = "No note", body = api::ApiError),
              (status = 404, description = "No such event", body = api::ApiError),
              (status = 409, description = "Already erased, or in flight", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn erase_event(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    body: Result<Json<api::NoteRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<api::EventSummary>, AdminError> {
    noted_change(&state, &id, None, body, "the payload is deleted", |note| {
        Change::Erase { note }
    })
    .await
}
