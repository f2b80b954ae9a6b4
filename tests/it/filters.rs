//! A destination's filter (`filter_types`, `filter_match`) through the real
//! server: what it takes is delivered; the rest is stored as `filtered`,
//! counted, listed, never sent unless an operator replays it.

use std::time::Duration;

use hookinbox::api::EventStatus;
use hookinbox::clock::Clock;
use serde_json::json;

use crate::destination::{Destination, Mode};
use crate::support::{STANDARD_SECRET, TestServer, eventually, server_section, standard_headers};

const TOKEN: &str = "test-admin-token-0123456789";

async fn send(server: &TestServer, id: &str, body: serde_json::Value) -> (String, bool) {
    let body = body.to_string().into_bytes();
    let a = server
        .post("/in/shop", &standard_headers(id, &body), body)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    (a.id().to_owned(), a.is_duplicate())
}

async fn status(server: &TestServer, id: &str) -> EventStatus {
    server.api(TOKEN).event(id).await.summary.status
}

/// `shop`'s destination takes `invoice.*` and `customer.created` events in
/// live mode. Five events sent, one of each case; the two it takes are
/// delivered.
struct Filtered {
    server: TestServer,
    dest: Destination,
    /// `invoice.paid`, live: taken.
    paid: String,
    /// `invoice.paid`, test mode: filtered by `filter_match`.
    test_mode: String,
    /// `charge.succeeded`: filtered by `filter_types`.
    other_type: String,
    /// No type: filtered by `filter_types`.
    no_type: String,
    /// `customer.created`, live: taken.
    customer: String,
    _dir: tempfile::TempDir,
}

impl Filtered {
    async fn start() -> Filtered {
        let dir = tempfile::tempdir().unwrap();
        let dest = Destination::start(Mode::Ok).await;
        let text = format!(
            r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
filter_types = ["invoice.*", "customer.created"]
filter_match = "/livemode=true"
"#,
            server_section(dir.path()),
            dest.url()
        );
        let server = TestServer::start(&text, Clock::system()).await;
        let (paid, _) = send(
            &server,
            "e1",
            json!({"type": "invoice.paid", "livemode": true}),
        )
        .await;
        let (test_mode, _) = send(
            &server,
            "e2",
            json!({"type": "invoice.paid", "livemode": false}),
        )
        .await;
        let (other_type, _) = send(
            &server,
            "e3",
            json!({"type": "charge.succeeded", "livemode": true}),
        )
        .await;
        let (no_type, _) = send(&server, "e4", json!({"livemode": true})).await;
        let (customer, _) = send(
            &server,
            "e5",
            json!({"type": "customer.created", "livemode": true}),
        )
        .await;
        eventually(
            "the invoice.paid and customer.created events are delivered",
            Duration::from_secs(10),
            Duration::from_millis(10),
            async || match (
                status(&server, &paid).await,
                status(&server, &customer).await,
            ) {
                (EventStatus::Delivered, EventStatus::Delivered) => Ok(()),
                (p, c) => Err(format!("{paid} {p:?}, {customer} {c:?}")),
            },
        )
        .await;
        Filtered {
            server,
            dest,
            paid,
            test_mode,
            other_type,
            no_type,
            customer,
            _dir: dir,
        }
    }
}

#[tokio::test]
async fn only_what_the_filter_takes_is_delivered_and_the_rest_is_kept_as_filtered() {
    let f = Filtered::start().await;
    for id in [&f.test_mode, &f.other_type, &f.no_type] {
        assert_eq!(status(&f.server, id).await, EventStatus::Filtered, "{id}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let delivered: Vec<String> = f
        .dest
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(delivered.len(), 2, "{delivered:?}");
    assert!(delivered.contains(&f.paid) && delivered.contains(&f.customer));
    f.server.stop().await;
}

#[tokio::test]
async fn a_providers_retry_of_a_filtered_event_is_a_duplicate_like_any_other() {
    let f = Filtered::start().await;
    let (again, duplicate) = send(
        &f.server,
        "e2",
        json!({"type": "invoice.paid", "livemode": false}),
    )
    .await;
    assert!(duplicate);
    assert_eq!(again, f.test_mode);
    f.server.stop().await;
}

#[tokio::test]
async fn filtered_events_are_counted_listed_and_measured() {
    let f = Filtered::start().await;
    let server = &f.server;
    let api = server.api(TOKEN);
    let stored = api.stats().await.sources["shop"].stored;
    assert_eq!((stored.filtered, stored.delivered), (3, 2), "{stored:?}");
    let listed = api.events("status=filtered").await;
    assert_eq!(listed.events.len(), 3);
    let metrics = server
        .metrics()
        .encode(hookinbox::metrics::Exposition::Prometheus);
    assert!(
        metrics.contains("hookinbox_filtered_total{source=\"shop\"} 3\n"),
        "{metrics}"
    );
    f.server.stop().await;
}

#[tokio::test]
async fn a_filtered_event_cannot_be_ignored_but_an_operators_replay_sends_it() {
    let f = Filtered::start().await;
    let (server, other_type) = (&f.server, &f.other_type);
    // Ignoring it makes no sense: it was never to be delivered.
    let ignored = server
        .admin(
            "POST",
            &format!("/api/events/{other_type}/ignore"),
            Some(TOKEN),
            Some(json!({"note": "x"})),
        )
        .await;
    assert_eq!(ignored.status, 409, "{:?}", ignored.json);
    // An operator's replay sends it anyway.
    server.api(TOKEN).replay(other_type, None).await;
    eventually(
        "the replay is delivered",
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || match status(server, other_type).await {
            EventStatus::Delivered => Ok(()),
            s => Err(format!("{other_type} {s:?}")),
        },
    )
    .await;
    assert_eq!(f.dest.count(), 3);
    f.server.stop().await;
}

async fn send_raw(server: &TestServer, id: &str, body: &str) -> String {
    let body = body.as_bytes().to_vec();
    let a = server
        .post("/in/shop", &standard_headers(id, &body), body)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    a.id().to_owned()
}

/// Regression: `filter_match = "/data/tier=café"` filtered an event whose
/// body wrote `"caf\u00e9"` (Python's `json.dumps` default), and
/// `?match=` missed it the same way: the fast path looked for the raw
/// bytes and gave up before reading the value. Escaped and raw forms of
/// the same value, with `\/` and a surrogate pair, are one value to both.
#[tokio::test]
async fn a_value_written_with_json_escapes_is_routed_and_found_as_its_raw_form_is() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let text = format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
filter_match = "/data/tier=café/😀"
"#,
        server_section(dir.path()),
        dest.url()
    );
    let server = TestServer::start(&text, Clock::system()).await;
    let raw = send_raw(&server, "e1", r#"{"data":{"tier":"café/😀"}}"#).await;
    let escaped = send_raw(
        &server,
        "e2",
        r#"{"data":{"tier":"caf\u00e9\/\ud83d\ude00"}}"#,
    )
    .await;
    let other = send_raw(
        &server,
        "e3",
        r#"{"data":{"tier":"caf\u00e8\/\ud83d\ude00"}}"#,
    )
    .await;

    eventually(
        "the raw and the escaped events are delivered",
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || match (status(&server, &raw).await, status(&server, &escaped).await) {
            (EventStatus::Delivered, EventStatus::Delivered) => Ok(()),
            (r, e) => Err(format!("raw {r:?}, escaped {e:?}")),
        },
    )
    .await;
    assert_eq!(status(&server, &other).await, EventStatus::Filtered);

    for (pointer_match, want) in [
        ("/data/tier=café/😀", vec![&raw, &escaped]),
        ("/data/tier=cafè/😀", vec![&other]),
    ] {
        let res = server
            .client
            .get(server.admin_url("/api/events"))
            .query(&[("match", pointer_match)])
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let listed: serde_json::Value = res.json().await.unwrap();
        let mut ids: Vec<&str> = listed["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        ids.sort_unstable();
        let mut want: Vec<&str> = want.iter().map(|s| s.as_str()).collect();
        want.sort_unstable();
        assert_eq!(ids, want, "{pointer_match}");
    }
    server.stop().await;
}
