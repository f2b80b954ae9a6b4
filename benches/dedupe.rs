//! The dedupe index alone, at tens of millions of keys: memory per key,
//! the store's open time, lookups.
//!
//! 50M full events do not fit this disk, so the store holds the dedupe log
//! only (`seq → fingerprint, time`, written straight into redb: what 50M
//! events' keys are). Measured, in one run:
//!
//! 1. the first open, which seals the log's keys into runs (what a store
//!    from before runs does once);
//! 2. a reopen, which reads the runs: open time, memory (the index's own
//!    count and the process's RSS), and lookups: a key not stored (every
//!    new event's), a stored one (a duplicate's, reading one page of a run);
//! 3. with `--exact`, the same keys all in hash tables, as before runs
//!    (the run files set aside).
//!
//! Rerun: cargo bench --bench dedupe -- [--quick] [--keys 50000000] [--data DIR] [--exact]
//! (`--data`: a dir kept between runs; filled once.)

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use hookinbox::store::{DB_FILE, Store, StoreOptions, schema};
use sha2::{Digest, Sha256};

#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DAY: Duration = Duration::from_secs(86_400);

/// The store's fingerprint of `(source, event_id)` (pinned by a unit test).
fn fingerprint(source: &str, event_id: &str) -> u128 {
    let mut hash = Sha256::new();
    hash.update(source.as_bytes());
    hash.update([0]);
    hash.update(event_id.as_bytes());
    u128::from_be_bytes(hash.finalize()[..16].try_into().unwrap())
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

fn options(dir: &Path, seal_keys: Option<usize>) -> StoreOptions {
    let mut options = StoreOptions::new(dir, 30 * DAY);
    if let Some(n) = seal_keys {
        options.dedupe_seal_keys = n;
    }
    options
}

/// Event `i`'s id; its seq is `2 i + 1` (deliveries take seqs too).
fn id(i: u64) -> String {
    format!("evt_{i:016}")
}

fn fill(dir: &Path, keys: u64) {
    let (store, writer) = Store::open(options(dir, None)).unwrap();
    drop(store);
    writer.shutdown();
    let started = Instant::now();
    let db = redb::Database::open(dir.join(DB_FILE)).unwrap();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut i = 0;
    while i < keys {
        let txn = db.begin_write().unwrap();
        {
            let mut log = txn.open_table(schema::DEDUPE).unwrap();
            for i in i..(i + 1_000_000).min(keys) {
                log.insert(2 * i + 1, (fingerprint("stripe", &id(i)), now))
                    .unwrap();
            }
        }
        txn.commit().unwrap();
        i = (i + 1_000_000).min(keys);
    }
    println!(
        "filled the dedupe log with {keys} keys in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

struct Opened {
    store: Store,
    writer: hookinbox::store::WriterHandle,
    took: Duration,
    rss_added: u64,
}

fn open(dir: &Path, seal_keys: Option<usize>) -> Opened {
    let before = rss_bytes();
    let started = Instant::now();
    let (store, writer) = Store::open(options(dir, seal_keys)).unwrap();
    let took = started.elapsed();
    Opened {
        store,
        writer,
        took,
        rss_added: rss_bytes().saturating_sub(before),
    }
}

/// Waits until the sealer has no runs left to merge.
fn settled(store: &Store) {
    let started = Instant::now();
    while store.dedupe_sizes().merging {
        assert!(started.elapsed() < Duration::from_secs(900));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Nanoseconds a lookup, over `n` ids from `make` (spread by a stride).
fn lookups(store: &Store, n: u64, make: impl Fn(u64) -> String, want_found: bool) -> f64 {
    let ids: Vec<String> = (0..n).map(make).collect();
    let started = Instant::now();
    for id in &ids {
        let found = store.find_seq("stripe", id).unwrap();
        assert_eq!(found.is_some(), want_found, "{id}");
    }
    started.elapsed().as_nanos() as f64 / n as f64
}

fn report(label: &str, opened: &Opened, keys: u64) {
    let sizes = opened.store.dedupe_sizes();
    let per_key = |b: u64| b as f64 / keys as f64;
    println!(
        "{label}: open {:.2} s; {} runs {:?} by level ({} keys) + {} keys in tables; index {:.0} MiB = {:.2} B/key; RSS +{:.0} MiB = {:.2} B/key",
        opened.took.as_secs_f64(),
        sizes.runs,
        sizes.levels,
        sizes.run_keys,
        sizes.exact_keys,
        sizes.bytes as f64 / (1 << 20) as f64,
        per_key(sizes.bytes as u64),
        opened.rss_added as f64 / (1 << 20) as f64,
        per_key(opened.rss_added),
    );
    let stride = (keys / 200_000).max(1);
    let miss = lookups(&opened.store, 200_000, |i| format!("new_{i}"), false);
    let hit = lookups(
        &opened.store,
        200_000.min(keys),
        |i| id(i * stride % keys),
        true,
    );
    println!("{label}: lookup of a new key {miss:.0} ns, of a stored key {hit:.0} ns");
}

fn close(opened: Opened) {
    drop(opened.store);
    opened.writer.shutdown();
}

/// One measurement in a process of its own, so that its RSS is the
/// index's and not what an earlier open left to the allocator.
fn measure(dir: &Path, keys: u64, what: &str) {
    match what {
        "first" => {
            let opened = open(dir, None);
            let merging = Instant::now();
            settled(&opened.store);
            println!(
                "first open (seals the log into runs): {:.2} s, then {:.2} s of merges in the background",
                opened.took.as_secs_f64(),
                merging.elapsed().as_secs_f64()
            );
            close(opened);
        }
        "runs" => {
            let opened = open(dir, None);
            report("runs", &opened, keys);
            close(opened);
        }
        "exact" => {
            let runs = dir.join("dedupe");
            let aside = dir.join("dedupe-aside");
            std::fs::rename(&runs, &aside).unwrap();
            let opened = open(dir, Some(usize::MAX));
            report("all in hash tables (before runs)", &opened, keys);
            close(opened);
            std::fs::remove_dir_all(&runs).ok();
            std::fs::rename(&aside, &runs).unwrap();
        }
        other => panic!("--measure {other}?"),
    }
}

fn main() {
    // The store's own lines (a run that cannot be written, merges) at
    // RUST_LOG=info; warnings and errors always.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let flags = support::Flags::from_env();
    let keys = flags.value("--keys", 3_000_000, 50_000_000) as u64;
    if let (Some(what), Some(dir)) = (flags.text("--measure"), flags.text("--data")) {
        measure(Path::new(dir), keys, what);
        return;
    }
    let temp = tempfile::tempdir().unwrap();
    let dir = flags
        .text("--data")
        .map_or_else(|| temp.path().to_owned(), std::path::PathBuf::from);
    println!(
        "hookinbox dedupe bench: {keys} keys, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut phases = vec!["runs"];
    if !dir.join(DB_FILE).exists() {
        std::fs::create_dir_all(&dir).unwrap();
        fill(&dir, keys);
        phases.insert(0, "first");
    }
    if flags.has("--exact") {
        phases.push("exact");
    }
    for phase in phases {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--bench", "--keys", &keys.to_string(), "--measure", phase])
            .arg("--data")
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "{phase}: {status}");
    }
    let file = std::fs::metadata(dir.join(DB_FILE)).unwrap().len();
    println!("database file {:.0} MiB", file as f64 / (1 << 20) as f64);
    println!("rerun: cargo bench --bench dedupe -- --keys {keys} [--data DIR] [--exact]");
}
