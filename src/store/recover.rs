//! Bringing a database file up to what the log says, at open and at every
//! reopen after a failed write: [`open_database`], [`recover`] (the replay
//! of the log's frames the file does not hold, then a checkpoint) and
//! [`last_event`], where the writer's numbering goes on from.

use std::path::Path;

use redb::{Database, Durability, ReadableDatabase, ReadableTable};

use super::entry::Entry;
use super::error::{StoreError, WriteError};
use super::format::log as payload;
use super::pack;
use super::schema::{self, EVENTS, STATE};
use super::tables::{Tables, Ttls};
use super::wal::{META_LSN, Wal, WalError};

pub(super) fn open_database(path: &Path, cache_bytes: usize) -> Result<Database, WriteError> {
    Ok(Database::builder()
        .set_cache_size(cache_bytes)
        .create(path)?)
}

/// The newest stored event's seq and receipt time.
/// The last key in use (an event's last delivery may be past its seq)
/// and the newest event's receipt time.
pub(super) fn last_event(db: &Database) -> Result<Option<(u64, u64)>, StoreError> {
    let txn = db.begin_read()?;
    let events = txn.open_table(EVENTS)?;
    let states = txn.open_table(STATE)?;
    let packed = txn.open_table(schema::PACK)?;
    let last_key = states.last()?.map(|(k, _)| k.value());
    match events.last()? {
        Some((seq, raw)) => {
            let received = pack::decode::<StoreError>(&packed, raw.value())?.received_at_ms;
            Ok(Some((seq.value().max(last_key.unwrap_or(0)), received)))
        }
        None => Ok(None),
    }
}

/// Commits `txn` durably, with the allocator state: reopening after kill -9
/// is then instant instead of a walk of the file.
pub(super) fn commit_checkpoint(mut txn: redb::WriteTransaction) -> Result<(), WriteError> {
    txn.set_durability(Durability::Immediate)?;
    txn.set_quick_repair(true);
    txn.commit()?;
    Ok(())
}

/// What [`recover`] found and did.
pub(super) struct Recovered {
    /// The last frame it holds now.
    pub lsn: u64,
    /// The frames replayed, each number and payload: a primary ships
    /// those the replication stream lacks.
    pub frames: Vec<(u64, Vec<u8>)>,
}

/// Replays into `db` the log's frames it does not hold (each entry applied
/// as the writer applied it, to the same state), then checkpoints: one
/// durable commit, after which the log starts over.
pub(super) fn recover(db: &Database, wal: &mut Wal, ttls: &Ttls) -> Result<Recovered, WriteError> {
    recover_then(db, wal, ttls, |_, _| Ok(()))
}

/// [`recover`], calling `first` with the last frame and the log before
/// the checkpoint that makes the replayed frames durable and starts the log
/// over: if it fails, nothing is committed and the log stays as it was (a
/// primary ships the frames its stream lacks there).
pub(super) fn recover_then(
    db: &Database,
    wal: &mut Wal,
    ttls: &Ttls,
    first: impl FnOnce(u64, &Wal) -> Result<(), WriteError>,
) -> Result<Recovered, WriteError> {
    let held = {
        let txn = db.begin_read()?;
        let meta = txn.open_table(schema::META)?;
        meta.get(META_LSN)?.map_or(0, |v| {
            u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8]))
        })
    };
    let frames = match wal.read_after(held) {
        Ok(found) => found.frames,
        Err(gap @ WalError::Gap { .. }) => {
            let aside = wal.set_aside(held)?;
            tracing::error!(cause = %gap, kept_at = %aside.display(), "the write-ahead log does not continue this database; it was set aside, not replayed");
            Vec::new()
        }
        Err(e) => return Err(e.into()),
    };
    let mut lsn = held;
    let txn = db.begin_write()?;
    {
        let mut t = Tables::open(&txn)?;
        for (n, payload) in &frames {
            for entry in payload::entries(*n, payload).map_err(WalError::from)? {
                replay(&mut t, entry, ttls)?;
            }
            lsn = *n;
        }
        t.meta.insert(META_LSN, lsn.to_le_bytes().as_slice())?;
        t.index.flush()?;
    }
    first(lsn, wal)?;
    commit_checkpoint(txn)?;
    wal.rewind();
    if !frames.is_empty() {
        tracing::info!(
            frames = frames.len(),
            from = held + 1,
            to = lsn,
            "replayed the write-ahead log"
        );
    }
    Ok(Recovered { lsn, frames })
}

/// Applies one logged entry again ([`super::ops::replay`], the index
/// rebuilt apart).
pub(super) fn replay(t: &mut Tables<'_>, entry: Entry<'_>, ttls: &Ttls) -> Result<(), WriteError> {
    super::ops::replay(t, entry, ttls, &mut |_, _, _, _| {})
}
