//! Fault drills on the real binary: the disk fills up and is freed again
//! while providers send and the app receives deliveries; the app is down
//! (connection refused, then 503) while a backlog builds, and comes back; and
//! a bounded soak with duplicates, watching memory and descriptors.
//!
//! No root needed: the child runs with a soft `RLIMIT_FSIZE` (writes past it
//! fail with EFBIG, as on a full disk) and a hard limit of infinity, so the
//! test can "free the disk" by raising the soft limit with `prlimit(2)`
//! while the process runs. Everything listens on loopback.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookinbox::store::schema::{AttemptClass, Status};
use hookinbox::store::{Store, StoreOptions};

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, client, eventually, incompressible_body, post, read_all, rss_bytes,
    server_section, standard_headers, standard_source, write_config,
};

/// The "disk" holds 8 MiB: room for a few dozen 96 KiB events.
const DISK_BYTES: u64 = 8 << 20;

/// Soft limit `DISK_BYTES`, hard limit infinity (so it can be raised later).
fn small_disk() -> std::io::Result<()> {
    // SAFETY: signal and setrlimit are async-signal-safe; called between fork and exec.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: DISK_BYTES,
            rlim_max: libc::RLIM_INFINITY,
        };
        if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Frees the child's "disk": lifts its soft file-size limit.
fn free_disk(server: &BinaryServer) {
    let limit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit on our own child; the new limit is a valid struct.
    let rc = unsafe {
        libc::prlimit(
            server.child.id() as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// What `/readyz` answers now: (status, body).
async fn readyz(http: &reqwest::Client, server: &BinaryServer) -> (u16, serde_json::Value) {
    let res = http
        .get(format!("{}/readyz", server.admin))
        .send()
        .await
        .unwrap();
    let a = crate::support::answer(res).await;
    (a.status, a.json)
}

/// Polls `/readyz` until it answers `want`, at most `limit`.
async fn wait_ready(http: &reqwest::Client, server: &BinaryServer, want: u16, limit: Duration) {
    eventually(
        &format!("/readyz answers {want}"),
        limit,
        Duration::from_millis(100),
        async || match readyz(http, server).await {
            (status, _) if status == want => Ok(()),
            (status, body) => Err(format!("{status}: {body}\n{}", server.log_text())),
        },
    )
    .await
}

/// What [`fill_disk`] sent: the (event id, hookinbox id) of every 2xx, and
/// the event id and body number of every 503.
struct Filled {
    acked: Vec<(String, String)>,
    refused: Vec<(String, u64)>,
}

/// The 96 KiB body of event number `n` of [`fill_disk`].
fn drill_body(n: u64) -> Vec<u8> {
    incompressible_body(96 << 10, n)
}

/// 16 senders post 96 KiB events until each has been refused 4 times
/// (bounded by count and time), so that many batches fail while deliveries
/// go on.
async fn fill_disk(server: &BinaryServer, tag: &str) -> Filled {
    let http = client();
    let url = server.url("/in/demo");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(Mutex::new(Vec::new()));
    let sending = crate::support::Window::of(Duration::from_secs(60));
    let mut senders = Vec::new();
    for sender in 0..16u64 {
        let (http, url, acked, refused) =
            (http.clone(), url.clone(), acked.clone(), refused.clone());
        let tag = tag.to_owned();
        senders.push(tokio::spawn(async move {
            let mut mine = 0;
            for i in 0..60u64 {
                if mine >= 4 || sending.is_over() {
                    break;
                }
                let n = sender * 1000 + i;
                let id = format!("{tag}_{n}");
                let body = drill_body(n);
                let a = post(&http, &url, &standard_headers(&id, &body), body).await;
                match a.status {
                    200 => acked.lock().unwrap().push((id, a.id().to_owned())),
                    503 => {
                        assert_eq!(a.json["error"], "store_unavailable", "{:?}", a.json);
                        assert!(a.headers.contains_key("retry-after"));
                        refused.lock().unwrap().push((id, n));
                        mine += 1;
                    }
                    other => panic!("unexpected {other}: {:?}", a.json),
                }
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    let refused = refused.lock().unwrap().clone();
    assert!(!refused.is_empty(), "the disk never filled up");
    let acked = acked.lock().unwrap().clone();
    assert!(
        !acked.is_empty(),
        "nothing was stored before the disk filled"
    );
    Filled { acked, refused }
}

/// Waits until the destination has answered 200 to every hookinbox id in
/// `acked` (by `webhook-id`); panics after `limit` with what is missing.
async fn wait_delivered(
    dest: &Destination,
    server: &BinaryServer,
    acked: &[(String, String)],
    limit: Duration,
) {
    let want: HashSet<&str> = acked.iter().map(|(_, id)| id.as_str()).collect();
    eventually(
        "every acked event is delivered",
        limit,
        Duration::from_millis(50),
        async || {
            let received = dest.received();
            let seen: HashSet<&str> = received
                .iter()
                .filter(|r| r.answered == 200)
                .map(|r| r.header("webhook-id"))
                .collect();
            let missing: Vec<&&str> = want.difference(&seen).collect();
            if missing.is_empty() {
                return Ok(());
            }
            Err(format!(
                "{} of {} acked events not delivered, e.g. {:?}\n{}",
                missing.len(),
                want.len(),
                &missing[..missing.len().min(5)],
                server.log_text()
            ))
        },
    )
    .await
}

fn drill_config(dir: &std::path::Path, dest: &Destination) -> std::path::PathBuf {
    write_config(
        dir,
        &format!(
            "{}{}destination = \"{}\"\ninitial_interval = \"100ms\"\nmax_interval = \"1s\"\n",
            server_section(&dir.join("data")),
            standard_source("demo"),
            dest.url()
        ),
    )
}

/// Regression (issue 8, defects 1 and 2): an event whose lease committed just
/// before a failed batch stayed pending with 0 attempts until a restart, and
/// `/readyz` stayed 503 after the disk was freed until an ingest committed.
/// Now: the disk fills during ingest and delivery, is freed, and without a
/// restart readiness comes back by itself, every acked event is delivered,
/// and a clean restart finds no attempt to call interrupted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disk_full_then_freed_delivers_every_event_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // Slow enough that deliveries are still going on while batches fail.
    let dest = Destination::start(Mode::Slow(Duration::from_millis(20))).await;
    let config = drill_config(dir.path(), &dest);
    let mut server = BinaryServer::start(&config, &[], Some(small_disk));
    let http = client();

    let Filled { mut acked, refused } = fill_disk(&server, "full").await;
    // Readiness is right while the disk is full too: small delivery commits
    // may still pass, but a 96 KiB event cannot be stored.
    for _ in 0..3 {
        let (status, body) = readyz(&http, &server).await;
        assert_eq!(status, 503, "ready on a full disk: {body}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    free_disk(&server);
    // Readiness recovers by itself: no ingest is needed to find out.
    wait_ready(&http, &server, 200, Duration::from_secs(15)).await;
    let body = br#"{"type":"drill.after"}"#.to_vec();
    let a = post(
        &http,
        &server.url("/in/demo"),
        &standard_headers("after", &body),
        body,
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    acked.push(("after".into(), a.id().to_owned()));
    // What was refused comes again, as the provider retries it: each is
    // stored once, new or a duplicate of a copy that was stored after all
    // (a 503'd batch may be on disk), never a duplicate of nothing.
    for (id, n) in &refused {
        let body = drill_body(*n);
        let a = post(
            &http,
            &server.url("/in/demo"),
            &standard_headers(id, &body),
            body,
        )
        .await;
        assert_eq!(a.status, 200, "{id}: {:?}", a.json);
        acked.push((id.clone(), a.id().to_owned()));
    }
    let log = server.log_text();
    eprintln!(
        "disk-full drill: {} acked, {} refused and sent again; {} failed log writes, {} failed commits",
        acked.len() - refused.len(),
        refused.len(),
        log.matches("cannot write the write-ahead log").count(),
        log.matches("store commit failed").count()
    );

    // Every acked event reaches the app, without a restart.
    wait_delivered(&dest, &server, &acked, Duration::from_secs(60)).await;
    assert_eq!(server.terminate().code(), Some(0), "{}", server.log_text());
    // A clean restart has nothing to recover.
    let mut restarted = BinaryServer::start(&config, &[], None);
    assert!(
        !restarted.log_text().contains("recorded as interrupted"),
        "{}",
        restarted.log_text()
    );
    assert_eq!(restarted.terminate().code(), Some(0));

    let data = dir.path().join("data");
    let stored = read_all(&data).await;
    for (event_id, id) in &acked {
        let e = stored
            .iter()
            .find(|e| &e.id == id)
            .unwrap_or_else(|| panic!("acked {event_id} ({id}) lost"));
        assert_eq!(&e.record.event_id, event_id, "{id} is another event");
        assert_eq!(e.state.status, Status::Delivered, "{event_id}");
    }
    let mut ids: Vec<&str> = stored.iter().map(|e| e.record.event_id.as_str()).collect();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "an event id is stored twice");
    let (store, writer) =
        Store::open(StoreOptions::new(&data, Duration::from_secs(86400))).unwrap();
    for e in &stored {
        let attempts = store.attempts(e.seq).unwrap();
        assert!(
            attempts
                .iter()
                .all(|a| a.class != AttemptClass::Interrupted),
            "{} has an interrupted attempt though nothing was interrupted: {attempts:?}",
            e.id
        );
    }
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

/// Regression (issue 8, defect 3): after kill -9 on a full disk, a restart on
/// the still-full disk said `/readyz` 200 while a 96 KiB event got 503. Now
/// it is not ready until the disk is freed, then ready without an ingest.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restart_on_a_full_disk_is_unready_until_the_disk_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let config = drill_config(dir.path(), &dest);
    let mut server = BinaryServer::start(&config, &[], Some(small_disk));
    let acked = fill_disk(&server, "before").await.acked;
    server.kill9();

    let mut server = BinaryServer::start(&config, &[], Some(small_disk));
    let http = client();
    let (status, body) = readyz(&http, &server).await;
    assert_eq!(status, 503, "ready on a full disk: {body}");
    assert_eq!(body["ready"], false, "{body}");
    // The disk is really full: a few more events at most, then 503 — and
    // readiness agrees all along.
    let mut refused = false;
    for n in 0..20 {
        let body = incompressible_body(96 << 10, 500_000 + n);
        let a = post(
            &http,
            &server.url("/in/demo"),
            &standard_headers(&format!("on_full_{n}"), &body),
            body,
        )
        .await;
        let (status, ready) = readyz(&http, &server).await;
        assert_eq!(status, 503, "ready on a full disk: {ready}");
        if a.status == 503 {
            refused = true;
            break;
        }
        assert_eq!(a.status, 200, "{:?}", a.json);
    }
    assert!(refused, "the restarted store never refused an event");
    let big = incompressible_body(96 << 10, 999_999);
    free_disk(&server);
    wait_ready(&http, &server, 200, Duration::from_secs(15)).await;
    let a = post(
        &http,
        &server.url("/in/demo"),
        &standard_headers("big_on_full", &big),
        big,
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    assert_eq!(server.terminate().code(), Some(0), "{}", server.log_text());
    let stored = read_all(&dir.path().join("data")).await;
    for (event_id, id) in &acked {
        assert!(
            stored.iter().any(|e| &e.id == id),
            "acked {event_id} ({id}) lost"
        );
    }
}

/// How many log lines of `server` contain `text`.
fn log_count(server: &BinaryServer, text: &str) -> usize {
    server
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(text))
        .count()
}

/// Waits until at least `n` log lines of `server` contain `text`.
async fn wait_log(server: &BinaryServer, text: &str, n: usize, limit: Duration) {
    eventually(
        &format!("{n} log lines with {text:?}"),
        limit,
        Duration::from_millis(20),
        async || match log_count(server, text) {
            seen if seen >= n => Ok(()),
            seen => Err(format!("{seen} such lines in\n{}", server.log_text())),
        },
    )
    .await
}

/// A small signed event of the outage drill.
fn small_body(n: u64) -> Vec<u8> {
    format!("{{\"type\":\"drill.small\",\"n\":{n}}}").into_bytes()
}

/// 8 senders post the events `ids` (ids `{tag}_{n}`) to `demo`, every one
/// answered 200 and new, within 60 s. Returns (event id, hookinbox id) of each.
async fn ingest_all(
    server: &BinaryServer,
    tag: &str,
    ids: std::ops::Range<u64>,
) -> Vec<(String, String)> {
    const SENDERS: usize = 8;
    let http = client();
    let url = server.url("/in/demo");
    let mut senders = tokio::task::JoinSet::new();
    for first in 0..SENDERS {
        let (http, url, tag, ids) = (http.clone(), url.clone(), tag.to_owned(), ids.clone());
        senders.spawn(async move {
            let mut acked = Vec::new();
            for n in ids.skip(first).step_by(SENDERS) {
                let id = format!("{tag}_{n}");
                let body = small_body(n);
                let a = post(&http, &url, &standard_headers(&id, &body), body).await;
                assert_eq!(a.status, 200, "{id}: {:?}", a.json);
                assert!(!a.is_duplicate(), "{id}: {:?}", a.json);
                acked.push((id, a.id().to_owned()));
            }
            acked
        });
    }
    let all = tokio::time::timeout(Duration::from_secs(60), senders.join_all())
        .await
        .expect("ingest took over 60 s");
    all.into_iter().flatten().collect()
}

/// Limits of the outage drill's source: a rate that the backlog outlasts
/// (400 events at 50/s is 8 s, the burst only the first second of it) and a
/// concurrency below what a 20 ms app could take, so both limits bind.
const OUTAGE_EVENTS: u64 = 400;
const OUTAGE_MAX_RATE: usize = 50;
const OUTAGE_MAX_CONCURRENCY: usize = 4;

/// The app is down while a backlog builds: first nothing listens (every
/// connection refused), then it answers 503 to everything, then it is back.
/// The circuit opens within three failures and only probes (one attempt per
/// 1 s cooldown) while the app is down, so no event spends its attempts and
/// none is dead-lettered; once a probe succeeds the backlog goes out, every
/// acked event delivered, and the app never sees more than `max_concurrency`
/// requests at once or more than the rate bucket allows in any second.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn destination_down_then_back_gets_the_whole_backlog_within_its_limits() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let reserved = Destination::reserve();
    let config = write_config(
        dir.path(),
        &format!(
            r#"{}{}destination = "{}"
initial_interval = "100ms"
max_interval = "1s"
max_concurrency = {OUTAGE_MAX_CONCURRENCY}
max_rate = {OUTAGE_MAX_RATE}.0
breaker_failures = 3
breaker_cooldown = "1s"
"#,
            server_section(&dir.path().join("data")),
            standard_source("demo"),
            reserved.url()
        ),
    );
    // Each failed attempt's line is at debug.
    let mut server = BinaryServer::start(
        &config,
        &[("HOOKINBOX_LOG_LEVEL", "info,hookinbox::schedule=debug")],
        None,
    );

    // Down, nothing listening: the first failures open the circuit, and the
    // probe after its cooldown is refused too (so it opens a second time).
    let mut acked = ingest_all(&server, "down", 0..OUTAGE_EVENTS / 2).await;
    wait_log(&server, "circuit opened", 2, Duration::from_secs(20)).await;
    assert!(log_count(&server, "circuit half-open") >= 1);
    assert!(
        log_count(&server, "\"outcome\":\"connect") >= 3,
        "the failures were not refused connections:\n{}",
        server.log_text()
    );

    // Up but failing: every request gets 503; the next probe reaches the app
    // and opens the circuit again.
    let dest = reserved.start(Mode::Status(503, "down for maintenance"));
    let opened = log_count(&server, "circuit opened");
    acked.extend(ingest_all(&server, "down", OUTAGE_EVENTS / 2..OUTAGE_EVENTS).await);
    dest.wait_for(1, Duration::from_secs(20)).await;
    wait_log(
        &server,
        "circuit opened",
        opened + 1,
        Duration::from_secs(20),
    )
    .await;

    // Back (20 ms per request, so that requests overlap): the next probe
    // closes the circuit and the backlog drains.
    dest.set(Mode::Slow(Duration::from_millis(20)));
    wait_delivered(&dest, &server, &acked, Duration::from_secs(30)).await;
    assert!(log_count(&server, "circuit closed") >= 1);

    let received = dest.received();
    let refused_503 = received.iter().filter(|r| r.answered == 503).count();
    let half_open = log_count(&server, "circuit half-open");
    let peak_in_flight = dest.max_in_flight();
    let peak_per_second = dest.max_in_window(Duration::from_secs(1));
    println!(
        "outage drill: {} events, {} requests at the app ({refused_503} answered 503, \
         {half_open} half-open probes); peak in flight {peak_in_flight} (max_concurrency \
         {OUTAGE_MAX_CONCURRENCY}); peak in any 1 s {peak_per_second} (max_rate \
         {OUTAGE_MAX_RATE}/s); {:.1} s",
        acked.len(),
        received.len(),
        started.elapsed().as_secs_f64()
    );
    // While the app failed the circuit never closed, so every request it
    // saw was a half-open probe: one per cooldown, not a retry storm.
    assert!(
        refused_503 <= half_open,
        "{refused_503} requests answered 503 but only {half_open} probes"
    );
    // The destination counts a request in flight from its handler's start
    // to its answer, within hookinbox's attempt (lease, request, record),
    // which the scheduler counts against max_concurrency.
    assert!(
        peak_in_flight <= OUTAGE_MAX_CONCURRENCY,
        "{peak_in_flight} requests in flight at once, max_concurrency is {OUTAGE_MAX_CONCURRENCY}"
    );
    // The bound, from `schedule::Rate`: the bucket holds at most one
    // second's worth (`burst = max_rate`), refills at `max_rate` per
    // second, and each attempt takes a token when dispatched, never more
    // than the whole tokens there are (so it never goes below zero). Over
    // any span W the scheduler dispatches at most burst + max_rate × W:
    // 2 × max_rate in a second. The app sees arrivals, not dispatches: each
    // attempt reads the event and commits its lease (a group commit) before
    // it connects, so one second of arrivals can hold dispatches spread
    // over a little more than a second. ARRIVAL_SPREAD allows 100 ms of that
    // spread, ⌈max_rate × 0.1⌉ = 5 requests.
    const ARRIVAL_SPREAD: usize = OUTAGE_MAX_RATE.div_ceil(10);
    let bound = 2 * OUTAGE_MAX_RATE + ARRIVAL_SPREAD;
    assert!(
        peak_per_second <= bound,
        "{peak_per_second} requests within one second, the bucket allows {bound}"
    );

    assert_eq!(server.terminate().code(), Some(0), "{}", server.log_text());
    assert_eq!(
        log_count(&server, "dead-lettered"),
        0,
        "{}",
        server.log_text()
    );
    let stored = read_all(&dir.path().join("data")).await;
    for (event_id, id) in &acked {
        let e = stored
            .iter()
            .find(|e| &e.id == id)
            .unwrap_or_else(|| panic!("acked {event_id} ({id}) lost"));
        assert_eq!(e.state.status, Status::Delivered, "{event_id}");
    }
}

/// How many descriptors the child has open (entries of /proc/<pid>/fd).
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

const MIB: f64 = (1 << 20) as f64;

/// The soak's load: 10 senders, each one request at a time at 40 per
/// second (400/s in all) for at most 15 s, every 10th a repeat. One request
/// at a time: a sender's pace is bounded by the ack latency (a group commit),
/// so the load is spread over several.
const SOAK_SENDERS: u64 = 10;
const SOAK_PER_SENDER_PER_SECOND: u64 = 40;
const SOAK_SECONDS: u64 = 15;
/// Requests answered before the first measurement: the allocator's arenas,
/// the runtime's threads, both connection pools and the store's first pages
/// are in place by then (≈ 2.5 s of the load).
const SOAK_WARMUP: usize = 1000;
const SOAK_MAX_CONCURRENCY: usize = 8;
/// What may stay in memory beyond the page cache's share of the data
/// written: the dedupe map (≈ 30 bytes per key, some 6000 keys: ≈ 0.2 MiB,
/// doubled by a rehash), buffers of the connections open, and allocator
/// slack that no limit governs. 16 MiB is two orders above the map.
const SOAK_RSS_SLACK: u64 = 16 << 20;

/// A bounded soak: a steady signed load, one request in ten a repeat of an
/// earlier event. Every repeat is answered as a duplicate with the original
/// id, every event delivered exactly once, and the process does not grow:
/// descriptors stay within its two connection pools, memory within what the
/// store caches of the data written, and once the load stops the
/// connections go back to their idle level.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_with_ten_percent_duplicates_keeps_memory_and_descriptors_flat() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let _alone = crate::support::machine_to_myself().await;

    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let config = write_config(
        dir.path(),
        &format!(
            "{}{}destination = \"{}\"\nmax_concurrency = {SOAK_MAX_CONCURRENCY}\n",
            server_section(&dir.path().join("data")),
            standard_source("demo"),
            dest.url()
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    let pid = server.child.id();
    let db = dir.path().join("data").join("hookinbox.redb");
    let db_bytes = || std::fs::metadata(&db).unwrap().len();
    let idle_fds = open_fds(pid);

    let http = client();
    let answered = Arc::new(AtomicUsize::new(0));
    let load_starts = Instant::now();
    let load = crate::support::Window::of(Duration::from_secs(SOAK_SECONDS));
    let mut senders = tokio::task::JoinSet::new();
    for sender in 0..SOAK_SENDERS {
        let (http, url, answered) = (http.clone(), server.url("/in/demo"), answered.clone());
        senders.spawn(async move {
            let mut tick =
                tokio::time::interval(Duration::from_secs(1) / SOAK_PER_SENDER_PER_SECOND as u32);
            // Behind schedule (a slow moment on the machine): carry on at
            // the same pace rather than send a burst to catch up.
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut mine: Vec<(String, u64, String)> = Vec::new();
            let mut repeats = 0usize;
            let mut x = sender.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for i in 0..SOAK_PER_SENDER_PER_SECOND * SOAK_SECONDS {
                tick.tick().await;
                if load.is_over() {
                    break;
                }
                if i % 10 == 9 {
                    // A repeat of an earlier event of this sender, body and all.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (event_id, n, original) = &mine[(x % mine.len() as u64) as usize];
                    let body = small_body(*n);
                    let a = post(&http, &url, &standard_headers(event_id, &body), body).await;
                    assert_eq!(a.status, 200, "{event_id}: {:?}", a.json);
                    assert!(a.is_duplicate(), "repeat of {event_id}: {:?}", a.json);
                    assert_eq!(a.id(), original, "repeat of {event_id}");
                    repeats += 1;
                } else {
                    let n = sender * 1_000_000 + i;
                    let event_id = format!("soak_{n}");
                    let body = small_body(n);
                    let a = post(&http, &url, &standard_headers(&event_id, &body), body).await;
                    assert_eq!(a.status, 200, "{event_id}: {:?}", a.json);
                    assert!(!a.is_duplicate(), "{event_id}: {:?}", a.json);
                    mine.push((event_id, n, a.id().to_owned()));
                }
                answered.fetch_add(1, Ordering::SeqCst);
            }
            (mine, repeats)
        });
    }

    // First measurement once the process has warmed up under the load.
    eventually(
        &format!("{SOAK_WARMUP} requests answered (the warm-up)"),
        Duration::from_secs(SOAK_SECONDS),
        Duration::from_millis(20),
        async || match answered.load(Ordering::SeqCst) {
            n if n >= SOAK_WARMUP => Ok(()),
            n => Err(format!("{n} requests answered")),
        },
    )
    .await;
    let (rss_start, fds_start, db_start) = (rss_bytes(pid), open_fds(pid), db_bytes());

    let results = tokio::time::timeout(Duration::from_secs(SOAK_SECONDS + 30), senders.join_all())
        .await
        .expect("the senders did not finish");
    let load_seconds = load_starts.elapsed().as_secs_f64();
    // The second measurement, at the end of the load: every connection
    // still open, the deliveries still catching up.
    let (rss_end, fds_end, db_end) = (rss_bytes(pid), open_fds(pid), db_bytes());
    let repeats: usize = results.iter().map(|(_, r)| r).sum();
    let acked: Vec<(String, String)> = results
        .into_iter()
        .flat_map(|(mine, _)| mine)
        .map(|(event_id, _, id)| (event_id, id))
        .collect();

    // Every event reaches the app, each exactly once: a repeat is never
    // delivered again (the app is healthy, so nothing is retried either).
    wait_delivered(&dest, &server, &acked, Duration::from_secs(60)).await;
    let received = dest.received();
    assert_eq!(
        received.len(),
        acked.len(),
        "{} deliveries of {} events",
        received.len(),
        acked.len()
    );
    // The third, once everything is delivered.
    let (rss_drained, db_drained) = (rss_bytes(pid), db_bytes());
    let delivered_after = load_starts.elapsed().as_secs_f64();

    // The load has stopped: the senders' keep-alive connections close, and
    // the process is back to its idle descriptors plus the delivery pool's
    // idle connections (reqwest keeps up to `pool_max_idle_per_host =
    // max_concurrency` of them for 90 s).
    drop(http);
    let idle_bound = idle_fds + SOAK_MAX_CONCURRENCY;
    let fds_idle = eventually(
        &format!(
            "the descriptors are back to idle ({idle_fds} + {SOAK_MAX_CONCURRENCY} pooled) \
             after the load stopped"
        ),
        Duration::from_secs(10),
        Duration::from_millis(50),
        async || match open_fds(pid) {
            n if n <= idle_bound => Ok(n),
            n => Err(format!("{n} descriptors open")),
        },
    )
    .await;

    println!(
        "soak: {} events + {repeats} repeats in {load_seconds:.1} s ({:.0} requests/s); \
         all delivered {delivered_after:.1} s after the load began; RSS start {:.1} MiB \
         end {:.1} MiB delivered {:.1} MiB; database start {:.1} MiB end {:.1} MiB \
         delivered {:.1} MiB; fds idle {idle_fds} start {fds_start} end {fds_end} \
         after {fds_idle}; {:.1} s in all",
        acked.len(),
        (acked.len() + repeats) as f64 / load_seconds,
        rss_start as f64 / MIB,
        rss_end as f64 / MIB,
        rss_drained as f64 / MIB,
        db_start as f64 / MIB,
        db_end as f64 / MIB,
        db_drained as f64 / MIB,
        started.elapsed().as_secs_f64()
    );
    // Each sender repeats its 10th, 20th, … request: of n requests, ⌊n/10⌋.
    let requests = acked.len() + repeats;
    assert!(
        repeats >= requests / 10 - SOAK_SENDERS as usize,
        "{repeats} repeats of {requests} requests: not one in ten"
    );
    // Every descriptor the end has beyond the start is a connection: one of
    // the delivery pool's (at most max_concurrency attempts in flight, each
    // on its own connection) or an ingest keep-alive connection (each
    // sender has one request in flight at a time). The database, listeners,
    // log pipe and runtime are open from the start.
    let fd_growth = fds_end.saturating_sub(fds_start);
    assert!(
        fd_growth <= SOAK_MAX_CONCURRENCY + SOAK_SENDERS as usize,
        "descriptors grew by {fd_growth} ({fds_start} → {fds_end})"
    );
    // redb's page cache (up to 256 MiB) keeps pages of what was written, so
    // memory may grow by the database's growth; past that only the slack.
    for (when, rss, db) in [
        ("end", rss_end, db_end),
        ("delivered", rss_drained, db_drained),
    ] {
        let rss_growth = rss.saturating_sub(rss_start);
        let rss_bound = db.saturating_sub(db_start) + SOAK_RSS_SLACK;
        assert!(
            rss_growth <= rss_bound,
            "RSS grew by {:.1} MiB by {when}, bound {:.1} MiB",
            rss_growth as f64 / MIB,
            rss_bound as f64 / MIB
        );
    }
}
