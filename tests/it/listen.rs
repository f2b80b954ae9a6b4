//! `hookinbox listen` as a developer runs it: the real binary against a
//! real server (a child process, restarted where the test says), posting
//! to a real local app. Events are forwarded once each, in order, signed;
//! a killed listener resumes with exactly what arrived meanwhile; a server
//! restart loses nothing; an app answering 500 is shown and the stream goes
//! on; nothing changes on the server.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hookinbox::standard_webhooks::StandardKey;

use crate::destination::{Destination, Mode, Received};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, free_port, lines_of, post, standard_headers,
    standard_source, write_config,
};

const TOKEN: &str = "listen-test-token-0123456789";

/// A server config on fixed loopback ports, so a restarted server is found
/// where the listener left it.
fn config(dir: &Path, extra: &str) -> PathBuf {
    write_config(
        dir,
        &format!(
            "[server]\nlisten = \"127.0.0.1:{}\"\nadmin_listen = \"127.0.0.1:{}\"\ndata_dir = {:?}\n\
             shutdown_timeout = \"5s\"\n\n[admin]\ntoken = \"{TOKEN}\"\n\n{}{extra}",
            free_port(),
            free_port(),
            dir.join("data").display().to_string(),
            standard_source("shop"),
        ),
    )
}

/// `hookinbox listen` running, its stdout (`--json`) as lines.
struct Listener {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Listener {
    fn start(server: &BinaryServer, state: &Path, app: &str, args: &[&str]) -> Listener {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args([
                "listen",
                "--json",
                "--admin",
                &server.admin,
                "--forward-to",
                app,
            ])
            .args(args)
            .env("HOOKINBOX_ADMIN_TOKEN", TOKEN)
            .env("XDG_STATE_HOME", state)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap());
        // It says "Ready" once the stream is open.
        let (ready_tx, ready) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut said = Vec::new();
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if line.starts_with("Ready") {
                    let _ = ready_tx.send(Ok(()));
                }
                said.push(line);
            }
            let _ = ready_tx.send(Err(said.join("\n")));
        });
        match ready.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => {}
            Ok(Err(said)) => panic!("listen exited without being ready:\n{said}"),
            Err(_) => panic!("listen not ready within 10 s"),
        }
        Listener { child, lines }
    }

    /// The next `n` lines it prints, as JSON.
    fn printed(&self, n: usize) -> Vec<serde_json::Value> {
        let lines = crate::support::next_lines(&self.lines, n, Duration::from_secs(20));
        assert_eq!(
            lines.len(),
            n,
            "listen printed {} of {n} lines",
            lines.len()
        );
        lines
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends event `id` to source `source`; returns hookinbox's id.
async fn send(server: &BinaryServer, source: &str, id: &str) -> String {
    let body = format!("{{\"id\":\"{id}\"}}").into_bytes();
    let a = post(
        &client(),
        &server.url(&format!("/in/{source}")),
        &standard_headers(id, &body),
        body,
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    a.id().to_owned()
}

/// The development key `listen` generated in `state`.
fn development_key(state: &Path) -> StandardKey {
    let text =
        std::fs::read_to_string(state.join("hookinbox/listen/secrets/signing-key.secret")).unwrap();
    StandardKey::parse(text.trim()).unwrap()
}

/// `received` carries the contract's headers for event `id`, signed with `key`.
fn assert_signed(received: &Received, id: &str, key: &StandardKey) {
    assert_eq!(received.header("webhook-id"), id);
    let timestamp: i64 = received.header("webhook-timestamp").parse().unwrap();
    assert_eq!(
        received.header("webhook-signature"),
        key.sign(id, timestamp, &received.body),
        "signed with the key"
    );
    assert_eq!(received.header("hookinbox-source"), "shop");
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_forwards_each_event_once_signed_and_a_restarted_listener_gets_exactly_what_arrived_meanwhile()
 {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let server = BinaryServer::start(&config(dir.path(), ""), &[], None);
    let app = Destination::start(Mode::Ok).await;
    let listen = Listener::start(&server, &state, &app.url(), &[]);
    let key = development_key(&state);

    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(send(&server, "shop", &format!("evt_first_{n}")).await);
    }
    let printed = listen.printed(5);
    let received = app.wait_for(5, Duration::from_secs(10)).await;
    for ((id, line), got) in ids.iter().zip(&printed).zip(&received) {
        assert_signed(got, id, &key);
        assert_eq!(line["id"], id.as_str());
        assert_eq!(line["status"], 200);
        assert_eq!(line["source"], "shop");
    }
    assert_eq!(&received[0].body[..], br#"{"id":"evt_first_0"}"#);

    // Killed; 20 arrive meanwhile; started again: exactly those 20, in order.
    listen.kill9();
    let mut meanwhile = Vec::new();
    for n in 0..20 {
        meanwhile.push(send(&server, "shop", &format!("evt_meanwhile_{n}")).await);
    }
    let listen = Listener::start(&server, &state, &app.url(), &[]);
    let printed = listen.printed(20);
    app.wait_for(25, Duration::from_secs(10)).await;
    settle().await;
    let received: Vec<String> = app.received()[5..]
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(
        received, meanwhile,
        "exactly what arrived meanwhile, in order, once"
    );
    let printed: Vec<&str> = printed.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(printed, meanwhile);

    // `--from-now` skips what is stored; `--since` sends it again.
    listen.kill9();
    send(&server, "shop", "evt_skipped").await;
    let listen = Listener::start(&server, &state, &app.url(), &["--from-now"]);
    let next = send(&server, "shop", "evt_after_from_now").await;
    assert_eq!(listen.printed(1)[0]["id"], next.as_str());
    listen.kill9();
    let again = Listener::start(&server, &state, &app.url(), &["--since", "1h"]);
    let all = again.printed(27);
    assert_eq!(
        all[0]["id"],
        ids[0].as_str(),
        "history from the first event"
    );
    assert_eq!(all[26]["id"], next.as_str());

    // Nothing changed on the server: the events are held, never attempted.
    let detail =
        crate::support::admin_json(&server.admin, TOKEN, &format!("/api/events/{}", ids[0])).await;
    assert_eq!(detail["status"], "held");
    assert_eq!(detail["attempt_history"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_rides_out_a_server_restart_and_an_app_answering_500() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), "");
    let mut server = BinaryServer::start(&config, &[], None);
    let app = Destination::start(Mode::Status(500, "broken")).await;
    let listen = Listener::start(&server, &state, &app.url(), &[]);

    // A 500 is shown, and the next event is forwarded all the same.
    let failed = send(&server, "shop", "evt_500").await;
    let line = &listen.printed(1)[0];
    assert_eq!(
        (line["id"].as_str(), line["status"].as_u64()),
        (Some(failed.as_str()), Some(500))
    );
    app.set(Mode::Ok);
    let fine = send(&server, "shop", "evt_ok").await;
    assert_eq!(listen.printed(1)[0]["status"], 200);

    // The server restarts; events stored right after it is back (before
    // the listener reconnects) arrive, then new ones, each once.
    assert!(server.terminate().success(), "{}", server.log_text());
    let server = BinaryServer::start(&config, &[], None);
    let mut after_restart = Vec::new();
    for n in 0..10 {
        after_restart.push(send(&server, "shop", &format!("evt_restart_{n}")).await);
    }
    let printed = listen.printed(10);
    let printed: Vec<&str> = printed.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(printed, after_restart);
    settle().await;
    let got: Vec<String> = app
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    let want: Vec<String> = [failed, fine].into_iter().chain(after_restart).collect();
    assert_eq!(got, want, "each once, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_replays_one_event_and_signs_as_a_destination_or_with_the_provider_s_headers() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // A destination that refuses connections: the server keeps retrying
    // it, and its key (generated in the data dir) is the one to sign with.
    let down = Destination::reserve();
    let config = config(
        dir.path(),
        &format!(
            "[[source]]\nname = \"pay\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\ndestination = \"{}\"\n\n",
            down.url()
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    let app = Destination::start(Mode::Ok).await;

    // --replay: one stored event, then exit 0.
    let id = send(&server, "shop", "evt_replayed").await;
    let out = Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args([
            "listen",
            "--admin",
            &server.admin,
            "--forward-to",
            &app.url(),
            "--replay",
            &id,
        ])
        .env("HOOKINBOX_ADMIN_TOKEN", TOKEN)
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.contains(&id) && line.contains("-> 200"), "{line}");
    assert_signed(&app.received()[0], &id, &development_key(&state));

    // --destination: only its events, signed with its key.
    let listen = Listener::start(
        &server,
        &state,
        &app.url(),
        &["--destination", "pay", "--config", config.to_str().unwrap()],
    );
    send(&server, "shop", "evt_not_routed_to_pay").await;
    let paid = send(&server, "pay", "evt_paid").await;
    assert_eq!(listen.printed(1)[0]["id"], paid.as_str());
    let key_file = dir.path().join("data/secrets/pay.destination.secret");
    let key_text = std::fs::read_to_string(&key_file)
        .unwrap_or_else(|e| panic!("{}: {e}", key_file.display()));
    let received = app.wait_for(2, Duration::from_secs(10)).await;
    assert_signed_as(
        &received[1],
        &paid,
        "pay",
        &StandardKey::parse(key_text.trim()).unwrap(),
    );
    listen.kill9();

    // --original-headers: the provider's own signature, which verifies
    // with the source's secret, and no contract header.
    let listen = Listener::start(
        &server,
        &state,
        &app.url(),
        &["--original-headers", "--source", "shop"],
    );
    send(&server, "shop", "evt_original").await;
    listen.printed(1);
    let received = app.wait_for(3, Duration::from_secs(10)).await;
    let got = &received[2];
    assert_eq!(
        got.header("webhook-id"),
        "evt_original",
        "the provider's id"
    );
    assert!(got.headers.get("hookinbox-source").is_none());
    let timestamp: i64 = got.header("webhook-timestamp").parse().unwrap();
    assert_eq!(
        got.header("webhook-signature"),
        StandardKey::parse(STANDARD_SECRET)
            .unwrap()
            .sign("evt_original", timestamp, &got.body)
    );
}

fn assert_signed_as(received: &Received, id: &str, source: &str, key: &StandardKey) {
    assert_eq!(received.header("webhook-id"), id);
    assert_eq!(received.header("hookinbox-source"), source);
    let timestamp: i64 = received.header("webhook-timestamp").parse().unwrap();
    assert_eq!(
        received.header("webhook-signature"),
        key.sign(id, timestamp, &received.body)
    );
}

/// `--forward-to 127.0.0.1:PORT/hook` (no scheme, as `stripe listen` takes
/// it) failed on every event and moved past it: no scheme means http://.
/// A scheme that is not HTTP is refused at start, not at each event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_forwards_to_an_address_without_a_scheme_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let server = BinaryServer::start(&config(dir.path(), ""), &[], None);
    let app = Destination::start(Mode::Ok).await;
    let bare = app.url().strip_prefix("http://").unwrap().to_owned();
    let listen = Listener::start(&server, &state, &bare, &[]);
    let id = send(&server, "shop", "evt_no_scheme").await;
    let line = &listen.printed(1)[0];
    assert_eq!(
        (line["id"].as_str(), line["status"].as_u64()),
        (Some(id.as_str()), Some(200)),
        "{line}"
    );
    let received = app.wait_for(1, Duration::from_secs(10)).await;
    assert_signed(&received[0], &id, &development_key(&state));

    // Under `timeout`: a listener that starts anyway follows until killed.
    let out = Command::new("timeout")
        .args(["10", env!("CARGO_BIN_EXE_hookinbox")])
        .args(["listen", "--admin", &server.admin, "--forward-to"])
        .arg(format!("ftp://{bare}"))
        .env("HOOKINBOX_ADMIN_TOKEN", TOKEN)
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--forward-to") && err.contains("ftp"), "{err}");
}
