//! Delivery: the real server delivers to a real destination on loopback that
//! fails, hangs or is slow on demand.

use std::time::Duration;

use hookinbox::clock::Clock;
use hookinbox::standard_webhooks::StandardKey;
use hookinbox::store::schema::{Attempt, AttemptClass, Status};
use hookinbox::store::{Change, ChangeError, StoredEvent};
use hookinbox::words::{AttemptOutcome, Circuit};

use crate::destination::{Destination, Mode};
use crate::support::{TestServer, eventually, eventually_sync, server_section, standard_headers};

/// The key deliveries are signed with in these tests.
const DEST_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn config(dir: &std::path::Path, dest: &Destination, extra: &str) -> String {
    format!(
        r#"{}[[source]]
name = "shop"
kind = "standard"
secret = "{}"
destination = "{}"
destination_secret = "{DEST_SECRET}"
forward_headers = ["X-Shop-Domain"]
{extra}
"#,
        server_section(dir),
        crate::support::STANDARD_SECRET,
        dest.url()
    )
}

async fn send(server: &TestServer, id: &str) -> String {
    let body = format!("{{\"type\":\"order.paid\",\"id\":\"{id}\"}}").into_bytes();
    let mut headers = standard_headers(id, &body);
    headers.push(("x-shop-domain".into(), "acme.example".into()));
    headers.push(("x-not-forwarded".into(), "private".into()));
    let answer = server.post("/in/shop", &headers, body).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    answer.id().to_owned()
}

fn event(server: &TestServer, id: &str) -> StoredEvent {
    let seq = server.store().parse_public_id(id).unwrap();
    server.store().get(seq).unwrap().unwrap()
}

async fn wait_status(
    server: &TestServer,
    id: &str,
    status: Status,
    limit: Duration,
) -> StoredEvent {
    eventually(
        &format!("event {id} is {status:?}"),
        limit,
        Duration::from_millis(10),
        async || {
            let e = event(server, id);
            if e.state.status == status {
                Ok(e)
            } else {
                Err(format!("event {id} is {:?}", e.state))
            }
        },
    )
    .await
}

#[tokio::test]
async fn an_event_is_delivered_once_with_the_contract_headers() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest, ""), Clock::system()).await;
    let id = send(&server, "ord_1").await;
    let got = dest.wait_for(1, Duration::from_secs(10)).await;
    let r = &got[0];
    assert_eq!(r.header("webhook-id"), id);
    assert_eq!(r.header("hookinbox-source"), "shop");
    assert_eq!(r.header("hookinbox-event-id"), "ord_1");
    assert_eq!(r.header("hookinbox-attempt"), "1");
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(&r.body[..], br#"{"type":"order.paid","id":"ord_1"}"#);
    let ts = r.header("webhook-timestamp");
    let age = SystemTimeSecs::now() - ts.parse::<i64>().unwrap();
    assert!((0..60).contains(&age), "timestamp {ts} is {age} s old");
    // One signature, the one hookinbox's signer makes; the official library
    // below checks that signer against the spec.
    let key = StandardKey::parse(DEST_SECRET).unwrap();
    assert_eq!(
        r.header("webhook-signature"),
        key.sign(&id, ts.parse().unwrap(), &r.body)
    );
    assert_eq!(
        crate::support::official_verify(r, DEST_SECRET, &r.body),
        Ok(())
    );
    assert!(crate::support::official_verify(r, DEST_SECRET, b"{\"tampered\":true}").is_err());
    // Listed provider headers are forwarded; others, and the provider's own
    // signature, are not.
    assert_eq!(r.header("x-shop-domain"), "acme.example");
    assert!(r.headers.get("x-not-forwarded").is_none());
    assert_eq!(r.headers.get_all("webhook-signature").iter().count(), 1);
    let e = wait_status(&server, &id, Status::Delivered, Duration::from_secs(5)).await;
    assert_eq!(e.state.attempts, 1);
    // Delivered means delivered: nothing more arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dest.count(), 1);
    assert_eq!(
        server
            .metrics()
            .attempt_count("shop", "shop", AttemptOutcome::Delivered),
        1
    );
    server.stop().await;
}

struct SystemTimeSecs;
impl SystemTimeSecs {
    fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    }
}

#[tokio::test]
async fn failures_are_retried_with_growing_jittered_intervals_until_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(500, "boom")).await;
    let server = TestServer::start(
        &config(
            dir.path(),
            &dest,
            "initial_interval = \"200ms\"\nmax_interval = \"10s\"\nbreaker_failures = 100\n",
        ),
        Clock::system(),
    )
    .await;
    let id = send(&server, "ord_2").await;
    let got = dest.wait_for(4, Duration::from_secs(10)).await;
    dest.set(Mode::Ok);
    let gaps: Vec<Duration> = got.windows(2).map(|w| w[1].at - w[0].at).collect();
    // 200 ms, 400 ms, 800 ms, each ±20 %. Never early; late by at most the
    // scheduling slack of a busy shared machine (a second). The exact jittered
    // intervals are checked without wall-clock time in `deliver::policy`.
    for (gap, base) in gaps.iter().zip([200u64, 400, 800]) {
        let ms = gap.as_millis() as u64;
        assert!(
            ms * 10 >= base * 8 && ms <= base * 12 / 10 + 1_000,
            "gap {ms} ms for a {base} ms interval; all: {gaps:?}"
        );
    }
    assert!(got.iter().all(|r| r.answered == 500));
    let attempts: Vec<&str> = got.iter().map(|r| r.header("hookinbox-attempt")).collect();
    assert_eq!(attempts, ["1", "2", "3", "4"]);
    assert!(got.iter().all(|r| r.header("webhook-id") == id));
    let e = wait_status(&server, &id, Status::Delivered, Duration::from_secs(10)).await;
    let history = server.store().attempts(e.seq).unwrap();
    let classes: Vec<_> = history.iter().map(|a| a.class).collect();
    assert_eq!(
        &classes[..4],
        &[AttemptClass::RetryableStatus; 4],
        "{history:?}"
    );
    assert_eq!(classes.last(), Some(&AttemptClass::Delivered));
    assert_eq!(history[0].status, Some(500));
    assert_eq!(history[0].response_snippet.as_deref(), Some("boom"));
    server.stop().await;
}

#[tokio::test]
async fn a_rejecting_status_dead_letters_at_once_with_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(422, "{\"error\":\"unknown order\"}")).await;
    let server = TestServer::start(&config(dir.path(), &dest, ""), Clock::system()).await;
    let id = send(&server, "ord_3").await;
    let e = wait_status(&server, &id, Status::Dead, Duration::from_secs(10)).await;
    let dead = e.state.dead.as_ref().unwrap();
    assert_eq!(dead.last_status, Some(422));
    assert!(dead.reason.contains("422"), "{}", dead.reason);
    let history = server.store().attempts(e.seq).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        history[0].response_snippet.as_deref(),
        Some("{\"error\":\"unknown order\"}")
    );
    assert_eq!(server.store().dead_letters("shop").unwrap(), vec![e.seq]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(dest.count(), 1, "a dead letter is not retried");
    server.stop().await;
}

#[tokio::test]
async fn exhausted_retries_dead_letter_with_the_full_history() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(503, "down")).await;
    let server = TestServer::start(
        &config(
            dir.path(),
            &dest,
            "initial_interval = \"20ms\"\nmax_attempts = 4\nbreaker_failures = 100\n",
        ),
        Clock::system(),
    )
    .await;
    let id = send(&server, "ord_4").await;
    let e = wait_status(&server, &id, Status::Dead, Duration::from_secs(10)).await;
    let history = server.store().attempts(e.seq).unwrap();
    assert_eq!(history.len(), 4, "{history:?}");
    assert!(history.iter().all(|a| a.status == Some(503)));
    let reason = &e.state.dead.as_ref().unwrap().reason;
    assert!(
        reason.contains("4 attempts") && reason.contains("503"),
        "{reason}"
    );
    assert_eq!(dest.count(), 4);
    server.stop().await;
}

#[tokio::test]
async fn retry_after_is_respected() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::StatusRetryAfter(429, "1")).await;
    let server = TestServer::start(
        &config(
            dir.path(),
            &dest,
            "initial_interval = \"20ms\"\nbreaker_failures = 100\n",
        ),
        Clock::system(),
    )
    .await;
    let id = send(&server, "ord_5").await;
    let first = dest.wait_for(1, Duration::from_secs(10)).await;
    dest.set(Mode::Ok);
    let both = dest.wait_for(2, Duration::from_secs(10)).await;
    let gap = both[1].at - first[0].at;
    assert!(
        gap >= Duration::from_millis(950),
        "retried after {gap:?}, asked 1 s"
    );
    wait_status(&server, &id, Status::Delivered, Duration::from_secs(5)).await;
    server.stop().await;
}

#[tokio::test]
async fn a_hanging_destination_times_out_and_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Hang).await;
    let server = TestServer::start(
        &config(
            dir.path(),
            &dest,
            "timeout = \"300ms\"\ninitial_interval = \"50ms\"\nbreaker_failures = 100\n",
        ),
        Clock::system(),
    )
    .await;
    let id = send(&server, "ord_6").await;
    dest.wait_for(1, Duration::from_secs(10)).await;
    dest.set(Mode::Ok);
    let e = wait_status(&server, &id, Status::Delivered, Duration::from_secs(10)).await;
    let history = server.store().attempts(e.seq).unwrap();
    assert_eq!(history[0].class, AttemptClass::Timeout, "{history:?}");
    assert!(history[0].latency_ms >= 290, "{history:?}");
    server.stop().await;
}

#[tokio::test]
async fn an_open_circuit_stops_spending_attempts_and_a_probe_closes_it() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(500, "down")).await;
    let server = TestServer::start(
        &config(
            dir.path(),
            &dest,
            r#"initial_interval = "20ms"
max_interval = "40ms"
max_attempts = 1000
breaker_failures = 3
breaker_cooldown = "1500ms"
"#,
        ),
        Clock::system(),
    )
    .await;
    let ids = [send(&server, "ord_a").await, send(&server, "ord_b").await];
    dest.wait_for(3, Duration::from_secs(10)).await;
    // Open: the count stops growing although both events are due every 40 ms.
    eventually(
        "the circuit opens",
        Duration::from_secs(5),
        Duration::from_millis(10),
        async || match server
            .metrics()
            .circuit_count("shop", "shop", Circuit::Open)
        {
            0 => Err(format!("closed; {} attempts", dest.count())),
            _ => Ok(()),
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let while_open = dest.count();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        dest.count(),
        while_open,
        "attempts were spent on an open circuit"
    );
    dest.set(Mode::Ok);
    for id in &ids {
        wait_status(&server, id, Status::Delivered, Duration::from_secs(10)).await;
    }
    assert!(
        server
            .metrics()
            .circuit_count("shop", "shop", Circuit::HalfOpen)
            >= 1
    );
    assert!(
        server
            .metrics()
            .circuit_count("shop", "shop", Circuit::Closed)
            >= 1
    );
    server.stop().await;
}

#[tokio::test]
async fn a_burst_of_1000_never_exceeds_the_concurrency_limit() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Slow(Duration::from_millis(5))).await;
    let server = TestServer::start(
        &config(dir.path(), &dest, "max_concurrency = 4\n"),
        Clock::system(),
    )
    .await;
    let server = std::sync::Arc::new(server);
    let mut tasks = Vec::new();
    for t in 0..20 {
        let server = server.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..50 {
                ids.push(send(&server, &format!("burst_{t}_{i}")).await);
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.unwrap());
    }
    let got = dest.wait_for(1000, Duration::from_secs(60)).await;
    assert!(
        dest.max_in_flight() <= 4,
        "max in flight {}",
        dest.max_in_flight()
    );
    assert!(dest.max_in_flight() >= 2, "the limit was never used");
    let mut seen: Vec<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 1000, "each event delivered exactly once");
    let server = std::sync::Arc::into_inner(server).unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_paused_destination_receives_nothing_until_resumed_then_everything_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(
        &config(dir.path(), &dest, "paused = true\nmax_concurrency = 1\n"),
        Clock::system(),
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(send(&server, &format!("ord_p{i}")).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(dest.count(), 0);
    let handle = server.app.as_ref().unwrap().delivery().clone();
    assert_eq!(handle.is_paused("shop"), Some(true));
    handle.resume("shop").await.unwrap();
    let got = dest.wait_for(5, Duration::from_secs(10)).await;
    let order: Vec<&str> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(order, ids.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(handle.pause("nope").await.is_err());
    server.stop().await;
}

#[tokio::test]
async fn replay_redelivers_with_the_same_webhook_id_and_ignore_keeps_the_note() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(400, "bad")).await;
    let server = TestServer::start(&config(dir.path(), &dest, ""), Clock::system()).await;
    let id = send(&server, "ord_r").await;
    let other = send(&server, "ord_i").await;
    let e = wait_status(&server, &id, Status::Dead, Duration::from_secs(10)).await;
    wait_status(&server, &other, Status::Dead, Duration::from_secs(10)).await;
    dest.set(Mode::Ok);
    let store = server.store();
    let now = hookinbox::clock::Clock::system().now_ms();
    store
        .change(e.seq, Change::Replay, now)
        .await
        .unwrap()
        .unwrap();
    let delivered = wait_status(&server, &id, Status::Delivered, Duration::from_secs(10)).await;
    assert_eq!(delivered.state.replays, 1);
    assert_eq!(store.attempts(e.seq).unwrap().len(), 2, "history kept");
    let last = dest.received().into_iter().last().unwrap();
    assert_eq!(last.header("webhook-id"), id);
    assert_eq!(last.header("hookinbox-attempt"), "1");
    // A delivered event cannot be ignored; a dead one can, with its note kept.
    assert_eq!(
        store
            .change(e.seq, Change::Ignore { note: "x".into() }, now)
            .await
            .unwrap(),
        Err(ChangeError::Conflict("was already delivered"))
    );
    let other_seq = store.parse_public_id(&other).unwrap();
    store
        .change(
            other_seq,
            Change::Ignore {
                note: "order was refunded by hand".into(),
            },
            now,
        )
        .await
        .unwrap()
        .unwrap();
    let ignored = event(&server, &other);
    assert_eq!(ignored.state.status, Status::Ignored);
    assert_eq!(
        ignored.state.note.as_ref().unwrap().text,
        "order was refunded by hand"
    );
    assert!(store.dead_letters("shop").unwrap().is_empty());
    assert_eq!(
        store.change(999_999, Change::Replay, now).await.unwrap(),
        Err(ChangeError::NotFound)
    );
    server.stop().await;
}

async fn send_keyed(server: &TestServer, id: &str, key: &str) -> String {
    let body =
        format!("{{\"type\":\"order.updated\",\"id\":\"{id}\",\"data\":{{\"order\":\"{key}\"}}}}")
            .into_bytes();
    let answer = server
        .post("/in/shop", &standard_headers(id, &body), body)
        .await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    answer.id().to_owned()
}

#[tokio::test]
async fn events_of_one_key_go_one_at_a_time_in_received_order_under_retries() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::FailEvery(3)).await;
    let server = TestServer::start(
        &config(
            dir.path(),
            &dest,
            r#"ordering_key = "/data/order"
max_concurrency = 8
initial_interval = "30ms"
max_interval = "60ms"
breaker_failures = 1000
"#,
        ),
        Clock::system(),
    )
    .await;
    // 3 keys × 6 events, interleaved, plus unordered events without the key.
    let mut by_key: Vec<Vec<String>> = vec![Vec::new(); 3];
    for i in 0..6 {
        for (k, line) in by_key.iter_mut().enumerate() {
            line.push(send_keyed(&server, &format!("o{k}_{i}"), &format!("ord_{k}")).await);
        }
        send(&server, &format!("free_{i}")).await;
    }
    let all: Vec<&String> = by_key.iter().flatten().collect();
    for id in &all {
        wait_status(&server, id, Status::Delivered, Duration::from_secs(30)).await;
    }
    let got = dest.received();
    for line in &by_key {
        // Walking the requests in arrival order: a request for the i-th event
        // of a key comes only after every earlier one got its 200.
        let mut delivered = 0;
        for r in &got {
            let Some(pos) = line.iter().position(|id| id == r.header("webhook-id")) else {
                continue;
            };
            assert!(
                pos <= delivered,
                "event {pos} of its key was sent while event {delivered} was not yet delivered"
            );
            if r.answered == 200 {
                assert_eq!(pos, delivered, "delivered twice or out of order");
                delivered += 1;
            }
        }
        assert_eq!(delivered, line.len());
    }
    let failures = got.iter().filter(|r| r.answered == 500).count();
    assert!(
        failures >= 6,
        "the test must exercise retries ({failures} failures)"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_dead_event_blocks_its_key_in_block_mode_until_ignored_and_not_in_skip_mode() {
    for mode in ["block", "skip"] {
        let dir = tempfile::tempdir().unwrap();
        let dest = Destination::start(Mode::RejectBodyWith("\"first\"")).await;
        let server = TestServer::start(
            &config(
                dir.path(),
                &dest,
                &format!("ordering_key = \"/data/order\"\nordering_on_dead_letter = \"{mode}\"\n"),
            ),
            Clock::system(),
        )
        .await;
        let dead = send_keyed(&server, "first", "ord_9").await;
        let later = send_keyed(&server, "second", "ord_9").await;
        let other = send_keyed(&server, "third", "ord_8").await;
        let e = wait_status(&server, &dead, Status::Dead, Duration::from_secs(10)).await;
        wait_status(&server, &other, Status::Delivered, Duration::from_secs(10)).await;
        if mode == "skip" {
            wait_status(&server, &later, Status::Delivered, Duration::from_secs(10)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert_eq!(event(&server, &later).state.status, Status::Pending);
            assert_eq!(
                event(&server, &later).state.attempts,
                0,
                "blocked: never tried"
            );
            let now = hookinbox::clock::Clock::system().now_ms();
            server
                .store()
                .change(
                    e.seq,
                    Change::Ignore {
                        note: "stale order".into(),
                    },
                    now,
                )
                .await
                .unwrap()
                .unwrap();
            wait_status(&server, &later, Status::Delivered, Duration::from_secs(10)).await;
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn max_rate_bounds_deliveries_per_second() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(
        &config(dir.path(), &dest, "max_rate = 10.0\npaused = true\n"),
        Clock::system(),
    )
    .await;
    for i in 0..25 {
        send(&server, &format!("rate_{i}")).await;
    }
    server
        .app
        .as_ref()
        .unwrap()
        .delivery()
        .resume("shop")
        .await
        .unwrap();
    let got = dest.wait_for(25, Duration::from_secs(20)).await;
    let start = got[0].at;
    // A bucket of one second's worth (10), then 10 per second.
    for r in &got {
        let elapsed = (r.at - start).as_secs_f64();
        let allowed = 10.0 + 10.0 * elapsed + 1.0;
        let so_far = got.iter().filter(|x| x.at <= r.at).count() as f64;
        assert!(
            so_far <= allowed,
            "{so_far} deliveries within {elapsed:.2}s at max_rate 10/s"
        );
    }
    let span = got[24].at - start;
    assert!(
        span >= Duration::from_millis(1300),
        "25 at 10/s took only {span:?}"
    );
    server.stop().await;
}

/// An HTTPS destination on loopback, its certificate signed by a test CA.
/// Returns the CA's PEM (for `destination_ca_file`) and the count of 200s.
async fn https_destination() -> (
    std::net::SocketAddr,
    String,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let cert = crate::support::certificate();
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
    let tls = tokio_rustls::rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(cert.leaf.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(cert.key.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let delivered = std::sync::Arc::new(AtomicUsize::new(0));
    let count = delivered.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, count) = (acceptor.clone(), count.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |_req| {
                    count.fetch_add(1, Ordering::SeqCst);
                    async {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new("ok".to_owned()))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, cert.ca, delivered)
}

#[tokio::test]
async fn https_destinations_work_and_an_untrusted_certificate_is_a_connect_failure() {
    let (addr, ca_pem, delivered) = https_destination().await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let url = format!("https://localhost:{}/hook", addr.port());
    let source = |name: &str, extra: &str| {
        format!(
            r#"[[source]]
name = "{name}"
kind = "standard"
secret = "{}"
destination = "{url}"
destination_secret = "{DEST_SECRET}"
initial_interval = "10s"
{extra}
"#,
            crate::support::STANDARD_SECRET
        )
    };
    let text = format!(
        "{}{}{}",
        server_section(dir.path()),
        source(
            "trusted",
            &format!("destination_ca_file = {:?}", ca_file.display().to_string())
        ),
        source("untrusted", "")
    );
    let server = TestServer::start(&text, Clock::system()).await;
    let body = br#"{"type":"t"}"#.to_vec();
    let ok = server
        .post(
            "/in/trusted",
            &standard_headers("tls_1", &body),
            body.clone(),
        )
        .await;
    let bad = server
        .post("/in/untrusted", &standard_headers("tls_2", &body), body)
        .await;
    wait_status(&server, ok.id(), Status::Delivered, Duration::from_secs(10)).await;
    assert_eq!(delivered.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Without the CA the certificate is not trusted: a failed attempt, retried later.
    let seq = server.store().parse_public_id(bad.id()).unwrap();
    let history = eventually(
        "an attempt is recorded",
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || match server.store().attempts(seq).unwrap() {
            h if h.is_empty() => Err("no attempt".to_owned()),
            h => Ok(h),
        },
    )
    .await;
    assert_eq!(history[0].class, AttemptClass::Connect, "{history:?}");
    assert!(
        history[0]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("certificate"),
        "{history:?}"
    );
    assert_eq!(event(&server, bad.id()).state.status, Status::Pending);
    assert_eq!(delivered.load(std::sync::atomic::Ordering::SeqCst), 1);
    server.stop().await;
}

/// The [[keys.client]] token the docs/verify examples claim keys with.
const EXAMPLE_KEYS_TOKEN: &str = "example-keys-token-0123";
const EXAMPLE_ADMIN_TOKEN: &str = "example-admin-token-0123456789";

/// One docs/verify example as a child process listening on `port`, with
/// its keys pointed at `server`'s admin listener and its side effect (one
/// line per "email sent") appended to `outbox`. It exits right after
/// completing the key of the event whose `id` is `ord_crash`, before it
/// answers. Returns once it listens.
fn start_example(
    program: &std::path::Path,
    script: &str,
    port: u16,
    server: &TestServer,
    outbox: &std::path::Path,
) -> std::process::Child {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut app = Command::new(program)
        .arg(root.join(script))
        .env("HOOKINBOX_DESTINATION_SECRET", DEST_SECRET)
        .env("HOOKINBOX_KEYS_URL", server.admin_url(""))
        .env("HOOKINBOX_KEYS_TOKEN", EXAMPLE_KEYS_TOKEN)
        .env("OUTBOX_FILE", outbox)
        .env("EXAMPLE_CRASH_AFTER_COMPLETE", "ord_crash")
        .env("PORT", port.to_string())
        // The Python example's keys helper, from this checkout (Node's is
        // linked into its node_modules by npm ci).
        .env("PYTHONPATH", root.join("clients/python"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
    eventually_sync(
        &format!("{script} listens"),
        Duration::from_secs(15),
        Duration::from_millis(50),
        || match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(_) => Ok(()),
            Err(e) => {
                // An app that exited will never listen: say why now.
                if let Some(status) = app.try_wait().unwrap() {
                    let mut err = String::new();
                    app.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                    panic!(
                        "{script} exited ({status}); its library is installed by the README's test command \
                         (npm ci --prefix docs/verify/node; {}):\n{err}",
                        crate::support::PYTHON_SETUP
                    );
                }
                Err(format!("connect to port {port}: {e}"))
            }
        },
    );
    app
}

/// The outbox's lines: one per side effect done.
fn outbox_lines(outbox: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(outbox)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Waits until `id` has been delivered `times` times (a replay delivers again).
async fn wait_delivered(server: &TestServer, id: &str, times: usize, script: &str) -> Vec<Attempt> {
    let seq = server.store().parse_public_id(id).unwrap();
    eventually(
        &format!("{script}: {id} delivered {times} time(s)"),
        Duration::from_secs(20),
        Duration::from_millis(20),
        async || {
            let history = server.store().attempts(seq).unwrap();
            let delivered = history
                .iter()
                .filter(|a| a.class == AttemptClass::Delivered)
                .count();
            let status = event(server, id).state.status;
            if delivered == times && status == Status::Delivered {
                Ok(history)
            } else {
                Err(format!("{status:?} {history:?}"))
            }
        },
    )
    .await
}

/// The app-side examples in docs/verify run as the destination, each with
/// hookinbox's idempotency keys around its side effect: hookinbox delivers
/// to each, each verifies with the official `standardwebhooks` library
/// (npm, PyPI), claims the `webhook-id`, sends its "email" (a line in a
/// file) and completes the key before answering. Its side effect happens
/// exactly once per event across a replay, a busy key (503 with
/// Retry-After, retried by hookinbox), failed work (the key released, 500,
/// retried) and a crash after complete and before the answer (hookinbox retries; the restarted app finds the key done and
/// answers 2xx without sending again); a forged delivery gets 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verification_examples_do_their_work_once_per_event_across_replays_and_crashes() {
    for (program, script) in [
        (std::path::PathBuf::from("node"), "docs/verify/node/app.js"),
        (crate::support::python3(), "docs/verify/python/app.py"),
    ] {
        let port = crate::support::free_port();
        let dir = tempfile::tempdir().unwrap();
        let outbox = dir.path().join("outbox.txt");
        let text = format!(
            r#"{}[admin]
token = "{EXAMPLE_ADMIN_TOKEN}"

[keys]
lease = "30s"

[[keys.client]]
name = "example"
token = "{EXAMPLE_KEYS_TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{}"
destination = "http://127.0.0.1:{port}/webhooks"
destination_secret = "{DEST_SECRET}"
initial_interval = "200ms"
max_interval = "2s"
breaker_failures = 100
"#,
            server_section(dir.path()),
            crate::support::STANDARD_SECRET,
        );
        let server = TestServer::start(&text, Clock::system()).await;
        let mut app = start_example(&program, script, port, &server, &outbox);

        // 1. Delivered once: the email is sent, the key done with its result.
        let first = send(&server, "ord_example").await;
        wait_delivered(&server, &first, 1, script).await;
        let key = server.api(EXAMPLE_KEYS_TOKEN).key(&first, None).await;
        assert_eq!(
            key.state,
            hookinbox::api::KeyStateName::Done,
            "{script}: {key:?}"
        );
        let result: serde_json::Value =
            serde_json::from_str(key.result.as_deref().expect("a result").get()).unwrap();
        assert_eq!(result, serde_json::json!({"sent": "ord_example"}));

        // 2. A replay through the admin API is a new delivery of the same
        // webhook-id: the claim answers done, the app answers 2xx at once.
        server.api(EXAMPLE_ADMIN_TOKEN).replay(&first, None).await;
        wait_delivered(&server, &first, 2, script).await;

        // 3. Busy: another worker holds the key when the delivery comes.
        // The app answers 503 with the key's Retry-After; hookinbox retries
        // and, once that lease has run out, the app claims and sends.
        server.api(EXAMPLE_ADMIN_TOKEN).pause("shop").await;
        let busy = send(&server, "ord_busy").await;
        let held = server
            .admin(
                "POST",
                &format!("/api/keys/{busy}/claim"),
                Some(EXAMPLE_KEYS_TOKEN),
                Some(serde_json::json!({"lease": "1s"})),
            )
            .await;
        assert_eq!(held.status, 201, "{:?}", held.json);
        server.api(EXAMPLE_ADMIN_TOKEN).resume("shop").await;
        let history = wait_delivered(&server, &busy, 1, script).await;
        assert_eq!(history[0].status, Some(503), "{script}: {history:?}");
        assert_eq!(
            history[0].response_snippet.as_deref(),
            Some("busy"),
            "{script}"
        );

        // 4. The work fails (the outbox cannot be written: a directory
        // stands in its place): the app releases the key and answers 500;
        // hookinbox retries and, the outbox back, the next claim is the
        // app's at once (released, not busy until a lease runs out).
        let aside = dir.path().join("outbox.aside");
        std::fs::rename(&outbox, &aside).unwrap();
        std::fs::create_dir(&outbox).unwrap();
        let failing = send(&server, "ord_fail").await;
        let seq = server.store().parse_public_id(&failing).unwrap();
        eventually(
            &format!("{script}: the failed work is answered 500"),
            Duration::from_secs(10),
            Duration::from_millis(20),
            async || match server.store().attempts(seq).unwrap() {
                h if h.is_empty() => Err("no attempt".to_owned()),
                h => Ok(h),
            },
        )
        .await;
        std::fs::remove_dir(&outbox).unwrap();
        std::fs::rename(&aside, &outbox).unwrap();
        let history = wait_delivered(&server, &failing, 1, script).await;
        let (last, failed) = history.split_last().unwrap();
        assert_eq!(last.class, AttemptClass::Delivered, "{script}: {history:?}");
        assert!(
            failed.iter().all(|a| a.status == Some(500)
                && a.response_snippet
                    .as_deref()
                    .unwrap_or("")
                    .starts_with("failed")),
            "{script}: each failed attempt released the key: {history:?}"
        );

        // 5. The app dies after completing the key, before answering: the
        // email is sent, hookinbox saw no answer and retries. The restarted
        // app's claim answers done: 2xx, no second email.
        let crash = send(&server, "ord_crash").await;
        let status = eventually_sync(
            &format!("{script} exits after completing ord_crash"),
            Duration::from_secs(20),
            Duration::from_millis(20),
            || app.try_wait().unwrap().ok_or_else(|| "running".to_owned()),
        );
        assert_eq!(status.code(), Some(3), "{script}");
        assert!(
            outbox_lines(&outbox)
                .iter()
                .any(|l| l.ends_with(" ord_crash")),
            "{script}: the email went out before the crash"
        );
        let seq = server.store().parse_public_id(&crash).unwrap();
        eventually(
            &format!("{script}: hookinbox records the crashed attempt"),
            Duration::from_secs(10),
            Duration::from_millis(20),
            async || match server.store().attempts(seq).unwrap() {
                h if h.is_empty() => Err("no attempt".to_owned()),
                h => Ok(h),
            },
        )
        .await;
        assert_ne!(event(&server, &crash).state.status, Status::Delivered);
        let mut app = start_example(&program, script, port, &server, &outbox);
        let history = wait_delivered(&server, &crash, 1, script).await;
        assert!(history.len() >= 2, "{script}: {history:?}");
        assert_ne!(
            history[0].class,
            AttemptClass::Delivered,
            "{script}: {history:?}"
        );

        // 6. A forged delivery is refused before any key is claimed.
        let forged = reqwest::Client::new()
            .post(format!("http://127.0.0.1:{port}/webhooks"))
            .header("webhook-id", "msg_forged")
            .header("webhook-timestamp", Clock::system().now_ms() / 1000)
            .header(
                "webhook-signature",
                "v1,bm90IHRoZSBzaWduYXR1cmUgb2YgdGhpcyBib2R5IQ==",
            )
            .body(r#"{"type":"order.paid","id":"ord_forged"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 400, "{script}");
        let none = server
            .admin(
                "GET",
                "/api/keys/msg_forged",
                Some(EXAMPLE_KEYS_TOKEN),
                None,
            )
            .await;
        assert_eq!(none.status, 404, "{script}: {:?}", none.json);

        let _ = app.kill();
        app.wait().unwrap();
        server.stop().await;
        assert_eq!(
            outbox_lines(&outbox),
            [
                format!("{first} order.paid ord_example"),
                format!("{busy} order.paid ord_busy"),
                format!("{failing} order.paid ord_fail"),
                format!("{crash} order.paid ord_crash"),
            ],
            "{script}: each email sent once, the forged one never"
        );
    }
}
