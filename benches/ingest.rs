//! Durable inserts per second of the store, with the real event shape.
//!
//! Each event is a ≈1.2 KB Stripe-like JSON body, signed as Standard Webhooks
//! and verified for real before the timed part; the timed part is
//! `Store::ingest` only: dedupe key, inbox record, state row and schedule
//! entry, committed with fsync. Compares one commit per event
//! (`max_batch = 1`) with group commit at 1, 16, 64 and 256 concurrent
//! producers in the same run, then group commit on top of a large store.
//!
//! Rerun: cargo bench --bench ingest -- [--quick] [--preload 1000000]

use std::time::{Duration, Instant};

use hookinbox::store::MAX_BATCH;

#[path = "support/mod.rs"]
mod support;
#[allow(dead_code)]
#[path = "support/drive.rs"]
mod drive;

use drive::{Cost, close, drive, file_size, open};

use support::{Flags, make_events, standard_verifier, stripe_like_body};

struct Args {
    /// Events per one-commit-per-event run: ~2,000/s makes 2,000 take ~1 s.
    single: usize,
    /// Events per group-commit run: enough for hundreds of batches.
    group: usize,
    /// Events stored before the "at scale" run.
    preload: usize,
    /// No run lasts longer than this, whatever its count.
    limit: Duration,
}

fn args() -> Args {
    let flags = Flags::from_env();
    Args {
        single: flags.value("--single", 300, 2_000),
        group: flags.value("--events", 5_000, 50_000),
        preload: flags.value("--preload", 20_000, 1_000_000),
        limit: Duration::from_secs(if flags.quick() { 10 } else { 30 }),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    let data = tempfile::tempdir().unwrap();
    let verifier = standard_verifier("stripe", data.path());
    let sample = stripe_like_body("evt_000000000000_00000000", 1).len();
    println!(
        "hookinbox ingest bench: body ≈{sample} B, MAX_BATCH {MAX_BATCH}, {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| producers | one commit/event: ev/s | p50 ms | p99 ms | group commit: ev/s | p50 ms | p99 ms | group / one |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut next = 0;
    let mut empty_64 = 0.0;
    let mut empty_64_cost = String::new();
    for producers in [1, 16, 64, 256] {
        let dir = tempfile::tempdir().unwrap();
        let (store, writer) = open(dir.path(), 1);
        let single = drive(
            &store,
            make_events(&verifier, next, args.single),
            producers,
            args.limit,
        )
        .await;
        next += args.single;
        close(store, writer).await;

        let dir = tempfile::tempdir().unwrap();
        let (store, writer) = open(dir.path(), MAX_BATCH);
        let events = make_events(&verifier, next, args.group);
        let before = Cost::now();
        let group = drive(&store, events, producers, args.limit).await;
        let cost = before.per_event(Cost::now(), group.events);
        next += args.group;
        close(store, writer).await;
        if producers == 64 {
            empty_64 = group.rate();
            empty_64_cost = cost;
        }
        println!(
            "| {producers} | {:.0} | {} | {} | {:.0} | {} | {} | {:.1}× |",
            single.rate(),
            ms(single.p50),
            ms(single.p99),
            group.rate(),
            ms(group.p50),
            ms(group.p99),
            group.rate() / single.rate()
        );
    }

    // At scale: group commit on top of a store already holding `preload` events.
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = open(dir.path(), MAX_BATCH);
    let started = Instant::now();
    let preload_before = Cost::now();
    let chunk = 50_000;
    let mut loaded = 0;
    while loaded < args.preload {
        let n = chunk.min(args.preload - loaded);
        let run = drive(
            &store,
            make_events(&verifier, next + loaded, n),
            256,
            Duration::from_secs(600),
        )
        .await;
        loaded += run.events;
    }
    next += loaded;
    let preload_time = started.elapsed();
    let preload_cost = preload_before.per_event(Cost::now(), loaded);
    let size = file_size(dir.path());
    let events = make_events(&verifier, next, args.group);
    let before = Cost::now();
    let scaled = drive(&store, events, 64, args.limit).await;
    let scaled_cost = before.per_event(Cost::now(), scaled.events);
    close(store, writer).await;
    println!();
    println!(
        "preloaded {loaded} events in {:.1}s (256 producers, includes signing and verifying); file {:.0} MiB, {:.0} B/event",
        preload_time.as_secs_f64(),
        size as f64 / (1 << 20) as f64,
        size as f64 / loaded.max(1) as f64
    );
    println!(
        "group commit, 64 producers: empty store {empty_64:.0} ev/s; at {loaded} stored {:.0} ev/s (p50 {} ms, p99 {} ms); ratio {:.2}",
        scaled.rate(),
        ms(scaled.p50),
        ms(scaled.p99),
        scaled.rate() / empty_64
    );
    println!(
        "cost per event (steadier than the rates): preload {preload_cost}; 64 producers empty {empty_64_cost}; at {loaded} stored {scaled_cost}"
    );
    println!();
    println!(
        "targets: group ≥ 10× one-per-event; ≥ 30,000 ev/s at 64 producers empty; ≥ 20,000 ev/s at 1M stored"
    );
    println!(
        "rerun: cargo bench --bench ingest -- --preload {}",
        args.preload
    );
}
