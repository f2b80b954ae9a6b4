//! `GET /api/events/stream`: each event as it is stored, as Server-Sent
//! Events, oldest first, from a cursor, after a `ready` event that names
//! the cursor. New events come from the hub (`hub.rs`): one read and one
//! encoding per event for every stream open. A stream behind the hub (it
//! starts from an older cursor, or fell behind the broadcast) reads the
//! store after its own cursor until it is back. Nothing is read while
//! nothing arrives or nobody listens; N streams are N filters and N
//! writes per batch, never N reads of each event.

mod hub;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, header};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::AdminState;
use super::audit::read_unredacted;
use super::auth::Person;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use super::events::payload_of;
use super::redaction::Sight;
use super::wire::{status_of, summary_at};
use crate::api::{self, Role, StreamQuery};
use crate::store::schema::EventState;
use crate::store::{EventFilter, Store, StoredEvent};
pub use hub::{HubReader, Streams};

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
    Extension(person): Extension<Person>,
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
            let read = store.clone();
            tokio::task::spawn_blocking(move || read.cursor_at(since.0)).await??
        }
        (None, None) => *store.stored().borrow(),
    };
    let with_payload = query.payload.unwrap_or(false);
    if with_payload
        && state
            .access()
            .redactions
            .unmasks_any(query.source.as_deref(), person.role)
    {
        let filter = [
            ("payload", "true"),
            ("source", query.source.as_deref().unwrap_or("")),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        read_unredacted(&state, person.who(), None, filter).await?;
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(16);
    // Where it starts, first: a client that saves the last id it saw
    // resumes from here even when no event came before it went away.
    let start = store.public_id(cursor);
    let ready = format!(
        "event: ready\nid: {start}\ndata: {}\n\n",
        serde_json::json!({ "after": start })
    );
    tx.try_send(Ok(Bytes::from(ready)))
        .expect("a new channel has room");
    let follow = Follow {
        store,
        streams: state.streams.clone(),
        filter,
        payload_for: with_payload.then_some(person.role),
        access: state.access.clone(),
        cursor,
        tx,
        _open: state.metrics.event_stream_opened(),
    };
    tokio::spawn(follow.run(state.stopping.clone()));
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(ReceiverStream::new(rx)),
    ))
}

/// One open stream: its filter, its cursor and where its text goes.
struct Follow {
    store: Store,
    streams: Streams,
    filter: EventFilter,
    /// With payloads: as the stream's caller, of this role, may read them.
    payload_for: Option<Role>,
    /// Whose payloads are masked for whom, as the last reload left it.
    access: Arc<arc_swap::ArcSwap<super::Access>>,
    /// The seq after which the next event is sent.
    cursor: u64,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    /// Counted in `hookinbox_event_streams` while it lives.
    _open: crate::metrics::StreamOpen,
}

/// Why a stream's task ends or goes back to reading the store.
enum Stop {
    /// The client went away, the app stops, or the store cannot be read.
    Done,
    /// Behind the broadcast: read the store up to the hub again.
    Behind,
}

impl Follow {
    async fn run(mut self, stopping: tokio_util::sync::CancellationToken) {
        let mut heartbeat =
            tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
        loop {
            // Subscribed before the hub's head is read: every batch after
            // that head comes on `batches`.
            let mut batches = self.streams.subscribe();
            // Up to what the hub has sent, and at least to what was stored
            // before it: the hub may be waking from a time nobody listened.
            let head = self.streams.head().max(*self.store.stored().borrow());
            if self.read_store(head).await.is_err() {
                return;
            }
            let stop = loop {
                let batch = tokio::select! {
                    batch = batches.recv() => batch,
                    _ = heartbeat.tick() => {
                        if self.tx.send(Ok(Bytes::from_static(b":\n\n"))).await.is_err() {
                            break Stop::Done;
                        }
                        continue;
                    }
                    () = self.tx.closed() => break Stop::Done,
                    () = stopping.cancelled() => break Stop::Done,
                };
                match batch {
                    Ok(batch) => {
                        if self.take(&batch).await.is_err() {
                            break Stop::Done;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => break Stop::Behind,
                    Err(broadcast::error::RecvError::Closed) => break Stop::Done,
                }
            };
            if let Stop::Done = stop {
                return;
            }
        }
    }

    /// Sends what the store holds after the cursor, up to `to` at least.
    async fn read_store(&mut self, to: u64) -> Result<(), Stop> {
        while self.cursor < to {
            let (read, filter, after) = (self.store.clone(), self.filter.clone(), self.cursor);
            let found =
                tokio::task::spawn_blocking(move || read.events_after(&filter, after, READ)).await;
            let (events, next) = match found {
                Ok(Ok(found)) => found,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "an event stream cannot read the store; closing it");
                    return Err(Stop::Done);
                }
                Err(_) => return Err(Stop::Done),
            };
            let access = self.access.load();
            let mut text = Vec::new();
            for e in &events {
                let body = body_of(&access, self.payload_for, &e.record.source);
                text.extend_from_slice(&frame(&self.store, e, &e.state, body));
            }
            self.send(text).await?;
            if next <= self.cursor {
                break;
            }
            self.cursor = next;
        }
        Ok(())
    }

    /// Sends a batch of the hub's: its events after the cursor that match.
    async fn take(&mut self, batch: &Arc<hub::Batch>) -> Result<(), Stop> {
        if batch.after > self.cursor {
            // Rows the hub read before this stream followed it.
            self.read_store(batch.after).await?;
        }
        let access = self.access.load();
        let mut text = Vec::with_capacity(batch.events.len() * 640);
        for shared in &batch.events {
            if shared.event.seq <= self.cursor {
                continue;
            }
            let body = body_of(&access, self.payload_for, &shared.event.record.source);
            if let Some(frame) = shared.frame(&self.store, &self.filter, body) {
                text.extend_from_slice(frame);
            }
        }
        self.cursor = self.cursor.max(batch.cursor);
        self.send(text).await
    }

    async fn send(&self, text: Vec<u8>) -> Result<(), Stop> {
        if text.is_empty() {
            return Ok(());
        }
        self.tx
            .send(Ok(Bytes::from(text)))
            .await
            .map_err(|_| Stop::Done)
    }
}

/// What of its payload a stream sends with an event.
#[derive(Debug, Clone, Copy)]
enum Sent<'a> {
    None,
    Whole,
    /// Masked at these pointers (the event's source's `redact`).
    Masked(&'a [crate::redact::Pattern]),
}

impl Sent<'_> {
    /// Its slot among an event's frames in the hub.
    fn index(self) -> usize {
        match self {
            Sent::None => 0,
            Sent::Whole => 1,
            Sent::Masked(_) => 2,
        }
    }
}

/// What a stream for `role` sends of an event of `source`'s payload.
fn body_of<'a>(access: &'a super::Access, wanted: Option<Role>, source: &str) -> Sent<'a> {
    match wanted {
        None => Sent::None,
        Some(role) => match access.redactions.sight(source, role) {
            Sight::Masked(patterns) => Sent::Masked(patterns),
            Sight::Whole | Sight::Unmasked => Sent::Whole,
        },
    }
}

/// One stored event as the text of an SSE `event`, with the fields of
/// delivery `state`.
fn frame(store: &Store, e: &StoredEvent, state: &EventState, body: Sent<'_>) -> Bytes {
    let record = &e.record;
    let with_payload = !matches!(body, Sent::None);
    let shown = match body {
        Sent::Masked(patterns) => crate::redact::apply(patterns, &record.body),
        _ => crate::redact::Shown::Raw(&record.body),
    };
    let streamed = api::StreamedEvent {
        event: summary_at(e, state),
        payload: with_payload.then(|| payload_of(shown.bytes())),
        redacted: !shown.is_raw(),
        content_type: with_payload.then(|| record.content_type.clone()).flatten(),
        headers: with_payload.then(|| record.headers.clone()),
    };
    let data = serde_json::to_string(&streamed).unwrap_or_default();
    Bytes::from(format!(
        "event: event\nid: {}\ndata: {data}\n\n",
        store.public_id(e.seq)
    ))
}
