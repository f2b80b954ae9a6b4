//! One destination as the scheduler holds it (`Lane`): its attempts in
//! flight, circuit breaker, rate bucket and pause flag; how many attempts
//! it has room for now (`Lane::room`, which only reads the time it is
//! given); and what an attempt's end teaches it (`Lane::settle`).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::attempt::Ended;
use crate::deliver::Destination;
use crate::deliver::breaker::{Allow, Breaker, CircuitState};
use crate::metrics::DestinationLabel;

/// How long a destination waits after the store failed one of its attempts
/// (a read or a lease commit) before the scheduler tries again: a full disk
/// or a reopening database is not fixed by asking again at once.
pub(super) const STORE_RETRY: Duration = Duration::from_secs(1);

/// A token bucket: `rate` per second, bursts up to one second's worth.
pub(super) struct Rate {
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Rate {
    pub(super) fn new(per_second: f64) -> Rate {
        Rate {
            per_second,
            tokens: per_second.max(1.0),
            at: Instant::now(),
        }
    }

    fn available(&mut self, now: Instant) -> usize {
        let burst = self.per_second.max(1.0);
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * self.per_second).min(burst);
        self.at = now;
        self.tokens.floor() as usize
    }

    fn take(&mut self) {
        self.tokens -= 1.0;
    }

    fn next_token(&self, now: Instant) -> Instant {
        now + Duration::from_secs_f64(((1.0 - self.tokens).max(0.0)) / self.per_second)
    }
}

pub(super) struct Lane {
    pub(super) destination: Arc<Destination>,
    /// Its metrics' labels.
    pub(super) label: Arc<DestinationLabel>,
    pub(super) in_flight: HashSet<u64>,
    pub(super) breaker: Breaker,
    pub(super) rate: Option<Rate>,
    pub(super) paused: Arc<AtomicBool>,
    pub(super) last_failure: Option<String>,
    /// After the store failed an attempt (it could not read the event or
    /// commit the lease), the lane waits until then instead of spinning.
    pub(super) store_retry_at: Option<Instant>,
    /// Taken out of the config by a reload: it starts no attempt and is
    /// not listed; its attempts in flight still end here. Kept, not
    /// removed, so every lane keeps its index.
    pub(super) retired: bool,
}

/// How many attempts a lane may start now, and when to look again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Room {
    pub(super) attempts: usize,
    /// When the lane has more room (a cooldown's end, the next rate token,
    /// the store's retry), if it has less than it could.
    pub(super) again: Option<Instant>,
    /// The circuit changed state in this look (to log and count).
    pub(super) circuit: Option<CircuitState>,
}

impl Lane {
    pub(super) fn new(destination: Destination, paused: Arc<AtomicBool>) -> Lane {
        Lane {
            label: Arc::new(DestinationLabel::new(
                destination.source.as_str(),
                destination.name(),
            )),
            breaker: Breaker::new(
                destination.config.breaker_failures,
                destination.config.breaker_cooldown,
            ),
            rate: destination.config.max_rate.map(Rate::new),
            in_flight: HashSet::new(),
            paused,
            last_failure: None,
            store_retry_at: None,
            destination: Arc::new(destination),
            retired: false,
        }
    }

    /// The same destination as a reload configured it: attempts from now
    /// on use it (those in flight end with the one they started with). The
    /// circuit and the rate keep their state unless their settings
    /// changed.
    pub(super) fn reconfigure(&mut self, destination: Destination) {
        let (old, new) = (&self.destination.config, &destination.config);
        if (old.breaker_failures, old.breaker_cooldown)
            != (new.breaker_failures, new.breaker_cooldown)
        {
            self.breaker = Breaker::new(new.breaker_failures, new.breaker_cooldown);
        }
        if old.max_rate != new.max_rate {
            self.rate = new.max_rate.map(Rate::new);
        }
        self.destination = Arc::new(destination);
        self.retired = false;
    }

    /// How many attempts may go out at `now`: none while paused or after a
    /// store failure, none or one probe by the breaker, at most the free
    /// concurrency slots and the rate's tokens.
    pub(super) fn room(&mut self, now: Instant) -> Room {
        let none = |again, circuit| Room {
            attempts: 0,
            again,
            circuit,
        };
        if self.retired || self.paused.load(Ordering::Relaxed) {
            return none(None, None);
        }
        if let Some(at) = self.store_retry_at {
            if at > now {
                return none(Some(at), None);
            }
            self.store_retry_at = None;
        }
        let mut attempts = self
            .destination
            .config
            .max_concurrency
            .saturating_sub(self.in_flight.len());
        let (allow, circuit) = self.breaker.allow(now);
        match allow {
            Allow::All => {}
            Allow::Probe => attempts = attempts.min(1),
            Allow::Until(at) => return none(Some(at), circuit),
            Allow::Wait => return none(None, circuit),
        }
        let mut again = None;
        if let Some(rate) = &mut self.rate {
            let tokens = rate.available(now);
            if tokens < attempts {
                attempts = tokens;
                again = Some(rate.next_token(now));
            }
        }
        Room {
            attempts,
            again,
            circuit,
        }
    }

    /// An attempt of `seq` is going out: it holds a slot, a token and the
    /// breaker's probe until it ends.
    pub(super) fn start(&mut self, seq: u64) {
        self.in_flight.insert(seq);
        self.breaker.dispatched();
        if let Some(rate) = &mut self.rate {
            rate.take();
        }
    }

    /// An attempt of `seq` ended as `ended` at `now`; the circuit's new
    /// state, if it changed.
    pub(super) fn settle(&mut self, seq: u64, ended: Ended, now: Instant) -> Option<CircuitState> {
        self.in_flight.remove(&seq);
        match ended {
            Ended::NotAttempted => None,
            Ended::StoreFailed => {
                self.store_retry_at = Some(now + STORE_RETRY);
                None
            }
            Ended::Attempted { healthy, failure } => {
                if failure.is_some() {
                    self.last_failure = failure;
                }
                self.breaker.record(healthy, now)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// A lane of a destination with `extra` in its source (the delivery
    /// settings: max_concurrency, max_rate, breaker_*).
    fn lane(extra: &str) -> Lane {
        let text = format!(
            "[[source]]\nname = \"shop\"\nkind = \"standard\"\n\
             secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n\
             destination = \"http://127.0.0.1:9/\"\n\
             destination_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n{extra}"
        );
        let (config, _) = Config::from_toml(&text, "test", None, &|_| None)
            .unwrap()
            .resolve()
            .unwrap();
        let source = &config.sources[0];
        let destination =
            Destination::new(source.name.clone(), source.destinations[0].clone()).unwrap();
        Lane::new(destination, Arc::new(AtomicBool::new(false)))
    }

    /// A second's worth of burst, then the rate; time moves only when the
    /// test moves tokio's paused clock.
    #[tokio::test(start_paused = true)]
    async fn the_rate_bucket_allows_a_seconds_burst_then_the_rate() {
        let mut rate = Rate::new(10.0);
        assert_eq!(rate.available(Instant::now()), 10);
        for _ in 0..10 {
            rate.take();
        }
        let now = Instant::now();
        assert_eq!(rate.available(now), 0);
        assert_eq!(rate.next_token(now), now + Duration::from_millis(100));
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(rate.available(Instant::now()), 2);
        // Idle time does not bank more than the burst.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(rate.available(Instant::now()), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_below_one_per_second_still_sends_one_then_waits() {
        let mut rate = Rate::new(0.5);
        assert_eq!(rate.available(Instant::now()), 1);
        rate.take();
        let now = Instant::now();
        assert_eq!(rate.available(now), 0);
        assert_eq!(rate.next_token(now), now + Duration::from_secs(2));
        tokio::time::advance(Duration::from_millis(1_999)).await;
        assert_eq!(rate.available(Instant::now()), 0);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(rate.available(Instant::now()), 1);
    }

    /// What a lane has room for, case by case: free slots; none while
    /// paused or after a store failure (until its retry); the rate's tokens
    /// (and when the next comes); none while the circuit is open, then one
    /// probe.
    #[tokio::test(start_paused = true)]
    async fn a_lane_has_room_for_its_free_slots_within_pause_breaker_rate_and_store() {
        let now = Instant::now();
        let mut free = lane("max_concurrency = 4\n");
        assert_eq!(free.room(now).attempts, 4);
        free.start(1);
        free.start(2);
        assert_eq!(
            free.room(now),
            Room {
                attempts: 2,
                again: None,
                circuit: None
            }
        );

        free.paused.store(true, Ordering::Relaxed);
        assert_eq!(free.room(now).attempts, 0);
        free.paused.store(false, Ordering::Relaxed);

        free.settle(1, Ended::StoreFailed, now);
        let waiting = free.room(now);
        assert_eq!(
            (waiting.attempts, waiting.again),
            (0, Some(now + STORE_RETRY))
        );
        assert_eq!(free.room(now + STORE_RETRY).attempts, 3);

        let mut slow = lane("max_concurrency = 4\nmax_rate = 2\n");
        let room = slow.room(now);
        assert_eq!(room.attempts, 2, "a second's burst");
        slow.start(1);
        slow.start(2);
        let room = slow.room(now);
        assert_eq!(
            (room.attempts, room.again),
            (0, Some(now + Duration::from_millis(500)))
        );

        let mut failing = lane("breaker_failures = 2\nbreaker_cooldown = \"30s\"\n");
        for seq in 1..=2 {
            failing.start(seq);
            let ended = Ended::Attempted {
                healthy: false,
                failure: Some("destination answered 503".to_owned()),
            };
            failing.settle(seq, ended, now);
        }
        assert_eq!(
            failing.last_failure.as_deref(),
            Some("destination answered 503")
        );
        let open = failing.room(now);
        assert_eq!(open.attempts, 0);
        assert!(open.again.is_some_and(|at| at > now), "{open:?}");
        let probe = failing.room(now + Duration::from_secs(30));
        assert_eq!(
            (probe.attempts, probe.circuit),
            (1, Some(CircuitState::HalfOpen))
        );
    }
}
