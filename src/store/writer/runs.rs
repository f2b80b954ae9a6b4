//! The writer's side of the dedupe index's runs: what a committed batch
//! teaches the index, and what the sealer finished or should do next.

use super::super::dedupe::seal::Finished;
use super::{Keys, Writer};

impl Writer {
    /// Tells the dedupe index what a committed batch changed; after a
    /// checkpoint (`durable`: every key it holds is), freezes its recent
    /// keys for the sealer once there are enough. Runs the batch's sweep
    /// expired go to the sealer to be deleted.
    pub(super) fn learn(&mut self, keys: &Keys, durable: bool) {
        let mut index = self
            .shared
            .dedupe
            .write()
            .unwrap_or_else(|p| p.into_inner());
        keys.teach(&mut index);
        let expired = index.take_expired();
        let frozen = durable
            .then(|| index.freeze(self.events.next_seq - 1, self.options.dedupe_seal_keys))
            .flatten();
        let swept = index.swept();
        drop(index);
        self.sealer.delete(expired);
        if let Some(frozen) = frozen {
            self.sealer.seal(frozen, swept);
        }
    }

    /// Puts what the sealer finished into the dedupe index and hands it the
    /// next merge. With every batch: an idle writer is woken by a ping.
    pub(super) fn tend_runs(&mut self) {
        let finished: Vec<Finished> = std::iter::from_fn(|| self.sealer.finished()).collect();
        if finished.is_empty() && !self.runs_changed {
            return;
        }
        self.runs_changed = false;
        let mut index = self
            .shared
            .dedupe
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let mut gone = Vec::new();
        for result in finished {
            match result {
                Finished::Sealed(run) => {
                    index.install(run);
                    self.merge_paused = false;
                }
                Finished::Merged {
                    older,
                    newer,
                    merged,
                } => {
                    self.merging = false;
                    // The sweep may have expired the two meanwhile.
                    if index.replace(&older, &newer, merged.clone()) {
                        gone.extend([older, newer]);
                    } else {
                        gone.push(merged);
                    }
                }
                Finished::NotMerged => {
                    self.merging = false;
                    self.merge_paused = true;
                }
            }
        }
        let next = match self.merging || self.merge_paused {
            true => None,
            false => index.mergeable(),
        };
        let swept = index.swept();
        drop(index);
        self.sealer.delete(gone);
        if let Some((older, newer)) = next {
            self.merging = true;
            self.sealer.merge(older, newer, swept);
        }
    }
}
