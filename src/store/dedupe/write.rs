//! Writing run files: a frozen map's keys sorted ([`Run::write`]), or two
//! adjacent runs merged into one ([`Run::merge`]), streamed page by page.
//! Both go to a temporary name, are synced, and then renamed into place.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use xorf::{BinaryFuse16, Descriptor};

use super::Fingerprint;
use super::map::masked;
use super::run::{ENTRY, Header, PAGE, PER_PAGE, Run};

impl Run {
    /// Writes the run over `(lo, hi]` holding `entries` (fingerprint, seq)
    /// into `dir` for store `tag`.
    pub fn write(
        dir: &Path,
        tag: u32,
        range: (u64, u64),
        mut entries: Vec<(Fingerprint, u64)>,
    ) -> io::Result<Run> {
        for entry in &mut entries {
            entry.0 = masked(entry.0);
        }
        entries.sort_unstable();
        write_sorted(dir, tag, range, 0, entries.into_iter().map(Ok))
    }

    /// Merges `older` and the run right after it, `newer`, into one run of
    /// the next level, leaving out the keys at or below `swept` (gone).
    /// Gives up (an error) once `stop` is set.
    pub fn merge(
        dir: &Path,
        tag: u32,
        older: &Arc<Run>,
        newer: &Arc<Run>,
        swept: u64,
        stop: &AtomicBool,
    ) -> io::Result<Run> {
        let mut a = older.entries().peekable();
        let mut b = newer.entries().peekable();
        let merged = std::iter::from_fn(move || {
            let take_a = match (a.peek(), b.peek()) {
                (None, None) => return None,
                (Some(Err(_)), _) | (Some(_), None) => true,
                (None, Some(_)) | (_, Some(Err(_))) => false,
                (Some(Ok(x)), Some(Ok(y))) => x.0 <= y.0,
            };
            if take_a { a.next() } else { b.next() }
        })
        .filter(|entry| entry.as_ref().map_or(true, |&(_, seq)| seq > swept))
        .map(|entry| match stop.load(Ordering::Relaxed) {
            true => Err(io::Error::new(io::ErrorKind::Interrupted, "stopped")),
            false => entry,
        });
        let level = older.level.max(newer.level) + 1;
        write_sorted(dir, tag, (older.lo, newer.hi), level, merged)
    }
}

/// Writes `entries`, in fingerprint order (one kept per fingerprint: the
/// newest seq, the index's answer), as the run over `range` at `level`.
fn write_sorted(
    dir: &Path,
    tag: u32,
    (lo, hi): (u64, u64),
    level: u32,
    entries: impl Iterator<Item = io::Result<(Fingerprint, u64)>>,
) -> io::Result<Run> {
    let path = dir.join(Run::file_name(lo, hi));
    let temp = path.with_extension("tmp");
    let file = File::create(&temp)?;
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    // Page 0 is the header, written last.
    out.write_all(&[0u8; PAGE])?;
    let mut fences = Vec::new();
    let mut hashes = Vec::new();
    let mut anchor = (0, 0);
    let mut page = [0u8; PAGE];
    let mut in_page = 0;
    let mut last: Option<(Fingerprint, u64)> = None;
    let mut flush = |last: (Fingerprint, u64), out: &mut BufWriter<&File>| -> io::Result<()> {
        if in_page == 0 {
            fences.push(last.0);
        }
        page[in_page * ENTRY..][..16].copy_from_slice(&last.0.to_le_bytes());
        page[in_page * ENTRY + 16..][..8].copy_from_slice(&last.1.to_le_bytes());
        in_page += 1;
        if in_page == PER_PAGE {
            out.write_all(&page)?;
            page = [0u8; PAGE];
            in_page = 0;
        }
        hashes.push(last.0 as u64);
        if last.1 >= anchor.0 {
            anchor = (last.1, last.0);
        }
        Ok(())
    };
    for entry in entries {
        let entry = entry?;
        match last {
            Some(prev) if prev.0 == entry.0 => last = Some((prev.0, prev.1.max(entry.1))),
            Some(prev) => {
                flush(prev, &mut out)?;
                last = Some(entry);
            }
            None => last = Some(entry),
        }
    }
    if let Some(prev) = last {
        flush(prev, &mut out)?;
    }
    if in_page > 0 {
        out.write_all(&page)?;
    }
    let keys = hashes.len() as u64;
    let filter = if hashes.is_empty() {
        None
    } else {
        hashes.sort_unstable();
        hashes.dedup();
        Some(BinaryFuse16::try_from(&hashes).map_err(io::Error::other)?)
    };
    drop(hashes);
    let (descriptor, fingerprints): (Descriptor, &[u16]) = match &filter {
        Some(f) => (f.descriptor.clone(), &f.fingerprints),
        None => (empty_descriptor(), &[]),
    };
    let mut tail = Vec::with_capacity(fences.len() * 16 + fingerprints.len() * 2);
    for fence in &fences {
        tail.extend_from_slice(&fence.to_le_bytes());
    }
    for f in fingerprints {
        tail.extend_from_slice(&f.to_le_bytes());
    }
    out.write_all(&tail)?;
    out.flush()?;
    drop(out);
    let header = Header {
        tag,
        lo,
        hi,
        keys,
        anchor,
        descriptor,
        filter_len: fingerprints.len() as u32,
        level,
    };
    file.write_all_at(&header.encode(&tail), 0)?;
    file.sync_all()?;
    std::fs::rename(&temp, &path)?;
    File::open(dir)?.sync_all()?;
    Ok(Run {
        lo,
        hi,
        keys,
        anchor,
        level,
        file: File::open(&path)?,
        path,
        fences: fences.into_boxed_slice(),
        filter,
    })
}

fn empty_descriptor() -> Descriptor {
    Descriptor {
        seed: 0,
        segment_length: 0,
        segment_length_mask: 0,
        segment_count_length: 0,
    }
}
