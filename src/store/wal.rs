//! The write-ahead log in front of the redb file.
//!
//! A durable redb commit is two fsyncs of a file that grows with what is
//! stored, plus (with quick repair) the allocator state, whose size grows
//! with the file: at 5M events ≈ 26 KB written per 1 KB event, and the one
//! serial stage of ingest. So the writer commits most batches to redb
//! without durability (visible to readers at once, kept in redb's memory)
//! and makes them durable here instead: the batch's entries as one frame,
//! appended and `fdatasync`ed before any job of the batch is answered. Every
//! [`StoreOptions::checkpoint_every`](super::options::StoreOptions) (or when the log
//! is full) the database is committed durably: a checkpoint, after which
//! the log starts again at offset 0 and overwrites itself, so the file stays
//! the size of one checkpoint's frames and its blocks stay allocated.
//!
//! The log is two files, segments ([`WAL_FILE`] and [`WAL_FILE_2`]), so a
//! checkpoint can run beside the writer: when one starts, the frames after
//! it go to the start of the other segment ([`Wal::switch`]), while the
//! database flushes the pages of everything before; the segment left
//! behind is free once that checkpoint is durable, which the writer waits
//! for before it switches back. Recovery reads both and chains their frames
//! by number.
//!
//! Every transaction the writer commits writes its frame number (`lsn`) to
//! `meta` ([`META_LSN`]), so the database itself says which frames it holds.
//! Recovery reads the frames after that number, each checked (CRC-32 over
//! number, tag and payload; the database's tag, so a log never replays into
//! another database), consecutive, up to the first that is not: a torn
//! tail, or an older cycle's frame left behind the new one.
//!
//! Frame: `len` u32 | `crc` u32 | `lsn` u64 | `tag` u32 | payload (`len`
//! bytes: a format byte, then the batch's entries; see
//! [`super::format::log`]). Little-endian.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::entry::Entry;
use super::format::log::{self as payload, FrameError};

/// The log's file name inside the data dir: its first segment.
pub const WAL_FILE: &str = "hookinbox.wal";
/// The log's second segment.
pub const WAL_FILE_2: &str = "hookinbox.wal.1";
/// Both segments, in the order they are numbered.
pub const WAL_FILES: [&str; 2] = [WAL_FILE, WAL_FILE_2];
/// The `meta` row holding the number of the last frame the database holds.
pub const META_LSN: &str = "wal_lsn";
/// The log never grows past this: a batch whose frame would not fit is a
/// checkpoint instead. It bounds the work of one checkpoint (writing and
/// syncing the pages dirtied since the last), which stalls the writer:
/// benches/http.rs at 128 connections with 5.7–6.9M events stored gave
/// checkpoints of 8 ms (p50) at 2 MiB, 12 ms at 4 MiB, 36 ms at 8 MiB and
/// 41 ms at 16 MiB, with their longest stalls 86, 41, 58 and 122 ms; the
/// p99 answer time, which counts how many requests a stall catches, was
/// 18.6, 29.3, 34.0 and 6.5 ms. 4 MiB keeps both the stall and p99 low; at
/// ≈ 1 KB logged per event that is a checkpoint every ≈ 4,000 events.
pub const WAL_BYTES: u64 = 4 << 20;

const HEADER: usize = 4 + 4 + 8 + 4;

/// Why the log cannot be replayed into the database.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("cannot read the write-ahead log {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// The log continues a later state than the database holds: the
    /// database file was replaced (a restored backup?) after the log was
    /// written. Replaying it would apply changes out of order.
    #[error(
        "the write-ahead log {path} starts at frame {found} but the database holds frames up to {holds}"
    )]
    Gap {
        path: PathBuf,
        holds: u64,
        found: u64,
    },
    #[error(transparent)]
    Frame(#[from] FrameError),
}

pub(super) struct Wal {
    /// The two segments. Shared with the frames in flight to the log
    /// thread: a log set aside is a new file, and a frame goes to the file
    /// it was built for.
    files: [Arc<File>; 2],
    dir: PathBuf,
    /// The segment the next frame goes to.
    active: usize,
    tag: u32,
    /// Where the next frame goes.
    pos: u64,
    /// The frame being built: header space, then the batch's entries.
    frame: Vec<u8>,
}

/// Frames read back for recovery.
pub(super) struct Frames {
    /// Each frame's number and payload, in order.
    pub frames: Vec<(u64, Vec<u8>)>,
}

impl Wal {
    /// Opens (or creates) the log's segments in `dir`, for the database
    /// tagged `tag`. Frames go to the first segment until a switch.
    pub fn open(dir: &Path, tag: u32) -> io::Result<Wal> {
        let mut created = false;
        let mut open = |name: &str| -> io::Result<Arc<File>> {
            let path = dir.join(name);
            created |= !path.exists();
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)?;
            Ok(Arc::new(file))
        };
        let files = [open(WAL_FILE)?, open(WAL_FILE_2)?];
        if created {
            // The files' names must survive a crash as well as their frames.
            File::open(dir)?.sync_all()?;
        }
        let mut wal = Wal {
            files,
            dir: dir.to_path_buf(),
            active: 0,
            tag,
            pos: 0,
            frame: Vec::with_capacity(256 << 10),
        };
        wal.begin();
        Ok(wal)
    }

    /// Starts a new frame.
    pub fn begin(&mut self) {
        self.frame.clear();
        self.frame.resize(HEADER, 0);
        payload::begin(&mut self.frame);
    }

    /// Adds one entry to the frame being built.
    pub fn push(&mut self, entry: &Entry<'_>) {
        payload::push(&mut self.frame, entry);
    }

    /// Whether the frame being built has entries.
    pub fn has_entries(&self) -> bool {
        self.frame.len() > HEADER + payload::PREFIX
    }

    /// Whether the frame being built fits in what is left of the log.
    pub fn fits(&self) -> bool {
        self.pos + self.frame.len() as u64 <= WAL_BYTES
    }

    /// Seals the frame being built as number `lsn` at the log's next place;
    /// the log thread writes it ([`Frame::write`]). The next frame starts
    /// with [`Wal::begin`]. The place is taken whether or not the write
    /// succeeds; a failed write is followed by a reopen, whose recovery
    /// starts the log over.
    pub fn take_frame(&mut self, lsn: u64) -> Frame {
        let capacity = self.frame.capacity();
        let bytes = std::mem::replace(&mut self.frame, Vec::with_capacity(capacity));
        let frame = Frame {
            file: self.files[self.active].clone(),
            at: self.pos,
            lsn,
            tag: self.tag,
            bytes,
        };
        self.pos += frame.bytes.len() as u64;
        frame
    }

    /// Writes the frame being built as number `lsn` and waits until it is
    /// on disk (recovery's tests; the writer hands frames to the log thread).
    #[cfg(test)]
    pub fn append(&mut self, lsn: u64) -> io::Result<()> {
        let mut frame = self.take_frame(lsn);
        frame.write()?;
        frame.file.sync_data()
    }

    /// After a checkpoint: the database holds every frame, start over.
    pub fn rewind(&mut self) {
        self.pos = 0;
    }

    /// A checkpoint starts beside the writer: the next frames go to the
    /// start of the other segment. Only once the checkpoint before this
    /// one is durable, which freed that segment.
    pub fn switch(&mut self) {
        self.active = 1 - self.active;
        self.pos = 0;
    }

    /// Whether the frame being built fits in an empty segment.
    pub fn fits_empty(&self) -> bool {
        self.frame.len() as u64 <= WAL_BYTES
    }

    /// Whether the frame being built, `bytes` longer, would still fit in
    /// what is left of the active segment.
    pub fn has_room(&self, bytes: usize) -> bool {
        self.pos + (self.frame.len() + bytes) as u64 <= WAL_BYTES
    }

    /// The frames after number `holds` (what the database already has):
    /// each segment's run of consecutive frames from its start, chained by
    /// number from `holds + 1`.
    pub fn read_after(&self, holds: u64) -> Result<Frames, WalError> {
        let mut found: Vec<(u64, Vec<u8>)> = Vec::new();
        for (file, name) in self.files.iter().zip(WAL_FILES) {
            found.extend(self.run(file, name, holds)?);
        }
        found.sort_by_key(|(lsn, _)| *lsn);
        let mut frames: Vec<(u64, Vec<u8>)> = Vec::with_capacity(found.len());
        for (lsn, payload) in found {
            let want = frames.last().map_or(holds + 1, |(last, _)| last + 1);
            if lsn == want {
                frames.push((lsn, payload));
            } else if frames.is_empty() {
                return Err(WalError::Gap {
                    path: self.dir.join(WAL_FILE),
                    holds,
                    found: lsn,
                });
            } else {
                // A segment's frames that do not continue the chain.
                break;
            }
        }
        Ok(Frames { frames })
    }

    /// One segment's frames after `holds`: consecutive from the first
    /// readable one, up to the first that does not continue them (a torn
    /// tail, or an older cycle's frame behind the newest).
    fn run(&self, file: &File, name: &str, holds: u64) -> Result<Vec<(u64, Vec<u8>)>, WalError> {
        let io = |source| WalError::Io {
            path: self.dir.join(name),
            source,
        };
        let len = file.metadata().map_err(io)?.len();
        let mut bytes = vec![0u8; len.min(WAL_BYTES + (64 << 20)) as usize];
        file.read_exact_at(&mut bytes, 0).map_err(io)?;
        let mut frames = Vec::new();
        let mut at = 0usize;
        let mut last: Option<u64> = None;
        while let Some((lsn, payload, end)) = frame_at(&bytes, at, self.tag) {
            if last.is_some_and(|l| lsn != l + 1) {
                break;
            }
            last = Some(lsn);
            if lsn > holds {
                frames.push((lsn, payload.to_vec()));
            }
            at = end;
        }
        Ok(frames)
    }

    /// Moves the log's segments aside (kept for a person to look at) and
    /// starts empty ones in their place.
    pub fn set_aside(&mut self, holds: u64) -> io::Result<PathBuf> {
        let aside = self.dir.join(format!("{WAL_FILE}.unreplayed-{holds}"));
        std::fs::rename(self.dir.join(WAL_FILE), &aside)?;
        let second = self.dir.join(format!("{WAL_FILE_2}.unreplayed-{holds}"));
        match std::fs::rename(self.dir.join(WAL_FILE_2), second) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        *self = Wal::open(&self.dir.clone(), self.tag)?;
        Ok(aside)
    }
}

/// A sealed frame on its way to the log.
pub(super) struct Frame {
    file: Arc<File>,
    at: u64,
    pub lsn: u64,
    tag: u32,
    /// Header space, then the entries.
    bytes: Vec<u8>,
}

impl Frame {
    /// Fills in the header (length, CRC, number, tag) and writes the frame
    /// at its place; not yet synced ([`Frame::file`]).
    pub fn write(&mut self) -> io::Result<()> {
        let len = (self.bytes.len() - HEADER) as u32;
        self.bytes[8..16].copy_from_slice(&self.lsn.to_le_bytes());
        self.bytes[16..20].copy_from_slice(&self.tag.to_le_bytes());
        let crc = crc32fast::hash(&self.bytes[8..]);
        self.bytes[0..4].copy_from_slice(&len.to_le_bytes());
        self.bytes[4..8].copy_from_slice(&crc.to_le_bytes());
        self.file.write_all_at(&self.bytes, self.at)
    }

    /// The file to `fdatasync` once every frame of a group is written.
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// What recovery reads back: the format byte and the entries.
    pub fn payload(&self) -> &[u8] {
        &self.bytes[HEADER..]
    }
}

/// The frame at `at`, if one is there whole and checks: its number, its
/// payload and where it ends.
fn frame_at(bytes: &[u8], at: usize, tag: u32) -> Option<(u64, &[u8], usize)> {
    let header = bytes.get(at..at + HEADER)?;
    let len = u32::from_le_bytes(header[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[4..8].try_into().ok()?);
    let lsn = u64::from_le_bytes(header[8..16].try_into().ok()?);
    let frame_tag = u32::from_le_bytes(header[16..20].try_into().ok()?);
    let end = at.checked_add(HEADER)?.checked_add(len)?;
    let checked = bytes.get(at + 8..end)?;
    if frame_tag != tag || crc32fast::hash(checked) != crc {
        return None;
    }
    Some((lsn, &bytes[at + HEADER..end], end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wal(dir: &Path) -> Wal {
        Wal::open(dir, 7).unwrap()
    }

    fn frame(wal: &mut Wal, lsn: u64, seq: u64) {
        wal.begin();
        wal.push(&Entry::Claim {
            seq,
            started_ms: lsn,
        });
        wal.append(lsn).unwrap();
    }

    fn lsns(f: &Frames) -> Vec<u64> {
        f.frames.iter().map(|(l, _)| *l).collect()
    }

    #[test]
    fn frames_after_what_the_database_holds_come_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = wal(dir.path());
        for lsn in 1..=5 {
            frame(&mut w, lsn, lsn * 10);
        }
        let w = wal(dir.path());
        assert_eq!(lsns(&w.read_after(0).unwrap()), vec![1, 2, 3, 4, 5]);
        assert_eq!(lsns(&w.read_after(3).unwrap()), vec![4, 5]);
        assert!(w.read_after(5).unwrap().frames.is_empty());
        let f = w.read_after(4).unwrap();
        match payload::entries(5, &f.frames[0].1).unwrap().as_slice() {
            [Entry::Claim { seq: 50, .. }] => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_rewound_log_ends_where_the_older_cycle_begins() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = wal(dir.path());
        for lsn in 1..=6 {
            frame(&mut w, lsn, lsn);
        }
        // Checkpoint at 7: the database holds 1..=7, the log starts over.
        w.rewind();
        frame(&mut w, 8, 8);
        frame(&mut w, 9, 9);
        // Behind 9 lie frames 3..=6 of the older cycle.
        assert_eq!(lsns(&w.read_after(7).unwrap()), vec![8, 9]);
        assert_eq!(lsns(&w.read_after(8).unwrap()), vec![9]);
    }

    #[test]
    fn a_torn_or_flipped_frame_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = wal(dir.path());
        for lsn in 1..=3 {
            frame(&mut w, lsn, lsn);
        }
        let len = std::fs::metadata(dir.path().join(WAL_FILE)).unwrap().len();
        // Torn: the last frame's tail never reached the disk.
        w.files[0].set_len(len - 3).unwrap();
        assert_eq!(lsns(&w.read_after(0).unwrap()), vec![1, 2]);
        // Flipped: one bit of frame 2's payload.
        let second = (len / 3 + HEADER as u64) + 1;
        let mut b = [0u8];
        w.files[0].read_exact_at(&mut b, second).unwrap();
        w.files[0].write_all_at(&[b[0] ^ 1], second).unwrap();
        assert_eq!(lsns(&w.read_after(0).unwrap()), vec![1]);
    }

    #[test]
    fn another_databases_log_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = wal(dir.path());
        frame(&mut w, 1, 1);
        let other = Wal::open(dir.path(), 8).unwrap();
        assert!(other.read_after(0).unwrap().frames.is_empty());
    }

    #[test]
    fn a_log_ahead_of_the_database_is_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = wal(dir.path());
        frame(&mut w, 5, 5);
        match w.read_after(2) {
            Err(WalError::Gap {
                holds: 2, found: 5, ..
            }) => {}
            other => panic!("{:?}", other.map(|f| lsns(&f))),
        }
        let aside = w.set_aside(2).unwrap();
        assert!(aside.exists());
        assert!(w.read_after(2).unwrap().frames.is_empty());
    }

    #[test]
    fn frames_chain_across_the_two_segments() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = wal(dir.path());
        for lsn in 1..=4 {
            frame(&mut w, lsn, lsn);
        }
        // A checkpoint of 1..=4 starts beside the writer: 5.. go to the
        // second segment; it has not finished, so the database holds 0.
        w.switch();
        for lsn in 5..=7 {
            frame(&mut w, lsn, lsn);
        }
        let w2 = wal(dir.path());
        assert_eq!(
            lsns(&w2.read_after(0).unwrap()),
            (1..=7).collect::<Vec<_>>()
        );
        assert_eq!(lsns(&w2.read_after(4).unwrap()), vec![5, 6, 7]);
        // It finished (the database holds 1..=4); the next checkpoint, of
        // 1..=9, starts and frames go back to the first segment, over 1..=4.
        frame(&mut w, 8, 8);
        frame(&mut w, 9, 9);
        w.switch();
        frame(&mut w, 10, 10);
        let w2 = wal(dir.path());
        assert_eq!(
            lsns(&w2.read_after(4).unwrap()),
            (5..=10).collect::<Vec<_>>()
        );
        assert_eq!(lsns(&w2.read_after(9).unwrap()), vec![10]);
        // Frame 10 torn (a bit of its payload flipped): the chain ends at 9,
        // whatever lies behind it.
        let at = HEADER as u64 + 1;
        let mut b = [0u8];
        w.files[0].read_exact_at(&mut b, at).unwrap();
        w.files[0].write_all_at(&[b[0] ^ 1], at).unwrap();
        assert_eq!(
            lsns(&wal(dir.path()).read_after(4).unwrap()),
            (5..=9).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_segment_that_does_not_continue_the_chain_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = wal(dir.path());
        for lsn in 1..=3 {
            frame(&mut w, lsn, lsn);
        }
        // Frame 4 never reached the disk; 5, in the other segment, did.
        w.begin();
        w.push(&Entry::Claim {
            seq: 4,
            started_ms: 4,
        });
        let _lost = w.take_frame(4);
        w.switch();
        frame(&mut w, 5, 5);
        assert_eq!(lsns(&wal(dir.path()).read_after(0).unwrap()), vec![1, 2, 3]);
        assert!(matches!(
            wal(dir.path()).read_after(3),
            Err(WalError::Gap {
                holds: 3,
                found: 5,
                ..
            })
        ));
    }
}
