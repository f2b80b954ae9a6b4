//! The inbox at 110,000 events, as an operator meets it: the real binary
//! and the real CLI find one event by its provider id, the one held event,
//! the oldest dead letters and a time window, and a paginated walk sees every
//! matching event exactly once. (Before the indexes, each of these printed
//! "no events": the lists gave up after 100,000 rows.)

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use hookinbox::api;
use hookinbox::config::Config;
use hookinbox::store::schema::{Attempt, AttemptClass};
use hookinbox::store::{Finish, Ingested, Initial, Next, Store, StoreOptions};
use hookinbox::verify::{Request, Verified, VerifiedEvent, Verifier};

use crate::support::{
    BinaryServer, server_section, standard_headers, standard_source, write_config,
};

const EVENTS: usize = 110_000;
const TOKEN: &str = "scale-test-token-0123456789";
/// The customer's payment, stored early and buried under 110k newer events.
const NEEDLE: &str = "evt_1QxYZa2eZvKYlo2C8kF3bN9q";

fn verified(verifier: &Verifier, id: &str, n: usize) -> VerifiedEvent {
    let body = Bytes::from(format!(
        r#"{{"id":"{id}","type":"payment_intent.succeeded","data":{{"object":{{"customer":"cus_{n}"}}}}}}"#
    ));
    let mut headers = http::HeaderMap::new();
    for (k, v) in standard_headers(id, &body) {
        headers.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    let request = Request {
        headers: &headers,
        body: &body,
        path_rest: "",
        query: None,
    };
    match verifier.verify(&request, SystemTime::now()) {
        Ok(Verified::Event(e)) => e,
        other => panic!("{other:?}"),
    }
}

/// Fills `data` through the store (not HTTP: 110k HTTP posts would be most of
/// the test's time): one held event and the needle first, three dead letters,
/// then pending events of a paused destination. Returns every stored
/// (public id, received ms) oldest first.
async fn preload(config_text: &str, data: &std::path::Path) -> Vec<(String, u64)> {
    let (config, _) = Config::from_toml(config_text, "t", None, &|_| None)
        .unwrap()
        .resolve()
        .unwrap();
    let shop = Verifier::new(config.source("shop").unwrap()).unwrap();
    let inbox = Verifier::new(config.source("inbox").unwrap()).unwrap();
    let (store, writer) =
        Store::open(StoreOptions::new(data, Duration::from_secs(86_400))).unwrap();
    let new = |answer: Ingested| match answer {
        Ingested::New { id } => id,
        other => panic!("{other:?}"),
    };
    let held = new(store
        .ingest(verified(&inbox, "evt_held_1", 0), Initial::Hold)
        .await
        .unwrap());
    let needle = new(store
        .ingest(verified(&shop, NEEDLE, 1), Initial::Deliver)
        .await
        .unwrap());
    for n in 0..3 {
        let id = new(store
            .ingest(
                verified(&shop, &format!("evt_dead_{n}"), 2 + n),
                Initial::Deliver,
            )
            .await
            .unwrap());
        let seq = store.parse_public_id(&id).unwrap();
        store.claim(seq, 1).await.unwrap().unwrap();
        store
            .finish(Finish {
                seq,
                attempt: Attempt {
                    started_ms: 1,
                    latency_ms: 3,
                    class: AttemptClass::RejectedStatus,
                    status: Some(422),
                    error: None,
                    response_snippet: Some("unknown order".into()),
                    round: 0,
                    first_byte_ms: Some(2),
                    request_headers: Vec::new(),
                    response_headers: Vec::new(),
                },
                next: Next::Dead {
                    reason: "the app answered 422".into(),
                    at_ms: 2,
                    release_key: true,
                },
            })
            .await
            .unwrap();
    }
    let _ = (held, needle);
    // 64 producers, as providers would: group commit keeps this to seconds.
    let store = Arc::new(store);
    let shop = Arc::new(shop);
    let mut producers = tokio::task::JoinSet::new();
    for p in 0..64 {
        let (store, shop) = (store.clone(), shop.clone());
        producers.spawn(async move {
            for n in (5 + p..EVENTS).step_by(64) {
                let event = verified(&shop, &format!("evt_bulk_{n:06}"), n);
                store.ingest(event, Initial::Deliver).await.unwrap();
            }
        });
    }
    while let Some(done) = producers.join_next().await {
        done.unwrap();
    }
    let store = Arc::into_inner(store).unwrap();
    let all: Vec<(String, u64)> = store
        .scan(0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|e| (e.id, e.record.received_at_ms))
        .collect();
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
    all
}

fn cli(server: &BinaryServer, args: &[&str]) -> (i32, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    crate::cli::ops(&server.admin, TOKEN, &args)
}

fn json<T: serde::de::DeserializeOwned>(server: &BinaryServer, args: &[&str]) -> T {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, out, err) = cli(server, &args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out:.500}"))
}

fn rfc3339(ms: u64) -> String {
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_110k_events_the_cli_finds_every_kind_of_event_and_walks_them_all_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config_text = format!(
        "{}[admin]\ntoken = \"{TOKEN}\"\n\n{}destination = \"http://127.0.0.1:9/\"\npaused = true\n\n{}",
        server_section(&data),
        standard_source("shop"),
        standard_source("inbox"),
    );
    let all = tokio::time::timeout(Duration::from_secs(600), preload(&config_text, &data))
        .await
        .expect("the preload finishes within 10 minutes");
    assert_eq!(all.len(), EVENTS);
    let config = write_config(dir.path(), &config_text);
    let server = BinaryServer::start(&config, &[], None);

    // The customer's payment, by the provider's id, with or without source.
    for args in [
        vec!["events", "list", "--event-id", NEEDLE],
        vec!["events", "list", "--event-id", NEEDLE, "--source", "shop"],
    ] {
        let page: api::EventPage = json(&server, &args);
        assert_eq!(page.events.len(), 1, "{args:?}");
        assert_eq!(page.events[0].event_id, NEEDLE);
        assert_eq!(page.events[0].id, all[1].0);
        assert_eq!(page.next_cursor, None);
    }
    let (code, out, _) = cli(&server, &["events", "list", "--event-id", NEEDLE]);
    assert_eq!(code, 0);
    assert!(out.contains(NEEDLE) && !out.contains("more:"), "{out}");

    // The one held event, oldest of all.
    let page: api::EventPage = json(&server, &["events", "list", "--status", "held"]);
    let held: Vec<&str> = page.events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!((held, page.next_cursor), (vec!["evt_held_1"], None));

    // Every dead letter, the oldest included, newest first.
    let page: api::EventPage = json(&server, &["dlq", "list"]);
    let dead: Vec<&str> = page.events.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(dead, ["evt_dead_2", "evt_dead_1", "evt_dead_0"]);
    let (_, out, _) = cli(&server, &["dlq", "list"]);
    assert!(out.contains("the app answered 422"), "{out}");

    // A time window in the middle: exactly the events received in it.
    let (from, to) = (all[50_000].1, all[50_400].1);
    let want: Vec<&str> = all
        .iter()
        .filter(|(_, at)| (from..to).contains(at))
        .map(|(id, _)| id.as_str())
        .rev()
        .collect();
    assert!(want.len() >= 300, "{} events in the window", want.len());
    let events: Vec<api::EventSummary> = json(
        &server,
        &[
            "events",
            "list",
            "--from",
            &rfc3339(from),
            "--to",
            &rfc3339(to),
            "--limit",
            "100",
            "--all",
        ],
    );
    let got: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(got, want);

    // A walk of every pending event, 500 a page: each exactly once, newest first.
    let events: Vec<api::EventSummary> = json(
        &server,
        &[
            "events", "list", "--source", "shop", "--status", "pending", "--limit", "500", "--all",
        ],
    );
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        ids.len(),
        EVENTS - 4,
        "one held and three dead are not pending"
    );
    assert_eq!(unique.len(), ids.len(), "an event came twice");
    let want: Vec<&str> = all
        .iter()
        .skip(5)
        .map(|(id, _)| id.as_str())
        .rev()
        .collect();
    assert_eq!(ids[..10], want[..10]);
    assert_eq!(
        ids.last(),
        Some(&all[1].0.as_str()),
        "the needle is the oldest pending"
    );

    // Stats from the maintained counts.
    let stats: api::Stats = json(&server, &["stats"]);
    let shop = &stats.sources["shop"].stored;
    assert_eq!((shop.pending, shop.dead), ((EVENTS - 4) as u64, 3));
    assert_eq!(stats.sources["inbox"].stored.held, 1);
}
