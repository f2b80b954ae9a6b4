//! Replicating nodes as an operator meets them on the first day: two nodes
//! that share a name (a cloned VM image), a primary restarted after a crash
//! within its lease, a primary started while another node holds the lease,
//! a standby asked for what only the primary does, and a standby whose
//! NATS server is gone for half a minute.

use std::path::Path;
use std::time::{Duration, Instant};

use hookinbox::clock::Clock;

use crate::nats::NatsServer;
use crate::support::{
    BinaryServer, REPLICATION_ADMIN, TestServer, eventually, server_section, standard_headers,
    standard_source, write_config,
};

const STREAM: &str = "INBOX";
const ADMIN_TOKEN: &str = "replication-admin-token-0123456789";
const APP_TOKEN: &str = "shop-app-token-0123456789";

/// A node's whole config: data in `dir/data`, `[replication]` with `urls`,
/// an app's keys client, and the source `shop`.
fn node(dir: &Path, data: &str, urls: &str, role: &str, name: &str, lease: &str) -> String {
    format!(
        "{}{REPLICATION_ADMIN}[replication]\nurl = \"{urls}\"\nstream = \"{STREAM}\"\n\
         role = \"{role}\"\nnode = \"{name}\"\nlease = \"{lease}\"\n\n\
         [[keys.client]]\nname = \"shop\"\ntoken = \"{APP_TOKEN}\"\n\n{}",
        server_section(&dir.join(data)),
        standard_source("shop")
    )
}

async fn send(server: &TestServer, id: &str) -> crate::support::Answer {
    let body = format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
    server
        .post("/in/shop", &standard_headers(id, &body), body)
        .await
}

/// Regression (an outside drill): `node` defaults to the host name, and a
/// cloned VM keeps it; the standby's first webhook put the primary into
/// "replaced" and the primary set its data aside. A second process with a
/// live node's name is refused at start, after waiting a lease for the
/// name to lapse, saying what to do; the first one goes on as the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_with_a_live_node_s_name_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let url = nats.url();
    let primary = TestServer::start(
        &node(dir.path(), "a", &url, "primary", "vm-a", "2s"),
        Clock::system(),
    )
    .await;
    assert_eq!(send(&primary, "evt_1").await.status, 200);

    let started = Instant::now();
    let twin = TestServer::try_start(
        &node(dir.path(), "b", &url, "standby", "vm-a", "2s"),
        Clock::system(),
    )
    .await;
    let Err(refused) = twin else {
        panic!("a second process named vm-a started");
    };
    let said = refused.to_string();
    assert!(
        said.contains("\"vm-a\"") && said.contains("give each node its own"),
        "{said}"
    );
    assert!(refused.needs_operator(), "exits 2, not restarted: {said}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "refused before the name could lapse: {:?}",
        started.elapsed()
    );

    // The primary was not disturbed: it still takes webhooks as the holder.
    assert_eq!(send(&primary, "evt_2").await.status, 200);
    let status = primary
        .admin("GET", "/api/replication", Some(ADMIN_TOKEN), None)
        .await;
    assert_eq!(
        (status.json["role"].as_str(), status.json["holder"].as_str()),
        (Some("primary"), Some("vm-a")),
        "{:?}",
        status.json
    );
    assert_eq!(primary.events().len(), 2);
    primary.stop().await;
}

/// A primary killed (SIGKILL) and started again at once, as the packaged
/// unit does: its own name and lease are still in the bucket from the
/// process that died. It waits for them to lapse and goes on as the
/// primary with its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_and_restarted_within_its_lease_takes_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let config = write_config(
        dir.path(),
        &node(dir.path(), "a", &nats.url(), "primary", "vm-a", "3s"),
    );
    let http = crate::support::client();
    let post = async |server: &BinaryServer, id: &str| {
        let body = format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
        crate::support::post(
            &http,
            &server.url("/in/shop"),
            &standard_headers(id, &body),
            body,
        )
        .await
    };
    let mut first = BinaryServer::start(&config, &[], None);
    assert_eq!(post(&first, "evt_1").await.status, 200);
    first.kill9();
    let restarted = Instant::now();
    let second = BinaryServer::start(&config, &[], None);
    let ready = eventually(
        "the restarted primary is ready",
        Duration::from_secs(20),
        Duration::from_millis(200),
        async || {
            let answer = post(&second, "evt_2").await;
            (answer.status == 200)
                .then_some(restarted.elapsed())
                .ok_or(format!("{} {:?}", answer.status, answer.json))
        },
    )
    .await;
    println!("restarted primary took its lease again {ready:?} after the kill (lease 3 s)");
    let again = post(&second, "evt_1").await;
    assert!(again.is_duplicate(), "its data kept: {:?}", again.json);
}

/// Regression (an outside drill): a primary that cannot take the lease
/// exited 1, and the unit restarted it every 2 s for ever. It exits 2 (the
/// unit's RestartPreventExitStatus) and says to make it a standby.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_whose_lease_another_node_holds_exits_2_saying_standby() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let holder = TestServer::start(
        &node(dir.path(), "a", &nats.url(), "primary", "vm-a", "2s"),
        Clock::system(),
    )
    .await;
    let config = write_config(
        dir.path(),
        &node(dir.path(), "b", &nats.url(), "primary", "vm-b", "2s"),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("\"vm-a\" holds the lease") && stderr.contains("role = \"standby\""),
        "{stderr}"
    );
    holder.stop().await;
}

/// A standby asked for what only the primary does: a webhook, or an app's
/// key claim. 503 with Retry-After, `standby`, and the primary's node and
/// admin address, so a client knows where to go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_answers_503_naming_the_primary_for_webhooks_and_keys() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let primary = TestServer::start(
        &node(dir.path(), "a", &nats.url(), "primary", "vm-a", "2s"),
        Clock::system(),
    )
    .await;
    assert_eq!(send(&primary, "evt_1").await.status, 200);
    let standby = TestServer::start(
        &node(dir.path(), "b", &nats.url(), "standby", "vm-b", "2s"),
        Clock::system(),
    )
    .await;
    let primary_admin = primary.app.as_ref().unwrap().admin_addr().to_string();
    let names_primary = |json: &serde_json::Value| {
        json["error"] == "standby"
            && json["primary"]["node"] == "vm-a"
            && json["primary"]["admin"] == primary_admin.as_str()
            && json["reason"].as_str().unwrap().contains("\"vm-a\"")
    };
    let webhook = send(&standby, "evt_2").await;
    assert_eq!(webhook.status, 503, "{:?}", webhook.json);
    assert_eq!(webhook.headers["retry-after"], "5");
    assert!(names_primary(&webhook.json), "{:?}", webhook.json);

    let claim = async |server: &TestServer| {
        server
            .admin(
                "POST",
                "/api/keys/order-1/claim",
                Some(APP_TOKEN),
                Some(serde_json::json!({})),
            )
            .await
    };
    let refused = claim(&standby).await;
    assert_eq!(refused.status, 503, "{:?}", refused.json);
    assert_eq!(refused.headers["retry-after"], "5");
    assert!(names_primary(&refused.json), "{:?}", refused.json);
    // The primary serves the same claim.
    let claimed = claim(&primary).await;
    assert_eq!(claimed.status, 201, "{:?}", claimed.json);
    let counted = standby
        .metrics()
        .encode(hookinbox::metrics::Exposition::Prometheus);
    assert!(
        counted.contains("hookinbox_rejected_total{source=\"shop\",reason=\"standby\"} 1"),
        "{counted}"
    );
    standby.stop().await;
    primary.stop().await;
}

/// A TCP relay on loopback in front of one NATS server, which the test
/// can cut (listener closed, every connection through it dropped) and
/// restore on the same port: a node whose NATS server is gone, while the
/// other nodes reach it directly. A server outside a cluster advertises no
/// other address, so the client has no way around the relay.
struct Relay {
    port: u16,
    upstream: std::net::SocketAddr,
    running: Option<tokio::task::JoinHandle<()>>,
}

impl Relay {
    async fn start(upstream: &str) -> Relay {
        let upstream = upstream
            .trim_start_matches("nats://")
            .parse()
            .expect("a nats://host:port URL");
        let port = crate::support::free_port();
        let mut relay = Relay {
            port,
            upstream,
            running: None,
        };
        relay.restore().await;
        relay
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Listens again, relaying each connection to the server.
    async fn restore(&mut self) {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .unwrap();
        let upstream = self.upstream;
        self.running = Some(tokio::spawn(async move {
            let mut pipes = tokio::task::JoinSet::new();
            // Dropped with this task: every pipe is aborted at a cut.
            while let Ok((mut inbound, _)) = listener.accept().await {
                pipes.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        }));
    }

    /// Closes the listener and drops every connection through it.
    async fn cut(&mut self) {
        if let Some(running) = self.running.take() {
            running.abort();
            let _ = running.await;
        }
    }
}

/// Regression (an outside drill): any error of a standby's following was
/// taken for "replaced", and the standby set its data aside. A standby
/// whose NATS server is gone for 30 s (the primary still reaches it) warns,
/// keeps its data and process, and follows again from where it was when
/// the server returns: every event the primary took meanwhile arrives,
/// nothing is set aside, nothing restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_whose_nats_is_gone_for_30_s_follows_again_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let mut relay = Relay::start(&nats.url()).await;
    let primary = TestServer::start(
        &node(dir.path(), "a", &nats.url(), "primary", "vm-a", "3s"),
        Clock::system(),
    )
    .await;
    for i in 0..5 {
        assert_eq!(send(&primary, &format!("evt_{i}")).await.status, 200);
    }
    let standby_dir = dir.path().join("b");
    let standby_config = write_config(
        dir.path(),
        &node(dir.path(), "b", &relay.url(), "standby", "vm-b", "3s"),
    );
    let mut standby = BinaryServer::start(&standby_config, &[], None);
    let caught_up = async |standby: &BinaryServer, primary: &TestServer, within: u64| {
        let want = primary.store().last_frame().unwrap().0;
        eventually(
            "the standby holds every frame of the primary",
            Duration::from_secs(within),
            Duration::from_millis(200),
            async || {
                let status =
                    crate::support::admin_json(&standby.admin, ADMIN_TOKEN, "/api/replication")
                        .await;
                let got = status["last_frame"].as_u64().unwrap_or(0);
                (got == want)
                    .then_some(())
                    .ok_or(format!("frame {got} of {want}"))
            },
        )
        .await
    };
    caught_up(&standby, &primary, 20).await;

    relay.cut().await;
    // The primary takes webhooks meanwhile.
    let mut taken = 5;
    let cut = crate::support::Window::of(Duration::from_secs(30));
    while !cut.is_over() {
        if send(&primary, &format!("evt_{taken}")).await.status == 200 {
            taken += 1;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            standby.child.try_wait().unwrap().is_none(),
            "the standby exited: {}",
            standby.log_text()
        );
    }
    relay.restore().await;
    let back = Instant::now();
    assert!(taken > 20, "the primary took webhooks meanwhile: {taken}");
    caught_up(&standby, &primary, 60).await;
    println!(
        "standby: caught up {:?} after its NATS server was back, {taken} events taken meanwhile",
        back.elapsed()
    );
    assert!(
        standby.child.try_wait().unwrap().is_none(),
        "the standby exited: {}",
        standby.log_text()
    );
    let aside: Vec<_> = std::fs::read_dir(&standby_dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("set-aside"))
        .collect();
    assert!(aside.is_empty(), "data set aside: {aside:?}");
    let log = standby.log_text();
    assert!(
        !log.contains("starting over") && !log.contains("set aside"),
        "started over: {log}"
    );
    assert!(
        !log.contains("hookinbox is receiving webhooks"),
        "a standby takes no webhooks: {log}"
    );
    let _ = standby.terminate();
    primary.stop().await;
}

/// The value of `series` (a whole line's name and labels) in `server`'s
/// metrics, if present.
fn metric(server: &TestServer, series: &str) -> Option<f64> {
    let text = server
        .metrics()
        .encode(hookinbox::metrics::Exposition::Prometheus);
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// What an operator's Prometheus reads of replication: each node's role,
/// the lease's holder and its last renewal, a standby's lag once it has
/// caught up, the snapshot interval, and a frame the stream did not take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_metrics_say_role_holder_lag_and_publish_failures() {
    let dir = tempfile::tempdir().unwrap();
    let mut nats = NatsServer::start(&dir.path().join("nats"));
    let url = nats.url();
    let primary = TestServer::start(
        &node(dir.path(), "a", &url, "primary", "vm-a", "2s"),
        Clock::system(),
    )
    .await;
    for i in 0..3 {
        assert_eq!(send(&primary, &format!("evt_{i}")).await.status, 200);
    }
    let standby = TestServer::start(
        &node(dir.path(), "b", &url, "standby", "vm-b", "2s"),
        Clock::system(),
    )
    .await;
    let want = primary.store().last_frame().unwrap().0;
    // Set at the standby's lease ticks (every half second with a 2 s lease).
    eventually(
        "the standby's metrics say it caught up",
        Duration::from_secs(20),
        Duration::from_millis(100),
        async || {
            let holder = metric(
                &standby,
                "hookinbox_replication_lease_holder{node=\"vm-a\"}",
            );
            let caught_up = standby.store().last_frame().unwrap().0 == want;
            (holder == Some(1.0) && caught_up)
                .then_some(())
                .ok_or(format!("holder {holder:?}, caught up {caught_up}"))
        },
    )
    .await;
    // Read again at the next tick, after the last frame was applied.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(metric(&standby, "hookinbox_replication_role"), Some(1.0));
    assert_eq!(
        metric(&standby, "hookinbox_replication_frames_behind"),
        Some(0.0)
    );
    assert_eq!(
        metric(&standby, "hookinbox_replication_standby_lag_seconds"),
        Some(0.0)
    );
    assert_eq!(metric(&primary, "hookinbox_replication_role"), Some(2.0));
    assert_eq!(
        metric(
            &primary,
            "hookinbox_replication_lease_holder{node=\"vm-a\"}"
        ),
        Some(1.0)
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let renewed = metric(
        &primary,
        "hookinbox_replication_lease_renewed_timestamp_seconds",
    )
    .unwrap();
    assert!((now - renewed).abs() < 5.0, "renewed {renewed}, now {now}");
    assert_eq!(
        metric(&primary, "hookinbox_replication_snapshot_interval_seconds"),
        Some(3600.0)
    );
    let snapshot = metric(
        &primary,
        "hookinbox_replication_snapshot_last_success_timestamp_seconds",
    )
    .unwrap();
    assert!(now - snapshot < 60.0, "current as of its start: {snapshot}");
    assert_eq!(
        metric(&primary, "hookinbox_replication_publish_failures_total"),
        Some(0.0)
    );
    // The bytes shipped: as the log holds them, and as sent (compressed,
    // never larger); a standby ships none.
    let frame = metric(&primary, "hookinbox_replication_frame_bytes_total").unwrap();
    let sent = metric(&primary, "hookinbox_replication_sent_bytes_total").unwrap();
    assert!(sent > 0.0 && sent <= frame, "sent {sent} of {frame}");
    assert_eq!(
        metric(&standby, "hookinbox_replication_sent_bytes_total"),
        Some(0.0)
    );

    // The stream gone: the next event is not taken, answered 503, counted.
    nats.stop();
    assert_eq!(send(&primary, "evt_x").await.status, 503);
    let failed = metric(&primary, "hookinbox_replication_publish_failures_total").unwrap();
    assert!(failed >= 1.0, "{failed}");
    nats.restart();
    standby.stop().await;
    primary.stop().await;
}
