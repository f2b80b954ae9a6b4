//! Crash and storage-failure tests on the real binary: kill -9 under load,
//! and a data dir that cannot grow (RLIMIT_FSIZE, as a full disk would).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{
    BinaryServer, client, eventually, read_all, server_section, standard_headers, standard_source,
    write_config,
};

#[derive(Debug, Clone)]
enum Outcome {
    Acked { id: String },
    Refused(u16),
    NoAnswer,
}

/// 3,000 signed events, 10% of them repeats of earlier ones, from 32
/// connections; kill -9 after 1,000 acks; restart. Every acked event is
/// stored exactly once; anything else is absent or complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_mid_load_loses_no_acked_event_and_half_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(
        dir.path(),
        &format!("{}{}", server_section(&data), standard_source("demo")),
    );
    let mut server = BinaryServer::start(&config, &[], None);

    // The plan: ids 0..2700 once each, plus 300 repeats of earlier ids, in a fixed order.
    let mut plan: Vec<String> = Vec::with_capacity(3000);
    for i in 0..2700u32 {
        plan.push(format!("evt_{i}"));
        if i % 9 == 8 {
            plan.push(format!("evt_{}", (i * 7919) % (i + 1)));
        }
    }
    let body_of = |id: &str| {
        format!(
            "{{\"type\":\"crash.test\",\"id\":\"{id}\",\"pad\":\"{}\"}}",
            "é".repeat(400)
        )
        .into_bytes()
    };
    let plan = Arc::new(plan);
    let next = Arc::new(AtomicUsize::new(0));
    let acked = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let url = server.url("/in/demo");
    let http = client();
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (plan, next, acked, killed, url, http) = (
            plan.clone(),
            next.clone(),
            acked.clone(),
            killed.clone(),
            url.clone(),
            http.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut seen: Vec<(String, Outcome)> = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= plan.len() || killed.load(Ordering::Relaxed) {
                    return seen;
                }
                let id = &plan[n];
                let body = body_of(id);
                let mut req = http
                    .post(&url)
                    .body(body.clone())
                    .timeout(Duration::from_secs(10));
                for (k, v) in standard_headers(id, &body) {
                    req = req.header(k, v);
                }
                let outcome = match req.send().await {
                    Ok(res) if res.status().is_success() => match res.bytes().await {
                        Ok(raw) => {
                            let json: serde_json::Value = serde_json::from_slice(&raw).unwrap();
                            acked.fetch_add(1, Ordering::Relaxed);
                            Outcome::Acked {
                                id: json["id"].as_str().unwrap().to_owned(),
                            }
                        }
                        // The answer was cut off: the provider saw no 2xx.
                        Err(_) => Outcome::NoAnswer,
                    },
                    Ok(res) => Outcome::Refused(res.status().as_u16()),
                    Err(_) => Outcome::NoAnswer,
                };
                seen.push((id.clone(), outcome));
            }
        }));
    }
    eventually(
        "the load reaches 1,000 acks",
        Duration::from_secs(120),
        Duration::from_millis(1),
        async || match acked.load(Ordering::Relaxed) {
            n if n >= 1000 => Ok(()),
            n => Err(format!("{n} acks")),
        },
    )
    .await;
    server.kill9();
    killed.store(true, Ordering::Relaxed);
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    for w in workers {
        outcomes.extend(w.await.unwrap());
    }
    // Before the kill every answer is a 2xx: nothing in this load is bad input.
    let refusals: Vec<u16> = outcomes
        .iter()
        .filter_map(|(_, o)| {
            if let Outcome::Refused(s) = o {
                Some(*s)
            } else {
                None
            }
        })
        .collect();
    assert!(refusals.is_empty(), "refused before the kill: {refusals:?}");
    let acks: Vec<&(String, Outcome)> = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Acked { .. }))
        .collect();
    assert!(acks.len() >= 1000, "{} acks", acks.len());
    assert!(
        outcomes
            .iter()
            .any(|(_, o)| !matches!(o, Outcome::Acked { .. }))
            || outcomes.len() < plan.len(),
        "the kill must land mid-load"
    );

    // Restart on the same data dir: it must open (after a crash) and accept.
    let mut restarted = BinaryServer::start(&config, &[], None);
    let probe = body_of("evt_0");
    let a = crate::support::post(
        &client(),
        &restarted.url("/in/demo"),
        &standard_headers("evt_0", &probe),
        probe,
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(restarted.terminate().success(), "{}", restarted.log_text());

    let stored = read_all(&data).await;
    let mut by_event: HashMap<String, Vec<&hookinbox::store::StoredEvent>> = HashMap::new();
    for e in &stored {
        by_event
            .entry(e.record.event_id.clone())
            .or_default()
            .push(e);
    }
    // Exactly one record per event id, and every record complete.
    for (event_id, records) in &by_event {
        assert_eq!(
            records.len(),
            1,
            "{event_id} stored {} times",
            records.len()
        );
        let r = records[0];
        assert_eq!(
            r.record.body,
            body_of(event_id),
            "{event_id}: stored body differs"
        );
        assert_eq!(r.record.source, "demo");
    }
    // Every acked event is there, under the id its ack named.
    for (event_id, outcome) in &outcomes {
        if let Outcome::Acked { id } = outcome {
            let records = by_event
                .get(event_id)
                .unwrap_or_else(|| panic!("acked {event_id} was lost"));
            assert_eq!(
                &records[0].id, id,
                "{event_id}: acked id differs from the stored one"
            );
        }
    }
    eprintln!(
        "crash test: {} requests answered before kill -9, {} acked, {} records after restart",
        outcomes.len(),
        acks.len(),
        stored.len()
    );
}

/// Limits the child's file size so the database cannot grow past 2 MiB:
/// writes past it fail with EFBIG, as on a full disk.
fn limit_file_size() -> std::io::Result<()> {
    // SAFETY: setrlimit and signal are async-signal-safe; called between fork and exec.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: 2 << 20,
            rlim_max: 2 << 20,
        };
        if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A store that cannot commit answers 503 with Retry-After, never 2xx; every
/// acked event is there after a restart with room again.
#[tokio::test]
async fn storage_failure_answers_503_and_never_2xx() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(
        dir.path(),
        &format!("{}{}", server_section(&data), standard_source("demo")),
    );
    let mut server = BinaryServer::start(&config, &[], Some(limit_file_size));
    let http = client();
    let url = server.url("/in/demo");
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut refused = 0;
    let sending = crate::support::Window::of(Duration::from_secs(60));
    // 64 KiB bodies that do not compress fill 2 MiB within ~40 events; stop
    // after 10 refusals.
    for i in 0..2000u64 {
        if refused >= 10 || sending.is_over() {
            break;
        }
        let id = format!("big_{i}");
        let body = crate::support::incompressible_body(64 << 10, i);
        let a = crate::support::post(&http, &url, &standard_headers(&id, &body), body).await;
        match a.status {
            // After a failed commit the reopened file may have freed pages
            // where a later event fits: a 2xx then is true too (checked below).
            200 => acked.push((id, a.id().to_owned())),
            503 => {
                refused += 1;
                assert_eq!(a.json["error"], "store_unavailable", "{:?}", a.json);
                assert!(a.headers.contains_key("retry-after"));
            }
            other => panic!("unexpected {other}: {:?}", a.json),
        }
    }
    assert!(
        refused >= 10,
        "the file-size limit never made a commit fail (acked {})",
        acked.len()
    );
    assert!(
        !acked.is_empty(),
        "events before the limit must have been acked"
    );
    assert!(
        server.log_text().contains("store commit failed"),
        "{}",
        server.log_text()
    );
    // Readiness tells a load balancer or systemd the same: the store cannot write.
    let ready = http
        .get(format!("{}/readyz", server.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = serde_json::from_slice(&ready.bytes().await.unwrap()).unwrap();
    assert_eq!(body["ready"], false, "{body}");
    assert_ne!(body["store"], "writable", "{body}");
    let health = http
        .get(format!("{}/healthz", server.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "the process itself is up");
    server.kill9();

    // With room again: every acked event is there, and ingest works.
    let mut restarted = BinaryServer::start(&config, &[], None);
    let body = br#"{"type":"after"}"#.to_vec();
    let a = crate::support::post(
        &http,
        &restarted.url("/in/demo"),
        &standard_headers("after", &body),
        body,
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    assert!(restarted.terminate().success());
    let stored = read_all(&data).await;
    for (event_id, id) in &acked {
        let found = stored
            .iter()
            .find(|e| &e.record.event_id == event_id)
            .unwrap_or_else(|| panic!("acked {event_id} lost"));
        assert_eq!(&found.id, id);
    }
}

/// kill -9 of the real binary while it delivers 300 events to a slow
/// destination, then a restart: every event ends delivered, none is lost, and
/// each `webhook-id` was answered 2xx more than once only if an attempt of
/// that event was in flight at the kill (recorded as interrupted).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_during_deliveries_loses_nothing_and_repeats_only_attempts_in_flight() {
    use crate::destination::{Destination, Mode};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // 4 × 50 ms: ≈ 80 deliveries/s, so the 300 take ≈ 4 s and the kill lands mid-way.
    let dest = Destination::start(Mode::Slow(Duration::from_millis(50))).await;
    let config = write_config(
        dir.path(),
        &format!(
            "{}{}destination = \"{}\"\nmax_concurrency = 4\ninitial_interval = \"50ms\"\n",
            server_section(&data),
            standard_source("demo"),
            dest.url()
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let http = client();
    let mut ids = Vec::new();
    for i in 0..300 {
        let body = format!("{{\"type\":\"crash.delivery\",\"n\":{i}}}").into_bytes();
        let mut req = http.post(server.url("/in/demo")).body(body.clone());
        for (k, v) in standard_headers(&format!("evt_d{i}"), &body) {
            req = req.header(k, v);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200);
        let json: serde_json::Value = serde_json::from_slice(&res.bytes().await.unwrap()).unwrap();
        ids.push(json["id"].as_str().unwrap().to_owned());
    }
    dest.wait_for(60, Duration::from_secs(60)).await;
    server.kill9();
    let at_kill = dest.count();
    assert!(
        at_kill < 300,
        "the kill must land mid-delivery ({at_kill} seen)"
    );

    let mut restarted = BinaryServer::start(&config, &[], None);
    // Every id reaches the destination; then it goes quiet.
    eventually(
        "every id reaches the destination",
        Duration::from_secs(60),
        Duration::from_millis(20),
        async || {
            let got = dest.received();
            let mut seen: Vec<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
            seen.sort();
            seen.dedup();
            if seen.len() == ids.len() {
                Ok(())
            } else {
                Err(format!("{} of 300 delivered", seen.len()))
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(restarted.terminate().code(), Some(0));

    let events = read_all(&data).await;
    assert_eq!(events.len(), 300);
    let mut receipts: HashMap<String, usize> = HashMap::new();
    for r in dest.received() {
        assert_eq!(r.answered, 200);
        *receipts
            .entry(r.header("webhook-id").to_owned())
            .or_default() += 1;
    }
    let options = hookinbox::store::StoreOptions::new(&data, Duration::from_secs(86400));
    let (store, writer) = hookinbox::store::Store::open(options).unwrap();
    let mut repeated = 0;
    for e in &events {
        assert_eq!(
            e.state.status,
            hookinbox::store::schema::Status::Delivered,
            "{e:?}"
        );
        let interrupted = store
            .attempts(e.seq)
            .unwrap()
            .iter()
            .filter(|a| a.class == hookinbox::store::schema::AttemptClass::Interrupted)
            .count();
        let times = receipts[&e.id];
        assert!(
            times <= 1 + interrupted,
            "{} delivered {times} times with {interrupted} interrupted attempts",
            e.id
        );
        repeated += times - 1;
    }
    assert!(
        repeated <= 8,
        "{repeated} repeats: more than were in flight"
    );
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

const KEYS_ADMIN: &str = "crash-admin-token-0123456789";
const KEYS_SHOP: &str = "crash-shop-keys-token-0123";

/// What one key's client was answered before the kill.
#[derive(Debug, Clone, Default)]
struct KeyAnswers {
    /// The token of a `201` claim.
    claimed: Option<u64>,
    /// The claim went out and no answer came back.
    claim_unanswered: bool,
    /// The result of a `200` complete.
    completed: Option<serde_json::Value>,
}

/// `POST {admin}/api/keys/{key}/{action}` under the shop's token: the
/// status and JSON, or `None` when no whole answer came back.
async fn key_call(
    http: &reqwest::Client,
    admin: &str,
    key: &str,
    action: &str,
    body: serde_json::Value,
) -> Option<(u16, serde_json::Value)> {
    let res = http
        .post(format!("{admin}/api/keys/{key}/{action}"))
        .bearer_auth(KEYS_SHOP)
        .json(&body)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    let status = res.status().as_u16();
    let raw = res.bytes().await.ok()?;
    Some((status, serde_json::from_slice(&raw).ok()?))
}

/// Issue 28: 32 clients claim fresh keys and complete each with a result
/// naming the key and its token; kill -9 after 600 answers; restart. Every
/// answered claim and completion is there, no key is completed twice, and
/// tokens go on growing past every token answered before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_claims_and_completions_loses_no_answered_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = write_config(
        dir.path(),
        &format!(
            "{}[admin]\ntoken = \"{KEYS_ADMIN}\"\n\n[keys]\nlease = \"10m\"\n\n\
             [[keys.client]]\nname = \"shop\"\ntoken = \"{KEYS_SHOP}\"\n\n{}",
            server_section(&data),
            standard_source("demo")
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let answered = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let http = client();
    let mut workers = Vec::new();
    for w in 0..32u32 {
        let (answered, killed, http, admin) = (
            answered.clone(),
            killed.clone(),
            http.clone(),
            server.admin.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut seen: Vec<(String, KeyAnswers)> = Vec::new();
            // At most 200 keys a client: the kill comes long before.
            for i in 0..200u32 {
                if killed.load(Ordering::Relaxed) {
                    break;
                }
                let key = format!("order:{w}:{i}");
                let mut got = KeyAnswers::default();
                match key_call(&http, &admin, &key, "claim", serde_json::json!({})).await {
                    Some((201, json)) => {
                        answered.fetch_add(1, Ordering::Relaxed);
                        got.claimed = Some(json["token"].as_u64().unwrap());
                    }
                    Some((status, json)) if !killed.load(Ordering::Relaxed) => {
                        panic!("claim of a fresh key {key}: {status} {json}")
                    }
                    _ => got.claim_unanswered = true,
                }
                if let Some(token) = got.claimed {
                    let result = serde_json::json!({"key": key, "token": token});
                    let body = serde_json::json!({"token": token, "result": result});
                    match key_call(&http, &admin, &key, "complete", body).await {
                        Some((200, json)) => {
                            answered.fetch_add(1, Ordering::Relaxed);
                            assert_eq!(json["result"], result, "{key}");
                            got.completed = Some(result);
                        }
                        Some((status, json)) if !killed.load(Ordering::Relaxed) => {
                            panic!("complete of {key} under its token: {status} {json}")
                        }
                        _ => {}
                    }
                }
                let stop = got.claimed.is_none();
                seen.push((key, got));
                if stop {
                    break;
                }
            }
            seen
        }));
    }
    eventually(
        "the load reaches 600 answers",
        Duration::from_secs(120),
        Duration::from_millis(1),
        async || match answered.load(Ordering::Relaxed) {
            n if n >= 600 => Ok(()),
            n => Err(format!("{n} answers")),
        },
    )
    .await;
    server.kill9();
    killed.store(true, Ordering::Relaxed);
    let mut outcomes: Vec<(String, KeyAnswers)> = Vec::new();
    for w in workers {
        outcomes.extend(w.await.unwrap());
    }
    let claims = outcomes.iter().filter(|(_, a)| a.claimed.is_some()).count();
    let completions = outcomes
        .iter()
        .filter(|(_, a)| a.completed.is_some())
        .count();
    assert!(claims + completions >= 600, "{claims} + {completions}");
    let max_token = outcomes
        .iter()
        .filter_map(|(_, a)| a.claimed)
        .max()
        .unwrap();

    // Restart on the same data dir.
    let mut restarted = BinaryServer::start(&config, &[], None);
    let admin = restarted.admin.clone();
    let http = client();
    let show = async |key: &str| -> (u16, serde_json::Value) {
        let res = http
            .get(format!("{admin}/api/keys/{key}"))
            .bearer_auth(KEYS_SHOP)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap())
    };
    let (mut still_claimed, mut done, mut finished_after) = (0, 0, 0);
    for (key, got) in &outcomes {
        let (status, now) = show(key).await;
        if let Some(result) = &got.completed {
            // An answered completion: done with exactly that result and token.
            assert_eq!(
                (status, &now["state"]),
                (200, &serde_json::json!("done")),
                "{key}: {now}"
            );
            assert_eq!(&now["result"], result, "{key}");
            // The completer's retry with another result is told the first
            // one: a completion is never overwritten.
            let token = got.claimed.unwrap();
            let retry = serde_json::json!({"token": token, "result": "second"});
            let (s, j) = key_call(&http, &admin, key, "complete", retry)
                .await
                .unwrap();
            assert_eq!((s, &j["result"]), (200, result), "{key}: {j}");
        }
        if let Some(token) = got.claimed {
            assert_eq!(status, 200, "answered claim of {key} lost: {now}");
            match now["state"].as_str().unwrap() {
                "claimed" => {
                    assert_eq!(now["token"], token, "{key}: {now}");
                    still_claimed += 1;
                    // The holder's token still holds after the restart; a
                    // stranger's does not and changes nothing.
                    let foreign = serde_json::json!({"token": token + 1_000_000, "result": "x"});
                    let (s, j) = key_call(&http, &admin, key, "complete", foreign)
                        .await
                        .unwrap();
                    assert_eq!(
                        (s, &j["state"]),
                        (409, &serde_json::json!("stale")),
                        "{key}"
                    );
                    let result = serde_json::json!({"key": key, "token": token});
                    let body = serde_json::json!({"token": token, "result": result});
                    let (s, j) = key_call(&http, &admin, key, "complete", body)
                        .await
                        .unwrap();
                    assert_eq!((s, &j["result"]), (200, &result), "{key}: {j}");
                    finished_after += 1;
                }
                "done" => {
                    // Done only by the one claim this load made of it.
                    assert_eq!(
                        now["result"],
                        serde_json::json!({"key": key, "token": token}),
                        "{key}"
                    );
                    done += 1;
                }
                other => panic!("{key}: state {other}"),
            }
        } else if status == 200 {
            // An unanswered claim may have landed; a done key then names it.
            assert_eq!(
                now["state"], "claimed",
                "{key} done without an answered claim: {now}"
            );
        } else {
            assert_eq!(status, 404, "{key}: {now}");
        }
        // A done key is done once: a new claim answers the same result.
        if now["state"] == "done" {
            let (s, again) = key_call(&http, &admin, key, "claim", serde_json::json!({}))
                .await
                .unwrap();
            assert_eq!(
                (s, &again["result"]),
                (200, &now["result"]),
                "{key}: {again}"
            );
            assert_eq!(again["completed_at"], now["completed_at"], "{key}");
        }
    }
    // Tokens handed out after the restart are larger than every one before.
    for i in 0..5 {
        let (s, fresh) = key_call(
            &http,
            &admin,
            &format!("after:{i}"),
            "claim",
            serde_json::json!({}),
        )
        .await
        .unwrap();
        assert_eq!(s, 201, "{fresh}");
        let token = fresh["token"].as_u64().unwrap();
        assert!(
            token > max_token,
            "token {token} after the restart, {max_token} before"
        );
    }
    assert!(restarted.terminate().success(), "{}", restarted.log_text());
    eprintln!(
        "keys crash test: {} keys tried, {claims} claims and {completions} completions answered \
         before kill -9; after restart {done} done, {still_claimed} still claimed \
         ({finished_after} completed by their holder after it)",
        outcomes.len()
    );
}
