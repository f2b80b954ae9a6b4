//! What a batch did to the dedupe index's keys ([`Keys`]), told to the
//! index once the batch commits ([`Keys::teach`]) and taken back if the
//! database turns out not to hold it ([`Keys::undo`]).

use std::collections::{HashMap, HashSet};
use std::io;

use super::dedupe::{DedupeIndex, Fingerprint, Kind};

/// Dedupe keys (and idempotency keys' places) a batch added and removed.
pub(in crate::store) struct Keys {
    added: HashMap<Fingerprint, (u64, Kind)>,
    removed: HashSet<(Fingerprint, u64, Kind)>,
}

impl Keys {
    pub(in crate::store) fn with_capacity(jobs: usize) -> Keys {
        Keys {
            added: HashMap::with_capacity(jobs),
            removed: HashSet::new(),
        }
    }

    /// Where `fp` is live as of this point of the batch: what the batch
    /// put there first, then the index's, unless the batch removed it.
    pub(in crate::store) fn live(
        &self,
        index: &DedupeIndex,
        kind: Kind,
        fp: Fingerprint,
    ) -> io::Result<Option<u64>> {
        if let Some(&(seq, _)) = self.added.get(&fp) {
            return Ok(Some(seq));
        }
        Ok(index
            .get(fp)?
            .filter(|seq| !self.removed.contains(&(fp, *seq, kind))))
    }

    /// `fp` no longer at `old` (if it was anywhere) and now at `new`, if
    /// anywhere: what a key's change did to its place. A key the sweep
    /// keeps live moves from `seq` to `seq`: the index pins it.
    pub(in crate::store) fn moved(
        &mut self,
        kind: Kind,
        fp: Fingerprint,
        old: Option<u64>,
        new: Option<u64>,
    ) {
        if let Some(old) = old {
            // Put there by this batch: the index never learns it.
            if self.added.get(&fp) == Some(&(old, kind)) {
                self.added.remove(&fp);
            } else {
                self.removed.insert((fp, old, kind));
            }
        }
        if let Some(new) = new {
            self.added.insert(fp, (new, kind));
        }
    }

    /// Tells the index what the committed batch changed: removals first
    /// (a key the sweep kept is removed, then pinned).
    pub(in crate::store) fn teach(&self, index: &mut DedupeIndex) {
        for &(fp, seq, kind) in &self.removed {
            index.forget(kind, fp, seq);
        }
        for (&fp, &(seq, kind)) in &self.added {
            index.learn(kind, fp, seq);
        }
    }

    /// Takes back what [`teach`](Self::teach) did, for a batch the reopened
    /// database does not hold.
    pub(in crate::store) fn undo(&self, index: &mut DedupeIndex) {
        for (&fp, &(seq, kind)) in &self.added {
            index.unlearn(kind, fp, seq);
        }
        for &(fp, seq, kind) in &self.removed {
            index.learn(kind, fp, seq);
        }
    }
}
