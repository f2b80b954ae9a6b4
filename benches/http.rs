//! Verified durable events per second over HTTP, as a user meets hookinbox.
//!
//! The release binary runs as a child process: one Standard Webhooks source,
//! no destination, log level warn. A load generator in this process keeps
//! `--connections` keep-alive connections busy over loopback, each sending
//! pre-signed ≈1.2 KB Stripe-like events one at a time (the next request
//! leaves when the answer arrives); `--dup` percent of them repeat an earlier
//! request byte for byte. The generator runs on two threads, like `wrk -t2`,
//! on the same two cores as the server. Each run lasts `--seconds` and prints
//! events/s, latency p50/p99/max, the longest pause in which no answer
//! arrived, the mean commit batch, the server's disk writes and writer CPU
//! per event, write amplification, the database file's disk (allocated
//! blocks) per stored event and RSS.
//!
//! Then the server stops and the same store, opened in this process, takes
//! the same load through `Store::ingest` (no HTTP, no signature check): the
//! HTTP path's share is the gap between the two. With `--crash`, the server
//! is killed with SIGKILL under load and restarted, and the time to a
//! listening socket and to `/readyz` 200 is printed. With `--space`, every
//! table is walked after the runs: the bytes its entries take against the
//! file's disk and length. With `--replicate`, the log replicated to a local NATS
//! JetStream cluster against none, a standby's catch-up and its takeover
//! (`http/replicate.rs`). With `--listeners N`, N event streams open
//! against none (`http/listeners.rs`). With `--telemetry R`, the server
//! traces events (`[telemetry]`, `sample_ratio = R`) to an OTLP sink in
//! this process that answers 200 and reads nothing (`--otlp-down`: to a
//! port nothing listens on, every export refused).
//!
//! Rerun: cargo bench --bench http -- [--quick] [--seconds 20] [--runs 3]
//!        [--connections 64,128] [--dup 0,10] [--preload 5000000 --data DIR]
//!        [--crash] [--space] [--http-only] [--bin target/release/hookinbox]
//!        [--replicate [--catch-up 1000000]] [--listeners 10 [--payload]]
//!        [--telemetry 1.0 [--otlp-down]]
//! `--data DIR` keeps the store (preloaded once, topped up to `--preload`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hookinbox::store::MAX_BATCH;
use hookinbox::verify::Verifier;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;
#[allow(dead_code)]
#[path = "support/drive.rs"]
mod drive;
#[path = "support/otlp.rs"]
mod otlp;
#[path = "http/replicate.rs"]
mod replicate;
#[path = "http/listeners.rs"]
mod listeners;

use drive::{Cost, close, drive, file_length, file_size, open};
use support::{
    Flags, SECRET, event_id, free_port, make_events, signed_headers, standard_verifier,
    stripe_like_body, unix_now,
};

const SOURCE: &str = "stripe";
const TOKEN: &str = "bench-admin-token-0123456789abcdef";
/// Requests prepared per run: enough for this many events/s over the run
/// (at 45,000 the quiet runs of issue 48 sent them all early; ≈ 1.4 KB
/// each, so 60,000 over 10 s holds ≈ 0.9 GB).
const PREPARED_RATE: usize = 60_000;
/// Completions are counted in buckets this long to find pauses.
const BUCKET: Duration = Duration::from_millis(10);

struct Args {
    seconds: u64,
    runs: usize,
    connections: Vec<usize>,
    dups: Vec<usize>,
    preload: usize,
    data: Option<PathBuf>,
    crash: bool,
    /// Walk every table after the runs: bytes stored vs the file's size.
    space: bool,
    /// Skip the store-level comparison.
    http_only: bool,
    /// The binary to run (another build, for a before/after pair).
    bin: PathBuf,
    /// Replicated against not, and a standby's catch-up and takeover.
    replicate: bool,
    /// Events a new standby catches up with (`--replicate`).
    catch_up: usize,
    /// Event streams open against none (`--listeners N`, `--payload`).
    listeners: usize,
    payload: bool,
}

fn list(flags: &Flags, flag: &str, default: &[usize]) -> Vec<usize> {
    flags.text(flag).map_or_else(
        || default.to_vec(),
        |v| {
            v.split(',')
                .map(|n| n.trim().parse().expect(flag))
                .collect()
        },
    )
}

impl Args {
    /// Without --preload or --data every run starts from an empty store.
    fn fresh(&self) -> bool {
        self.preload == 0 && self.data.is_none()
    }
}

fn args() -> Args {
    let flags = Flags::from_env();
    Args {
        seconds: flags.value("--seconds", 5, 20) as u64,
        runs: flags.value("--runs", 1, 3),
        connections: list(
            &flags,
            "--connections",
            if std::env::args().any(|a| a == "--replicate" || a == "--listeners") {
                &[128]
            } else {
                &[64, 128]
            },
        ),
        dups: list(&flags, "--dup", &[0, 10]),
        preload: flags.value("--preload", 0, 0),
        data: flags.text("--data").map(PathBuf::from),
        crash: std::env::args().any(|a| a == "--crash"),
        space: std::env::args().any(|a| a == "--space"),
        http_only: std::env::args().any(|a| a == "--http-only"),
        replicate: std::env::args().any(|a| a == "--replicate"),
        catch_up: flags.value("--catch-up", 50_000, 1_000_000),
        listeners: flags.value("--listeners", 0, 0),
        payload: std::env::args().any(|a| a == "--payload"),
        bin: PathBuf::from(
            flags
                .text("--bin")
                .unwrap_or(env!("CARGO_BIN_EXE_hookinbox")),
        ),
    }
}

/// The release binary as a child process on two free loopback ports.
struct Server {
    child: Child,
    ingest: SocketAddr,
    admin: SocketAddr,
    pid: String,
}

fn write_config(
    dir: &Path,
    data: &Path,
    ingest: SocketAddr,
    admin: SocketAddr,
    extra: &str,
) -> PathBuf {
    let token = dir.join("admin.token");
    std::fs::write(&token, TOKEN).unwrap();
    let path = dir.join("hookinbox.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"{ingest}\"\nadmin_listen = \"{admin}\"\ndata_dir = \"{}\"\n\
             [log]\nlevel = \"warn\"\n[admin]\ntoken_file = \"{}\"\n\
             [[source]]\nname = \"{SOURCE}\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n{extra}",
            data.display(),
            token.display()
        ),
    )
    .unwrap();
    path
}

impl Server {
    fn start(bin: &Path, dir: &Path, data: &Path) -> Server {
        Server::start_with(bin, dir, data, TELEMETRY.get().map_or("", String::as_str))
    }

    /// With `extra` at the end of its config (a section of its own).
    fn start_with(bin: &Path, dir: &Path, data: &Path, extra: &str) -> Server {
        let (ingest, admin) = (free_port(), free_port());
        let config = write_config(dir, data, ingest, admin, extra);
        let child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start hookinbox");
        let pid = child.id().to_string();
        Server {
            child,
            ingest,
            admin,
            pid,
        }
    }

    /// Waits for `/readyz` 200; returns (first accepted connection, ready).
    fn wait_ready(&self, started: Instant) -> (Duration, Duration) {
        let mut listening = None;
        loop {
            if let Ok((status, _)) = get(self.admin, "/readyz") {
                listening.get_or_insert_with(|| started.elapsed());
                if status == 200 {
                    return (listening.unwrap(), started.elapsed());
                }
            }
            assert!(started.elapsed() < Duration::from_secs(1800), "not ready");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// (sum, count) of the commit batch size histogram.
    fn batches(&self) -> (f64, f64) {
        let [sum, count] = self.metrics([
            "hookinbox_commit_batch_size_sum",
            "hookinbox_commit_batch_size_count",
        ]);
        (sum, count)
    }

    /// The values of unlabelled series, from one scrape (0 for one absent).
    fn metrics<const N: usize>(&self, names: [&str; N]) -> [f64; N] {
        let (_, text) = get(self.admin, "/metrics").expect("metrics");
        names.map(|name| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        })
    }

    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        kib / 1024.0
    }

    fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap();
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// `[telemetry]` for every server `Server::start` starts (`--telemetry R`).
static TELEMETRY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// One admin GET with `Connection: close`: (status, body).
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    Ok((status, body))
}

/// One raw HTTP/1.1 request, signed now.
fn request(addr: SocketAddr, id: &str, i: usize) -> Arc<[u8]> {
    let body = stripe_like_body(id, i);
    let mut head = format!(
        "POST /in/{SOURCE} HTTP/1.1\r\nHost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in signed_headers(id, body.as_bytes(), unix_now()) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes.into()
}

/// Each connection's requests for one run; with `dup_percent`, that share
/// repeats the request sent five before it on the same connection, so the
/// original has been answered (and stored) first.
/// One run's requests at `conns` connections: enough for
/// [`PREPARED_RATE`] events/s over `seconds`, `dup` percent repeated.
fn requests(
    server: &Server,
    tag: &str,
    conns: usize,
    seconds: u64,
    dup: usize,
) -> Vec<Vec<Arc<[u8]>>> {
    let per_conn = PREPARED_RATE * seconds as usize / conns + 1;
    prepare(server.ingest, tag, conns, per_conn, dup)
}

/// Runs `one(conns, run, variant)` for variants 0 and 1, alternating,
/// `--runs` times at each `--connections`; returns each pair's ratio of
/// events/s (variant 1 over variant 0), with its connection count.
async fn paired(
    args: &Args,
    mut one: impl AsyncFnMut(usize, usize, usize) -> f64,
) -> Vec<(usize, f64)> {
    let mut ratios = Vec::new();
    for &conns in &args.connections {
        for run in 0..args.runs {
            let without = one(conns, run, 0).await;
            let with = one(conns, run, 1).await;
            ratios.push((conns, with / without.max(1.0)));
        }
    }
    ratios
}

fn prepare(
    addr: SocketAddr,
    tag: &str,
    connections: usize,
    per_connection: usize,
    dup_percent: usize,
) -> Vec<Vec<Arc<[u8]>>> {
    let threads = 2;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    (t..connections)
                        .step_by(threads)
                        .map(|c| {
                            let mut reqs: Vec<Arc<[u8]>> = Vec::with_capacity(per_connection);
                            for k in 0..per_connection {
                                let dup =
                                    k >= 5 && (k + 1) * dup_percent / 100 > k * dup_percent / 100;
                                if dup {
                                    reqs.push(reqs[k - 5].clone());
                                } else {
                                    let n = c * per_connection + k;
                                    reqs.push(request(addr, &format!("{tag}_{}", event_id(n)), n));
                                }
                            }
                            (c, reqs)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(usize, Vec<Arc<[u8]>>)> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort_by_key(|(c, _)| *c);
        all.into_iter().map(|(_, r)| r).collect()
    })
}

#[derive(Default)]
struct Answers {
    latencies_us: Vec<u32>,
    created: u64,
    duplicate: u64,
    failed: u64,
    /// The status of the first failed answer (0: the connection broke).
    failure: Option<u16>,
    ran_out: bool,
}

/// Sends `reqs` one at a time on one keep-alive connection until `deadline`.
async fn connection(
    addr: SocketAddr,
    reqs: Vec<Arc<[u8]>>,
    start: Instant,
    deadline: Instant,
    buckets: Arc<Vec<AtomicU32>>,
) -> Answers {
    let mut answers = Answers {
        latencies_us: Vec::with_capacity(reqs.len()),
        ..Answers::default()
    };
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        answers.failed += 1;
        return answers;
    };
    stream.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; 8192];
    let mut reqs = reqs.into_iter();
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let Some(req) = reqs.next() else {
            answers.ran_out = true;
            break;
        };
        let answer = match stream.write_all(&req).await {
            Ok(()) => read_response(&mut stream, &mut buf).await,
            Err(e) => Err(e),
        };
        let done = Instant::now();
        match answer {
            Ok(Answer::Stored) => answers.created += 1,
            Ok(Answer::Duplicate) => answers.duplicate += 1,
            Ok(Answer::Failed(status)) => {
                answers.failed += 1;
                answers.failure.get_or_insert(status);
            }
            // The server went away (the crash run kills it).
            Err(_) => {
                answers.failed += 1;
                answers.failure.get_or_insert(0);
                break;
            }
        }
        answers
            .latencies_us
            .push((done - now).as_micros().min(u32::MAX as u128) as u32);
        let b = ((done - start).as_nanos() / BUCKET.as_nanos()) as usize;
        if let Some(slot) = buckets.get(b) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    }
    answers
}

enum Answer {
    Stored,
    Duplicate,
    Failed(u16),
}

/// Reads one response (head and `content-length` body).
async fn read_response(
    stream: &mut tokio::net::TcpStream,
    buf: &mut [u8],
) -> std::io::Result<Answer> {
    let closed = || std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
    let mut have = 0;
    loop {
        let n = stream.read(&mut buf[have..]).await?;
        if n == 0 {
            return Err(closed());
        }
        have += n;
        let Some(end) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") else {
            assert!(have < buf.len(), "response head too large");
            continue;
        };
        let head = std::str::from_utf8(&buf[..end]).expect("head");
        let status: u16 = head[9..12].parse().expect("status");
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        let total = end + 4 + length;
        assert!(total <= buf.len(), "response too large");
        while have < total {
            let n = stream.read(&mut buf[have..]).await?;
            if n == 0 {
                return Err(closed());
            }
            have += n;
        }
        let body = &buf[end + 4..total];
        return Ok(match status {
            200 if body.windows(16).any(|w| w == b"\"duplicate\":true") => Answer::Duplicate,
            200 => Answer::Stored,
            other => Answer::Failed(other),
        });
    }
}

struct HttpRun {
    elapsed: Duration,
    acked: u64,
    created: u64,
    failed: u64,
    failure: Option<u16>,
    p50: Duration,
    p99: Duration,
    max: Duration,
    stall: Duration,
    ran_out: bool,
}

impl HttpRun {
    fn rate(&self) -> f64 {
        self.acked as f64 / self.elapsed.as_secs_f64()
    }
}

async fn load(addr: SocketAddr, reqs: Vec<Vec<Arc<[u8]>>>, seconds: u64) -> HttpRun {
    let limit = Duration::from_secs(seconds);
    let buckets: Arc<Vec<AtomicU32>> = Arc::new(
        (0..(limit.as_nanos() / BUCKET.as_nanos()) as usize + 100)
            .map(|_| AtomicU32::new(0))
            .collect(),
    );
    let start = Instant::now();
    let deadline = start + limit;
    let tasks: Vec<_> = reqs
        .into_iter()
        .map(|r| tokio::spawn(connection(addr, r, start, deadline, buckets.clone())))
        .collect();
    let mut all = Answers::default();
    for t in tasks {
        let a = t.await.unwrap();
        all.latencies_us.extend(a.latencies_us);
        all.created += a.created;
        all.duplicate += a.duplicate;
        all.failed += a.failed;
        all.failure = all.failure.or(a.failure);
        all.ran_out |= a.ran_out;
    }
    let elapsed = start.elapsed();
    all.latencies_us.sort_unstable();
    let lat = &all.latencies_us;
    let pct = |p: f64| Duration::from_micros(lat[((lat.len() - 1) as f64 * p) as usize] as u64);
    // The longest run of empty buckets between the first and last answer.
    let counts: Vec<u32> = buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
    let first = counts.iter().position(|&c| c > 0).unwrap_or(0);
    let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
    let (mut longest, mut current) = (0u32, 0u32);
    for &c in &counts[first..=last] {
        current = if c == 0 { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    HttpRun {
        elapsed,
        acked: all.created + all.duplicate,
        created: all.created,
        failed: all.failed,
        failure: all.failure,
        p50: pct(0.5),
        p99: pct(0.99),
        max: pct(1.0),
        stall: BUCKET * longest,
        ran_out: all.ran_out,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// Tops the store up to `preload` events through `Store::ingest`; returns
/// how many it holds.
async fn preload(data: &Path, target: usize, verifier: &Verifier) -> usize {
    let (store, writer) = open(data, MAX_BATCH);
    let mut stored = store.count().unwrap() as usize;
    if stored < target {
        let started = Instant::now();
        println!("preloading {} events…", target - stored);
        while stored < target {
            let n = 50_000.min(target - stored);
            let events = make_events(verifier, 1_000_000_000 + stored, n);
            stored += drive(&store, events, 256, Duration::from_secs(600))
                .await
                .events;
        }
        println!(
            "preloaded to {stored} in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    close(store, writer).await;
    stored
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = args();
    if let Some(ratio) = Flags::from_env().text("--telemetry") {
        let ratio: f64 = ratio.parse().expect("--telemetry takes a ratio, 0 to 1");
        // `--otlp-down`: a port nothing listens on, every export refused.
        let down = std::env::args().any(|a| a == "--otlp-down");
        let port = if down {
            free_port().port()
        } else {
            otlp::sink()
        };
        let section = format!(
            "[telemetry]\nendpoint = \"http://127.0.0.1:{port}\"\nsample_ratio = {ratio:?}\n"
        );
        TELEMETRY.set(section).unwrap();
        println!(
            "traced: [telemetry] sample_ratio = {ratio}, to {}",
            if down {
                "a loopback port nothing listens on"
            } else {
                "an OTLP sink on loopback"
            }
        );
    }
    if args.replicate {
        replicate::run(&args, args.catch_up).await;
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let data = args
        .data
        .clone()
        .unwrap_or_else(|| scratch.path().join("data"));
    std::fs::create_dir_all(&data).unwrap();
    let verifier = standard_verifier(SOURCE, &data);
    let mut stored = if args.preload > 0 {
        preload(&data, args.preload, &verifier).await
    } else {
        let (store, writer) = open(&data, MAX_BATCH);
        let n = store.count().unwrap() as usize;
        close(store, writer).await;
        n
    };
    if args.listeners > 0 {
        let kept = args.data.as_ref().map(|_| (data.as_path(), stored));
        listeners::run(&args, args.listeners, args.payload, kept).await;
        return;
    }
    let body = stripe_like_body(&event_id(0), 0).len();
    println!(
        "hookinbox HTTP bench: body ≈{body} B, {} s runs × {}, {stored} events stored at the start, {} cores",
        args.seconds,
        args.runs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| conns | dup % | stored before | events/s | p50 ms | p99 ms | max ms | longest pause ms | batch | disk B/event | write amp. | writer µs/event | file disk B/event | RSS MiB | server CPU µs/event |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut server = Server::start(&args.bin, scratch.path(), &data);
    server.wait_ready(Instant::now());
    let run_tag = unix_now();
    let mut summary: Vec<(usize, usize, f64)> = Vec::new();
    for &conns in &args.connections {
        for &dup in &args.dups {
            for run in 0..args.runs {
                if args.fresh() && stored > 0 {
                    server.stop();
                    std::fs::remove_dir_all(&data).unwrap();
                    std::fs::create_dir_all(&data).unwrap();
                    stored = 0;
                    server = Server::start(&args.bin, scratch.path(), &data);
                    server.wait_ready(Instant::now());
                }
                let reqs = requests(
                    &server,
                    &format!("h{run_tag}_{conns}_{dup}_{run}"),
                    conns,
                    args.seconds,
                    dup,
                );
                let (sum0, count0) = server.batches();
                let cost0 = Cost::of(&server.pid);
                let before = stored;
                let r = load(server.ingest, reqs, args.seconds).await;
                let cost1 = Cost::of(&server.pid);
                let (sum1, count1) = server.batches();
                stored += r.created as usize;
                let disk = cost1.disk_bytes.saturating_sub(cost0.disk_bytes) as f64;
                let cpu = cost1.writer_cpu_ns.saturating_sub(cost0.writer_cpu_ns) as f64;
                let process_cpu = cost1.process_cpu_ns.saturating_sub(cost0.process_cpu_ns) as f64;
                let acked = r.acked.max(1) as f64;
                println!(
                    "| {conns} | {dup} | {before} | {:.0}{} | {} | {} | {} | {} | {:.0} | {:.0} | {:.2} | {:.1} | {:.0} | {:.0} | {:.1} |",
                    r.rate(),
                    if r.failed > 0 {
                        format!(
                            " ({} failed, first: {:?})",
                            r.failed,
                            r.failure.unwrap_or(0)
                        )
                    } else if r.ran_out {
                        " (ran out of requests)".into()
                    } else {
                        String::new()
                    },
                    ms(r.p50),
                    ms(r.p99),
                    ms(r.max),
                    r.stall.as_millis(),
                    (sum1 - sum0) / (count1 - count0).max(1.0),
                    disk / acked,
                    disk / (acked * body as f64),
                    cpu / 1e3 / acked,
                    file_size(&data) as f64 / stored.max(1) as f64,
                    server.rss_mib(),
                    process_cpu / 1e3 / acked,
                );
                summary.push((conns, dup, r.rate()));
            }
        }
    }
    server.stop();
    if args.space {
        space(&data, stored);
    }

    if !args.http_only {
        stored = store_level(&args, &data, &verifier, &summary, stored, run_tag).await;
    }
    if args.crash {
        crash(&args.bin, scratch.path(), &data, stored, args.seconds).await;
    }
    println!();
    println!(
        "rerun: cargo bench --bench http -- --seconds {} --runs {} --connections {} --dup {}{}{}{}{}",
        args.seconds,
        args.runs,
        join(&args.connections),
        join(&args.dups),
        if args.preload > 0 {
            format!(" --preload {}", args.preload)
        } else {
            String::new()
        },
        args.data
            .as_ref()
            .map_or(String::new(), |d| format!(" --data {}", d.display())),
        if args.crash { " --crash" } else { "" },
        if args.space { " --space" } else { "" }
    );
}

/// What the file holds, table by table (redb's stats: the bytes of keys and
/// values in leaves, of branches and headers, and of room no entry uses),
/// against its size. Walks every page: at 5M events, seconds to minutes.
fn space(data: &Path, stored: usize) {
    use redb::{ReadableDatabase, ReadableTableMetadata, TableHandle};
    let db = redb::Database::open(data.join(hookinbox::store::DB_FILE)).unwrap();
    let txn = db.begin_read().unwrap();
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    println!();
    println!("space after the runs, {stored} events:");
    println!();
    println!(
        "| table | entries | stored MiB | metadata MiB | unused in its pages MiB | stored B/event |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let (mut total_stored, mut total_meta, mut total_frag) = (0, 0, 0);
    for handle in txn.list_tables().unwrap() {
        let name = handle.name().to_owned();
        let table = txn.open_untyped_table(handle).unwrap();
        let stats = table.stats().unwrap();
        total_stored += stats.stored_bytes();
        total_meta += stats.metadata_bytes();
        total_frag += stats.fragmented_bytes();
        println!(
            "| {name} | {} | {:.0} | {:.0} | {:.0} | {:.0} |",
            table.len().unwrap(),
            mib(stats.stored_bytes()),
            mib(stats.metadata_bytes()),
            mib(stats.fragmented_bytes()),
            stats.stored_bytes() as f64 / stored.max(1) as f64
        );
    }
    let (file, length) = (file_size(data), file_length(data));
    println!(
        "| all | | {:.0} | {:.0} | {:.0} | {:.0} |",
        mib(total_stored),
        mib(total_meta),
        mib(total_frag),
        total_stored as f64 / stored.max(1) as f64
    );
    println!();
    println!(
        "file on disk {:.0} MiB, {:.0} B/event: {:.2}× the bytes stored; {:.0} MiB in free pages",
        mib(file),
        file as f64 / stored.max(1) as f64,
        file as f64 / total_stored.max(1) as f64,
        mib(file.saturating_sub(total_stored + total_meta + total_frag))
    );
    println!(
        "file length {:.0} MiB ({:.2}×): redb extends its file ahead of use, and the blocks not yet written take no disk",
        mib(length),
        length as f64 / total_stored.max(1) as f64,
    );
}

/// The same store in-process: `Store::ingest` without HTTP or verification.
async fn store_level(
    args: &Args,
    data: &Path,
    verifier: &Verifier,
    summary: &[(usize, usize, f64)],
    mut stored: usize,
    run_tag: i64,
) -> usize {
    println!();
    println!("store level, same store, no HTTP and no signature check:");
    println!();
    println!(
        "| producers | stored before | events/s | p50 ms | p99 ms | HTTP (0 % dup, mean) / store |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut next = 2_000_000_000usize + (run_tag as usize % 1000) * 10_000_000;
    for &conns in &args.connections {
        if args.fresh() {
            std::fs::remove_dir_all(data).unwrap();
            std::fs::create_dir_all(data).unwrap();
            stored = 0;
        }
        let (store, writer) = open(data, MAX_BATCH);
        let n = PREPARED_RATE * args.seconds as usize;
        let events = make_events(verifier, next, n);
        next += n;
        let before = stored;
        let r = drive(&store, events, conns, Duration::from_secs(args.seconds)).await;
        stored += r.events;
        let http: Vec<f64> = summary
            .iter()
            .filter(|(c, d, _)| *c == conns && *d == 0)
            .map(|(_, _, rate)| *rate)
            .collect();
        let http_mean = http.iter().sum::<f64>() / http.len().max(1) as f64;
        println!(
            "| {conns} | {before} | {:.0} | {} | {} | {} |",
            r.rate(),
            ms(r.p50),
            ms(r.p99),
            if http.is_empty() {
                "–".into()
            } else {
                format!("{:.2}", http_mean / r.rate())
            }
        );
        close(store, writer).await;
    }
    stored
}

fn join(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// SIGKILL under load at 64 connections, then the time to serve again.
async fn crash(bin: &Path, dir: &Path, data: &Path, stored: usize, seconds: u64) {
    let server = Server::start(bin, dir, data);
    server.wait_ready(Instant::now());
    let seconds = seconds.min(5);
    let reqs = prepare(
        server.ingest,
        &format!("crash{}", unix_now()),
        64,
        2_000 * seconds as usize,
        0,
    );
    let addr = server.ingest;
    // The connections fail when the server dies; what they saw is not kept.
    let load = tokio::spawn(load(addr, reqs, seconds + 5));
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    server.kill();
    load.abort();
    let started = Instant::now();
    let server = Server::start(bin, dir, data);
    let (listening, ready) = server.wait_ready(started);
    println!();
    println!(
        "reopen after SIGKILL under load, ≈{stored} events stored, file {:.1} GiB: admin answering after {} ms, /readyz 200 after {} ms",
        file_size(data) as f64 / (1u64 << 30) as f64,
        listening.as_millis(),
        ready.as_millis()
    );
    server.stop();
}
