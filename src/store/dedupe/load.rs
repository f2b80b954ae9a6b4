//! Building the index when the store opens: the runs of `<data_dir>/dedupe/`
//! that still match the log, the log's keys newer than them (sealed into
//! runs first where there are enough), the pinned keys.
//!
//! A run is used only as part of an unbroken chain from the swept end of
//! the log: the first covers `swept`, each starts where the one before
//! ends, and each one's newest key (its anchor) is in the log under its
//! seq, unless swept. Runs that a merged one covers are left over from a
//! crash before their deletion. Everything else in the directory (another store's
//! runs, a restored database's older ones, a torn or damaged file, runs
//! after a gap) is deleted and its keys read from the log again.

use std::path::Path;
use std::sync::Arc;

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata};

use super::map::masked;
use super::{DedupeIndex, Loader, META_SWEPT, Map, Parts, Run, RunError};
use crate::store::error::StoreError;
use crate::store::schema::{self, DEDUPE, DEDUPE_KEPT, META};

/// What was read, for the open's log line.
#[derive(Debug, Default, Clone, Copy)]
pub struct Loaded {
    /// Runs kept from the directory, and built now from the log.
    pub runs_kept: usize,
    pub runs_built: usize,
    /// Rows read from the logs (events' and keys').
    pub rows: usize,
}

/// The index over what `txn` holds, its runs in `dir` (written for `tag`,
/// `seal_keys` keys each).
pub fn load(
    txn: &ReadTransaction,
    dir: &Path,
    tag: u32,
    seal_keys: usize,
) -> Result<(DedupeIndex, Loaded), StoreError> {
    let log = txn.open_table(DEDUPE)?;
    let meta = txn.open_table(META)?;
    let stored = meta.get(META_SWEPT)?.map_or(0, |v| {
        u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8]))
    });
    // Every event key below the log's first was swept from it (gone, or
    // kept live in `dedupe_kept`), whoever swept it: a build from before
    // runs does not move `swept`.
    let below_log = log.first()?.map_or(0, |(seq, _)| seq.value() - 1);
    let swept = stored.max(below_log);
    let mut loaded = Loaded::default();
    let mut runs = kept_runs(dir, tag, swept, &|seq| {
        Ok(log.get(seq)?.map(|v| masked(v.value().0)))
    })?;
    loaded.runs_kept = runs.len();
    let mut sealed_to = runs.last().map_or(swept, |r| r.hi);

    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    // Pinned: keys kept for live events, keys put back below `swept`, and
    // idempotency keys. Fingerprints of the three never meet (each kept or
    // put-back key is its event's one live key), so their order is free.
    let kept = txn.open_table(DEDUPE_KEPT)?;
    let mut pinned = Loader::new(threads, kept.len()? as usize);
    for row in kept.iter()?.chain(log.range(..=swept)?) {
        let (seq, value) = row?;
        pinned.push(value.value().0, seq.value());
        loaded.rows += 1;
    }
    let (pinned, key_rows) = load_keys(txn, threads as u64, vec![pinned])?;
    loaded.rows += key_rows;

    // Newer than every run: whole runs of `seal_keys` first, the rest
    // into the recent map.
    let mut chunk: Vec<(u128, u64)> = Vec::new();
    std::fs::create_dir_all(dir).map_err(open_io)?;
    for row in log.range(sealed_to.saturating_add(1)..)? {
        let (seq, value) = row?;
        chunk.push((value.value().0, seq.value()));
        loaded.rows += 1;
        if chunk.len() == seal_keys {
            let hi = seq.value();
            let entries = std::mem::take(&mut chunk);
            runs.push(Arc::new(
                Run::write(dir, tag, (sealed_to, hi), entries).map_err(open_io)?,
            ));
            loaded.runs_built += 1;
            sealed_to = hi;
        }
    }
    let mut recent = Loader::new(threads, chunk.len());
    for (fp, seq) in chunk {
        recent.push(fp, seq);
    }
    let index = DedupeIndex::new(Parts {
        pinned: Map::from_loaders(pinned),
        recent: Map::from_loaders(vec![recent]),
        runs,
        swept,
        sealed_to,
    });
    Ok((index, loaded))
}

fn open_io(e: std::io::Error) -> StoreError {
    StoreError::Dedupe(e)
}

/// The runs of `dir` that form an unbroken chain from `swept` and match the
/// log (`logged`: the fingerprint the log holds at a seq); deletes the
/// others, and every leftover temporary file.
fn kept_runs(
    dir: &Path,
    tag: u32,
    swept: u64,
    logged: &dyn Fn(u64) -> Result<Option<u128>, StoreError>,
) -> Result<Vec<Arc<Run>>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(open_io(e)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry.map_err(open_io)?.path();
        let opened = match path.extension() {
            Some(ext) if ext == "tmp" => Err(RunError::Damaged("never finished")),
            _ => Run::open(&path, tag),
        };
        match opened {
            Ok(run) => found.push(run),
            Err(e) => discard(&path, &e.to_string()),
        }
    }
    // A merged run before the runs it was merged from (same start, later
    // end): a crash between the merge and their deletion leaves both.
    found.sort_by_key(|r| (r.lo, std::cmp::Reverse(r.hi)));
    let mut kept: Vec<Arc<Run>> = Vec::new();
    let mut broken = false;
    for run in found {
        let reason = if broken {
            Some("after a run that could not be used")
        } else if kept.last().is_some_and(|last| run.hi <= last.hi) {
            Some("merged into a larger run")
        } else if run.hi <= swept {
            Some("every key swept")
        } else if kept.last().map_or(run.lo > swept, |last| run.lo != last.hi) {
            Some("does not continue the runs before it")
        } else if run.keys() > 0
            && run.anchor.0 > swept
            && logged(run.anchor.0)? != Some(run.anchor.1)
        {
            Some("its newest key is not in the log: another database's")
        } else {
            None
        };
        match reason {
            Some(reason) => {
                broken |= run.hi > swept;
                discard(run.path(), reason);
            }
            None => kept.push(Arc::new(run)),
        }
    }
    Ok(kept)
}

fn discard(path: &Path, reason: &str) {
    tracing::warn!(path = %path.display(), reason, "dedupe run not used; its keys are read from the log");
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(path = %path.display(), cause = %e, "cannot delete a dedupe run");
    }
}

/// The idempotency keys of `key_log` added to `loaders` (their fingerprints
/// are of another kind, see `keys::fingerprint`): one thread per core reads
/// a range of seqs of each namespace. Returns the loaders and the number of
/// rows read.
fn load_keys(
    txn: &ReadTransaction,
    threads: u64,
    mut loaders: Vec<Loader>,
) -> Result<(Vec<Loader>, usize), StoreError> {
    let log = txn.open_table(schema::KEY_LOG)?;
    let rows = log.len()? as usize;
    // The namespaces, hopping from each one's rows to the next one's, and
    // the largest seq.
    let mut namespaces = Vec::new();
    let mut last = 0;
    let mut next = log.first()?.map(|(k, _)| k.value().0.to_owned());
    while let Some(namespace) = next {
        if let Some((k, _)) = log
            .range((namespace.as_str(), 0)..=(namespace.as_str(), u64::MAX))?
            .next_back()
            .transpose()?
        {
            last = last.max(k.value().1);
        }
        next = log
            .range((namespace.as_str(), u64::MAX)..)?
            .find_map(|row| match row {
                Ok((k, _)) if k.value().0 != namespace => Some(Ok(k.value().0.to_owned())),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .transpose()?;
        namespaces.push(namespace);
    }
    let span = last / threads + 1;
    let read = |from: u64| -> Result<Loader, StoreError> {
        let mut loader = Loader::new(threads as usize, rows / threads as usize);
        for namespace in &namespaces {
            let range = (namespace.as_str(), from)..(namespace.as_str(), from.saturating_add(span));
            for row in log.range(range)? {
                let (at, value) = row?;
                loader.push(value.value().0, at.value().1);
            }
        }
        Ok(loader)
    };
    let read: Vec<Loader> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..threads)
            .map(|i| scope.spawn(move || read(i * span)))
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().expect("a key read thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    loaders.extend(read);
    Ok((loaders, rows))
}
