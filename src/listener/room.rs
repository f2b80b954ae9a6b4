//! Room past the connection cap: which open connection to close so that a
//! new one can be served.
//!
//! A connection is *waiting* from its accept (or from the end of its last
//! answer) until hyper hands it a request, and *busy* from then until that
//! answer's body is dropped. Only a waiting connection is ever closed, and
//! the one that has waited longest goes first: a request head that trickles
//! in or a client that never sends one, and only when there is none of
//! those, an idle keep-alive connection (a client that has been answered
//! before, likely a provider's pool: closing it makes its next request race
//! the close). A request in progress is never cut. Owns no socket: the connection's task
//! drops its connection when told it was [`Conn::evicted`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// A connection's state in one word, so that a request starting and an
/// eviction race through one compare-and-swap: the low 31 bits count the
/// requests in progress, bit 31 says the connection is gone (evicted or
/// closed), and the bits above count its waits (the *round*), so a queue
/// entry of an earlier wait never matches.
const BUSY: u64 = (1 << 31) - 1;
const GONE: u64 = 1 << 31;
const ROUND: u64 = 1 << 32;

/// The queue is compacted once it holds this many entries and twice as many
/// as it held after the last compaction: a keep-alive connection adds an
/// entry per request, and entries of busy or closed connections are dropped
/// only when an eviction or a compaction passes them.
const MIN_COMPACT: usize = 1024;

/// The open connections of one listener, oldest waiting first.
#[derive(Default)]
pub struct Room {
    queues: Mutex<Queues>,
}

/// Waits for a first request head, and waits between requests: the
/// first are closed before any of the second.
#[derive(Default)]
struct Queues {
    first: Queue,
    again: Queue,
}

#[derive(Default)]
struct Queue {
    /// Each wait of a connection, in the order the waits began.
    waits: VecDeque<(Arc<Conn>, u64)>,
    compact_at: usize,
}

/// One open connection's state, shared by its task, its service and the room.
#[derive(Default)]
pub struct Conn {
    state: AtomicU64,
    evicted: Notify,
}

/// A request in progress on a connection; dropped when its answer's body
/// is done (or dropped unsent), which starts the connection's next wait.
pub struct Busy {
    conn: Arc<Conn>,
    room: Arc<Room>,
}

impl Room {
    /// A connection just accepted: waiting for its first request head.
    pub fn admit(self: &Arc<Self>) -> Arc<Conn> {
        let conn = Arc::new(Conn::default());
        self.push(conn.clone(), 0);
        conn
    }

    /// A request begins on `conn`; `None` if the connection was just evicted
    /// (its task is dropping it: the request must not be worked on).
    pub fn begin(self: &Arc<Self>, conn: &Arc<Conn>) -> Option<Busy> {
        conn.state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & GONE == 0).then_some(s + 1)
            })
            .ok()?;
        Some(Busy {
            conn: conn.clone(),
            room: self.clone(),
        })
    }

    /// Closes the connection that has waited longest, if any is waiting.
    pub fn evict_oldest(&self) -> bool {
        let mut queues = self
            .queues
            .lock()
            .expect("the room's lock is never poisoned");
        queues.first.evict_oldest() || queues.again.evict_oldest()
    }

    fn push(&self, conn: Arc<Conn>, round: u64) {
        let mut queues = self
            .queues
            .lock()
            .expect("the room's lock is never poisoned");
        let queue = if round == 0 {
            &mut queues.first
        } else {
            &mut queues.again
        };
        queue.push(conn, round);
    }

    #[cfg(test)]
    fn queued(&self) -> usize {
        let queues = self.queues.lock().unwrap();
        queues.first.waits.len() + queues.again.waits.len()
    }
}

impl Queue {
    fn evict_oldest(&mut self) -> bool {
        while let Some((conn, round)) = self.waits.pop_front() {
            // Only a connection still in this very wait, with no request in
            // progress, matches: a later wait has a larger round.
            let waiting = round * ROUND;
            if conn
                .state
                .compare_exchange(waiting, waiting | GONE, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                conn.evicted.notify_one();
                return true;
            }
        }
        false
    }

    fn push(&mut self, conn: Arc<Conn>, round: u64) {
        self.waits.push_back((conn, round));
        if self.waits.len() >= self.compact_at.max(MIN_COMPACT) {
            self.waits
                .retain(|(conn, round)| conn.state.load(Ordering::Acquire) == round * ROUND);
            self.compact_at = 2 * self.waits.len();
        }
    }
}

impl Conn {
    /// Resolves once the room has chosen this connection to close.
    pub async fn evicted(&self) {
        self.evicted.notified().await;
    }

    /// The connection's task ended: it can no longer be chosen.
    pub fn close(&self) {
        self.state.fetch_or(GONE, Ordering::AcqRel);
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // One request fewer; when it was the last, the next wait begins.
        let next = |s: u64| {
            let s = s - 1;
            if s & BUSY == 0 { s + ROUND } else { s }
        };
        let before = self
            .conn
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| Some(next(s)))
            .expect("the update always gives a value");
        let after = next(before);
        if after & (BUSY | GONE) == 0 {
            self.room.push(self.conn.clone(), after / ROUND);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_evicted(conn: &Conn) -> bool {
        conn.state.load(Ordering::Acquire) & GONE != 0
    }

    #[test]
    fn the_longest_waiting_connection_goes_first_and_a_busy_one_never() {
        let room = Arc::new(Room::default());
        let a = room.admit();
        let b = room.admit();
        let c = room.admit();
        // `a` has a request in progress: it is passed over.
        let busy = room.begin(&a).unwrap();
        assert!(room.evict_oldest());
        assert!(is_evicted(&b) && !is_evicted(&a) && !is_evicted(&c));
        // `a` answers and waits again, after `c`.
        drop(busy);
        assert!(room.evict_oldest());
        assert!(is_evicted(&c) && !is_evicted(&a));
        assert!(room.evict_oldest());
        assert!(is_evicted(&a));
        assert!(!room.evict_oldest());
    }

    #[test]
    fn a_connection_answered_before_goes_after_every_one_waiting_for_its_first_head() {
        let room = Arc::new(Room::default());
        let served = room.admit();
        drop(room.begin(&served).unwrap());
        // Opened after `served` was answered, yet closed first.
        let fresh = room.admit();
        assert!(room.evict_oldest());
        assert!(is_evicted(&fresh) && !is_evicted(&served));
        assert!(room.evict_oldest());
        assert!(is_evicted(&served));
    }

    #[test]
    fn an_evicted_connection_takes_no_request_and_a_closed_one_is_not_chosen() {
        let room = Arc::new(Room::default());
        let a = room.admit();
        let b = room.admit();
        assert!(room.evict_oldest());
        assert!(room.begin(&a).is_none());
        b.close();
        assert!(!room.evict_oldest());
    }

    #[test]
    fn pipelined_requests_keep_a_connection_busy_until_the_last_answer() {
        let room = Arc::new(Room::default());
        let a = room.admit();
        let first = room.begin(&a).unwrap();
        let second = room.begin(&a).unwrap();
        drop(first);
        assert!(!room.evict_oldest(), "one request is still in progress");
        drop(second);
        assert!(room.evict_oldest());
    }

    #[test]
    fn keep_alive_reuse_does_not_grow_the_queue_without_bound() {
        let room = Arc::new(Room::default());
        let conns: Vec<_> = (0..10).map(|_| room.admit()).collect();
        for _ in 0..10_000 {
            for conn in &conns {
                drop(room.begin(conn).unwrap());
            }
        }
        assert!(room.queued() <= 2 * MIN_COMPACT, "{}", room.queued());
        for _ in &conns {
            assert!(room.evict_oldest());
        }
        assert!(!room.evict_oldest());
    }
}
