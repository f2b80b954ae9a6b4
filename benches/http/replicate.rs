//! `--replicate`: the same HTTP load with the log replicated to a local
//! three-node JetStream cluster (R3, its nodes on the same two cores; or
//! one node, R1, with `--replicas 1`),
//! against none, alternating in one run, each with its jobs per commit
//! and commits per second (a commit is a frame: one message of the
//! stream) and the bytes a frame holds and goes to the stream as, per
//! event; with `--compression zstd,none`, each codec in turn in one run
//! (the before and after of frame compression); then a primary and its
//! standby:
//! a new standby's catch-up from the newest snapshot and the stream after
//! `--catch-up` events, and its takeover after the primary is killed with
//! SIGKILL under load.
//!
//! Rerun: cargo bench --bench http -- --replicate [--quick] [--seconds 20]
//!        [--runs 3] [--connections 128] [--catch-up 1000000] [--replicas 1]
//!        [--compression zstd,none]

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Args, Cost, Server, get, load, ms, prepare, requests, support, unix_now};

#[path = "../support/nats.rs"]
mod nats;

/// The lease of the takeover drill (the issue's: 5 s).
const LEASE_SECONDS: u64 = 5;

/// A node's `[replication]`; `snapshots`: its `snapshot_interval`.
fn section(urls: &str, stream: &str, role: &str, node: &str, snapshots: &str) -> String {
    section_with(urls, stream, role, node, snapshots, "zstd")
}

/// [`section`] with its frames' `compression`.
fn section_with(
    urls: &str,
    stream: &str,
    role: &str,
    node: &str,
    snapshots: &str,
    compression: &str,
) -> String {
    let replicas = REPLICAS.load(std::sync::atomic::Ordering::Relaxed);
    format!(
        "[replication]\nurl = \"{urls}\"\nstream = \"{stream}\"\nreplicas = {replicas}\nrole = \"{role}\"\n\
         node = \"{node}\"\nlease = \"{LEASE_SECONDS}s\"\nsnapshot_interval = \"{snapshots}\"\n\
         compression = \"{compression}\"\n"
    )
}

/// The stream's replicas, and the NATS nodes started (`--replicas`).
static REPLICAS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(3);

pub(super) async fn run(args: &Args, catch_up: usize) {
    let replicas = support::Flags::from_env().value("--replicas", 3, 3);
    assert!(replicas == 1 || replicas == 3, "--replicas 1 or 3");
    REPLICAS.store(replicas, std::sync::atomic::Ordering::Relaxed);
    let scratch = tempfile::tempdir().unwrap();
    let nats = nats::Nats::start(replicas).await;
    println!(
        "hookinbox replication bench: {replicas} nats-server node(s) (R{replicas}) on this machine's {} cores, {} s runs × {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        args.seconds,
        args.runs
    );
    println!();
    let flags = support::Flags::from_env();
    let codecs: Vec<String> = flags
        .text("--compression")
        .unwrap_or("zstd")
        .split(',')
        .map(str::to_owned)
        .collect();
    println!(
        "| conns | log replicated | events/s | p50 ms | p99 ms | max ms | longest pause ms | failed | jobs/commit | commits/s | frame B/event | sent B/event | server CPU µs/event |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let tag = unix_now();
    // (conns, codec, replicated / not) for each run.
    let mut ratios: Vec<(usize, String, f64)> = Vec::new();
    for &conns in &args.connections {
        for run in 0..args.runs {
            let mut without = 0.0;
            for (m, codec) in std::iter::once(None)
                .chain(codecs.iter().map(Some))
                .enumerate()
            {
                let dir = scratch.path().join(format!("ratio-{conns}-{run}-{m}"));
                std::fs::create_dir_all(&dir).unwrap();
                // No snapshot during a run: one copies the whole database
                // (measured on its own below).
                let extra = codec.map_or_else(String::new, |codec| {
                    section_with(
                        &nats.urls,
                        &format!("ratio_{conns}_{run}_{m}"),
                        "primary",
                        "a",
                        "1h",
                        codec,
                    )
                });
                let server = Server::start_with(&args.bin, &dir, &dir.join("data"), &extra);
                server.wait_ready(Instant::now());
                let reqs = requests(
                    &server,
                    &format!("r{tag}_{conns}_{run}_{m}"),
                    conns,
                    args.seconds,
                    0,
                );
                let before = server.batches();
                let shipped_before = shipped(&server);
                let cost_before = Cost::of(&server.pid);
                let r = load(server.ingest, reqs, args.seconds).await;
                let cpu = Cost::of(&server.pid)
                    .process_cpu_ns
                    .saturating_sub(cost_before.process_cpu_ns);
                let after = server.batches();
                let shipped_after = shipped(&server);
                // A commit is a frame: with replication, a message each.
                let commits = after.1 - before.1;
                let events = r.created.max(1) as f64;
                println!(
                    "| {conns} | {} | {:.0} | {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.1} |",
                    codec.map_or_else(|| "no".to_owned(), |c| format!("R{replicas} {c}")),
                    r.rate(),
                    ms(r.p50),
                    ms(r.p99),
                    ms(r.max),
                    r.stall.as_millis(),
                    r.failed,
                    (after.0 - before.0) / commits.max(1.0),
                    commits / args.seconds as f64,
                    (shipped_after.0 - shipped_before.0) / events,
                    (shipped_after.1 - shipped_before.1) / events,
                    cpu as f64 / 1e3 / events,
                );
                server.stop();
                match codec {
                    None => without = r.rate(),
                    Some(codec) => ratios.push((conns, codec.clone(), r.rate() / without.max(1.0))),
                }
            }
        }
    }
    println!();
    for (conns, codec, ratio) in &ratios {
        println!("{conns} connections, frames {codec}: replicated / not, events/s: {ratio:.2}");
    }
    catch_up_and_take_over(args, &nats.urls, scratch.path(), catch_up).await;
    println!();
    println!(
        "rerun: cargo bench --bench http -- --replicate --seconds {} --runs {} --connections {} --catch-up {catch_up} --replicas {replicas} --compression {}",
        args.seconds,
        args.runs,
        args.connections
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        codecs.join(",")
    );
}

/// (frame bytes, sent bytes) the server has shipped to the stream so far.
fn shipped(server: &Server) -> (f64, f64) {
    let [frame, sent] = server.metrics([
        "hookinbox_replication_frame_bytes_total",
        "hookinbox_replication_sent_bytes_total",
    ]);
    (frame, sent)
}

/// `GET /api/replication` of a server: (last frame, role).
fn replication(server: &Server) -> Option<(u64, String)> {
    let (status, body) = get(server.admin, "/api/replication").ok()?;
    if status != 200 {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(&body).ok()?;
    Some((
        json["last_frame"].as_u64()?,
        json["role"].as_str()?.to_owned(),
    ))
}

async fn catch_up_and_take_over(args: &Args, urls: &str, scratch: &Path, events: usize) {
    let dir = |name: &str| {
        let d = scratch.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    let (p, s) = (dir("primary"), dir("standby"));
    let primary = Server::start_with(
        &args.bin,
        &p,
        &p.join("data"),
        &section(urls, "drill", "primary", "a", "1h"),
    );
    primary.wait_ready(Instant::now());
    let conns = 128;
    let reqs = prepare(
        primary.ingest,
        &format!("c{}", unix_now()),
        conns,
        events / conns + 1,
        0,
    );
    let loaded = load(primary.ingest, reqs, 3_600).await;
    let stored = loaded.created;
    println!();
    println!(
        "{stored} events into a replicating primary at {conns} connections: {:.0} events/s, p99 {} ms ({} failed)",
        loaded.rate(),
        ms(loaded.p99),
        loaded.failed
    );
    // Restarted to snapshot soon: the snapshot then covers every frame.
    primary.stop();
    let primary = Server::start_with(
        &args.bin,
        &p,
        &p.join("data"),
        &section(urls, "drill", "primary", "a", "10s"),
    );
    primary.wait_ready(Instant::now());
    let restarted = Instant::now();
    let (last, _) = replication(&primary).expect("the primary's replication status");
    let settings = hookinbox::replicate::StreamSettings {
        urls: urls.to_owned(),
        stream: "drill".into(),
        replicas: REPLICAS.load(std::sync::atomic::Ordering::Relaxed),
        creds_file: None,
        token: None,
        ca: None,
        ack_timeout: Duration::from_secs(2),
        budget: Duration::from_secs(10),
        max_part: None,
        compression: hookinbox::words::FrameCodec::Zstd,
    };
    let snapshots = hookinbox::replicate::Snapshots::connect(&settings)
        .await
        .unwrap();
    let snapshot = loop {
        if let Ok(Some(s)) = snapshots.list().await.map(|mut l| l.pop())
            && s.lsn >= last
        {
            break s;
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(900),
            "no snapshot"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // The interval is 10 s; the rest is the copy and the upload.
    println!(
        "snapshot at frame {}: {:.1} MiB, {:.0} B per event, in the bucket {:.1} s after the restart (interval 10 s)",
        snapshot.lsn,
        snapshot.bytes as f64 / (1u64 << 20) as f64,
        snapshot.bytes as f64 / stored.max(1) as f64,
        restarted.elapsed().as_secs_f64()
    );
    // A few more events after the snapshot: the standby applies them from
    // the stream.
    let tail = prepare(primary.ingest, &format!("t{}", unix_now()), 16, 100, 0);
    load(primary.ingest, tail, 60).await;
    let (last, _) = replication(&primary).unwrap();

    let started = Instant::now();
    let standby = Server::start_with(
        &args.bin,
        &s,
        &s.join("data"),
        &section(urls, "drill", "standby", "b", "1h"),
    );
    loop {
        if replication(&standby).is_some_and(|(applied, _)| applied >= last) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(1800), "no catch-up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    println!(
        "a new standby, empty data dir: caught up with {stored} events (snapshot + {} frames after it) in {:.1} s from its start: {:.0} events/s",
        last - snapshot.lsn,
        took.as_secs_f64(),
        stored as f64 / took.as_secs_f64()
    );

    // Takeover: the primary killed under load.
    let reqs = prepare(primary.ingest, &format!("k{}", unix_now()), 64, 20_000, 0);
    let addr = primary.ingest;
    let under_load = tokio::spawn(async move { load(addr, reqs, 30).await });
    tokio::time::sleep(Duration::from_secs(3)).await;
    primary.kill();
    let killed = Instant::now();
    under_load.abort();
    loop {
        if let Ok((200, _)) = get(standby.admin, "/readyz") {
            break;
        }
        assert!(killed.elapsed() < Duration::from_secs(120), "no takeover");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "takeover: the standby ready {:.2} s after the primary was killed under load (lease {LEASE_SECONDS} s)",
        killed.elapsed().as_secs_f64()
    );
    standby.stop();
}
