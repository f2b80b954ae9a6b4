//! Migration of an older schema's file to this build's, at open, before the
//! writer starts; a long one goes in durable steps that resume after a kill.

use redb::{Database, ReadableTable};

use super::error::WriteError;
use super::format::row;
use super::schema::{self, META, META_SCHEMA, SCHEMA_VERSION};
use super::tables;
use super::tables::keys::{META_KEY_SEQ, META_KEY_TOKEN};
use super::types::keys::KeyWrite;

/// The `meta` row that says how far the index build of a migration from
/// schema 3 got: a kill during it resumes there.
const META_INDEXED_UP_TO: &str = "migration_indexed_up_to";

/// Events indexed per transaction while migrating: each step is durable,
/// and a step's dirty pages stay small in memory.
const MIGRATION_STEP: usize = 50_000;

/// Brings a database of schema `from` (≥ [`MIGRATES_FROM`](schema::MIGRATES_FROM)) to
/// [`SCHEMA_VERSION`], before the writer starts. From 3: builds the indexes
/// and counts from `state`, in durable steps. From 4: drops the two indexes
/// schema 5 no longer kept, in one transaction. From 5: marks the file
/// (an event of schema 5 is a block of one delivery: no row changes).
/// From 6: moves the idempotency keys into the key log.
pub(super) fn migrate(db: &Database, from: u8) -> Result<(), WriteError> {
    if from >= 4 {
        return mark_current(db, from);
    }
    index_in_steps(db, from)
}

/// From 4, 5 or 6, in one transaction.
fn mark_current(db: &Database, from: u8) -> Result<(), WriteError> {
    // 4: drop the indexes `by_type` answers. 5: a schema-5 event is a
    // block of one delivery, so no row changes. 6: move the keys. All:
    // mark the file.
    let started = std::time::Instant::now();
    let mut txn = db.begin_write()?;
    txn.set_quick_repair(true);
    if from == 4 {
        for name in schema::DROPPED_IN_5 {
            txn.delete_table(redb::TableDefinition::<(), ()>::new(name))?;
        }
    }
    let keys = move_keys(&txn)?;
    txn.open_table(META)?
        .insert(META_SCHEMA, [SCHEMA_VERSION].as_slice())?;
    txn.commit()?;
    tracing::info!(
        from,
        to = SCHEMA_VERSION,
        keys,
        seconds = started.elapsed().as_secs_f64(),
        "migrated the database"
    );
    Ok(())
}

/// Schema 6's idempotency keys (a build of 26 Nov 2026 kept them under
/// (namespace, key)), each written into the key log under the next seq
/// after every token that build handed out, so a claim of this build still
/// gets a larger token. Returns how many. Schema 6's token counter stays:
/// a format-2 log replayed after this draws from it.
fn move_keys(txn: &redb::WriteTransaction) -> Result<usize, WriteError> {
    let mut moved = Vec::new();
    {
        // Opening creates it on a file that never had keys: deleted below.
        let old = txn.open_table(schema::KEYS_6)?;
        for row in old.iter()? {
            let (at, value) = row?;
            let (namespace, key) = at.value();
            moved.push((
                namespace.to_owned(),
                key.to_owned(),
                row::decode_key_v2(value.value())?,
            ));
        }
    }
    txn.delete_table(schema::KEYS_6)?;
    txn.delete_table(schema::KEY_EXPIRY_6)?;
    let mut t = tables::Tables::open(txn)?;
    let after = t.meta_u64(META_KEY_TOKEN)?.max(t.meta_u64(META_KEY_SEQ)?);
    let count = moved.len();
    for (seq, (namespace, key, record)) in (after + 1..).zip(moved) {
        t.write_key(&KeyWrite::Put {
            namespace,
            key,
            seq,
            replaces: None,
            record,
        })?;
    }
    Ok(count)
}

/// From 3: the indexes and counts built from `state`, [`MIGRATION_STEP`]
/// events a durable transaction, resuming where [`META_INDEXED_UP_TO`] says.
fn index_in_steps(db: &Database, from: u8) -> Result<(), WriteError> {
    let started = std::time::Instant::now();
    tracing::info!(
        from,
        to = SCHEMA_VERSION,
        "migrating the database: building its indexes"
    );
    let mut done = 0usize;
    loop {
        let mut txn = db.begin_write()?;
        txn.set_quick_repair(true);
        let finished = {
            let mut t = tables::Tables::open(&txn)?;
            let at = match t.meta.get(META_INDEXED_UP_TO)? {
                Some(v) => u64::from_be_bytes(v.value().try_into().map_err(|_| {
                    WriteError::Corrupt(row::DecodeError::Codec(
                        "migration progress is not 8 bytes".into(),
                    ))
                })?),
                None => 0,
            };
            let next = t.index_existing(at, MIGRATION_STEP)?;
            t.index.flush()?;
            match next {
                Some(next) => {
                    t.meta
                        .insert(META_INDEXED_UP_TO, next.to_be_bytes().as_slice())?;
                    done += MIGRATION_STEP;
                    false
                }
                None => {
                    t.meta.remove(META_INDEXED_UP_TO)?;
                    t.meta.insert(META_SCHEMA, [SCHEMA_VERSION].as_slice())?;
                    true
                }
            }
        };
        txn.commit()?;
        if finished {
            break;
        }
        tracing::info!(events = done, "migrating: indexed so far");
    }
    tracing::info!(
        seconds = started.elapsed().as_secs_f64(),
        "migration done: the database is at schema {SCHEMA_VERSION}"
    );
    Ok(())
}
