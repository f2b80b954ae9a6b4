//! The admin API against a real server: auth, health, metrics, events,
//! replay / ignore, destinations.

use std::time::Duration;

use hookinbox::api::{
    AttemptOutcome, BulkRequest, Counts, EventDetail, EventQuery, EventStatus, Payload,
    PayloadEncoding, RejectReason, TypeSinceStart,
};
use hookinbox::clock::Clock;
use hookinbox::words::AdminReason;
use serde_json::json;

use crate::destination::{Destination, Mode};
use crate::support::{STANDARD_SECRET, TestServer, eventually, server_section, standard_headers};

const TOKEN: &str = "test-admin-token-0123456789";

fn config(dir: &std::path::Path, dest: &Destination) -> String {
    format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
breaker_failures = 1000

[[source]]
name = "inbox"
kind = "standard"
secret = "{STANDARD_SECRET}"
"#,
        server_section(dir),
        dest.url()
    )
}

async fn send(server: &TestServer, source: &str, id: &str, body: Vec<u8>) -> String {
    let a = server
        .post(&format!("/in/{source}"), &standard_headers(id, &body), body)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    a.id().to_owned()
}

async fn wait_status(server: &TestServer, id: &str, status: EventStatus) -> EventDetail {
    eventually(
        &format!("{id} is {status:?}"),
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || {
            let e = server.api(TOKEN).event(id).await;
            if e.summary.status == status {
                Ok(e)
            } else {
                Err(format!("{id} is {:?}", e.summary.status))
            }
        },
    )
    .await
}

#[tokio::test]
async fn every_endpoint_but_health_needs_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let id = send(&server, "inbox", "e1", b"{}".to_vec()).await;
    let guarded = [
        ("GET", "/metrics".to_owned()),
        ("GET", "/api/events".to_owned()),
        ("GET", format!("/api/events/{id}")),
        ("POST", format!("/api/events/{id}/replay")),
        ("POST", format!("/api/events/{id}/ignore")),
        ("DELETE", format!("/api/events/{id}")),
        ("GET", "/api/destinations".to_owned()),
        ("POST", "/api/destinations/shop/pause".to_owned()),
        ("POST", "/api/destinations/shop/resume".to_owned()),
        ("POST", "/api/replay".to_owned()),
        ("POST", "/api/ignore".to_owned()),
        ("POST", "/api/sweep".to_owned()),
        ("GET", "/api/backup".to_owned()),
        ("GET", "/api/activity".to_owned()),
        ("GET", "/api/key-namespaces".to_owned()),
    ];
    for (method, path) in &guarded {
        for token in [None, Some("wrong-token-wrong-token"), Some("")] {
            let a = server.admin(method, path, token, None).await;
            assert_eq!(
                a.status, 401,
                "{method} {path} with {token:?}: {:?}",
                a.json
            );
            assert_eq!(a.json["error"], "unauthorized");
            assert_eq!(a.headers["www-authenticate"], "Bearer");
        }
    }
    assert_eq!(
        server
            .metrics()
            .admin_rejected_count(AdminReason::Unauthorized),
        guarded.len() as u64 * 3
    );
    // Nothing changed: the event is still held, not ignored or replayed.
    assert_eq!(server.events()[0].state.status.as_str(), "held");
    for path in ["/healthz", "/readyz"] {
        let a = server.admin("GET", path, None, None).await;
        assert_eq!(a.status, 200, "{path}: {:?}", a.json);
    }
    let ready = server.admin("GET", "/readyz", None, None).await;
    assert_eq!(
        ready.json,
        json!({"ready": true, "store": "writable", "scheduler": "running"})
    );
    let unknown = server.admin("GET", "/nope", Some(TOKEN), None).await;
    assert_eq!(unknown.status, 404);

    // The contract: public, valid OpenAPI, and naming every guarded path.
    let doc = server.admin("GET", "/api/openapi.json", None, None).await;
    assert_eq!(doc.status, 200, "{:?}", doc.json);
    let paths = doc.json["paths"].as_object().unwrap();
    for (method, path) in guarded.iter().chain(&[
        ("GET", "/healthz".to_owned()),
        ("GET", "/readyz".to_owned()),
    ]) {
        let template = path.replace(&id, "{id}").replace("/shop/", "/{name}/");
        let op = &paths
            .get(&template)
            .unwrap_or_else(|| panic!("{template} is not documented"))[method.to_lowercase()];
        assert!(op.is_object(), "{method} {template} is not documented");
        let documented = op["responses"].as_object().unwrap();
        let public = ["/healthz", "/readyz"].contains(&template.as_str());
        assert!(
            public || documented.contains_key("401"),
            "{method} {template}: no 401"
        );
    }
    let out = crate::support::python("validate_openapi.py", doc.json.to_string().as_bytes());
    assert!(
        out.status.success(),
        "{}{} ({})",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        crate::support::PYTHON_SETUP
    );
    server.stop().await;
}

/// The route table against the real router, which is built from it: each
/// route is served (not the router's own 404 or 405: no merge lost it, no
/// dashboard path shadows it) and behind its gate (an open one answers
/// without a token, every other is 401 without one). That the table and
/// the OpenAPI document and audit actions agree is `admin::routes`'s unit
/// tests'.
#[tokio::test]
async fn each_route_of_the_table_is_served_behind_its_gate() {
    use hookinbox::admin::{Gate, ROUTES, Verb};
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let id = send(&server, "inbox", "e1", b"{}".to_vec()).await;
    // The router's own answer to a path or method it does not serve.
    let unserved = async |method: &str, path: &str, token: Option<&str>| {
        let mut req = server
            .client
            .request(method.parse().unwrap(), server.admin_url(path));
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        // Only the status and, for a 404, whose: the event stream and the
        // backup are not read to their end.
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let routers_404 = status == 404
            && res.json::<serde_json::Value>().await.unwrap()["reason"] == "no such admin path";
        (status, status == 405 || routers_404)
    };
    for route in ROUTES {
        let path = route
            .path
            .replace("{id}", &id)
            .replace("{name}", "shop")
            .replace("{key}", "k")
            .replace("{action}", "claim");
        let method = match route.verb {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
            Verb::Any => "PUT",
        };
        let (status, not_served) = unserved(method, &path, None).await;
        assert!(
            !not_served,
            "{route:?}: the router does not serve it ({status})"
        );
        match route.gate {
            Gate::Open => assert_ne!(status, 401, "{route:?} needs a token"),
            Gate::Person(_) | Gate::AnyToken => {
                assert_eq!(status, 401, "{route:?} answers without a token")
            }
        }
        let (status, not_served) = unserved(method, &path, Some(TOKEN)).await;
        assert!(
            !not_served,
            "{route:?}: the router does not serve it ({status})"
        );
    }
    // A path next to the table's is the router's 404.
    let (status, not_served) = unserved("GET", "/api/event", Some(TOKEN)).await;
    assert!(not_served && status == 404, "{status}");
    server.stop().await;
}

/// Regression: `Authorization: bearer <token>` (curl users, some HTTP
/// libraries) was refused; the scheme is case-insensitive (RFC 9110 §11.1).
#[tokio::test]
async fn the_bearer_scheme_is_accepted_in_any_case_and_with_extra_spaces() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let call = |value: String| {
        let req = server
            .client
            .get(server.admin_url("/api/destinations"))
            .header("authorization", value);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        for gap in [" ", "   "] {
            let value = format!("{scheme}{gap}{TOKEN}");
            assert_eq!(call(value.clone()).await, 200, "{value:?}");
        }
    }
    // Only the scheme is case-insensitive: the token, a missing space and
    // another scheme are still refused.
    for value in [
        format!("Bearer {}", TOKEN.to_uppercase()),
        format!("Bearer{TOKEN}"),
        format!("Basic {TOKEN}"),
        format!("Bearer {TOKEN} extra"),
        TOKEN.to_owned(),
    ] {
        assert_eq!(call(value.clone()).await, 401, "{value:?}");
    }
    server.stop().await;
}

#[tokio::test]
async fn events_are_listed_with_filters_and_cursor_and_shown_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let mut held = Vec::new();
    for i in 0..5 {
        let body = format!("{{\"type\":\"order.created\",\"n\":{i}}}").into_bytes();
        held.push(send(&server, "inbox", &format!("in_{i}"), body).await);
    }
    let binary = send(&server, "inbox", "bin_1", vec![0xff, 0x00, 0xfe]).await;
    let shop = send(&server, "shop", "shop_1", b"{\"type\":\"paid\"}".to_vec()).await;
    wait_status(&server, &shop, EventStatus::Delivered).await;

    let api = server.api(TOKEN);
    let all = api.events("limit=500").await;
    let ids: Vec<&str> = all.events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), 7);
    assert_eq!(ids[0], shop, "newest first");
    assert!(all.next_cursor.is_none());

    let delivered = api.events("status=delivered").await;
    assert_eq!(delivered.events.len(), 1);
    assert_eq!(delivered.events[0].source, "shop");
    let by_id = api.events("event_id=in_3").await;
    assert_eq!(by_id.events[0].id, held[3]);
    let none = api.events("source=inbox&status=dead").await;
    assert_eq!(none.events.len(), 0);
    let future = api.events("from=2999-01-01T00:00:00Z").await;
    assert_eq!(future.events.len(), 0);

    // Cursor pagination over the held events: pages of 2, no gaps, no repeats.
    let mut seen = Vec::new();
    let mut cursor: Option<u64> = None;
    loop {
        let q = match cursor {
            Some(c) => format!("source=inbox&limit=2&cursor={c}"),
            None => "source=inbox&limit=2".to_owned(),
        };
        let p = api.events(&q).await;
        seen.extend(p.events.into_iter().map(|e| e.id));
        match p.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let mut expected: Vec<String> = held.iter().cloned().chain([binary.clone()]).collect();
    expected.reverse();
    assert_eq!(seen, expected);

    for (q, word) in [
        ("status=lost", "status"),
        ("from=yesterday", "from"),
        ("limit=0", "limit"),
        ("colour=red", "colour"),
    ] {
        let bad = server
            .admin("GET", &format!("/api/events?{q}"), Some(TOKEN), None)
            .await;
        assert_eq!(bad.status, 400, "{q}: {:?}", bad.json);
        assert!(
            bad.json["reason"].as_str().unwrap().contains(word),
            "{:?}",
            bad.json
        );
    }

    let detail = api.event(&shop).await;
    assert_eq!(
        detail.payload,
        Payload {
            encoding: PayloadEncoding::Text,
            data: "{\"type\":\"paid\"}".to_owned()
        }
    );
    assert_eq!(detail.summary.event_type.as_deref(), Some("paid"));
    assert_eq!(detail.attempt_history[0].outcome, AttemptOutcome::Delivered);
    assert_eq!(detail.attempt_history[0].status, Some(200));
    let headers = &detail.headers;
    assert!(headers.iter().any(|h| h.0 == "webhook-id"), "{headers:?}");
    let bin = api.event(&binary).await;
    assert_eq!(
        bin.payload,
        Payload {
            encoding: PayloadEncoding::Base64,
            data: "/wD+".to_owned()
        }
    );
    let missing = server
        .admin("GET", "/api/events/hbx_nope", Some(TOKEN), None)
        .await;
    assert_eq!(missing.status, 404);
    server.stop().await;
}

#[tokio::test]
async fn replay_and_ignore_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(400, "no")).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let a = send(&server, "shop", "r_1", b"{}".to_vec()).await;
    let b = send(&server, "shop", "r_2", b"{}".to_vec()).await;
    wait_status(&server, &a, EventStatus::Dead).await;
    let dead_b = wait_status(&server, &b, EventStatus::Dead).await;
    assert!(
        dead_b.summary.dead_letter.unwrap().reason.contains("400"),
        "the app's 400 is the reason"
    );

    // Ignore needs a note; without one nothing changes.
    for body in [None, Some(json!({})), Some(json!({"note": "  "}))] {
        let r = server
            .admin(
                "POST",
                &format!("/api/events/{b}/ignore"),
                Some(TOKEN),
                body,
            )
            .await;
        assert_eq!(r.status, 400, "{:?}", r.json);
        assert!(r.json["reason"].as_str().unwrap().contains("note"));
    }
    wait_status(&server, &b, EventStatus::Dead).await;
    let ignored = server
        .api(TOKEN)
        .ignored(&b, "customer refunded by hand")
        .await;
    assert_eq!(ignored.status, EventStatus::Ignored);
    assert_eq!(ignored.note.unwrap().text, "customer refunded by hand");

    dest.set(Mode::Ok);
    server.api(TOKEN).replay(&a, None).await;
    let done = wait_status(&server, &a, EventStatus::Delivered).await;
    assert_eq!(done.summary.replays, 1);
    let last = dest.received().into_iter().last().unwrap();
    assert_eq!(last.header("webhook-id"), a, "same webhook-id on replay");
    let again = server
        .admin(
            "POST",
            &format!("/api/events/{b}/ignore"),
            Some(TOKEN),
            Some(json!({"note": "x"})),
        )
        .await;
    assert_eq!(again.status, 409, "{:?}", again.json);
    assert_eq!(
        server.metrics().admin_rejected_count(AdminReason::Conflict),
        1
    );
    let metrics = server.admin("GET", "/metrics", Some(TOKEN), None).await;
    let text = metrics.json.as_str().unwrap();
    assert!(
        text.contains("hookinbox_replayed_total{source=\"shop\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("hookinbox_ignored_total{source=\"shop\"} 1"),
        "{text}"
    );
    server.stop().await;
}

/// A privacy request: the payload and headers go, the id, note, history
/// and dedupe key stay; a resend is still a duplicate; a dead event stops
/// being delivered. Without a note, or twice, it is refused and changes nothing.
#[tokio::test]
async fn deleting_an_event_erases_its_payload_and_keeps_it_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::RejectBodyWith("card")).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let body = br#"{"type":"customer.updated","card":"4242"}"#.to_vec();
    let id = send(&server, "shop", "gdpr_1", body.clone()).await;
    wait_status(&server, &id, EventStatus::Dead).await;
    let path = format!("/api/events/{id}");
    for bad in [None, Some(json!({})), Some(json!({"note": "  "}))] {
        let r = server
            .admin("DELETE", &path, Some(TOKEN), bad.clone())
            .await;
        assert_eq!(r.status, 400, "{bad:?}: {:?}", r.json);
        assert!(
            r.json["reason"].as_str().unwrap().contains("note"),
            "{:?}",
            r.json
        );
    }
    let api = server.api(TOKEN);
    let kept = api.event(&id).await;
    assert_eq!(kept.payload.data, String::from_utf8(body.clone()).unwrap());
    let note = "customer's erasure request #812";
    let erased = api.erase(&id, note).await;
    assert_eq!(erased.status, EventStatus::Ignored);
    assert_eq!(erased.erased.unwrap().text, note);
    let after = api.event(&id).await;
    assert_eq!(
        after.payload,
        Payload {
            encoding: PayloadEncoding::Text,
            data: String::new()
        }
    );
    assert!(after.headers.is_empty(), "{:?}", after.headers);
    assert_eq!(after.summary.event_id, "gdpr_1");
    assert_eq!(after.attempt_history.len(), 1);
    let note = json!({ "note": note });
    let twice = server.admin("DELETE", &path, Some(TOKEN), Some(note)).await;
    assert_eq!(twice.status, 409, "{:?}", twice.json);
    // The provider retries it: a duplicate of the erased event, not stored again.
    let resend = server
        .post("/in/shop", &standard_headers("gdpr_1", &body), body)
        .await;
    assert_eq!(resend.status, 200);
    assert_eq!(
        (resend.id(), resend.json["duplicate"].as_bool()),
        (id.as_str(), Some(true))
    );
    assert_eq!(server.events().len(), 1);
    assert_eq!(dest.count(), 1, "an erased event is never delivered");
    server.stop().await;
}

#[tokio::test]
async fn destinations_are_listed_paused_and_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let list = server
        .admin("GET", "/api/destinations", Some(TOKEN), None)
        .await;
    assert_eq!(
        list.json["destinations"],
        json!([{
            "name": "shop", "source": "shop", "url": dest.url(), "paused": false, "circuit": "closed",
            "in_flight": 0, "max_concurrency": 8, "last_failure": null,
        }])
    );
    let paused = server
        .admin("POST", "/api/destinations/shop/pause", Some(TOKEN), None)
        .await;
    assert_eq!(paused.json, json!({"name": "shop", "paused": true}));
    let id = send(&server, "shop", "p_1", b"{}".to_vec()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dest.count(), 0, "paused: nothing delivered");
    let list = server.api(TOKEN).destinations().await;
    assert!(list.destinations[0].paused);
    server.api(TOKEN).resume("shop").await;
    wait_status(&server, &id, EventStatus::Delivered).await;
    let unknown = server
        .admin("POST", "/api/destinations/nope/pause", Some(TOKEN), None)
        .await;
    assert_eq!(unknown.status, 404);
    server.stop().await;
}

#[tokio::test]
async fn metrics_are_prometheus_text_that_matches_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let id = send(&server, "shop", "m_1", b"{}".to_vec()).await;
    send(&server, "shop", "m_1", b"{}".to_vec()).await;
    let bad = server.post("/in/shop", &[], b"{}".to_vec()).await;
    assert_eq!(bad.status, 401);
    wait_status(&server, &id, EventStatus::Delivered).await;
    let res = server
        .client
        .get(server.admin_url("/metrics"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )
        .send()
        .await
        .unwrap();
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = res.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    assert_eq!(value("hookinbox_received_total{source=\"shop\"}"), 1.0);
    assert_eq!(value("hookinbox_duplicates_total{source=\"shop\"}"), 1.0);
    assert_eq!(
        value("hookinbox_rejected_total{source=\"shop\",reason=\"missing_signature\"}"),
        1.0
    );
    assert_eq!(
        value("hookinbox_delivered_total{source=\"shop\",destination=\"shop\"}"),
        1.0
    );
    assert_eq!(
        value(
            "hookinbox_delivery_attempts_total{source=\"shop\",destination=\"shop\",outcome=\"delivered\"}"
        ),
        1.0
    );
    assert_eq!(
        value("hookinbox_ack_latency_seconds_count{source=\"shop\"}"),
        2.0
    );
    // Every line is a comment or `name{labels} value`: valid exposition text.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, number) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        assert!(number.parse::<f64>().is_ok(), "{line}");
        assert!(
            series.starts_with("hookinbox_") || series.starts_with("process_"),
            "{line}"
        );
        assert!(
            !series.contains("m_1") && !series.contains("hbx_"),
            "ids in labels: {line}"
        );
    }
    server.stop().await;
}

/// `shop`'s app refuses `bad` bodies: four dead (`b_0` … `b_3`), one
/// delivered (`g_1`); `inbox` holds one (`h_1`), having no destination.
struct Bulk {
    server: TestServer,
    dest: Destination,
    dead: Vec<String>,
    held: String,
    _dir: tempfile::TempDir,
}

impl Bulk {
    async fn start() -> Bulk {
        let dir = tempfile::tempdir().unwrap();
        let dest = Destination::start(Mode::RejectBodyWith("\"bad\"")).await;
        let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
        let mut dead = Vec::new();
        for i in 0..4 {
            dead.push(
                send(
                    &server,
                    "shop",
                    &format!("b_{i}"),
                    b"{\"kind\":\"bad\"}".to_vec(),
                )
                .await,
            );
        }
        let good = send(&server, "shop", "g_1", b"{\"kind\":\"good\"}".to_vec()).await;
        let held = send(&server, "inbox", "h_1", b"{}".to_vec()).await;
        for id in &dead {
            wait_status(&server, id, EventStatus::Dead).await;
        }
        wait_status(&server, &good, EventStatus::Delivered).await;
        Bulk {
            server,
            dest,
            dead,
            held,
            _dir: dir,
        }
    }
}

#[tokio::test]
async fn a_bulk_dry_run_counts_what_matches_and_changes_nothing() {
    let bulk = Bulk::start().await;
    let filter = json!({"filter": {"source": "shop", "status": "dead"}, "dry_run": true});
    let dry = bulk
        .server
        .admin("POST", "/api/replay", Some(TOKEN), Some(filter))
        .await;
    assert_eq!(
        dry.json,
        json!({"dry_run": true, "matched": 4, "changed": 0, "refused": []})
    );
    assert_eq!(bulk.dest.count(), 5, "a dry run changes nothing");
    bulk.server.stop().await;
}

#[tokio::test]
async fn a_bulk_request_without_a_usable_filter_or_note_is_refused_naming_what_is_wrong() {
    let bulk = Bulk::start().await;
    let server = &bulk.server;
    for (path, body, word) in [
        ("/api/replay", json!({}), "filter"),
        ("/api/replay", json!({"filter": {}}), "filter"),
        ("/api/ignore", json!({"filter": {"status": "dead"}}), "note"),
        (
            "/api/replay",
            json!({"filter": {"status": "dead"}, "note": "x"}),
            "note",
        ),
        (
            "/api/replay",
            json!({"filter": {"status": "gone"}}),
            "status",
        ),
        (
            "/api/replay",
            json!({"filter": {"status": "dead", "limit": 5}}),
            "limit",
        ),
        ("/api/replay", json!({"filter": {"sauce": "shop"}}), "sauce"),
    ] {
        let r = server
            .admin("POST", path, Some(TOKEN), Some(body.clone()))
            .await;
        assert_eq!(r.status, 400, "{path} {body}: {:?}", r.json);
        assert!(
            r.json["reason"].as_str().unwrap().contains(word),
            "{:?}",
            r.json
        );
    }
    // Regression: a script written against the first bulk body (the
    // filter's keys at the top) got "unknown field `source`"; the answer
    // says where the filter goes now and where the contract is.
    let flat = json!({"source": "shop", "status": "dead", "dry_run": true});
    let r = server
        .admin("POST", "/api/replay", Some(TOKEN), Some(flat))
        .await;
    assert_eq!(r.status, 400, "{:?}", r.json);
    let reason = r.json["reason"].as_str().unwrap();
    assert!(
        reason.contains(r#"the filter goes under "filter""#)
            && reason.contains("source, status")
            && reason.contains("/api/openapi.json"),
        "{reason}"
    );
    bulk.server.stop().await;
}

#[tokio::test]
async fn bulk_replay_and_ignore_touch_exactly_the_matching_events() {
    let bulk = Bulk::start().await;
    let (server, dest, dead) = (&bulk.server, &bulk.dest, &bulk.dead);
    // Ignore two of them by event id, then replay the remaining dead ones.
    let api = server.api(TOKEN);
    for id in ["b_0", "b_1"] {
        let r = api
            .bulk_ignore(&BulkRequest {
                filter: EventQuery {
                    event_id: Some(id.to_owned()),
                    ..EventQuery::default()
                },
                note: Some("duplicate order".to_owned()),
                ..BulkRequest::default()
            })
            .await;
        assert_eq!(r.changed, 1, "{r:?}");
    }
    dest.set(Mode::Ok);
    let r = api
        .bulk_replay(&BulkRequest {
            filter: EventQuery {
                source: Some("shop".to_owned()),
                status: Some(EventStatus::Dead),
                ..EventQuery::default()
            },
            ..BulkRequest::default()
        })
        .await;
    assert_eq!((r.matched, r.changed), (2, 2), "{r:?}");
    for id in &dead[2..] {
        wait_status(server, id, EventStatus::Delivered).await;
    }
    for id in &dead[..2] {
        let e = wait_status(server, id, EventStatus::Ignored).await;
        assert_eq!(e.summary.note.unwrap().text, "duplicate order");
    }
    let h = wait_status(server, &bulk.held, EventStatus::Held).await;
    assert_eq!(h.summary.replays, 0);
    // 5 first attempts + 2 replays: the good one and the ignored ones were not sent again.
    assert_eq!(dest.count(), 7);
    bulk.server.stop().await;
}

#[tokio::test]
async fn sweep_now_removes_expired_data_but_never_a_pending_event() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::RejectBodyWith("never")).await;
    let text = config(dir.path(), &dest).replace(
        "[admin]",
        "[retention]\ndedupe_ttl = \"300ms\"\npayload_ttl = \"100ms\"\nsweep_interval = \"1h\"\n\n[admin]",
    );
    let server = TestServer::start(&text, Clock::system()).await;
    dest.set(Mode::Status(503, "down"));
    let pending = send(&server, "shop", "sw_pending", b"{}".to_vec()).await;
    dest.wait_for(1, Duration::from_secs(5)).await;
    dest.set(Mode::Ok);
    // The first attempt failed; the retry is 5 s away: it stays pending.
    let delivered = send(&server, "shop", "sw_done", b"{}".to_vec()).await;
    wait_status(&server, &delivered, EventStatus::Delivered).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = server.api(TOKEN).sweep().await;
    assert_eq!(r.delivered, 1, "{r:?}");
    // Only the delivered event's key: the pending one's stays until it finishes.
    assert_eq!(r.dedupe_keys, 1, "{r:?}");
    let gone = server
        .admin(
            "GET",
            &format!("/api/events/{delivered}"),
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(gone.status, 404);
    wait_status(&server, &pending, EventStatus::Pending).await;
    // Its key swept, a repeat of the delivered event's id is a new event.
    let body = b"{}".to_vec();
    let again = server
        .post(
            "/in/shop",
            &standard_headers("sw_done", &body),
            body.clone(),
        )
        .await;
    assert_eq!(again.status, 200);
    assert!(!again.is_duplicate(), "{:?}", again.json);
    assert_ne!(again.id(), delivered);
    // The provider retrying the event still pending meets a duplicate.
    let retry = server
        .post("/in/shop", &standard_headers("sw_pending", &body), body)
        .await;
    assert!(retry.is_duplicate(), "{:?}", retry.json);
    assert_eq!(retry.id(), pending);
    let metrics = server.admin("GET", "/metrics", Some(TOKEN), None).await;
    let text = metrics.json.as_str().unwrap();
    assert!(
        text.contains("hookinbox_swept_total{kind=\"delivered\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("hookinbox_swept_total{kind=\"dedupe_key\"} 1"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_backup_taken_under_load_opens_as_a_database_with_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let mut ids = Vec::new();
    for i in 0..50 {
        ids.push(
            send(
                &server,
                "inbox",
                &format!("bk_{i}"),
                format!("{{\"n\":{i}}}").into_bytes(),
            )
            .await,
        );
    }
    // Ingest keeps going while the backup is taken.
    let server = std::sync::Arc::new(server);
    let load = {
        let server = server.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                send(&server, "inbox", &format!("during_{i}"), b"{}".to_vec()).await;
            }
        })
    };
    let res = server
        .client
        .get(server.admin_url("/api/backup"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/octet-stream");
    let bytes = res.bytes().await.unwrap();
    load.await.unwrap();
    let restore = tempfile::tempdir().unwrap();
    std::fs::write(restore.path().join(hookinbox::store::DB_FILE), &bytes).unwrap();
    let restored = crate::support::read_all(restore.path()).await;
    let restored_ids: Vec<&str> = restored.iter().map(|e| e.id.as_str()).collect();
    for id in &ids {
        assert!(
            restored_ids.contains(&id.as_str()),
            "{id} missing from the backup"
        );
    }
    // A snapshot: whatever it holds is whole (every event readable with its state).
    assert!(
        restored.len() >= 50 && restored.len() <= 100,
        "{}",
        restored.len()
    );
    let original = server.events();
    for e in &restored {
        let live = original.iter().find(|o| o.id == e.id).unwrap();
        assert_eq!(live.record, e.record);
    }
    // Nothing is left behind in the data dir.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("backup"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let server = std::sync::Arc::into_inner(server).unwrap();
    server.stop().await;
}

#[tokio::test]
async fn stats_count_by_source_type_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::RejectBodyWith("refund")).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let paid = br#"{"type":"order.paid"}"#.to_vec();
    let refund = br#"{"type":"order.refund"}"#.to_vec();
    let a = send(&server, "shop", "st_1", paid.clone()).await;
    send(&server, "shop", "st_1", paid.clone()).await; // a duplicate
    let b = send(&server, "shop", "st_2", paid).await;
    let c = send(&server, "shop", "st_3", refund).await;
    send(&server, "inbox", "st_4", b"{}".to_vec()).await;
    let bad = server.post("/in/shop", &[], b"{}".to_vec()).await;
    assert_eq!(bad.status, 401);
    for id in [&a, &b] {
        wait_status(&server, id, EventStatus::Delivered).await;
    }
    wait_status(&server, &c, EventStatus::Dead).await;
    let api = server.api(TOKEN);
    let stats = api.stats().await;
    let shop = &stats.sources["shop"];
    assert_eq!(
        shop.stored,
        Counts {
            delivered: 2,
            dead: 1,
            ..Counts::default()
        }
    );
    assert!((shop.success_rate.unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(shop.by_type["order.paid"].delivered, 2);
    assert_eq!(shop.by_type["order.refund"].dead, 1);
    assert_eq!(shop.since_start.received, 3);
    assert_eq!(shop.since_start.duplicates, 1);
    assert_eq!(
        shop.since_start.by_type,
        [
            (
                "order.paid".to_owned(),
                TypeSinceStart {
                    received: 2,
                    duplicates: 1
                }
            ),
            (
                "order.refund".to_owned(),
                TypeSinceStart {
                    received: 1,
                    duplicates: 0
                }
            ),
        ]
        .into()
    );
    assert_eq!(
        shop.since_start.rejected,
        [(RejectReason::MissingSignature, 1)].into()
    );
    assert!(shop.since_start.ack_ms.unwrap().p99 > 0.0);
    let latency = shop.since_start.received_to_delivered_ms;
    assert!(latency.unwrap().p50 >= 0.0, "{latency:?}");
    assert!(shop.oldest_pending_age_ms.is_none());
    let inbox = &stats.sources["inbox"];
    assert_eq!(inbox.stored.held, 1);
    assert!(inbox.success_rate.is_none());
    // The same story per minute, for charts: summed over the minutes seen.
    let activity = api.activity("hours=1").await;
    // Per source: received, duplicates, delivered, dead-lettered, summed.
    let totals_of = |activity: &hookinbox::api::Activity| {
        let mut totals = std::collections::BTreeMap::new();
        for m in &activity.minutes {
            let t = totals.entry(m.source.clone()).or_insert([0u64; 4]);
            for (i, n) in [m.received, m.duplicates, m.delivered, m.dead_lettered]
                .into_iter()
                .enumerate()
            {
                t[i] += n;
            }
        }
        totals
    };
    let totals = totals_of(&activity);
    assert_eq!(totals["shop"], [3, 1, 2, 1], "{activity:?}");
    assert_eq!(totals["inbox"], [1, 0, 0, 0], "{activity:?}");
    assert_eq!(activity.step_minutes, 1);
    // Added up per hour: the same totals, each row at the start of its hour.
    let hourly = api.activity("hours=1&step=60").await;
    assert_eq!(hourly.step_minutes, 60);
    for m in &hourly.minutes {
        assert_eq!(m.minute.0 % 3_600_000, 0, "{m:?}");
    }
    assert_eq!(totals_of(&hourly), totals, "{hourly:?}");
    for bad in [
        "hours=0",
        "hours=169",
        "hours=x",
        "days=1",
        "step=0",
        "step=61",
    ] {
        let r = server
            .admin("GET", &format!("/api/activity?{bad}"), Some(TOKEN), None)
            .await;
        assert_eq!(r.status, 400, "{bad}: {:?}", r.json);
    }
    let metrics = server.admin("GET", "/metrics", Some(TOKEN), None).await;
    let text = metrics.json.as_str().unwrap();
    assert!(
        text.contains("hookinbox_dlq_size{source=\"shop\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("hookinbox_dead_lettered_total{source=\"shop\",destination=\"shop\"} 1\n"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_pause_survives_a_restart_until_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    server.api(TOKEN).pause("shop").await;
    let id = send(&server, "shop", "keep_1", b"{}".to_vec()).await;
    server.stop().await;

    // The config says nothing of pausing; the stored pause wins.
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let list = server.api(TOKEN).destinations().await;
    assert!(list.destinations[0].paused);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dest.count(), 0, "still paused after the restart");
    server.api(TOKEN).resume("shop").await;
    wait_status(&server, &id, EventStatus::Delivered).await;
    server.stop().await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let list = server.api(TOKEN).destinations().await;
    assert!(!list.destinations[0].paused);
    server.stop().await;
}

/// Without `[replication]`, the replication paths answer 409 and say why;
/// nothing changes.
#[tokio::test]
async fn replication_paths_refuse_a_node_that_does_not_replicate() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    for (method, path) in [
        ("GET", "/api/replication"),
        ("POST", "/api/replication/promote"),
    ] {
        let a = server.admin(method, path, Some(TOKEN), None).await;
        assert_eq!(a.status, 409, "{path}: {:?}", a.json);
        assert_eq!(a.json["error"], "conflict");
        assert!(
            a.json["reason"]
                .as_str()
                .unwrap()
                .contains("has no [replication] section"),
            "{:?}",
            a.json
        );
        let unauthorized = server.admin(method, path, None, None).await;
        assert_eq!(unauthorized.status, 401);
    }
    assert_eq!(server.admin("GET", "/readyz", None, None).await.status, 200);
    server.stop().await;
}
