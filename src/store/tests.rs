//! Store tests on a real redb file in a temp dir.

use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::*;
use crate::config::{Config, Kind};
use crate::verify::sign::{Signing, sign};
use crate::verify::{Request, Verified, Verifier};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A real VerifiedEvent: signed as Standard Webhooks and verified.
fn event(source: &str, id: &str) -> VerifiedEvent {
    let text =
        format!("[[source]]\nname = \"{source}\"\nkind = \"standard\"\nsecret_env = \"S\"\n");
    let mut config = Config::from_toml(&text, "t", None, &|name| {
        (name == "S").then(|| SECRET.to_owned())
    })
    .unwrap();
    let verifier = Verifier::new(&config.sources.remove(0).resolved()).unwrap();
    let now = SystemTime::now();
    let ts = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let body = Bytes::from(format!("{{\"type\":\"t\",\"n\":\"{id}\"}}"));
    let headers = sign(&Signing {
        kind: Kind::Standard,
        secret: SECRET,
        body: &body,
        event_id: id,
        event_type: None,
        timestamp: ts,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap();
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        map.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    match verifier.verify(
        &Request {
            headers: &map,
            body: &body,
            path_rest: "",
            query: None,
        },
        now,
    ) {
        Ok(Verified::Event(e)) => e,
        other => panic!("{other:?}"),
    }
}

fn options(dir: &std::path::Path) -> StoreOptions {
    StoreOptions {
        cache_bytes: 16 << 20,
        ..StoreOptions::new(dir, Duration::from_secs(3600))
    }
}

async fn close(store: Store, writer: WriterHandle) {
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

async fn new_seq(store: &Store, source: &str, id: &str, initial: Initial) -> u64 {
    let Ingested::New { id } = store.ingest(event(source, id), initial).await.unwrap() else {
        panic!("{id} was a duplicate")
    };
    store.parse_public_id(&id).unwrap()
}

#[tokio::test]
async fn new_then_duplicate_returns_the_same_id() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let first = store
        .ingest(event("s", "e1"), Initial::Deliver)
        .await
        .unwrap();
    let Ingested::New { id } = first.clone() else {
        panic!("{first:?}")
    };
    let again = store
        .ingest(event("s", "e1"), Initial::Deliver)
        .await
        .unwrap();
    assert_eq!(again, Ingested::Duplicate { id: id.clone() });
    // Same id, other source: a different event.
    assert!(matches!(
        store.ingest(event("t", "e1"), Initial::Hold).await.unwrap(),
        Ingested::New { .. }
    ));
    let stored = store.find("s", "e1").unwrap().unwrap();
    assert_eq!(stored.id, id);
    assert_eq!(store.parse_public_id(&id), Some(stored.seq));
    assert_eq!(stored.state.status, schema::Status::Pending);
    assert_eq!(
        store.find("t", "e1").unwrap().unwrap().state.status,
        schema::Status::Held
    );
    assert_eq!(store.count().unwrap(), 2);
    close(store, writer).await;
}

#[tokio::test]
async fn concurrent_copies_in_one_batch_store_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let store = store.clone();
            let ev = event("s", if i % 2 == 0 { "same" } else { "other" });
            tokio::spawn(async move { store.ingest(ev, Initial::Deliver).await.unwrap() })
        })
        .collect();
    let mut new = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), Ingested::New { .. }) {
            new += 1;
        }
    }
    assert_eq!(new, 2);
    assert_eq!(store.count().unwrap(), 2);
    close(store, writer).await;
}

#[tokio::test]
async fn events_and_dedupe_survive_a_reopen_and_ids_keep_counting() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let Ingested::New { id } = store
        .ingest(event("s", "e1"), Initial::Deliver)
        .await
        .unwrap()
    else {
        panic!()
    };
    close(store, writer).await;

    let (store, writer) = Store::open(options(dir.path())).unwrap();
    assert_eq!(
        store
            .ingest(event("s", "e1"), Initial::Deliver)
            .await
            .unwrap(),
        Ingested::Duplicate { id: id.clone() }
    );
    let Ingested::New { id: id2 } = store
        .ingest(event("s", "e2"), Initial::Deliver)
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        store.parse_public_id(&id2),
        Some(store.parse_public_id(&id).unwrap() + 1)
    );
    close(store, writer).await;
}

#[tokio::test]
async fn ids_of_another_database_are_not_ours() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let (sa, wa) = Store::open(options(a.path())).unwrap();
    let (sb, wb) = Store::open(options(b.path())).unwrap();
    let id = sa.public_id(1);
    assert_eq!(sa.parse_public_id(&id), Some(1));
    assert_eq!(sb.parse_public_id(&id), None);
    assert_eq!(sa.parse_public_id("hbx_zz"), None);
    drop((sa, sb));
    tokio::task::spawn_blocking(move || {
        wa.shutdown();
        wb.shutdown();
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn after_shutdown_ingest_answers_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
    assert!(matches!(
        store.ingest(event("s", "e"), Initial::Deliver).await,
        Err(StoreError::Closed)
    ));
}

#[tokio::test]
async fn an_attempt_in_flight_at_a_crash_is_recorded_as_interrupted_and_due_again() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let seq = new_seq(&store, "s", "e1", Initial::Deliver).await;
    let claimed = store.claim(seq, 1_000).await.unwrap().unwrap();
    assert_eq!(claimed.attempt, 1);
    // A second claim while the first is in flight gets nothing.
    assert_eq!(store.claim(seq, 1_001).await.unwrap(), None);
    // So does a person's change.
    assert_eq!(
        store.change(seq, Change::Replay, 1_002).await.unwrap(),
        Err(ChangeError::InFlight)
    );
    // The process dies here: the lease is on disk, the outcome never comes.
    close(store, writer).await;

    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let history = store.attempts(seq).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].class, schema::AttemptClass::Interrupted);
    assert_eq!(history[0].started_ms, 1_000);
    let e = store.get(seq).unwrap().unwrap();
    assert_eq!(e.state.status, schema::Status::Pending);
    assert_eq!(e.state.attempts, 1);
    let (due, _) = store.due("s", u64::MAX - 1, 10, |_| false).unwrap();
    assert_eq!(due.iter().map(|d| d.seq).collect::<Vec<_>>(), vec![seq]);
    // And it can be claimed again, as attempt 2.
    assert_eq!(store.claim(seq, 2_000).await.unwrap().unwrap().attempt, 2);
    close(store, writer).await;
}

#[tokio::test]
async fn due_lists_one_destination_in_due_order_skipping_attempts_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let mut seqs = Vec::new();
    for i in 0..5 {
        let Ingested::New { id } = store
            .ingest(event("s", &format!("e{i}")), Initial::Deliver)
            .await
            .unwrap()
        else {
            panic!()
        };
        seqs.push(store.parse_public_id(&id).unwrap());
    }
    store
        .ingest(event("t", "x"), Initial::Deliver)
        .await
        .unwrap();
    let far = u64::MAX - 1;
    let (due, next) = store.due("s", far, 2, |seq| seq == seqs[0]).unwrap();
    assert_eq!(
        due.iter().map(|d| d.seq).collect::<Vec<_>>(),
        vec![seqs[1], seqs[2]]
    );
    assert_eq!(next, Some(far), "more are due than the limit took");
    let (due, next) = store.due("s", 0, 10, |_| false).unwrap();
    assert!(due.is_empty());
    assert!(next.is_some_and(|n| n > 0), "the next due time: {next:?}");
    let (due, next) = store.due("nobody", far, 10, |_| false).unwrap();
    assert!(due.is_empty() && next.is_none());
    close(store, writer).await;
}

fn attempt(class: schema::AttemptClass, status: Option<u16>) -> schema::Attempt {
    schema::Attempt {
        started_ms: 0,
        latency_ms: 1,
        class,
        status,
        error: None,
        response_snippet: None,
    }
}

async fn deliver(store: &Store, seq: u64, at_ms: u64) {
    store.claim(seq, at_ms).await.unwrap().unwrap();
    store
        .finish(Finish {
            seq,
            attempt: attempt(schema::AttemptClass::Delivered, Some(200)),
            next: Next::Delivered { at_ms },
        })
        .await
        .unwrap();
}

async fn kill(store: &Store, seq: u64, at_ms: u64) {
    store.claim(seq, at_ms).await.unwrap().unwrap();
    store
        .finish(Finish {
            seq,
            attempt: attempt(schema::AttemptClass::RejectedStatus, Some(400)),
            next: Next::Dead {
                reason: "400".into(),
                at_ms,
                release_key: true,
            },
        })
        .await
        .unwrap();
}

const DAY: u64 = 86_400_000;

#[tokio::test]
async fn the_sweeper_takes_exactly_what_expired_and_never_a_pending_or_held_event() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        payload_ttl: Duration::from_millis(7 * DAY),
        dlq_ttl: Duration::from_millis(30 * DAY),
        ..options(dir.path())
    };
    let (store, writer) = Store::open(options).unwrap();
    let t0 = 10 * DAY;
    let delivered = new_seq(&store, "s", "delivered", Initial::Deliver).await;
    let dead = new_seq(&store, "s", "dead", Initial::Deliver).await;
    let replayed = new_seq(&store, "s", "replayed", Initial::Deliver).await;
    let pending = new_seq(&store, "s", "pending", Initial::Deliver).await;
    let held = new_seq(&store, "s", "held", Initial::Hold).await;
    deliver(&store, delivered, t0).await;
    kill(&store, dead, t0).await;
    kill(&store, replayed, t0).await;
    // Replayed 29 days later and delivered again: its old expiry must not fire.
    store
        .change(replayed, Change::Replay, t0 + 29 * DAY)
        .await
        .unwrap()
        .unwrap();
    deliver(&store, replayed, t0 + 29 * DAY).await;

    // Dedupe keys are far from expiry here (received now, TTL 1 h): only events go.
    let before = store.sweep(t0 + 7 * DAY - 1, 100).await.unwrap();
    assert_eq!((before.delivered, before.dead_or_ignored), (0, 0));
    let week = store.sweep(t0 + 7 * DAY, 100).await.unwrap();
    assert_eq!(
        (week.delivered, week.dead_or_ignored, week.more),
        (1, 0, false)
    );
    assert!(store.get(delivered).unwrap().is_none());
    assert!(store.attempts(delivered).unwrap().is_empty());
    let month = store.sweep(t0 + 30 * DAY, 100).await.unwrap();
    assert_eq!(
        (month.delivered, month.dead_or_ignored),
        (0, 1),
        "only the dead one"
    );
    assert!(store.get(dead).unwrap().is_none());
    assert!(store.dead_letters("s").unwrap().is_empty());
    assert!(
        store.get(replayed).unwrap().is_some(),
        "a stale expiry entry never deletes"
    );
    let later = store.sweep(t0 + 36 * DAY, 100).await.unwrap();
    assert_eq!(
        later.delivered, 1,
        "the replayed one expires from its own delivery"
    );
    // Pending and held events are never swept, however late.
    store.sweep(u64::MAX / 2, 100).await.unwrap();
    assert!(store.get(pending).unwrap().is_some());
    assert!(store.get(held).unwrap().is_some());
    close(store, writer).await;
}

#[tokio::test]
async fn expired_dedupe_keys_go_in_bounded_steps_and_their_ids_are_new_again() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let mut seqs = Vec::new();
    for i in 0..5 {
        seqs.push(new_seq(&store, "s", &format!("k{i}"), Initial::Hold).await);
    }
    let now = crate::deliver::unix_ms(SystemTime::now());
    let hour = 3_600_000;
    assert_eq!(
        store
            .sweep(now + hour - 60_000, 10)
            .await
            .unwrap()
            .dedupe_keys,
        0
    );
    let first = store.sweep(now + hour + 60_000, 2).await.unwrap();
    assert_eq!((first.dedupe_keys, first.more), (2, true));
    let rest = store.sweep(now + hour + 60_000, 10).await.unwrap();
    assert_eq!((rest.dedupe_keys, rest.more), (3, false));
    assert!(store.find("s", "k0").unwrap().is_none());
    // The held events themselves stay; a repeat of a swept id is a new event.
    assert!(store.get(seqs[0]).unwrap().is_some());
    let again = store.ingest(event("s", "k0"), Initial::Hold).await.unwrap();
    assert!(matches!(again, Ingested::New { .. }), "{again:?}");
    // And the new key survives a restart, the swept ones do not come back.
    close(store, writer).await;
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    assert!(matches!(
        store.ingest(event("s", "k0"), Initial::Hold).await.unwrap(),
        Ingested::Duplicate { .. }
    ));
    assert!(matches!(
        store.ingest(event("s", "k1"), Initial::Hold).await.unwrap(),
        Ingested::New { .. }
    ));
    close(store, writer).await;
}

/// One rule decides 503 or 500 for every caller: what the disk did passes by
/// itself; damaged data or a foreign schema needs a person.
#[test]
fn transient_errors_are_the_disks_and_the_rest_need_a_person() {
    let io = || redb::Error::Io(std::io::Error::from_raw_os_error(27));
    let write = |e: WriteError| StoreError::Write(Arc::new(e));
    assert!(write(WriteError::Redb(io())).is_transient());
    assert!(write(WriteError::Redb(redb::Error::PreviousIo)).is_transient());
    assert!(StoreError::Reopening.is_transient());
    assert!(StoreError::Closed.is_transient());
    assert!(StoreError::Read(redb::Error::PreviousIo).is_transient());

    let decode = schema::decode::<schema::EventState>(&[]).unwrap_err();
    assert!(!write(WriteError::Corrupt(decode)).is_transient());
    let decode = schema::decode::<schema::EventState>(&[1, 0xff]).unwrap_err();
    assert!(!StoreError::Corrupt(decode).is_transient());
    assert!(!StoreError::MissingState { seq: 7 }.is_transient());
    assert!(!StoreError::Read(redb::Error::Corrupted("bad page".into())).is_transient());
    assert!(
        !StoreError::NewerSchema {
            path: "x".into(),
            found: 9
        }
        .is_transient()
    );
}

/// A log line shows what failed and why, down to the operating system.
#[test]
fn a_report_shows_the_whole_chain_of_causes() {
    let e = StoreError::Write(Arc::new(WriteError::Redb(redb::Error::Io(
        std::io::Error::from_raw_os_error(27),
    ))));
    let text = e.report().to_string();
    assert!(
        text.starts_with("the store cannot commit right now: "),
        "{text}"
    );
    assert!(text.contains("File too large"), "{text}");
    assert_eq!(e.to_string(), "the store cannot commit right now");

    let decode = schema::decode::<schema::EventState>(&[1, 0xff]).unwrap_err();
    let text = StoreError::Corrupt(decode).report().to_string();
    assert!(
        text.starts_with("the database holds a record this build cannot read: corrupt record: "),
        "{text}"
    );
}
