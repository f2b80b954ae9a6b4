//! `GET /api/events/stream`: each event as it is stored, as Server-Sent
//! Events, oldest first, from a cursor, after a `ready` event that names
//! the cursor. A listener waits on the store's
//! watch of the newest event ([`crate::store::Store::stored`]) and reads
//! only the rows after its cursor: it costs nothing while nothing
//! arrives, and N listeners are N short reads, not N scans.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::AdminState;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use super::events::payload_of;
use super::wire::{status_of, summary};
use crate::api::{self, StreamQuery};
use crate::store::{EventFilter, Store, StoredEvent};

/// Events one read of the store takes at most.
const READ: usize = 256;
/// A comment line this often keeps proxies and the client's timeout from
/// closing an idle stream, and finds a client that hung up: the listener
/// keeps half-closed connections (see `listener`), so only a write fails on
/// one that is gone, the second after it closed: within two of these.
const HEARTBEAT: Duration = Duration::from_secs(5);

#[utoipa::path(get, path = "/api/events/stream", tag = "events", params(StreamQuery,
        ("Last-Event-ID" = Option<String>, Header, description = "Start after this event (as `after`)")),
    responses((status = 200, description = "Server-Sent Events: first a `ready` event whose `id:` is the position it starts after (data: {\"after\": id}), then each stored event matching the filters as an `event` with its id as `id:` and a StreamedEvent as `data:`, oldest first; a comment every 5 s", content_type = "text/event-stream", body = api::StreamedEvent),
              (status = 400, description = "A bad filter or cursor", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn stream_events(
    State(state): State<AdminState>,
    headers: HeaderMap,
    query: Result<Query<StreamQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<impl axum::response::IntoResponse, AdminError> {
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let filter = EventFilter {
        source: query.source.clone(),
        destination: query.destination.clone(),
        status: query.status.map(status_of),
        event_type: query.event_type.clone(),
        ..Default::default()
    };
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    let store = state.store.clone();
    let mut stored = store.stored();
    let after = query.after.as_deref().or(last_event_id);
    let cursor = match (after, query.since) {
        (Some(_), Some(_)) => {
            return Err(AdminError::BadRequest(
                "give after (or Last-Event-ID) or since, not both".to_owned(),
            ));
        }
        (Some(id), None) => store.parse_public_id(id).ok_or_else(|| {
            AdminError::BadRequest(format!("after {id:?}: not an id of this inbox's events"))
        })?,
        (None, Some(since)) => {
            // The watch first: an event answered meanwhile is read too.
            stored.borrow_and_update();
            let read = store.clone();
            tokio::task::spawn_blocking(move || read.cursor_at(since.0)).await??
        }
        (None, None) => *stored.borrow_and_update(),
    };
    let with_payload = query.payload.unwrap_or(false);
    let stopping = state.stopping.clone();
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(READ);
    // Where it starts, first: a client that saves the last id it saw
    // resumes from here even when no event came before it went away.
    let start = store.public_id(cursor);
    let ready = Event::default()
        .event("ready")
        .id(start.clone())
        .data(serde_json::json!({ "after": start }).to_string());
    tx.try_send(Ok(ready)).expect("a new channel has room");
    let open = state.metrics.event_stream_opened();
    tokio::spawn(async move {
        let _open = open;
        let mut cursor = cursor;
        loop {
            let newest = *stored.borrow_and_update();
            // Read up to what is answered as stored; then wait for more.
            while cursor < newest {
                let (read, filter) = (store.clone(), filter.clone());
                let found =
                    tokio::task::spawn_blocking(move || read.events_after(&filter, cursor, READ))
                        .await;
                let (events, next) = match found {
                    Ok(Ok(found)) => found,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "the event stream cannot read the store; closing it");
                        return;
                    }
                    Err(_) => return,
                };
                for e in &events {
                    if tx.send(Ok(event(&store, e, with_payload))).await.is_err() {
                        return;
                    }
                }
                let before = cursor;
                cursor = next.max(cursor);
                if cursor == before {
                    // No row after it yet (`newest` may be a delivery key
                    // of the last event): wait for the next change.
                    break;
                }
            }
            tokio::select! {
                changed = stored.changed() => if changed.is_err() { return },
                () = tx.closed() => return,
                () = stopping.cancelled() => return,
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(HEARTBEAT)))
}

/// One stored event as an SSE event.
fn event(store: &Store, e: &StoredEvent, with_payload: bool) -> Event {
    let record = &e.record;
    let streamed = api::StreamedEvent {
        event: summary(e),
        payload: with_payload.then(|| payload_of(&record.body)),
        content_type: with_payload.then(|| record.content_type.clone()).flatten(),
        headers: with_payload.then(|| record.headers.clone()),
    };
    let data = serde_json::to_string(&streamed).unwrap_or_default();
    Event::default()
        .event("event")
        .id(store.public_id(e.seq))
        .data(data)
}
