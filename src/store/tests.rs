//! Store tests on a real redb file in a temp dir, and the helpers other
//! modules' tests use to fill one.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::schema::{EVENTS, META, META_SCHEMA, SCHEMA_VERSION, STATE};
use super::*;
use crate::config::{Config, Kind};
use crate::verify::VerifiedEvent;
use crate::verify::sign::{Signing, sign};
use crate::verify::{Request, Verified, Verifier};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A real VerifiedEvent: signed as Standard Webhooks and verified.
pub(crate) fn event(source: &str, id: &str) -> VerifiedEvent {
    event_of_type(source, id, "t")
}

/// [`event`] with the given event type.
pub(crate) fn event_of_type(source: &str, id: &str, event_type: &str) -> VerifiedEvent {
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
    let body = Bytes::from(format!("{{\"type\":\"{event_type}\",\"n\":\"{id}\"}}"));
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

pub(crate) fn options(dir: &std::path::Path) -> StoreOptions {
    StoreOptions {
        cache_bytes: 16 << 20,
        ..StoreOptions::new(dir, Duration::from_secs(3600))
    }
}

pub(crate) async fn close(store: Store, writer: WriterHandle) {
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

pub(crate) async fn new_seq(store: &Store, source: &str, id: &str, initial: Initial) -> u64 {
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

pub(crate) async fn deliver(store: &Store, seq: u64, at_ms: u64) {
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
async fn a_filtered_event_is_counted_never_scheduled_and_swept_like_a_delivered_one() {
    let dir = tempfile::tempdir().unwrap();
    let options = || StoreOptions {
        payload_ttl: Duration::from_millis(7 * DAY),
        ..options(dir.path())
    };
    let (store, writer) = Store::open(options()).unwrap();
    let seq = new_seq(&store, "s", "f", Initial::Filtered).await;
    let pending = new_seq(&store, "s", "p", Initial::Deliver).await;
    close(store, writer).await;

    let (store, writer) = Store::open(options()).unwrap();
    let e = store.get(seq).unwrap().unwrap();
    assert_eq!(e.state.status, schema::Status::Filtered);
    assert_eq!(e.state.due_ms, None, "never on the schedule");
    let received = e.record.received_at_ms;
    assert_eq!(e.state.expires_ms, Some(received + 7 * DAY));
    let counts = store.stats().unwrap()["s"].counts.clone();
    assert_eq!((counts.filtered, counts.pending), (1, 1));
    let filter = EventFilter {
        status: Some(schema::Status::Filtered),
        ..EventFilter::default()
    };
    let (listed, _) = store.list(&filter, None, 10).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state.status, schema::Status::Filtered);

    let early = store.sweep(received + 7 * DAY - 1, 100).await.unwrap();
    assert_eq!(early.delivered, 0);
    let week = store.sweep(received + 7 * DAY, 100).await.unwrap();
    assert_eq!(week.delivered, 1, "counted with the delivered");
    assert!(store.get(seq).unwrap().is_none());
    assert!(store.get(pending).unwrap().is_some());
    assert_eq!(store.stats().unwrap()["s"].counts.filtered, 0);
    close(store, writer).await;
}

fn routes(names: &[&str]) -> Initial {
    Initial::Routes(
        names
            .iter()
            .map(|n| Route {
                destination: (*n).to_owned(),
                ordering_key: None,
            })
            .collect(),
    )
}

/// An event to three destinations is a block of three deliveries, each on
/// its own queue; each finishes on its own; a replay touches one; the event
/// is swept whole, at the last delivery's time; the next event follows the
/// block, also after a reopen.
#[tokio::test]
async fn an_event_to_several_destinations_has_a_delivery_each_and_goes_whole() {
    let dir = tempfile::tempdir().unwrap();
    let options = || StoreOptions {
        payload_ttl: Duration::from_millis(7 * DAY),
        dlq_ttl: Duration::from_millis(30 * DAY),
        ..options(dir.path())
    };
    let (store, writer) = Store::open(options()).unwrap();
    let seq = new_seq(&store, "s", "fan", routes(&["s", "s.b", "s.c"])).await;
    let e = store.get(seq).unwrap().unwrap();
    let keys: Vec<u64> = e.deliveries.iter().map(|d| d.key).collect();
    assert_eq!(keys, [seq, seq + 1, seq + 2]);
    let routes_of: Vec<&str> = e
        .deliveries
        .iter()
        .map(|d| d.state.source.as_str())
        .collect();
    assert_eq!(routes_of, ["s", "s.b", "s.c"]);
    for (route, key) in [("s", seq), ("s.b", seq + 1), ("s.c", seq + 2)] {
        let (due, _) = store.due(route, u64::MAX, 10, |_| false).unwrap();
        assert_eq!(
            due.iter().map(|d| d.seq).collect::<Vec<_>>(),
            [key],
            "{route}"
        );
        let d = store.delivery(key).unwrap().unwrap();
        assert_eq!((d.seq, d.state.source.as_str()), (seq, route));
    }
    close(store, writer).await;

    // The next event's seq follows the block, after a reopen too.
    let (store, writer) = Store::open(options()).unwrap();
    let next = new_seq(&store, "s", "after", Initial::Deliver).await;
    assert_eq!(next, seq + 3);
    let received = store.get(seq).unwrap().unwrap().record.received_at_ms;
    deliver(&store, seq, received).await;
    store.claim(seq + 1, received).await.unwrap().unwrap();
    store
        .finish(Finish {
            seq: seq + 1,
            attempt: attempt(schema::AttemptClass::RejectedStatus, Some(400)),
            next: Next::Dead {
                reason: "400".into(),
                at_ms: received,
                release_key: true,
            },
        })
        .await
        .unwrap();
    let stats = &store.stats().unwrap()["s"];
    assert_eq!(
        (
            stats.counts.delivered,
            stats.counts.dead,
            stats.counts.pending
        ),
        (1, 1, 2),
        "deliveries are counted: three of one event, one of the next"
    );
    assert_eq!(stats.routes["s.b"].counts.dead, 1);
    assert_eq!(stats.routes["s.c"].counts.pending, 1);
    assert_eq!(store.dead_letters("s.b").unwrap(), [seq + 1]);
    let by_destination = EventFilter {
        destination: Some("s.b".into()),
        status: Some(schema::Status::Dead),
        ..EventFilter::default()
    };
    let (listed, _) = store.list(&by_destination, None, 10).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].seq, listed[0].state.source.as_str()),
        (seq, "s.b")
    );
    let (all, _) = store.list(&EventFilter::default(), None, 10).unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [next, seq],
        "one row per event, not per delivery"
    );

    // A replay of one delivery leaves the others as they are.
    store
        .change(seq + 1, Change::Replay, received)
        .await
        .unwrap()
        .unwrap();
    let e = store.get(seq).unwrap().unwrap();
    let statuses: Vec<schema::Status> = e.deliveries.iter().map(|d| d.state.status).collect();
    use schema::Status::{Delivered, Ignored, Pending};
    assert_eq!(statuses, [Delivered, Pending, Pending]);
    assert_eq!(e.deliveries[1].state.replays, 1);
    assert_eq!(e.deliveries[0].state.replays, 0);

    // Ignore the other two: the event goes when the last expiry comes.
    for key in [seq + 1, seq + 2] {
        store
            .change(key, Change::Ignore { note: "n".into() }, received + DAY)
            .await
            .unwrap()
            .unwrap();
    }
    let e = store.get(seq).unwrap().unwrap();
    let statuses: Vec<schema::Status> = e.deliveries.iter().map(|d| d.state.status).collect();
    assert_eq!(statuses, [Delivered, Ignored, Ignored]);
    let week = store.sweep(received + 7 * DAY, 100).await.unwrap();
    assert_eq!(week.delivered + week.dead_or_ignored, 0, "the ignored wait");
    assert!(store.get(seq).unwrap().is_some());
    let month = store.sweep(received + 31 * DAY, 100).await.unwrap();
    assert_eq!((month.delivered, month.dead_or_ignored), (1, 2));
    assert!(store.get(seq).unwrap().is_none());
    for key in [seq, seq + 1, seq + 2] {
        assert!(store.delivery(key).unwrap().is_none());
        assert!(store.attempts(key).unwrap().is_empty());
    }
    assert!(store.get(next).unwrap().is_some(), "pending: never swept");
    let db = store.db().unwrap();
    index::check(&db.begin_read().unwrap()).unwrap();
    close(store, writer).await;
}

/// A filtered event moves to the destination an operator replays it to;
/// an erasure ignores what every destination still had to deliver.
#[tokio::test]
async fn a_filtered_event_replays_to_a_named_destination_and_erasure_ignores_every_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let filtered = new_seq(&store, "s", "f", Initial::Filtered).await;
    let now = store.get(filtered).unwrap().unwrap().record.received_at_ms;
    let moved = Change::ReplayTo {
        destination: "s.b".into(),
    };
    store
        .change(filtered, moved.clone(), now)
        .await
        .unwrap()
        .unwrap();
    let e = store.get(filtered).unwrap().unwrap();
    assert_eq!(
        (e.state.source.as_str(), e.state.status),
        ("s.b", schema::Status::Pending)
    );
    let (due, _) = store.due("s.b", u64::MAX, 10, |_| false).unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(store.stats().unwrap()["s"].routes["s.b"].counts.pending, 1);
    // Delivered to s.b, it is not moved again.
    deliver(&store, filtered, now).await;
    let again = Change::ReplayTo {
        destination: "s.c".into(),
    };
    assert!(store.change(filtered, again, now).await.unwrap().is_err());

    let seq = new_seq(&store, "s", "gdpr", routes(&["s", "s.b"])).await;
    deliver(&store, seq, now).await;
    store
        .change(
            seq + 1,
            Change::Erase {
                note: "privacy".into(),
            },
            now,
        )
        .await
        .unwrap()
        .unwrap();
    let e = store.get(seq).unwrap().unwrap();
    assert!(e.erased.is_some());
    assert!(e.record.body.is_empty());
    let statuses: Vec<schema::Status> = e.deliveries.iter().map(|d| d.state.status).collect();
    assert_eq!(
        statuses,
        [schema::Status::Delivered, schema::Status::Ignored]
    );
    let db = store.db().unwrap();
    index::check(&db.begin_read().unwrap()).unwrap();
    close(store, writer).await;
}

/// A dedupe key past its TTL stays live while any destination still has
/// the event to deliver.
#[tokio::test]
async fn a_dedupe_key_stays_live_until_every_destination_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let seq = new_seq(&store, "s", "k", routes(&["s", "s.b"])).await;
    let received = store.get(seq).unwrap().unwrap().record.received_at_ms;
    let later = received + 2 * 3600 * 1000;
    deliver(&store, seq, later).await;
    let swept = store.sweep(later, 100).await.unwrap();
    assert_eq!(swept.dedupe_keys, 0, "s.b is still pending");
    assert_eq!(
        store
            .ingest(event("s", "k"), Initial::Deliver)
            .await
            .unwrap(),
        Ingested::Duplicate {
            id: store.public_id(seq)
        }
    );
    deliver(&store, seq + 1, later).await;
    let swept = store.sweep(later + 1, 100).await.unwrap();
    assert_eq!(swept.dedupe_keys, 1, "both done: the key expires");
    close(store, writer).await;
}

#[tokio::test]
async fn expired_dedupe_keys_go_in_bounded_steps_and_their_ids_are_new_again() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let now = crate::clock::unix_ms(SystemTime::now());
    let mut seqs = Vec::new();
    for i in 0..5 {
        let seq = new_seq(&store, "s", &format!("k{i}"), Initial::Deliver).await;
        deliver(&store, seq, now).await;
        seqs.push(seq);
    }
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
    // The delivered events stay (a week's payload TTL); a repeat of a swept
    // id is a new event.
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

/// A provider retrying an event hookinbox still has to deliver (or holds)
/// must meet a duplicate however long it retries: a second pending record
/// of one payment event would be delivered twice.
#[tokio::test]
async fn the_dedupe_key_of_a_pending_or_held_event_outlives_its_ttl_until_the_event_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let now = crate::clock::unix_ms(SystemTime::now());
    let later = now + 3_600_000 + 60_000;
    let pending = new_seq(&store, "s", "pending", Initial::Deliver).await;
    new_seq(&store, "s", "held", Initial::Hold).await;
    let done = new_seq(&store, "s", "done", Initial::Deliver).await;
    deliver(&store, done, now).await;

    let swept = store.sweep(later, 10).await.unwrap();
    assert_eq!(swept.dedupe_keys, 1, "only the delivered event's key");
    let is_duplicate = |store: &Store, id: &str| {
        let store = store.clone();
        let id = id.to_owned();
        async move {
            matches!(
                store.ingest(event("s", &id), Initial::Hold).await.unwrap(),
                Ingested::Duplicate { .. }
            )
        }
    };
    assert!(is_duplicate(&store, "pending").await);
    assert!(is_duplicate(&store, "held").await);
    assert!(!is_duplicate(&store, "done").await, "expired: a new event");

    // Kept across a restart.
    close(store, writer).await;
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    assert!(is_duplicate(&store, "pending").await);
    assert!(is_duplicate(&store, "held").await);

    // Once delivered, the pending one's key expires at the next sweep.
    deliver(&store, pending, later).await;
    assert!(
        is_duplicate(&store, "pending").await,
        "not before the sweep"
    );
    let swept = store.sweep(later + 1, 10).await.unwrap();
    assert_eq!(swept.dedupe_keys, 1);
    assert!(!is_duplicate(&store, "pending").await);
    // The held one never finishes: its key stays, sweep after sweep.
    for step in 1..4 {
        store.sweep(later + step * 30 * DAY, 10).await.unwrap();
        assert!(is_duplicate(&store, "held").await);
    }
    close(store, writer).await;
}

/// Everything a reader sees of the store, as text, to compare two stores.
fn dump(store: &Store) -> String {
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
fn crash_image(live: &Path, image: &Path, log: bool) {
    std::fs::create_dir_all(image).unwrap();
    std::fs::copy(live.join(DB_FILE), image.join(DB_FILE)).unwrap();
    if log {
        std::fs::copy(live.join(wal::WAL_FILE), image.join(wal::WAL_FILE)).unwrap();
    }
}

/// Every kind of job the writer logs, on a store that never checkpoints:
/// ingests of each initial state, a duplicate, a delivery, a dead letter, a
/// retry, an attempt left in flight, a replay, an ignore, an erasure, a
/// pause and a sweep. Returns the seqs of events `e0`..`e29`.
async fn every_kind_of_job(store: &Store) -> Vec<u64> {
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

/// Rewrites each frame of the log at `path` (consecutive from offset 0, up
/// to the first that does not check) with `payload` applied to its payload,
/// length and CRC made to match: what another build would have written.
fn rewrite_frames(path: &Path, payload: impl Fn(u64, &[u8]) -> Vec<u8>) -> usize {
    let old = std::fs::read(path).unwrap();
    let mut new = Vec::new();
    let mut at = 0;
    let mut frames = 0;
    while let Some(header) = old.get(at..at + 20) {
        let len = u32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(header[4..8].try_into().unwrap());
        let Some(checked) = old.get(at + 8..at + 20 + len) else {
            break;
        };
        if len == 0 || crc32fast::hash(checked) != crc {
            break;
        }
        let lsn = u64::from_le_bytes(header[8..16].try_into().unwrap());
        let body = payload(lsn, &old[at + 20..at + 20 + len]);
        let mut frame = header.to_vec();
        frame[0..4].copy_from_slice(&(body.len() as u32).to_le_bytes());
        frame.extend_from_slice(&body);
        let crc = crc32fast::hash(&frame[8..]);
        frame[4..8].copy_from_slice(&crc.to_le_bytes());
        new.extend_from_slice(&frame);
        at += 20 + len;
        frames += 1;
    }
    std::fs::write(path, new).unwrap();
    frames
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

    let frames = rewrite_frames(&old.join(wal::WAL_FILE), |_, payload| {
        assert_eq!(payload[0], format::log::FORMAT_BYTE);
        payload[1..].to_vec()
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
        text.contains("frame 3 of the write-ahead log is in format 2")
            && text.contains("upgrade hookinbox"),
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

    let decode = super::format::row::decode_state(&[]).unwrap_err();
    assert!(!write(WriteError::Corrupt(decode)).is_transient());
    let decode = super::format::row::decode_state(&[1, 0xff]).unwrap_err();
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

    let decode = super::format::row::decode_state(&[1, 0xff]).unwrap_err();
    let text = StoreError::Corrupt(decode).report().to_string();
    assert!(
        text.starts_with("the database holds a record this build cannot read: corrupt record: "),
        "{text}"
    );
}

/// Pages of every filter combination, walked with a small page, return
/// exactly the matching events, newest first, each once.
#[tokio::test]
async fn every_filter_combination_pages_through_exactly_the_matching_events() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let mut received = Vec::new();
    for n in 0..240u64 {
        let source = format!("s{}", n % 2);
        let event = event_of_type(&source, &format!("e{n}"), &format!("t{}", n % 3));
        received.push(event.received_at_ms());
        let initial = if n % 5 == 0 {
            Initial::Hold
        } else {
            Initial::Deliver
        };
        let Ingested::New { id } = store.ingest(event, initial).await.unwrap() else {
            panic!("e{n} was a duplicate")
        };
        let seq = store.parse_public_id(&id).unwrap();
        let held = n % 5 == 0;
        match n % 7 {
            1 | 2 if !held => deliver(&store, seq, n).await,
            3 if !held => kill(&store, seq, n).await,
            4 => {
                let note = "test".to_owned();
                let _ = store.change(seq, Change::Ignore { note }, n).await.unwrap();
            }
            _ => {}
        }
    }
    let all = store.scan(0, usize::MAX).unwrap();
    let middle = received[120];
    let sources = [None, Some("s0"), Some("s1"), Some("nope")];
    let types = [None, Some("t0"), Some("t2"), Some("t9")];
    let times = [
        (None, None),
        (Some(middle), None),
        (None, Some(middle)),
        (Some(received[40]), Some(middle)),
    ];
    let mut statuses = vec![None];
    statuses.extend(schema::Status::ALL.map(Some));
    let mut checked = 0;
    for source in sources {
        for status in &statuses {
            for event_type in types {
                for (from_ms, to_ms) in times {
                    let filter = EventFilter {
                        source: source.map(str::to_owned),
                        destination: None,
                        status: *status,
                        event_type: event_type.map(str::to_owned),
                        event_id: None,
                        from_ms,
                        to_ms,
                    };
                    let mut want: Vec<u64> = all
                        .iter()
                        .filter(|e| filter.matches(&e.record, &e.state))
                        .map(|e| e.seq)
                        .collect();
                    want.reverse();
                    let mut got = Vec::new();
                    let mut cursor = None;
                    loop {
                        let (page, next) = store.list(&filter, cursor, 7).unwrap();
                        assert!(page.len() <= 7);
                        got.extend(page.iter().map(|e| e.seq));
                        match next {
                            Some(next) => cursor = Some(next),
                            None => break,
                        }
                    }
                    assert_eq!(got, want, "{filter:?}");
                    checked += want.len();
                }
            }
        }
    }
    assert!(
        checked > 1_000,
        "the combinations matched too little: {checked}"
    );
    // By provider event id: with and without the source, and not found.
    for (source, event_id, found) in [
        (Some("s1"), "e7", true),
        (None, "e8", true),
        (Some("s1"), "e8", false),
        (None, "e999", false),
    ] {
        let filter = EventFilter {
            source: source.map(str::to_owned),
            event_id: Some(event_id.to_owned()),
            ..EventFilter::default()
        };
        let (page, next) = store.list(&filter, None, 10).unwrap();
        assert_eq!(next, None);
        assert_eq!(page.len(), usize::from(found), "{filter:?}");
        assert!(page.iter().all(|e| e.record.event_id == event_id));
    }
    close(store, writer).await;
}

/// Search finds exactly the payload matches within the filter, newest
/// first; a small budget stops early with a cursor and how far back it got,
/// and following the cursors finds the rest.
#[tokio::test]
async fn search_matches_payloads_within_a_budget_and_resumes_from_its_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    for n in 0..60u64 {
        let source = format!("s{}", n % 2);
        let event = event_of_type(&source, &format!("e{n}"), &format!("t{}", n % 3));
        store.ingest(event, Initial::Hold).await.unwrap();
    }
    let all = store.scan(0, usize::MAX).unwrap();
    let cases = [
        (
            EventFilter::default(),
            PayloadMatch {
                text: Some("\"e1".into()),
                pointer: None,
            },
        ),
        (
            EventFilter {
                source: Some("s1".into()),
                ..EventFilter::default()
            },
            PayloadMatch {
                text: Some("\"e1".into()),
                pointer: None,
            },
        ),
        (
            EventFilter::default(),
            PayloadMatch {
                text: None,
                pointer: Some(("/n".into(), "e42".into())),
            },
        ),
        (
            EventFilter {
                event_type: Some("t0".into()),
                ..EventFilter::default()
            },
            PayloadMatch {
                text: Some("e".into()),
                pointer: Some(("/type".into(), "t0".into())),
            },
        ),
        (
            EventFilter::default(),
            PayloadMatch {
                text: None,
                pointer: Some(("/n".into(), "e".into())),
            },
        ),
    ];
    // Written out, so that the matching itself is pinned, not only the walk.
    let expected = [11, 6, 1, 20, 0];
    for ((filter, payload), count) in cases.into_iter().zip(expected) {
        let mut want: Vec<u64> = all
            .iter()
            .filter(|e| filter.matches(&e.record, &e.state))
            .filter(|e| payload.matcher().matches(&e.record.body))
            .map(|e| e.seq)
            .collect();
        want.reverse();
        assert_eq!(want.len(), count, "{filter:?} {payload:?}");
        // Everything in one call.
        let budget = Budget {
            events: 1_000,
            time: Duration::from_secs(60),
        };
        let page = store.search(&filter, &payload, None, 100, budget).unwrap();
        assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            want,
            "{payload:?}"
        );
        assert_eq!(page.cursor, None);
        // Seven payloads per call: resumed until done, nothing skipped or repeated.
        let budget = Budget {
            events: 7,
            time: Duration::from_secs(60),
        };
        let (mut got, mut cursor, mut calls) = (Vec::new(), None, 0);
        loop {
            let page = store
                .search(&filter, &payload, cursor, 100, budget)
                .unwrap();
            assert!(page.examined <= 7);
            if let (Some(back), Some(last)) = (page.scanned_back_to_ms, page.events.last()) {
                assert!(back <= last.record.received_at_ms);
            }
            got.extend(page.events.iter().map(|e| e.seq));
            calls += 1;
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(got, want, "{payload:?} in {calls} calls");
        assert!(calls > 1);
    }
    close(store, writer).await;
}

/// Erasing deletes the payload and headers for good and keeps the rest:
/// ids, times, the note, and the dedupe key (a resend is a duplicate). What
/// was still to be delivered is ignored with the note; a sweep takes the
/// tombstone with the event.
#[tokio::test]
async fn an_erased_event_keeps_its_ids_note_and_dedupe_key_but_not_its_payload() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        dlq_ttl: Duration::from_millis(DAY),
        ..options(dir.path())
    };
    let (store, writer) = Store::open(options).unwrap();
    let pending = new_seq(&store, "s", "gdpr", Initial::Deliver).await;
    let delivered = new_seq(&store, "s", "done", Initial::Deliver).await;
    deliver(&store, delivered, 1).await;
    let now = crate::clock::unix_ms(SystemTime::now());
    for seq in [pending, delivered] {
        let note = "customer asked".to_owned();
        store
            .change(seq, Change::Erase { note }, now)
            .await
            .unwrap()
            .unwrap();
        let e = store.get(seq).unwrap().unwrap();
        assert!(
            e.record.body.is_empty() && e.record.headers.is_empty(),
            "{e:?}"
        );
        assert_eq!(
            e.record.event_id,
            if seq == pending { "gdpr" } else { "done" }
        );
        assert_eq!(e.erased.as_ref().unwrap().text, "customer asked");
    }
    let e = store.get(pending).unwrap().unwrap();
    assert_eq!(e.state.status, schema::Status::Ignored);
    assert_eq!(e.state.note.unwrap().text, "customer asked");
    assert_eq!(
        store.get(delivered).unwrap().unwrap().state.status,
        schema::Status::Delivered
    );
    let again = store
        .change(pending, Change::Erase { note: "x".into() }, now)
        .await
        .unwrap();
    assert!(matches!(again, Err(ChangeError::Conflict(_))), "{again:?}");
    // The provider sends it again: still a duplicate of the erased event.
    let resend = store
        .ingest(event("s", "gdpr"), Initial::Deliver)
        .await
        .unwrap();
    assert!(matches!(resend, Ingested::Duplicate { .. }), "{resend:?}");
    {
        let db = store.db().unwrap();
        index::check(&db.begin_read().unwrap()).unwrap();
    }
    // Swept when its time comes, tombstone and all.
    while store.sweep(now + 40 * DAY, 100).await.unwrap().more {}
    assert!(store.get(pending).unwrap().is_none());
    let db = store.db().unwrap();
    let txn = db.begin_read().unwrap();
    assert_eq!(txn.open_table(schema::ERASED).unwrap().len().unwrap(), 0);
    drop((txn, db));
    close(store, writer).await;
}

/// A closed store in `dir` holding `events` events of source "s", every
/// `every`-th dead; returns its stats (as text, to compare after a reopen).
async fn closed_store_with_dead(dir: &Path, events: u64, every: u64) -> String {
    let (store, writer) = Store::open(options(dir)).unwrap();
    for n in 0..events {
        let seq = new_seq(&store, "s", &format!("e{n}"), Initial::Deliver).await;
        if n % every == 0 {
            kill(&store, seq, n).await;
        }
    }
    let stats = format!("{:?}", store.stats().unwrap());
    close(store, writer).await;
    stats
}

/// Reopens `dir` (migrating it) and checks what any migration must leave:
/// the current schema version, indexes that agree with `state`, the same
/// stats as `before` and `dead` dead events listed. Returns the table names.
async fn reopen_migrated(dir: &Path, before: &str, dead: usize) -> Vec<String> {
    let (store, writer) = Store::open(options(dir)).unwrap();
    let names = {
        let db = store.db().unwrap();
        let txn = db.begin_read().unwrap();
        index::check(&txn).unwrap();
        let meta = txn.open_table(META).unwrap();
        assert_eq!(
            meta.get(META_SCHEMA).unwrap().unwrap().value(),
            [SCHEMA_VERSION]
        );
        txn.list_tables()
            .unwrap()
            .map(|t| redb::TableHandle::name(&t).to_owned())
            .collect()
    };
    assert_eq!(before, format!("{:?}", store.stats().unwrap()));
    let filter = EventFilter {
        status: Some(schema::Status::Dead),
        ..EventFilter::default()
    };
    assert_eq!(store.list(&filter, None, 100).unwrap().0.len(), dead);
    close(store, writer).await;
    names
}

/// A schema 3 database (no indexes) is migrated at open: indexes and counts
/// built from `state`, lists and stats answer from them.
#[tokio::test]
async fn a_schema_3_database_gets_its_indexes_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let before = closed_store_with_dead(dir.path(), 30, 3).await;
    // Make it what a schema 3 build left: no index tables, version 3.
    {
        let db = redb::Database::create(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        for name in ["by_type", "pending_since", "counts", "minutes"] {
            assert!(
                txn.delete_table(redb::TableDefinition::<(), ()>::new(name))
                    .unwrap()
                    || name == "minutes"
            );
        }
        txn.open_table(META)
            .unwrap()
            .insert(META_SCHEMA, [3u8].as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    reopen_migrated(dir.path(), &before, 10).await;
}

/// A schema 4 database (which also kept `by_status` and `by_source`) is at
/// schema 5 after open: those two tables gone, the rest kept as they were.
#[tokio::test]
async fn a_schema_4_database_drops_the_indexes_schema_5_does_not_keep() {
    let dir = tempfile::tempdir().unwrap();
    let before = closed_store_with_dead(dir.path(), 12, 4).await;
    // Make it what a schema 4 build left: the two extra indexes, version 4.
    {
        let db = redb::Database::create(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(redb::TableDefinition::<(u8, u64), ()>::new("by_status"))
            .unwrap()
            .insert((4, 1), ())
            .unwrap();
        txn.open_table(redb::TableDefinition::<(&str, u8, u64), ()>::new(
            "by_source",
        ))
        .unwrap()
        .insert(("s", 4, 1), ())
        .unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(META_SCHEMA, [4u8].as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let names = reopen_migrated(dir.path(), &before, 3).await;
    for gone in schema::DROPPED_IN_5 {
        assert!(!names.iter().any(|n| n == gone), "{gone} in {names:?}");
    }
}

/// Index invariants after random transitions: every index agrees with
/// `state` and every count with a recount (`index::check`), after each step.
mod props {
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, Clone)]
    enum Op {
        Ingest {
            source: u8,
            id: u8,
            event_type: u8,
            hold: bool,
            key: Option<u8>,
            /// Destinations it goes to: 0 is schema 5's one (`Deliver`,
            /// `Ordered`), 1–3 a block of that many routes.
            fan: u8,
        },
        Deliver(usize),
        Retry(usize),
        Kill(usize, bool),
        Replay(usize),
        Ignore(usize),
        Erase(usize),
        /// Claim without an outcome, then reopen: an interrupted attempt.
        Interrupt(usize),
        Sweep(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..2u8, 0..10u8, 0..3u8, any::<bool>(), proptest::option::of(0..2u8), 0..4u8).prop_map(
                |(source, id, event_type, hold, key, fan)| Op::Ingest { source, id, event_type, hold, key, fan }
            ),
            2 => any::<usize>().prop_map(Op::Deliver),
            2 => any::<usize>().prop_map(Op::Retry),
            1 => (any::<usize>(), any::<bool>()).prop_map(|(i, r)| Op::Kill(i, r)),
            1 => any::<usize>().prop_map(Op::Replay),
            1 => any::<usize>().prop_map(Op::Ignore),
            1 => any::<usize>().prop_map(Op::Erase),
            1 => any::<usize>().prop_map(Op::Interrupt),
            1 => (0..40u64).prop_map(Op::Sweep),
        ]
    }

    fn check(store: &Store) -> Result<(), String> {
        let db = store.db().map_err(|e| e.to_string())?;
        let txn = db.begin_read().map_err(|e| e.to_string())?;
        index::check(&txn)?;
        blocks_are_whole(&txn)?;
        lists_agree_with_a_recount(store)
    }

    /// Every delivery belongs to a stored event, and every event has one.
    fn blocks_are_whole(txn: &redb::ReadTransaction) -> Result<(), String> {
        let events = txn.open_table(EVENTS).map_err(|e| e.to_string())?;
        let states = txn.open_table(STATE).map_err(|e| e.to_string())?;
        let mut in_blocks = 0;
        for row in events.iter().map_err(|e| e.to_string())? {
            let seq = row.map_err(|e| e.to_string())?.0.value();
            let block: Vec<Delivery> =
                super::super::block::block::<StoreError>(&events, &states, seq)
                    .map_err(|e| e.to_string())?;
            if block.is_empty() || block[0].key != seq {
                return Err(format!("event {seq} has deliveries {block:?}"));
            }
            in_blocks += block.len() as u64;
        }
        let all = states.len().map_err(|e| e.to_string())?;
        if in_blocks != all {
            return Err(format!("{all} state rows, {in_blocks} in events' blocks"));
        }
        Ok(())
    }

    /// Every list, walked by cursor three at a time, returns what filtering
    /// a full scan returns, newest first: the merged index ranges, the
    /// cursor and the row walk over holes left by sweeps.
    fn lists_agree_with_a_recount(store: &Store) -> Result<(), String> {
        let all = store.scan(0, usize::MAX).map_err(|e| e.to_string())?;
        let sources = [None, Some("s0"), Some("s1")];
        let destinations = [None, Some("s0"), Some("s1.b")];
        let types = [None, Some("t0"), Some("t2")];
        let statuses = [
            None,
            Some(schema::Status::Pending),
            Some(schema::Status::Dead),
            Some(schema::Status::Delivered),
        ];
        for (source, destination) in sources
            .into_iter()
            .flat_map(|s| destinations.map(|d| (s, d)))
        {
            for event_type in types {
                for status in statuses {
                    let filter = EventFilter {
                        source: source.map(str::to_owned),
                        destination: destination.map(str::to_owned),
                        event_type: event_type.map(str::to_owned),
                        status,
                        ..EventFilter::default()
                    };
                    let want: Vec<(u64, String)> = all
                        .iter()
                        .rev()
                        .filter(|e| {
                            e.deliveries
                                .iter()
                                .any(|d| filter.matches(&e.record, &d.state))
                        })
                        .map(|e| (e.seq, e.record.event_id.clone()))
                        .collect();
                    let mut got = Vec::new();
                    let mut cursor = None;
                    loop {
                        let (page, next) =
                            store.list(&filter, cursor, 3).map_err(|e| e.to_string())?;
                        got.extend(page.iter().map(|e| (e.seq, e.record.event_id.clone())));
                        match next {
                            Some(next) => cursor = Some(next),
                            None => break,
                        }
                    }
                    if got != want {
                        return Err(format!("{filter:?}: listed {got:?}, stored {want:?}"));
                    }
                }
            }
        }
        Ok(())
    }

    async fn run(ops: Vec<Op>) -> Result<(), String> {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            Store::open(StoreOptions {
                payload_ttl: Duration::from_millis(7 * DAY),
                dlq_ttl: Duration::from_millis(30 * DAY),
                ..options(dir.path())
            })
            .unwrap()
        };
        let (mut store, mut writer) = open();
        let mut seqs: Vec<u64> = Vec::new();
        let mut now = crate::clock::unix_ms(SystemTime::now());
        let pick = |seqs: &[u64], i: usize| (!seqs.is_empty()).then(|| seqs[i % seqs.len()]);
        for (step, op) in ops.into_iter().enumerate() {
            match op.clone() {
                Op::Ingest {
                    source,
                    id,
                    event_type,
                    hold,
                    key,
                    fan,
                } => {
                    let source = format!("s{source}");
                    let initial = match (hold, key, fan) {
                        (true, _, _) => Initial::Hold,
                        (false, Some(k), 0) => Initial::Ordered(format!("k{k}")),
                        (false, None, 0) => Initial::Deliver,
                        (false, key, fan) => Initial::Routes(
                            [source.clone(), format!("{source}.b"), format!("{source}.c")]
                                [..fan as usize]
                                .iter()
                                .map(|route| Route {
                                    destination: route.clone(),
                                    ordering_key: key.map(|k| format!("k{k}")),
                                })
                                .collect(),
                        ),
                    };
                    let event =
                        event_of_type(&source, &format!("e{id}"), &format!("t{event_type}"));
                    if let Ingested::New { id } = store.ingest(event, initial).await.unwrap() {
                        let seq = store.parse_public_id(&id).unwrap();
                        let stored = store.get(seq).unwrap().unwrap();
                        seqs.extend(stored.deliveries.iter().map(|d| d.key));
                    }
                }
                Op::Deliver(i) | Op::Retry(i) | Op::Kill(i, _) => {
                    let Some(seq) = pick(&seqs, i) else { continue };
                    if store.claim(seq, now).await.unwrap().is_none() {
                        continue;
                    }
                    let (class, status, next) = match op {
                        Op::Deliver(_) => (
                            schema::AttemptClass::Delivered,
                            200,
                            Next::Delivered { at_ms: now },
                        ),
                        Op::Retry(_) => (
                            schema::AttemptClass::RetryableStatus,
                            503,
                            Next::RetryAt {
                                due_ms: now + 1_000,
                            },
                        ),
                        _ => (
                            schema::AttemptClass::RejectedStatus,
                            400,
                            Next::Dead {
                                reason: "400".into(),
                                at_ms: now,
                                release_key: matches!(op, Op::Kill(_, true)),
                            },
                        ),
                    };
                    store
                        .finish(Finish {
                            seq,
                            attempt: attempt(class, Some(status)),
                            next,
                        })
                        .await
                        .unwrap();
                }
                Op::Replay(i) | Op::Ignore(i) | Op::Erase(i) => {
                    let Some(seq) = pick(&seqs, i) else { continue };
                    let change = match op {
                        Op::Replay(_) => Change::Replay,
                        Op::Ignore(_) => Change::Ignore {
                            note: "not ours".into(),
                        },
                        _ => Change::Erase {
                            note: "privacy request".into(),
                        },
                    };
                    // A refusal (already pending, delivered…) changes nothing.
                    let _ = store.change(seq, change, now).await.unwrap();
                }
                Op::Interrupt(i) => {
                    let Some(seq) = pick(&seqs, i) else { continue };
                    let _ = store.claim(seq, now).await.unwrap();
                    close(store, writer).await;
                    (store, writer) = open();
                }
                Op::Sweep(days) => {
                    now += days * DAY;
                    while store.sweep(now, 50).await.unwrap().more {}
                }
            }
            check(&store).map_err(|e| format!("after step {step} ({op:?}): {e}"))?;
        }
        close(store, writer).await;
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn indexes_counts_and_lists_follow_state_through_any_transitions(
            ops in proptest::collection::vec(op(), 1..40)
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            if let Err(e) = runtime.block_on(run(ops)) {
                return Err(TestCaseError::fail(e));
            }
        }
    }
}
