//! What the store holds, counted: [`Store::stats`] by source, route, event
//! type and status, and [`Store::activity`] per minute. Both read the counts
//! the writer keeps ([`super::super::index`]); of the events, stats read one
//! record per source, its newest, for when it was received.

use redb::ReadableDatabase;

use super::super::error::StoreError;
use super::super::handle::Store;
use super::super::index::MinuteKind;
use super::super::{index, pack, schema};

impl Store {
    /// What the dedupe index holds: sealed runs and their keys, keys in
    /// hash tables, and the memory of both.
    pub fn dedupe_sizes(&self) -> super::super::DedupeSizes {
        self.shared
            .dedupe
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .sizes()
    }
}

/// How stats name the event type of events that have none.
pub const NO_TYPE: &str = "(none)";

/// Events by status, as stats count them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub pending: u64,
    /// Pending after at least one failed attempt.
    pub retrying: u64,
    pub held: u64,
    pub delivered: u64,
    pub dead: u64,
    pub ignored: u64,
    /// Not taken by the destination's filter.
    pub filtered: u64,
}

impl Counts {
    fn add(&mut self, tally: index::Tally, n: u64) {
        match tally {
            index::Tally::Retrying => {
                self.pending += n;
                self.retrying += n;
            }
            index::Tally::Pending => self.pending += n,
            index::Tally::Held => self.held += n,
            index::Tally::Delivered => self.delivered += n,
            index::Tally::Dead => self.dead += n,
            index::Tally::Ignored => self.ignored += n,
            index::Tally::Filtered => self.filtered += n,
        }
    }
}

/// What the store holds for one source. Counts are deliveries: an event
/// sent to two destinations counts once in each (held and filtered events
/// once, on the source's own route).
#[derive(Debug, Clone, Default)]
pub struct SourceStats {
    pub counts: Counts,
    pub by_type: std::collections::BTreeMap<String, Counts>,
    /// When the oldest pending delivery was received (or replayed).
    pub oldest_pending_ms: Option<u64>,
    /// The same by route (the source's own, then `source.name` ones).
    pub routes: std::collections::BTreeMap<String, RouteStats>,
    /// When its newest stored event was received (a duplicate is not new).
    pub newest_received_ms: Option<u64>,
}

/// What the store holds for one route (one destination's queue).
#[derive(Debug, Clone, Default)]
pub struct RouteStats {
    pub counts: Counts,
    pub oldest_pending_ms: Option<u64>,
}

impl Store {
    /// Counts of every stored event by source, event type and status, from
    /// one snapshot. No scan: it reads the `counts` rows the writer keeps
    /// with every change, and the first `pending_since` entry of each route
    /// for the oldest pending age, so its cost does not grow with the
    /// events retained. A source's newest event is the greatest delivery
    /// key among the last `by_type` entries of its counted ranges, and one
    /// record read says when it was received.
    pub fn stats(&self) -> Result<std::collections::BTreeMap<String, SourceStats>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let mut out: std::collections::BTreeMap<String, SourceStats> = Default::default();
        let mut newest: std::collections::BTreeMap<String, u64> = Default::default();
        for (route, event_type, tally, n) in index::counts(&txn)? {
            let source = schema::route_source(&route).to_owned();
            if let Some(key) = index::newest_key(&txn, &route, &event_type, tally)? {
                let at = newest.entry(source.clone()).or_default();
                *at = (*at).max(key);
            }
            let stats = out.entry(source).or_default();
            stats.counts.add(tally, n);
            stats.routes.entry(route).or_default().counts.add(tally, n);
            let kind = if event_type.is_empty() {
                NO_TYPE.to_owned()
            } else {
                event_type
            };
            stats.by_type.entry(kind).or_default().add(tally, n);
        }
        for stats in out.values_mut() {
            for (route, r) in stats.routes.iter_mut() {
                r.oldest_pending_ms = index::oldest_pending(&txn, route)?;
                stats.oldest_pending_ms = match (stats.oldest_pending_ms, r.oldest_pending_ms) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        let events = txn.open_table(schema::EVENTS)?;
        let packed = txn.open_table(schema::PACK)?;
        for (source, key) in newest {
            // The event a delivery key belongs to is the last row at or below it.
            if let Some(row) = events.range(..=key)?.next_back() {
                let (_, raw) = row?;
                let record = pack::decode::<StoreError>(&packed, raw.value())?;
                if let Some(stats) = out.get_mut(&source) {
                    stats.newest_received_ms = Some(record.received_at_ms);
                }
            }
        }
        Ok(out)
    }

    /// Per-minute counts (received, duplicates, delivered, dead-lettered per
    /// source; attempts, failed attempts and their latency buckets per
    /// destination) from `from_ms`'s minute on, oldest first: the last
    /// hours without a scan of events. Kept for `index::MINUTES_KEPT`.
    pub fn activity(&self, from_ms: u64) -> Result<Vec<index::MinuteRow>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let mut rows = index::minutes(&txn, from_ms)?;
        // Delivered and dead-lettered are counted by route: by source here.
        // Attempts and their latencies stay by route: by destination.
        for row in &mut rows {
            if matches!(row.2, MinuteKind::Delivered | MinuteKind::DeadLettered)
                && let Some((source, _)) = row.1.split_once('.')
            {
                row.1 = source.to_owned();
            }
        }
        Ok(rows)
    }
}
