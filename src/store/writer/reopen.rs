//! The writer after a failure and at the end: the database let go of once
//! the log thread has answered everything handed to it, opened again with
//! the log replayed into it, and the batches answered 503 meanwhile
//! reconciled with what the reopened file holds; and the last close.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::Database;

use super::super::error::{Report, WriteError};
use super::super::recover::{last_event, open_database, recover};
use super::{Writer, ttls};

impl Writer {
    /// Drops the batches the log thread has answered as durable.
    pub(super) fn forget_durable(&mut self) {
        let durable = self.log.durable();
        while self.in_flight.front().is_some_and(|b| b.lsn <= durable) {
            self.in_flight.pop_front();
        }
    }

    /// The open database; after a failure, the file opened again with the
    /// log replayed into it, and the writer's own state read back from it.
    pub(super) fn database(&mut self) -> Result<Arc<Database>, WriteError> {
        if let Some(db) = self
            .shared
            .db
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Ok(db);
        }
        let db = open_database(&self.shared.path, self.options.cache_bytes)?;
        let recovered = recover(&db, &mut self.wal, &ttls(&self.options))?;
        // Recovery applied every frame the log holds, the backlog's too.
        self.backlog.clear();
        self.reconcile(recovered.lsn);
        self.lsn = recovered.lsn;
        self.last_checkpoint = Instant::now();
        (self.events.next_seq, self.events.last_received_ms) = last_event(&db)
            .map_err(|e| WriteError::Io(std::io::Error::other(e.to_string())))?
            .map_or((1, 0), |(s, r)| (s + 1, r));
        self.applied_seq = self.events.next_seq - 1;
        let db = Arc::new(db);
        *self.shared.db.write().unwrap_or_else(|p| p.into_inner()) = Some(db.clone());
        tracing::info!(path = %self.shared.path.display(), replayed_frames = recovered.frames.len(), "database reopened");
        Ok(db)
    }

    /// After a reopen that holds every frame up to `holds`: the batches
    /// still in flight (answered 503, or never answered) are stored or not
    /// by that number alone. The index forgets the keys of those it does
    /// not hold, newest first (undoing exactly what learning did: a batch
    /// adds a key only where none was live), and learns those of a stored
    /// batch it never learned (one whose redb commit reported a failure
    /// but reached the file).
    pub(super) fn reconcile(&mut self, holds: u64) {
        let in_flight = std::mem::take(&mut self.in_flight);
        let mut index = self
            .shared
            .dedupe
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let (mut lost, mut kept) = (0, 0);
        for batch in in_flight.iter().rev() {
            match (batch.lsn <= holds, batch.learned) {
                (false, true) => {
                    lost += 1;
                    batch.keys.undo(&mut index);
                }
                (true, false) => kept += 1,
                _ => {}
            }
        }
        drop(index);
        for batch in in_flight.iter().filter(|b| b.lsn <= holds && !b.learned) {
            self.learn(&batch.keys, false);
        }
        if lost + kept > 0 {
            tracing::warn!(
                lost,
                kept,
                "batches answered 503: the reopened database holds {kept} of them, not {lost}"
            );
        }
    }

    /// After a failed commit redb refuses further writes (and reads) until
    /// the file is reopened ("close and re-open the database"). Take the
    /// handle out of the shared slot, wait for readers to let go of it, drop
    /// it and open the file again at once, so readers are refused only for
    /// that moment. If the open fails too, the next batch tries again; until
    /// then readers get `Unavailable`.
    pub(super) fn reopen(&mut self) {
        self.release_database();
        if let Err(cause) = self.database() {
            tracing::error!(cause = %Report(&cause), "cannot reopen the database; trying again with the next write");
        }
    }

    pub(super) fn close(&mut self) {
        // What waited for a checkpoint is applied (and answered) first.
        self.wait_checkpoint(true);
        if self.deferred() {
            self.commit(&mut Vec::new(), &mut Vec::new());
        }
        self.checkpointer.stop();
        // Answers what is queued (its frames synced) and ends the log thread.
        self.log.stop();
        self.release_database();
        tracing::info!("store closed");
    }

    /// Lets go of the database once the log thread has answered every
    /// batch handed to it: what the reopened file holds then decides the
    /// fate of the ones it failed, and recovery reads a log nothing writes.
    pub(super) fn release_database(&mut self) {
        self.wait_checkpoint(false);
        self.log.settle();
        self.forget_durable();
        let taken = self
            .shared
            .db
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(db) = taken {
            close_when_unshared(db);
        }
    }
}

/// Readers hold the database only for one read; give them up to 5 s to finish.
fn close_when_unshared(mut db: Arc<Database>) {
    for _ in 0..500 {
        match Arc::try_unwrap(db) {
            Ok(db) => {
                if let Err(e) = db.close() {
                    tracing::warn!(error = %e, "closing the database reported an error");
                }
                return;
            }
            Err(shared) => {
                db = shared;
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    tracing::warn!("readers still hold the database after 5 s; it closes when they finish");
}
