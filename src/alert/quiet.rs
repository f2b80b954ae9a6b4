//! A quiet source: no new event for longer than its `expect_within`.
//!
//! How long a source has been quiet is measured from the receipt of its
//! newest stored event ([`SourceStats::newest_received_ms`]), or from
//! hookinbox's start when it holds none. A restart does not reset it, so a
//! source quiet for weeks stays quiet across daily restarts. The same figure
//! is the `source_quiet_seconds` gauge, which Prometheus's rule compares
//! with `source_expect_within_seconds`.
//!
//! A notice also says how often the source sent before: its received events
//! in the per-minute counts of the last week ([`MINUTES_KEPT`]), spread from
//! the first of them to its newest event. That is read once when a source
//! turns quiet ([`History`]), not at every check.

use std::time::Duration;

use crate::store::SourceStats;
use crate::store::index::{MINUTES_KEPT, MinuteKind, MinuteRow};

/// Since when `source` has sent nothing new: its newest event's receipt,
/// else hookinbox's start.
pub fn quiet_for(newest_received_ms: Option<u64>, started_ms: u64, now_ms: u64) -> Duration {
    Duration::from_millis(now_ms.saturating_sub(newest_received_ms.unwrap_or(started_ms)))
}

/// What a source sent in the week before it went quiet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    /// Events received in the per-minute counts kept.
    pub received: u64,
    /// The mean time between them; `None` below two events.
    pub every: Option<Duration>,
}

impl History {
    /// From the minute rows of the last week: `source`'s received events,
    /// from the start of the first minute that has one to `newest_ms`.
    pub fn of(rows: &[MinuteRow], source: &str, newest_ms: Option<u64>) -> History {
        let mut first: Option<u64> = None;
        let mut received = 0;
        for (minute, name, kind, count) in rows {
            if name == source && *kind == MinuteKind::Received && *count > 0 {
                first = Some(first.map_or(*minute, |f: u64| f.min(*minute)));
                received += count;
            }
        }
        let every = match (first, newest_ms) {
            (Some(first), Some(newest)) if received >= 2 => Some(Duration::from_millis(
                newest.saturating_sub(first * 60_000) / (received - 1),
            )),
            _ => None,
        };
        History { received, every }
    }

    /// How far back [`History::of`] wants rows from, at `now_ms`.
    pub fn since_ms(now_ms: u64) -> u64 {
        now_ms.saturating_sub(MINUTES_KEPT * 60_000)
    }
}

/// A duration as a person reads it in an alert: whole minutes from a
/// minute up (whole seconds below).
pub fn human(d: Duration) -> String {
    let secs = d.as_secs();
    let shown = if secs >= 60 { secs / 60 * 60 } else { secs };
    humantime::format_duration(Duration::from_secs(shown)).to_string()
}

/// Since when a source that never sent has been watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// hookinbox's start.
    Start,
    /// The reload that added it.
    Reload,
}

/// Whether `source` is quiet, and the sentence that says so or says it
/// sends again.
pub fn judge(
    source: &str,
    held: &SourceStats,
    within: Duration,
    (quiet, since): (Duration, Since),
    history: Option<History>,
) -> (bool, String) {
    let limit = human(within);
    if quiet <= within {
        return (
            false,
            format!(
                "source {source} sends again: its newest event came {} ago (expected within {limit})",
                human(quiet)
            ),
        );
    }
    let mut summary = match held.newest_received_ms {
        Some(_) => format!(
            "no event from {source} for {} (expected within {limit})",
            human(quiet)
        ),
        None => format!(
            "no event from {source} since {} {} ago (expected within {limit})",
            match since {
                Since::Start => "hookinbox started",
                Since::Reload => "a reload added it",
            },
            human(quiet)
        ),
    };
    match history {
        Some(History {
            every: Some(every), ..
        }) => summary.push_str(&format!("; it usually sends every {}", human(every))),
        Some(History { received: 0, .. }) => {
            summary.push_str("; it sent nothing in the last 7 days either")
        }
        _ => {}
    }
    (true, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    #[test]
    fn quiet_counts_from_the_newest_event_else_from_the_start() {
        assert_eq!(
            quiet_for(Some(10 * MIN), 50 * MIN, 70 * MIN),
            Duration::from_secs(3600)
        );
        assert_eq!(
            quiet_for(None, 50 * MIN, 70 * MIN),
            Duration::from_secs(1200)
        );
        assert_eq!(quiet_for(Some(80 * MIN), 0, 70 * MIN), Duration::ZERO);
    }

    #[test]
    fn history_spreads_the_received_events_of_the_source_over_their_span() {
        let rows: Vec<MinuteRow> = vec![
            (100, "stripe".into(), MinuteKind::Received, 3),
            (100, "stripe".into(), MinuteKind::Duplicate, 9),
            (100, "github".into(), MinuteKind::Received, 50),
            (140, "stripe".into(), MinuteKind::Received, 2),
        ];
        // 5 events from minute 100 to minute 140: 4 gaps of 10 minutes.
        let h = History::of(&rows, "stripe", Some(140 * MIN));
        assert_eq!(h.received, 5);
        assert_eq!(h.every, Some(Duration::from_secs(600)));
        let one = History::of(&rows[..1], "stripe", Some(100 * MIN));
        assert_eq!(one.every, Some(Duration::ZERO));
        let none = History::of(&rows, "paddle", None);
        assert_eq!(
            none,
            History {
                received: 0,
                every: None
            }
        );
    }

    #[test]
    fn the_summary_says_how_long_against_what_was_expected_and_the_habit() {
        let held = SourceStats {
            newest_received_ms: Some(0),
            ..SourceStats::default()
        };
        let hour = Duration::from_secs(3600);
        let history = History {
            received: 2000,
            every: Some(Duration::from_secs(245)),
        };
        let (quiet, text) = judge(
            "stripe",
            &held,
            6 * hour,
            (7 * hour, Since::Start),
            Some(history),
        );
        assert!(quiet);
        assert_eq!(
            text,
            "no event from stripe for 7h (expected within 6h); it usually sends every 4m"
        );
        let (quiet, text) = judge(
            "stripe",
            &held,
            6 * hour,
            (Duration::from_secs(90), Since::Start),
            None,
        );
        assert!(!quiet);
        assert_eq!(
            text,
            "source stripe sends again: its newest event came 1m ago (expected within 6h)"
        );
        let never = SourceStats::default();
        let (_, text) = judge(
            "new",
            &never,
            hour,
            (2 * hour, Since::Start),
            Some(History {
                received: 0,
                every: None,
            }),
        );
        assert_eq!(
            text,
            "no event from new since hookinbox started 2h ago (expected within 1h); it sent nothing in the last 7 days either"
        );
        let (_, text) = judge("new", &never, hour, (2 * hour, Since::Reload), None);
        assert_eq!(
            text,
            "no event from new since a reload added it 2h ago (expected within 1h)"
        );
    }
}
