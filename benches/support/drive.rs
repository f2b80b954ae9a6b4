//! The store-level load shared by the ingest and HTTP benches: events fed
//! to `Store::ingest` from concurrent producers, and what the writer thread
//! and the disk paid for them.

use std::path::Path;
use std::time::{Duration, Instant};

use hookinbox::store::{DB_FILE, Initial, Store, StoreOptions, WriterHandle};
use hookinbox::verify::VerifiedEvent;

/// The store in `dir` with a 30-day dedupe window, `max_batch` per commit.
pub fn open(dir: &Path, max_batch: usize) -> (Store, WriterHandle) {
    let options = StoreOptions {
        max_batch,
        ..StoreOptions::new(dir, Duration::from_secs(30 * 86400))
    };
    Store::open(options).unwrap()
}

/// Closes the store and waits for its writer to finish.
pub async fn close(store: Store, writer: WriterHandle) {
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

/// The disk the database file takes, in bytes (0 if absent): the blocks the
/// filesystem has allocated to it. redb grows its file ahead of use (it
/// doubles it up to 4 GiB, then adds 4 GiB at a time) by extending it, which
/// allocates nothing until pages are written there: `ls -l` shows
/// [`file_length`], `du` and `df` this.
pub fn file_size(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir.join(DB_FILE)).map_or(0, |m| m.blocks() * 512)
}

/// The database file's length, holes and all (0 if absent).
#[allow(dead_code)] // only the http bench's space report shows it
pub fn file_length(dir: &Path) -> u64 {
    std::fs::metadata(dir.join(DB_FILE)).map_or(0, |m| m.len())
}

pub struct Run {
    pub events: usize,
    pub elapsed: Duration,
    pub p50: Duration,
    pub p99: Duration,
}

impl Run {
    pub fn rate(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }
}

/// Feeds `events` to `store` from `producers` tasks; stops early at `limit`.
pub async fn drive(
    store: &Store,
    events: Vec<VerifiedEvent>,
    producers: usize,
    limit: Duration,
) -> Run {
    let started = Instant::now();
    let deadline = started + limit;
    // Dealt round-robin: the events in flight at any moment were received
    // (verified) moments apart, as requests arriving over HTTP are. Contiguous
    // slices would make each batch's receipt times span the whole run, and
    // every time-keyed table touch a page per producer.
    let mut chunks: Vec<Vec<VerifiedEvent>> = (0..producers)
        .map(|_| Vec::with_capacity(events.len() / producers + 1))
        .collect();
    for (i, event) in events.into_iter().enumerate() {
        chunks[i % producers].push(event);
    }
    let tasks: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut waits = Vec::with_capacity(chunk.len());
                for event in chunk {
                    if Instant::now() > deadline {
                        break;
                    }
                    let t = Instant::now();
                    store.ingest(event, Initial::Deliver).await.expect("ingest");
                    waits.push(t.elapsed());
                }
                waits
            })
        })
        .collect();
    let mut waits = Vec::new();
    for t in tasks {
        waits.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    waits.sort();
    let pct = |p: f64| waits[((waits.len() - 1) as f64 * p) as usize];
    Run {
        events: waits.len(),
        elapsed,
        p50: pct(0.5),
        p99: pct(0.99),
    }
}

/// What this process has cost so far, from `/proc` (Linux): CPU time of the
/// store's writer thread and bytes sent to storage. Steadier than a rate on
/// a shared machine: divide a difference by the events it covers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    /// Nanoseconds on a CPU of every thread named `store-writer`.
    pub writer_cpu_ns: u64,
    /// `write_bytes` of `/proc/<pid>/io`: what the process made the kernel write.
    pub disk_bytes: u64,
    /// User and system CPU of the whole process, threads that ended
    /// included (`/proc/<pid>/stat`, in clock ticks of 10 ms, as ns).
    pub process_cpu_ns: u64,
}

impl Cost {
    pub fn now() -> Cost {
        Cost::of("self")
    }

    /// [`Cost::now`] of process `pid` (`"self"` or a number).
    pub fn of(pid: &str) -> Cost {
        let mut writer_cpu_ns = 0;
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                if comm.trim_end() != "store-writer" {
                    continue;
                }
                // schedstat: time on a CPU (ns), time waiting to run, slices.
                let stat =
                    std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
                writer_cpu_ns += stat
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
        let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
        let disk_bytes = io
            .lines()
            .find_map(|l| l.strip_prefix("write_bytes: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // After the command's closing parenthesis, utime and stime are the
        // 12th and 13th fields.
        let ticks: u64 = stat
            .rfind(')')
            .map(|at| &stat[at + 1..])
            .map(|rest| {
                rest.split_whitespace()
                    .skip(11)
                    .take(2)
                    .filter_map(|v| v.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        Cost {
            writer_cpu_ns,
            disk_bytes,
            process_cpu_ns: ticks * 10_000_000,
        }
    }

    /// "writer µs/event, disk B/event" from `self` to `later` over `events`.
    /// The writer's CPU is only counted while its thread lives: take both
    /// ends while the same store is open.
    pub fn per_event(self, later: Cost, events: usize) -> String {
        let n = events.max(1) as f64;
        format!(
            "writer {:.1} µs/event, disk {:.0} B/event",
            later.writer_cpu_ns.saturating_sub(self.writer_cpu_ns) as f64 / 1e3 / n,
            later.disk_bytes.saturating_sub(self.disk_bytes) as f64 / n
        )
    }
}
