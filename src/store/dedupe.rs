//! The dedupe index: which `(source, event id)` pairs are stored, in memory.
//!
//! A B-tree keyed by the provider's event id takes random inserts: on a large
//! table every new event dirties its own 4 KiB leaf, and at a million stored
//! events those pages, not the payloads, are most of what each commit writes.
//! So the durable form is an append-only log instead (`dedupe`: seq →
//! fingerprint and time, see [`super::schema`]), and lookups go to this map,
//! rebuilt from the log when the store opens (32 bytes per entry read,
//! ≈ 30 bytes of memory per live key).
//!
//! A fingerprint is the first 128 bits of SHA-256 over `source \0 event_id`.
//! Two different pairs share one with probability ≈ n²/2¹²⁹ (≈ 10⁻²⁵ for ten
//! million live keys), so equal fingerprints are treated as the same event.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use sha2::{Digest, Sha256};

pub type Fingerprint = u128;

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

/// Fingerprints are already uniform: hash them by taking their low bits.
#[derive(Default)]
pub struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}

/// Live dedupe keys: fingerprint → seq of the stored event.
#[derive(Default)]
pub struct DedupeIndex {
    seqs: HashMap<Fingerprint, u64, BuildHasherDefault<FingerprintHasher>>,
}

impl DedupeIndex {
    pub fn with_capacity(n: usize) -> DedupeIndex {
        DedupeIndex {
            seqs: HashMap::with_capacity_and_hasher(n, Default::default()),
        }
    }

    /// The index over `keys` (fingerprint, seq), as inserting them in that
    /// order would make it. Inserted one by one, each key is a cache and TLB
    /// miss somewhere in a table of hundreds of MiB (≈ 0.5 µs per key at 5M
    /// keys). Sorted first by the bucket each will land in, the table fills
    /// front to back, and a key seen twice keeps its later seq. Opening a
    /// store of 5M events went from 2.3–3.2 s to 1.1–1.2 s (the README).
    /// (A counting sort into table regions was tried: fewer CPU cycles for
    /// the sort, more for the page faults of its second buffer.) The bucket
    /// is predicted from hashbrown's sizing rule; were the prediction wrong,
    /// loading would only be slower.
    pub fn from_keys(mut keys: Vec<(Fingerprint, u64)>) -> DedupeIndex {
        let mut index = DedupeIndex::with_capacity(keys.len());
        let mask = (keys.len().max(8) * 8 / 7).next_power_of_two() as u64 - 1;
        keys.sort_unstable_by_key(|&(fp, seq)| ((fp as u64) & mask, seq));
        for (fp, seq) in keys {
            index.insert(fp, seq);
        }
        index
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.seqs.len()
    }

    pub fn get(&self, fp: Fingerprint) -> Option<u64> {
        self.seqs.get(&fp).copied()
    }

    pub fn insert(&mut self, fp: Fingerprint, seq: u64) {
        self.seqs.insert(fp, seq);
    }

    /// Forgets `fp` if it still points at `seq` (a newer event may have
    /// taken the key after the old one expired).
    pub fn remove(&mut self, fp: Fingerprint, seq: u64) {
        if self.seqs.get(&fp) == Some(&seq) {
            self.seqs.remove(&fp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_separate_source_and_id() {
        assert_ne!(fingerprint("a", "bc"), fingerprint("ab", "c"));
        assert_eq!(fingerprint("s", "evt_1"), fingerprint("s", "evt_1"));
    }

    #[test]
    fn remove_keeps_a_key_that_a_newer_event_took() {
        let mut index = DedupeIndex::default();
        let fp = fingerprint("s", "e");
        index.insert(fp, 1);
        index.insert(fp, 7);
        index.remove(fp, 1);
        assert_eq!(index.get(fp), Some(7));
        index.remove(fp, 7);
        assert_eq!(index.get(fp), None);
    }

    #[test]
    fn from_keys_is_inserting_in_seq_order() {
        let fps: Vec<Fingerprint> = (0..1000)
            .map(|i| fingerprint("s", &format!("e{i}")))
            .collect();
        // Every key once, and key 7 again at a later seq: the later one wins.
        let mut keys: Vec<(Fingerprint, u64)> = fps
            .iter()
            .enumerate()
            .map(|(i, fp)| (*fp, i as u64))
            .collect();
        keys.push((fps[7], 5000));
        let index = DedupeIndex::from_keys(keys.clone());
        let mut inserted = DedupeIndex::default();
        for (fp, seq) in keys {
            inserted.insert(fp, seq);
        }
        assert_eq!(index.len(), 1000);
        for fp in &fps {
            assert_eq!(index.get(*fp), inserted.get(*fp));
        }
        assert_eq!(index.get(fps[7]), Some(5000));
        assert_eq!(index.get(fingerprint("s", "absent")), None);
    }

    #[test]
    fn fingerprints_are_stable_across_builds() {
        // Stored on disk: a change here would forget every live dedupe key.
        assert_eq!(
            fingerprint("stripe", "evt_1"),
            0xa614_a71e_4044_80d5_e8d3_f202_d017_88f3
        );
    }
}
