//! Idempotency keys: one claimant at a time under a growing fencing token,
//! a late worker refused, a result never overwritten, expiry and sweep, and
//! every answered change surviving a crash through the log.

use std::time::Duration;

use super::super::*;
use super::support::*;

const NS: &str = "app";
const MIN: u64 = 60_000;

fn claim(lease_ms: u64, ttl_ms: u64) -> KeyOp {
    KeyOp::Claim { lease_ms, ttl_ms }
}

fn complete(token: u64, result: &str) -> KeyOp {
    KeyOp::Complete {
        token,
        result: Some(result.to_owned()),
    }
}

async fn key(store: &Store, k: &str, op: KeyOp, now_ms: u64) -> KeyAnswer {
    store.key(NS, k, op, now_ms).await.unwrap()
}

fn token_of(answer: &KeyAnswer) -> u64 {
    match answer {
        KeyAnswer::Claimed { token, .. } => *token,
        other => panic!("not claimed: {other:?}"),
    }
}

#[tokio::test]
async fn a_claimed_key_is_busy_until_done_then_done_with_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let first = key(&store, "order:1:email", claim(30_000, MIN), 1_000).await;
    assert_eq!(
        first,
        KeyAnswer::Claimed {
            token: 1,
            lease_until_ms: 31_000,
            took_over: false,
        }
    );
    assert_eq!(
        key(&store, "order:1:email", claim(30_000, MIN), 2_000).await,
        KeyAnswer::Busy {
            lease_until_ms: 31_000
        }
    );
    // Another key, another holder; the namespace is part of the key.
    assert_eq!(
        token_of(&key(&store, "order:2:email", claim(30_000, MIN), 2_000).await),
        2
    );
    let other_ns = store
        .key("billing", "order:1:email", claim(1, MIN), 2_000)
        .await
        .unwrap();
    assert_eq!(token_of(&other_ns), 3);

    assert_eq!(
        key(
            &store,
            "order:1:email",
            complete(1, r#"{"sent":true}"#),
            3_000
        )
        .await,
        KeyAnswer::Completed {
            completed_ms: 3_000
        }
    );
    let done = KeyAnswer::Done {
        completed_ms: 3_000,
        result: Some(r#"{"sent":true}"#.into()),
    };
    assert_eq!(
        key(&store, "order:1:email", claim(30_000, MIN), 4_000).await,
        done
    );
    // The completer's retry of its complete is answered, nothing changes.
    assert_eq!(
        key(&store, "order:1:email", complete(1, "{}"), 5_000).await,
        done
    );
    let record = store
        .key_record(NS, "order:1:email", 5_000)
        .unwrap()
        .unwrap();
    assert_eq!(record.expires_ms, 3_000 + MIN);
    assert_eq!(record.claims, 1);
    close(store, writer).await;
}

/// Worker A's lease runs out; B claims under a larger token and completes.
/// A's late complete, extend and release are refused and B's result stays.
#[tokio::test]
async fn a_late_worker_is_fenced_off_and_the_result_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let a = token_of(&key(&store, "k", claim(10_000, MIN), 0).await);
    // Still A's until its lease ends; A can extend while it holds it.
    assert_eq!(
        key(
            &store,
            "k",
            KeyOp::Extend {
                token: a,
                lease_ms: 10_000
            },
            5_000
        )
        .await,
        KeyAnswer::Extended {
            lease_until_ms: 15_000
        }
    );
    assert!(matches!(
        key(&store, "k", claim(10_000, MIN), 14_999).await,
        KeyAnswer::Busy { .. }
    ));
    let taken = key(&store, "k", claim(10_000, MIN), 15_000).await;
    assert!(
        matches!(
            taken,
            KeyAnswer::Claimed {
                took_over: true,
                ..
            }
        ),
        "a claim over a lapsed lease takes it over: {taken:?}"
    );
    let b = token_of(&taken);
    assert!(b > a, "{b} > {a}");
    for late in [
        complete(a, r#"{"by":"a"}"#),
        KeyOp::Extend {
            token: a,
            lease_ms: 10_000,
        },
        KeyOp::Release { token: a },
    ] {
        assert_eq!(key(&store, "k", late, 16_000).await, KeyAnswer::Stale);
    }
    assert_eq!(
        key(&store, "k", complete(b, r#"{"by":"b"}"#), 17_000).await,
        KeyAnswer::Completed {
            completed_ms: 17_000
        }
    );
    assert_eq!(
        key(&store, "k", complete(a, r#"{"by":"a"}"#), 18_000).await,
        KeyAnswer::Stale
    );
    let record = store.key_record(NS, "k", 18_000).unwrap().unwrap();
    assert_eq!(
        record.state,
        KeyState::Done {
            token: b,
            completed_ms: 17_000,
            result: Some(r#"{"by":"b"}"#.into())
        }
    );
    assert_eq!(record.claims, 2);
    close(store, writer).await;
}

#[tokio::test]
async fn a_released_or_deleted_key_is_free_again_and_unknown_keys_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let t = token_of(&key(&store, "k", claim(30_000, MIN), 0).await);
    assert_eq!(
        key(&store, "k", KeyOp::Release { token: t }, 1).await,
        KeyAnswer::Released
    );
    assert!(store.key_record(NS, "k", 1).unwrap().is_none());
    let again = token_of(&key(&store, "k", claim(30_000, MIN), 2).await);
    assert!(again > t);
    assert_eq!(key(&store, "k", KeyOp::Delete, 3).await, KeyAnswer::Deleted);
    assert_eq!(
        key(&store, "k", KeyOp::Delete, 4).await,
        KeyAnswer::NotFound
    );
    for op in [complete(again, "{}"), KeyOp::Release { token: again }] {
        assert_eq!(key(&store, "never", op, 5).await, KeyAnswer::NotFound);
    }
    assert!(matches!(
        key(&store, "k", claim(30_000, MIN), 6).await,
        KeyAnswer::Claimed { .. }
    ));
    close(store, writer).await;
}

/// 100 claims of one new key at once: exactly one is granted.
#[tokio::test]
async fn of_a_hundred_concurrent_claims_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let mut claims = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let store = store.clone();
        claims.spawn(async move {
            store
                .key(NS, "race", claim(30_000, MIN), 1_000)
                .await
                .unwrap()
        });
    }
    let mut won = 0;
    let mut busy = 0;
    for answer in claims.join_all().await {
        match answer {
            KeyAnswer::Claimed { .. } => won += 1,
            KeyAnswer::Busy { .. } => busy += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((won, busy), (1, 99));
    close(store, writer).await;
}

/// A done key is kept `ttl` after it was completed, then swept; a claim of
/// it is then new. An expired key not yet swept already reads as absent.
#[tokio::test]
async fn a_done_key_is_swept_after_its_ttl_and_then_claimable_again() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let t = token_of(&key(&store, "k", claim(1_000, MIN), 0).await);
    key(&store, "k", complete(t, "1"), 500).await;
    let expires = 500 + MIN;
    assert!(store.key_record(NS, "k", expires - 1).unwrap().is_some());
    assert!(store.key_record(NS, "k", expires).unwrap().is_none());
    assert_eq!(store.sweep(expires - 1, 100).await.unwrap().keys, 0);
    // Past its expiry, before the sweep: a claim starts it over.
    let fresh = key(&store, "k", claim(1_000, MIN), expires).await;
    assert!(token_of(&fresh) > t);
    let record = store.key_record(NS, "k", expires).unwrap().unwrap();
    assert_eq!((record.claims, record.created_ms), (1, expires));
    // The old expiry entry went with the old record: the sweep at the old
    // time leaves the new one.
    assert_eq!(store.sweep(expires, 100).await.unwrap().keys, 0);
    assert!(store.key_record(NS, "k", expires).unwrap().is_some());
    let swept = store.sweep(expires + MIN, 100).await.unwrap();
    assert_eq!(swept.keys, 1);
    assert!(
        store.key_record(NS, "k", 0).unwrap().is_none(),
        "gone, whatever the time"
    );
    close(store, writer).await;
}

/// Every answered key change is in the log: a crash image (the file as of
/// its last checkpoint, and the log) reopens to the same keys, and tokens
/// go on growing from where they were.
#[tokio::test]
async fn key_changes_survive_a_crash_and_tokens_keep_growing() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let never = StoreOptions {
        checkpoint_every: Duration::from_secs(3600),
        ..options(&live)
    };
    let (store, writer) = Store::open(never).unwrap();
    let mut last = 0;
    for i in 0..20 {
        let k = format!("k{i}");
        let t = token_of(&key(&store, &k, claim(30_000, MIN), 1_000).await);
        last = t;
        match i % 4 {
            0 => assert!(matches!(
                key(&store, &k, complete(t, &i.to_string()), 2_000).await,
                KeyAnswer::Completed { .. }
            )),
            1 => assert_eq!(
                key(&store, &k, KeyOp::Release { token: t }, 2_000).await,
                KeyAnswer::Released
            ),
            2 => assert!(matches!(
                key(
                    &store,
                    &k,
                    KeyOp::Extend {
                        token: t,
                        lease_ms: 60_000
                    },
                    2_000
                )
                .await,
                KeyAnswer::Extended { .. }
            )),
            _ => {}
        }
    }
    let image = dir.path().join("image");
    std::fs::create_dir_all(&image).unwrap();
    for file in [DB_FILE, "hookinbox.wal"] {
        std::fs::copy(live.join(file), image.join(file)).unwrap();
    }
    let records = |store: &Store| -> Vec<Option<KeyRecord>> {
        (0..20)
            .map(|i| store.key_record(NS, &format!("k{i}"), 3_000).unwrap())
            .collect()
    };
    let before = records(&store);
    close(store, writer).await;
    assert_eq!(before.iter().filter(|r| r.is_some()).count(), 15);

    let (crashed, crashed_writer) = Store::open(options(&image)).unwrap();
    let (clean, clean_writer) = Store::open(options(&live)).unwrap();
    assert_eq!(records(&crashed), before);
    let next = token_of(&key(&crashed, "new", claim(30_000, MIN), 3_000).await);
    assert!(next > last);
    assert_eq!(
        token_of(&key(&clean, "new", claim(30_000, MIN), 3_000).await),
        next,
        "tokens go on from the same place"
    );
    // The index was rebuilt from the rows: each key is where it was.
    assert_eq!(
        key(&crashed, "k0", claim(30_000, MIN), 3_000).await,
        KeyAnswer::Done {
            completed_ms: 2_000,
            result: Some("0".into())
        }
    );
    assert!(matches!(
        key(&crashed, "k2", claim(30_000, MIN), 3_000).await,
        KeyAnswer::Busy { .. }
    ));
    assert!(matches!(
        key(&crashed, "k1", claim(30_000, MIN), 3_000).await,
        KeyAnswer::Claimed { .. }
    ));
    close(crashed, crashed_writer).await;
    close(clean, clean_writer).await;
}

/// Keys of several namespaces, their seqs interleaved, are each found
/// where they are after a reopen (the index is rebuilt from `key_log`, a
/// range of seqs of every namespace per thread).
#[tokio::test]
async fn every_namespaces_keys_are_found_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let mut tokens = Vec::new();
    for i in 0..60 {
        let ns = ["a", "b", "c"][i % 3];
        let answer = store
            .key(ns, &format!("k{i}"), claim(30_000, MIN), 1_000)
            .await
            .unwrap();
        tokens.push((ns, i, token_of(&answer)));
    }
    for &(ns, i, token) in tokens.iter().filter(|(_, i, _)| i % 2 == 0) {
        store
            .key(ns, &format!("k{i}"), complete(token, "r"), 2_000)
            .await
            .unwrap();
    }
    close(store, writer).await;
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    for &(ns, i, token) in &tokens {
        let answer = store
            .key(ns, &format!("k{i}"), claim(30_000, MIN), 3_000)
            .await
            .unwrap();
        if i % 2 == 0 {
            assert!(
                matches!(answer, KeyAnswer::Done { .. }),
                "{ns} k{i}: {answer:?}"
            );
        } else {
            assert!(
                matches!(answer, KeyAnswer::Busy { .. }),
                "{ns} k{i}: {answer:?}"
            );
            assert_eq!(
                store
                    .key_record(ns, &format!("k{i}"), 3_000)
                    .unwrap()
                    .unwrap()
                    .state,
                KeyState::Claimed {
                    token,
                    lease_until_ms: 31_000
                }
            );
        }
        // Not found under another namespace.
        let other = ["a", "b", "c"].into_iter().find(|o| *o != ns).unwrap();
        assert_eq!(
            store.key_record(other, &format!("k{i}"), 3_000).unwrap(),
            None
        );
    }
    close(store, writer).await;
}

/// A file of schema 6 (a build of 26 Nov 2026 kept keys under (namespace,
/// key)) opens with its keys moved into the key log: each reads and
/// answers as before, and a new claim's token is larger than any that
/// build handed out.
#[tokio::test]
async fn schema_6_keys_move_into_the_key_log_at_open() {
    use super::super::schema::{KEY_EXPIRY_6, KEYS_6, META, META_SCHEMA};
    use super::super::tables::keys::META_KEY_TOKEN;

    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    close(store, writer).await;
    let done = KeyRecord {
        state: KeyState::Done {
            token: 4,
            completed_ms: 2_000,
            result: Some("1".into()),
        },
        created_ms: 1_000,
        ttl_ms: MIN,
        expires_ms: 2_000 + MIN,
        claims: 1,
    };
    let claimed = KeyRecord {
        state: KeyState::Claimed {
            token: 9,
            lease_until_ms: 31_000,
        },
        created_ms: 1_000,
        ttl_ms: MIN,
        expires_ms: 1_000 + MIN,
        claims: 2,
    };
    {
        let db = redb::Database::create(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        for name in ["key_log", "key_due", "key_claimed"] {
            assert!(
                txn.delete_table(redb::TableDefinition::<(), ()>::new(name))
                    .unwrap()
            );
        }
        {
            let mut keys = txn.open_table(KEYS_6).unwrap();
            let mut expiry = txn.open_table(KEY_EXPIRY_6).unwrap();
            let mut meta = txn.open_table(META).unwrap();
            for (k, record) in [("a", &done), ("b", &claimed)] {
                let mut out = Vec::new();
                super::super::format::row::encode_key_v2(record, &mut out);
                keys.insert((NS, k), out.as_slice()).unwrap();
                expiry.insert((record.expires_ms, NS, k), ()).unwrap();
            }
            meta.insert(META_KEY_TOKEN, 9u64.to_le_bytes().as_slice())
                .unwrap();
            meta.insert(META_SCHEMA, [6u8].as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    assert_eq!(store.key_record(NS, "a", 3_000).unwrap(), Some(done));
    assert_eq!(store.key_record(NS, "b", 3_000).unwrap(), Some(claimed));
    assert_eq!(store.keys_stored().unwrap(), 2);
    let claimed_page = store
        .list_keys(NS, Some(KeyStateKind::Claimed), None, 10, 3_000)
        .unwrap();
    assert_eq!(claimed_page.keys.len(), 1);
    assert!(matches!(
        key(&store, "b", complete(9, "2"), 3_000).await,
        KeyAnswer::Completed { .. }
    ));
    assert!(token_of(&key(&store, "c", claim(1_000, MIN), 3_000).await) > 9);
    // Its expiry moved too: swept at its time.
    assert_eq!(store.sweep(2_000 + MIN, 100).await.unwrap().keys, 1);
    {
        let db = store.db().unwrap();
        let txn = redb::ReadableDatabase::begin_read(&*db).unwrap();
        let names: Vec<String> = txn
            .list_tables()
            .unwrap()
            .map(|t| redb::TableHandle::name(&t).to_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n == "keys" || n == "key_expiry"),
            "{names:?}"
        );
    }
    close(store, writer).await;
}

/// A log of format 2 (key operations, as a build of 26 Nov 2026 logged
/// them) left at a crash replays as that build decided: its tokens drawn
/// from its own counter, a later claim's larger still.
#[tokio::test]
async fn a_format_2_log_of_key_operations_replays_as_its_build_decided() {
    use super::recover::rewrite_frames;

    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let never = StoreOptions {
        checkpoint_every: Duration::from_secs(3600),
        ..options(&live)
    };
    // What that build was asked, one frame each, with the tokens it gave:
    // 1 (a), 2 (b), 3 (c).
    let ops = [
        ("a", claim(30_000, MIN)),
        ("a", complete(1, "done-a")),
        ("b", claim(30_000, MIN)),
        ("b", KeyOp::Release { token: 2 }),
        ("c", claim(30_000, MIN)),
        (
            "c",
            KeyOp::Extend {
                token: 3,
                lease_ms: 90_000,
            },
        ),
    ];
    let (store, writer) = Store::open(never).unwrap();
    // This build's own answers differ (its tokens are seqs); only the
    // frames' count and order matter: each is rewritten below.
    let mut tokens = std::collections::HashMap::new();
    for (k, op) in &ops {
        let op = match op {
            KeyOp::Complete { result, .. } => KeyOp::Complete {
                token: tokens[k],
                result: result.clone(),
            },
            KeyOp::Release { .. } => KeyOp::Release { token: tokens[k] },
            KeyOp::Extend { lease_ms, .. } => KeyOp::Extend {
                token: tokens[k],
                lease_ms: *lease_ms,
            },
            other => other.clone(),
        };
        if let KeyAnswer::Claimed { token, .. } = key(&store, k, op, 1_000).await {
            tokens.insert(*k, token);
        }
    }
    let image = dir.path().join("image");
    std::fs::create_dir_all(&image).unwrap();
    std::fs::copy(live.join(DB_FILE), image.join(DB_FILE)).unwrap();
    std::fs::copy(live.join(wal::WAL_FILE), image.join(wal::WAL_FILE)).unwrap();
    close(store, writer).await;
    let first = std::cell::Cell::new(None);
    let rewritten = rewrite_frames(&image.join(wal::WAL_FILE), |lsn, _| {
        let from = first.get().unwrap_or(lsn);
        first.set(Some(from));
        let at = (lsn - from) as usize;
        let (k, op) = &ops[at];
        let entry = entry::Entry::Key {
            namespace: NS.into(),
            key: (*k).into(),
            op: std::borrow::Cow::Borrowed(op),
            now_ms: 1_000,
        };
        format::log::older_payload(2, std::slice::from_ref(&entry)).unwrap()
    });
    assert_eq!(rewritten, ops.len(), "one frame per change");

    let (store, writer) = Store::open(options(&image)).unwrap();
    assert_eq!(
        key(&store, "a", claim(30_000, MIN), 2_000).await,
        KeyAnswer::Done {
            completed_ms: 1_000,
            result: Some("done-a".into())
        }
    );
    let c = store.key_record(NS, "c", 2_000).unwrap().unwrap();
    assert_eq!(
        c.state,
        KeyState::Claimed {
            token: 3,
            lease_until_ms: 91_000
        }
    );
    let b = token_of(&key(&store, "b", claim(30_000, MIN), 2_000).await);
    assert!(b > 3, "{b}");
    close(store, writer).await;
}

/// A namespace's keys page by page, the most recently changed first, by state, without other
/// namespaces' keys or expired ones; a page ends after `limit` keys.
#[tokio::test]
async fn keys_of_a_namespace_list_in_pages_by_state() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    for (i, k) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let t = token_of(&key(&store, k, claim(10_000, MIN), 1_000).await);
        if i % 2 == 0 {
            key(&store, k, complete(t, "1"), 1_000).await;
        }
    }
    // Another namespace, before and after "app" in order, and a key that
    // expires at 2_000.
    for ns in ["aaa", "zzz"] {
        store.key(ns, "a", claim(1, MIN), 1_000).await.unwrap();
    }
    key(&store, "e", claim(1_000, 1_000), 1_000).await;
    let names = |page: &KeyPage| page.keys.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();

    let all = store.list_keys(NS, None, None, 10, 1_500).unwrap();
    assert_eq!(
        (names(&all), all.next_before),
        (
            vec!["e", "d", "c", "b", "a"]
                .into_iter()
                .map(String::from)
                .collect(),
            None
        )
    );
    let expired = store.list_keys(NS, None, None, 10, 2_000).unwrap();
    assert_eq!(names(&expired), ["d", "c", "b", "a"]);

    let first = store.list_keys(NS, None, None, 2, 1_500).unwrap();
    assert_eq!(names(&first), ["e", "d"]);
    let second = store
        .list_keys(NS, None, first.next_before, 2, 1_500)
        .unwrap();
    assert_eq!(names(&second), ["c", "b"]);
    let third = store
        .list_keys(NS, None, second.next_before, 2, 1_500)
        .unwrap();
    assert_eq!(
        (names(&third), third.next_before),
        (vec!["a".to_owned()], None)
    );

    let done = store
        .list_keys(NS, Some(KeyStateKind::Done), None, 10, 1_500)
        .unwrap();
    assert_eq!(names(&done), ["c", "a"]);
    let claimed = store
        .list_keys(NS, Some(KeyStateKind::Claimed), None, 10, 1_500)
        .unwrap();
    assert_eq!(names(&claimed), ["e", "d", "b"]);
    assert!(matches!(claimed.keys[0].1.state, KeyState::Claimed { .. }));
    assert_eq!(
        store
            .list_keys("nobody", None, None, 10, 1_500)
            .unwrap()
            .keys,
        []
    );
    assert_eq!(store.keys_stored().unwrap(), 7);
    close(store, writer).await;
}

/// A backup (and so a replication snapshot) holds every table the store
/// has, the keys among them: a restored inbox still refuses a second claim.
#[tokio::test]
async fn a_backup_holds_every_table_and_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    new_seq(&store, "shop", "evt_1", Initial::Deliver).await;
    let token = token_of(&key(&store, "held", claim(30_000, MIN), 1_000).await);
    let copy = dir.path().join("copy.redb");
    let store2 = store.clone();
    let path = copy.clone();
    tokio::task::spawn_blocking(move || store2.backup_to(&path))
        .await
        .unwrap()
        .unwrap();
    let tables = |db: &redb::Database| -> Vec<String> {
        let txn = redb::ReadableDatabase::begin_read(db).unwrap();
        let mut names: Vec<String> = txn
            .list_tables()
            .unwrap()
            .map(|t| redb::TableHandle::name(&t).to_owned())
            .collect();
        names.sort();
        names
    };
    let held = tables(&store.db().unwrap());
    close(store, writer).await;
    let restored = tempfile::tempdir().unwrap();
    std::fs::copy(&copy, restored.path().join(DB_FILE)).unwrap();
    assert_eq!(tables(&redb::Database::open(&copy).unwrap()), held);

    let (store, writer) = Store::open(options(restored.path())).unwrap();
    assert_eq!(
        key(&store, "held", claim(30_000, MIN), 2_000).await,
        KeyAnswer::Busy {
            lease_until_ms: 31_000
        }
    );
    assert!(token_of(&key(&store, "new", claim(30_000, MIN), 2_000).await) > token);
    close(store, writer).await;
}
