//! Shipping frames to a follower: every batch's frame, checkpoints' too,
//! in order and without gaps; a follower that replays them holds what the
//! primary holds; a frame not taken is a 503 and goes first next time; a
//! replaced store answers nothing more.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::ReadableDatabase;

use super::super::format::log as payload;
use super::super::recover::{open_database, replay};
use super::super::tables::Tables;
use super::super::writer::ttls;
use super::super::*;
use super::recover::{dump, every_kind_of_job};
use super::support::*;

/// Keeps what it takes; refuses with `refuse` while it is set.
#[derive(Default)]
struct Recorder {
    frames: Mutex<Vec<(u64, Vec<u8>)>>,
    refuse: Mutex<Option<ShipError>>,
    /// Refuses `attach` with this while it is set.
    unattached: Mutex<Option<ShipError>>,
}

impl Shipper for Recorder {
    fn attach(&self, _tag: u32) -> Result<u64, ShipError> {
        if let Some(e) = self.unattached.lock().unwrap().clone() {
            return Err(e);
        }
        Ok(self.frames.lock().unwrap().last().map_or(0, |(l, _)| *l))
    }

    fn ship(&self, frames: &[ShippedFrame<'_>]) -> Result<(), ShipError> {
        if let Some(e) = self.refuse.lock().unwrap().clone() {
            return Err(e);
        }
        let mut kept = self.frames.lock().unwrap();
        for frame in frames {
            if let Some((last, _)) = kept.last() {
                assert_eq!(frame.lsn, last + 1, "frames continue without a gap");
            }
            kept.push((frame.lsn, frame.payload.to_vec()));
        }
        Ok(())
    }
}

impl Recorder {
    fn lsns(&self) -> Vec<u64> {
        self.frames
            .lock()
            .unwrap()
            .iter()
            .map(|(l, _)| *l)
            .collect()
    }
}

fn shipping(
    dir: &std::path::Path,
    recorder: &Arc<Recorder>,
    checkpoint_every: Duration,
) -> StoreOptions {
    StoreOptions {
        checkpoint_every,
        shipper: Some(recorder.clone()),
        ..options(dir)
    }
}

/// Whether logged through the local log (checkpoints an hour apart) or
/// every batch a checkpoint (which the local log never sees), each batch's
/// frame is shipped, numbered 1, 2, 3, …; a new store that replays them
/// holds what the primary holds.
#[tokio::test]
async fn every_batch_is_shipped_and_a_follower_replaying_the_frames_holds_the_same() {
    for checkpoint_every in [Duration::from_secs(3600), Duration::ZERO] {
        let dir = tempfile::tempdir().unwrap();
        let (primary, follower) = (dir.path().join("primary"), dir.path().join("follower"));
        let recorder = Arc::new(Recorder::default());
        let (store, writer) = Store::open(shipping(&primary, &recorder, checkpoint_every)).unwrap();
        every_kind_of_job(&store).await;
        close(store, writer).await;
        let lsns = recorder.lsns();
        assert!(lsns.len() > 40, "{checkpoint_every:?}: {lsns:?}");
        assert_eq!(lsns, (1..=lsns.len() as u64).collect::<Vec<_>>());

        let (store, writer) = Store::open(options(&follower)).unwrap();
        close(store, writer).await;
        // The primary's tag, in its public ids: what a follower's snapshot
        // of the primary brings.
        let tag = {
            let db = open_database(&primary.join(DB_FILE), 1 << 20).unwrap();
            let txn = db.begin_read().unwrap();
            let meta = txn.open_table(schema::META).unwrap();
            meta.get(schema::META_TAG)
                .unwrap()
                .unwrap()
                .value()
                .to_vec()
        };
        {
            let db = open_database(&follower.join(DB_FILE), 1 << 20).unwrap();
            let txn = db.begin_write().unwrap();
            {
                let mut t = Tables::open(&txn).unwrap();
                t.meta.insert(schema::META_TAG, tag.as_slice()).unwrap();
                for (lsn, bytes) in recorder.frames.lock().unwrap().iter() {
                    for entry in payload::entries(*lsn, bytes).unwrap() {
                        replay(&mut t, entry, &ttls(&options(&follower))).unwrap();
                    }
                }
                t.index.flush().unwrap();
            }
            txn.commit().unwrap();
            drop(db.begin_read().unwrap());
        }
        let (a, a_writer) = Store::open(options(&primary)).unwrap();
        let (b, b_writer) = Store::open(options(&follower)).unwrap();
        assert_eq!(dump(&b), dump(&a), "{checkpoint_every:?}");
        close(a, a_writer).await;
        close(b, b_writer).await;
    }
}

/// A frame the shipper does not take: its batch is answered 503 but stays
/// stored, and the frame is shipped before the next batch's, so the
/// provider's retry is a duplicate answered once the original is shipped.
#[tokio::test]
async fn a_frame_not_shipped_is_a_503_and_goes_first_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let (store, writer) =
        Store::open(shipping(dir.path(), &recorder, Duration::from_secs(3600))).unwrap();
    new_seq(&store, "s", "e0", Initial::Hold).await;
    *recorder.refuse.lock().unwrap() = Some(ShipError::Unavailable {
        lsn: 0,
        detail: "no quorum".into(),
    });
    let refused = store.ingest(event("s", "e1"), Initial::Hold).await;
    assert!(
        matches!(&refused, Err(StoreError::Write(e)) if matches!(**e, WriteError::Unshipped(_))),
        "{refused:?}"
    );
    let shipped = recorder.lsns().len();
    *recorder.refuse.lock().unwrap() = None;
    let again = store.ingest(event("s", "e1"), Initial::Hold).await.unwrap();
    assert!(matches!(again, Ingested::Duplicate { .. }), "{again:?}");
    let lsns = recorder.lsns();
    assert_eq!(
        lsns.len(),
        shipped + 2,
        "the held frame, then the duplicate's"
    );
    close(store, writer).await;
}

/// Once the shipper says another writer took over, nothing is answered
/// 2xx again, whatever it says later.
#[tokio::test]
async fn a_replaced_store_answers_nothing_more() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let (store, writer) =
        Store::open(shipping(dir.path(), &recorder, Duration::from_secs(3600))).unwrap();
    new_seq(&store, "s", "e0", Initial::Hold).await;
    *recorder.refuse.lock().unwrap() = Some(ShipError::Replaced {
        lsn: 0,
        detail: "wrong last sequence".into(),
    });
    assert!(store.ingest(event("s", "e1"), Initial::Hold).await.is_err());
    *recorder.refuse.lock().unwrap() = None;
    for id in ["e1", "e2"] {
        let answer = store.ingest(event("s", id), Initial::Hold).await;
        assert!(
            matches!(&answer, Err(StoreError::Write(e)) if matches!(**e, WriteError::Unshipped(ShipError::Replaced { .. }))),
            "{id}: {answer:?}"
        );
    }
    close(store, writer).await;
}

/// A crash after frames were stored here but before they were shipped: the
/// reopened store ships them, from the log it replays, before anything
/// else; a stream that holds frames this store does not is refused.
#[tokio::test]
async fn at_open_the_frames_the_stream_lacks_are_shipped_first() {
    // Checkpoints an hour apart, or every batch one: either way the log
    // keeps each frame until it is shipped.
    for every in [Duration::from_secs(3600), Duration::ZERO] {
        at_open_the_frames_the_stream_lacks_are_shipped_first_with(every).await;
    }
}

async fn at_open_the_frames_the_stream_lacks_are_shipped_first_with(every: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let recorder = Arc::new(Recorder::default());
    let (store, writer) = Store::open(shipping(&live, &recorder, every)).unwrap();
    new_seq(&store, "s", "e0", Initial::Hold).await;
    *recorder.refuse.lock().unwrap() = Some(ShipError::Unavailable {
        lsn: 0,
        detail: "no quorum".into(),
    });
    for id in ["e1", "e2"] {
        assert!(store.ingest(event("s", id), Initial::Hold).await.is_err());
    }
    let shipped = recorder.lsns();
    // kill -9 now: the file as of its last checkpoint, and the log.
    let image = dir.path().join("image");
    std::fs::create_dir_all(&image).unwrap();
    for file in [DB_FILE, "hookinbox.wal"] {
        std::fs::copy(live.join(file), image.join(file)).unwrap();
    }
    close(store, writer).await;
    recorder.frames.lock().unwrap().truncate(shipped.len());
    // The stream still away at the reopen: refused, the log kept for the
    // next try.
    assert!(Store::open(shipping(&image, &recorder, every)).is_err());
    *recorder.refuse.lock().unwrap() = None;

    let (store, writer) = Store::open(shipping(&image, &recorder, every)).unwrap();
    let lsns = recorder.lsns();
    assert_eq!(lsns, (1..=lsns.len() as u64).collect::<Vec<_>>());
    assert_eq!(lsns.len(), shipped.len() + 2, "e1's and e2's frames");
    let again = store.ingest(event("s", "e2"), Initial::Hold).await.unwrap();
    assert!(matches!(again, Ingested::Duplicate { .. }), "{again:?}");
    close(store, writer).await;

    // A stream ahead of this data dir: refused.
    let ahead = Arc::new(Recorder::default());
    ahead
        .frames
        .lock()
        .unwrap()
        .extend((1..=50).map(|n| (n, vec![0x43])));
    match Store::open(shipping(&live, &ahead, every)) {
        Err(e) => {
            let text = Report(&e).to_string();
            assert!(text.contains("another node went on"), "{text}");
        }
        Ok(_) => panic!("a stream ahead of the data dir was accepted"),
    }
}

/// A standby applies the primary's shipped frames in pieces: it then reads
/// exactly as the primary did, its dedupe index included; it refuses every
/// job of its own until promoted, and then numbers on from the primary's
/// last event, a resend of an applied event being a duplicate.
#[tokio::test]
async fn a_standby_applies_the_frames_reads_the_same_and_goes_on_once_promoted() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let (primary, writer) = Store::open(shipping(
        &dir.path().join("primary"),
        &recorder,
        Duration::from_millis(5),
    ))
    .unwrap();
    let seqs = every_kind_of_job(&primary).await;
    let want = dump(&primary);
    let tag = u32::from_str_radix(&primary.public_id(0)[4..12], 16).unwrap();
    close(primary, writer).await;

    let options = StoreOptions {
        standby: true,
        tag: Some(tag),
        ..options(&dir.path().join("standby"))
    };
    let (standby, writer) = Store::open(options).unwrap();
    let refused = standby.ingest(event("s", "new"), Initial::Hold).await;
    assert!(
        matches!(&refused, Err(StoreError::Write(e)) if matches!(**e, WriteError::Role { standby: true })),
        "{refused:?}"
    );
    let frames = recorder.frames.lock().unwrap().clone();
    let mut last = 0;
    for (i, piece) in frames.chunks(7).enumerate() {
        last = standby
            .apply_frames(piece.to_vec(), i as u64 + 1)
            .await
            .unwrap();
    }
    assert_eq!(last, frames.len() as u64);
    assert_eq!(
        standby.last_frame().unwrap(),
        (last, frames.chunks(7).len() as u64)
    );
    // A gap is refused and changes nothing.
    let gap = standby.apply_frames(vec![(last + 2, vec![0x43])], 99).await;
    assert!(
        matches!(&gap, Err(StoreError::Write(e)) if matches!(**e, WriteError::Gap { .. })),
        "{gap:?}"
    );
    assert_eq!(dump(&standby), want);
    assert_eq!(
        standby.find("s", "e20").unwrap().map(|e| e.seq),
        Some(seqs[20]),
        "the index follows what was applied"
    );

    standby.promote().await.unwrap();
    let again = standby
        .ingest(event("s", "e20"), Initial::Hold)
        .await
        .unwrap();
    assert_eq!(
        again,
        Ingested::Duplicate {
            id: standby.public_id(seqs[20])
        }
    );
    match standby
        .ingest(event("s", "new"), Initial::Hold)
        .await
        .unwrap()
    {
        Ingested::New { id } => assert_eq!(id, standby.public_id(seqs[29] + 1)),
        other => panic!("{other:?}"),
    }
    assert!(
        standby.apply_frames(vec![], 0).await.is_err(),
        "a primary applies nothing"
    );
    close(standby, writer).await;
}

/// Regression (issue 45): a stream whose end could not be read when a
/// standby was promoted was "a stream that does not continue this data
/// dir", a refusal for good. It is transient now (the promotion is tried
/// again), and the promotion goes through once the stream answers.
#[tokio::test]
async fn a_promotion_that_cannot_read_the_stream_is_refused_for_now_not_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    *recorder.unattached.lock().unwrap() = Some(ShipError::Unreadable {
        detail: "timed out".to_owned(),
    });
    let options = StoreOptions {
        standby: true,
        ..shipping(dir.path(), &recorder, Duration::from_secs(3600))
    };
    let (standby, writer) = Store::open(options).unwrap();
    let refused = standby.promote().await.unwrap_err();
    assert!(
        refused.is_transient() && !refused.is_replaced(),
        "{refused:?}"
    );
    assert!(
        matches!(&refused, StoreError::Write(e) if matches!(**e, WriteError::Unshipped(ShipError::Unreadable { .. }))),
        "{refused:?}"
    );
    *recorder.unattached.lock().unwrap() = None;
    standby.promote().await.unwrap();
    close(standby, writer).await;
}

/// A shipping primary stopped with an attempt in flight: when it opens
/// again it records the attempt as interrupted through the log, so the
/// frame reaches its standby, which then reads the same attempts.
#[tokio::test]
async fn attempts_a_stop_interrupted_are_recorded_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let recorder = Arc::new(Recorder::default());
    let (store, writer) =
        Store::open(shipping(&live, &recorder, Duration::from_secs(3600))).unwrap();
    let seq = new_seq(&store, "s", "e0", Initial::Deliver).await;
    store.claim(seq, 10).await.unwrap().unwrap();
    close(store, writer).await;

    let (store, writer) =
        Store::open(shipping(&live, &recorder, Duration::from_secs(3600))).unwrap();
    // Queued behind the writer's first job: answered after it.
    new_seq(&store, "s", "e1", Initial::Hold).await;
    let attempts = store.attempts(seq).unwrap();
    assert_eq!(
        attempts.iter().map(|a| a.class).collect::<Vec<_>>(),
        [schema::AttemptClass::Interrupted]
    );
    let frames = recorder.frames.lock().unwrap().clone();
    let logged = frames.iter().any(|(lsn, bytes)| {
        payload::entries(*lsn, bytes)
            .unwrap()
            .iter()
            .any(|e| matches!(e, super::super::entry::Entry::Interrupted))
    });
    assert!(logged, "the interrupted attempts are a frame of their own");
    let tag = u32::from_str_radix(&store.public_id(0)[4..12], 16).unwrap();
    let want = store.attempts(seq).unwrap();
    close(store, writer).await;

    let (standby, writer) = Store::open(StoreOptions {
        standby: true,
        tag: Some(tag),
        ..options(&dir.path().join("standby"))
    })
    .unwrap();
    standby.apply_frames(frames, 1).await.unwrap();
    assert_eq!(standby.attempts(seq).unwrap(), want);
    close(standby, writer).await;
}
