//! A sealed run of the dedupe index: the event keys of one range of seqs,
//! written once to a file sorted by fingerprint, with a filter and the first
//! key of each page in memory (≈ 2.35 bytes a key).
//!
//! A lookup asks the filter ([`BinaryFuse16`]: no false negatives, a false
//! positive for ≈ 1 in 65,536 absent keys); only a hit reads a page of the
//! file (one `pread`, the page cache's after the first time) and decides
//! there, by the whole fingerprint. So a filter's false positive costs a
//! read, never a wrong answer.
//!
//! The file, little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | one page | header ([`Header`]): magic, version, the store's tag, the seq range `(lo, hi]`, key count, the anchor (the key with the largest seq), the filter's descriptor and length, the level, CRC-32 |
//! | `pages` × 4096 | entries sorted by fingerprint, 170 a page: fingerprint (16), seq (8) |
//! | `pages` × 16 | each page's first fingerprint |
//! | filter × 2 | the filter's fingerprints |
//!
//! The CRC covers the header and everything after the entries: what open
//! reads. A file is written under a temporary name, synced and renamed, so
//! one that exists is whole ([`super::write`]).
//!
//! A run's level counts the merges behind it: a sealed run is level 0, two
//! adjacent runs of level n merge into one of n + 1, up to [`MAX_LEVEL`].

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use xorf::{BinaryFuse16, Descriptor, Filter};

use super::Fingerprint;
use super::map::masked;

/// The runs' directory inside the data dir.
pub const RUN_DIR: &str = "dedupe";
const MAGIC: &[u8; 8] = b"HBXDRUN1";
const VERSION: u32 = 1;
pub(super) const PAGE: usize = 4096;
pub(super) const ENTRY: usize = 24;
pub(super) const PER_PAGE: usize = PAGE / ENTRY;
/// Where the CRC sits in the header; the fields before it are covered.
const CRC_AT: usize = 92;
/// Runs merge up to level 2: four sealed runs, ≈ 4M keys. Building the
/// filter of a merged run holds its keys' hashes and the builder's arrays
/// (≈ 120 MB at 4M keys, ≈ 240 MB at 8M); a lookup pays ≈ 40 ns a run.
pub const MAX_LEVEL: u32 = 2;

/// One sealed run, open for lookups.
pub struct Run {
    /// The seqs it covers: `(lo, hi]`.
    pub lo: u64,
    pub hi: u64,
    pub(super) keys: u64,
    /// The key with the largest seq: open checks it against the log.
    pub anchor: (u64, Fingerprint),
    pub level: u32,
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) fences: Box<[Fingerprint]>,
    /// `None` for a run without keys.
    pub(super) filter: Option<BinaryFuse16>,
}

/// A run file's first page, less its CRC.
pub(super) struct Header {
    pub tag: u32,
    pub lo: u64,
    pub hi: u64,
    pub keys: u64,
    pub anchor: (u64, Fingerprint),
    pub descriptor: Descriptor,
    pub filter_len: u32,
    pub level: u32,
}

impl Header {
    /// The page, its CRC over the header and `tail` (fences, filter).
    pub fn encode(&self, tail: &[u8]) -> [u8; PAGE] {
        let mut page = [0u8; PAGE];
        page[..8].copy_from_slice(MAGIC);
        page[8..12].copy_from_slice(&VERSION.to_le_bytes());
        page[12..16].copy_from_slice(&self.tag.to_le_bytes());
        page[16..24].copy_from_slice(&self.lo.to_le_bytes());
        page[24..32].copy_from_slice(&self.hi.to_le_bytes());
        page[32..40].copy_from_slice(&self.keys.to_le_bytes());
        page[40..48].copy_from_slice(&self.anchor.0.to_le_bytes());
        page[48..64].copy_from_slice(&self.anchor.1.to_le_bytes());
        let d = &self.descriptor;
        page[64..72].copy_from_slice(&d.seed.to_le_bytes());
        page[72..76].copy_from_slice(&d.segment_length.to_le_bytes());
        page[76..80].copy_from_slice(&d.segment_length_mask.to_le_bytes());
        page[80..84].copy_from_slice(&d.segment_count_length.to_le_bytes());
        page[84..88].copy_from_slice(&self.filter_len.to_le_bytes());
        page[88..92].copy_from_slice(&self.level.to_le_bytes());
        let crc = crc(&page, tail);
        page[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        page
    }

    fn decode(page: &[u8; PAGE], tag: u32) -> Result<Header, RunError> {
        let u32_at = |at: usize| u32::from_le_bytes(page[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(page[at..at + 8].try_into().expect("8"));
        if &page[..8] != MAGIC {
            return Err(RunError::Foreign("no run header"));
        }
        if u32_at(8) != VERSION {
            return Err(RunError::Foreign("another version"));
        }
        if u32_at(12) != tag {
            return Err(RunError::Foreign("another store's tag"));
        }
        Ok(Header {
            tag,
            lo: u64_at(16),
            hi: u64_at(24),
            keys: u64_at(32),
            anchor: (
                u64_at(40),
                u128::from_le_bytes(page[48..64].try_into().expect("16")),
            ),
            descriptor: Descriptor {
                seed: u64_at(64),
                segment_length: u32_at(72),
                segment_length_mask: u32_at(76),
                segment_count_length: u32_at(80),
            },
            filter_len: u32_at(84),
            level: u32_at(88),
        })
    }
}

/// Why a run file cannot be used (it is then rebuilt from the log).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("not a dedupe run of this store: {0}")]
    Foreign(&'static str),
    #[error("damaged: {0}")]
    Damaged(&'static str),
}

impl Run {
    /// The file name of the run over `(lo, hi]`.
    pub fn file_name(lo: u64, hi: u64) -> String {
        format!("run-{lo:016x}-{hi:016x}")
    }

    pub fn keys(&self) -> u64 {
        self.keys
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The size of its file.
    pub fn file_bytes(&self) -> u64 {
        let pages = self.keys.div_ceil(PER_PAGE as u64);
        let filter = self
            .filter
            .as_ref()
            .map_or(0, |f| f.fingerprints.len() as u64);
        PAGE as u64 * (1 + pages) + pages * 16 + filter * 2
    }

    /// The memory it holds: the page fences and the filter.
    pub fn bytes(&self) -> usize {
        self.fences.len() * size_of::<Fingerprint>()
            + self.filter.as_ref().map_or(0, |f| f.fingerprints.len() * 2)
    }

    /// The seq `fp` has in this run, if it has it.
    pub fn get(&self, fp: Fingerprint) -> io::Result<Option<u64>> {
        let fp = masked(fp);
        if !self
            .filter
            .as_ref()
            .is_some_and(|f| f.contains(&(fp as u64)))
        {
            return Ok(None);
        }
        let page = match self.fences.partition_point(|&first| first <= fp) {
            0 => return Ok(None),
            n => n - 1,
        };
        let entries = (self.keys as usize - page * PER_PAGE).min(PER_PAGE);
        let mut buf = [0u8; PAGE];
        let buf = &mut buf[..entries * ENTRY];
        self.file.read_exact_at(buf, ((page + 1) * PAGE) as u64)?;
        let (mut low, mut high) = (0, entries);
        while low < high {
            let mid = (low + high) / 2;
            let (found, seq) = decode_entry(&buf[mid * ENTRY..(mid + 1) * ENTRY]);
            match found.cmp(&fp) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Ok(Some(seq)),
            }
        }
        Ok(None)
    }

    /// Opens the run file at `path`, written for store `tag`: its header and
    /// checksum checked, its fences and filter read.
    pub fn open(path: &Path, tag: u32) -> Result<Run, RunError> {
        let mut file = File::open(path)?;
        let mut page = [0u8; PAGE];
        file.read_exact(&mut page)
            .map_err(|_| RunError::Damaged("shorter than its header"))?;
        let header = Header::decode(&page, tag)?;
        let pages = header.keys.div_ceil(PER_PAGE as u64);
        let filter_len = u64::from(header.filter_len);
        let tail_len = pages * 16 + filter_len * 2;
        let expected = PAGE as u64 * (1 + pages) + tail_len;
        if file.metadata()?.len() != expected
            || header.lo > header.hi
            || (header.keys == 0) != (filter_len == 0)
        {
            return Err(RunError::Damaged("its length does not match its header"));
        }
        let mut tail = vec![0u8; tail_len as usize];
        file.read_exact_at(&mut tail, PAGE as u64 * (1 + pages))?;
        if header.encode(&tail) != page {
            return Err(RunError::Damaged("checksum mismatch"));
        }
        let (fences, filter) = tail.split_at(pages as usize * 16);
        let fences = fences
            .chunks_exact(16)
            .map(|c| u128::from_le_bytes(c.try_into().expect("16")))
            .collect();
        let fingerprints: Box<[u16]> = filter
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        let filter = (header.keys > 0).then_some(BinaryFuse16 {
            descriptor: header.descriptor,
            fingerprints,
        });
        Ok(Run {
            lo: header.lo,
            hi: header.hi,
            keys: header.keys,
            anchor: header.anchor,
            level: header.level,
            path: path.to_owned(),
            file,
            fences,
            filter,
        })
    }

    /// Its entries in fingerprint order, read a page at a time.
    pub fn entries(&self) -> impl Iterator<Item = io::Result<(Fingerprint, u64)>> + '_ {
        let pages = self.keys.div_ceil(PER_PAGE as u64) as usize;
        (0..pages).flat_map(move |page| {
            let entries = (self.keys as usize - page * PER_PAGE).min(PER_PAGE);
            let mut buf = vec![0u8; entries * ENTRY];
            let read = self
                .file
                .read_exact_at(&mut buf, ((page + 1) * PAGE) as u64);
            let rows: Vec<io::Result<(Fingerprint, u64)>> = match read {
                Err(e) => vec![Err(e)],
                Ok(()) => buf
                    .chunks_exact(ENTRY)
                    .map(|e| Ok(decode_entry(e)))
                    .collect(),
            };
            rows
        })
    }
}

/// An entry's bytes: fingerprint, seq.
pub(super) fn decode_entry(entry: &[u8]) -> (Fingerprint, u64) {
    (
        u128::from_le_bytes(entry[..16].try_into().expect("16 bytes")),
        u64::from_le_bytes(entry[16..24].try_into().expect("8 bytes")),
    )
}

fn crc(header: &[u8; PAGE], tail: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[..CRC_AT]);
    hasher.update(tail);
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::super::fingerprint;
    use super::*;

    fn keys(n: u64) -> Vec<(Fingerprint, u64)> {
        (1..=n)
            .map(|seq| (fingerprint("s", &format!("e{seq}")), seq * 3))
            .collect()
    }

    #[test]
    fn a_written_run_answers_every_key_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let entries = keys(1000);
        let run = Run::write(dir.path(), 7, (0, 3000), entries.clone()).unwrap();
        let opened = Run::open(run.path(), 7).unwrap();
        for run in [&run, &opened] {
            assert_eq!((run.lo, run.hi, run.keys()), (0, 3000, 1000));
            assert_eq!(run.anchor, (3000, masked(entries[999].0)));
            for &(fp, seq) in &entries {
                assert_eq!(run.get(fp).unwrap(), Some(seq));
            }
            for i in 0..10_000 {
                assert_eq!(run.get(fingerprint("s", &format!("x{i}"))).unwrap(), None);
            }
        }
    }

    #[test]
    fn an_empty_run_answers_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let run = Run::write(dir.path(), 7, (5, 9), Vec::new()).unwrap();
        let opened = Run::open(run.path(), 7).unwrap();
        assert_eq!(opened.keys(), 0);
        assert_eq!(opened.get(fingerprint("s", "e")).unwrap(), None);
    }

    #[test]
    fn open_refuses_another_store_a_torn_file_and_a_flipped_byte() {
        let dir = tempfile::tempdir().unwrap();
        let run = Run::write(dir.path(), 7, (0, 3000), keys(1000)).unwrap();
        let path = run.path().to_owned();
        assert!(matches!(Run::open(&path, 8), Err(RunError::Foreign(_))));
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(matches!(Run::open(&path, 7), Err(RunError::Damaged(_))));
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert!(matches!(Run::open(&path, 7), Err(RunError::Damaged(_))));
        std::fs::write(&path, &bytes).unwrap();
        assert!(Run::open(&path, 7).is_ok());
    }

    #[test]
    fn a_merge_keeps_every_live_key_in_order_and_drops_the_swept() {
        let dir = tempfile::tempdir().unwrap();
        let all = keys(900);
        let older =
            std::sync::Arc::new(Run::write(dir.path(), 7, (0, 1500), all[..500].to_vec()).unwrap());
        let newer = std::sync::Arc::new(
            Run::write(dir.path(), 7, (1500, 2700), all[500..].to_vec()).unwrap(),
        );
        // Keys at or below seq 300 (the first 100) are swept.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let merged = Run::merge(dir.path(), 7, &older, &newer, 300, &stop).unwrap();
        assert_eq!(
            (merged.lo, merged.hi, merged.level, merged.keys()),
            (0, 2700, 1, 800)
        );
        let listed: Vec<(Fingerprint, u64)> = merged.entries().map(Result::unwrap).collect();
        assert!(listed.windows(2).all(|w| w[0].0 < w[1].0), "sorted");
        assert!(listed.iter().all(|e| e.1 > 300));
        let reopened = Run::open(merged.path(), 7).unwrap();
        assert_eq!(reopened.level, 1);
        for &(fp, seq) in &all {
            let want = (seq > 300).then_some(seq);
            assert_eq!(reopened.get(fp).unwrap(), want);
        }
        assert_eq!(reopened.anchor, (2700, masked(all[899].0)));
    }
}
