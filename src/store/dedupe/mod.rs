//! The dedupe index: which `(source, event id)` pairs are stored, and under
//! which seq (a duplicate's answer names the stored event).
//!
//! A B-tree keyed by the provider's event id takes random inserts: on a large
//! table every new event dirties its own 4 KiB leaf. So the durable form is an
//! append-only log instead (`dedupe`: seq → fingerprint and time, see
//! [`super::schema`]), and lookups go to this index, built from the log and
//! the sealed runs when the store opens. It keeps the keys in three places:
//!
//! - **runs** ([`Run`]): the event keys of a closed range of seqs, sorted in a
//!   file of `<data_dir>/dedupe/`, with a filter in memory: ≈ 2.35 bytes of
//!   memory a key. A key the filter does not know costs ≈ 40 ns a run; a hit
//!   is decided by the file. Runs are derived data: a missing or damaged one
//!   is rebuilt from the log at open.
//! - **recent**: the event keys newer than every run's, in a hash table
//!   ([`Map`], 24–48 bytes a key). Once it holds `seal_keys` of them at a
//!   checkpoint (so every one is durable), it is frozen, still answering,
//!   while the sealer ([`seal`]) writes it as a run off the writer thread.
//! - **pinned**: idempotency keys (their own counter of seqs, their own
//!   expiry), and event keys swept from the log but kept live: a pending or
//!   held event's (`dedupe_kept`), or one put back after a failed commit.
//!
//! Runs are never changed. The sweeper removes event keys from the log in
//! seq order (a prefix), so one number says which of theirs are gone:
//! **`swept`**, the largest seq it removed. An event key in a run (or the
//! frozen map) with a seq at or below it is gone unless pinned: the keys
//! the sweep kept are pinned as it keeps them. A run whose every seq is at
//! or below `swept` is dropped, its file deleted. `swept` is stored in
//! `meta` by the sweep's own transaction ([`META_SWEPT`]).
//!
//! A fingerprint is the first 128 bits of SHA-256 over `source \0 event_id`.
//! The index tells keys apart by 106 of its bits ([`map::masked`]): two of
//! n live pairs share them with probability ≈ n²/2¹⁰⁷ (≈ 10⁻¹⁸ for ten
//! million live keys, ≈ 10⁻¹⁵ for a 30-day window at 100 events/s), so equal
//! fingerprints are treated as the same event.

mod load;
mod map;
mod run;
pub mod seal;
mod write;

use std::io;
use std::sync::Arc;

use sha2::{Digest, Sha256};

pub use load::load;
pub use map::{Loader, Map};
pub use run::{MAX_LEVEL, RUN_DIR, Run, RunError};

pub type Fingerprint = u128;

/// The `meta` row holding the index's `swept` (see the module's doc).
pub const META_SWEPT: &str = "dedupe_swept";

/// Event keys a run holds: the recent map is frozen and sealed once it has
/// this many. 1M keys: a recent map of ≤ 48 MiB, a run file of 24 MiB
/// built in ≈ 0.2 s, and ≈ 40 ns a lookup per run.
pub const SEAL_KEYS: usize = 1 << 20;

/// The fingerprint of `(source, event_id)`. Source names cannot contain NUL,
/// so the input is unambiguous.
pub fn fingerprint(source: &str, event_id: &str) -> Fingerprint {
    let mut hash = Sha256::new();
    hash.update(source.as_bytes());
    hash.update([0]);
    hash.update(event_id.as_bytes());
    let digest = hash.finalize();
    u128::from_be_bytes(digest[..16].try_into().expect("16 bytes"))
}

/// Which kind of key: an event's (`dedupe` log, event seqs), or an
/// idempotency key's (`key_log`, its own seqs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Event,
    Key,
}

/// The recent map, frozen while the sealer writes it as a run over `(lo, hi]`.
#[derive(Clone)]
pub struct Frozen {
    pub lo: u64,
    pub hi: u64,
    pub map: Arc<Map>,
}

/// Live dedupe keys: fingerprint → seq. Only the writer changes it (the
/// sealer's runs too go in through the writer).
pub struct DedupeIndex {
    pinned: Map,
    recent: Map,
    frozen: Option<Frozen>,
    /// Oldest first; each starts where the one before ends.
    runs: Vec<Arc<Run>>,
    swept: u64,
    /// The largest seq the runs and the frozen map cover: recent holds
    /// seqs above it.
    sealed_to: u64,
}

/// What [`DedupeIndex::new`] starts from (the store's open builds it).
pub struct Parts {
    pub pinned: Map,
    pub recent: Map,
    pub runs: Vec<Arc<Run>>,
    pub swept: u64,
    pub sealed_to: u64,
}

/// What the index holds, for the open's log line and the benchmarks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sizes {
    pub runs: usize,
    /// Runs by level (sealed = 0).
    pub levels: [usize; MAX_LEVEL as usize + 1],
    /// Whether two runs wait to be merged.
    pub merging: bool,
    pub run_keys: u64,
    pub exact_keys: usize,
    /// Memory: filters, fences and hash tables.
    pub bytes: usize,
    /// The runs' files.
    pub file_bytes: u64,
}

impl Default for DedupeIndex {
    fn default() -> DedupeIndex {
        DedupeIndex::new(Parts {
            pinned: Map::default(),
            recent: Map::default(),
            runs: Vec::new(),
            swept: 0,
            sealed_to: 0,
        })
    }
}

impl DedupeIndex {
    pub fn new(parts: Parts) -> DedupeIndex {
        DedupeIndex {
            pinned: parts.pinned,
            recent: parts.recent,
            frozen: None,
            runs: parts.runs,
            swept: parts.swept,
            sealed_to: parts.sealed_to,
        }
    }

    /// The seq `fp` is live at. An error is a run file that could not be read.
    pub fn get(&self, fp: Fingerprint) -> io::Result<Option<u64>> {
        if let Some(seq) = self.pinned.get(fp).or_else(|| self.recent.get(fp)) {
            return Ok(Some(seq));
        }
        // Sealed: at most one entry a fingerprint is live, and a newer one
        // is in a newer place, so the first found decides.
        let live = |seq: u64| (seq > self.swept).then_some(seq);
        if let Some(frozen) = &self.frozen
            && let Some(seq) = frozen.map.get(fp)
        {
            return Ok(live(seq));
        }
        for run in self.runs.iter().rev() {
            if let Some(seq) = run.get(fp)? {
                return Ok(live(seq));
            }
        }
        Ok(None)
    }

    /// A committed change made `fp` live at `seq`.
    pub fn learn(&mut self, kind: Kind, fp: Fingerprint, seq: u64) {
        match kind {
            Kind::Event if seq > self.swept => self.recent.insert(fp, seq),
            // Kept (or put back): its seq is in the swept range.
            _ => self.pinned.insert(fp, seq),
        }
    }

    /// A committed sweep (or key change) removed `fp` at `seq`.
    pub fn forget(&mut self, kind: Kind, fp: Fingerprint, seq: u64) {
        self.unlearn(kind, fp, seq);
        if kind == Kind::Event {
            self.swept = self.swept.max(seq);
        }
    }

    /// Undoes [`learn`](Self::learn) of a batch the database turned out not
    /// to hold. Such a batch is newer than the last checkpoint, so never
    /// frozen or sealed.
    pub fn unlearn(&mut self, kind: Kind, fp: Fingerprint, seq: u64) {
        self.pinned.remove(fp, seq);
        if kind == Kind::Event {
            self.recent.remove(fp, seq);
        }
    }

    /// Freezes the recent map once it holds `at` keys, all of them durable
    /// and at or below `hi`, unless a frozen one is still being sealed.
    /// Returns it for the sealer.
    pub fn freeze(&mut self, hi: u64, at: usize) -> Option<Frozen> {
        if self.frozen.is_some() || self.recent.len() < at {
            return None;
        }
        let frozen = Frozen {
            lo: self.sealed_to,
            hi,
            map: Arc::new(std::mem::take(&mut self.recent)),
        };
        self.sealed_to = hi;
        self.frozen = Some(frozen.clone());
        Some(frozen)
    }

    /// Undoes [`freeze`](Self::freeze) when the checkpoint that was to make
    /// the frozen keys durable failed: they go back to the recent map, where
    /// a reopen can forget those of batches the database turns out not to
    /// hold. A key swept meanwhile stays gone.
    pub fn thaw(&mut self) {
        if let Some(frozen) = self.frozen.take() {
            for (fp, seq) in frozen.map.iter() {
                if seq > self.swept && self.recent.get(fp).is_none() {
                    self.recent.insert(fp, seq);
                }
            }
            self.sealed_to = frozen.lo;
        }
    }

    /// The seq at or below which a sealed key is gone unless pinned.
    pub fn swept(&self) -> u64 {
        self.swept
    }

    /// Puts `run`, sealed from the frozen map, in its place.
    pub fn install(&mut self, run: Arc<Run>) {
        debug_assert!(
            self.frozen
                .as_ref()
                .is_some_and(|f| (f.lo, f.hi) == (run.lo, run.hi))
        );
        self.frozen = None;
        self.runs.push(run);
    }

    /// The newest two adjacent runs of one level below [`MAX_LEVEL`]: what
    /// the sealer merges next (so runs grow like a binary counter).
    pub fn mergeable(&self) -> Option<(Arc<Run>, Arc<Run>)> {
        self.runs
            .windows(2)
            .rev()
            .find(|pair| pair[0].level == pair[1].level && pair[0].level < MAX_LEVEL)
            .map(|pair| (pair[0].clone(), pair[1].clone()))
    }

    /// Puts `merged` in the place of `older` and `newer`, if both are still
    /// there (the sweep may have expired them meanwhile). Returns whether.
    pub fn replace(&mut self, older: &Arc<Run>, newer: &Arc<Run>, merged: Arc<Run>) -> bool {
        let at = self
            .runs
            .windows(2)
            .position(|pair| Arc::ptr_eq(&pair[0], older) && Arc::ptr_eq(&pair[1], newer));
        match at {
            Some(i) => {
                self.runs.splice(i..i + 2, [merged]);
                true
            }
            None => false,
        }
    }

    /// Takes out the runs whose every key is swept, for their files to go.
    pub fn take_expired(&mut self) -> Vec<Arc<Run>> {
        let n = self.runs.partition_point(|run| run.hi <= self.swept);
        self.runs.drain(..n).collect()
    }

    pub fn sizes(&self) -> Sizes {
        let frozen = self.frozen.as_ref().map(|f| &*f.map);
        let maps = [Some(&self.pinned), Some(&self.recent), frozen];
        let maps = maps.iter().flatten();
        let mut levels = [0; MAX_LEVEL as usize + 1];
        for run in &self.runs {
            levels[(run.level as usize).min(MAX_LEVEL as usize)] += 1;
        }
        Sizes {
            runs: self.runs.len(),
            levels,
            merging: self.mergeable().is_some(),
            file_bytes: self.runs.iter().map(|r| r.file_bytes()).sum(),
            run_keys: self.runs.iter().map(|r| r.keys()).sum(),
            exact_keys: maps.clone().map(|m| m.len()).sum(),
            bytes: maps.map(|m| m.bytes()).sum::<usize>()
                + self.runs.iter().map(|r| r.bytes()).sum::<usize>(),
        }
    }
}

#[cfg(test)]
mod tests;
