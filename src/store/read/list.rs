//! Lists and searches: pages of events matching an [`EventFilter`] (and,
//! for a search, a [`PayloadMatch`]), newest first, from one snapshot. The
//! candidates come from the indexes ([`index::matching`]) or the dedupe
//! index; [`Rows`] reaches their events; a time range is a seq range found
//! by binary search.

use redb::{ReadableDatabase, ReadableTable};

use super::super::block::{block, event_of};
use super::super::dedupe::fingerprint;
use super::super::error::StoreError;
use super::super::format::row;
use super::super::handle::Store;
use super::super::index;
use super::super::pack;
use super::super::payload::PayloadMatch;
use super::super::schema::{self, EVENTS, STATE};
use super::super::types::{Budget, Delivery, EventFilter, Matching, SearchPage, StoredEvent};
use super::event::erased_note;

/// One row of `events`, borrowed from the read snapshot.
type EventRow = redb::AccessGuard<'static, &'static [u8]>;

/// The `events` rows of the events that newest-first candidate delivery
/// keys belong to, each event once: a candidate's event is the last `events`
/// row at or below it (see [`schema`]). Near candidates (a filter that
/// matches many events) are reached by stepping a cursor down `events`, far
/// ones by a fresh lookup: a step is a fraction of a lookup.
struct Rows {
    events: redb::ReadOnlyTable<u64, &'static [u8]>,
    candidates: Box<dyn Iterator<Item = Result<u64, redb::Error>>>,
    cursor: Option<std::iter::Rev<redb::Range<'static, u64, &'static [u8]>>>,
    /// The seq of the cursor's last row.
    at: Option<u64>,
    /// The last event returned: candidates in its block are skipped.
    last: Option<u64>,
}

impl Rows {
    /// Rows the cursor may step over before a lookup is cheaper.
    const MAX_STEPS: usize = 16;

    fn step(&mut self) -> Result<Option<(u64, EventRow)>, StoreError> {
        let Some(cursor) = &mut self.cursor else {
            return Ok(None);
        };
        match cursor.next().transpose()? {
            Some((k, v)) => {
                self.at = Some(k.value());
                Ok(Some((k.value(), v)))
            }
            None => {
                self.cursor = None;
                self.at = None;
                Ok(None)
            }
        }
    }

    /// The row of the event whose block holds delivery `key`, if the
    /// snapshot holds one. Seqs are dense in `events` (blocks of a few
    /// keys; swept events leave holes), so the distance from the cursor's
    /// last row is about the rows to step over.
    fn row(&mut self, key: u64) -> Result<Option<(u64, EventRow)>, StoreError> {
        let near = self
            .at
            .is_some_and(|at| at > key && at - key <= Self::MAX_STEPS as u64);
        if near {
            for _ in 0..Self::MAX_STEPS {
                match self.step()? {
                    Some((k, _)) if k > key => continue,
                    found => return Ok(found),
                }
            }
        }
        self.cursor = Some(self.events.range(..=key)?.rev());
        self.step()
    }
}

impl Iterator for Rows {
    /// (the event's seq, the candidate that led to it, its row)
    type Item = Result<(u64, u64, EventRow), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let key = match self.candidates.next()? {
                Ok(key) => key,
                Err(e) => return Some(Err(e.into())),
            };
            if self.last.is_some_and(|last| key >= last) {
                continue;
            }
            match self.row(key) {
                Ok(Some((seq, row))) => {
                    self.last = Some(seq);
                    return Some(Ok((seq, key, row)));
                }
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl Store {
    /// Events matching `filter`, newest first, below `before` (a seq;
    /// `None`: from the newest), at most `limit`. The candidates come from
    /// the `by_type` ranges the filter allows (see [`index::matching`]), so
    /// a page costs its own events whatever the store holds. The cursor is where the next
    /// page starts (`None`: no more matches); an empty page means none.
    pub fn list(
        &self,
        filter: &EventFilter,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<StoredEvent>, Option<u64>), StoreError> {
        let page = self.walk(filter, before, limit, &PayloadMatch::default(), None)?;
        Ok((page.events, page.cursor))
    }

    /// Like [`Store::list`], and each payload must also match `payload`.
    /// Payloads are read one by one, so a call stops at `budget` (events
    /// examined, time) and says how far back it got: the caller continues
    /// from the cursor.
    pub fn search(
        &self,
        filter: &EventFilter,
        payload: &PayloadMatch,
        before: Option<u64>,
        limit: usize,
        budget: Budget,
    ) -> Result<SearchPage, StoreError> {
        self.walk(filter, before, limit, payload, Some(budget))
    }

    fn walk(
        &self,
        filter: &EventFilter,
        before: Option<u64>,
        limit: usize,
        payload: &PayloadMatch,
        budget: Option<Budget>,
    ) -> Result<SearchPage, StoreError> {
        let started = std::time::Instant::now();
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let erased = txn.open_table(schema::ERASED)?;
        let rows = Rows {
            events: txn.open_table(EVENTS)?,
            candidates: self.candidates(&txn, &events, &states, filter, before)?,
            cursor: None,
            at: None,
            last: None,
        };
        let matcher = payload.matcher();
        let searching = !payload.is_empty();
        let packed = txn.open_table(schema::PACK)?;
        let (mut scratch, mut buf) = (Vec::new(), Vec::new());
        let mut page = SearchPage::default();
        for row in rows {
            let (seq, key, raw_event) = row?;
            if page.events.len() == limit {
                page.cursor = Some(key + 1);
                return Ok(page);
            }
            if let Some(budget) = &budget
                && (page.examined >= budget.events || started.elapsed() >= budget.time)
            {
                page.cursor = Some(key + 1);
                return Ok(page);
            }
            let bytes = pack::record::<StoreError>(&packed, raw_event.value(), &mut buf)?;
            if searching {
                // Most payloads do not match: test the body on a borrowed
                // view first, and read the state only for those that do.
                let view = row::decode_event_view(bytes, &mut scratch)?;
                page.examined += 1;
                page.scanned_back_to_ms = Some(view.received_at_ms);
                if !matcher.matches_in(view.source, view.body) {
                    continue;
                }
            }
            let deliveries: Vec<Delivery> = block::<StoreError>(&events, &states, seq)?;
            let record = row::decode_event(bytes)?;
            let Some(first) = deliveries
                .iter()
                .find(|d| filter.matches(&record, &d.state))
            else {
                continue;
            };
            page.events.push(StoredEvent {
                seq,
                id: self.public_id(seq),
                record,
                state: first.state.clone(),
                deliveries,
                erased: erased_note(&erased, seq)?,
            });
        }
        Ok(page)
    }

    /// The delivery key and route of each delivery matching `filter` and
    /// `payload`, newest first, at most `limit` (and whether more match):
    /// what a bulk change needs. Without a payload match it reads state
    /// rows, and a record only to check a time bound, never 100k payloads
    /// for 100k matches; with one it reads each candidate event's payload
    /// once, at most `examine` of them (then `cut`: the caller narrows).
    pub fn matching_ids(
        &self,
        filter: &EventFilter,
        payload: &PayloadMatch,
        limit: usize,
        examine: u64,
    ) -> Result<Matching, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let events = txn.open_table(EVENTS)?;
        let states = txn.open_table(STATE)?;
        let timed = filter.from_ms.is_some() || filter.to_ms.is_some();
        let packed = txn.open_table(schema::PACK)?;
        let matcher = payload.matcher();
        let searching = !payload.is_empty();
        let (mut scratch, mut buf) = (Vec::new(), Vec::new());
        // The last event whose payload was tested, and whether it matched:
        // an event's deliveries are candidates side by side.
        let mut tested: Option<(u64, bool)> = None;
        let mut found = Matching::default();
        for key in self.candidates(&txn, &events, &states, filter, None)? {
            let key = key?;
            let Some(raw) = states.get(key)? else {
                continue;
            };
            let state = row::decode_state(raw.value())?;
            if searching && filter.takes(&state) {
                let Some(seq) = event_of::<StoreError>(&events, key)? else {
                    continue;
                };
                let matched = match tested {
                    Some((at, matched)) if at == seq => matched,
                    _ => {
                        if found.examined == examine {
                            found.cut = true;
                            return Ok(found);
                        }
                        found.examined += 1;
                        let Some(raw_event) = events.get(seq)? else {
                            continue;
                        };
                        let bytes =
                            pack::record::<StoreError>(&packed, raw_event.value(), &mut buf)?;
                        let view = row::decode_event_view(bytes, &mut scratch)?;
                        let matched = matcher.matches_in(view.source, view.body);
                        tested = Some((seq, matched));
                        matched
                    }
                };
                if !matched {
                    continue;
                }
            }
            let matches = if timed {
                let event = event_of::<StoreError>(&events, key)?;
                match event.map(|seq| events.get(seq)).transpose()?.flatten() {
                    Some(raw) => {
                        filter.matches(&pack::decode::<StoreError>(&packed, raw.value())?, &state)
                    }
                    None => false,
                }
            } else {
                // Source, status and type come exactly from the index, the
                // event id from the dedupe index: the state confirms.
                filter.takes(&state)
                    && filter
                        .event_type
                        .as_ref()
                        .is_none_or(|t| state.event_type.as_deref() == Some(t.as_str()))
            };
            if !matches {
                continue;
            }
            if found.ids.len() == limit {
                found.more = true;
                return Ok(found);
            }
            found.ids.push((key, state.source));
        }
        Ok(found)
    }

    /// The delivery keys that may match `filter` below `before`, newest
    /// first: for an event id, the deliveries of what one probe of the
    /// dedupe index per source finds; else the `by_type` ranges that
    /// `counts` says hold matching deliveries.
    fn candidates(
        &self,
        txn: &redb::ReadTransaction,
        events: &redb::ReadOnlyTable<u64, &'static [u8]>,
        states: &redb::ReadOnlyTable<u64, &'static [u8]>,
        filter: &EventFilter,
        before: Option<u64>,
    ) -> Result<Box<dyn Iterator<Item = Result<u64, redb::Error>>>, StoreError> {
        let range = self.seq_range(events, &txn.open_table(schema::PACK)?, filter, before)?;
        let counts = index::counts(txn)?;
        if let Some(event_id) = &filter.event_id {
            let mut names: Vec<&str> = match &filter.source {
                Some(source) => vec![source.as_str()],
                None => counts
                    .iter()
                    .map(|(route, ..)| schema::route_source(route))
                    .collect(),
            };
            names.sort_unstable();
            names.dedup();
            let seqs: Vec<u64> = {
                let index = self.shared.dedupe.read().unwrap_or_else(|p| p.into_inner());
                let found: Result<Vec<_>, _> = names
                    .iter()
                    .map(|name| index.get(fingerprint(name, event_id)))
                    .collect();
                found
                    .map_err(StoreError::Dedupe)?
                    .into_iter()
                    .flatten()
                    .collect()
            };
            let mut keys = Vec::new();
            for seq in seqs {
                for d in block::<StoreError>(events, states, seq)? {
                    if (range.lo..range.hi).contains(&d.key) {
                        keys.push(d.key);
                    }
                }
            }
            keys.sort_unstable_by(|a, b| b.cmp(a));
            return Ok(Box::new(keys.into_iter().map(Ok)));
        }
        Ok(Box::new(index::matching(
            txn,
            &counts,
            index::Which {
                source: filter.source.as_deref(),
                destination: filter.destination.as_deref(),
                status: filter.status,
                event_type: filter.event_type.as_deref(),
            },
            range,
        )?))
    }

    /// The seqs `filter`'s time bounds and the cursor leave: receipt time
    /// grows with seq, so each bound is a binary search over `events`.
    fn seq_range(
        &self,
        events: &redb::ReadOnlyTable<u64, &'static [u8]>,
        packed: &redb::ReadOnlyTable<u64, &'static [u8]>,
        filter: &EventFilter,
        before: Option<u64>,
    ) -> Result<index::SeqRange, StoreError> {
        let lo = match filter.from_ms {
            Some(from) => first_received_at_or_after(events, packed, from)?,
            None => 0,
        };
        let mut hi = before.unwrap_or(u64::MAX);
        if let Some(to) = filter.to_ms {
            hi = hi.min(first_received_at_or_after(events, packed, to)?);
        }
        Ok(index::SeqRange { lo, hi })
    }
}

/// The first seq whose event was received at or after `at_ms` (one past the
/// last if none): a binary search over seq, since receipt time grows with
/// it. Each probe decodes one record: ≈ 25 of them at 10M events.
pub(super) fn first_received_at_or_after(
    events: &redb::ReadOnlyTable<u64, &'static [u8]>,
    packed: &redb::ReadOnlyTable<u64, &'static [u8]>,
    at_ms: u64,
) -> Result<u64, StoreError> {
    let (Some(first), Some(last)) = (events.first()?, events.last()?) else {
        return Ok(0);
    };
    let (mut lo, mut hi) = (first.0.value(), last.0.value() + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let Some((key, raw)) = events.range(mid..)?.next().transpose()? else {
            hi = mid;
            continue;
        };
        if pack::decode::<StoreError>(packed, raw.value())?.received_at_ms >= at_ms {
            hi = mid;
        } else {
            lo = key.value() + 1;
        }
    }
    Ok(lo)
}
