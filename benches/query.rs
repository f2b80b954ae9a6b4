//! Queries at scale: how long an operator waits for a page of events, an
//! event id, the stats or a payload search when the store holds `--events`
//! events (default 1,000,000), and how fast a bulk change walks its matches.
//!
//! The store is filled through `Store::ingest` by concurrent producers, each
//! event a ≈1.2 KB Stripe-like body signed and verified for real, from three
//! sources and ten event types, then moved through `claim` and `finish` as
//! delivery would: 90 % delivered, 2 % dead, 1 % retrying, 3 % pending and
//! 4 % held. Then one query at a time, on read snapshots, the writer idle:
//! list pages by status, source, type and time range (the first page, the
//! first 200 pages walked by cursor, pages from random cursors deep in the
//! data), event-id lookups, `stats()`, payload search (events examined per
//! second), and the bulk walk (the ids of up to 100,000 matches in pages of
//! 500). Last, the real app opens the same data dir and answers
//! `/api/stats`, `/metrics` and lists over loopback HTTP.
//!
//! `--reuse DIR` keeps the data dir: a later run with the same or a larger
//! `--events` loads only what is missing (5M events take a while to load).
//!
//! Rerun: cargo bench --bench query -- [--quick] [--events N] [--seconds S] [--reuse DIR]

// This bench makes events of many types one at a time; `make_events` is
// the other benches'.
#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use hookinbox::app::{App, Listeners};
use hookinbox::clock::{Clock, unix_ms};
use hookinbox::config::Config;
use hookinbox::store::schema::{Attempt, AttemptClass, Status};
use hookinbox::store::{
    Budget, DB_FILE, EventFilter, Finish, Ingested, Initial, Next, PayloadMatch, Store,
    StoreOptions, WriterHandle,
};
use hookinbox::verify::Verifier;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::{Flags, SECRET, event_id, stripe_like_body, stripe_like_body_of_type, verified};

/// Sources and their share of events, in %.
const SOURCES: [(&str, u64); 3] = [("stripe", 60), ("github", 30), ("shopify", 10)];

/// Event types and their share, in %: a few common ones and a tail.
const TYPES: [(&str, u64); 10] = [
    ("payment_intent.succeeded", 30),
    ("invoice.paid", 20),
    ("customer.updated", 12),
    ("charge.succeeded", 10),
    ("invoice.created", 8),
    ("customer.subscription.updated", 6),
    ("payment_intent.payment_failed", 5),
    ("charge.refunded", 4),
    ("checkout.session.completed", 3),
    ("customer.created", 2),
];

/// Where an event ends up after the preload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Delivered,
    Dead,
    /// Pending after one failed attempt, due again in an hour.
    Retrying,
    /// Pending, never attempted.
    Pending,
    /// Ingested for holding (as a source without a destination does).
    Held,
}

/// Fates and their share, in ‰.
const FATES: [(Fate, u64); 5] = [
    (Fate::Delivered, 900),
    (Fate::Dead, 20),
    (Fate::Retrying, 10),
    (Fate::Pending, 30),
    (Fate::Held, 40),
];

/// Concurrent producers in the preload. 256: batches of a few hundred jobs,
/// as in benches/ingest.rs at scale; more only lengthens the queue.
const PRODUCERS: usize = 256;

/// Samples per latency measurement at most (each is also bounded by
/// `--seconds`): enough for a p99 that is not just the maximum.
const MAX_SAMPLES: usize = 1_000;

/// Pages a cursor walk takes at most: "page 200" of a list.
const WALK_PAGES: usize = 200;

/// One list page, as the admin API answers by default.
const PAGE: usize = 50;

/// One bulk page: the admin API's largest (`MAX_PAGE`).
const BULK_PAGE: usize = 500;

/// Most events one bulk change takes (the admin API's `MAX_BULK`).
const BULK_MAX: usize = 100_000;

/// What one search call may examine: the admin API's budget.
const SEARCH_BUDGET: Budget = Budget {
    events: hookinbox::api::SEARCH_EVENTS,
    time: hookinbox::api::SEARCH_TIME,
};

/// The admin token of the app started on the preloaded data.
const ADMIN_TOKEN: &str = "query-bench-admin-token-0123456789";

/// Nothing in the preloaded data expires: a reused data dir stays whole
/// however long it is kept, even when the real app's sweeper runs on it.
const KEEP: Duration = Duration::from_secs(3650 * 86_400);

struct Args {
    events: usize,
    /// No measurement lasts longer than this, whatever its count.
    seconds: Duration,
    reuse: Option<PathBuf>,
    /// Also time the migration of a schema 3 copy of the data.
    migration: bool,
}

fn args() -> Args {
    let flags = Flags::from_env();
    Args {
        events: flags.value("--events", 100_000, 1_000_000),
        seconds: Duration::from_secs(flags.value("--seconds", 1, 2) as u64),
        reuse: flags.text("--reuse").map(PathBuf::from),
        migration: std::env::args().any(|a| a == "--migration"),
    }
}

/// A well-mixed hash of `i` (splitmix64): the plan of event `i` is the same
/// in every run, so a reused data dir and this run agree on it.
fn mix(i: usize) -> u64 {
    let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The index of the row that `roll` (below the weights' sum) falls in.
fn pick<T>(table: &[(T, u64)], roll: u64) -> usize {
    let mut upto = 0;
    for (n, (_, weight)) in table.iter().enumerate() {
        upto += weight;
        if roll < upto {
            return n;
        }
    }
    table.len() - 1
}

/// Event `i`: its source (an index into `SOURCES`), type and fate.
struct Plan {
    source: usize,
    event_type: &'static str,
    fate: Fate,
}

fn plan(i: usize) -> Plan {
    let h = mix(i);
    Plan {
        source: pick(&SOURCES, h % 100),
        event_type: TYPES[pick(&TYPES, (h >> 20) % 100)].0,
        fate: FATES[pick(&FATES, (h >> 40) % 1000)].0,
    }
}

/// Moves new event `seq` to its fate as one delivery attempt would.
async fn settle(store: &Store, seq: u64, fate: Fate) {
    let now = unix_ms(SystemTime::now());
    let (class, status, next) = match fate {
        Fate::Pending | Fate::Held => return,
        Fate::Delivered => (AttemptClass::Delivered, 200, Next::Delivered { at_ms: now }),
        Fate::Dead => (
            AttemptClass::RejectedStatus,
            410,
            Next::Dead {
                reason: "the destination answered 410".into(),
                at_ms: now,
                release_key: true,
            },
        ),
        Fate::Retrying => (
            AttemptClass::RetryableStatus,
            503,
            Next::RetryAt {
                due_ms: now + 3_600_000,
            },
        ),
    };
    store
        .claim(seq, now)
        .await
        .unwrap()
        .expect("a new event is pending and unleased");
    let attempt = Attempt {
        started_ms: now,
        latency_ms: 12,
        class,
        status: Some(status),
        error: (status != 200).then(|| format!("HTTP {status}")),
        response_snippet: Some(if status == 200 { "ok" } else { "try later" }.into()),
        // What a delivery keeps (`deliver::kept`): the signature's start and
        // the user agent (the contract's other headers are rebuilt when
        // read), and the app's answer's headers.
        round: 0,
        first_byte_ms: Some(9),
        request_headers: [
            ("webhook-signature", "v1,K5oZf…"),
            ("user-agent", "hookinbox/0.1.0"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec(),
        response_headers: [
            ("content-type", "text/plain; charset=utf-8"),
            ("content-length", "2"),
            ("date", "Thu, 27 Nov 2026 10:00:00 GMT"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec(),
    };
    store.finish(Finish { seq, attempt, next }).await.unwrap();
}

/// Loads events `from..to` from `PRODUCERS` tasks until done or `limit`.
/// Returns the events stored anew and `n` such that every event below `n`
/// is stored (an event found already stored, left by an interrupted earlier
/// run, is skipped).
async fn preload(
    store: &Store,
    verifiers: &Arc<Vec<Verifier>>,
    from: usize,
    to: usize,
    limit: Duration,
) -> (usize, usize) {
    let started = Instant::now();
    let deadline = started + limit;
    let stored = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (store, verifiers, stored) = (store.clone(), verifiers.clone(), stored.clone());
            tokio::spawn(async move {
                // Producer p takes every PRODUCERS-th event: seq order stays
                // close to event order, and receipt time grows with both.
                let mut i = from + p;
                while i < to && Instant::now() < deadline {
                    let plan = plan(i);
                    let id = event_id(i);
                    let body = stripe_like_body_of_type(&id, i, plan.event_type);
                    let event = verified(&verifiers[plan.source], &id, body);
                    let initial = match plan.fate {
                        Fate::Held => Initial::Hold,
                        _ => Initial::Deliver,
                    };
                    if let Ingested::New { id } = store.ingest(event, initial).await.unwrap() {
                        let seq = store.parse_public_id(&id).unwrap();
                        settle(&store, seq, plan.fate).await;
                        stored.fetch_add(1, Ordering::Relaxed);
                    }
                    i += PRODUCERS;
                }
                i.min(to)
            })
        })
        .collect();
    // Progress every 30 s: a 5M preload takes long enough to wonder.
    let done = Arc::new(AtomicBool::new(false));
    let progress = {
        let (done, stored) = (done.clone(), stored.clone());
        tokio::spawn(async move {
            let mut next = started + Duration::from_secs(30);
            while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if Instant::now() >= next {
                    next += Duration::from_secs(30);
                    let n = stored.load(Ordering::Relaxed);
                    let secs = started.elapsed().as_secs_f64();
                    println!(
                        "  preload: {n} of {} in {secs:.0}s ({:.0} events/s)",
                        to - from,
                        n as f64 / secs
                    );
                }
            }
        })
    };
    let mut reached = to;
    for t in tasks {
        reached = reached.min(t.await.unwrap());
    }
    done.store(true, Ordering::Relaxed);
    progress.await.unwrap();
    (stored.load(Ordering::Relaxed), reached)
}

/// Where a kept data dir notes how many events are loaded (all below it).
fn marker(dir: &Path) -> PathBuf {
    dir.join("query-bench.loaded")
}

fn loaded_before(dir: &Path) -> usize {
    std::fs::read_to_string(marker(dir))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn file_size(dir: &Path) -> u64 {
    std::fs::metadata(dir.join(DB_FILE)).map_or(0, |m| m.len())
}

fn open(dir: &Path) -> (Store, WriterHandle) {
    let options = StoreOptions {
        payload_ttl: KEEP,
        dlq_ttl: KEEP,
        ..StoreOptions::new(dir, KEEP)
    };
    Store::open(options).unwrap()
}

/// Calls `f` up to `MAX_SAMPLES` times or until `limit`; the latencies, sorted.
fn time_calls(limit: Duration, mut f: impl FnMut(usize)) -> Vec<Duration> {
    let started = Instant::now();
    let mut out = Vec::with_capacity(MAX_SAMPLES);
    for n in 0..MAX_SAMPLES {
        if n > 0 && started.elapsed() >= limit {
            break;
        }
        let t = Instant::now();
        f(n);
        out.push(t.elapsed());
    }
    out.sort();
    out
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted
        .get(((sorted.len().max(1) - 1) as f64 * p) as usize)
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// p50 and p99 cells.
fn cells(sorted: &[Duration]) -> String {
    format!("{} | {}", ms(pct(sorted, 0.5)), ms(pct(sorted, 0.99)))
}

/// One list query of the table, and the seqs its matches lie in.
struct ListQuery {
    name: String,
    filter: EventFilter,
    /// Seqs `lo..hi` where its matches are: deep cursors are drawn inside.
    seqs: (u64, u64),
}

/// Walks `filter`'s pages from the newest, up to `WALK_PAGES` or `limit`:
/// each page's latency, sorted, and how many pages there were.
fn walk(store: &Store, filter: &EventFilter, limit: Duration) -> (Vec<Duration>, usize) {
    let started = Instant::now();
    let mut times = Vec::new();
    let mut cursor = None;
    while times.len() < WALK_PAGES && started.elapsed() < limit {
        let t = Instant::now();
        let (page, next) = store.list(filter, cursor, PAGE).unwrap();
        times.push(t.elapsed());
        assert!(
            !page.is_empty() || times.len() == 1,
            "an empty page mid-walk"
        );
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let pages = times.len();
    times.sort();
    (times, pages)
}

/// A search run: calls continue from each other's cursor until the store
/// is examined to its oldest event or `limit` passes.
struct SearchRun {
    examined: u64,
    matched: usize,
    elapsed: Duration,
    calls: Vec<Duration>,
    whole: bool,
}

fn search(
    store: &Store,
    filter: &EventFilter,
    payload: &PayloadMatch,
    limit: Duration,
) -> SearchRun {
    let started = Instant::now();
    let mut run = SearchRun {
        examined: 0,
        matched: 0,
        elapsed: Duration::ZERO,
        calls: Vec::new(),
        whole: false,
    };
    let mut cursor = None;
    // Bounded by time, and by count: each call moves the cursor back.
    while started.elapsed() < limit && run.calls.len() < MAX_SAMPLES {
        let t = Instant::now();
        let page = store
            .search(filter, payload, cursor, PAGE, SEARCH_BUDGET)
            .unwrap();
        run.calls.push(t.elapsed());
        run.examined += page.examined;
        run.matched += page.events.len();
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => {
                run.whole = true;
                break;
            }
        }
    }
    run.elapsed = started.elapsed();
    run.calls.sort();
    run
}

/// The ids of up to `BULK_MAX` events matching `filter`, in pages of
/// `BULK_PAGE`, as a bulk replay gathers them; bounded by `limit` too.
/// Returns the ids, the time, and each page's latency, sorted.
fn bulk_walk(
    store: &Store,
    filter: &EventFilter,
    limit: Duration,
) -> (usize, Duration, Vec<Duration>) {
    let started = Instant::now();
    let mut ids: Vec<u64> = Vec::new();
    let mut pages = Vec::new();
    let mut cursor = None;
    while ids.len() < BULK_MAX && started.elapsed() < limit {
        let t = Instant::now();
        let (page, next) = store.list(filter, cursor, BULK_PAGE).unwrap();
        pages.push(t.elapsed());
        ids.extend(page.iter().map(|e| e.seq));
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let took = started.elapsed();
    pages.sort();
    (ids.len().min(BULK_MAX), took, pages)
}

/// Every measurement on the store itself; prints its tables.
fn measure_store(store: &Store, loaded: usize, limit: Duration) {
    let mut rng = StdRng::seed_from_u64(10);
    let count = store.count().unwrap();
    let first = store.scan(0, 1).unwrap()[0].seq;
    let last = first + count - 1;
    let at = |share: u64| first + (last - first) * share / 100;
    let received = |seq: u64| store.scan(seq - 1, 1).unwrap()[0].record.received_at_ms;
    let (mid_lo, mid_hi) = (at(45), at(55));
    let (from_ms, to_ms) = (received(mid_lo), received(mid_hi));
    let all = (first, last + 1);
    let by = |source: Option<&str>, status: Option<Status>, event_type: Option<&str>| EventFilter {
        source: source.map(str::to_owned),
        status,
        event_type: event_type.map(str::to_owned),
        ..EventFilter::default()
    };
    let in_middle = |status: Option<Status>| EventFilter {
        status,
        from_ms: Some(from_ms),
        to_ms: Some(to_ms),
        ..EventFilter::default()
    };
    let queries = [
        ListQuery {
            name: "status = delivered (90 %)".into(),
            filter: by(None, Some(Status::Delivered), None),
            seqs: all,
        },
        ListQuery {
            name: "status = dead (2 %)".into(),
            filter: by(None, Some(Status::Dead), None),
            seqs: all,
        },
        ListQuery {
            name: "source = stripe (60 %)".into(),
            filter: by(Some("stripe"), None, None),
            seqs: all,
        },
        ListQuery {
            name: "source = shopify, status = dead (0.2 %)".into(),
            filter: by(Some("shopify"), Some(Status::Dead), None),
            seqs: all,
        },
        ListQuery {
            name: "type = invoice.paid (20 %)".into(),
            filter: by(None, None, Some("invoice.paid")),
            seqs: all,
        },
        ListQuery {
            name: "type = customer.created (2 %)".into(),
            filter: by(None, None, Some("customer.created")),
            seqs: all,
        },
        ListQuery {
            name: "source = github, type = charge.refunded, status = delivered (1.1 %)".into(),
            filter: by(
                Some("github"),
                Some(Status::Delivered),
                Some("charge.refunded"),
            ),
            seqs: all,
        },
        ListQuery {
            name: "received in the middle 10 % (time range)".into(),
            filter: in_middle(None),
            seqs: (mid_lo, mid_hi),
        },
        ListQuery {
            name: "time range, status = dead (0.2 %)".into(),
            filter: in_middle(Some(Status::Dead)),
            seqs: (mid_lo, mid_hi),
        },
        ListQuery {
            name: "no filter (100 %)".into(),
            filter: EventFilter::default(),
            seqs: all,
        },
    ];
    println!();
    println!(
        "| list, {PAGE} a page | first page p50 ms | p99 ms | pages 1–{WALK_PAGES} by cursor p50 ms | p99 ms | pages | random deep cursor p50 ms | p99 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for q in &queries {
        let first_page = time_calls(limit, |_| {
            let (page, _) = store.list(&q.filter, None, PAGE).unwrap();
            assert!(!page.is_empty(), "{}: no match", q.name);
        });
        let (walked, pages) = walk(store, &q.filter, limit);
        let (lo, hi) = q.seqs;
        let span = hi - lo;
        let deep = time_calls(limit, |_| {
            // Anywhere but the newest and the oldest tenth of the matches' seqs.
            let before = rng.random_range(lo + span / 10..hi - span / 10);
            store.list(&q.filter, Some(before), PAGE).unwrap();
        });
        println!(
            "| {} | {} | {} | {pages} | {} |",
            q.name,
            cells(&first_page),
            cells(&walked),
            cells(&deep)
        );
    }

    // Event ids: of stored events, drawn at random; and of none.
    let stored = |rng: &mut StdRng| {
        let i = rng.random_range(0..loaded);
        (SOURCES[plan(i).source].0, event_id(i))
    };
    let mut found = 0;
    let with_source = time_calls(limit, |_| {
        let (source, id) = stored(&mut rng);
        let f = EventFilter {
            source: Some(source.into()),
            event_id: Some(id),
            ..EventFilter::default()
        };
        found += store.list(&f, None, PAGE).unwrap().0.len();
    });
    assert_eq!(found, with_source.len(), "every stored event id is found");
    found = 0;
    let without_source = time_calls(limit, |_| {
        let (_, id) = stored(&mut rng);
        let f = EventFilter {
            event_id: Some(id),
            ..EventFilter::default()
        };
        found += store.list(&f, None, PAGE).unwrap().0.len();
    });
    assert_eq!(
        found,
        without_source.len(),
        "every stored event id is found"
    );
    let by_find = time_calls(limit, |_| {
        let (source, id) = stored(&mut rng);
        assert!(store.find(source, &id).unwrap().is_some());
    });
    let missing = time_calls(limit, |n| {
        let f = EventFilter {
            event_id: Some(format!("evt_never_stored_{n}")),
            ..EventFilter::default()
        };
        assert!(store.list(&f, None, PAGE).unwrap().0.is_empty());
    });
    let stats = time_calls(limit, |_| {
        assert_eq!(store.stats().unwrap().len(), SOURCES.len());
    });
    println!();
    println!("| lookup | calls | p50 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    for (name, times) in [
        ("list: event_id + source", &with_source),
        ("list: event_id, any source", &without_source),
        ("Store::find(source, event_id)", &by_find),
        ("list: event_id never stored, any source", &missing),
        ("Store::stats()", &stats),
    ] {
        println!("| {name} | {} | {} |", times.len(), cells(times));
    }

    // Search: a needle that matches one event, a tenth of the way back from
    // the newest, so calls examine until their budget and find it early.
    let rare_id = (loaded - loaded / 10).to_string();
    let searches = [
        (
            "substring, matches one event",
            EventFilter::default(),
            PayloadMatch {
                text: Some(format!("buyer{rare_id}@")),
                pointer: None,
                seen_as: None,
            },
        ),
        (
            "substring, source = github",
            by(Some("github"), None, None),
            PayloadMatch {
                text: Some(format!("buyer{rare_id}@")),
                pointer: None,
                seen_as: None,
            },
        ),
        (
            "pointer = value, value rare",
            EventFilter::default(),
            PayloadMatch {
                text: None,
                pointer: Some(("/data/object/metadata/order_id".into(), rare_id.clone())),
                seen_as: None,
            },
        ),
        (
            "pointer = value, value in every payload (each parsed)",
            EventFilter::default(),
            PayloadMatch {
                text: None,
                pointer: Some(("/data/object/status".into(), "normal".into())),
                seen_as: None,
            },
        ),
    ];
    println!();
    println!(
        "| search (budget {} events / {} ms a call) | examined | matched | s | examined/s | call p50 ms | call p99 ms |",
        SEARCH_BUDGET.events,
        SEARCH_BUDGET.time.as_millis()
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, filter, payload) in &searches {
        let run = search(store, filter, payload, limit.max(Duration::from_secs(2)));
        println!(
            "| {name} | {}{} | {} | {:.2} | {:.0} | {} |",
            run.examined,
            if run.whole { " (all)" } else { "" },
            run.matched,
            run.elapsed.as_secs_f64(),
            run.examined as f64 / run.elapsed.as_secs_f64(),
            cells(&run.calls)
        );
    }

    // Bulk: the ids a bulk replay gathers before it changes anything.
    println!();
    println!(
        "| bulk walk, ids of ≤ {BULK_MAX} matches in pages of {BULK_PAGE} | ids | s | ids/s | page p50 ms | page p99 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, filter) in [
        ("source = shopify (10 %)", by(Some("shopify"), None, None)),
        (
            "status = delivered (90 %)",
            by(None, Some(Status::Delivered), None),
        ),
        (
            "type = customer.created (2 %)",
            by(None, None, Some("customer.created")),
        ),
    ] {
        let (ids, took, pages) = bulk_walk(store, &filter, Duration::from_secs(60));
        println!(
            "| {name} | {ids} | {:.2} | {:.0} | {} |",
            took.as_secs_f64(),
            ids as f64 / took.as_secs_f64(),
            cells(&pages)
        );
    }
}

/// The real app on the preloaded data dir: the admin API over loopback.
/// Opens a schema 3 copy of the data (the index tables dropped, the version
/// set back, as a database from before the indexes) and times the open,
/// which builds every index and count from `state`.
async fn measure_migration(dir: &Path) {
    let parent = dir.parent().unwrap_or(Path::new("."));
    let copy = tempfile::tempdir_in(parent).unwrap();
    let file = copy.path().join(DB_FILE);
    std::fs::copy(dir.join(DB_FILE), &file).unwrap();
    {
        let db = redb::Database::create(&file).unwrap();
        let txn = db.begin_write().unwrap();
        for name in ["by_type", "pending_since", "counts", "minutes", "erased"] {
            txn.delete_table(redb::TableDefinition::<(), ()>::new(name))
                .unwrap();
        }
        txn.open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
            .unwrap()
            .insert("schema_version", [3u8].as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let path = copy.path().to_owned();
    let started = Instant::now();
    let (store, writer) =
        tokio::task::spawn_blocking(move || Store::open(StoreOptions::new(&path, KEEP)).unwrap())
            .await
            .unwrap();
    let took = started.elapsed();
    let events = store.count().unwrap();
    println!();
    println!(
        "migration: schema 3 → {} of {events} events (indexes and counts built from state) took {:.1} s at open",
        hookinbox::store::schema::SCHEMA_VERSION,
        took.as_secs_f64()
    );
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

async fn measure_http(dir: &Path, limit: Duration) {
    let mut text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n\
         [retention]\ndedupe_ttl = \"3650d\"\npayload_ttl = \"3650d\"\ndlq_ttl = \"3650d\"\n\n\
         [admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n",
        dir.display().to_string()
    );
    // Paused destinations: the pending events stay where the preload left them.
    for (name, _) in SOURCES {
        text.push_str(&format!(
            "[[source]]\nname = \"{name}\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n\
             destination = \"http://127.0.0.1:9/hook\"\ndestination_secret = \"{SECRET}\"\n\
             paused = true\n\n"
        ));
    }
    let (config, _generated) = Config::from_toml(&text, "bench", None, &|_| None)
        .unwrap()
        .resolve()
        .unwrap();
    let listeners = Listeners {
        ingest: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        admin: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let opened = Instant::now();
    let app = App::start(config, listeners, Clock::system(), stop.clone())
        .await
        .unwrap();
    let open_time = opened.elapsed();
    let client = hookinbox::send::http_client(Duration::from_secs(30)).unwrap();
    let base = format!("http://{}", app.admin_addr());
    let paths = [
        "/api/stats".to_owned(),
        "/metrics".to_owned(),
        "/api/events?status=dead&limit=50".to_owned(),
        "/api/events?source=github&type=charge.refunded&limit=50".to_owned(),
        format!(
            "/api/events?source={}&event_id={}",
            SOURCES[plan(6).source].0,
            event_id(6)
        ),
        "/api/events?limit=500".to_owned(),
    ];
    println!();
    println!(
        "| admin API over loopback HTTP (the app opened the store in {:.1}s) | requests | p50 ms | p99 ms | bytes |",
        open_time.as_secs_f64()
    );
    println!("|---|---:|---:|---:|---:|");
    for path in &paths {
        let started = Instant::now();
        let mut times = Vec::new();
        let mut bytes = 0;
        while times.len() < MAX_SAMPLES && (times.is_empty() || started.elapsed() < limit) {
            let t = Instant::now();
            let res = client
                .get(format!("{base}{path}"))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await
                .unwrap();
            assert!(res.status().is_success(), "{path}: {}", res.status());
            bytes = res.bytes().await.unwrap().len();
            times.push(t.elapsed());
        }
        times.sort();
        println!(
            "| GET {path} | {} | {} | {bytes} |",
            times.len(),
            cells(&times)
        );
    }
    stop.cancel();
    app.wait().await.unwrap();
}

/// What a "free pages" gauge would cost a scrape: redb counts its free and
/// allocated pages only in `WriteTransaction::stats`, which walks every
/// table while it holds the write lock (ingest would wait that long). Timed
/// on the closed store, so `/metrics` reports file sizes instead.
fn measure_free_page_count(dir: &Path) {
    let db = redb::Database::create(dir.join(DB_FILE)).unwrap();
    let started = Instant::now();
    let txn = db.begin_write().unwrap();
    let stats = txn.stats().unwrap();
    let took = started.elapsed();
    txn.abort().unwrap();
    let file_pages = file_size(dir) / stats.page_size() as u64;
    println!();
    println!(
        "redb free-page count (WriteTransaction::stats, under the write lock): {:.2} s; {} of {file_pages} pages allocated",
        took.as_secs_f64(),
        stats.allocated_pages()
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args = args();
    let temp;
    let dir = match &args.reuse {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::tempdir().unwrap();
            temp.path().to_owned()
        }
    };
    let mut config_text = String::new();
    for (name, _) in SOURCES {
        config_text.push_str(&format!(
            "[[source]]\nname = \"{name}\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n\n"
        ));
    }
    let config = Config::from_toml(&config_text, "bench", None, &|_| None).unwrap();
    // The sources give their secrets: resolving them writes nothing to the data dir.
    let verifiers: Vec<Verifier> = config
        .sources
        .into_iter()
        .map(|s| Verifier::new(&s.resolve(&dir, &mut Vec::new()).unwrap()).unwrap())
        .collect();
    let verifiers = Arc::new(verifiers);
    println!(
        "hookinbox query bench: {} events, body ≈{} B, sources {}, {} event types, {} cores",
        args.events,
        stripe_like_body(&event_id(0), 0).len(),
        SOURCES.map(|(n, s)| format!("{n} {s} %")).join(", "),
        TYPES.len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let (store, writer) = open(&dir);
    let before = loaded_before(&dir);
    let started = Instant::now();
    let loaded = if before < args.events {
        println!(
            "preload: events {before}..{} into {} ({PRODUCERS} producers; each signed, verified, ingested, then claimed and finished as its fate says)",
            args.events,
            dir.display()
        );
        let (stored, reached) = preload(
            &store,
            &verifiers,
            before,
            args.events,
            Duration::from_secs(4 * 3600),
        )
        .await;
        std::fs::write(marker(&dir), reached.to_string()).unwrap();
        let took = started.elapsed();
        println!(
            "preload: {stored} events stored in {:.1}s = {:.0} events/s{}",
            took.as_secs_f64(),
            stored as f64 / took.as_secs_f64(),
            if reached < args.events {
                format!(" (stopped at the 4 h limit at event {reached})")
            } else {
                String::new()
            }
        );
        reached
    } else {
        println!(
            "preload: reusing {} ({before} events loaded earlier)",
            dir.display()
        );
        before
    };
    let count = store.count().unwrap();
    let size = file_size(&dir);
    println!(
        "store: {count} events, file {:.0} MiB ({:.0} B/event)",
        size as f64 / (1 << 20) as f64,
        size as f64 / count.max(1) as f64
    );
    let stats = store.stats().unwrap();
    let mut totals = hookinbox::store::Counts::default();
    for s in stats.values() {
        let c = &s.counts;
        totals.pending += c.pending;
        totals.retrying += c.retrying;
        totals.held += c.held;
        totals.delivered += c.delivered;
        totals.dead += c.dead;
        totals.ignored += c.ignored;
    }
    println!(
        "by status: delivered {}, dead {}, pending {} (of which retrying {}), held {}, ignored {}",
        totals.delivered, totals.dead, totals.pending, totals.retrying, totals.held, totals.ignored
    );

    let limit = args.seconds;
    let reader = store.clone();
    tokio::task::spawn_blocking(move || measure_store(&reader, loaded, limit))
        .await
        .unwrap();
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();

    measure_http(&dir, limit).await;
    let closed = dir.clone();
    tokio::task::spawn_blocking(move || measure_free_page_count(&closed))
        .await
        .unwrap();
    if args.migration {
        measure_migration(&dir).await;
    }

    println!();
    println!(
        "targets: list first and deep pages p50/p99 ≤ 10 ms; event-id lookup p99 ≤ 2 ms; stats p99 ≤ 10 ms; search ≥ 300,000 examined/s; bulk ≥ 20,000 ids/s"
    );
    println!(
        "rerun: cargo bench --bench query -- --events {} --seconds {}{}{}",
        args.events,
        args.seconds.as_secs(),
        if args.migration { " --migration" } else { "" },
        args.reuse
            .as_ref()
            .map(|d| format!(" --reuse {}", d.display()))
            .unwrap_or_default()
    );
}
