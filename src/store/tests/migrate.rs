//! Migrations at open: from schema 3 (indexes built) and schema 4 (the
//! indexes schema 5 does not keep dropped).

use std::path::Path;

use redb::ReadableDatabase;

use super::super::schema::{META, META_SCHEMA, SCHEMA_VERSION};
use super::super::*;
use super::support::*;

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

/// A schema 7 database (each record in its `events` row, no `pack`) is
/// read as it is after open, and new events go into the pack beside it.
#[tokio::test]
async fn a_schema_7_database_keeps_its_records_where_they_are_and_packs_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let before = closed_store_with_dead(dir.path(), 12, 4).await;
    // Make it what a schema 7 build left: records in the rows, version 7.
    {
        let db = redb::Database::create(dir.path().join(DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let pack = txn.open_table(schema::PACK).unwrap();
            let mut events = txn.open_table(schema::EVENTS).unwrap();
            let mut rows = Vec::new();
            for row in redb::ReadableTable::iter(&events).unwrap() {
                let (seq, raw) = row.unwrap();
                let mut buf = Vec::new();
                let record =
                    super::super::pack::record::<StoreError>(&pack, raw.value(), &mut buf).unwrap();
                assert_ne!(record, raw.value(), "a packed row");
                rows.push((seq.value(), record.to_vec()));
            }
            for (seq, record) in rows {
                events.insert(seq, record.as_slice()).unwrap();
            }
        }
        assert!(txn.delete_table(schema::PACK).unwrap());
        txn.open_table(META)
            .unwrap()
            .insert(META_SCHEMA, [7u8].as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let names = reopen_migrated(dir.path(), &before, 3).await;
    assert!(names.iter().any(|n| n == "pack"), "{names:?}");
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let old = store.scan(0, 100).unwrap();
    assert_eq!(old.len(), 12);
    assert!(old.iter().all(|e| e.record.body.starts_with(b"{\"type\"")));
    let new = new_seq(&store, "s", "after", Initial::Deliver).await;
    let e = store.get(new).unwrap().unwrap();
    assert_eq!(e.record.event_id, "after");
    close(store, writer).await;
}
