//! The exact part of the dedupe index: fingerprint → seq in hash tables,
//! 24–48 bytes a key ([`Map`]). It holds the keys no sealed run holds (see
//! [`super`]): the newest event keys, kept ones, idempotency keys.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use super::Fingerprint;

/// Shards of the index: a fingerprint's top bits pick one.
const SHARD_BITS: u32 = 10;
const SHARDS: usize = 1 << SHARD_BITS;

fn shard_of(fp: Fingerprint) -> usize {
    (fp >> (128 - SHARD_BITS)) as usize
}

/// The bits of `fp` that tell keys apart: the shard's and the [`Key`]'s.
pub fn masked(fp: Fingerprint) -> Fingerprint {
    const MASK: u128 = !(u128::MAX >> SHARD_BITS) | (u128::MAX >> 32);
    fp & MASK
}

/// A fingerprint within its shard: its low 96 bits (with the shard's 10,
/// 106 of its 128 bits tell keys apart). Three `u32`s, not a `u128`, whose
/// 16-byte alignment would pad every entry to 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key([u32; 3]);

impl Key {
    fn of(fp: Fingerprint) -> Key {
        Key([fp as u32, (fp >> 32) as u32, (fp >> 64) as u32])
    }
}

impl Hash for Key {
    /// Fingerprints are already uniform: their low 64 bits are the hash.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.0[0]) | u64::from(self.0[1]) << 32);
    }
}

/// Takes the one `u64` a [`Key`] writes as the hash.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _: &[u8]) {
        unreachable!("a Key hashes as one u64");
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A seq in two `u32`s, for the same reason.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Seq([u32; 2]);

impl Seq {
    fn of(seq: u64) -> Seq {
        Seq([seq as u32, (seq >> 32) as u32])
    }

    fn get(self) -> u64 {
        u64::from(self.0[0]) | u64::from(self.0[1]) << 32
    }
}

type Shard = HashMap<Key, Seq, BuildHasherDefault<KeyHasher>>;

/// Live dedupe keys: fingerprint → seq of the stored event.
///
/// Split in [`SHARDS`] tables by the fingerprint's top bits, hashed within
/// one by its low bits. A hash table grows by moving every entry to a table
/// twice the size, and the writer, who inserts, waits for it: one table of
/// 7.3M keys took 1.38 s to double (the 60 s run in docs/benchmarks.md), with every
/// ingest request queued behind it. A shard holds 1/1024 of the keys, so a
/// growth moves ≈ 7k of them (≈ 1 ms at that size), and shards grow at
/// different moments as their own counts cross the threshold.
///
/// An entry is 20 bytes and a control byte; hashbrown keeps a table between
/// 7/16 and 7/8 full, so a key costs 24–48 bytes ([`Map::bytes`]).
pub struct Map {
    shards: Box<[Shard]>,
}

impl Default for Map {
    fn default() -> Map {
        Map {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

impl Map {
    /// The index over `keys` (fingerprint, seq), as inserting them in that
    /// order would make it.
    #[cfg(test)]
    pub fn from_keys(keys: Vec<(Fingerprint, u64)>) -> Map {
        let mut loader = Loader::new(1, keys.len());
        for (fp, seq) in keys {
            loader.push(fp, seq);
        }
        Map::from_loaders(vec![loader])
    }

    /// The index over what `loaders` read, as inserting every key in seq
    /// order would make it: each loader read a range of seqs, the ranges in
    /// order. Inserted one by one, each key is a cache and TLB miss somewhere
    /// in hundreds of MiB of tables (≈ 0.5 µs per key at 5M keys). Sorted by
    /// shard first, one shard (≈ 120 KiB at 5M keys) fills at a time while
    /// it is in cache, sized once for its count. The shards are split in as
    /// many contiguous ranges as there are loaders, one thread builds each.
    pub fn from_loaders(loaders: Vec<Loader>) -> Map {
        let parts = loaders.first().map_or(1, |l| l.parts.len());
        // runs[part][loader]: the keys of one range of shards from one range of seqs.
        let mut runs: Vec<Vec<Vec<Row>>> = (0..parts).map(|_| Vec::new()).collect();
        for loader in loaders {
            for (part, rows) in loader.parts.into_iter().enumerate() {
                runs[part].push(rows);
            }
        }
        let built: Vec<Vec<Shard>> = std::thread::scope(|scope| {
            let threads: Vec<_> = runs
                .into_iter()
                .enumerate()
                .map(|(part, runs)| scope.spawn(move || build_part(part, parts, runs)))
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("a dedupe build thread panicked"))
                .collect()
        });
        Map {
            shards: built.into_iter().flatten().collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(HashMap::len).sum()
    }

    /// Every key as the index tells it apart ([`masked`]), with its seq.
    pub fn iter(&self) -> impl Iterator<Item = (Fingerprint, u64)> + '_ {
        self.shards.iter().enumerate().flat_map(|(shard, table)| {
            table.iter().map(move |(key, seq)| {
                let [a, b, c] = key.0.map(u128::from);
                let fp = (shard as u128) << (128 - SHARD_BITS) | c << 64 | b << 32 | a;
                (fp, seq.get())
            })
        })
    }

    /// The bytes its tables take: an entry and a control byte per slot, a
    /// power of two of slots at most 7/8 full.
    pub fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let slots = match shard.capacity() {
                    0 => 0,
                    c if c < 8 => (c + 1).next_power_of_two(),
                    c => (c * 8 / 7).next_power_of_two(),
                };
                slots * (std::mem::size_of::<(Key, Seq)>() + 1)
            })
            .sum()
    }

    pub fn get(&self, fp: Fingerprint) -> Option<u64> {
        self.shards[shard_of(fp)].get(&Key::of(fp)).map(|s| s.get())
    }

    pub fn insert(&mut self, fp: Fingerprint, seq: u64) {
        self.shards[shard_of(fp)].insert(Key::of(fp), Seq::of(seq));
    }

    /// Forgets `fp` if it still points at `seq` (a newer event may have
    /// taken the key after the old one expired).
    pub fn remove(&mut self, fp: Fingerprint, seq: u64) {
        let shard = &mut self.shards[shard_of(fp)];
        let key = Key::of(fp);
        if shard.get(&key) == Some(&Seq::of(seq)) {
            shard.remove(&key);
        }
    }
}

/// A key read from the durable log, with its shard for sorting.
#[derive(Clone, Copy)]
struct Row {
    shard: u16,
    key: Key,
    seq: Seq,
}

/// Collects the keys one thread reads from a range of the durable log (in
/// seq order), already split by the range of shards that will hold them.
pub struct Loader {
    parts: Vec<Vec<Row>>,
}

impl Loader {
    /// For `parts` build threads, expecting about `expected` keys.
    pub fn new(parts: usize, expected: usize) -> Loader {
        let parts = parts.clamp(1, SHARDS);
        Loader {
            parts: (0..parts)
                .map(|_| Vec::with_capacity(expected / parts + expected / 64))
                .collect(),
        }
    }

    pub fn push(&mut self, fp: Fingerprint, seq: u64) {
        let shard = shard_of(fp);
        let part = shard * self.parts.len() / SHARDS;
        self.parts[part].push(Row {
            shard: shard as u16,
            key: Key::of(fp),
            seq: Seq::of(seq),
        });
    }
}

/// The shards of `part` (of `parts` contiguous ranges) from `runs`, each
/// run's keys in seq order and the runs in order of their seqs.
fn build_part(part: usize, parts: usize, mut runs: Vec<Vec<Row>>) -> Vec<Shard> {
    for run in &mut runs {
        run.sort_unstable_by_key(|row| (row.shard, row.seq.get()));
    }
    let mut rests: Vec<&[Row]> = runs.iter().map(Vec::as_slice).collect();
    let shards = (part * SHARDS / parts)..((part + 1) * SHARDS / parts);
    shards
        .map(|shard| {
            let mine: Vec<&[Row]> = rests
                .iter_mut()
                .map(|rest| {
                    let n = rest.partition_point(|row| usize::from(row.shard) == shard);
                    let (mine, after) = rest.split_at(n);
                    *rest = after;
                    mine
                })
                .collect();
            let n = mine.iter().map(|m| m.len()).sum();
            let mut table = Shard::with_capacity_and_hasher(n, Default::default());
            // Later runs hold later seqs: a key seen twice keeps its later one.
            for rows in mine {
                table.extend(rows.iter().map(|row| (row.key, row.seq)));
            }
            table
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::fingerprint;
    use super::*;

    #[test]
    fn iter_gives_each_key_as_told_apart_with_its_seq() {
        let fps: Vec<Fingerprint> = (0..500)
            .map(|i| fingerprint("s", &format!("e{i}")))
            .collect();
        let index = Map::from_keys(
            fps.iter()
                .enumerate()
                .map(|(i, fp)| (*fp, i as u64))
                .collect(),
        );
        let mut listed: Vec<(Fingerprint, u64)> = index.iter().collect();
        listed.sort_by_key(|e| e.1);
        let want: Vec<(Fingerprint, u64)> = fps
            .iter()
            .enumerate()
            .map(|(i, fp)| (masked(*fp), i as u64))
            .collect();
        assert_eq!(listed, want);
        for (fp, seq) in listed {
            assert_eq!(
                index.get(fp),
                Some(seq),
                "a masked fingerprint finds its key"
            );
        }
    }

    #[test]
    fn remove_keeps_a_key_that_a_newer_event_took() {
        let mut index = Map::default();
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
        let index = Map::from_keys(keys.clone());
        let mut inserted = Map::default();
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
    fn loaders_over_seq_ranges_build_what_one_would() {
        // 5000 keys with every 10th key seen again later, read as three seq
        // ranges by loaders that split them for four build threads.
        let keys: Vec<(Fingerprint, u64)> = (0..6000u64)
            .map(|seq| {
                let i = if seq < 5000 { seq } else { (seq - 5000) * 5 };
                (fingerprint("s", &format!("e{i}")), seq)
            })
            .collect();
        let mut loaders = Vec::new();
        for range in [0..1700, 1700..4100, 4100..6000] {
            let mut loader = Loader::new(4, range.len());
            for &(fp, seq) in &keys[range] {
                loader.push(fp, seq);
            }
            loaders.push(loader);
        }
        let index = Map::from_loaders(loaders);
        assert_eq!(index.len(), 5000);
        for i in 0..5000u64 {
            let later = (i % 5 == 0).then(|| 5000 + i / 5);
            let want = later.unwrap_or(i);
            assert_eq!(
                index.get(fingerprint("s", &format!("e{i}"))),
                Some(want),
                "e{i}"
            );
        }
    }
}
