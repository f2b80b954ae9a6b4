//! Ingest: new or duplicate, once per batch, across a reopen; ids are this
//! database's; a closed store refuses.

use super::super::*;
use super::support::*;

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
