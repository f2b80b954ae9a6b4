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
//! Everything runs in this process on loopback: the destination competes
//! with hookinbox for the same 2 cores, as it would on a small VM.
//!
//! Rerun: cargo bench --bench delivery -- [--quick] [--backlog N] [--rate R] [--seconds S]

#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::HeaderMap;
use hookinbox::app::App;
use hookinbox::clock::Clock;
use hookinbox::config::Config;
use hookinbox::store::Initial;
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

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    let sink = Arc::new(Sink::default());
    let dest = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dest_addr = dest.local_addr().unwrap();
    let router = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(sink.clone());
    tokio::spawn(async move { axum::serve(dest, router).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let config_text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n\
         [[source]]\nname = \"bench\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n\
         destination = \"http://{dest_addr}/hook\"\ndestination_secret = \"{SECRET}\"\n\
         max_concurrency = {CONCURRENCY}\npaused = true\n",
        dir.path().display().to_string()
    );
    let (config, _generated) = Config::from_toml(&config_text, "bench", None, &|_| None)
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
    println!(
        "hookinbox delivery bench: body ≈{} B, max_concurrency {CONCURRENCY}, {} cores",
        stripe_like_body(&event_id(0), 0).len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // 1. Backlog.
    let loading = Instant::now();
    let events = make_events(&verifier, 0, args.backlog);
    let per = args.backlog.div_ceil(64);
    let mut tasks = Vec::new();
    let mut events = events;
    while !events.is_empty() {
        let rest = events.split_off(per.min(events.len()));
        let chunk = std::mem::replace(&mut events, rest);
        let store = app.store().clone();
        tasks.push(tokio::spawn(async move {
            for e in chunk {
                store.ingest(e, Initial::Deliver).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    println!(
        "backlog: {} due events stored in {:.1}s",
        args.backlog,
        loading.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    app.delivery().resume("bench").await.unwrap();
    let deadline = started + Duration::from_secs(300);
    while sink.delivered.load(Ordering::Relaxed) < args.backlog && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed();
    let done = sink.delivered.load(Ordering::Relaxed);
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
    while sink.delivered.load(Ordering::Relaxed) < args.backlog + total && Instant::now() < deadline
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
        "| ack → destination receives | {} | {} |",
        pct(&to_delivery, 0.5),
        pct(&to_delivery, 0.99)
    );
    println!();
    println!("targets: ≥ 10,000 deliveries/s; p50 ack → delivery under 20 ms");
    println!(
        "rerun: cargo bench --bench delivery -- --backlog {} --rate {} --seconds {}",
        args.backlog, args.rate, args.seconds
    );
    stop.cancel();
    app.wait().await.unwrap();
}
