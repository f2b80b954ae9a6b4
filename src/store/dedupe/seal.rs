//! The sealer: a thread that writes frozen maps as runs, merges runs, and
//! deletes the files of expired runs, so that none of it happens on the
//! writer thread.
//!
//! After each run it seals, it merges the newest two adjacent runs of one
//! level while there are such (up to [`super::MAX_LEVEL`]): the count of
//! runs, and so a lookup's cost, grows with the log of the keys over 4M.
//!
//! A run that cannot be written (a full disk) is tried again, 10 s later
//! and then up to every 5 minutes; meanwhile its frozen map keeps
//! answering, and the recent map grows as it did before runs existed.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::{DedupeIndex, Frozen, Run};
use crate::store::error::Report;

enum Work {
    Seal(Frozen),
    Delete(Vec<Arc<Run>>),
}

/// The writer's end of the sealer thread; dropping it lets the thread
/// finish what it has and end.
pub struct Sealer {
    work: Option<mpsc::Sender<Work>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sealer {
    /// Starts the thread, which writes runs into `dir` for store `tag` and
    /// installs them into `index`.
    pub fn spawn(
        dir: PathBuf,
        tag: u32,
        index: Arc<RwLock<DedupeIndex>>,
    ) -> std::io::Result<Sealer> {
        let (work, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("store-sealer".into())
            .spawn(move || run(&dir, tag, &index, &rx))?;
        Ok(Sealer {
            work: Some(work),
            thread: Some(thread),
        })
    }

    pub fn seal(&self, frozen: Frozen) {
        self.send(Work::Seal(frozen));
    }

    pub fn delete(&self, runs: Vec<Arc<Run>>) {
        if !runs.is_empty() {
            self.send(Work::Delete(runs));
        }
    }

    fn send(&self, work: Work) {
        if let Some(tx) = &self.work {
            // The thread only ends once this end is dropped.
            let _ = tx.send(work);
        }
    }
}

impl Drop for Sealer {
    fn drop(&mut self) {
        self.work.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(dir: &std::path::Path, tag: u32, index: &RwLock<DedupeIndex>, rx: &mpsc::Receiver<Work>) {
    // Runs the open built from the log are all sealed ones.
    merge(dir, tag, index);
    while let Ok(work) = rx.recv() {
        match work {
            Work::Seal(frozen) => {
                let mut wait = Duration::from_secs(10);
                loop {
                    match seal(dir, tag, index, &frozen) {
                        Ok(()) => break,
                        Err(e) => {
                            tracing::error!(cause = %Report(&e), keys = frozen.map.len(), retry_in_s = wait.as_secs(), "cannot write a dedupe run; its keys stay in memory");
                        }
                    }
                    // A closed channel (shutdown) ends the wait: the next
                    // open seals these keys from the log.
                    match rx.recv_timeout(wait) {
                        Ok(Work::Delete(runs)) => delete(&runs),
                        Ok(Work::Seal(_)) => unreachable!("one frozen map at a time"),
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                    wait = (wait * 2).min(Duration::from_secs(300));
                }
            }
            Work::Delete(runs) => delete(&runs),
        }
    }
}

/// Writes `frozen` as a run (its keys the sweep has not passed) and puts
/// it in the frozen map's place.
fn seal(
    dir: &std::path::Path,
    tag: u32,
    index: &RwLock<DedupeIndex>,
    frozen: &Frozen,
) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    let swept = index.read().unwrap_or_else(|p| p.into_inner()).swept();
    let entries: Vec<_> = frozen.map.iter().filter(|e| e.1 > swept).collect();
    std::fs::create_dir_all(dir)?;
    let run = Arc::new(Run::write(dir, tag, (frozen.lo, frozen.hi), entries)?);
    tracing::info!(
        keys = run.keys(),
        lo = run.lo,
        hi = run.hi,
        filter_kib = run.bytes() >> 10,
        ms = started.elapsed().as_millis() as u64,
        "dedupe run sealed"
    );
    index
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .install(run);
    merge(dir, tag, index);
    Ok(())
}

/// Merges runs while the index has two to merge. A failure leaves them as
/// they are: they answer all the same, and the next seal tries again.
fn merge(dir: &std::path::Path, tag: u32, index: &RwLock<DedupeIndex>) {
    loop {
        let (pair, swept) = {
            let index = index.read().unwrap_or_else(|p| p.into_inner());
            (index.mergeable(), index.swept())
        };
        let Some((older, newer)) = pair else {
            return;
        };
        let started = std::time::Instant::now();
        let merged = match Run::merge(dir, tag, &older, &newer, swept) {
            Ok(merged) => Arc::new(merged),
            Err(e) => {
                tracing::error!(cause = %Report(&e), "cannot merge two dedupe runs; they stay as they are");
                return;
            }
        };
        let (keys, level) = (merged.keys(), merged.level);
        let replaced = index.write().unwrap_or_else(|p| p.into_inner()).replace(
            &older,
            &newer,
            merged.clone(),
        );
        if replaced {
            tracing::info!(
                keys,
                level,
                ms = started.elapsed().as_millis() as u64,
                "dedupe runs merged"
            );
            delete(&[older, newer]);
        } else {
            delete(&[merged]);
        }
    }
}

fn delete(runs: &[Arc<Run>]) {
    for run in runs {
        if let Err(e) = std::fs::remove_file(run.path()) {
            tracing::warn!(cause = %e, path = %run.path().display(), "cannot delete an expired dedupe run");
        }
    }
}
