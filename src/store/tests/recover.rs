//! Crashes and the write-ahead log: what the log holds past a checkpoint
//! replays exactly, older log formats replay and newer ones are refused, a
//! frame the disk refuses is a 503 whose batch stays deduped.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::super::*;
use super::support::*;

/// Everything a reader sees of the store, as text, to compare two stores.
pub(super) fn dump(store: &Store) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for e in store.scan(0, usize::MAX).unwrap() {
        writeln!(out, "{e:?} {:?}", store.attempts(e.seq).unwrap()).unwrap();
    }
    let mut paused: Vec<_> = store.paused_states().unwrap().into_iter().collect();
    paused.sort();
    writeln!(out, "{:?}", store.stats().unwrap()).unwrap();
    writeln!(out, "{:?}", store.activity(0).unwrap()).unwrap();
    writeln!(out, "{paused:?} {:?}", store.dead_letters("s").unwrap()).unwrap();
    out
}

/// What kill -9 leaves of a running store: the database file as of its
/// last checkpoint (the rest is in redb's memory) and, with `log`, the
/// write-ahead log, fsynced before every answer.
pub(super) fn crash_image(live: &Path, image: &Path, log: bool) {
    std::fs::create_dir_all(image).unwrap();
    std::fs::copy(live.join(DB_FILE), image.join(DB_FILE)).unwrap();
    if log {
        for name in wal::WAL_FILES {
            std::fs::copy(live.join(name), image.join(name)).unwrap();
        }
    }
}

/// Every kind of job the writer logs, on a store that never checkpoints:
/// ingests of each initial state, a duplicate, a delivery, a dead letter, a
/// retry, an attempt left in flight, a replay, an ignore, an erasure, a
/// pause and a sweep. Returns the seqs of events `e0`..`e29`.
pub(super) async fn every_kind_of_job(store: &Store) -> Vec<u64> {
    let mut seqs = Vec::new();
    for i in 0..30 {
        let initial = match i % 3 {
            0 => Initial::Deliver,
            1 => Initial::Ordered(format!("k{}", i % 2)),
            _ => Initial::Hold,
        };
        seqs.push(new_seq(store, "s", &format!("e{i}"), initial).await);
    }
    let again = store.ingest(event("s", "e7"), Initial::Deliver).await;
    assert!(matches!(again, Ok(Ingested::Duplicate { .. })), "{again:?}");
    deliver(store, seqs[0], 10).await;
    kill(store, seqs[3], 20).await;
    store.claim(seqs[9], 25).await.unwrap().unwrap();
    store
        .finish(Finish {
            seq: seqs[9],
            attempt: attempt(schema::AttemptClass::RejectedStatus, Some(503)),
            next: Next::RetryAt { due_ms: 99 },
        })
        .await
        .unwrap();
    // In flight at the crash: recorded as interrupted at the next open.
    store.claim(seqs[6], 30).await.unwrap().unwrap();
    store
        .change(seqs[3], Change::Replay, 40)
        .await
        .unwrap()
        .unwrap();
    let ignore = Change::Ignore {
        note: "test".into(),
    };
    store.change(seqs[12], ignore, 50).await.unwrap().unwrap();
    let erase = Change::Erase {
        note: "gdpr".into(),
    };
    store.change(seqs[15], erase, 60).await.unwrap().unwrap();
    store.set_paused("s", true).await.unwrap();
    // Two hours on: the dedupe TTL (1 h) has passed; a step of 5 takes the
    // oldest keys (e0 first) and events, and leaves e20's key.
    let later = crate::clock::unix_ms(SystemTime::now()) + 7_200_000;
    let swept = store.sweep(later, 5).await.unwrap();
    assert!(swept.dedupe_keys > 0 && swept.more, "{swept:?}");
    seqs
}

/// Every kind of job between two checkpoints, then a crash: the database
/// file alone has none of it, the file and the log replay to exactly the
/// store a clean shutdown leaves, and both go on with the same ids.
#[tokio::test]
async fn what_the_log_holds_past_the_checkpoint_is_replayed_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let never = StoreOptions {
        checkpoint_every: Duration::from_secs(3600),
        ..options(&live)
    };
    let (store, writer) = Store::open(never).unwrap();
    let seqs = every_kind_of_job(&store).await;
    let image = dir.path().join("image");
    let bare = dir.path().join("bare");
    crash_image(&live, &image, true);
    crash_image(&live, &bare, false);
    close(store, writer).await;

    let (store, writer) = Store::open(options(&bare)).unwrap();
    assert_eq!(store.count().unwrap(), 0, "the file alone holds none of it");
    close(store, writer).await;

    let (clean, clean_writer) = Store::open(options(&live)).unwrap();
    let (crashed, crashed_writer) = Store::open(options(&image)).unwrap();
    assert_eq!(dump(&crashed), dump(&clean));
    assert!(crashed.count().unwrap() >= 25, "the sweep took few events");
    let mut new_ids = Vec::new();
    for store in [&clean, &crashed] {
        // A key the sweep took is new again; one it left is still a duplicate.
        match store.ingest(event("s", "e0"), Initial::Hold).await.unwrap() {
            Ingested::New { id } => new_ids.push(id),
            other => panic!("{other:?}"),
        }
        let kept = store
            .ingest(event("s", "e20"), Initial::Hold)
            .await
            .unwrap();
        assert_eq!(
            kept,
            Ingested::Duplicate {
                id: store.public_id(seqs[20])
            }
        );
    }
    assert_eq!(new_ids[0], new_ids[1], "ids go on from the same place");
    close(clean, clean_writer).await;
    close(crashed, crashed_writer).await;
}

/// The frames of a log file, consecutive from offset 0 up to the first that
/// does not check: each frame's header and payload.
pub(super) fn frames_of(log: &[u8]) -> Vec<([u8; 20], &[u8])> {
    let mut frames = Vec::new();
    let mut at = 0;
    while let Some(header) = log.get(at..at + 20) {
        let len = u32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(header[4..8].try_into().unwrap());
        match log.get(at + 8..at + 20 + len) {
            Some(checked) if len > 0 && crc32fast::hash(checked) == crc => {}
            _ => break,
        }
        frames.push((header.try_into().unwrap(), &log[at + 20..at + 20 + len]));
        at += 20 + len;
    }
    frames
}

/// Rewrites each frame of the log at `path` with `payload` applied to its
/// payload, length and CRC made to match: what another build would have
/// written. Returns how many frames it rewrote.
pub(super) fn rewrite_frames(path: &Path, payload: impl Fn(u64, &[u8]) -> Vec<u8>) -> usize {
    let old = std::fs::read(path).unwrap();
    let frames = frames_of(&old);
    let mut new = Vec::new();
    for (header, body) in &frames {
        let lsn = u64::from_le_bytes(header[8..16].try_into().unwrap());
        let body = payload(lsn, body);
        let mut frame = header.to_vec();
        frame[0..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        frame.extend_from_slice(&body);
        let crc = crc32fast::hash(&frame[8..]);
        frame[4..8].copy_from_slice(&crc.to_le_bytes());
        new.extend_from_slice(&frame);
    }
    std::fs::write(path, new).unwrap();
    frames.len()
}

/// The fixture `tests/fixtures/log0/` (a log the build before versioned
/// records left at a SIGKILL) holds every kind of entry, each outcome of an
/// attempt and each kind of change, and every one decodes as format 0. The
/// integration test `log0` checks what replaying it makes.
#[test]
fn the_log0_fixture_decodes_and_holds_every_kind_of_entry() {
    use std::collections::BTreeSet;
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log0/crashed/hookinbox.wal");
    let log = std::fs::read(path).unwrap();
    let mut kinds = BTreeSet::new();
    for (header, payload) in frames_of(&log) {
        assert!(payload[0] < 7, "format 0: no format byte");
        let lsn = u64::from_le_bytes(header[8..16].try_into().unwrap());
        for entry in format::log::entries(lsn, payload).unwrap() {
            kinds.insert(match entry {
                entry::Entry::Ingest { .. } => "ingest",
                entry::Entry::Duplicate { .. } => "duplicate",
                entry::Entry::Claim { .. } => "claim",
                entry::Entry::Finish(f) => match f.next {
                    Next::Delivered { .. } => "finish delivered",
                    Next::RetryAt { .. } => "finish retry",
                    Next::Dead { .. } => "finish dead",
                },
                entry::Entry::Change { change, .. } => match *change {
                    Change::Replay => "change replay",
                    Change::Ignore { .. } => "change ignore",
                    Change::Erase { .. } => "change erase",
                    Change::ReplayTo { .. } => "change replay to",
                },
                entry::Entry::Sweep { .. } => "sweep",
                entry::Entry::SetMeta { .. } => "set meta",
                entry::Entry::Key { .. } => "key (format 2 only)",
                entry::Entry::KeyWrite(_) => "key write (format 3 only)",
                entry::Entry::Interrupted => "interrupted (format 4 only)",
                entry::Entry::Audit { .. } => "audit (format 5 only)",
            });
        }
    }
    let want = [
        "change erase",
        "change ignore",
        "change replay",
        "change replay to",
        "claim",
        "duplicate",
        "finish dead",
        "finish delivered",
        "finish retry",
        "ingest",
        "set meta",
        "sweep",
    ];
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), want);
}

/// The log of a crash of the build before versioned records held the same
/// entries without the format byte (format 0): such a log replays to the
/// same store. A log of a newer format is refused at open, with an error
/// that says so, and left as it is.
#[tokio::test]
async fn a_log_of_format_0_replays_and_a_newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let never = StoreOptions {
        checkpoint_every: Duration::from_secs(3600),
        ..options(&live)
    };
    let (store, writer) = Store::open(never).unwrap();
    every_kind_of_job(&store).await;
    let old = dir.path().join("old");
    let newer = dir.path().join("newer");
    crash_image(&live, &old, true);
    crash_image(&live, &newer, true);
    close(store, writer).await;

    let frames = rewrite_frames(&old.join(wal::WAL_FILE), |lsn, payload| {
        assert_eq!(payload[0], format::log::FORMAT_BYTE);
        let entries = format::log::entries(lsn, payload).unwrap();
        format::log::older_payload(0, &entries).expect("no key entries")
    });
    assert!(frames > 10, "{frames} frames");
    let (clean, clean_writer) = Store::open(options(&live)).unwrap();
    let (replayed, replayed_writer) = Store::open(options(&old)).unwrap();
    assert_eq!(dump(&replayed), dump(&clean));
    close(clean, clean_writer).await;
    close(replayed, replayed_writer).await;

    let log = newer.join(wal::WAL_FILE);
    rewrite_frames(&log, |lsn, payload| {
        let mut p = payload.to_vec();
        if lsn == 3 {
            p[0] = format::log::FORMAT_BYTE + 1;
        }
        p
    });
    let before = std::fs::read(&log).unwrap();
    let refused = Store::open(options(&newer)).err().expect("refused");
    let text = refused.report().to_string();
    assert!(
        text.contains(&format!(
            "frame 3 of the write-ahead log is in format {}",
            format::log::LOG_FORMAT + 1
        )) && text.contains("upgrade hookinbox"),
        "{text}"
    );
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "the log is left as it is"
    );
}

/// A frame the log cannot take (the log is `/dev/full`: ENOSPC on every
/// write) fails its batch with a transient error and marks the store
/// unwritable. The next batch settles the log thread and reopens; closing
/// the database persisted the failed batch after all, so the dedupe index
/// keeps its key under the id it was given and the provider's retry is a
/// duplicate of it, never a second record and never a duplicate of nothing.
#[tokio::test]
async fn a_frame_the_disk_refuses_is_503_and_what_was_stored_anyway_stays_deduped() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/full", dir.path().join(wal::WAL_FILE)).unwrap();
    let never = StoreOptions {
        checkpoint_every: Duration::from_secs(3600),
        ..options(dir.path())
    };
    let (store, writer) = Store::open(never).unwrap();
    for id in ["e1", "e2"] {
        let refused = store.ingest(event("s", id), Initial::Hold).await;
        assert!(
            matches!(&refused, Err(e) if e.is_transient()),
            "{id}: {refused:?}"
        );
        assert!(store.ready().await.is_err(), "ready after a failed frame");
    }
    // e2's batch came after the reopen that found e1's batch in the file.
    let e1 = store.find("s", "e1").unwrap().expect("e1 stored after all");
    let e2 = store
        .find("s", "e2")
        .unwrap()
        .expect("e2 in redb, in flight");
    assert_ne!(e1.seq, e2.seq);
    close(store, writer).await;

    std::fs::remove_file(dir.path().join(wal::WAL_FILE)).unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    for stored in [&e1, &e2] {
        let retry = store
            .ingest(event("s", &stored.record.event_id), Initial::Hold)
            .await
            .unwrap();
        assert_eq!(
            retry,
            Ingested::Duplicate {
                id: stored.id.clone()
            }
        );
    }
    assert_eq!(store.count().unwrap(), 2);
    close(store, writer).await;
}
