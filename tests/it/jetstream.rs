//! A NATS JetStream destination against a real `nats-server -js` (Debian's
//! `nats-server`): events published with the contract headers and
//! `Nats-Msg-Id`, consumed back byte for byte; the binary killed with
//! SIGKILL while it publishes leaves each event in the stream exactly once;
//! the server down and back opens the circuit and loses nothing.

use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use hookinbox::api::EventStatus;
use hookinbox::clock::Clock;

use crate::nats::NatsServer;
use crate::support::{
    BinaryServer, STANDARD_SECRET, TestServer, client, eventually, server_section,
    standard_headers, write_config,
};

/// Every message in `HOOKS`, oldest first, through a durable pull consumer
/// with explicit acks (as a consumer service would read it).
async fn consume_all(js: &jetstream::Context, expected: usize) -> Vec<jetstream::Message> {
    let stream = js.get_stream("HOOKS").await.unwrap();
    let consumer = stream
        .get_or_create_consumer(
            "check",
            consumer::pull::Config {
                durable_name: Some("check".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut out = Vec::new();
    // No pause between fetches: each waits up to 500 ms for messages.
    eventually(
        &format!("{expected} messages consumed from HOOKS"),
        Duration::from_secs(30),
        Duration::ZERO,
        async || {
            let mut batch = consumer
                .fetch()
                .max_messages(500)
                .expires(Duration::from_millis(500))
                .messages()
                .await
                .unwrap();
            while let Some(message) = batch.next().await {
                let message = message.unwrap();
                message.ack().await.unwrap();
                out.push(message);
            }
            match out.len() {
                n if n >= expected => Ok(()),
                n => Err(format!("{n} messages")),
            }
        },
    )
    .await;
    out
}

async fn stream_count(js: &jetstream::Context) -> u64 {
    let mut stream = js.get_stream("HOOKS").await.unwrap();
    stream.info().await.unwrap().state.messages
}

/// Waits until the stream holds at least `n` messages.
async fn wait_for_stream(js: &jetstream::Context, n: usize, limit: Duration) {
    eventually(
        &format!("{n} messages in the stream"),
        limit,
        Duration::from_millis(20),
        async || match stream_count(js).await {
            count if count >= n as u64 => Ok(()),
            count => Err(format!("{count} of {n} in the stream")),
        },
    )
    .await
}

fn header<'a>(m: &'a jetstream::Message, name: &str) -> &'a str {
    m.headers
        .as_ref()
        .and_then(|h| h.get(name))
        .map(|v| v.as_str())
        .unwrap_or_else(|| panic!("no {name} header"))
}

#[tokio::test]
async fn events_are_published_with_the_contract_headers_and_consumed_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let (js, _) = nats.stream().await;
    let text = format!(
        r#"{}[admin]
token = "test-admin-token-0123456789"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
"#,
        server_section(&dir.path().join("data")),
        nats.url()
    );
    let server = TestServer::start(&text, Clock::system()).await;
    let mut sent = Vec::new();
    for i in 0..20 {
        let body = if i == 19 {
            // No type: the subject says `_` in its place.
            format!("{{ \"n\": {i} }}")
        } else {
            format!("{{\"type\":\"invoice.paid\", \"n\": {i}}}")
        };
        let a = server
            .post(
                "/in/shop",
                &standard_headers(&format!("evt_{i}"), body.as_bytes()),
                body.clone(),
            )
            .await;
        assert_eq!(a.status, 200, "{:?}", a.json);
        sent.push((a.id().to_owned(), format!("evt_{i}"), body));
    }
    let messages = consume_all(&js, sent.len()).await;
    assert_eq!(messages.len(), sent.len());
    for (id, event_id, body) in &sent {
        let m = messages
            .iter()
            .find(|m| header(m, "webhook-id") == id)
            .unwrap_or_else(|| panic!("{id} not in the stream"));
        assert_eq!(header(m, "Nats-Msg-Id"), id);
        assert_eq!(header(m, "hookinbox-event-id"), event_id);
        assert_eq!(header(m, "hookinbox-source"), "shop");
        assert_eq!(header(m, "hookinbox-attempt"), "1");
        assert_eq!(&m.payload[..], body.as_bytes(), "the raw body");
        if body.contains("invoice.paid") {
            assert_eq!(m.subject.as_str(), "webhooks.shop.invoice.paid");
            assert_eq!(header(m, "hookinbox-event-type"), "invoice.paid");
        } else {
            assert_eq!(m.subject.as_str(), "webhooks.shop._");
        }
        assert!(header(m, "webhook-signature").starts_with("v1,"));
    }
    // Delivered means the stream's ack; the attempt says where it went.
    let (first, _, _) = &sent[0];
    let api = server.api("test-admin-token-0123456789");
    let detail = eventually(
        &format!("{first} is delivered"),
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || {
            let d = api.event(first).await;
            if d.summary.status == EventStatus::Delivered {
                Ok(d)
            } else {
                Err(format!("{d:?}"))
            }
        },
    )
    .await;
    let answer = detail.attempt_history[0]
        .response_snippet
        .as_deref()
        .unwrap();
    assert!(answer.starts_with("stream HOOKS sequence "), "{answer}");

    // A replay is published again (a new message id), not dropped as a
    // duplicate inside the stream's window.
    api.replay(first, None).await;
    // The replay reaches the stream as a 21st message.
    wait_for_stream(&js, 21, Duration::from_secs(10)).await;
    let again = consume_all(&js, 1).await;
    assert_eq!(header(&again[0], "webhook-id"), first);
    assert_eq!(header(&again[0], "Nats-Msg-Id"), format!("{first}.r1"));
    server.stop().await;
}

/// Regression guard for the edge's promise: a publish repeated after a
/// crash is dropped by the stream, so it holds each event once.
#[tokio::test]
async fn kill_9_while_publishing_leaves_each_event_in_the_stream_exactly_once() {
    const EVENTS: usize = 1500;
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let (js, _) = nats.stream().await;
    // Held back (paused) while the backlog is ingested, then resumed and
    // killed mid-way through publishing it.
    let config = write_config(
        dir.path(),
        &format!(
            r#"{}[admin]
token = "test-admin-token-0123456789"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
max_concurrency = 8
"#,
            server_section(&dir.path().join("data")),
            nats.url()
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let http = client();
    let admin_base = server.admin.clone();
    let admin = |path: &str| format!("{admin_base}{path}");
    let token = "Bearer test-admin-token-0123456789";
    let paused = http
        .post(admin("/api/destinations/shop/pause"))
        .header("authorization", token)
        .send()
        .await
        .unwrap();
    assert_eq!(paused.status(), 200);
    let mut ids = std::collections::HashSet::new();
    for i in 0..EVENTS {
        let body = format!("{{\"type\":\"charge.succeeded\",\"n\":{i}}}");
        let a = crate::support::post(
            &http,
            &server.url("/in/shop"),
            &standard_headers(&format!("k_{i}"), body.as_bytes()),
            body.into_bytes(),
        )
        .await;
        assert_eq!(a.status, 200);
        ids.insert(a.id().to_owned());
    }
    let resumed = http
        .post(admin("/api/destinations/shop/resume"))
        .header("authorization", token)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    eventually(
        "publishing starts (a third of the events in the stream)",
        Duration::from_secs(30),
        Duration::from_millis(5),
        async || match stream_count(&js).await {
            n if n >= (EVENTS / 3) as u64 => Ok(()),
            n => Err(format!("{n} in the stream")),
        },
    )
    .await;
    server.kill9();
    let at_kill = stream_count(&js).await;
    assert!(
        at_kill < EVENTS as u64,
        "killed too late to test anything: {at_kill}"
    );

    // The restart finds the leases of attempts in flight (recorded as
    // interrupted) and publishes them again under the same message id.
    let _server = BinaryServer::start(&config, &[], None);
    wait_for_stream(&js, EVENTS, Duration::from_secs(60)).await;
    // Nothing more arrives: no event was published twice.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(stream_count(&js).await, EVENTS as u64);
    let messages = consume_all(&js, EVENTS).await;
    let mut seen = std::collections::HashSet::new();
    for m in &messages {
        let id = header(m, "Nats-Msg-Id").to_owned();
        assert!(ids.contains(&id), "{id} was never acked to a provider");
        assert!(seen.insert(id.clone()), "{id} twice in the stream");
    }
    assert_eq!(seen.len(), EVENTS);
}

#[tokio::test]
async fn the_server_down_then_back_opens_the_circuit_and_loses_nothing() {
    const EVENTS: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let mut nats = NatsServer::start(&dir.path().join("nats"));
    let (js, _) = nats.stream().await;
    let text = format!(
        r#"{}[admin]
token = "test-admin-token-0123456789"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
connect_timeout = "500ms"
timeout = "1s"
initial_interval = "100ms"
max_interval = "500ms"
max_attempts = 1000
breaker_failures = 3
breaker_cooldown = "300ms"
"#,
        server_section(&dir.path().join("data")),
        nats.url()
    );
    let server = TestServer::start(&text, Clock::system()).await;
    // One event through while the server is up: the client is connected.
    let body = b"{\"type\":\"a\"}".to_vec();
    let a = server
        .post("/in/shop", &standard_headers("up_0", &body), body)
        .await;
    assert_eq!(a.status, 200);
    wait_for_stream(&js, 1, Duration::from_secs(10)).await;
    drop(js);

    nats.stop();
    for i in 1..EVENTS {
        let body = format!("{{\"type\":\"a\",\"n\":{i}}}").into_bytes();
        let a = server
            .post(
                "/in/shop",
                &standard_headers(&format!("down_{i}"), &body),
                body,
            )
            .await;
        assert_eq!(a.status, 200, "ingest does not depend on the destination");
    }
    eventually(
        "the circuit opens",
        Duration::from_secs(20),
        Duration::from_millis(20),
        async || match server.metrics().circuit_count(
            "shop",
            "shop",
            hookinbox::words::Circuit::Open,
        ) {
            0 => Err("closed".to_owned()),
            _ => Ok(()),
        },
    )
    .await;

    nats.restart();
    let (js, _) = nats.stream().await;
    wait_for_stream(&js, EVENTS, Duration::from_secs(60)).await;
    eventually(
        &format!("all {EVENTS} events are delivered"),
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || {
            let stats = server.store().stats().unwrap();
            let counts = &stats["shop"].counts;
            if counts.delivered == EVENTS as u64 {
                assert_eq!(counts.dead, 0);
                Ok(())
            } else {
                Err(format!("{counts:?}"))
            }
        },
    )
    .await;
    assert_eq!(stream_count(&js).await, EVENTS as u64);
    server.stop().await;
}
