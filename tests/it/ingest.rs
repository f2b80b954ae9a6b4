//! The ingest contract over real HTTP: each case of the table in DESIGN.md,
//! duplicates (sequential and concurrent), restarts and graceful shutdown.

use std::time::Duration;

use hookinbox::clock::Clock;
use hookinbox::store::schema::Status;
use hookinbox::words::{RejectReason, UNKNOWN_SOURCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{TestServer, read_all, server_section, standard_headers, standard_source};

async fn start(extra: &str) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}{}{extra}",
        server_section(dir.path()),
        standard_source("demo")
    );
    (TestServer::start(&config, Clock::system()).await, dir)
}

#[tokio::test]
async fn same_event_three_times_is_one_record_and_two_duplicates() {
    let (server, _dir) = start("").await;
    let body = br#"{"type":"invoice.paid","n":1}"#.to_vec();
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(
            server
                .post("/in/demo", &standard_headers("msg_1", &body), body.clone())
                .await,
        );
    }
    assert!(answers.iter().all(|a| a.status == 200), "{answers:?}");
    assert!(!answers[0].is_duplicate());
    assert!(answers[1].is_duplicate() && answers[2].is_duplicate());
    assert_eq!(answers[0].json["received"], true);
    assert!(
        answers.iter().all(|a| a.id() == answers[0].id()),
        "the original id every time"
    );
    let events = server.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].record.event_id, "msg_1");
    assert_eq!(events[0].record.event_type.as_deref(), Some("invoice.paid"));
    // No destination: the event is held in the inbox.
    assert_eq!(events[0].state.status, Status::Held);
    assert_eq!(server.metrics().received_count("demo"), 1);
    assert_eq!(server.metrics().duplicate_count("demo"), 2);
    server.stop().await;
}

#[tokio::test]
async fn one_new_event_sent_by_100_concurrent_requests_is_stored_once() {
    let (server, _dir) = start("").await;
    let body = br#"{"type":"charge.succeeded"}"#.to_vec();
    let headers = standard_headers("msg_concurrent", &body);
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (client, url, headers, body) = (
                server.client.clone(),
                server.url("/in/demo"),
                headers.clone(),
                body.clone(),
            );
            tokio::spawn(async move { crate::support::post(&client, &url, &headers, body).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    assert!(answers.iter().all(|a| a.status == 200), "{answers:?}");
    assert_eq!(answers.iter().filter(|a| !a.is_duplicate()).count(), 1);
    assert_eq!(answers.iter().filter(|a| a.is_duplicate()).count(), 99);
    let first = answers[0].id().to_owned();
    assert!(answers.iter().all(|a| a.id() == first));
    assert_eq!(server.events().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn events_and_their_dedupe_keys_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{}{}", server_section(dir.path()), standard_source("demo"));
    let server = TestServer::start(&config, Clock::system()).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        let body = format!("{{\"type\":\"t\",\"i\":{i}}}").into_bytes();
        let a = server
            .post(
                "/in/demo",
                &standard_headers(&format!("msg_{i}"), &body),
                body,
            )
            .await;
        assert_eq!(a.status, 200);
        ids.push(a.id().to_owned());
    }
    server.stop().await;

    let server = TestServer::start(&config, Clock::system()).await;
    let events = server.events();
    assert_eq!(events.len(), 20);
    assert_eq!(events.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), ids);
    let body = br#"{"type":"t","i":3}"#.to_vec();
    let a = server
        .post("/in/demo", &standard_headers("msg_3", &body), body)
        .await;
    assert!(
        a.is_duplicate(),
        "a repeat after restart is still a duplicate: {:?}",
        a.json
    );
    assert_eq!(a.id(), ids[3]);
    let body = br#"{"type":"t","i":20}"#.to_vec();
    let a = server
        .post("/in/demo", &standard_headers("msg_20", &body), body)
        .await;
    assert!(!a.is_duplicate());
    server.stop().await;
    assert_eq!(read_all(dir.path()).await.len(), 21);
}

#[tokio::test]
async fn a_source_with_a_destination_schedules_its_events() {
    let (server, _dir) = start("destination = \"http://127.0.0.1:9/hooks\"\n").await;
    let body = br#"{"type":"t"}"#.to_vec();
    assert_eq!(
        server
            .post("/in/demo", &standard_headers("m", &body), body)
            .await
            .status,
        200
    );
    assert_eq!(server.events()[0].state.status, Status::Pending);
    server.stop().await;
}

#[tokio::test]
async fn unknown_source_is_404_and_stores_nothing() {
    let (server, _dir) = start("").await;
    let body = br#"{"type":"t"}"#.to_vec();
    let a = server
        .post("/in/nope", &standard_headers("m", &body), body)
        .await;
    assert_eq!(a.status, 404);
    assert_eq!(a.json["error"], "unknown_source");
    assert!(server.events().is_empty());
    assert_eq!(
        server
            .metrics()
            .rejected_count(UNKNOWN_SOURCE, RejectReason::UnknownSource),
        1
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_signature_is_401_with_a_reason_and_counted() {
    let (server, _dir) = start("").await;
    let body = br#"{"type":"t"}"#.to_vec();
    let a = server.post("/in/demo", &[], body.clone()).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json["error"], "invalid_signature");
    assert!(
        a.json["reason"]
            .as_str()
            .unwrap()
            .contains("webhook-signature"),
        "{:?}",
        a.json
    );
    let mut headers = standard_headers("m", &body);
    headers.retain(|(k, _)| k != "webhook-id");
    assert_eq!(server.post("/in/demo", &headers, body).await.status, 401);
    assert!(server.events().is_empty());
    assert_eq!(
        server
            .metrics()
            .rejected_count("demo", RejectReason::MissingSignature),
        2
    );
    server.stop().await;
}

#[tokio::test]
async fn body_over_the_source_limit_is_413_and_stores_nothing() {
    let (server, _dir) = start("max_body = \"1KiB\"\n").await;
    let body = format!("{{\"type\":\"t\",\"pad\":\"{}\"}}", "x".repeat(2000)).into_bytes();
    let a = server
        .post("/in/demo", &standard_headers("m", &body), body)
        .await;
    assert_eq!(a.status, 413);
    assert_eq!(a.json["error"], "body_too_large");
    // Chunked, with no Content-Length to refuse it early: the limit still holds.
    let mut tcp = tokio::net::TcpStream::connect(server.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let chunk = "y".repeat(1500);
    let request = format!(
        "POST /in/demo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut response = vec![0u8; 4096];
    let n = tcp.read(&mut response).await.unwrap();
    assert!(String::from_utf8_lossy(&response[..n]).starts_with("HTTP/1.1 413"));
    assert!(server.events().is_empty());
    assert_eq!(
        server
            .metrics()
            .rejected_count("demo", RejectReason::BodyTooLarge),
        2
    );
    server.stop().await;
}

#[tokio::test]
async fn missing_or_unreadable_event_id_is_400_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "whsec_stripe_test";
    let config = format!(
        "{}[[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecret = \"{secret}\"\n",
        server_section(dir.path())
    );
    let server = TestServer::start(&config, Clock::system()).await;
    let sign = |body: &[u8]| {
        hookinbox::verify::sign::sign(&hookinbox::verify::sign::Signing {
            kind: hookinbox::config::Kind::Stripe,
            secret,
            body,
            event_id: "",
            event_type: None,
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64,
            url: "",
            content_type: "application/json",
            hmac: None,
        })
        .unwrap()
    };
    let body = br#"{"object":"event","type":"charge.succeeded"}"#.to_vec();
    let a = server.post("/in/stripe", &sign(&body), body).await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json["error"], "missing_event_id");
    assert!(
        a.json["reason"].as_str().unwrap().contains("json:/id"),
        "{:?}",
        a.json
    );
    let body = b"not json".to_vec();
    let a = server.post("/in/stripe", &sign(&body), body).await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json["error"], "unparseable_body");
    assert!(server.events().is_empty());
    server.stop().await;
}

/// Writes `partial` on a raw connection, sends nothing more, and returns
/// what the server answers before it closes (`None`: the read failed).
async fn send_and_stall(server: &TestServer, partial: &[u8]) -> Option<String> {
    let mut tcp = tokio::net::TcpStream::connect(server.base.trim_start_matches("http://"))
        .await
        .unwrap();
    tcp.write_all(partial).await.unwrap();
    let mut response = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut response))
        .await
        .expect("the server must answer or close within 10 s")
        .ok()?;
    Some(String::from_utf8_lossy(&response[..n]).into_owned())
}

#[tokio::test]
async fn a_body_that_stops_arriving_gets_408() {
    let (server, _dir) = start("").await;
    let text = send_and_stall(
        &server,
        b"POST /in/demo HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"partial\":",
    )
    .await
    .expect("an answer, not a reset");
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(server.events().is_empty());
    server.stop().await;
}

#[tokio::test]
async fn a_request_head_that_stops_arriving_is_disconnected() {
    let (server, _dir) = start("").await;
    // The server closes the connection (header_read_timeout = 1s in tests).
    let text = send_and_stall(&server, b"POST /in/demo HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap_or_default();
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_request_finish_and_get_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!("{}{}", server_section(dir.path()), standard_source("demo"));
    let server = TestServer::start(&config, Clock::system()).await;
    let body = br#"{"type":"late"}"#.to_vec();
    let mut head = format!(
        "POST /in/demo HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in standard_headers("msg_in_flight", &body) {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    let mut tcp = tokio::net::TcpStream::connect(server.base.trim_start_matches("http://"))
        .await
        .unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body[..5]).await.unwrap();
    // Give the server time to parse the head and start reading the body.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = tokio::spawn(server.stop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    tcp.write_all(&body[5..]).await.unwrap();
    let mut response = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut response))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&response[..n]);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    stopping.await.unwrap();
    let stored = read_all(dir.path()).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].record.event_id, "msg_in_flight");
}
