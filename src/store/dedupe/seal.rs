//! The sealer: a thread that writes frozen maps as runs, merges runs, and
//! deletes the files of expired runs, so that none of it happens on the
//! writer thread.
//!
//! It shares no lock with the writer: the writer hands it work (a frozen
//! map, two runs to merge, files to delete) and takes the results back
//! ([`Sealer::finished`]) under the index's lock it holds anyway, so the
//! index still has one writer. That lets the thread run at the lowest
//! priority (nice 19): it takes the CPU ingest leaves, and a lock it held
//! can never keep ingest waiting while it is not scheduled.
//!
//! The writer asks for a merge of the newest two adjacent runs of one
//! level while there are such (up to [`super::MAX_LEVEL`]): the count of
//! runs, and so a lookup's cost, grows with the log of the keys over 4M.
//!
//! A run that cannot be written (a full disk) is tried again, 10 s later
//! and then up to every 5 minutes; meanwhile its frozen map keeps
//! answering, and the recent map grows as it did before runs existed.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::{Frozen, Run};
use crate::store::error::Report;

enum Work {
    /// Write the frozen map's keys above `swept` as a run.
    Seal {
        frozen: Frozen,
        swept: u64,
    },
    Merge {
        older: Arc<Run>,
        newer: Arc<Run>,
        swept: u64,
    },
    Delete(Vec<Arc<Run>>),
}

/// What the sealer made, for the writer to put in the index.
pub enum Finished {
    Sealed(Arc<Run>),
    Merged {
        older: Arc<Run>,
        newer: Arc<Run>,
        merged: Arc<Run>,
    },
    /// The merge failed (logged); the runs stay as they are.
    NotMerged,
}

/// The writer's end of the sealer thread. Dropping it stops the thread
/// (a merge or seal under way is left unfinished: the next open redoes it
/// from the log) and waits for it.
pub struct Sealer {
    work: Option<mpsc::Sender<Work>>,
    finished: mpsc::Receiver<Finished>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sealer {
    /// Starts the thread, which writes runs into `dir` for store `tag` and
    /// calls `wake` after each result, so that an idle writer takes it.
    pub fn spawn(dir: PathBuf, tag: u32, wake: Box<dyn Fn() + Send>) -> std::io::Result<Sealer> {
        let (work, rx) = mpsc::channel();
        let (done, finished) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("store-sealer".into())
            .spawn(move || {
                let worker = Worker {
                    dir: &dir,
                    tag,
                    stop: &stopped,
                };
                worker.run(&rx, &|result| {
                    if done.send(result).is_ok() {
                        wake();
                    }
                });
            })?;
        Ok(Sealer {
            work: Some(work),
            finished,
            stop,
            thread: Some(thread),
        })
    }

    pub fn seal(&self, frozen: Frozen, swept: u64) {
        self.send(Work::Seal { frozen, swept });
    }

    pub fn merge(&self, older: Arc<Run>, newer: Arc<Run>, swept: u64) {
        self.send(Work::Merge {
            older,
            newer,
            swept,
        });
    }

    pub fn delete(&self, runs: Vec<Arc<Run>>) {
        if !runs.is_empty() {
            self.send(Work::Delete(runs));
        }
    }

    /// A result, if one is ready.
    pub fn finished(&self) -> Option<Finished> {
        self.finished.try_recv().ok()
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
        self.stop.store(true, Ordering::Relaxed);
        self.work.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Worker<'a> {
    dir: &'a Path,
    tag: u32,
    stop: &'a AtomicBool,
}

impl Worker<'_> {
    fn run(&self, rx: &mpsc::Receiver<Work>, done: &dyn Fn(Finished)) {
        // Background work: it takes the CPU that ingest leaves (a merge of
        // 4M keys is a second of CPU).
        let tid = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(tid), 19) {
            tracing::debug!(cause = %e, "the sealer runs at the normal priority");
        }
        let mut queue: VecDeque<Work> = VecDeque::new();
        let mut wait = Duration::from_secs(10);
        loop {
            let work = match queue.pop_front() {
                Some(work) => work,
                None => match rx.recv() {
                    Ok(work) => work,
                    Err(_) => return,
                },
            };
            match work {
                Work::Seal { frozen, swept } => match self.seal(&frozen, swept) {
                    Ok(run) => {
                        wait = Duration::from_secs(10);
                        done(Finished::Sealed(run));
                    }
                    Err(e) if self.stop.load(Ordering::Relaxed) => {
                        tracing::debug!(cause = %e, "sealing stopped");
                        return;
                    }
                    Err(e) => {
                        tracing::error!(cause = %Report(&e), keys = frozen.map.len(), retry_in_s = wait.as_secs(), "cannot write a dedupe run; its keys stay in memory");
                        queue.push_front(Work::Seal { frozen, swept });
                        // Work that comes meanwhile waits its turn; a closed
                        // channel (shutdown) ends the wait.
                        let until = Instant::now() + wait;
                        while let Some(left) = until.checked_duration_since(Instant::now()) {
                            match rx.recv_timeout(left) {
                                Ok(work) => queue.push_back(work),
                                Err(RecvTimeoutError::Timeout) => break,
                                Err(RecvTimeoutError::Disconnected) => return,
                            }
                        }
                        wait = (wait * 2).min(Duration::from_secs(300));
                    }
                },
                Work::Merge {
                    older,
                    newer,
                    swept,
                } => {
                    let started = Instant::now();
                    let result = Run::merge(self.dir, self.tag, &older, &newer, swept, self.stop);
                    match result {
                        Ok(merged) => {
                            tracing::info!(
                                keys = merged.keys(),
                                level = merged.level,
                                ms = started.elapsed().as_millis() as u64,
                                "dedupe runs merged"
                            );
                            done(Finished::Merged {
                                older,
                                newer,
                                merged: Arc::new(merged),
                            });
                        }
                        Err(_) if self.stop.load(Ordering::Relaxed) => return,
                        Err(e) => {
                            tracing::error!(cause = %Report(&e), "cannot merge two dedupe runs; they stay as they are");
                            done(Finished::NotMerged);
                        }
                    }
                }
                Work::Delete(runs) => delete(&runs),
            }
        }
    }

    /// Writes `frozen` as a run (its keys the sweep has not passed).
    fn seal(&self, frozen: &Frozen, swept: u64) -> std::io::Result<Arc<Run>> {
        let started = Instant::now();
        let entries: Vec<_> = frozen.map.iter().filter(|e| e.1 > swept).collect();
        std::fs::create_dir_all(self.dir)?;
        let run = Run::write(self.dir, self.tag, (frozen.lo, frozen.hi), entries)?;
        tracing::info!(
            keys = run.keys(),
            lo = run.lo,
            hi = run.hi,
            filter_kib = run.bytes() >> 10,
            ms = started.elapsed().as_millis() as u64,
            "dedupe run sealed"
        );
        Ok(Arc::new(run))
    }
}

/// Deletes the files of runs no longer in the index (readers that still
/// hold one keep reading its open file).
pub fn delete(runs: &[Arc<Run>]) {
    for run in runs {
        if let Err(e) = std::fs::remove_file(run.path()) {
            tracing::warn!(cause = %e, path = %run.path().display(), "cannot delete a dedupe run");
        }
    }
}
