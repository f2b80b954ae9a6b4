//! An event's trace, named by the event: its trace id and its ingest span's
//! id are derived from the event's public id, so every later attempt (on
//! this node, after a restart, or on a standby that took over) finds its
//! parent without a byte stored. A keyed hash of the id, so the ids are as
//! evenly spread as random ones: the ratio sampler, which reads the trace
//! id's low bits, decides the same for the ingest and every attempt.
//!
//! The SDK makes a root span's ids with its id generator; [`EventIds`] is
//! that generator, handing out the ids [`with_ids`] set for the span built
//! on this thread, and random ones otherwise.

use std::cell::Cell;

use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use sha2::{Digest, Sha256};

/// What an event's trace ids are derived with: a change gives every event
/// a new trace, so it never changes.
const DOMAIN: &[u8] = b"hookinbox trace v1\0";

/// The trace of an event's delivery round 0 (received, then attempted),
/// and the id of the span its receipt is; or of a replay's round (the
/// replay, then its attempts), and the id of the replay's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTrace {
    pub trace_id: TraceId,
    /// The root of the trace (the receipt, or the replay), the parent of
    /// every attempt of its round.
    pub root: SpanId,
}

impl EventTrace {
    /// The trace of the event whose public id is `id`.
    pub fn of(id: &str) -> EventTrace {
        EventTrace::derived(
            Sha256::new()
                .chain_update(DOMAIN)
                .chain_update(id.as_bytes()),
        )
    }

    /// The trace of round `round` (1 for the first replay) of the event's
    /// delivery to `route`: a trace of its own, as each replay is a new
    /// start; round 0 is the event's.
    pub fn of_round(id: &str, route: &str, round: u32) -> EventTrace {
        if round == 0 {
            return EventTrace::of(id);
        }
        EventTrace::derived(
            Sha256::new()
                .chain_update(DOMAIN)
                .chain_update(id.as_bytes())
                .chain_update(b"\0")
                .chain_update(route.as_bytes())
                .chain_update(round.to_be_bytes()),
        )
    }

    fn derived(hash: Sha256) -> EventTrace {
        let digest = hash.finalize();
        let mut trace = [0u8; 16];
        trace.copy_from_slice(&digest[..16]);
        let mut span = [0u8; 8];
        span.copy_from_slice(&digest[16..24]);
        // All zeros is the invalid id; a digest that starts so is as good
        // with its last bit set.
        if trace == [0; 16] {
            trace[15] = 1;
        }
        if span == [0; 8] {
            span[7] = 1;
        }
        EventTrace {
            trace_id: TraceId::from_bytes(trace),
            root: SpanId::from_bytes(span),
        }
    }
}

thread_local! {
    static NEXT_TRACE: Cell<Option<TraceId>> = const { Cell::new(None) };
    static NEXT_SPAN: Cell<Option<SpanId>> = const { Cell::new(None) };
}

/// Runs `build` with the ids the SDK's generator hands out next on this
/// thread set to `trace`'s: the root span `build` makes gets them. The SDK
/// builds a span synchronously, on the caller's thread.
pub fn with_ids<T>(trace: EventTrace, build: impl FnOnce() -> T) -> T {
    NEXT_TRACE.with(|c| c.set(Some(trace.trace_id)));
    NEXT_SPAN.with(|c| c.set(Some(trace.root)));
    let built = build();
    NEXT_TRACE.with(|c| c.set(None));
    NEXT_SPAN.with(|c| c.set(None));
    built
}

/// The provider's id generator: an event's ids inside [`with_ids`], random
/// ones for every other span.
#[derive(Debug, Default)]
pub struct EventIds {
    random: RandomIdGenerator,
}

impl IdGenerator for EventIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE
            .with(Cell::take)
            .unwrap_or_else(|| self.random.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        NEXT_SPAN
            .with(Cell::take)
            .unwrap_or_else(|| self.random.new_span_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_always_has_the_same_trace_and_two_events_differ() {
        let a = EventTrace::of("evt_1a2b.42");
        assert_eq!(a, EventTrace::of("evt_1a2b.42"));
        let b = EventTrace::of("evt_1a2b.43");
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.root, b.root);
        assert_eq!(EventTrace::of_round("evt_1a2b.42", "shop", 0), a);
        let replay = EventTrace::of_round("evt_1a2b.42", "shop", 1);
        assert_ne!(replay.trace_id, a.trace_id);
        assert_eq!(replay, EventTrace::of_round("evt_1a2b.42", "shop", 1));
        assert_ne!(replay, EventTrace::of_round("evt_1a2b.42", "shop", 2));
        assert_ne!(replay, EventTrace::of_round("evt_1a2b.42", "shop.crm", 1));
        assert_ne!(a.trace_id, TraceId::INVALID);
        assert_ne!(a.root, SpanId::INVALID);
    }

    #[test]
    fn the_generator_hands_out_the_set_ids_once_then_random_ones() {
        let ids = EventIds::default();
        let trace = EventTrace::of("x");
        let (t, s) = with_ids(trace, || (ids.new_trace_id(), ids.new_span_id()));
        assert_eq!((t, s), (trace.trace_id, trace.root));
        assert_ne!(ids.new_trace_id(), trace.trace_id);
        assert_ne!(ids.new_span_id(), trace.root);
        // Set but not taken by the build: cleared after it all the same.
        with_ids(trace, || ());
        assert_ne!(ids.new_trace_id(), trace.trace_id);
    }
}
