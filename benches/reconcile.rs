//! A reconcile pass over many events: the real app in this process, a
//! Stripe source with `[source.reconcile]`, and the tests' local fake of
//! Stripe's events API (`tests/it/providers.rs`) holding `--events`
//! undelivered events (default 10,000: 100 pages of 100).
//!
//! 1. First pass: every event fetched and stored (none held).
//! 2. The same events again (`?since=1d`, which moves no cursor): every one
//!    listed and found held; nothing stored.
//! 3. An idle pass from the cursor: one call, nothing new.
//!
//! Each pass is paced as Stripe's limits ask (25 reads a second in test
//! mode): 100 pages take at least 4 s of waiting, so the figure to read
//! besides the time is how far above that floor it is. The process's CPU
//! time per event covers the app and the fake together.
//!
//! With `--data DIR` the app opens that store (say one preloaded with
//! millions of events by the http bench) under a source name of its own,
//! so the held checks and commits run against a large dedupe index.
//!
//! Rerun: cargo bench --bench reconcile -- [--quick] [--events N] [--data DIR]

#[allow(dead_code)]
#[path = "../tests/it/providers.rs"]
mod providers;

use std::time::{Duration, Instant};

use hookinbox::app::App;
use hookinbox::clock::Clock;
use hookinbox::config::Config;

const TOKEN: &str = "bench-admin-token-0123456789";
const KEY: &str = "rk_test_bench_0123456789";

fn flag(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// CPU seconds this process has used (user + system).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

struct Pass {
    took: Duration,
    cpu: f64,
    report: serde_json::Value,
}

async fn pass(client: &reqwest::Client, admin: &str, source: &str, query: &str) -> Pass {
    let cpu = cpu_seconds();
    let started = Instant::now();
    let report: serde_json::Value = client
        .post(format!("http://{admin}/api/reconcile/{source}{query}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(report["outcome"], "ok", "{report}");
    Pass {
        took: started.elapsed(),
        cpu: cpu_seconds() - cpu,
        report,
    }
}

fn print(what: &str, p: &Pass, events: usize) {
    let r = &p.report;
    println!(
        "{what:<34} {:>8.2} s {:>9.0} events/s  pages {:>3}  listed {:>6}  held {:>6}  fetched {:>6}  cpu {:>6.1} µs/event",
        p.took.as_secs_f64(),
        events as f64 / p.took.as_secs_f64(),
        r["pages"],
        r["listed"],
        r["held"],
        r["fetched"],
        p.cpu * 1e6 / events.max(1) as f64,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let events: usize = flag("--events")
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 1_000 } else { 10_000 });
    let temp = tempfile::tempdir().unwrap();
    let data = flag("--data").map_or_else(|| temp.path().join("data"), Into::into);
    let stripe = providers::FakeStripe::start(KEY);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for n in 0..events as u32 {
        stripe.event(n, now - 7200 + u64::from(n) * 7200 / events as u64, false);
    }
    // A source of its own per run: a kept store holds earlier runs' cursors.
    let source = format!("stripe_{}", std::process::id());
    let config = format!(
        r#"[server]
data_dir = "{}"

[admin]
token = "{TOKEN}"

[[source]]
name = "{source}"
kind = "stripe"
secret = "whsec_bench_endpoint_secret"

[source.reconcile]
token = "{KEY}"
interval = "1d"
api_base = "{}"
"#,
        data.display(),
        stripe.url()
    );
    let (config, _) = Config::from_toml(&config, "bench", None, &|_| None)
        .unwrap()
        .resolve()
        .unwrap();
    let listeners = hookinbox::app::Listeners {
        ingest: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        admin: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let app = App::start(config, listeners, Clock::system(), stop.clone())
        .await
        .unwrap();
    let stored = app.store().count().unwrap();
    let admin = app.admin_addr().to_string();
    let client = hookinbox::send::http_client(Duration::from_secs(600)).unwrap();

    println!(
        "reconcile: {events} undelivered events on the fake Stripe API, store holding {stored} events ({})",
        data.display()
    );
    let first = pass(&client, &admin, &source, "").await;
    print("first pass (all fetched)", &first, events);
    assert_eq!(first.report["fetched"], events);
    let again = pass(&client, &admin, &source, "?since=1d").await;
    print("again, --since 1d (all held)", &again, events);
    assert_eq!(again.report["held"], events);
    let idle = pass(&client, &admin, &source, "").await;
    print("idle pass (from the cursor)", &idle, 0);
    let floor = (events.div_ceil(100) as f64 - 1.0) * 0.040;
    println!(
        "pace floor for {} pages at 25 reads/s: {floor:.2} s; first pass {:.2} s above it",
        events.div_ceil(100),
        first.took.as_secs_f64() - floor
    );
    println!(
        "rerun: cargo bench --bench reconcile -- --events {events}{}",
        flag("--data").map_or(String::new(), |d| format!(" --data {d}"))
    );
    stop.cancel();
    app.wait().await.unwrap();
}
