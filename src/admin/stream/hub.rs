//! One reader of new events for every open stream. It follows the store's
//! watch of the newest event, reads each new row once (only while some
//! stream is open), and broadcasts them in batches; each event's SSE text
//! is made once per variant (the delivery a filter matched, with or
//! without the payload) and shared by every stream that sends it. So N
//! streams cost one read and one encoding per event, plus N filters and N
//! writes: not N reads. A stream that falls behind the broadcast reads the
//! store itself until it is back (`super`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::store::{EventFilter, Store, StoredEvent};

/// Rows one read of the hub takes at most.
const READ: usize = 256;
/// Batches the broadcast keeps for a stream that is behind; one further
/// behind reads the store.
const KEPT: usize = 256;

/// The events after `after` up to `cursor` (seqs), in order.
pub(super) struct Batch {
    pub after: u64,
    pub cursor: u64,
    pub events: Vec<Shared>,
}

/// One event as read, and its SSE text per variant, made on first use.
pub(super) struct Shared {
    pub event: StoredEvent,
    /// Index `3 * delivery + body` (`Sent::index`).
    frames: Vec<OnceLock<Bytes>>,
}

impl Shared {
    fn new(event: StoredEvent) -> Shared {
        let frames = (0..3 * event.deliveries.len().max(1))
            .map(|_| OnceLock::new())
            .collect();
        Shared { event, frames }
    }

    /// Its text for a stream with `filter`, if it matches: with the fields
    /// of the first delivery the filter matches.
    pub fn frame(
        &self,
        store: &Store,
        filter: &EventFilter,
        body: super::Sent<'_>,
    ) -> Option<&Bytes> {
        let e = &self.event;
        let delivery = e
            .deliveries
            .iter()
            .position(|d| filter.matches(&e.record, &d.state))?;
        let slot = &self.frames[3 * delivery + body.index()];
        Some(slot.get_or_init(|| super::frame(store, e, &e.deliveries[delivery].state, body)))
    }
}

/// The hub: its broadcast and how far it has read.
#[derive(Clone)]
pub struct Streams {
    inner: Arc<Inner>,
}

struct Inner {
    tx: broadcast::Sender<Arc<Batch>>,
    /// Wakes the reader, parked while no stream is open.
    subscribed: tokio::sync::Notify,
    /// Every event up to this seq was broadcast, or skipped while no
    /// stream was open.
    head: AtomicU64,
}

impl Streams {
    /// The hub, and the reader that feeds it: a task of its own, which the
    /// app runs under supervision until its token is cancelled.
    pub fn new(store: Store) -> (Streams, HubReader) {
        let (tx, _) = broadcast::channel(KEPT);
        let streams = Streams {
            inner: Arc::new(Inner {
                tx,
                subscribed: tokio::sync::Notify::new(),
                head: AtomicU64::new(*store.stored().borrow()),
            }),
        };
        let reader = HubReader {
            store,
            inner: streams.inner.clone(),
        };
        (streams, reader)
    }

    pub(super) fn subscribe(&self) -> broadcast::Receiver<Arc<Batch>> {
        let rx = self.inner.tx.subscribe();
        self.inner.subscribed.notify_one();
        rx
    }

    pub(super) fn head(&self) -> u64 {
        self.inner.head.load(Ordering::Acquire)
    }
}

/// The task that feeds a hub ([`Streams::new`]).
pub struct HubReader {
    store: Store,
    inner: Arc<Inner>,
}

impl HubReader {
    /// Reads until `stopping` is cancelled (or the store has closed).
    pub async fn run(self, stopping: CancellationToken) {
        read(self.store, self.inner, stopping).await
    }
}

/// The hub's reader: each change of the store's watch, the new rows, once.
/// Parked while no stream is open: then nothing at all runs per event.
async fn read(store: Store, inner: Arc<Inner>, stopping: CancellationToken) {
    let mut stored = store.stored();
    let mut cursor = *stored.borrow_and_update();
    inner.head.store(cursor, Ordering::Release);
    loop {
        if inner.tx.receiver_count() == 0 {
            tokio::select! {
                () = inner.subscribed.notified() => {}
                () = stopping.cancelled() => return,
            }
            // What was stored meanwhile, a new stream reads from the store
            // (the first batch's `after` is past its cursor).
            cursor = *stored.borrow_and_update();
            inner.head.store(cursor, Ordering::Release);
            continue;
        }
        tokio::select! {
            changed = stored.changed() => if changed.is_err() { return },
            () = inner.subscribed.notified() => {}
            () = stopping.cancelled() => return,
        }
        let newest = *stored.borrow_and_update();
        while cursor < newest && inner.tx.receiver_count() > 0 {
            let read = store.clone();
            let after = cursor;
            let found = tokio::task::spawn_blocking(move || {
                read.events_after(&EventFilter::default(), after, READ)
            })
            .await;
            let (events, next) = match found {
                Ok(Ok(found)) => found,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the event streams cannot read the store; trying again at the next event");
                    break;
                }
                Err(_) => break,
            };
            if next <= cursor {
                // No row after it yet (`newest` may be a delivery key).
                break;
            }
            cursor = next;
            let batch = Batch {
                after,
                cursor,
                events: events.into_iter().map(Shared::new).collect(),
            };
            inner.head.store(cursor, Ordering::Release);
            // No receiver left since the check: nothing lost, nobody to tell.
            let _ = inner.tx.send(Arc::new(batch));
        }
    }
}
