//! Secondary indexes and maintained counts: what makes a list, a lookup or
//! the stats cost what they return, not what the store holds.
//!
//! Each `state` row is mirrored by the entries [`Indexed::of`] names: one in
//! `by_type`, one in `pending_since` while it is pending, and one unit in
//! `counts` under its (source, type, tally). A list by status or source
//! merges the `by_type` ranges of the (source, type) pairs that `counts`
//! holds in that status ([`matching`]), so one index answers every filter
//! and an event touches as few tables per commit as it can. Every
//! write of a `state` row goes through `Tables::put_state` or
//! `Tables::delete_event`, which move those entries in the same transaction
//! (`IndexTables::reindex`), so the indexes can never disagree with `state` after
//! a commit — `store::tests::props` checks this after random transitions.
//!
//! Counts and per-minute buckets change many times per batch: the changes
//! are summed in memory ([`Deltas`]) and written once per key when the
//! batch's transaction is done (`IndexTables::flush`).

use std::borrow::Cow;

use redb::{ReadTransaction, ReadableTable, Table, WriteTransaction};

use super::error::WriteError;
use super::schema::{BY_TYPE, COUNTS, EventState, MINUTES, PENDING_SINCE, STATE, Status};

/// Per-minute buckets older than this are swept: the dashboard draws hours.
pub const MINUTES_KEPT: u64 = 7 * 24 * 60;

/// An event's place in the counts: its status, with pending split by whether
/// an attempt of this round has failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tally {
    /// Pending, no failed attempt in this round yet.
    Pending,
    /// Pending after at least one failed attempt.
    Retrying,
    Held,
    Delivered,
    Dead,
    Ignored,
    Filtered,
}

impl Tally {
    pub const ALL: [Tally; 7] = [
        Tally::Pending,
        Tally::Retrying,
        Tally::Held,
        Tally::Delivered,
        Tally::Dead,
        Tally::Ignored,
        Tally::Filtered,
    ];

    /// Its byte in `counts` keys. Stored: never renumber.
    pub fn code(self) -> u8 {
        match self {
            Tally::Pending => 0,
            Tally::Retrying => 1,
            Tally::Held => 2,
            Tally::Delivered => 3,
            Tally::Dead => 4,
            Tally::Ignored => 5,
            Tally::Filtered => 6,
        }
    }

    fn from_code(code: u8) -> Option<Tally> {
        Tally::ALL.into_iter().find(|t| t.code() == code)
    }

    /// The status whose events this tally counts.
    pub fn status(self) -> Status {
        match self {
            Tally::Pending | Tally::Retrying => Status::Pending,
            Tally::Held => Status::Held,
            Tally::Delivered => Status::Delivered,
            Tally::Dead => Status::Dead,
            Tally::Ignored => Status::Ignored,
            Tally::Filtered => Status::Filtered,
        }
    }

    fn of(state: &EventState) -> Tally {
        match state.status {
            Status::Pending if state.attempts > 0 => Tally::Retrying,
            Status::Pending => Tally::Pending,
            Status::Held => Tally::Held,
            Status::Delivered => Tally::Delivered,
            Status::Dead => Tally::Dead,
            Status::Ignored => Tally::Ignored,
            Status::Filtered => Tally::Filtered,
        }
    }
}

/// What a minute bucket counts. Received and duplicates by source;
/// the others by route (a destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MinuteKind {
    Received,
    Duplicate,
    Delivered,
    DeadLettered,
    /// Attempts made (started in the minute), any outcome.
    Attempted,
    /// Attempts that did not deliver (a status refused or to retry, a
    /// timeout, a connection or transport error, an interrupted one).
    Failed,
    /// Attempts that took up to [`LATENCY_BOUNDS_MS`]`[i]` (the last: more
    /// than the one before), an interrupted one not counted.
    Latency(u8),
}

/// The upper bounds of the attempt latency buckets, ms; the last bucket
/// is everything above the last bound.
pub const LATENCY_BOUNDS_MS: [u64; 11] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000,
];

/// The first code of [`MinuteKind::Latency`]: 16 + the bucket.
const LATENCY_CODE: u8 = 16;

impl MinuteKind {
    pub const ALL: [MinuteKind; 6] = [
        MinuteKind::Received,
        MinuteKind::Duplicate,
        MinuteKind::Delivered,
        MinuteKind::DeadLettered,
        MinuteKind::Attempted,
        MinuteKind::Failed,
    ];

    /// Its byte in `minutes` keys. Stored: never renumber.
    pub fn code(self) -> u8 {
        match self {
            MinuteKind::Received => 0,
            MinuteKind::Duplicate => 1,
            MinuteKind::Delivered => 2,
            MinuteKind::DeadLettered => 3,
            MinuteKind::Attempted => 4,
            MinuteKind::Failed => 5,
            MinuteKind::Latency(bucket) => LATENCY_CODE + bucket,
        }
    }

    pub(super) fn from_code(code: u8) -> Option<MinuteKind> {
        let buckets = LATENCY_BOUNDS_MS.len() as u8 + 1;
        match code.checked_sub(LATENCY_CODE) {
            Some(bucket) if bucket < buckets => Some(MinuteKind::Latency(bucket)),
            _ => MinuteKind::ALL.into_iter().find(|k| k.code() == code),
        }
    }

    /// The latency bucket of an attempt that took `ms`.
    pub fn latency(ms: u64) -> MinuteKind {
        let bucket = LATENCY_BOUNDS_MS.partition_point(|&bound| bound < ms);
        MinuteKind::Latency(bucket as u8)
    }
}

/// The part of an event's state that the indexes and counts follow:
/// borrowed from the state being written, owned for the state it replaces
/// ([`Indexed::into_owned`]), so the hot path copies no string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indexed<'a> {
    source: Cow<'a, str>,
    /// `""` when the event has no type.
    event_type: Cow<'a, str>,
    status: Status,
    tally: Tally,
    /// The round's start while pending: its key in `pending_since`.
    pending_since: Option<u64>,
}

impl<'a> Indexed<'a> {
    pub fn of(state: &'a EventState) -> Indexed<'a> {
        Indexed {
            source: Cow::Borrowed(&state.source),
            event_type: Cow::Borrowed(state.event_type.as_deref().unwrap_or_default()),
            status: state.status,
            tally: Tally::of(state),
            pending_since: (state.status == Status::Pending).then_some(state.round_started_ms),
        }
    }

    pub fn into_owned(self) -> Indexed<'static> {
        Indexed {
            source: Cow::Owned(self.source.into_owned()),
            event_type: Cow::Owned(self.event_type.into_owned()),
            ..self
        }
    }
}

/// Count changes of one transaction, written once per key by `IndexTables::flush`.
/// A batch touches a handful of keys: a list searched by `&str` allocates
/// only for a key's first change.
#[derive(Debug, Default)]
pub struct Deltas {
    counts: Vec<(String, String, u8, i64)>,
    minutes: Vec<(u64, String, u8, u64)>,
}

impl Deltas {
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.minutes.is_empty()
    }

    fn count(&mut self, i: &Indexed<'_>, delta: i64) {
        let tally = i.tally.code();
        match self
            .counts
            .iter_mut()
            .find(|(s, t, c, _)| *c == tally && *s == *i.source && *t == *i.event_type)
        {
            Some(entry) => entry.3 += delta,
            None => {
                self.counts
                    .push((i.source.to_string(), i.event_type.to_string(), tally, delta))
            }
        }
    }
}

/// The index tables of one write transaction and its count changes. Owned
/// by `Tables`, which calls [`IndexTables::reindex`] with every `state` write.
pub struct IndexTables<'t> {
    by_type: Table<'t, (&'static str, &'static str, u8, u64), ()>,
    pending_since: Table<'t, (&'static str, u64, u64), ()>,
    counts: Table<'t, (&'static str, &'static str, u8), u64>,
    minutes: Table<'t, (u64, &'static str, u8), u64>,
    /// Count changes not yet written: see [`IndexTables::flush`].
    deltas: Deltas,
}

impl<'t> IndexTables<'t> {
    pub fn open(txn: &'t WriteTransaction) -> Result<IndexTables<'t>, WriteError> {
        Ok(IndexTables {
            by_type: txn.open_table(BY_TYPE)?,
            pending_since: txn.open_table(PENDING_SINCE)?,
            counts: txn.open_table(COUNTS)?,
            minutes: txn.open_table(MINUTES)?,
            deltas: Deltas::default(),
        })
    }

    /// Moves event `seq`'s index entries and count from what `before` names
    /// to what `after` names (`None`: the event is new, or gone).
    pub fn reindex(
        &mut self,
        seq: u64,
        before: Option<&Indexed<'_>>,
        after: Option<&Indexed<'_>>,
    ) -> Result<(), WriteError> {
        if before == after {
            return Ok(());
        }
        fn listed<'b>(i: &'b Indexed<'_>) -> (&'b str, &'b str, Status) {
            (&i.source, &i.event_type, i.status)
        }
        fn counted<'b>(i: &'b Indexed<'_>) -> (&'b str, &'b str, Tally) {
            (&i.source, &i.event_type, i.tally)
        }
        if before.map(listed) != after.map(listed) {
            if let Some(b) = before {
                self.by_type
                    .remove((&*b.source, &*b.event_type, b.status.code(), seq))?;
            }
            if let Some(a) = after {
                self.by_type
                    .insert((&*a.source, &*a.event_type, a.status.code(), seq), ())?;
            }
        }
        fn since<'b>(i: &'b Indexed<'_>) -> Option<(&'b str, u64)> {
            i.pending_since.map(|at| (&*i.source, at))
        }
        let (was, is) = (before.and_then(since), after.and_then(since));
        if was != is {
            if let Some((source, at)) = was {
                self.pending_since.remove((source, at, seq))?;
            }
            if let Some((source, at)) = is {
                self.pending_since.insert((source, at, seq), ())?;
            }
        }
        if before.map(counted) != after.map(counted) {
            if let Some(b) = before {
                self.deltas.count(b, -1);
            }
            if let Some(a) = after {
                self.deltas.count(a, 1);
            }
        }
        Ok(())
    }

    /// Counts one `kind` for `source` in the minute of `at_ms`.
    pub fn count_minute(&mut self, at_ms: u64, source: &str, kind: MinuteKind) {
        let (minute, kind) = (at_ms / 60_000, kind.code());
        match self
            .deltas
            .minutes
            .iter_mut()
            .find(|(m, s, k, _)| *m == minute && *k == kind && s == source)
        {
            Some(entry) => entry.3 += 1,
            None => self
                .deltas
                .minutes
                .push((minute, source.to_owned(), kind, 1)),
        }
    }

    /// Writes the transaction's count changes. Call once, before commit.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        for (source, event_type, tally, delta) in std::mem::take(&mut self.deltas.counts) {
            if delta == 0 {
                continue;
            }
            let key = (source.as_str(), event_type.as_str(), tally);
            let now = self.counts.get(key)?.map_or(0, |v| v.value());
            let next = now.checked_add_signed(delta).ok_or_else(|| {
                WriteError::Corrupt(super::format::row::DecodeError::Codec(format!(
                    "count of {source}/{event_type}/{tally} would go below zero ({now} {delta:+})"
                )))
            })?;
            if next == 0 {
                self.counts.remove(key)?;
            } else {
                self.counts.insert(key, next)?;
            }
        }
        for (minute, source, kind, n) in std::mem::take(&mut self.deltas.minutes) {
            let key = (minute, source.as_str(), kind);
            let now = self.minutes.get(key)?.map_or(0, |v| v.value());
            self.minutes.insert(key, now + n)?;
        }
        Ok(())
    }

    /// Removes up to `limit` minute buckets older than [`MINUTES_KEPT`]
    /// before `now_ms`; returns how many, and whether more are due.
    pub fn sweep_minutes(&mut self, now_ms: u64, limit: usize) -> Result<(u64, bool), WriteError> {
        let cutoff = (now_ms / 60_000).saturating_sub(MINUTES_KEPT);
        let mut old = Vec::new();
        let mut more = false;
        for row in self.minutes.range((0, "", 0)..(cutoff, "", 0))? {
            if old.len() == limit {
                more = true;
                break;
            }
            let (key, _) = row?;
            let (minute, source, kind) = key.value();
            old.push((minute, source.to_owned(), kind));
        }
        for (minute, source, kind) in &old {
            self.minutes.remove((*minute, source.as_str(), *kind))?;
        }
        Ok((old.len() as u64, more))
    }
}

/// Stored events in one tally, by source and event type.
pub type CountRows = Vec<(String, String, Tally, u64)>;

/// Every non-zero count: (source, event type or `""`, tally, events).
pub fn counts(txn: &ReadTransaction) -> Result<CountRows, redb::Error> {
    let table = txn.open_table(COUNTS)?;
    let mut out = Vec::new();
    for row in table.iter()? {
        let (key, value) = row?;
        let (source, event_type, tally) = key.value();
        if let Some(tally) = Tally::from_code(tally) {
            out.push((
                source.to_owned(),
                event_type.to_owned(),
                tally,
                value.value(),
            ));
        }
    }
    Ok(out)
}

/// The newest delivery key of `route` in one (event type, tally) of
/// `counts`: the last `by_type` entry of that range, one lookup.
pub fn newest_key(
    txn: &ReadTransaction,
    route: &str,
    event_type: &str,
    tally: Tally,
) -> Result<Option<u64>, redb::Error> {
    let table = txn.open_table(BY_TYPE)?;
    let code = tally.status().code();
    let last = table
        .range((route, event_type, code, 0)..=(route, event_type, code, u64::MAX))?
        .next_back()
        .transpose()?;
    Ok(last.map(|(key, _)| key.value().3))
}

/// When the oldest pending delivery of `route` began its round, if any.
pub fn oldest_pending(txn: &ReadTransaction, route: &str) -> Result<Option<u64>, redb::Error> {
    let table = txn.open_table(PENDING_SINCE)?;
    let first = table
        .range((route, 0, 0)..=(route, u64::MAX, u64::MAX))?
        .next()
        .transpose()?;
    Ok(first.map(|(key, _)| key.value().1))
}

/// One minute bucket: (minute since the epoch, source, kind, count).
pub type MinuteRow = (u64, String, MinuteKind, u64);

/// The buckets from `from_ms`'s minute on, oldest first.
pub fn minutes(txn: &ReadTransaction, from_ms: u64) -> Result<Vec<MinuteRow>, redb::Error> {
    let table = txn.open_table(MINUTES)?;
    let mut out = Vec::new();
    for row in table.range((from_ms / 60_000, "", 0)..)? {
        let (key, value) = row?;
        let (minute, source, kind) = key.value();
        if let Some(kind) = MinuteKind::from_code(kind) {
            out.push((minute, source.to_owned(), kind, value.value()));
        }
    }
    Ok(out)
}

/// A newest-first stream of seqs below a cursor, from one index range.
type Seqs = Box<dyn Iterator<Item = Result<u64, redb::Error>>>;

/// Which seqs an index walk may return: `lo..hi`.
#[derive(Debug, Clone, Copy)]
pub struct SeqRange {
    pub lo: u64,
    pub hi: u64,
}

/// What an index walk selects; `None` matches all.
#[derive(Debug, Clone, Copy, Default)]
pub struct Which<'a> {
    pub source: Option<&'a str>,
    /// A route: one destination's deliveries.
    pub destination: Option<&'a str>,
    pub status: Option<Status>,
    pub event_type: Option<&'a str>,
}

/// The delivery keys that `which` selects, in `range`, newest first. With
/// nothing selected: `state` in key order. Else the `by_type` ranges of
/// every (route, type, status) that `counts` says holds deliveries and the
/// filter allows, merged: one range per pair when a status or type is
/// given, a handful per pair otherwise.
pub fn matching(
    txn: &ReadTransaction,
    counts: &CountRows,
    which: Which<'_>,
    range: SeqRange,
) -> Result<Merged, redb::Error> {
    let Which {
        source,
        destination,
        status,
        event_type,
    } = which;
    let SeqRange { lo, hi } = range;
    let mut streams: Vec<Seqs> = Vec::new();
    if lo >= hi {
        return Merged::new(streams);
    }
    let last = hi - 1;
    if source.is_none() && destination.is_none() && status.is_none() && event_type.is_none() {
        let table = txn.open_table(STATE)?;
        streams.push(Box::new(
            table
                .range(lo..=last)?
                .rev()
                .map(|row| row.map(|(k, _)| k.value()).map_err(Into::into)),
        ));
        return Merged::new(streams);
    }
    // Pending and retrying are two tallies of one status: one range.
    let mut ranges: Vec<(&str, &str, Status)> = counts
        .iter()
        .filter(|(s, t, tally, n)| {
            *n > 0
                && source.is_none_or(|want| want == super::schema::route_source(s))
                && destination.is_none_or(|want| want == s)
                && event_type.is_none_or(|want| want == t)
                && status.is_none_or(|want| want == tally.status())
        })
        .map(|(s, t, tally, _)| (s.as_str(), t.as_str(), tally.status()))
        .collect();
    ranges.sort_unstable_by_key(|&(s, t, status)| (s, t, status.code()));
    ranges.dedup();
    let table = txn.open_table(BY_TYPE)?;
    for (source, event_type, status) in ranges {
        let code = status.code();
        streams.push(Box::new(
            table
                .range((source, event_type, code, lo)..=(source, event_type, code, last))?
                .rev()
                .map(|row| row.map(|(k, _)| k.value().3).map_err(Into::into)),
        ));
    }
    Merged::new(streams)
}

/// Several newest-first key streams as one, newest first. Each stream holds
/// distinct keys and no key is in two streams (a delivery has one route,
/// type and status), so the merge never repeats one; an event's deliveries
/// come out side by side (its block holds no other event's keys). A heap of the streams'
/// heads: a page costs its length × log(streams), whatever the store holds.
pub struct Merged {
    streams: Vec<Seqs>,
    heads: std::collections::BinaryHeap<(u64, usize)>,
}

impl Merged {
    fn new(mut streams: Vec<Seqs>) -> Result<Merged, redb::Error> {
        let mut heads = std::collections::BinaryHeap::with_capacity(streams.len());
        for (i, stream) in streams.iter_mut().enumerate() {
            if let Some(seq) = stream.next().transpose()? {
                heads.push((seq, i));
            }
        }
        Ok(Merged { streams, heads })
    }
}

impl Iterator for Merged {
    type Item = Result<u64, redb::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let (seq, i) = self.heads.pop()?;
        match self.streams[i].next().transpose() {
            Ok(Some(next)) => self.heads.push((next, i)),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(seq))
    }
}

/// Recomputes every index entry and count from `state` and compares them
/// with the tables: the invariant this module keeps. `Err` says what differs.
#[cfg(test)]
pub(crate) fn check(txn: &ReadTransaction) -> Result<(), String> {
    use std::collections::{BTreeMap, BTreeSet};

    let mut by_type = BTreeSet::new();
    let mut pending = BTreeSet::new();
    let mut counts: BTreeMap<(String, String, u8), u64> = BTreeMap::new();
    let states = txn.open_table(STATE).map_err(|e| e.to_string())?;
    for row in states.iter().map_err(|e| e.to_string())? {
        let (seq, raw) = row.map_err(|e| e.to_string())?;
        let seq = seq.value();
        let state = super::format::row::decode_state(raw.value()).map_err(|e| e.to_string())?;
        let i = Indexed::of(&state);
        let code = i.status.code();
        by_type.insert((i.source.to_string(), i.event_type.to_string(), code, seq));
        if let Some(at) = i.pending_since {
            pending.insert((i.source.to_string(), at, seq));
        }
        *counts
            .entry((
                i.source.to_string(),
                i.event_type.to_string(),
                i.tally.code(),
            ))
            .or_default() += 1;
    }
    macro_rules! actual {
        ($def:expr, |$k:ident, $v:ident| $row:expr) => {{
            let table = txn.open_table($def).map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            for row in table.iter().map_err(|e| e.to_string())? {
                let ($k, $v) = row.map_err(|e| e.to_string())?;
                let ($k, $v) = ($k.value(), $v.value());
                out.push($row);
            }
            out
        }};
    }
    let compare = |name: &str, want: Vec<String>, got: Vec<String>| {
        if want == got {
            Ok(())
        } else {
            Err(format!("{name}: from state {want:?}, in the table {got:?}"))
        }
    };
    fn strings<T: std::fmt::Debug>(rows: impl IntoIterator<Item = T>) -> Vec<String> {
        rows.into_iter().map(|row| format!("{row:?}")).collect()
    }
    compare(
        "by_type",
        strings(by_type),
        strings(actual!(BY_TYPE, |k, _v| (
            k.0.to_owned(),
            k.1.to_owned(),
            k.2,
            k.3
        ))),
    )?;
    compare(
        "pending_since",
        strings(pending),
        strings(actual!(PENDING_SINCE, |k, _v| (k.0.to_owned(), k.1, k.2))),
    )?;
    compare(
        "counts",
        strings(counts),
        strings(actual!(COUNTS, |k, v| (
            (k.0.to_owned(), k.1.to_owned(), k.2),
            v
        ))),
    )
}
