//! What `/api/stats`, the dashboard and the log's summary read beside the
//! registry: totals over every source, counts per event type, and the last
//! latencies per source.
//!
//! Owns tables a scraper never sees, each bounded whatever arrives (event
//! types past a cap count together, a latency window keeps its last
//! values). Refuses to be a metric family: these would be unbounded labels.

use std::sync::Mutex;

/// Received and duplicates per source and event type since the start, for
/// `/api/stats` and the dashboard. Not metric families: a provider sends
/// hundreds of event types, too many labels for a scraper. Past
/// [`TypeTally::TYPES`] types of one source, new ones count together under
/// [`OTHER_TYPES`], so memory stays bounded whatever arrives.
#[derive(Default)]
pub(super) struct TypeTally(Mutex<std::collections::HashMap<String, TypesOf>>);

/// One source's event types → (received, duplicates).
type TypesOf = std::collections::HashMap<String, (u64, u64)>;

/// Where a source's types beyond [`TypeTally::TYPES`] are counted.
pub const OTHER_TYPES: &str = "(other types)";

impl TypeTally {
    const TYPES: usize = 1000;

    pub(super) fn count(&self, source: &str, event_type: &str, duplicate: bool) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !all.contains_key(source) {
            all.insert(source.to_owned(), Default::default());
        }
        let types = all.get_mut(source).expect("inserted above");
        let key = if types.contains_key(event_type) || types.len() < TypeTally::TYPES {
            event_type
        } else {
            OTHER_TYPES
        };
        if !types.contains_key(key) {
            types.insert(key.to_owned(), (0, 0));
        }
        let tally = types.get_mut(key).expect("inserted above");
        if duplicate {
            tally.1 += 1;
        } else {
            tally.0 += 1;
        }
    }

    pub(super) fn of(&self, source: &str) -> Vec<(String, u64, u64)> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.get(source).map_or_else(Vec::new, |types| {
            types
                .iter()
                .map(|(t, &(received, duplicates))| (t.clone(), received, duplicates))
                .collect()
        })
    }
}

/// The last [`Recent::KEPT`] latencies per source, in ms: stats' p50 and p99
/// of what happened lately, without reading the store.
#[derive(Default)]
pub(super) struct Recent(Mutex<std::collections::HashMap<String, std::collections::VecDeque<f64>>>);

impl Recent {
    const KEPT: usize = 4096;

    pub(super) fn remember(&self, source: &str, took: std::time::Duration) {
        let mut recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // No allocation on the hot path once the source has its window.
        if !recent.contains_key(source) {
            recent.insert(source.to_owned(), Default::default());
        }
        let window = recent.get_mut(source).expect("inserted above");
        if window.len() == Recent::KEPT {
            window.pop_front();
        }
        window.push_back(took.as_secs_f64() * 1e3);
    }

    /// p50 and p99 of `source`'s window, in ms.
    pub(super) fn percentiles(&self, source: &str) -> Option<(f64, f64)> {
        let mut values: Vec<f64> = {
            let recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
            recent.get(source)?.iter().copied().collect()
        };
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let at = |p: f64| values[((values.len() - 1) as f64 * p) as usize];
        Some((at(0.5), at(0.99)))
    }
}

/// Counts since the start over every source, for the log's summary line.
#[derive(Default)]
pub(super) struct Totals {
    pub(super) received: std::sync::atomic::AtomicU64,
    pub(super) duplicates: std::sync::atomic::AtomicU64,
    pub(super) rejected: std::sync::atomic::AtomicU64,
    pub(super) delivered: std::sync::atomic::AtomicU64,
    pub(super) failed_attempts: std::sync::atomic::AtomicU64,
    pub(super) dead_lettered: std::sync::atomic::AtomicU64,
}

impl Totals {
    pub(super) fn add(counter: &std::sync::atomic::AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A snapshot of [`Totals`]; two of them give what happened in between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub received: u64,
    pub duplicates: u64,
    pub rejected: u64,
    pub delivered: u64,
    /// Delivery attempts that did not deliver (the event may retry).
    pub failed_attempts: u64,
    pub dead_lettered: u64,
    /// Lines sent to debug past their per-minute budget.
    pub quieted: u64,
}

impl Tally {
    /// What happened between `earlier` and this snapshot.
    pub fn since(self, earlier: Tally) -> Tally {
        Tally {
            received: self.received - earlier.received,
            duplicates: self.duplicates - earlier.duplicates,
            rejected: self.rejected - earlier.rejected,
            delivered: self.delivered - earlier.delivered,
            failed_attempts: self.failed_attempts - earlier.failed_attempts,
            dead_lettered: self.dead_lettered - earlier.dead_lettered,
            quieted: self.quieted - earlier.quieted,
        }
    }

    pub fn is_quiet(&self) -> bool {
        *self == Tally::default()
    }

    /// Something went wrong: a refusal, a failed attempt, a dead letter.
    pub fn has_trouble(&self) -> bool {
        self.rejected + self.failed_attempts + self.dead_lettered > 0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn types_past_the_cap_count_together() {
        let tally = super::TypeTally::default();
        for i in 0..super::TypeTally::TYPES {
            tally.count("s", &format!("t{i}"), false);
        }
        tally.count("s", "t0", true);
        tally.count("s", "late.one", false);
        tally.count("s", "late.two", true);
        tally.count("other", "late.one", false);
        let of = |source: &str, t: &str| {
            tally
                .of(source)
                .into_iter()
                .find(|(name, _, _)| name == t)
                .map(|(_, r, d)| (r, d))
        };
        assert_eq!(tally.of("s").len(), super::TypeTally::TYPES + 1);
        assert_eq!(of("s", "t0"), Some((1, 1)));
        assert_eq!(of("s", "late.one"), None);
        assert_eq!(of("s", super::OTHER_TYPES), Some((1, 1)));
        assert_eq!(of("other", "late.one"), Some((1, 0)));
    }
}
