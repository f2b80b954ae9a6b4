//! The index's places working together: runs, the frozen map, the pinned
//! keys and `swept`.

use std::sync::Arc;

use super::*;

fn fp(i: u64) -> Fingerprint {
    fingerprint("s", &format!("e{i}"))
}

/// Freezes what the index has up to `hi` and seals it as a run in `dir`, as
/// the sealer does.
fn seal(index: &mut DedupeIndex, dir: &std::path::Path, hi: u64) {
    let frozen = index.freeze(hi, 1).expect("something to freeze");
    let entries = frozen.map.iter().filter(|e| e.1 > index.swept()).collect();
    let run = Run::write(dir, 1, (frozen.lo, frozen.hi), entries).unwrap();
    index.install(Arc::new(run));
}

/// An index that learned the event keys `e{seq}` at `seq` for `seqs`.
fn learned(seqs: std::ops::RangeInclusive<u64>) -> DedupeIndex {
    let mut index = DedupeIndex::default();
    for seq in seqs {
        index.learn(Kind::Event, fp(seq), seq);
    }
    index
}

fn get(index: &DedupeIndex, i: u64) -> Option<u64> {
    index.get(fp(i)).unwrap()
}

#[test]
fn sealed_keys_answer_until_swept_and_kept_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = learned(1..=100);
    let frozen = index.freeze(100, 100).expect("100 keys");
    assert!(index.freeze(100, 1).is_none(), "one frozen map at a time");
    assert_eq!(get(&index, 5), Some(5), "a frozen map answers");
    let run = Run::write(
        dir.path(),
        1,
        (frozen.lo, frozen.hi),
        frozen.map.iter().collect(),
    );
    index.install(Arc::new(run.unwrap()));
    for seq in 101..=150 {
        index.learn(Kind::Event, fp(seq), seq);
    }
    assert_eq!(index.sizes().runs, 1);
    assert_eq!((get(&index, 5), get(&index, 120)), (Some(5), Some(120)));

    // The sweep takes 1..=40 but keeps 7 (its event is pending).
    for seq in 1..=40 {
        index.forget(Kind::Event, fp(seq), seq);
    }
    index.learn(Kind::Event, fp(7), 7);
    assert_eq!(index.swept(), 40);
    assert_eq!(get(&index, 3), None, "swept: gone from its run");
    assert_eq!(get(&index, 7), Some(7), "kept: pinned");
    assert_eq!(get(&index, 41), Some(41));
    assert!(
        index.take_expired().is_empty(),
        "the run still has live keys"
    );

    // An expired key taken again by a new event; then that batch undone.
    index.learn(Kind::Event, fp(3), 151);
    assert_eq!(get(&index, 3), Some(151));
    index.unlearn(Kind::Event, fp(3), 151);
    assert_eq!(get(&index, 3), None);

    // Every key of the run swept: the run goes, the kept key stays.
    for seq in 41..=100 {
        index.forget(Kind::Event, fp(seq), seq);
    }
    let expired = index.take_expired();
    assert_eq!(expired.len(), 1);
    assert_eq!(index.sizes().runs, 0);
    assert_eq!((get(&index, 7), get(&index, 50)), (Some(7), None));
    assert_eq!(get(&index, 101), Some(101));

    // Idempotency keys: pinned whatever their seq, and never move `swept`.
    let key = fingerprint("\x01key", "k");
    index.learn(Kind::Key, key, 5);
    assert_eq!(index.get(key).unwrap(), Some(5));
    index.forget(Kind::Key, key, 5_000);
    assert_eq!(
        index.get(key).unwrap(),
        Some(5),
        "removes only its own place"
    );
    index.forget(Kind::Key, key, 5);
    assert_eq!(index.get(key).unwrap(), None);
    assert_eq!(index.swept(), 100);
}

#[test]
fn a_key_put_back_after_a_failed_sweep_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = learned(1..=10);
    seal(&mut index, dir.path(), 10);
    // A sweep of 1..=4 learned, then its batch lost: put back.
    for seq in 1..=4 {
        index.forget(Kind::Event, fp(seq), seq);
    }
    assert_eq!(get(&index, 2), None);
    for seq in 1..=4 {
        index.learn(Kind::Event, fp(seq), seq);
    }
    for seq in 1..=10 {
        assert_eq!(get(&index, seq), Some(seq), "e{seq}");
    }
}

#[test]
fn newer_runs_decide_and_a_miss_reads_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupeIndex::default();
    for round in 0..5u64 {
        for seq in round * 100 + 1..=round * 100 + 100 {
            index.learn(Kind::Event, fp(seq), seq);
        }
        seal(&mut index, dir.path(), round * 100 + 100);
    }
    assert_eq!(index.sizes().runs, 5);
    assert_eq!(index.sizes().run_keys, 500);
    for seq in 1..=500 {
        assert_eq!(get(&index, seq), Some(seq));
    }
    // Every run file emptied: a hit cannot be read any more, yet keys the
    // filters do not know are answered all the same.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(entry.unwrap().path());
        file.unwrap().set_len(0).unwrap();
    }
    assert!(index.get(fp(250)).is_err());
    let misses = (1000..3000).filter(|&i| get(&index, i).is_none()).count();
    assert_eq!(misses, 2000);
}

#[test]
fn runs_merge_like_a_binary_counter_up_to_the_top_level() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = DedupeIndex::default();
    let mut levels = Vec::new();
    for round in 0..9u64 {
        for seq in round * 10 + 1..=round * 10 + 10 {
            index.learn(Kind::Event, fp(seq), seq);
        }
        seal(&mut index, dir.path(), round * 10 + 10);
        while let Some((older, newer)) = index.mergeable() {
            let merged = Run::merge(
                dir.path(),
                1,
                &older,
                &newer,
                index.swept(),
                &Default::default(),
            );
            let merged = merged.unwrap();
            assert!(index.replace(&older, &newer, Arc::new(merged)));
        }
        levels.push(index.runs.iter().map(|r| r.level).collect::<Vec<_>>());
    }
    let want: [&[u32]; 9] = [
        &[0],
        &[1],
        &[1, 0],
        &[2],
        &[2, 0],
        &[2, 1],
        &[2, 1, 0],
        &[2, 2],
        &[2, 2, 0],
    ];
    assert_eq!(levels, want.map(<[u32]>::to_vec));
    for seq in 1..=90 {
        assert_eq!(get(&index, seq), Some(seq));
    }
    // A pair the sweep expired meanwhile is not replaced.
    let (older, newer) = (index.runs[0].clone(), index.runs[1].clone());
    for seq in 1..=80 {
        index.forget(Kind::Event, fp(seq), seq);
    }
    assert_eq!(index.take_expired().len(), 2);
    let merged = Run::merge(dir.path(), 1, &older, &newer, 0, &Default::default()).unwrap();
    assert!(!index.replace(&older, &newer, Arc::new(merged)));
}
