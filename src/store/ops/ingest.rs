//! Ingest: a verified event stored under the next seq, or found to be a
//! duplicate of a live key; decided in the batch's transaction, or beside a
//! running checkpoint from the index and the log alone.
//!
//! Duplicates inside one batch resolve in arrival order: the batch runs in
//! queue order and each event is checked against the batch's own new keys
//! before the dedupe index, so the second copy sees the first one's key.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::super::dedupe::{Kind, fingerprint};
use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::format::row::{self, EventRecordRef};
use super::super::handle::{Store, public_id};
use super::super::index::MinuteKind;
use super::super::job::{Beside, Deciding, Numbering, Op, Step};
use super::super::reply::{Ready, ReplyTo, fail};
use super::super::tables::{StoredAs, Tables, Ttls, store_event};
use super::super::types::{Ingested, Initial};
use super::Moved;
use crate::verify::VerifiedEvent;

impl Store {
    /// Stores a verified event, or finds it already stored. Returns once the
    /// answer is durable on disk.
    pub async fn ingest(
        &self,
        event: VerifiedEvent,
        initial: Initial,
    ) -> Result<Ingested, StoreError> {
        self.call(|reply| {
            Box::new(Ingest {
                event,
                initial,
                reply,
            })
        })
        .await
    }
}

struct Ingest {
    event: VerifiedEvent,
    initial: Initial,
    reply: ReplyTo<Ingested>,
}

/// Bytes of log an event's entry may take beyond its record.
const ENTRY_ROOM: usize = 1024;

impl Op for Ingest {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        let result = self.store(step);
        step.settle(self.reply, result)
    }

    /// Decided without the database: the backlog's replay writes what the
    /// transaction would have.
    fn beside(self: Box<Self>, step: &mut Deciding<'_>) -> Beside {
        let (event, source) = (&self.event, self.event.source().as_str());
        let fp = fingerprint(source, event.event_id().as_str());
        let answer = match step.keys.live(step.index, Kind::Event, fp) {
            Err(e) => {
                fail(self.reply, &Arc::new(e.into()));
                return Beside::Done;
            }
            Ok(Some(seq)) => {
                if !step.wal.has_room(64 + source.len()) {
                    return Beside::NoRoom(self);
                }
                step.wal.push(&Entry::Duplicate {
                    received_ms: event.received_at_ms(),
                    source: Cow::Borrowed(source),
                });
                Ingested::Duplicate {
                    id: public_id(step.events.tag, seq),
                }
            }
            Ok(None) => {
                encode_record(step.events, event);
                if !step.wal.has_room(step.events.record_buf.len() + ENTRY_ROOM) {
                    return Beside::NoRoom(self);
                }
                let seq = step.events.next_seq;
                step.events.next_seq += self.initial.starts(source).len() as u64;
                step.decided
                    .fetch_max(step.events.next_seq - 1, Ordering::AcqRel);
                step.keys.moved(Kind::Event, fp, None, Some(seq));
                step.wal.push(&Entry::Ingest {
                    seq,
                    initial: Cow::Borrowed(&self.initial),
                    record: Cow::Borrowed(&step.events.record_buf),
                });
                Ingested::New {
                    id: public_id(step.events.tag, seq),
                }
            }
        };
        step.ready.push(Ready::new(self.reply, answer));
        Beside::Done
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

impl Ingest {
    /// A duplicate of a live key (one this batch added first, then the
    /// index's, unless this batch removed it), or stored under the next seq.
    fn store(&self, step: &mut Step<'_, '_>) -> Result<Ingested, WriteError> {
        let (event, source) = (&self.event, self.event.source().as_str());
        let fp = fingerprint(source, event.event_id().as_str());
        // Earlier in this batch first: the index learns the batch's keys
        // after the commit.
        if let Some(seq) = step.keys.live(step.index, Kind::Event, fp)? {
            let received_ms = event.received_at_ms();
            step.t
                .index
                .count_minute(received_ms, source, MinuteKind::Duplicate);
            step.log(&Entry::Duplicate {
                received_ms,
                source: Cow::Borrowed(source),
            });
            return Ok(Ingested::Duplicate {
                id: public_id(step.events.tag, seq),
            });
        }
        let seq = step.events.next_seq;
        let received = encode_record(step.events, event);
        let stored = StoredAs {
            seq,
            fp,
            source,
            event_type: event.event_type(),
            received,
        };
        let taken = store_event(
            step.t,
            &stored,
            &step.events.record_buf,
            &self.initial,
            step.ttls,
        )?;
        step.events.next_seq += taken;
        step.keys.moved(Kind::Event, fp, None, Some(seq));
        step.wal.push(&Entry::Ingest {
            seq,
            initial: Cow::Borrowed(&self.initial),
            record: Cow::Borrowed(&step.events.record_buf),
        });
        Ok(Ingested::New {
            id: public_id(step.events.tag, seq),
        })
    }
}

/// Encodes `ev`'s record into the numbering's buffer; returns its receipt
/// time, never earlier than the last stored event's.
fn encode_record(events: &mut Numbering, ev: &VerifiedEvent) -> u64 {
    // Verified a moment apart, queued in another order: keep the stored
    // times in seq order (a clock stepping back waits here too).
    let received = ev.received_at_ms().max(events.last_received_ms);
    events.last_received_ms = received;
    row::encode_event(
        &EventRecordRef {
            source: ev.source().as_str(),
            event_id: ev.event_id().as_str(),
            event_type: ev.event_type(),
            received_at_ms: received,
            content_type: ev.content_type(),
            headers: ev.headers(),
            body: ev.body(),
        },
        &mut events.scratch,
        &mut events.record_buf,
    );
    received
}

/// A stored event's entry applied again: its record as logged, under its
/// seq.
pub(super) fn replay(
    t: &mut Tables<'_>,
    seq: u64,
    initial: &Initial,
    record: &[u8],
    ttls: &Ttls,
    moved: &mut Moved<'_>,
) -> Result<(), WriteError> {
    let event = row::decode_event(record)?;
    let at = StoredAs {
        seq,
        fp: fingerprint(&event.source, &event.event_id),
        source: &event.source,
        event_type: event.event_type.as_deref(),
        received: event.received_at_ms,
    };
    store_event(t, &at, record, initial, ttls)?;
    moved(Kind::Event, at.fp, None, Some(seq));
    Ok(())
}

/// A duplicate's entry applied again: it is counted.
pub(super) fn replay_duplicate(
    t: &mut Tables<'_>,
    received_ms: u64,
    source: &str,
) -> Result<(), WriteError> {
    t.index
        .count_minute(received_ms, source, MinuteKind::Duplicate);
    Ok(())
}
