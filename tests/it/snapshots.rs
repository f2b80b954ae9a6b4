//! What operators read is pinned here: `--help`, the effective default
//! config, and the error JSON of ingest. A change to any of them shows up in
//! review as a change to this file.

use hookinbox::clock::Clock;
use hookinbox::config::Kind;
use hookinbox::verify::sign::{Signing, sign};

use crate::support::{TestServer, server_section, standard_headers, standard_source};

fn hookinbox(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args(args)
        .current_dir(dir.path())
        .env_remove("HOOKINBOX_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn help() {
    assert_eq!(
        hookinbox(&["--help"]),
        "\
A single-binary webhook inbox: verify, dedupe, durably store, deliver.

Usage: hookinbox <COMMAND>

Commands:
  serve         Receive webhooks and deliver them to their destinations (with no --config: the embedded default config)
  config        Validate or print configuration
  send          Sign and send a webhook exactly as a provider would, printing each answer
  listen        Forward each new event of a running inbox to an app on this machine
  stats         Counts per source and event type, latencies, DLQ size (from a running server)
  events        Search, show, replay and ignore events
  dlq           The dead-letter queue: list, replay, ignore
  destinations  Destinations: list, pause, resume
  keys          Idempotency keys: show, list, delete
  sweep         Sweep expired data now
  reload        Make the server read its config and secrets again, as `systemctl reload` does
  secrets       List each source secret: its name, where it is kept, age, expiry and last match
  reconcile     Ask a source's provider API for the events that never arrived, now
  whoami        Whose token the commands use (the admin token or an [[admin.user]]), its role and expiry
  audit         The audit trail, newest first: who changed what, when and why (refusals too)
  backup        Save a consistent copy of the running server's database to a file
  replication   A replicating node's role, who holds the lease (the primary), and how far its log is
  promote       Make a standby the primary now
  completions   Print a shell's completions (the Debian package installs them)
  man           Print the man page, or write one page per command into a directory
  help          Print this message or the help of the given subcommand(s)

Options:
  -h, --help     Print help
  -V, --version  Print version
"
    );
    assert_eq!(
        hookinbox(&["serve", "--help"]),
        "\
Receive webhooks and deliver them to their destinations (with no --config: the embedded default config)

Usage: hookinbox serve [OPTIONS]

Options:
  -c, --config <CONFIG>  The config file (TOML). Without it, the embedded default is used [env: HOOKINBOX_CONFIG=]
  -h, --help             Print help
"
    );
}

#[test]
fn effective_default_config() {
    assert_eq!(
        hookinbox(&["config", "check"]),
        r#"# effective configuration from <embedded default config>
# the admin token: generated on first start into ./hookinbox-data/secrets/admin.token.secret
# the secret of source "demo": generated on first start into ./hookinbox-data/secrets/demo.secret
[server]
listen = "127.0.0.1:8080"
admin_listen = "127.0.0.1:8081"
data_dir = "./hookinbox-data"
header_read_timeout = "10s"
body_read_timeout = "30s"
shutdown_timeout = "30s"
max_connections = 1024
max_buffered_body = 67108864

[retention]
dedupe_ttl = "30days"
payload_ttl = "7days"
dlq_ttl = "30days"
audit_ttl = "1year"
sweep_interval = "1m"

[log]
level = "info"
format = "text"
summary_interval = "1m"

[keys]
lease = "30s"
ttl = "30days"

[[source]]
name = "demo"
kind = "standard"
generate_secret = true
max_body = 1048576
"#
    );
}

#[tokio::test]
async fn ingest_error_json() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}{}max_body = \"64B\"\n\n[[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecret = \"whsec_x\"\n",
        server_section(dir.path()),
        standard_source("shop")
    );
    let server = TestServer::start(&config, Clock::system()).await;
    let body = br#"{"type":"t"}"#.to_vec();
    let mut seen = Vec::new();
    let a = server
        .post("/in/nope", &standard_headers("e1", &body), body.clone())
        .await;
    seen.push(format!("{} {}", a.status, a.json));
    let mut forged = standard_headers("e1", &body);
    forged.retain(|(k, _)| k != "webhook-signature");
    forged.push(("webhook-signature".into(), "v1,AAAA".into()));
    let a = server.post("/in/shop", &forged, body.clone()).await;
    seen.push(format!("{} {}", a.status, a.json));
    let a = server.post("/in/shop", &[], body.clone()).await;
    seen.push(format!("{} {}", a.status, a.json));
    let big = vec![b'x'; 100];
    let a = server
        .post("/in/shop", &standard_headers("e2", &big), big)
        .await;
    seen.push(format!("{} {}", a.status, a.json));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let stripe = sign(&Signing {
        kind: Kind::Stripe,
        secret: "whsec_x",
        body: &body,
        event_id: "",
        event_type: None,
        timestamp: now,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap();
    let a = server.post("/in/stripe", &stripe, body.clone()).await;
    seen.push(format!("{} {}", a.status, a.json));
    assert_eq!(
        seen.join("\n"),
        r#"404 {"error":"unknown_source","reason":"no source named \"nope\" is configured"}
401 {"error":"invalid_signature","reason":"no signature in webhook-signature matches any configured secret"}
401 {"error":"invalid_signature","reason":"the webhook-signature header is missing"}
413 {"error":"body_too_large","reason":"the body is larger than the 64 bytes this source accepts"}
400 {"error":"missing_event_id","reason":"no event id found (looked in json:/id)"}"#
    );
    assert_eq!(server.events().len(), 0, "no bad request stored anything");
    server.stop().await;
}
