//! `--telemetry`: what tracing costs a delivery. The backlog phase only, to
//! the HTTP sink, three ways alternating round by round: without
//! `[telemetry]`, with `sample_ratio = 1.0` and with `0.01`, exporting to
//! an OTLP sink in this process. Each delivery is one attempt span (the
//! events are stored through `Store::ingest`, so no receipt span: the
//! ingest bench measures that one). CPU is this whole process's
//! (`getrusage`): hookinbox, the destination and both sinks, the same for
//! each setting but the traced ones' export.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hookinbox::store::Initial;

use super::{Args, CONCURRENCY, SECRET, Sink, load, receive, start};

/// This process's user + system CPU time so far.
fn cpu() -> Duration {
    // SAFETY: getrusage(2) fills the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

pub async fn run(args: &Args, rounds: usize) {
    let otlp = super::otlp::sink();
    let settings: [(&str, Option<f64>); 3] = [
        ("none", None),
        ("sample_ratio = 1.0", Some(1.0)),
        ("sample_ratio = 0.01", Some(0.01)),
    ];
    println!(
        "{} events a round, {rounds} rounds, the three settings alternating",
        args.backlog
    );
    println!();
    println!("| round | `[telemetry]` | deliveries/s | process CPU µs/delivery | spans exported |");
    println!("|---|---|---:|---:|---:|");
    for round in 1..=rounds {
        for (name, ratio) in settings {
            let telemetry = ratio.map_or(String::new(), |r| {
                format!(
                    "[telemetry]\nendpoint = \"http://127.0.0.1:{otlp}\"\nsample_ratio = {r:?}\n\n"
                )
            });
            let (rate, cpu_us, spans) = backlog(args.backlog, &telemetry).await;
            println!("| {round} | {name} | {rate:.0} | {cpu_us:.1} | {spans} |");
        }
    }
    println!();
    println!(
        "rerun: cargo bench --bench delivery -- --telemetry --backlog {} --rounds {rounds}",
        args.backlog
    );
}

/// Stores `n` due events for a paused destination, resumes it, and times
/// until the sink has answered each: (deliveries/s, CPU µs a delivery,
/// spans the OTLP sink took, counted once the app stopped and flushed).
async fn backlog(n: usize, telemetry: &str) -> (f64, f64, u64) {
    let sink = Arc::new(Sink::default());
    let dest = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dest_addr = dest.local_addr().unwrap();
    let router = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(sink.clone());
    let server = tokio::spawn(async move { axum::serve(dest, router).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    let config_text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n\
         {telemetry}[[source]]\nname = \"bench\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n\
         destination = \"http://{dest_addr}/hook\"\ndestination_secret = \"{SECRET}\"\n\
         max_concurrency = {CONCURRENCY}\npaused = true\n",
        dir.path().display().to_string()
    );
    let (app, verifier, stop) = start(&config_text).await;
    load(&app, &verifier, n, Initial::Deliver).await;
    let (started, cpu_before) = (Instant::now(), cpu());
    app.delivery().resume("bench").await.unwrap();
    let deadline = started + Duration::from_secs(300);
    while sink.delivered.load(Ordering::Relaxed) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (took, spent) = (started.elapsed(), cpu() - cpu_before);
    let done = sink.delivered.load(Ordering::Relaxed).max(1);
    let metrics = app.metrics().clone();
    stop.cancel();
    app.wait().await.unwrap();
    server.abort();
    let exported = metrics
        .encode(hookinbox::metrics::Exposition::Prometheus)
        .lines()
        .find_map(|l| l.strip_prefix("hookinbox_telemetry_spans_exported_total "))
        .map_or(0, |v| v.trim().parse().unwrap());
    (
        done as f64 / took.as_secs_f64(),
        spent.as_secs_f64() * 1e6 / done as f64,
        exported,
    )
}
