//! [`Store::open`]: the data dir and the file (created private), the schema
//! checked (or migrated, [`super::migrate`]), the log replayed
//! ([`super::recover`]), interrupted attempts recorded, the dedupe index
//! rebuilt, then the log thread and the writer started.

use std::path::Path;
use std::sync::{Arc, RwLock};

use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::{Notify, mpsc, oneshot};

use super::dedupe;
use super::error::{StoreError, WriteError};
use super::handle::{Shared, Store, WriterHandle};
use super::migrate::migrate;
use super::options::StoreOptions;
use super::recover::{last_event, open_database, recover_then};
use super::schema::{
    self, ATTEMPTS, DEDUPE, DLQ, EVENTS, EXPIRY, LEASES, META, META_SCHEMA, META_TAG,
    MIGRATES_FROM, ORDERED, SCHEDULE, SCHEMA_VERSION, STATE,
};
use super::{durable, tables, wal, writer};

/// The database file's name inside the data dir.
pub const DB_FILE: &str = "hookinbox.redb";

impl Store {
    /// Opens (or creates) the database in `options.data_dir` and starts the writer.
    pub fn open(options: StoreOptions) -> Result<(Store, WriterHandle), StoreError> {
        let path = options.data_dir.join(DB_FILE);
        let open_err = |source: WriteError| StoreError::Open {
            path: path.clone(),
            source,
        };
        create_private_dir(&options.data_dir).map_err(|e| open_err(e.into()))?;
        let started = std::time::Instant::now();
        let db = open_database(&path, options.cache_bytes).map_err(open_err)?;
        let opened = started.elapsed();
        {
            use std::os::unix::fs::PermissionsExt;
            // Payloads are customer data: readable by the service user only.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| open_err(e.into()))?;
        }
        let tag = checked_tag(&db, &path, options.tag)?;
        // Before anything reads the tables: what the log holds beyond the
        // file's last checkpoint is as much the store as the file is.
        let mut wal = wal::Wal::open(&options.data_dir, tag).map_err(|e| open_err(e.into()))?;
        // A primary ships what its stream lacks before the checkpoint that
        // starts the log over: a failure leaves the log to try again. A
        // standby ships nothing until promoted (see `Store::promote`).
        let shipper = options.shipper.as_ref().filter(|_| !options.standby);
        let replayed =
            recover_then(
                &db,
                &mut wal,
                &writer::ttls(&options),
                |lsn, frames| match shipper {
                    Some(shipper) => Ok(super::ship::catch_up(&**shipper, tag, lsn, frames)?),
                    None => Ok(()),
                },
            )
            .map_err(open_err)?;
        let replay_done = started.elapsed();
        // A standby's leases are its primary's: their outcome comes as
        // frames. A shipping primary records them through the log, its
        // writer's first job (below), so its standby records them too.
        let ships = shipper.is_some();
        let recovered = if options.standby || ships {
            0
        } else {
            recover_leases(&db).map_err(open_err)?
        };
        if recovered > 0 {
            tracing::warn!(
                attempts = recovered,
                "attempts were in flight when hookinbox stopped; recorded as interrupted, delivering again"
            );
        }
        let (next_seq, last_received_ms) = last_event(&db)?.map_or((1, 0), |(s, r)| (s + 1, r));
        let before_dedupe = started.elapsed();
        let runs_dir = options.data_dir.join(dedupe::RUN_DIR);
        let (dedupe, loaded) =
            dedupe::load(&db.begin_read()?, &runs_dir, tag, options.dedupe_seal_keys)?;
        let sizes = dedupe.sizes();
        tracing::info!(
            database_ms = opened.as_millis() as u64,
            log_frames = replayed.frames.len(),
            replay_ms = (replay_done - opened).as_millis() as u64,
            dedupe_rows_read = loaded.rows,
            dedupe_runs = sizes.runs,
            dedupe_runs_built = loaded.runs_built,
            dedupe_keys = sizes.run_keys + sizes.exact_keys as u64,
            dedupe_mib = sizes.bytes >> 20,
            dedupe_ms = (started.elapsed() - before_dedupe).as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "store opened"
        );
        // 4096 queued requests: a burst far beyond what one batch takes; past
        // it, handlers wait, which slows the senders instead of growing memory.
        let (jobs, rx) = mpsc::channel(4096);
        let shared = Arc::new(Shared {
            db: RwLock::new(Some(Arc::new(db))),
            path,
            tag,
            jobs: jobs.clone(),
            dedupe: Arc::new(RwLock::new(dedupe)),
            schedule_changed: Notify::new(),
            write_error: tokio::sync::watch::Sender::new(None),
            standby: tokio::sync::watch::Sender::new(options.standby),
            stored: tokio::sync::watch::Sender::new(next_seq - 1),
            decided: std::sync::atomic::AtomicU64::new(next_seq - 1),
            progress: Default::default(),
        });
        let (exit_tx, exited) = oneshot::channel();
        let thread_err = |e: std::io::Error| StoreError::Open {
            path: shared.path.clone(),
            source: e.into(),
        };
        let log = durable::LogHandle::spawn(
            shared.clone(),
            options.on_commit.clone(),
            options.shipper.clone(),
        )
        .map_err(thread_err)?;
        // The sealer wakes an idle writer to take what it finished.
        let wake = jobs.clone();
        let sealer = dedupe::seal::Sealer::spawn(
            runs_dir,
            tag,
            Box::new(move || {
                let (reply, _) = oneshot::channel();
                let _ = wake.blocking_send(super::job::Message::Job(super::ops::ping::job(reply)));
            }),
        )
        .map_err(thread_err)?;
        // The checkpointer wakes an idle writer to apply what waited for it.
        let wake = jobs.clone();
        let checkpointer = writer::Checkpointer::spawn(Box::new(move || {
            let (reply, _) = oneshot::channel();
            let _ = wake.blocking_send(super::job::Message::Job(super::ops::ping::job(reply)));
        }))
        .map_err(thread_err)?;
        let thread = writer::spawn(
            writer::Writer::new(
                shared.clone(),
                sealer,
                options,
                next_seq,
                last_received_ms,
                wal,
                replayed.lsn,
                log,
                checkpointer,
            ),
            rx,
            exit_tx,
        )
        .map_err(thread_err)?;
        // A first batch, so that the writer starts merging the runs the
        // open built even if nothing else comes.
        let (reply, _) = oneshot::channel();
        let _ = jobs.try_send(super::job::Message::Job(super::ops::ping::job(reply)));
        if ships {
            // The queue holds a ping at most: this is the writer's first job. Its
            // answer is not waited for (a reader may see the leases for a
            // moment); anything written after queues behind it.
            let (reply, _) = oneshot::channel();
            let _ = jobs.try_send(super::job::Message::Job(super::ops::interrupted::job(
                reply,
            )));
        }
        Ok((
            Store { shared },
            WriterHandle {
                thread: Some(thread),
                jobs,
                exited: Some(exited),
            },
        ))
    }
}

/// The database's tag, once its schema is this build's: a file of a schema
/// it migrates from is migrated first; any other is refused.
fn checked_tag(db: &Database, path: &Path, wanted: Option<u32>) -> Result<u32, StoreError> {
    let path = path.to_owned();
    let open_err = |source: WriteError| StoreError::Open {
        path: path.clone(),
        source,
    };
    let tag = match init_meta(db, wanted).map_err(open_err)? {
        Ok(tag) => tag,
        Err(found) if found > SCHEMA_VERSION => {
            return Err(StoreError::NewerSchema { path, found });
        }
        Err(found) if found >= MIGRATES_FROM => {
            migrate(db, found).map_err(open_err)?;
            match init_meta(db, wanted).map_err(open_err)? {
                Ok(tag) => tag,
                Err(found) => return Err(StoreError::OlderSchema { path, found }),
            }
        }
        Err(found) => return Err(StoreError::OlderSchema { path, found }),
    };
    match wanted {
        Some(wanted) if wanted != tag => Err(StoreError::Open {
            path,
            source: WriteError::Unshipped(super::ship::ShipError::Mismatch {
                detail: format!(
                    "this data dir holds database {tag:08x}, not {wanted:08x}, the one its primary ships"
                ),
            }),
        }),
        _ => Ok(tag),
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("cannot create data dir {}: {e}", dir.display()),
        )),
    }
}

/// Creates every table and the meta rows on a new file (tagged `wanted`
/// if given, else at random); on an existing one reads its schema version.
/// Returns the database's tag, or `Err(version)` for a file of a schema
/// this build cannot use (nothing written then).
fn init_meta(db: &Database, wanted: Option<u32>) -> Result<Result<u32, u8>, WriteError> {
    let txn = db.begin_write()?;
    let tag = {
        let mut meta = txn.open_table(META)?;
        let found = meta.get(META_SCHEMA)?.map(|v| v.value().first().copied());
        match found {
            // Dropping the transaction aborts it: nothing is written.
            Some(Some(v)) if v != SCHEMA_VERSION => return Ok(Err(v)),
            Some(_) => {}
            None => {
                meta.insert(META_SCHEMA, [SCHEMA_VERSION].as_slice())?;
            }
        }
        let existing = meta.get(META_TAG)?.map(|v| v.value().to_vec());
        match existing {
            Some(bytes) if bytes.len() == 4 => {
                u32::from_be_bytes(bytes.try_into().expect("4 bytes"))
            }
            _ => {
                let tag: u32 = wanted.unwrap_or_else(rand::random);
                meta.insert(META_TAG, tag.to_be_bytes().as_slice())?;
                tag
            }
        }
    };
    // Create every table now so readers never meet a missing one.
    txn.open_table(EVENTS)?;
    txn.open_table(schema::PACK)?;
    txn.open_table(STATE)?;
    txn.open_table(DEDUPE)?;
    txn.open_table(schema::DEDUPE_KEPT)?;
    txn.open_table(SCHEDULE)?;
    txn.open_table(LEASES)?;
    txn.open_table(ATTEMPTS)?;
    txn.open_table(DLQ)?;
    txn.open_table(ORDERED)?;
    txn.open_table(EXPIRY)?;
    txn.open_table(schema::BY_TYPE)?;
    txn.open_table(schema::PENDING_SINCE)?;
    txn.open_table(schema::COUNTS)?;
    txn.open_table(schema::MINUTES)?;
    txn.open_table(schema::ERASED)?;
    txn.open_table(schema::KEY_LOG)?;
    txn.open_table(schema::KEY_DUE)?;
    txn.open_table(schema::KEY_CLAIMED)?;
    txn.commit()?;
    Ok(Ok(tag))
}

/// Records attempts that a crash interrupted (see `Tables::recover_leases`);
/// returns how many.
fn recover_leases(db: &Database) -> Result<usize, WriteError> {
    let mut txn = db.begin_write()?;
    txn.set_quick_repair(true);
    let recovered = {
        let mut t = tables::Tables::open(&txn)?;
        let recovered = t.recover_leases()?;
        t.index.flush()?;
        recovered
    };
    txn.commit()?;
    Ok(recovered)
}

/// The data dir of a replication standby, before its store opens.
pub mod standby_dir {
    use std::path::{Path, PathBuf};

    use super::super::error::{StoreError, WriteError};
    use super::super::{schema, wal};
    use super::DB_FILE;
    use redb::ReadableDatabase;

    /// The last log frame the database in `data_dir` holds; `None` when
    /// it has no database yet.
    pub fn last_frame(data_dir: &Path) -> Result<Option<u64>, StoreError> {
        let path = data_dir.join(DB_FILE);
        if !path.exists() {
            return Ok(None);
        }
        let open_err = |source: WriteError| StoreError::Open {
            path: path.clone(),
            source,
        };
        let db = redb::Database::open(&path).map_err(|e| open_err(e.into()))?;
        let txn = db.begin_read()?;
        let meta = txn.open_table(schema::META)?;
        Ok(Some(meta.get(wal::META_LSN)?.map_or(0, |v| {
            u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8]))
        })))
    }

    /// Moves the database and its log out of the way, into a new
    /// `set-aside-<unix seconds>` directory of `data_dir` (kept for whoever
    /// wants to look): the node starts over from the replication stream.
    /// Returns that directory.
    pub fn set_aside(data_dir: &Path) -> std::io::Result<PathBuf> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let aside = data_dir.join(format!("set-aside-{now}"));
        std::fs::create_dir_all(&aside)?;
        // The dedupe runs are derived from the database: they go with it.
        for name in [
            DB_FILE,
            wal::WAL_FILE,
            wal::WAL_FILE_2,
            super::super::dedupe::RUN_DIR,
        ] {
            match std::fs::rename(data_dir.join(name), aside.join(name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::File::open(data_dir)?.sync_all()?;
        Ok(aside)
    }
}
