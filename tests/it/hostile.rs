//! Hostile clients: what an unauthenticated sender can make hookinbox hold
//! in memory, and clients that half-close their side of the connection.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{
    BinaryServer, TestServer, client, eventually, machine_to_myself, post, rss_bytes,
    server_section, standard_headers, standard_source, write_config,
};

/// Budget and connection cap of the memory test, small so the bound is tight.
const BUDGET: u64 = 16 << 20;
const CONNECTIONS: u64 = 64;
/// Per open connection: hyper's read buffer (`listener::MAX_READ_BUFFER`,
/// 64 KiB) plus the task, the service and the socket's user-space state.
const PER_CONNECTION: u64 = 80 << 10;
/// Allocator slack and runtime growth that no limit governs.
const SLACK: u64 = 16 << 20;

/// Regression (issue 8, defect 4): 300 connections each declaring 1 MiB and
/// sending 1,048,575 bytes, then stalling, grew RSS by ≈ 260 MB. Now what
/// they can make hookinbox hold is `max_connections × per connection + 2 ×
/// 1.25 × max_buffered_body` (docs/reliability.md's formula: the budget and the
/// small bodies' reserve), measured here; a real provider's small event is
/// stored during the attack (the reserve), and after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_uploads_hold_at_most_the_body_budget_in_memory() {
    let _alone = machine_to_myself().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "{}max_connections = {CONNECTIONS}\nmax_buffered_body = {BUDGET}\n\n{}",
            server_section(&dir.path().join("data"))
                .replace("body_read_timeout = \"1s\"", "body_read_timeout = \"30s\""),
            standard_source("demo")
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    let http = client();
    // Warm up: the allocator, the runtime's threads, the store's first pages.
    for i in 0..50 {
        let body = format!("{{\"type\":\"warm\",\"n\":{i}}}").into_bytes();
        let a = post(
            &http,
            &server.url("/in/demo"),
            &standard_headers(&format!("warm_{i}"), &body),
            body,
        )
        .await;
        assert_eq!(a.status, 200);
    }
    let pid = server.child.id();
    let before = rss_bytes(pid);

    let addr = server.base.trim_start_matches("http://").to_owned();
    let mut attackers = tokio::task::JoinSet::new();
    for _ in 0..300 {
        attackers.spawn(stalled_upload(addr.clone()));
    }

    // A provider's request while the attack runs gets an answer, not a hang.
    // On a new connection: with every slot busy, the warm-up's idle
    // keep-alive connections are closed to admit the attackers, and a
    // request sent on one at that instant races the close (as with any
    // server's idle timeout; the attack tests below show that a connection
    // waiting for a first head is always closed before one answered before).
    // A 503 (the budget or the slots taken at that instant) is an answer
    // too, and a provider retries it: so does this one, a few times.
    let http = new_connection_each_time(Duration::from_secs(30));
    let body = br#"{"type":"real"}"#.to_vec();
    let started = Instant::now();
    let mut answers = Vec::new();
    for _ in 0..5 {
        let a = post(
            &http,
            &server.url("/in/demo"),
            &standard_headers("real_during", &body),
            body.clone(),
        )
        .await;
        answers.push(a.status);
        if a.status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(answers.last(), Some(&200), "answers: {answers:?}");
    assert!(started.elapsed() < Duration::from_secs(15));

    let mut peak = before;
    let sampling = crate::support::Window::of(Duration::from_secs(6));
    while !sampling.is_over() {
        peak = peak.max(rss_bytes(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let growth = peak.saturating_sub(before);
    let bound = CONNECTIONS * PER_CONNECTION + 2 * (BUDGET + BUDGET / 4) + SLACK;
    println!(
        "RSS before {:.1} MiB, peak under 300 stalled 1 MiB uploads {:.1} MiB: +{:.1} MiB (bound +{:.1} MiB)",
        before as f64 / 1048576.0,
        peak as f64 / 1048576.0,
        growth as f64 / 1048576.0,
        bound as f64 / 1048576.0
    );
    assert!(
        growth <= bound,
        "RSS grew {growth} bytes under stalled uploads; the bound is {bound}"
    );
    assert!(
        server.log_text().contains("connection limit reached"),
        "{}",
        server.log_text()
    );

    attackers.abort_all();
    while attackers.join_next().await.is_some() {}
    // The stalled connections are gone: ingest is back (within the time the
    // server takes to notice the closed sockets).
    let body = br#"{"type":"real"}"#.to_vec();
    // Each answer until then is 503 (busy), nothing else.
    eventually(
        "ingest answers 200 again",
        Duration::from_secs(15),
        Duration::from_millis(200),
        async || {
            let a = post(
                &http,
                &server.url("/in/demo"),
                &standard_headers("real_after", &body),
                body.clone(),
            )
            .await;
            if a.status == 200 {
                return Ok(());
            }
            assert_eq!(a.status, 503, "{:?}", a.json);
            Err(format!("still busy: {:?}", a.json))
        },
    )
    .await;
}

/// Regression (issue 8, defect 8): a signed request followed by
/// `shutdown(SHUT_WR)` was stored but never answered. Now it is answered.
#[tokio::test]
async fn a_request_followed_by_a_half_close_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(
        &format!(
            "{}{}",
            server_section(&dir.path().join("data")),
            standard_source("demo")
        ),
        hookinbox::clock::Clock::system(),
    )
    .await;
    let body = br#"{"type":"half.close"}"#;
    let mut head = String::from("POST /in/demo HTTP/1.1\r\nhost: x\r\n");
    for (k, v) in standard_headers("half_close", body) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut tcp = tokio::net::TcpStream::connect(server.base.trim_start_matches("http://"))
        .await
        .unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body).await.unwrap();
    tcp.shutdown().await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer))
        .await
        .expect("an answer within 10 s")
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"received\":true"), "{text}");
    assert_eq!(server.events().len(), 1);
    server.stop().await;
}

/// A client that opens a connection for each request.
fn new_connection_each_time(timeout: Duration) -> reqwest::Client {
    // The shared client installs rustls's crypto provider for the process.
    let _ = client();
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(timeout)
        .build()
        .unwrap()
}

/// A provider sending at 20 requests/s, each on a new connection (the worst
/// case: every request needs a slot) with a 10 s timeout, for `seconds`.
/// Prints what it saw and panics unless every request was answered 200
/// within [`LOCKED_OUT`].
async fn provider_at_20_per_second(server: &BinaryServer, seconds: u64, during: &str) {
    let http = new_connection_each_time(Duration::from_secs(10));
    let mut sent = tokio::task::JoinSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    for i in 0..seconds * 20 {
        tick.tick().await;
        let (http, url) = (http.clone(), server.url("/in/demo"));
        sent.spawn(async move {
            let body = format!("{{\"type\":\"real\",\"n\":{i}}}").into_bytes();
            let mut request = http.post(&url).body(body.clone());
            for (k, v) in standard_headers(&format!("real_{i}"), &body) {
                request = request.header(k, v);
            }
            let started = Instant::now();
            let status = match request.send().await {
                Ok(answer) => answer.status().as_u16().to_string(),
                Err(e) if e.is_timeout() => "timeout".to_owned(),
                Err(e) => format!("error {e}"),
            };
            (status, started.elapsed())
        });
    }
    let mut latencies = Vec::new();
    let mut failures = std::collections::BTreeMap::<String, usize>::new();
    while let Some(answer) = sent.join_next().await {
        let (status, latency) = answer.unwrap();
        latencies.push(latency);
        if status != "200" {
            *failures.entry(status).or_default() += 1;
        }
    }
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{during}: {} requests at 20/s, not 200: {failures:?}; latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        latencies.len(),
        ms(latencies[latencies.len() / 2]),
        ms(latencies[latencies.len() * 99 / 100]),
        ms(*latencies.last().unwrap())
    );
    assert!(
        failures.is_empty(),
        "{during}: not answered 200: {failures:?}"
    );
    assert!(
        *latencies.last().unwrap() < LOCKED_OUT,
        "{during}: a provider's request waited {:?}",
        latencies.last().unwrap()
    );
}

/// The real binary with the default header timeout (10 s) and cap (1024):
/// the attacks below are measured against what ships. Its data dir, the
/// server, and the address to attack.
fn start_at_shipped_limits() -> (tempfile::TempDir, BinaryServer, String) {
    raise_open_files_limit();
    let dir = tempfile::tempdir().unwrap();
    let section = server_section(&dir.path().join("data"))
        .replace(
            "header_read_timeout = \"1s\"",
            "header_read_timeout = \"10s\"",
        )
        .replace("body_read_timeout = \"1s\"", "body_read_timeout = \"30s\"");
    let config = write_config(
        dir.path(),
        &format!(
            "{section}max_connections = 1024\n\n{}",
            standard_source("demo")
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    let addr = server.base.trim_start_matches("http://").to_owned();
    (dir, server, addr)
}

/// Room for thousands of sockets in this process and the server it starts.
fn raise_open_files_limit() {
    // SAFETY: getrlimit/setrlimit on this process with a valid struct.
    unsafe {
        let mut limit = std::mem::zeroed::<libc::rlimit>();
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
        assert!(
            limit.rlim_cur >= 16_384,
            "this test needs 16384 open files (ulimit -Hn is {})",
            limit.rlim_max
        );
    }
}

/// Latency past which a provider's request counts as locked out. The issue's
/// goal is < 1 s (the note gives the measured figures); the assertion leaves
/// room for a loaded CI machine, and is still far below the 10 s a request
/// waited for a slot before connections were evicted.
const LOCKED_OUT: Duration = Duration::from_secs(5);

/// Regression (issue 26, defect 1): 1,153 connections sending their request
/// heads at 1 byte/s held every slot, and a provider's request waited up to
/// 11.3 s. Now a new connection past the cap closes the one that has waited
/// longest for its head: 1,500 slow heads (reopened a second after each is
/// closed, as a slowloris tool does) and a provider at 20 requests/s is
/// answered at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_request_heads_past_the_cap_do_not_lock_a_provider_out() {
    let _alone = machine_to_myself().await;
    let (_dir, server, addr) = start_at_shipped_limits();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut attackers = tokio::task::JoinSet::new();
    for _ in 0..1_500 {
        let (addr, stop) = (addr.clone(), stop.clone());
        attackers.spawn(async move {
            while !stop.is_cancelled() {
                if let Ok(mut tcp) = tokio::net::TcpStream::connect(&addr).await {
                    let mut head = b"POST /in/demo HTTP/1.1\r\nhost: x\r\nx-pad: "
                        .iter()
                        .chain(std::iter::repeat(&b'a'));
                    // One byte a second until the server closes the socket.
                    while !stop.is_cancelled()
                        && tcp.write_all(&[*head.next().unwrap()]).await.is_ok()
                    {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
    // Every slot is taken by a slow head before the provider sends.
    tokio::time::sleep(Duration::from_secs(3)).await;
    provider_at_20_per_second(&server, 5, "during 1,500 slow request heads").await;
    stop.cancel();
    assert!(server.log_text().contains("connection limit reached"));
    attackers.abort_all();
    while attackers.join_next().await.is_some() {}
}

/// Regression (issue 26, defect 1): 5,000 idle connections: only 3,500
/// could open and providers' requests timed out at 10 s. Now idle
/// connections past the cap are closed, oldest first, for new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_connections_past_the_cap_do_not_lock_a_provider_out() {
    let _alone = machine_to_myself().await;
    let (_dir, server, addr) = start_at_shipped_limits();
    let mut connecting = tokio::task::JoinSet::new();
    for _ in 0..5_000 {
        let addr = addr.clone();
        connecting.spawn(async move {
            tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr)).await
        });
    }
    let mut idle = Vec::new();
    while let Some(connected) = connecting.join_next().await {
        if let Ok(Ok(tcp)) = connected.unwrap() {
            idle.push(tcp);
        }
    }
    println!("{} of 5,000 idle connections opened", idle.len());
    provider_at_20_per_second(&server, 5, "during 5,000 idle connections").await;
    assert_eq!(idle.len(), 5_000, "idle connections were refused");
    // Past the cap, idle ones were closed rather than left open.
    let mut closed = 0;
    for tcp in &mut idle {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(1), tcp.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    println!("{closed} of them closed by the server");
    assert!(
        closed >= 5_000 - 1024,
        "only {closed} idle connections were closed"
    );
}

/// Regression (issue 26, defect 2): 300 connections each declaring 1 MiB,
/// sending 1,048,575 bytes and stalling exhausted the body budget, and a
/// provider's 1 KB events got 503 (for GitHub, which does not retry, a lost
/// event). Now bodies of at most 64 KiB have a reserve large ones cannot
/// take: with the shipped limits every event sent during the attack is
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_large_uploads_leave_room_for_ordinary_webhooks() {
    let _alone = machine_to_myself().await;
    let (_dir, server, addr) = start_at_shipped_limits();
    let mut attackers = tokio::task::JoinSet::new();
    for _ in 0..300 {
        let addr = addr.clone();
        attackers.spawn(stalled_upload(addr));
    }
    // Give the uploads time to take the budget.
    tokio::time::sleep(Duration::from_secs(3)).await;
    provider_at_20_per_second(&server, 3, "during 300 stalled 1 MiB uploads").await;
    attackers.abort_all();
    while attackers.join_next().await.is_some() {}
}

/// Declares 1 MiB, sends all but its last byte, and stalls.
async fn stalled_upload(addr: String) {
    let Ok(mut tcp) = tokio::net::TcpStream::connect(&addr).await else {
        return;
    };
    let head = "POST /in/demo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1048576\r\n\r\n";
    if tcp.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let chunk = vec![b'a'; 64 << 10];
    let mut sent = 0usize;
    while sent < 1_048_575 {
        let n = chunk.len().min(1_048_575 - sent);
        if tcp.write_all(&chunk[..n]).await.is_err() {
            return;
        }
        sent += n;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
}
