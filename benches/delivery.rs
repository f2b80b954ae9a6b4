//! Delivery throughput and latency, with the real app and a real destination.
//!
//! 1. Backlog: the app holds `--backlog` due events (default 100,000) for a
//!    paused destination; resume it and time until a fast loopback
//!    destination has answered 200 to every one: deliveries per second,
//!    including the lease and the outcome commits of each attempt.
//! 2. Latency: a steady ingest load over HTTP (`--rate` events/s for
//!    `--seconds`) to a healthy destination; for each event, the time from
//!    its 2xx ack reaching the sender to the destination receiving it.
//!
//! Both, again, with a NATS JetStream destination: a local `nats-server -js`
//! (Debian's `nats-server`) with a file-backed stream on `webhooks.>`;
//! "delivered" is the stream's ack, counted from the stream's state, and the
//! latency is from the 2xx ack to a core subscriber on the subject seeing
//! the message. Skipped when `nats-server` is not installed.
//!
//! 3. Fan-out: the same backlog for a source with three HTTP destinations
//!    (three sinks on loopback, each `max_concurrency` 64), all paused, then
//!    resumed at once: deliveries per second over the three, and fairness —
//!    each destination's share when half of all deliveries are done, and
//!    when each finished.
//!
//! `--telemetry [--rounds N]` instead measures what tracing costs a
//! delivery (`delivery/traced.rs`).
//!
//! Everything runs in this process (and the NATS server) on loopback: the
//! destination competes with hookinbox for the same 2 cores, as it would on
//! a small VM.
//!
//! Rerun: cargo bench --bench delivery -- [--quick] [--backlog N] [--rate R] [--seconds S]
//!        cargo bench --bench delivery -- --telemetry [--backlog N] [--rounds N]

#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;
#[path = "support/otlp.rs"]
mod otlp;
#[path = "delivery/traced.rs"]
mod traced;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::HeaderMap;
use hookinbox::app::App;
use hookinbox::clock::Clock;
use hookinbox::config::Config;
use hookinbox::store::{Initial, Route};
use hookinbox::verify::Verifier;
use support::{Flags, SECRET, event_id, make_events, signed_headers, stripe_like_body, unix_now};

const CONCURRENCY: usize = 64;

struct Args {
    backlog: usize,
    rate: usize,
    seconds: usize,
}

fn args() -> Args {
    let flags = Flags::from_env();
    Args {
        backlog: flags.value("--backlog", 10_000, 100_000),
        rate: flags.value("--rate", 500, 500),
        seconds: flags.value("--seconds", 3, 10),
    }
}

/// The destination: counts 2xx answers and notes when each event arrived.
#[derive(Default)]
struct Sink {
    delivered: AtomicUsize,
    arrivals: Mutex<HashMap<String, Instant>>,
}

async fn receive(State(sink): State<Arc<Sink>>, headers: HeaderMap) -> &'static str {
    let at = Instant::now();
    if let Some(id) = headers
        .get("hookinbox-event-id")
        .and_then(|v| v.to_str().ok())
    {
        sink.arrivals.lock().unwrap().insert(id.to_owned(), at);
    }
    sink.delivered.fetch_add(1, Ordering::Relaxed);
    "ok"
}

fn pct(sorted: &[Duration], p: f64) -> String {
    if sorted.is_empty() {
        return "-".into();
    }
    let d = sorted[((sorted.len() - 1) as f64 * p) as usize];
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// Where the bench delivers.
enum Target {
    /// The axum sink on loopback.
    Http,
    /// A stream on a local JetStream server.
    JetStream { url: String },
}

/// `nats-server -js` on a free loopback port, its store in a temp dir;
/// killed on drop. `None` when it is not installed.
struct NatsServer {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    fn start() -> Option<NatsServer> {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(NatsServer {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            _dir: dir,
        })
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    if Flags::from_env().has("--telemetry") {
        println!("hookinbox delivery bench: what traces cost a delivery");
        let rounds = Flags::from_env().value("--rounds", 1, 2);
        traced::run(&args, rounds).await;
        return;
    }
    println!(
        "hookinbox delivery bench: body ≈{} B, max_concurrency {CONCURRENCY}, {} cores",
        stripe_like_body(&event_id(0), 0).len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("## to an HTTP app on loopback");
    run(&args, Target::Http).await;
    println!();
    match NatsServer::start() {
        Some(nats) => {
            println!("## to a NATS JetStream stream (file storage) on loopback");
            run(
                &args,
                Target::JetStream {
                    url: nats.url.clone(),
                },
            )
            .await;
        }
        None => println!("## JetStream: skipped (nats-server is not installed)"),
    }
    println!();
    println!("## fan-out: one source, three HTTP destinations on loopback");
    fan_out(&args).await;
    println!();
    println!("targets: ≥ 10,000 deliveries/s; p50 ack → delivery under 20 ms");
    println!(
        "rerun: cargo bench --bench delivery -- --backlog {} --rate {} --seconds {}",
        args.backlog, args.rate, args.seconds
    );
}

/// Counts what reached the target: the HTTP sink's 2xx answers, or the
/// stream's messages.
async fn delivered(sink: &Sink, stream: Option<&async_nats::jetstream::Context>) -> usize {
    match stream {
        None => sink.delivered.load(Ordering::Relaxed),
        Some(js) => match js.get_stream("WEBHOOKS").await {
            Ok(mut s) => s.info().await.map_or(0, |i| i.state.messages as usize),
            Err(_) => 0,
        },
    }
}

async fn run(args: &Args, target: Target) {
    let sink = Arc::new(Sink::default());
    let (destination, stream) = match &target {
        Target::Http => {
            let dest = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let dest_addr = dest.local_addr().unwrap();
            let router = axum::Router::new()
                .route("/hook", axum::routing::post(receive))
                .with_state(sink.clone());
            tokio::spawn(async move { axum::serve(dest, router).await.unwrap() });
            (format!("http://{dest_addr}/hook"), None)
        }
        Target::JetStream { url } => {
            let client = async_nats::connect(url.as_str()).await.unwrap();
            let js = async_nats::jetstream::new(client.clone());
            js.create_stream(async_nats::jetstream::stream::Config {
                name: "WEBHOOKS".into(),
                subjects: vec!["webhooks.>".into()],
                storage: async_nats::jetstream::stream::StorageType::File,
                ..Default::default()
            })
            .await
            .unwrap();
            // Arrival times: a core subscriber sees each message as the
            // server routes it to the stream.
            let mut messages = client.subscribe("webhooks.>").await.unwrap();
            let arrivals = sink.clone();
            tokio::spawn(async move {
                use futures_util::StreamExt;
                while let Some(m) = messages.next().await {
                    let at = Instant::now();
                    if let Some(id) = m.headers.as_ref().and_then(|h| h.get("hookinbox-event-id")) {
                        arrivals
                            .arrivals
                            .lock()
                            .unwrap()
                            .insert(id.as_str().to_owned(), at);
                    }
                }
            });
            (url.clone(), Some(js))
        }
    };

    let dir = tempfile::tempdir().unwrap();
    let config_text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n\
         [[source]]\nname = \"bench\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n\
         destination = \"{destination}\"\ndestination_secret = \"{SECRET}\"\n\
         max_concurrency = {CONCURRENCY}\npaused = true\n",
        dir.path().display().to_string()
    );
    let (app, verifier, stop) = start(&config_text).await;

    // 1. Backlog.
    let loading = Instant::now();
    load(&app, &verifier, args.backlog, Initial::Deliver).await;
    println!(
        "backlog: {} due events stored in {:.1}s",
        args.backlog,
        loading.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    app.delivery().resume("bench").await.unwrap();
    let deadline = started + Duration::from_secs(300);
    while delivered(&sink, stream.as_ref()).await < args.backlog && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    let done = delivered(&sink, stream.as_ref()).await;
    println!(
        "backlog: delivered {done} in {:.2}s = {:.0} deliveries/s{}",
        took.as_secs_f64(),
        done as f64 / took.as_secs_f64(),
        if done < args.backlog {
            " (stopped at the 300 s limit)"
        } else {
            ""
        }
    );
    // 2. Ack → delivery under a steady load.
    let client = hookinbox::send::http_client(Duration::from_secs(10)).unwrap();
    let url = format!("http://{}/in/bench", app.ingest_addr());
    let total = args.rate * args.seconds;
    let interval = Duration::from_secs_f64(1.0 / args.rate as f64);
    let acks: Arc<Mutex<HashMap<String, (Instant, Duration)>>> = Arc::default();
    let load_start = Instant::now();
    let mut inflight = Vec::with_capacity(total);
    for i in 0..total {
        let due = load_start + interval * i as u32;
        tokio::time::sleep_until(due.into()).await;
        let id = event_id(args.backlog + i);
        let body = stripe_like_body(&id, args.backlog + i).into_bytes();
        let mut req = client.post(&url).body(body.clone());
        for (k, v) in signed_headers(&id, &body, unix_now()) {
            req = req.header(k, v);
        }
        let acks = acks.clone();
        inflight.push(tokio::spawn(async move {
            let sent = Instant::now();
            if let Ok(res) = req.send().await
                && res.status().is_success()
            {
                let acked = Instant::now();
                acks.lock().unwrap().insert(id, (acked, acked - sent));
            }
        }));
    }
    for t in inflight {
        t.await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while delivered(&sink, stream.as_ref()).await < args.backlog + total
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let acks = acks.lock().unwrap().clone();
    let arrivals = sink.arrivals.lock().unwrap().clone();
    let mut ack_latency: Vec<Duration> = acks.values().map(|(_, l)| *l).collect();
    let mut to_delivery: Vec<Duration> = acks
        .iter()
        .filter_map(|(id, (acked, _))| {
            // Delivery can start before the sender has read its 2xx: count that as 0.
            arrivals
                .get(id)
                .map(|at| at.saturating_duration_since(*acked))
        })
        .collect();
    ack_latency.sort();
    to_delivery.sort();
    println!(
        "steady load: {} events at {}/s over HTTP: {} acked, {} delivered",
        total,
        args.rate,
        acks.len(),
        to_delivery.len()
    );
    println!();
    println!("| measure | p50 ms | p99 ms |");
    println!("|---|---:|---:|");
    println!(
        "| ingest ack (request sent → 2xx) | {} | {} |",
        pct(&ack_latency, 0.5),
        pct(&ack_latency, 0.99)
    );
    println!(
        "| ack → {} | {} | {} |",
        match target {
            Target::Http => "destination receives",
            Target::JetStream { .. } => "published to the stream (a subscriber sees it)",
        },
        pct(&to_delivery, 0.5),
        pct(&to_delivery, 0.99)
    );
    stop.cancel();
    app.wait().await.unwrap();
}

/// The fan-out case: `args.backlog` events, each to three destinations.
async fn fan_out(args: &Args) {
    const NAMES: [&str; 3] = ["bench", "bench.b", "bench.c"];
    let mut sinks = Vec::new();
    let mut tables = String::new();
    for name in NAMES {
        let sink = Arc::new(Sink::default());
        let dest = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = dest.local_addr().unwrap();
        let router = axum::Router::new()
            .route("/hook", axum::routing::post(count))
            .with_state(sink.clone());
        tokio::spawn(async move { axum::serve(dest, router).await.unwrap() });
        sinks.push(sink);
        let named = name
            .split_once('.')
            .map(|(_, n)| format!("name = \"{n}\"\n"))
            .unwrap_or_default();
        tables.push_str(&format!(
            "[[source.destination]]\n{named}url = \"http://{addr}/hook\"\n\
             secret = \"{SECRET}\"\nmax_concurrency = {CONCURRENCY}\npaused = true\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let config_text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n\
         [[source]]\nname = \"bench\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n{tables}",
        dir.path().display().to_string()
    );
    let (app, verifier, stop) = start(&config_text).await;
    let routes = Initial::Routes(
        NAMES
            .iter()
            .map(|n| Route {
                destination: (*n).to_owned(),
                ordering_key: None,
            })
            .collect(),
    );
    let loading = Instant::now();
    load(&app, &verifier, args.backlog, routes).await;
    println!(
        "backlog: {} events × 3 destinations stored in {:.1}s",
        args.backlog,
        loading.elapsed().as_secs_f64()
    );
    let total = 3 * args.backlog;
    let counts = || -> Vec<usize> {
        sinks
            .iter()
            .map(|s| s.delivered.load(Ordering::Relaxed))
            .collect()
    };
    let started = Instant::now();
    for name in NAMES {
        app.delivery().resume(name).await.unwrap();
    }
    let deadline = started + Duration::from_secs(600);
    let mut at_half: Option<Vec<usize>> = None;
    let mut finished: [Option<Duration>; 3] = [None; 3];
    loop {
        let now = counts();
        if at_half.is_none() && now.iter().sum::<usize>() * 2 >= total {
            at_half = Some(now.clone());
        }
        for (i, n) in now.iter().enumerate() {
            if *n >= args.backlog && finished[i].is_none() {
                finished[i] = Some(started.elapsed());
            }
        }
        if finished.iter().all(Option::is_some) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    let done: usize = counts().iter().sum();
    println!(
        "fan-out: delivered {done} of {total} in {:.2}s = {:.0} deliveries/s ({:.0} events/s to all three){}",
        took.as_secs_f64(),
        done as f64 / took.as_secs_f64(),
        done as f64 / 3.0 / took.as_secs_f64(),
        if done < total {
            " (stopped at the 600 s limit)"
        } else {
            ""
        }
    );
    let half = at_half.unwrap_or_default();
    println!();
    println!("| destination | share at half of all deliveries | done after |");
    println!("|---|---:|---:|");
    for (i, name) in NAMES.iter().enumerate() {
        let share = half.get(i).copied().unwrap_or(0) as f64 / (total as f64 / 2.0);
        println!(
            "| {name} | {:.1} % | {} |",
            share * 100.0,
            finished[i].map_or("-".into(), |d| format!("{:.2}s", d.as_secs_f64()))
        );
    }
    stop.cancel();
    app.wait().await.unwrap();
}

/// A fan-out sink: counts what it answered 200.
async fn count(State(sink): State<Arc<Sink>>) -> &'static str {
    sink.delivered.fetch_add(1, Ordering::Relaxed);
    "ok"
}

/// Starts the app with `config_text`; returns it, its first source's
/// verifier (to sign and verify events as ingest would) and its stop token.
async fn start(config_text: &str) -> (App, Verifier, tokio_util::sync::CancellationToken) {
    let (config, _generated) = Config::from_toml(config_text, "bench", None, &|_| None)
        .unwrap()
        .resolve()
        .unwrap();
    let verifier = Verifier::new(&config.sources[0]).unwrap();
    let listeners = hookinbox::app::Listeners {
        ingest: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        admin: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let app = App::start(config, listeners, Clock::system(), stop.clone())
        .await
        .unwrap();
    (app, verifier, stop)
}

/// Stores `n` events through `Store::ingest`, each starting as `initial`,
/// from 64 tasks at once (the writer group-commits them).
async fn load(app: &App, verifier: &Verifier, n: usize, initial: Initial) {
    let mut events = make_events(verifier, 0, n);
    let per = n.div_ceil(64);
    let mut tasks = Vec::new();
    while !events.is_empty() {
        let rest = events.split_off(per.min(events.len()));
        let chunk = std::mem::replace(&mut events, rest);
        let (store, initial) = (app.store().clone(), initial.clone());
        tasks.push(tokio::spawn(async move {
            for e in chunk {
                store.ingest(e, initial.clone()).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}
