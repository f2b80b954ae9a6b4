//! The dedupe index's sealed runs on a real store: sealed off the writer
//! thread, answering duplicates with the stored id, across a reopen and a
//! crash, expiring with their keys (but not a pending event's), and
//! rebuilt from the log when a file cannot be used.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::super::*;
use super::support::*;

const RUN_KEYS: usize = 50;

/// A store that seals every 50 keys at once: every batch a checkpoint.
fn run_options(dir: &Path, dedupe_ttl: Duration) -> StoreOptions {
    StoreOptions {
        dedupe_seal_keys: RUN_KEYS,
        checkpoint_every: Duration::ZERO,
        dedupe_ttl,
        ..options(dir)
    }
}

fn run_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir.join(dedupe::RUN_DIR)) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// Waits (up to 20 s) until the store's runs hold `keys` keys in `runs`
/// runs (merges done), and its dir as many files.
async fn sealed(store: &Store, dir: &Path, keys: u64, runs: usize) {
    let started = Instant::now();
    loop {
        let sizes = store.dedupe_sizes();
        if (sizes.run_keys, sizes.runs, run_files(dir).len()) == (keys, runs, runs) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{sizes:?} {:?}, not {keys} keys in {runs} runs",
            run_files(dir)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Ingests `e{from}`..`e{to}` on `store`, each new; returns their seqs.
async fn ingest_new(store: &Store, ids: std::ops::Range<u64>) -> Vec<u64> {
    let mut seqs = Vec::new();
    for i in ids {
        seqs.push(new_seq(store, "s", &format!("e{i}"), Initial::Deliver).await);
    }
    seqs
}

/// Opens the store in `dir` with an hour's dedupe TTL.
fn open(dir: &Path) -> (Store, WriterHandle) {
    Store::open(run_options(dir, Duration::from_secs(3600))).unwrap()
}

/// Asserts that a repeat of each `e{i}` is a duplicate of `seqs[i]`.
async fn all_duplicates(store: &Store, seqs: &[u64]) {
    for (i, &seq) in seqs.iter().enumerate() {
        assert_eq!(repeat(store, i as u64).await, Some(seq), "e{i}");
    }
}

/// The seq a repeat of `e{i}` is answered as a duplicate of; `None`: new.
async fn repeat(store: &Store, i: u64) -> Option<u64> {
    match store
        .ingest(event("s", &format!("e{i}")), Initial::Deliver)
        .await
        .unwrap()
    {
        Ingested::Duplicate { id } => Some(store.parse_public_id(&id).unwrap()),
        Ingested::New { .. } => None,
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn sealed_keys_are_duplicates_with_their_ids_before_and_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = open(dir.path());
    let seqs = ingest_new(&store, 0..175).await;
    // Three runs sealed, the first two merged.
    sealed(&store, dir.path(), 150, 2).await;
    let sizes = store.dedupe_sizes();
    assert_eq!(
        (sizes.levels, sizes.exact_keys),
        ([1, 1, 0], 25),
        "{sizes:?}"
    );
    for i in [0, 49, 50, 120, 149, 150, 174] {
        assert_eq!(repeat(&store, i).await, Some(seqs[i as usize]), "e{i}");
        let found = store.find("s", &format!("e{i}")).unwrap().unwrap();
        assert_eq!(found.seq, seqs[i as usize]);
    }
    assert_eq!(repeat(&store, 175).await, None, "a new id is new");
    close(store, writer).await;

    // Reopened: the runs are read, not rebuilt; the same answers.
    let (store, writer) = open(dir.path());
    assert_eq!(store.dedupe_sizes().levels, [1, 1, 0]);
    for i in [0, 77, 149, 150, 174] {
        assert_eq!(repeat(&store, i).await, Some(seqs[i as usize]), "e{i}");
    }
    assert!(
        repeat(&store, 175).await.is_some(),
        "stored before the reopen"
    );
    close(store, writer).await;
}

#[tokio::test]
async fn runs_expire_with_their_keys_but_a_pending_events_key_stays() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = Duration::from_secs(60);
    let (store, writer) = Store::open(run_options(dir.path(), ttl)).unwrap();
    let seqs = ingest_new(&store, 0..120).await;
    sealed(&store, dir.path(), 100, 1).await;
    // All delivered but e7, still pending when its key expires.
    for (i, &seq) in seqs.iter().enumerate() {
        if i != 7 {
            deliver(&store, seq, now_ms()).await;
        }
    }
    let later = now_ms() + ttl.as_millis() as u64 + 1000;
    // A first step sweeps part of the first run: those keys are gone while
    // the run stays.
    let mut dedupe_keys = store.sweep(later, 20).await.unwrap().dedupe_keys;
    assert_eq!(store.dedupe_sizes().runs, 1);
    assert!(
        store.find("s", "e3").unwrap().is_none(),
        "swept from its run"
    );
    assert!(store.find("s", "e30").unwrap().is_some(), "not swept yet");
    loop {
        let swept = store.sweep(later, 30).await.unwrap();
        dedupe_keys += swept.dedupe_keys;
        if !swept.more {
            break;
        }
    }
    assert_eq!(dedupe_keys, 119, "every key but the pending event's");
    // The learn that drops runs comes with the sweep's commit; the files
    // go on the sealer thread.
    let started = Instant::now();
    while !run_files(dir.path()).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            run_files(dir.path())
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(store.dedupe_sizes().runs, 0);
    assert_eq!(
        repeat(&store, 7).await,
        Some(seqs[7]),
        "pending: still a duplicate"
    );
    assert_eq!(repeat(&store, 3).await, None, "expired: new again");
    close(store, writer).await;

    // After a reopen the kept key is still live; the expired one is not.
    let (store, writer) = Store::open(run_options(dir.path(), ttl)).unwrap();
    assert_eq!(repeat(&store, 7).await, Some(seqs[7]));
    assert_eq!(repeat(&store, 4).await, None);
    close(store, writer).await;
}

#[tokio::test]
async fn a_damaged_or_foreign_run_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = open(dir.path());
    let seqs = ingest_new(&store, 0..160).await;
    // Runs of 100 (merged) and 50 keys; 10 keys in memory.
    sealed(&store, dir.path(), 150, 2).await;
    close(store, writer).await;
    let names = run_files(dir.path());
    let runs = dir.path().join(dedupe::RUN_DIR);
    // The newer run damaged; a run of another store; a torn temporary file.
    let middle = runs.join(&names[1]);
    let mut bytes = std::fs::read(&middle).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&middle, &bytes).unwrap();
    let other = tempfile::tempdir().unwrap();
    let (store, writer) = open(other.path());
    ingest_new(&store, 1000..1060).await;
    sealed(&store, other.path(), 50, 1).await;
    close(store, writer).await;
    let foreign = run_files(other.path()).remove(0);
    std::fs::copy(
        other.path().join(dedupe::RUN_DIR).join(&foreign),
        runs.join("run-foreign"),
    )
    .unwrap();
    std::fs::write(runs.join("run-torn.tmp"), b"partial").unwrap();

    let (store, writer) = open(dir.path());
    // The first run is kept; the damaged one is rebuilt at open from the
    // log (a run of 50); the rest goes to memory. The others are deleted.
    sealed(&store, dir.path(), 150, 2).await;
    assert_eq!(store.dedupe_sizes().exact_keys, 10);
    all_duplicates(&store, &seqs).await;
    for i in 1000..1060 {
        assert_eq!(repeat(&store, i).await, None, "another store's key e{i}");
    }
    close(store, writer).await;
}

#[tokio::test]
async fn a_crash_while_runs_seal_loses_no_key() {
    let live = tempfile::tempdir().unwrap();
    let (store, writer) = open(live.path());
    let seqs = ingest_new(&store, 0..230).await;
    // Four runs sealed, merged into one.
    sealed(&store, live.path(), 200, 1).await;
    // What kill -9 leaves: the files as they are now, a seal of the
    // fifth run maybe half written.
    let image = tempfile::tempdir().unwrap();
    for name in [DB_FILE, "hookinbox.wal"] {
        std::fs::copy(live.path().join(name), image.path().join(name)).unwrap();
    }
    let runs = image.path().join(dedupe::RUN_DIR);
    std::fs::create_dir_all(&runs).unwrap();
    for name in run_files(live.path()) {
        std::fs::copy(
            live.path().join(dedupe::RUN_DIR).join(&name),
            runs.join(&name),
        )
        .unwrap();
    }
    std::fs::write(runs.join("run-half.tmp"), vec![0u8; 5000]).unwrap();
    close(store, writer).await;
    let (store, writer) = open(image.path());
    all_duplicates(&store, &seqs).await;
    assert!(!run_files(image.path()).iter().any(|n| n.ends_with(".tmp")));
    close(store, writer).await;
}

#[tokio::test]
async fn a_merged_run_wins_over_the_runs_it_was_merged_from() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = open(dir.path());
    let seqs = ingest_new(&store, 0..100).await;
    sealed(&store, dir.path(), 100, 1).await;
    let tag = store.tag();
    close(store, writer).await;
    // A crash after the merge, before its parts were deleted: the parts
    // are back beside it.
    let merged = dedupe::Run::open(
        &dir.path()
            .join(dedupe::RUN_DIR)
            .join(&run_files(dir.path())[0]),
        tag,
    )
    .unwrap();
    assert_eq!(merged.level, 1);
    let runs = dir.path().join(dedupe::RUN_DIR);
    let keys: Vec<(u128, u64)> = seqs
        .iter()
        .enumerate()
        .map(|(i, &seq)| (dedupe::fingerprint("s", &format!("e{i}")), seq))
        .collect();
    let cut = seqs[49];
    dedupe::Run::write(&runs, tag, (merged.lo, cut), keys[..50].to_vec()).unwrap();
    dedupe::Run::write(&runs, tag, (cut, merged.hi), keys[50..].to_vec()).unwrap();
    drop(merged);
    assert_eq!(run_files(dir.path()).len(), 3);

    let (store, writer) = open(dir.path());
    sealed(&store, dir.path(), 100, 1).await;
    assert_eq!(store.dedupe_sizes().levels, [0, 1, 0]);
    all_duplicates(&store, &seqs).await;
    close(store, writer).await;
}

#[tokio::test]
async fn runs_built_at_open_from_the_log_are_merged_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let options = || StoreOptions {
        // Never sealed while it runs: the keys stay in the log and memory.
        dedupe_seal_keys: usize::MAX,
        ..run_options(dir.path(), Duration::from_secs(3600))
    };
    let (store, writer) = Store::open(options()).unwrap();
    let seqs = ingest_new(&store, 0..210).await;
    close(store, writer).await;
    assert!(run_files(dir.path()).is_empty());
    // As a store from before runs: its first open seals the log into four
    // runs of 50, which the sealer then merges into one.
    let (store, writer) = open(dir.path());
    sealed(&store, dir.path(), 200, 1).await;
    assert_eq!(store.dedupe_sizes().levels, [0, 0, 1]);
    all_duplicates(&store, &seqs).await;
    close(store, writer).await;
}
