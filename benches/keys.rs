//! Idempotency keys (issue 28): claim + complete pairs per second at 64
//! concurrent clients, on an empty store and on one holding `--preload` done
//! keys, against Redis doing the guides' pattern durably in the same run.
//!
//! Twice: over **HTTP**, as an app meets it (the release binary as a child
//! process, `POST /api/keys/{key}/claim` then `…/complete` on keep-alive
//! connections with a `[[keys.client]]` token, on loopback TCP and then on
//! its `admin_socket`, see `support/keys_http.rs`; on the socket also two
//! `GET /api/keys/{key}` a pair, the same HTTP path without the writer),
//! and through the **Store API in-process**, as
//! `benches/ingest.rs` measures `Store::ingest` —
//! `Store::key(ns, key, Claim { lease 30 s, ttl 30 d })` then
//! `Store::key(ns, key, Complete { token, result })` — the store's share.
//! Each change is durable (one job of the writer's group commit, fsynced)
//! before it is answered. Each client loops over its own fresh keys
//! (`evt_` and 16 hex digits spread over the key space, as provider event
//! ids are), timing each pair. The preload goes through the Store API (a few times
//! faster than HTTP), then the binary serves that same data dir.
//!
//! Redis (`redis-server` from Debian, skipped with a note when not on PATH):
//! a child on a free loopback port with `--appendonly yes --appendfsync
//! always --save ""` (every write in the AOF and fsynced before its reply,
//! the durable equivalent), 64 connections speaking RESP by hand, each pair
//! `SET key token NX EX 300` then `SET key result EX 2592000`. Its preload
//! is pipelined `SET … EX 2592000`. Each Redis run goes on loopback TCP,
//! then on its Unix socket (as an app on the same VM would reach either).
//! Note that the Redis pattern has no
//! fencing: its complete is an unconditional `SET`.
//!
//! With `--helpers`, instead: the keys helpers' (`clients/`) cost per call
//! over raw HTTP, pairs/s in the same run against the same server (the
//! release binary, empty store). `benches/helpers/overhead.py` and
//! `overhead.mjs` alternate, round by round on fresh keys: the two POSTs by
//! hand on a kept-alive connection (`raw`), a call of a function the helper
//! wraps (`helper`: claim, heartbeat registered, completion with the return
//! value) and the same with `heartbeat` off; 1 and 16 clients (Python
//! threads, Node concurrent loops). Medians of the rounds.
//!
//! Rerun: cargo bench --bench keys -- [--quick] [--preload 5000000]
//!        [--seconds 10] [--clients 64] [--pairs N] [--preload-seconds S]
//!        [--keys random|sequential] [--no-http] [--bin PATH]
//!        cargo bench --bench keys -- --helpers [--quick] [--rounds 7]
//!        [--helper-pairs 1000] [--bin PATH]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hookinbox::clock::unix_ms;
use hookinbox::store::{KeyAnswer, KeyOp, MAX_BATCH, Store};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;
#[allow(dead_code)]
#[path = "support/drive.rs"]
mod drive;

#[path = "support/keys_http.rs"]
mod keys_http;
use keys_http::{Transport, Work};

use drive::{Cost, close, file_size, open};
use support::Flags;

const NAMESPACE: &str = "bench";
const LEASE_MS: u64 = 30_000;
const TTL_MS: u64 = 30 * 86_400_000;
/// Concurrency of the preloads (hookinbox: tasks; Redis: pipelined connections).
const PRELOAD_TASKS: usize = 512;
const REDIS_PRELOAD_CONNS: usize = 8;
const REDIS_PIPELINE: usize = 1_000;

#[derive(Clone)]
struct Args {
    clients: usize,
    /// How long each measured run lasts at most.
    seconds: Duration,
    /// Pairs per measured run at most, whatever the time.
    pairs: usize,
    /// Done keys stored before the "loaded" runs.
    preload: usize,
    /// No preload lasts longer than this, whatever its count.
    preload_limit: Duration,
    /// `random` (default) or `sequential`: see [`key`].
    keys: String,
    /// The binary the HTTP runs start; `None`: no HTTP runs (`--no-http`).
    bin: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let flags = Flags::from_env();
    Args {
        clients: flags.value("--clients", 64, 64),
        seconds: Duration::from_secs(flags.value("--seconds", 2, 10) as u64),
        pairs: flags.value("--pairs", 200_000, 2_000_000),
        preload: flags.value("--preload", 100_000, 5_000_000),
        preload_limit: Duration::from_secs(flags.value("--preload-seconds", 300, 1_800) as u64),
        keys: flags.text("--keys").unwrap_or("random").to_owned(),
        bin: (!std::env::args().any(|a| a == "--no-http")).then(|| {
            flags
                .text("--bin")
                .unwrap_or(env!("CARGO_BIN_EXE_hookinbox"))
                .into()
        }),
    }
}

/// Keys in order of their number (`--keys sequential`) rather than spread.
static SEQUENTIAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Key `i` of a run: `evt_` and 16 hex digits, spread over the key space
/// (random, as Stripe's event ids), or with `--keys sequential` in order of
/// run and number (time-ordered ids, as KSUIDs or `order:123` counters).
fn key(run: u64, i: u64) -> String {
    if SEQUENTIAL.load(std::sync::atomic::Ordering::Relaxed) {
        return format!("evt_{run:02x}{i:014x}");
    }
    let mut h = (run << 40 | i).wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    format!("evt_{h:016x}")
}

/// What the completer stores: a small JSON result.
fn result(i: u64) -> String {
    format!(r#"{{"status":"sent","message_id":"m-{i}"}}"#)
}

fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// One measured run: every pair's latency.
struct Pairs {
    pairs: usize,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Pairs {
    fn of(mut waits: Vec<Duration>, elapsed: Duration) -> Pairs {
        waits.sort();
        let pct = |p: f64| {
            waits
                .get(((waits.len().max(1) - 1) as f64 * p) as usize)
                .copied()
                .unwrap_or_default()
        };
        Pairs {
            pairs: waits.len(),
            elapsed,
            p50: pct(0.5),
            p99: pct(0.99),
            max: waits.last().copied().unwrap_or_default(),
        }
    }

    fn rate(&self) -> f64 {
        self.pairs as f64 / self.elapsed.as_secs_f64()
    }
}

/// A measured run and what the server paid for it.
struct Measured {
    run: Pairs,
    /// Server CPU µs per pair (hookinbox: its writer thread; Redis: the process).
    cpu_us: f64,
    /// Bytes the server made the kernel write, per pair.
    disk_b: f64,
}

// ---------------------------------------------------------------- hookinbox

/// `clients` tasks, each claiming and completing its own fresh keys of `run`.
async fn hookinbox_pairs(store: &Store, args: &Args, run: u64) -> Measured {
    let before = Cost::now();
    let stores = vec![store.clone(); args.clients];
    let run = run_clients(
        args,
        run,
        stores,
        |store: Store, key: String, i| async move {
            claim_complete(&store, &key, i).await;
            store
        },
    )
    .await;
    let after = Cost::now();
    let n = run.pairs.max(1) as f64;
    Measured {
        cpu_us: after.writer_cpu_ns.saturating_sub(before.writer_cpu_ns) as f64 / 1e3 / n,
        disk_b: after.disk_bytes.saturating_sub(before.disk_bytes) as f64 / n,
        run,
    }
}

/// Runs one task per item of `conns` (a connection, or a handle on the
/// store), each timing `pair` over its own fresh keys of `run` until the
/// run's pairs or time are spent; `pair` hands the connection back.
async fn run_clients<C, F, Fut>(args: &Args, run: u64, conns: Vec<C>, pair: F) -> Pairs
where
    C: Send + 'static,
    F: Fn(C, String, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = C> + Send,
{
    let per_client = (args.pairs / args.clients).max(1) as u64;
    let clients = conns.len() as u64;
    let started = Instant::now();
    let deadline = started + args.seconds;
    let tasks: Vec<_> = conns
        .into_iter()
        .zip(0..)
        .map(|(mut conn, c)| {
            let pair = pair.clone();
            tokio::spawn(async move {
                let mut waits = Vec::with_capacity(per_client.min(1 << 20) as usize);
                for n in 0..per_client {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let i = n * clients + c;
                    let t = Instant::now();
                    conn = pair(conn, key(run, i), i).await;
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
    Pairs::of(waits, started.elapsed())
}

async fn claim_complete(store: &Store, key: &str, i: u64) {
    let claim = KeyOp::Claim {
        lease_ms: LEASE_MS,
        ttl_ms: TTL_MS,
    };
    let token = match store.key(NAMESPACE, key, claim, now_ms()).await {
        Ok(KeyAnswer::Claimed { token, .. }) => token,
        other => panic!("claim of a fresh key {key}: {other:?}"),
    };
    let complete = KeyOp::Complete {
        token,
        result: Some(result(i)),
    };
    match store.key(NAMESPACE, key, complete, now_ms()).await {
        Ok(KeyAnswer::Completed { .. }) => {}
        other => panic!("complete of {key}: {other:?}"),
    }
}

/// Stores up to `args.preload` done keys of run 0; returns how many.
async fn hookinbox_preload(store: &Store, args: &Args) -> usize {
    let total = args.preload as u64;
    let deadline = Instant::now() + args.preload_limit;
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let tasks: Vec<_> = (0..PRELOAD_TASKS)
        .map(|_| {
            let store = store.clone();
            let next = next.clone();
            tokio::spawn(async move {
                let mut done = 0usize;
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= total || Instant::now() >= deadline {
                        return done;
                    }
                    claim_complete(&store, &key(0, i), i).await;
                    done += 1;
                    if i > 0 && i % 500_000 == 0 {
                        eprintln!("  hookinbox preload: {i} keys");
                    }
                }
            })
        })
        .collect();
    let mut done = 0;
    for t in tasks {
        done += t.await.unwrap();
    }
    done
}

// -------------------------------------------------------------------- Redis

/// `redis-server` with every write fsynced before its reply, on a free
/// loopback port, its files in a temp dir; killed on drop. `None` when it
/// is not installed.
struct Redis {
    child: std::process::Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// Redis's Unix domain socket, in its data dir.
const REDIS_SOCKET: &str = "redis.sock";

impl Redis {
    fn start() -> Option<Redis> {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(dir.path())
            .arg("--unixsocket")
            .arg(dir.path().join(REDIS_SOCKET))
            .args(["--unixsocketperm", "700"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let redis = Redis { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(redis)
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// Bytes in its data dir (the AOF's parts and manifest).
    fn files_size(&self) -> u64 {
        fn walk(p: &Path) -> u64 {
            match std::fs::read_dir(p) {
                Ok(entries) => entries
                    .flatten()
                    .map(|e| match e.metadata() {
                        Ok(m) if m.is_dir() => walk(&e.path()),
                        Ok(m) => m.len(),
                        Err(_) => 0,
                    })
                    .sum(),
                Err(_) => 0,
            }
        }
        walk(self.dir.path())
    }

    async fn connect(&self) -> Resp {
        self.connect_over(Transport::Tcp).await
    }

    /// A connection on loopback TCP, or on its Unix socket.
    async fn connect_over(&self, transport: Transport) -> Resp {
        let stream: Box<dyn keys_http::Io> = match transport {
            Transport::Tcp => {
                let stream = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
                stream.set_nodelay(true).unwrap();
                Box::new(stream)
            }
            Transport::Unix => Box::new(
                tokio::net::UnixStream::connect(self.dir.path().join(REDIS_SOCKET))
                    .await
                    .unwrap(),
            ),
        };
        Resp {
            io: BufReader::new(stream),
            out: Vec::with_capacity(256),
            line: String::new(),
        }
    }

    /// Field `name` of `INFO section`, as a number.
    async fn info(&self, section: &str, name: &str) -> f64 {
        let mut c = self.connect().await;
        c.push(&[b"INFO", section.as_bytes()]);
        c.send().await;
        let text = match c.reply().await {
            Reply::Bulk(b) => String::from_utf8(b).unwrap(),
            other => panic!("INFO: {other:?}"),
        };
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    async fn cpu_s(&self) -> f64 {
        self.info("cpu", "used_cpu_sys").await + self.info("cpu", "used_cpu_user").await
    }

    /// Waits (up to 5 minutes) for a background AOF rewrite, as the preload
    /// may start one, so that it does not run under the measured run.
    async fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline
            && (self.info("persistence", "aof_rewrite_in_progress").await > 0.0
                || self.info("persistence", "aof_rewrite_scheduled").await > 0.0)
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis connection: commands written as RESP arrays, replies read back.
struct Resp {
    io: BufReader<Box<dyn keys_http::Io>>,
    out: Vec<u8>,
    line: String,
}

#[derive(Debug)]
enum Reply {
    Ok,
    Nil,
    Bulk(Vec<u8>),
    /// Anything else (an error, a number): shown in the panic message.
    Other(#[allow(dead_code)] String),
}

impl Resp {
    /// Queues one command.
    fn push(&mut self, args: &[&[u8]]) {
        self.out
            .extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.out
                .extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.out.extend_from_slice(a);
            self.out.extend_from_slice(b"\r\n");
        }
    }

    /// Sends the queued commands.
    async fn send(&mut self) {
        self.io.get_mut().write_all(&self.out).await.unwrap();
        self.out.clear();
    }

    async fn reply(&mut self) -> Reply {
        self.line.clear();
        let n = self.io.read_line(&mut self.line).await.unwrap();
        assert!(n > 0, "redis closed the connection");
        let line = self.line.trim_end();
        if line == "+OK" {
            Reply::Ok
        } else if line == "$-1" || line == "*-1" {
            Reply::Nil
        } else if let Some(len) = line.strip_prefix('$') {
            let len: usize = len.parse().unwrap();
            let mut body = vec![0; len + 2];
            self.io.read_exact(&mut body).await.unwrap();
            body.truncate(len);
            Reply::Bulk(body)
        } else {
            Reply::Other(line.to_owned())
        }
    }
}

async fn redis_pair(c: &mut Resp, key: &str, token: &str, result: &str) {
    c.push(&[
        b"SET",
        key.as_bytes(),
        token.as_bytes(),
        b"NX",
        b"EX",
        b"300",
    ]);
    c.send().await;
    match c.reply().await {
        Reply::Ok => {}
        other => panic!("SET NX of a fresh key {key}: {other:?}"),
    }
    c.push(&[b"SET", key.as_bytes(), result.as_bytes(), b"EX", b"2592000"]);
    c.send().await;
    match c.reply().await {
        Reply::Ok => {}
        other => panic!("SET of {key}: {other:?}"),
    }
}

/// `clients` connections over `transport`, each claiming and completing its
/// own fresh keys of `run`.
async fn redis_pairs(redis: &Redis, args: &Args, run: u64, transport: Transport) -> Measured {
    let mut conns = Vec::new();
    for _ in 0..args.clients {
        conns.push(redis.connect_over(transport).await);
    }
    let (cpu_before, disk_before) = (redis.cpu_s().await, Cost::of(&redis.pid()).disk_bytes);
    let run = run_clients(
        args,
        run,
        conns,
        move |mut conn: Resp, key: String, i| async move {
            redis_pair(&mut conn, &key, &format!("t-{run}-{i}"), &result(i)).await;
            conn
        },
    )
    .await;
    let (cpu_after, disk_after) = (redis.cpu_s().await, Cost::of(&redis.pid()).disk_bytes);
    let n = run.pairs.max(1) as f64;
    Measured {
        cpu_us: (cpu_after - cpu_before) * 1e6 / n,
        disk_b: disk_after.saturating_sub(disk_before) as f64 / n,
        run,
    }
}

/// Stores up to `args.preload` done keys of run 0, pipelined; returns how many.
async fn redis_preload(redis: &Redis, args: &Args) -> usize {
    let total = args.preload as u64;
    let deadline = Instant::now() + args.preload_limit;
    let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..REDIS_PRELOAD_CONNS {
        let mut conn = redis.connect().await;
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0usize;
            loop {
                let first =
                    next.fetch_add(REDIS_PIPELINE as u64, std::sync::atomic::Ordering::Relaxed);
                if first >= total || Instant::now() >= deadline {
                    return done;
                }
                let last = (first + REDIS_PIPELINE as u64).min(total);
                for i in first..last {
                    let (k, r) = (key(0, i), result(i));
                    conn.push(&[b"SET", k.as_bytes(), r.as_bytes(), b"EX", b"2592000"]);
                }
                conn.send().await;
                for _ in first..last {
                    match conn.reply().await {
                        Reply::Ok => {}
                        other => panic!("preload SET: {other:?}"),
                    }
                }
                done += (last - first) as usize;
            }
        }));
    }
    let mut done = 0;
    for t in tasks {
        done += t.await.unwrap();
    }
    done
}

// --------------------------------------------------------------------- main

/// One run against each server (empty, then preloaded).
struct ServerRun {
    name: &'static str,
    transport: Transport,
    work: Work,
    /// The run whose keys it uses on the empty server, and on the loaded one.
    runs: [u64; 2],
}

/// What runs against each server, in order. The reads use the keys the
/// socket's pairs wrote.
const SERVER_RUNS: [ServerRun; 4] = [
    ServerRun {
        name: "hookinbox HTTP",
        transport: Transport::Tcp,
        work: Work::ClaimComplete,
        runs: [3, 4],
    },
    ServerRun {
        name: "hookinbox HTTP on admin_socket",
        transport: Transport::Unix,
        work: Work::ClaimComplete,
        runs: [5, 6],
    },
    ServerRun {
        name: "hookinbox admin_socket, two reads a pair",
        transport: Transport::Unix,
        work: Work::ReadTwice,
        runs: [5, 6],
    },
    ServerRun {
        name: "hookinbox admin_socket, two whoami a pair",
        transport: Transport::Unix,
        work: Work::WhoamiTwice,
        runs: [5, 6],
    },
];

/// [`SERVER_RUNS`] against `server` (`loaded`: the preloaded one). A read
/// run reads at most 4/5 of the pairs its keys' run wrote, so that every
/// key it reads is there (each client of a run writes about as many as the
/// others, not exactly as many).
async fn server_runs(server: &keys_http::Server, args: &Args, loaded: bool) -> Vec<Measured> {
    let mut measured: Vec<Measured> = Vec::new();
    for (i, r) in SERVER_RUNS.iter().enumerate() {
        let run = r.runs[loaded as usize];
        let mut args = args.clone();
        if r.work == Work::ReadTwice {
            let wrote: usize = SERVER_RUNS[..i]
                .iter()
                .zip(&measured)
                .filter(|(w, _)| w.runs[loaded as usize] == run && w.work == Work::ClaimComplete)
                .map(|(_, m)| m.run.pairs)
                .sum();
            args.pairs = wrote * 4 / 5;
        }
        measured.push(keys_http::pairs(server, &args, run, r.transport, r.work).await);
    }
    measured
}

fn row(name: &str, m: &Measured) -> String {
    format!(
        "| {name} | {:.0} | {} | {} | {} | {} | {:.1} | {:.0} |",
        m.run.rate(),
        m.run.pairs,
        ms(m.run.p50),
        ms(m.run.p99),
        ms(m.run.max),
        m.cpu_us,
        m.disk_b
    )
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    if Flags::from_env().has("--helpers") {
        return helpers(&args);
    }
    assert!(
        ["random", "sequential"].contains(&args.keys.as_str()),
        "--keys random|sequential"
    );
    SEQUENTIAL.store(
        args.keys == "sequential",
        std::sync::atomic::Ordering::Relaxed,
    );
    println!(
        "hookinbox keys bench: claim + complete pairs over HTTP and through Store::key in-process, {} clients, {} keys, {} s or {} pairs per run, MAX_BATCH {MAX_BATCH}, {} cores",
        args.clients,
        args.keys,
        args.seconds.as_secs(),
        args.pairs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();

    // HTTP, empty: a data dir of its own.
    let mut http_empty = Vec::new();
    if let Some(bin) = &args.bin {
        let dir = tempfile::tempdir().unwrap();
        let server = keys_http::Server::start(bin, dir.path(), &dir.path().join("data"));
        http_empty = server_runs(&server, &args, false).await;
        server.stop();
    }

    // hookinbox in-process: empty, then preloaded.
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = open(&dir.path().join("data"), MAX_BATCH);
    let h_empty = hookinbox_pairs(&store, &args, 1).await;
    let started = Instant::now();
    let before = Cost::now();
    let h_loaded_n = hookinbox_preload(&store, &args).await;
    let h_preload_time = started.elapsed();
    let h_preload_disk = Cost::now().disk_bytes.saturating_sub(before.disk_bytes);
    let h_size = file_size(&dir.path().join("data"));
    println!(
        "hookinbox preload: {h_loaded_n} done keys (claim + complete each, {PRELOAD_TASKS} tasks) in {:.1} s ({:.0} keys/s); file {:.0} MiB, {:.0} B/key (the empty run's keys included); disk written {:.0} B/key",
        h_preload_time.as_secs_f64(),
        h_loaded_n as f64 / h_preload_time.as_secs_f64(),
        h_size as f64 / (1 << 20) as f64,
        h_size as f64 / (h_loaded_n + h_empty.run.pairs).max(1) as f64,
        h_preload_disk as f64 / h_loaded_n.max(1) as f64,
    );
    let h_loaded = hookinbox_pairs(&store, &args, 2).await;
    close(store, writer).await;
    // HTTP, loaded: the binary on the store just preloaded.
    let mut http_loaded = Vec::new();
    if let Some(bin) = &args.bin {
        let started = Instant::now();
        let server = keys_http::Server::start(bin, dir.path(), &dir.path().join("data"));
        println!(
            "hookinbox serving the preloaded store after {:.2} s",
            started.elapsed().as_secs_f64()
        );
        http_loaded = server_runs(&server, &args, true).await;
        server.stop();
    }
    drop(dir);

    // Redis: the same.
    let redis = match Redis::start() {
        Some(redis) => {
            let empty = redis_pairs(&redis, &args, 1, Transport::Tcp).await;
            let unix_empty = redis_pairs(&redis, &args, 3, Transport::Unix).await;
            let started = Instant::now();
            let n = redis_preload(&redis, &args).await;
            let time = started.elapsed();
            redis.settle().await;
            let memory = redis.info("memory", "used_memory").await;
            let files = redis.files_size();
            println!(
                "Redis preload: {n} keys (pipelined SET … EX, {REDIS_PRELOAD_CONNS} connections × {REDIS_PIPELINE}) in {:.1} s ({:.0} keys/s); used_memory {:.0} MiB, {:.0} B/key; AOF {:.0} MiB",
                time.as_secs_f64(),
                n as f64 / time.as_secs_f64(),
                memory / (1 << 20) as f64,
                memory / (n + empty.run.pairs).max(1) as f64,
                files as f64 / (1 << 20) as f64,
            );
            let loaded = redis_pairs(&redis, &args, 2, Transport::Tcp).await;
            let unix_loaded = redis_pairs(&redis, &args, 4, Transport::Unix).await;
            drop(redis);
            Some((empty, n, loaded, unix_empty, unix_loaded))
        }
        None => {
            println!("Redis: skipped (redis-server is not installed)");
            None
        }
    };

    println!();
    println!(
        "| {} clients | pairs/s | pairs | p50 ms | p99 ms | max ms | server CPU µs/pair | disk B/pair |",
        args.clients
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (r, (empty, loaded)) in SERVER_RUNS.iter().zip(http_empty.iter().zip(&http_loaded)) {
        println!("{}", row(&format!("{}, empty", r.name), empty));
        println!("{}", row(&format!("{}, {h_loaded_n} keys", r.name), loaded));
    }
    println!("{}", row("hookinbox Store::key, empty", &h_empty));
    println!(
        "{}",
        row(
            &format!("hookinbox Store::key, {h_loaded_n} keys"),
            &h_loaded
        )
    );
    if let Some((empty, n, loaded, unix_empty, unix_loaded)) = &redis {
        println!("{}", row("Redis, empty", empty));
        println!("{}", row(&format!("Redis, {n} keys"), loaded));
        println!("{}", row("Redis on its Unix socket, empty", unix_empty));
        println!(
            "{}",
            row(&format!("Redis on its Unix socket, {n} keys"), unix_loaded)
        );
    }
    println!();
    let ratios = |name: &str, empty: &Measured, loaded: &Measured| {
        println!(
            "{name} loaded / empty: {:.2} pairs/s, {:.2} p99",
            loaded.run.rate() / empty.run.rate(),
            loaded.run.p99.as_secs_f64() / empty.run.p99.as_secs_f64()
        );
        if let Some((r_empty, _, r_loaded, u_empty, u_loaded)) = &redis {
            println!(
                "{name} / Redis pairs/s: empty {:.2}, loaded {:.2}; / Redis on its socket: empty {:.2}, loaded {:.2}",
                empty.run.rate() / r_empty.run.rate(),
                loaded.run.rate() / r_loaded.run.rate(),
                empty.run.rate() / u_empty.run.rate(),
                loaded.run.rate() / u_loaded.run.rate()
            );
        }
    };
    for (r, (empty, loaded)) in SERVER_RUNS.iter().zip(http_empty.iter().zip(&http_loaded)) {
        if r.work == Work::ClaimComplete {
            ratios(r.name, empty, loaded);
        }
    }
    ratios("hookinbox Store::key", &h_empty, &h_loaded);
    println!(
        "(server CPU: HTTP and Redis, the whole process; Store::key, the writer thread only; disk: bytes the server process made the kernel write)"
    );
    println!();
    println!("targets: ≥ 20,000 pairs/s, p99 ≤ 10 ms, flat from empty to 5M");
    println!(
        "rerun: cargo bench --bench keys -- --preload {} --seconds {} --clients {} --pairs {} --keys {}{}",
        args.preload,
        args.seconds.as_secs(),
        args.clients,
        args.pairs,
        args.keys,
        if args.bin.is_none() { " --no-http" } else { "" }
    );
}

/// `--helpers`: each helper's driver against one server, 1 and 16 clients.
fn helpers(args: &Args) {
    let flags = Flags::from_env();
    let rounds = flags.value("--rounds", 1, 7);
    let pairs = flags.value("--helper-pairs", 200, 1_000);
    let bin = args
        .bin
        .as_ref()
        .expect("--helpers runs the binary: drop --no-http");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let server = keys_http::Server::start(bin, dir.path(), &dir.path().join("data"));
    println!(
        "hookinbox keys helpers bench: claim + complete per call, raw HTTP vs the helper, {rounds} rounds of at most {pairs} pairs per client (or 30 s), {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<8} {:>7} {:>20} {:>10} {:>10} {:>14} {:>22}",
        "helper", "clients", "mode", "pairs/s", "vs raw", "µs/pair", "over raw µs/pair"
    );
    for clients in [1, 16] {
        for (lang, program, script) in [
            ("python", "python3", "benches/helpers/overhead.py"),
            ("node", "node", "benches/helpers/overhead.mjs"),
        ] {
            let out = std::process::Command::new(program)
                .arg(root.join(script))
                .args([pairs, rounds, clients, 30].map(|n| n.to_string()))
                .env("PYTHONPATH", root.join("clients/python"))
                .env("HOOKINBOX_KEYS_URL", server.admin_url())
                .env("HOOKINBOX_KEYS_TOKEN", keys_http::TOKEN)
                .output()
                .unwrap_or_else(|e| panic!("{program} runs: {e}"));
            assert!(
                out.status.success(),
                "{script}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let mut rates: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
            for line in String::from_utf8(out.stdout).unwrap().lines() {
                let round: serde_json::Value = serde_json::from_str(line).unwrap();
                rates
                    .entry(round["mode"].as_str().unwrap().to_owned())
                    .or_default()
                    .push(round["pairs"].as_f64().unwrap() / round["seconds"].as_f64().unwrap());
            }
            let median = |mode: &str| {
                let mut v = rates[mode].clone();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let raw = median("raw");
            for mode in ["raw", "helper", "helper-no-heartbeat"] {
                let rate = median(mode);
                println!(
                    "{lang:<8} {clients:>7} {mode:>20} {rate:>10.0} {:>10.2} {:>14.0} {:>22.0}",
                    rate / raw,
                    1e6 / rate * clients as f64,
                    (1e6 / rate - 1e6 / raw) * clients as f64,
                );
            }
        }
    }
    server.stop();
    println!();
    println!(
        "(µs/pair: each client's time per pair; rerun: cargo bench --bench keys -- --helpers)"
    );
}
