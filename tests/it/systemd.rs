//! The systemd contract on the real binary: `READY=1` after the listeners
//! are bound, `WATCHDOG=1` while alive, `STOPPING=1` on SIGTERM — read from
//! a real `NOTIFY_SOCKET` datagram socket, as systemd would.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use crate::support::{BinaryServer, client, server_section, standard_source, write_config};

/// Every datagram that arrives within `limit`, until `done` says enough.
fn collect(
    socket: &UnixDatagram,
    limit: Duration,
    done: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let window = crate::support::Window::of(limit);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !done(&got) && !window.is_over() {
        socket
            .set_read_timeout(Some(window.left().max(Duration::from_millis(1))))
            .unwrap();
        if let Ok(n) = socket.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
    got
}

fn count(messages: &[String], line: &str) -> usize {
    messages
        .iter()
        .filter(|m| m.lines().any(|l| l == line))
        .count()
}

#[tokio::test]
async fn serve_tells_systemd_ready_feeds_the_watchdog_and_says_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "{}{}",
            server_section(&dir.path().join("data")),
            standard_source("demo")
        ),
    );
    let notify = socket_path.display().to_string();
    let mut server = BinaryServer::start(
        &config,
        &[("NOTIFY_SOCKET", &notify), ("WATCHDOG_USEC", "400000")],
        None,
    );
    let got = collect(&socket, Duration::from_secs(10), |m| {
        count(m, "READY=1") > 0
    });
    assert_eq!(count(&got, "READY=1"), 1, "{got:?}");
    // Ready means serving: both listeners answer.
    let http = client();
    let health = http
        .get(format!("{}/healthz", server.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // Fed every half interval (200 ms) while alive.
    let got = collect(&socket, Duration::from_secs(5), |m| {
        count(m, "WATCHDOG=1") >= 3
    });
    assert!(
        count(&got, "WATCHDOG=1") >= 3,
        "{got:?}\n{}",
        server.log_text()
    );

    // SIGTERM: STOPPING=1, then a clean exit.
    server.signal(libc::SIGTERM);
    let got = collect(&socket, Duration::from_secs(10), |m| {
        count(m, "STOPPING=1") > 0
    });
    assert_eq!(count(&got, "STOPPING=1"), 1, "{got:?}");
    assert_eq!(server.terminate().code(), Some(0), "{}", server.log_text());
    assert!(
        !server.log_text().contains("not alive"),
        "a graceful stop is not a liveness failure: {}",
        server.log_text()
    );
}
