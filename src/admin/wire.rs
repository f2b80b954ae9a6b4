//! The store's events on the wire: `schema` statuses, deliveries, notes and
//! attempts converted to the types of [`crate::api`]. Owns only these
//! conversions; refuses any read of the store.

use crate::api::{self, EventStatus, Timestamp};
use crate::store::StoredEvent;
use crate::store::schema::{self, Attempt, EventState, Status};

pub(super) fn status_of(status: EventStatus) -> Status {
    match status {
        EventStatus::Pending => Status::Pending,
        EventStatus::Held => Status::Held,
        EventStatus::Delivered => Status::Delivered,
        EventStatus::Dead => Status::Dead,
        EventStatus::Ignored => Status::Ignored,
        EventStatus::Filtered => Status::Filtered,
    }
}

pub(super) fn status_on_wire(status: Status) -> EventStatus {
    match status {
        Status::Pending => EventStatus::Pending,
        Status::Held => EventStatus::Held,
        Status::Delivered => EventStatus::Delivered,
        Status::Dead => EventStatus::Dead,
        Status::Ignored => EventStatus::Ignored,
        Status::Filtered => EventStatus::Filtered,
    }
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

pub(super) fn summary(e: &StoredEvent) -> api::EventSummary {
    summary_at(e, &e.state)
}

/// [`summary`] with the fields of delivery `state` (one of the event's).
pub(super) fn summary_at(e: &StoredEvent, state: &EventState) -> api::EventSummary {
    let s = delivery_on_wire(state);
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

/// Attempt `n` (from 0) of `e`'s delivery to `destination`, the
/// `in_round`th of its round (from 1: the `hookinbox-attempt` it sent).
pub(super) fn attempt_on_wire(
    e: &StoredEvent,
    destination: &str,
    n: usize,
    in_round: u32,
    a: &Attempt,
) -> api::AttemptRecord {
    let message = crate::standard_webhooks::Message {
        id: &e.id,
        source: &e.record.source,
        event_id: &e.record.event_id,
        event_type: e.record.event_type.as_deref(),
        content_type: e.record.content_type.as_deref(),
        origin: crate::standard_webhooks::origin_of(&e.record.headers),
        body: &[],
    };
    api::AttemptRecord {
        destination: destination.to_owned(),
        n: n as u32 + 1,
        attempt: in_round,
        started_at: Timestamp(a.started_ms),
        latency_ms: a.latency_ms,
        outcome: a.class.into(),
        status: a.status,
        error: a.error.clone(),
        response_snippet: a.response_snippet.clone(),
        round: a.round,
        first_byte_ms: a.first_byte_ms,
        request_headers: message
            .sent(in_round, a.started_ms, &a.request_headers)
            .unwrap_or_default(),
        response_headers: a.response_headers.clone(),
    }
}
