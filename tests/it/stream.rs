//! `GET /api/events/stream` against a real server: events as they are
//! stored, in order, filtered, with their payload on request; resumed
//! after a cursor (`after` or `Last-Event-ID`) with what was stored
//! meanwhile; a bad cursor and a missing token refused.

use std::time::Duration;

use hookinbox::clock::Clock;
use tokio::sync::mpsc;

use crate::support::{
    STANDARD_SECRET, TestServer, eventually, sample, server_section, standard_headers,
};

const TOKEN: &str = "test-admin-token-0123456789";

fn config(dir: &std::path::Path) -> String {
    format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "inbox"
kind = "standard"
secret = "{STANDARD_SECRET}"

[[source]]
name = "other"
kind = "standard"
secret = "{STANDARD_SECRET}"
"#,
        server_section(dir),
    )
}

async fn send(server: &TestServer, source: &str, id: &str) -> String {
    let body = format!("{{\"n\":\"{id}\"}}").into_bytes();
    let a = server
        .post(&format!("/in/{source}"), &standard_headers(id, &body), body)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    a.id().to_owned()
}

/// One SSE event: its `id:` and its `data:` as JSON.
type Received = (String, serde_json::Value);

/// Opens the stream at `path` (with `last_event_id`, if any); the events
/// come on the receiver as they arrive.
async fn listen(
    server: &TestServer,
    path: &str,
    last_event_id: Option<&str>,
) -> mpsc::UnboundedReceiver<Received> {
    read(open(server, path, last_event_id).await)
}

/// Opens the stream at `path`; nothing is read from it yet.
async fn open(server: &TestServer, path: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let client = hookinbox::send::http_client(Duration::from_secs(120)).unwrap();
    let mut req = client
        .get(server.admin_url(path))
        .header("authorization", format!("Bearer {TOKEN}"));
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    res
}

/// The events of an open stream, on a receiver, as they arrive.
fn read(mut res: reqwest::Response) -> mpsc::UnboundedReceiver<Received> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(chunk)) = res.chunk().await {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let (mut id, mut data, mut kind) = (None, None, None);
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        kind = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(v).unwrap());
                    }
                }
                if kind.as_deref() == Some("ready") {
                    continue;
                }
                if let (Some(id), Some(data)) = (id, data)
                    && tx.send((id, data)).is_err()
                {
                    return;
                }
            }
        }
    });
    rx
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Received>) -> Received {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("an event within 10 s")
        .expect("the stream is open")
}

#[tokio::test]
async fn events_stream_as_they_are_stored_filtered_and_resume_after_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    let before = send(&server, "inbox", "evt_before").await;

    // From now: what was stored before is not sent.
    let mut all = listen(&server, "/api/events/stream?payload=true", None).await;
    let mut inbox = listen(&server, "/api/events/stream?source=inbox", None).await;
    let mut ids = Vec::new();
    for (source, id) in [("inbox", "evt_1"), ("other", "evt_2"), ("inbox", "evt_3")] {
        ids.push(send(&server, source, id).await);
    }
    for (n, want) in ids.iter().enumerate() {
        let (id, data) = next(&mut all).await;
        assert_eq!(&id, want);
        assert_eq!(data["id"], want.as_str());
        assert_eq!(data["event_id"], format!("evt_{}", n + 1));
        assert_eq!(data["payload"]["encoding"], "text");
        assert_eq!(
            data["payload"]["data"],
            format!("{{\"n\":\"evt_{}\"}}", n + 1)
        );
    }
    for want in [&ids[0], &ids[2]] {
        let (id, data) = next(&mut inbox).await;
        assert_eq!(&id, want);
        assert_eq!(data["source"], "inbox");
        assert!(data.get("payload").is_none(), "no payload unless asked");
    }
    // A duplicate is not a new event.
    send(&server, "inbox", "evt_1").await;
    let fourth = send(&server, "inbox", "evt_4").await;
    assert_eq!(next(&mut inbox).await.0, fourth);

    // Resumed after a cursor: what was stored since, then new events.
    let mut resumed = listen(&server, &format!("/api/events/stream?after={before}"), None).await;
    for want in ids.iter().chain([&fourth]) {
        assert_eq!(&next(&mut resumed).await.0, want);
    }
    let mut by_header = listen(&server, "/api/events/stream?source=inbox", Some(&ids[2])).await;
    assert_eq!(next(&mut by_header).await.0, fourth);
    let fifth = send(&server, "inbox", "evt_5").await;
    assert_eq!(next(&mut resumed).await.0, fifth);
    assert_eq!(next(&mut by_header).await.0, fifth);

    // Refused: a cursor that is not this inbox's id, and no token.
    let bad = server
        .admin("GET", "/api/events/stream?after=nope", Some(TOKEN), None)
        .await;
    assert_eq!(bad.status, 400, "{:?}", bad.json);
    let both = server
        .admin(
            "GET",
            &format!("/api/events/stream?after={before}&since=2026-01-01T00:00:00Z"),
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(both.status, 400, "{:?}", both.json);
    let anonymous = server.admin("GET", "/api/events/stream", None, None).await;
    assert_eq!(anonymous.status, 401);
    server.stop().await;
}

/// `hookinbox_event_streams` counts the streams open: one while a client
/// reads, none once it hung up.
#[tokio::test]
async fn open_streams_are_counted_until_the_client_hangs_up() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    let streams = async || {
        let a = server.admin("GET", "/metrics", Some(TOKEN), None).await;
        sample(a.json.as_str().unwrap(), "hookinbox_event_streams")
    };
    assert_eq!(streams().await, 0.0);
    let client = hookinbox::send::http_client(Duration::from_secs(60)).unwrap();
    let res = client
        .get(server.admin_url("/api/events/stream"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(streams().await, 1.0);
    let started = std::time::Instant::now();
    drop(res);
    eventually(
        "the stream is closed",
        Duration::from_secs(20),
        Duration::from_millis(50),
        async || match streams().await {
            0.0 => Ok(()),
            n => Err(format!("{n} open")),
        },
    )
    .await;
    eprintln!("closed {:?} after the client hung up", started.elapsed());
    server.stop().await;
}

/// A client that stops reading while many events arrive falls behind the
/// broadcast the streams share; its stream then reads the store from its
/// own cursor and goes on: every event, once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_falls_behind_the_others_reads_the_store_and_misses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    // Large payloads, so the socket's buffers fill and the stream waits.
    let slow = open(&server, "/api/events/stream?payload=true", None).await;
    let mut ids = Vec::new();
    for n in 0..500 {
        let body = format!("{{\"n\":{n},\"pad\":\"{}\"}}", "x".repeat(48 * 1024)).into_bytes();
        let id = format!("evt_slow_{n}");
        let a = server
            .post("/in/inbox", &standard_headers(&id, &body), body)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.json);
        ids.push(a.id().to_owned());
    }
    let mut slow = read(slow);
    for want in &ids {
        assert_eq!(&next(&mut slow).await.0, want);
    }
    server.stop().await;
}

/// `since` sends what was stored from that time at once, even while
/// nothing new arrives (and nobody was listening before).
#[tokio::test]
async fn a_stream_since_a_time_sends_the_history_without_waiting_for_a_new_event() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    let mut ids = Vec::new();
    for id in ["evt_h1", "evt_h2", "evt_h3"] {
        ids.push(send(&server, "inbox", id).await);
    }
    let mut history = listen(
        &server,
        "/api/events/stream?since=2000-01-01T00:00:00Z",
        None,
    )
    .await;
    for want in &ids {
        assert_eq!(&next(&mut history).await.0, want);
    }
    // A second stream, while the first is open, the same.
    let mut again = listen(
        &server,
        "/api/events/stream?since=2000-01-01T00:00:00Z&source=inbox",
        None,
    )
    .await;
    for want in &ids {
        assert_eq!(&next(&mut again).await.0, want);
    }
    server.stop().await;
}
