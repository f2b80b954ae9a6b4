//! The per-minute budget of loud log lines: how many refusals or dead
//! letters a minute are logged at warn, the rest at debug.
//!
//! Owns the window and the count of lines it quieted (the summary line
//! reports them). Refuses to log anything itself: the caller asks
//! [`Budget::take`] and picks the level (`loud_or_debug!` in `logs`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many lines of one kind (a refusal, a dead letter) may be logged at
/// warn or error per minute; past it they go to debug and the summary counts
/// them. 20: enough to see the sources and reasons of a burst, and a flood of
/// a million bad requests still writes 20 lines a minute.
pub const LOUD_PER_MINUTE: u32 = 20;

/// A budget of [`LOUD_PER_MINUTE`] lines per minute of one kind. Here, not
/// in `logs`: [`Metrics`](super::Metrics) holds one per kind and counts what
/// it quieted in [`Tally::quieted`](super::Tally::quieted), and `metrics`
/// reaches nothing of the crate above it.
#[derive(Debug, Default)]
pub struct Budget {
    /// The current minute's start and the lines it has used.
    window: Mutex<Option<(Instant, u32)>>,
    /// Lines sent to debug since the start.
    quieted: AtomicU64,
}

impl Budget {
    /// Whether one more line may be loud now; counts it either way.
    pub fn take(&self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> bool {
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let (started, used) = match *window {
            Some((started, used)) if now.duration_since(started) < Duration::from_secs(60) => {
                (started, used)
            }
            _ => (now, 0),
        };
        let loud = used < LOUD_PER_MINUTE;
        *window = Some((started, used.saturating_add(1)));
        if !loud {
            self.quieted.fetch_add(1, Ordering::Relaxed);
        }
        loud
    }

    /// Lines this budget sent to debug since the start.
    pub fn quieted(&self) -> u64 {
        self.quieted.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_allows_its_lines_per_minute_then_quiets_until_the_next() {
        let budget = Budget::default();
        let start = Instant::now();
        let loud = (0..50).filter(|_| budget.take_at(start)).count();
        assert_eq!(loud, LOUD_PER_MINUTE as usize);
        assert_eq!(budget.quieted(), 50 - u64::from(LOUD_PER_MINUTE));
        assert!(!budget.take_at(start + Duration::from_secs(59)));
        assert!(budget.take_at(start + Duration::from_secs(60)));
    }
}
