//! Events as they are stored: the watch of the newest event moves only
//! once a batch is answered, and the events after a cursor come oldest
//! first, filtered, from where the last read stopped.

use std::time::Duration;

use super::super::*;
use super::support::*;

#[tokio::test]
async fn a_listener_wakes_when_events_are_stored_and_reads_them_after_its_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let mut stored = store.stored();
    assert_eq!(*stored.borrow_and_update(), 0, "nothing stored yet");

    let a = new_seq(&store, "s", "a", Initial::Hold).await;
    tokio::time::timeout(Duration::from_secs(5), stored.changed())
        .await
        .expect("woken")
        .unwrap();
    assert!(*stored.borrow_and_update() >= a);
    let b = new_seq(&store, "t", "b", Initial::Hold).await;
    let c = new_seq(&store, "s", "c", Initial::Hold).await;
    // A duplicate stores nothing new.
    let again = store.ingest(event("s", "a"), Initial::Hold).await.unwrap();
    assert!(matches!(again, Ingested::Duplicate { .. }));
    assert!(*stored.borrow_and_update() >= c);

    let all = EventFilter::default();
    let (events, cursor) = store.events_after(&all, 0, 10).unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [a, b, c]);
    assert_eq!(cursor, c);
    let (events, cursor) = store.events_after(&all, a, 1).unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [b]);
    assert_eq!(cursor, b, "goes on after the last row read");
    let (events, after_all) = store.events_after(&all, c, 10).unwrap();
    assert!(events.is_empty());
    assert_eq!(after_all, c, "nothing after: the cursor stays");

    let only_s = EventFilter {
        source: Some("s".into()),
        ..Default::default()
    };
    let (events, cursor) = store.events_after(&only_s, a, 10).unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [c]);
    assert_eq!(events[0].id, store.public_id(c));
    assert_eq!(cursor, c);
    close(store, writer).await;

    // Reopened: the watch starts at the newest event stored.
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    assert!(*store.stored().borrow() >= c);
    close(store, writer).await;
}
