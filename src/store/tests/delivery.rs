//! Deliveries: claims and interrupted attempts, the due queue, an event's
//! block of deliveries to several destinations, replays to a destination
//! and erasure.

use std::time::{Duration, SystemTime};

use redb::{ReadableDatabase, ReadableTableMetadata};

use super::super::*;
use super::support::*;

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
