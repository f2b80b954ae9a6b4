//! Sweeps: what expires and what never does (a pending or held event, the
//! dedupe key of one), in bounded steps.

use std::time::{Duration, SystemTime};

use super::super::*;
use super::support::*;

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
