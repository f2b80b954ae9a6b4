//! `--listeners N`: what event streams cost ingest. The same load into a
//! server with no stream open and with N open (`GET /api/events/stream`, as
//! `hookinbox listen`, `events tail` and the dashboard's live mode read it),
//! alternating, each on an empty store (or on `--data DIR`, preloaded to
//! `--preload N`); then how many events each listener got and how long
//! after the load the slowest had them all.
//!
//! The listeners run in this process, as plain HTTP/1.1 readers that only
//! count the events in what arrives (no JSON parsing), so their own CPU is
//! small; it is on the same two cores all the same, so the table also
//! gives the CPU per event of the server and of this process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Args, Server, TOKEN, load, ms, requests, unix_now};

/// One reader of the stream: counts `event: event` lines until stopped.
async fn listen(
    admin: SocketAddr,
    query: &'static str,
    got: Arc<AtomicU64>,
    ready: tokio::sync::mpsc::Sender<()>,
) {
    let mut socket = tokio::net::TcpStream::connect(admin)
        .await
        .expect("connect");
    let request = format!(
        "GET /api/events/stream{query} HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let needle = b"event: event\n";
    let finder = memchr::memmem::Finder::new(needle);
    let mut buf = vec![0u8; 256 * 1024];
    // Bytes kept from the last read: a needle may straddle two reads.
    let mut carry = 0;
    let mut said_ready = false;
    loop {
        let n = match socket.read(&mut buf[carry..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let end = carry + n;
        if !said_ready {
            said_ready = true;
            let _ = ready.send(()).await;
        }
        let found = finder.find_iter(&buf[..end]).count();
        got.fetch_add(found as u64, Ordering::Relaxed);
        carry = (needle.len() - 1).min(end);
        buf.copy_within(end - carry..end, 0);
    }
}

/// CPU time of process `pid` (`"self"` or a number), all threads, in µs:
/// utime + stime of `/proc/<pid>/stat`, at the kernel's 100 Hz tick.
fn cpu_us(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) * 10_000
}

/// `kept`: a store (`--data`, preloaded to `--preload`) and how many events
/// it holds, which every run uses instead of an empty one.
pub(super) async fn run(
    args: &Args,
    listeners: usize,
    payload: bool,
    kept: Option<(&std::path::Path, usize)>,
) {
    let query: &'static str = if payload { "?payload=true" } else { "" };
    let scratch = tempfile::tempdir().unwrap();
    println!(
        "hookinbox event stream bench: {listeners} listener(s){} against none, {} s runs × {}, {} stored at the start, {} cores",
        if payload { " with payloads" } else { "" },
        kept.map_or(0, |(_, n)| n),
        args.seconds,
        args.runs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| conns | listeners | events/s | p50 ms | p99 ms | max ms | longest pause ms | failed | server CPU µs/event | load generator + listeners CPU µs/event | events each listener got | slowest caught up after the load |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let tag = unix_now();
    let ratios = super::paired(args, async |conns, run, m| {
        let n = if m == 1 { listeners } else { 0 };
        let dir = scratch.path().join(format!("listeners-{conns}-{run}-{m}"));
        std::fs::create_dir_all(&dir).unwrap();
        let data = kept.map_or_else(|| dir.join("data"), |(d, _)| d.to_owned());
        let server = Server::start(&args.bin, &dir, &data);
        server.wait_ready(Instant::now());
        let counts: Vec<Arc<AtomicU64>> = (0..n).map(|_| Arc::default()).collect();
        let (ready_tx, mut ready) = tokio::sync::mpsc::channel(n.max(1));
        let tasks: Vec<_> = counts
            .iter()
            .map(|got| tokio::spawn(listen(server.admin, query, got.clone(), ready_tx.clone())))
            .collect();
        for _ in 0..n {
            ready.recv().await.expect("a listener connected");
        }
        let reqs = requests(
            &server,
            &format!("l{tag}_{conns}_{run}_{m}"),
            conns,
            args.seconds,
            0,
        );
        let cpu0 = (cpu_us(&server.pid), cpu_us("self"));
        let r = load(server.ingest, reqs, args.seconds).await;
        let cpu1 = (cpu_us(&server.pid), cpu_us("self"));
        let loaded = Instant::now();
        // Every listener gets every event stored: bounded wait.
        let mut caught_up = None;
        while n > 0 && loaded.elapsed() < Duration::from_secs(60) {
            if counts
                .iter()
                .all(|c| c.load(Ordering::Relaxed) >= r.created)
            {
                caught_up = Some(loaded.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let got: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let (least, most) = (
            got.iter().min().copied().unwrap_or(0),
            got.iter().max().copied().unwrap_or(0),
        );
        let acked = r.acked.max(1) as f64;
        println!(
            "| {conns} | {n} | {:.0} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} |",
            r.rate(),
            ms(r.p50),
            ms(r.p99),
            ms(r.max),
            r.stall.as_millis(),
            r.failed,
            (cpu1.0 - cpu0.0) as f64 / acked,
            (cpu1.1 - cpu0.1) as f64 / acked,
            match n {
                0 => "-".to_owned(),
                _ if least == most => format!("{least} of {}", r.created),
                _ => format!("{least}–{most} of {}", r.created),
            },
            match (n, caught_up) {
                (0, _) => "-".to_owned(),
                (_, Some(t)) => format!("{} ms", t.as_millis()),
                (_, None) => "not within 60 s".to_owned(),
            },
        );
        for task in tasks {
            task.abort();
        }
        server.stop();
        r.rate()
    })
    .await;
    println!();
    for (conns, ratio) in &ratios {
        println!(
            "{conns} connections: with {listeners} listeners / with none, events/s: {ratio:.2}"
        );
    }
    println!();
    println!(
        "rerun: cargo bench --bench http -- --listeners {listeners}{}{} --seconds {} --runs {} --connections {}",
        if payload { " --payload" } else { "" },
        kept.map_or(String::new(), |(d, n)| format!(
            " --preload {n} --data {}",
            d.display()
        )),
        args.seconds,
        args.runs,
        args.connections
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
}
