//! Attempts in full over real HTTP: each attempt keeps the request's
//! headers as sent (the signature only as its first characters), the
//! answer's status, headers and start, its timings, and the round it
//! belongs to (0, then 1 after a replay).

use std::time::Duration;

use serde_json::Value;

use crate::destination::{Destination, Mode};
use crate::support::*;
use hookinbox::api::EventStatus;
use hookinbox::clock::Clock;

const ADMIN: &str = "attempts-admin-token-0123456789";

/// The value of header `name` in `pairs`, typed as `[name, value]`.
fn typed_header<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn header<'a>(pairs: &'a Value, name: &str) -> Option<&'a str> {
    pairs
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p[0] == name)
        .map(|p| p[1].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_keeps_what_was_sent_and_answered_in_its_round() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(422, "amount must be positive")).await;
    let config = format!(
        "{}[admin]\ntoken = \"{ADMIN}\"\n\n{}destination = \"{}\"\ninitial_interval = \"100ms\"\n",
        server_section(&dir.path().join("data")),
        standard_source("shop"),
        dest.url()
    );
    let server = TestServer::start(&config, Clock::system()).await;
    let body = r#"{"type":"invoice.paid","amount":-1}"#;
    let a = server
        .post(
            "/in/shop",
            &standard_headers("evt_1", body.as_bytes()),
            body,
        )
        .await;
    assert_eq!(a.status, 200);
    let id = a.id().to_owned();
    let api = server.api(ADMIN);
    eventually(
        "dead at once (422)",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || match api.event(&id).await.summary.status {
            EventStatus::Dead => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .await;

    // A replay: 500 once, then delivered, all in round 1.
    dest.set(Mode::Status(500, "flaky"));
    api.replay(&id, None).await;
    dest.wait_for(2, Duration::from_secs(10)).await;
    dest.set(Mode::Ok);
    let detail = eventually(
        "delivered after the replay",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || {
            let e = api.event(&id).await;
            match e.summary.status {
                EventStatus::Delivered => Ok(e),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let attempts = &detail.attempt_history;
    let rounds: Vec<(u32, Option<u16>)> = attempts.iter().map(|a| (a.round, a.status)).collect();
    assert_eq!(
        rounds,
        [(0, Some(422)), (1, Some(500)), (1, Some(200))],
        "{attempts:#?}"
    );
    // The answer as sent, every field of it, not only those the type reads.
    let wire = server
        .admin("GET", &format!("/api/events/{id}"), Some(ADMIN), None)
        .await
        .json
        .to_string();

    let received = dest.received();
    assert_eq!(received.len(), 3);
    for (a, got) in attempts.iter().zip(&received) {
        let sent = &a.request_headers;
        assert_eq!(typed_header(sent, "webhook-id"), Some(id.as_str()));
        assert_eq!(
            typed_header(sent, "webhook-timestamp"),
            Some(got.header("webhook-timestamp"))
        );
        assert_eq!(
            typed_header(sent, "hookinbox-attempt"),
            Some(got.header("hookinbox-attempt"))
        );
        assert_eq!(
            typed_header(sent, "user-agent"),
            Some(got.header("user-agent"))
        );
        // The signature: its first 8 characters, never the whole.
        let signature = got.header("webhook-signature");
        let shown = typed_header(sent, "webhook-signature").unwrap();
        assert_eq!(shown, format!("{}…", &signature[..8]));
        assert!(!wire.contains(&signature[8..]), "{signature}");
        assert_eq!(
            typed_header(&a.response_headers, "content-type"),
            Some("text/plain; charset=utf-8")
        );
        let first_byte = a.first_byte_ms.unwrap();
        assert!(first_byte <= a.latency_ms, "{a:?}");
    }
    assert_eq!(
        attempts[0].response_snippet.as_deref(),
        Some("amount must be positive")
    );
    server.stop().await;
}

/// An attempt the destination never answered (refused connection) keeps
/// what was sent and no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_without_an_answer_keeps_the_request_and_no_answer_headers() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[admin]\ntoken = \"{ADMIN}\"\n\n{}destination = \"http://127.0.0.1:9/\"\nmax_attempts = 1\n",
        server_section(&dir.path().join("data")),
        standard_source("shop"),
    );
    let server = TestServer::start(&config, Clock::system()).await;
    let body = r#"{"type":"t"}"#;
    let a = server
        .post(
            "/in/shop",
            &standard_headers("evt_2", body.as_bytes()),
            body,
        )
        .await;
    let id = a.id().to_owned();
    let detail = eventually(
        "the attempt is recorded",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || {
            let e = server
                .admin("GET", &format!("/api/events/{id}"), Some(ADMIN), None)
                .await
                .json;
            if e["attempt_history"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
            {
                Ok(e)
            } else {
                Err(e.to_string())
            }
        },
    )
    .await;
    let a = &detail["attempt_history"][0];
    assert_eq!(a["outcome"], "connect", "{a}");
    assert_eq!(a["round"], 0);
    assert!(a.get("first_byte_ms").is_none(), "{a}");
    assert_eq!(a["response_headers"], serde_json::json!([]));
    assert_eq!(
        header(&a["request_headers"], "webhook-id"),
        Some(id.as_str())
    );
    server.stop().await;
}
