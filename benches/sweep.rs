//! The sweeper under load: deleting `--events` expired events (record,
//! state, attempts, expiry entry and dedupe key each) while a steady ingest
//! runs, against the same steady ingest without a sweep, in one run.
//!
//! The events are made the real way — ingested, claimed, delivered — with
//! their delivery time set in the past so they are expired at once; their
//! dedupe keys expire after `dedupe_ttl` = 1 s. The sweep runs as the
//! sweeper does: `Store::sweep` steps of `sweep::BATCH` until none is left.
//!
//! Rerun: cargo bench --bench sweep -- [--quick] [--events N] [--rate R]

#[path = "support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use hookinbox::clock::unix_ms;
use hookinbox::store::schema::{Attempt, AttemptClass};
use hookinbox::store::{Finish, Ingested, Initial, Next, Store, StoreOptions};
use hookinbox::sweep::BATCH;
use hookinbox::verify::Verifier;
use support::{Flags, make_events, standard_verifier};

struct Args {
    events: usize,
    rate: usize,
}

fn args() -> Args {
    let flags = Flags::from_env();
    Args {
        events: flags.value("--events", 100_000, 1_000_000),
        rate: flags.value("--rate", 2_000, 2_000),
    }
}

/// Ingests `rate` events/s from 16 producers until `stop`; returns each ack latency.
async fn steady_ingest(
    store: Store,
    verifier: Arc<Verifier>,
    first: usize,
    rate: usize,
    stop: Arc<AtomicBool>,
) -> Vec<Duration> {
    let producers = 16;
    let per_producer = Duration::from_secs_f64(producers as f64 / rate as f64);
    let mut tasks = Vec::new();
    for p in 0..producers {
        let (store, verifier, stop) = (store.clone(), verifier.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            let mut next = Instant::now();
            let mut i = 0;
            // Bounded: at most 10 minutes of events, whatever `stop` does.
            while !stop.load(Ordering::Relaxed) && i < rate * 600 / producers {
                tokio::time::sleep_until(next.into()).await;
                next += per_producer;
                let event = make_events(&verifier, first + p * 10_000_000 + i, 1)
                    .pop()
                    .unwrap();
                let t = Instant::now();
                store.ingest(event, Initial::Hold).await.unwrap();
                waits.push(t.elapsed());
                i += 1;
            }
            waits
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    all
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    let dir = tempfile::tempdir().unwrap();
    let verifier = standard_verifier("s", dir.path());
    let options = StoreOptions {
        payload_ttl: Duration::from_secs(1),
        ..StoreOptions::new(dir.path(), Duration::from_secs(1))
    };
    let (store, writer) = Store::open(options).unwrap();
    println!(
        "hookinbox sweep bench: {} expired events, steady ingest {}/s, sweep steps of {BATCH}",
        args.events, args.rate
    );

    // Preload: ingest, claim, deliver "a day ago" — expired at once.
    let started = Instant::now();
    let long_ago = unix_ms(SystemTime::now()) - 86_400_000;
    let chunk = 50_000;
    let mut loaded = 0;
    while loaded < args.events {
        let n = chunk.min(args.events - loaded);
        let events = make_events(&verifier, loaded, n);
        let per = n.div_ceil(128);
        let mut tasks = Vec::new();
        let mut events = events;
        while !events.is_empty() {
            let rest = events.split_off(per.min(events.len()));
            let mine = std::mem::replace(&mut events, rest);
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for e in mine {
                    let Ingested::New { id } = store.ingest(e, Initial::Deliver).await.unwrap()
                    else {
                        panic!("duplicate in preload")
                    };
                    let seq = store.parse_public_id(&id).unwrap();
                    store.claim(seq, long_ago).await.unwrap().unwrap();
                    store
                        .finish(Finish {
                            seq,
                            attempt: Attempt {
                                started_ms: long_ago,
                                latency_ms: 3,
                                class: AttemptClass::Delivered,
                                status: Some(200),
                                error: None,
                                response_snippet: Some("ok".into()),
                                round: 0,
                                first_byte_ms: Some(2),
                                request_headers: Vec::new(),
                                response_headers: Vec::new(),
                            },
                            next: Next::Delivered { at_ms: long_ago },
                        })
                        .await
                        .unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        loaded += n;
    }
    println!(
        "preload: {loaded} events ingested, claimed and delivered in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_millis(1100)).await; // dedupe keys expire too

    // Baseline: steady ingest alone for 5 s.
    let stop = Arc::new(AtomicBool::new(false));
    let base = tokio::spawn(steady_ingest(
        store.clone(),
        verifier.clone(),
        100_000_000,
        args.rate,
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    let base = base.await.unwrap();

    // The same load while the sweep runs.
    let stop = Arc::new(AtomicBool::new(false));
    let during = tokio::spawn(steady_ingest(
        store.clone(),
        verifier.clone(),
        200_000_000,
        args.rate,
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sweep_started = Instant::now();
    let (mut events, mut keys, mut steps) = (0u64, 0u64, 0u64);
    let mut step_times = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let t = Instant::now();
        let step = store
            .sweep(unix_ms(SystemTime::now()), BATCH)
            .await
            .unwrap();
        step_times.push(t.elapsed());
        steps += 1;
        events += step.delivered + step.dead_or_ignored;
        keys += step.dedupe_keys;
        if !step.more || Instant::now() > deadline {
            break;
        }
        tokio::task::yield_now().await;
    }
    let sweep_time = sweep_started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let during = during.await.unwrap();
    step_times.sort();
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();

    println!(
        "sweep: {events} events and {keys} dedupe keys in {:.2}s = {:.0} events/s ({steps} steps; step p50 {} ms, p99 {} ms)",
        sweep_time.as_secs_f64(),
        events as f64 / sweep_time.as_secs_f64(),
        ms(pct(&step_times, 0.5)),
        ms(pct(&step_times, 0.99)),
    );
    println!();
    println!(
        "| steady ingest ({}/s) | acks | p50 ms | p99 ms |",
        args.rate
    );
    println!("|---|---:|---:|---:|");
    println!(
        "| without sweep | {} | {} | {} |",
        base.len(),
        ms(pct(&base, 0.5)),
        ms(pct(&base, 0.99))
    );
    println!(
        "| during sweep | {} | {} | {} |",
        during.len(),
        ms(pct(&during, 0.5)),
        ms(pct(&during, 0.99))
    );
    println!();
    println!(
        "p99 during / without: {:.2}× (target < 2×); sweep target ≥ 50,000 events/s",
        pct(&during, 0.99).as_secs_f64() / pct(&base, 0.99).as_secs_f64()
    );
    println!(
        "rerun: cargo bench --bench sweep -- --events {} --rate {}",
        args.events, args.rate
    );
}
