//! The database file as a whole: [`Store::backup_to`], a consistent copy
//! from one read snapshot, and [`Store::disk_usage`], the files' sizes and
//! the room left on their filesystem.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::error::{StoreError, WriteError};
use super::handle::Store;
use super::schema::{
    self, ATTEMPTS, DEDUPE, DLQ, EVENTS, EXPIRY, LEASES, META, ORDERED, SCHEDULE, STATE,
};
use super::wal;

impl Store {
    /// Writes a consistent copy of the whole database to `path` (a new redb
    /// file), from one read snapshot: ingest and delivery go on meanwhile.
    /// Blocking: call it from a blocking context. Returns the events copied.
    pub fn backup_to(&self, path: &Path) -> Result<u64, StoreError> {
        self.copy_to(path).map(|copy| copy.events)
    }

    /// [`Store::backup_to`] for a replication snapshot: returns the number
    /// of the last log frame the copy holds (a standby restoring it applies
    /// the stream's frames after that one).
    pub fn snapshot_to(&self, path: &Path) -> Result<u64, StoreError> {
        self.copy_to(path).map(|copy| copy.lsn)
    }

    fn copy_to(&self, path: &Path) -> Result<Copied, StoreError> {
        let db = self.db()?;
        let snapshot = db.begin_read()?;
        let events = snapshot.open_table(EVENTS)?.len()?;
        let lsn = snapshot
            .open_table(META)?
            .get(wal::META_LSN)?
            .map_or(0, |v| {
                u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8]))
            });
        write_backup(&snapshot, path).map_err(|source| StoreError::Backup {
            path: path.to_owned(),
            source,
        })?;
        Ok(Copied { events, lsn })
    }

    /// The sizes of the store's files and the room on their filesystem:
    /// three `stat`s, whatever the store holds (the dedupe runs' sizes are
    /// the index's). (redb can also count its
    /// free pages, but only by walking every page under the write lock:
    /// 4.5 s at 5M events.)
    pub fn disk_usage(&self) -> std::io::Result<DiskUsage> {
        use std::os::unix::fs::MetadataExt;
        let dir = self.shared.path.parent().unwrap_or(Path::new("."));
        // Length, and the blocks the filesystem allocated (st_blocks counts
        // 512-byte units).
        let size = |path: &Path| match std::fs::metadata(path) {
            Ok(m) => Ok((m.len(), m.blocks().saturating_mul(512))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((0, 0)),
            Err(e) => Err(e),
        };
        let fs = rustix::fs::statvfs(dir)?;
        let dedupe = self.dedupe_sizes();
        let (database_bytes, database_disk_bytes) = size(&self.shared.path)?;
        let (mut wal_bytes, mut wal_disk_bytes) = (0, 0);
        for name in wal::WAL_FILES {
            let (bytes, disk) = size(&dir.join(name))?;
            wal_bytes += bytes;
            wal_disk_bytes += disk;
        }
        Ok(DiskUsage {
            database_bytes,
            database_disk_bytes,
            wal_bytes,
            wal_disk_bytes,
            dedupe_runs_bytes: dedupe.file_bytes,
            dedupe_memory_bytes: dedupe.bytes as u64,
            filesystem_available_bytes: fs.f_bavail.saturating_mul(fs.f_frsize),
            filesystem_size_bytes: fs.f_blocks.saturating_mul(fs.f_frsize),
        })
    }
}

/// What [`Store::copy_to`] copied.
struct Copied {
    events: u64,
    lsn: u64,
}

/// [`Store::disk_usage`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// The database file's length. redb extends its file before it writes
    /// there (doubling it up to 4 GiB, then 4 GiB at a time), so this runs
    /// ahead of [`DiskUsage::database_disk_bytes`].
    pub database_bytes: u64,
    /// The disk the database file takes: the blocks the filesystem
    /// allocated, which the part not yet written does not.
    pub database_disk_bytes: u64,
    /// The log's two segments, together.
    pub wal_bytes: u64,
    pub wal_disk_bytes: u64,
    /// The dedupe index's run files, together.
    pub dedupe_runs_bytes: u64,
    /// The memory the dedupe index holds (filters, fences, hash tables).
    pub dedupe_memory_bytes: u64,
    /// Free for an unprivileged writer (statvfs `f_bavail`).
    pub filesystem_available_bytes: u64,
    pub filesystem_size_bytes: u64,
}

/// Writes every table of `snapshot` into a new redb file at `path` (0600:
/// a backup holds every payload), committed durably.
fn write_backup(snapshot: &redb::ReadTransaction, path: &Path) -> Result<(), WriteError> {
    let target = Database::builder().create(path)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    let mut txn = target.begin_write()?;
    txn.set_durability(redb::Durability::Immediate)?;
    copy_table(snapshot, &txn, META)?;
    copy_table(snapshot, &txn, EVENTS)?;
    copy_table(snapshot, &txn, schema::PACK)?;
    copy_table(snapshot, &txn, STATE)?;
    copy_table(snapshot, &txn, DEDUPE)?;
    copy_table(snapshot, &txn, schema::DEDUPE_KEPT)?;
    copy_table(snapshot, &txn, SCHEDULE)?;
    copy_table(snapshot, &txn, LEASES)?;
    copy_table(snapshot, &txn, ATTEMPTS)?;
    copy_table(snapshot, &txn, DLQ)?;
    copy_table(snapshot, &txn, ORDERED)?;
    copy_table(snapshot, &txn, EXPIRY)?;
    copy_table(snapshot, &txn, schema::BY_TYPE)?;
    copy_table(snapshot, &txn, schema::PENDING_SINCE)?;
    copy_table(snapshot, &txn, schema::COUNTS)?;
    copy_table(snapshot, &txn, schema::MINUTES)?;
    copy_table(snapshot, &txn, schema::ERASED)?;
    copy_table(snapshot, &txn, schema::KEY_LOG)?;
    copy_table(snapshot, &txn, schema::KEY_DUE)?;
    copy_table(snapshot, &txn, schema::KEY_CLAIMED)?;
    if let Err(e) = copy_table(snapshot, &txn, schema::AUDIT) {
        // A database no change was recorded in has no trail to copy.
        if !matches!(&e, WriteError::Redb(redb::Error::TableDoesNotExist(_))) {
            return Err(e);
        }
    }
    txn.commit()?;
    Ok(())
}

/// Copies every row of `def` from a read snapshot into a write transaction.
fn copy_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    from: &redb::ReadTransaction,
    to: &redb::WriteTransaction,
    def: redb::TableDefinition<K, V>,
) -> Result<(), WriteError> {
    let source = from.open_table(def)?;
    let mut target = to.open_table(def)?;
    for row in source.iter()? {
        let (k, v) = row?;
        target.insert(k.value(), v.value())?;
    }
    Ok(())
}
