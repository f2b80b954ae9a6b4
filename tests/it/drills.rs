//! Fault drills on the real binary: the disk fills up and is freed again
//! while providers send and the app receives deliveries.
//!
//! No root needed: the child runs with a soft `RLIMIT_FSIZE` (writes past it
//! fail with EFBIG, as on a full disk) and a hard limit of infinity, so the
//! test can "free the disk" by raising the soft limit with `prlimit(2)`
//! while the process runs.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookinbox::store::schema::{AttemptClass, Status};
use hookinbox::store::{Store, StoreOptions};

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, client, post, read_all, server_section, standard_headers, standard_source,
    write_config,
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

/// A ≈96 KiB JSON body that LZ4 cannot shrink (hex of a cheap PRNG stream).
fn incompressible_body(n: u64) -> Vec<u8> {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut pad = String::with_capacity(96 << 10);
    while pad.len() < 96 << 10 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pad.push_str(&format!("{x:016x}"));
    }
    format!("{{\"type\":\"drill.big\",\"n\":{n},\"pad\":\"{pad}\"}}").into_bytes()
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
    let deadline = Instant::now() + limit;
    loop {
        let (status, body) = readyz(http, server).await;
        if status == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "/readyz still {status} after {limit:?} (wanted {want}): {body}\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 16 senders post 96 KiB events until each has been refused 4 times
/// (bounded by count and time), so that many batches fail while deliveries
/// go on. Returns the (event id, hookinbox id) of every 2xx.
async fn fill_disk(server: &BinaryServer, tag: &str) -> Vec<(String, String)> {
    let http = client();
    let url = server.url("/in/demo");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut senders = Vec::new();
    for sender in 0..16u64 {
        let (http, url, acked, refused) =
            (http.clone(), url.clone(), acked.clone(), refused.clone());
        let tag = tag.to_owned();
        senders.push(tokio::spawn(async move {
            use std::sync::atomic::Ordering;
            let mut mine = 0;
            for i in 0..60u64 {
                if mine >= 4 || Instant::now() > deadline {
                    break;
                }
                let n = sender * 1000 + i;
                let id = format!("{tag}_{n}");
                let body = incompressible_body(n);
                let a = post(&http, &url, &standard_headers(&id, &body), body).await;
                match a.status {
                    200 => acked.lock().unwrap().push((id, a.id().to_owned())),
                    503 => {
                        assert_eq!(a.json["error"], "store_unavailable", "{:?}", a.json);
                        assert!(a.headers.contains_key("retry-after"));
                        refused.fetch_add(1, Ordering::SeqCst);
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
    assert!(
        refused.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the disk never filled up"
    );
    let acked = acked.lock().unwrap().clone();
    assert!(
        !acked.is_empty(),
        "nothing was stored before the disk filled"
    );
    acked
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

    let mut acked = fill_disk(&server, "full").await;
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

    // Every acked event reaches the app, without a restart.
    let want: HashSet<String> = acked.iter().map(|(_, id)| id.clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen: HashSet<String> = dest
            .received()
            .iter()
            .filter(|r| r.answered == 200)
            .map(|r| r.header("webhook-id").to_owned())
            .collect();
        let missing: Vec<&String> = want.difference(&seen).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} acked events never delivered, e.g. {:?}\n{}",
            missing.len(),
            want.len(),
            &missing[..missing.len().min(5)],
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
        assert_eq!(e.state.status, Status::Delivered, "{event_id}");
    }
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
    let acked = fill_disk(&server, "before").await;
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
        let body = incompressible_body(500_000 + n);
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
    let big = incompressible_body(999_999);
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
