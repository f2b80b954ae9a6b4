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
//! | one page | header: magic, version, the store's tag, the seq range `(lo, hi]`, key count, the anchor (the key with the largest seq), the filter's descriptor, CRC-32 |
//! | `pages` × 4096 | entries sorted by fingerprint, 170 a page: fingerprint (16), seq (8) |
//! | `pages` × 16 | each page's first fingerprint |
//! | filter × 2 | the filter's fingerprints |
//!
//! The CRC covers the header and everything after the entries: what open
//! reads. A file is written under a temporary name, synced and renamed, so
//! one that exists is whole.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use xorf::{BinaryFuse16, Descriptor, Filter};

use super::Fingerprint;
use super::map::masked;

/// The runs' directory inside the data dir.
pub const RUN_DIR: &str = "dedupe";
const MAGIC: &[u8; 8] = b"HBXDRUN1";
const VERSION: u32 = 1;
const PAGE: usize = 4096;
const ENTRY: usize = 24;
const PER_PAGE: usize = PAGE / ENTRY;
/// Where the CRC sits in the header; the fields before it are covered.
const CRC_AT: usize = 92;

/// One sealed run, open for lookups.
pub struct Run {
    /// The seqs it covers: `(lo, hi]`.
    pub lo: u64,
    pub hi: u64,
    keys: u64,
    /// The key with the largest seq: open checks it against the log.
    pub anchor: (u64, Fingerprint),
    path: PathBuf,
    file: File,
    fences: Box<[Fingerprint]>,
    /// `None` for a run without keys.
    filter: Option<BinaryFuse16>,
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
            let entry = &buf[mid * ENTRY..(mid + 1) * ENTRY];
            let found = u128::from_le_bytes(entry[..16].try_into().expect("16 bytes"));
            match found.cmp(&fp) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => {
                    return Ok(Some(u64::from_le_bytes(
                        entry[16..].try_into().expect("8 bytes"),
                    )));
                }
            }
        }
        Ok(None)
    }

    /// Writes the run over `(lo, hi]` holding `entries` (fingerprint, seq)
    /// into `dir` for store `tag`: whole, synced, then renamed into place.
    pub fn write(
        dir: &Path,
        tag: u32,
        (lo, hi): (u64, u64),
        mut entries: Vec<(Fingerprint, u64)>,
    ) -> io::Result<Run> {
        for entry in &mut entries {
            entry.0 = masked(entry.0);
        }
        entries.sort_unstable();
        // One entry a fingerprint: the newest seq (the index's answer).
        entries.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 = earlier.1.max(later.1);
            }
            same
        });
        let anchor = entries
            .iter()
            .max_by_key(|e| e.1)
            .map_or((0, 0), |&(fp, seq)| (seq, fp));
        let filter = if entries.is_empty() {
            None
        } else {
            let mut hashes: Vec<u64> = entries.iter().map(|e| e.0 as u64).collect();
            hashes.sort_unstable();
            hashes.dedup();
            Some(BinaryFuse16::try_from(&hashes).map_err(io::Error::other)?)
        };
        let fences: Box<[Fingerprint]> = entries.chunks(PER_PAGE).map(|c| c[0].0).collect();
        let keys = entries.len() as u64;
        let mut header = [0u8; PAGE];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&tag.to_le_bytes());
        header[16..24].copy_from_slice(&lo.to_le_bytes());
        header[24..32].copy_from_slice(&hi.to_le_bytes());
        header[32..40].copy_from_slice(&keys.to_le_bytes());
        header[40..48].copy_from_slice(&anchor.0.to_le_bytes());
        header[48..64].copy_from_slice(&anchor.1.to_le_bytes());
        let (descriptor, fingerprints): (Descriptor, &[u16]) = match &filter {
            Some(f) => (f.descriptor.clone(), &f.fingerprints),
            None => (empty_descriptor(), &[]),
        };
        header[64..72].copy_from_slice(&descriptor.seed.to_le_bytes());
        header[72..76].copy_from_slice(&descriptor.segment_length.to_le_bytes());
        header[76..80].copy_from_slice(&descriptor.segment_length_mask.to_le_bytes());
        header[80..84].copy_from_slice(&descriptor.segment_count_length.to_le_bytes());
        header[84..92].copy_from_slice(&(fingerprints.len() as u64).to_le_bytes());
        let mut tail = Vec::with_capacity(fences.len() * 16 + fingerprints.len() * 2);
        for fence in &fences {
            tail.extend_from_slice(&fence.to_le_bytes());
        }
        for f in fingerprints {
            tail.extend_from_slice(&f.to_le_bytes());
        }
        let crc = crc(&header, &tail);
        header[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());

        let path = dir.join(Run::file_name(lo, hi));
        let temp = path.with_extension("tmp");
        {
            let mut out = BufWriter::with_capacity(1 << 20, File::create(&temp)?);
            out.write_all(&header)?;
            for chunk in entries.chunks(PER_PAGE) {
                let mut page = [0u8; PAGE];
                for (slot, (fp, seq)) in page.chunks_exact_mut(ENTRY).zip(chunk) {
                    slot[..16].copy_from_slice(&fp.to_le_bytes());
                    slot[16..].copy_from_slice(&seq.to_le_bytes());
                }
                out.write_all(&page)?;
            }
            out.write_all(&tail)?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        }
        std::fs::rename(&temp, &path)?;
        File::open(dir)?.sync_all()?;
        Ok(Run {
            lo,
            hi,
            keys,
            anchor,
            file: File::open(&path)?,
            path,
            fences,
            filter,
        })
    }

    /// Opens the run file at `path`, written for store `tag`: its header and
    /// checksum checked, its fences and filter read.
    pub fn open(path: &Path, tag: u32) -> Result<Run, RunError> {
        let mut file = File::open(path)?;
        let mut header = [0u8; PAGE];
        file.read_exact(&mut header)
            .map_err(|_| RunError::Damaged("shorter than its header"))?;
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4"));
        let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8"));
        if &header[..8] != MAGIC {
            return Err(RunError::Foreign("no run header"));
        }
        if u32_at(8) != VERSION {
            return Err(RunError::Foreign("another version"));
        }
        if u32_at(12) != tag {
            return Err(RunError::Foreign("another store's tag"));
        }
        let (lo, hi, keys) = (u64_at(16), u64_at(24), u64_at(32));
        let anchor = (
            u64_at(40),
            u128::from_le_bytes(header[48..64].try_into().expect("16")),
        );
        let descriptor = Descriptor {
            seed: u64_at(64),
            segment_length: u32_at(72),
            segment_length_mask: u32_at(76),
            segment_count_length: u32_at(80),
        };
        let filter_len = u64_at(84);
        let pages = keys.div_ceil(PER_PAGE as u64);
        let tail_len = pages * 16 + filter_len * 2;
        let expected = PAGE as u64 * (1 + pages) + tail_len;
        if file.metadata()?.len() != expected || lo > hi || (keys == 0) != (filter_len == 0) {
            return Err(RunError::Damaged("its length does not match its header"));
        }
        let mut tail = vec![0u8; tail_len as usize];
        file.read_exact_at(&mut tail, PAGE as u64 * (1 + pages))?;
        if crc(&header, &tail) != u32_at(CRC_AT) {
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
        let filter = (keys > 0).then_some(BinaryFuse16 {
            descriptor,
            fingerprints,
        });
        Ok(Run {
            lo,
            hi,
            keys,
            anchor,
            path: path.to_owned(),
            file,
            fences,
            filter,
        })
    }
}

fn empty_descriptor() -> Descriptor {
    Descriptor {
        seed: 0,
        segment_length: 0,
        segment_length_mask: 0,
        segment_count_length: 0,
    }
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
}
