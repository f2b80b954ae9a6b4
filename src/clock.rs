//! The one notion of wall-clock "now", handed to every task by `App::start`.
//!
//! Everything stamped or judged in Unix time goes through a [`Clock`]:
//! receipt times, signature timestamp tolerance, attempt starts, retry due
//! times, TTLs, alert ages. Data stamped by one clock is never judged by
//! another. Production uses the system clock; tests freeze it at a vector's
//! signing time ([`Clock::fixed`]) or let it follow tokio's paused clock
//! ([`Clock::following_tokio`]) so that days of TTL pass without a sleep.
//! A test of the whole server, whose sockets and store need time to run,
//! moves the system clock's reading forward instead ([`Clock::skewed`]).
//!
//! Intervals measured within one process (timeouts, breaker cooldowns, rate
//! buckets, wake-ups) use `tokio::time::Instant`, which tests pause and
//! advance the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl Clock {
    pub fn system() -> Clock {
        Clock(Arc::new(SystemTime::now))
    }

    /// A clock that always answers `at`.
    pub fn fixed(at: SystemTime) -> Clock {
        Clock(Arc::new(move || at))
    }

    /// A clock that reads `at` now and then advances with tokio's clock:
    /// under `tokio::time::pause`, `tokio::time::advance` moves it.
    pub fn following_tokio(at: SystemTime) -> Clock {
        let start = tokio::time::Instant::now();
        Clock(Arc::new(move || at + start.elapsed()))
    }

    /// The system clock plus an offset that the returned [`Skew`] moves
    /// forward: an hour passes for what the server judges by stored times
    /// (an alert's window) while its timers, sockets and store run in real
    /// time, as `following_tokio`'s paused clock does not let them.
    pub fn skewed() -> (Clock, Skew) {
        let skew = Skew::default();
        let ahead = skew.0.clone();
        let clock = Clock(Arc::new(move || {
            SystemTime::now() + Duration::from_millis(ahead.load(Ordering::Relaxed))
        }));
        (clock, skew)
    }

    pub fn now(&self) -> SystemTime {
        (self.0)()
    }

    /// Milliseconds since the Unix epoch, the unit every stored time uses.
    pub fn now_ms(&self) -> u64 {
        unix_ms(self.now())
    }
}

/// How far ahead of the system clock a [`Clock::skewed`] reads.
#[derive(Clone, Debug, Default)]
pub struct Skew(Arc<AtomicU64>);

impl Skew {
    /// Moves the clock's reading `by` further ahead.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::Relaxed);
    }
}

/// Milliseconds since the Unix epoch; 0 for a time before it.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The time `ms` milliseconds after the Unix epoch.
pub fn from_unix_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// Keeps tokio's paused clock still while the guard lives, so that time
/// moves only by `tokio::time::advance`. A paused clock otherwise jumps to
/// the next timer whenever the runtime waits on another thread (the store
/// writer), which makes "before" and "after" in a test a race. A running
/// blocking task holds auto-advance back (tokio documents this); the guard
/// is one that waits for its drop.
#[cfg(test)]
pub(crate) fn hold_still() -> HoldStill {
    let (release, released) = std::sync::mpsc::channel::<()>();
    tokio::task::spawn_blocking(move || {
        let _ = released.recv();
    });
    HoldStill(release)
}

#[cfg(test)]
pub(crate) struct HoldStill(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_tokio_moves_only_when_tokio_time_does() {
        let at = from_unix_ms(1_700_000_000_000);
        let clock = Clock::following_tokio(at);
        assert_eq!(clock.now_ms(), 1_700_000_000_000);
        tokio::time::advance(Duration::from_secs(86_400)).await;
        assert_eq!(clock.now_ms(), 1_700_000_000_000 + 86_400_000);
        assert_eq!(Clock::fixed(at).now(), at);
        assert_eq!(unix_ms(SystemTime::UNIX_EPOCH - Duration::from_secs(1)), 0);
    }

    #[test]
    fn a_skewed_clock_reads_the_system_clock_plus_what_its_skew_added() {
        let (clock, skew) = Clock::skewed();
        let before = unix_ms(SystemTime::now());
        skew.advance(Duration::from_secs(3600));
        let read = clock.now_ms();
        let after = unix_ms(SystemTime::now());
        assert!(
            (before + 3_600_000..=after + 3_600_000).contains(&read),
            "{read}"
        );
    }
}
