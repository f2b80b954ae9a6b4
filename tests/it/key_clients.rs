//! The keys helpers (`clients/`) against the real server: each scenario of
//! `clients/python/tests/scenarios.py` runs under the test's Python with the
//! helper on its path, and each of `clients/node/test/scenarios.mjs` under
//! node, against a hookinbox on loopback with a `[[keys.client]]`; the
//! restart scenario kills the real binary with -9.

use std::path::Path;
use std::process::Output;

use hookinbox::clock::Clock;

use crate::support::{BinaryServer, TestServer, python3, server_section, write_config};

const ADMIN: &str = "test-admin-token-0123456789";
const SHOP: &str = "shop-keys-token-0123";

fn config(dir: &Path) -> String {
    format!(
        r#"{}[admin]
token = "{ADMIN}"

[[keys.client]]
name = "shop"
token = "{SHOP}"
"#,
        server_section(dir)
    )
}

/// Runs scenario `name` against the admin API at `url`, off the test's
/// runtime thread (an in-process server answers on it meanwhile).
async fn scenario(url: &str, name: &str) -> Output {
    let (url, name) = (url.to_owned(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::process::Command::new(python3())
            .arg(root.join("clients/python/tests/scenarios.py"))
            .arg(&name)
            .env("PYTHONPATH", root.join("clients/python"))
            .env("HOOKINBOX_KEYS_URL", &url)
            .env("HOOKINBOX_KEYS_TOKEN", SHOP)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Runs the Node helper's scenario `name` against `url`, off the runtime thread.
async fn node_scenario(url: &str, name: &str) -> Output {
    let (url, name) = (url.to_owned(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::process::Command::new("node")
            .arg(root.join("clients/node/test/scenarios.mjs"))
            .arg(&name)
            .env("HOOKINBOX_KEYS_URL", &url)
            .env("HOOKINBOX_KEYS_TOKEN", SHOP)
            .output()
            .unwrap_or_else(|e| panic!("node does not run ({e}): Debian: apt-get install nodejs"))
    })
    .await
    .unwrap()
}

fn assert_ok(out: &Output, name: &str) {
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name}: {said}");
    assert!(said.contains(&format!("ok {name}")), "{name}: {said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_helper_runs_each_key_once_fences_a_late_worker_and_keeps_leases_alive() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    let url = server.admin_url("");
    for name in [
        "concurrent",
        "stale",
        "heartbeat",
        "exception",
        "busy_raise",
        "context",
        "unreachable",
    ] {
        assert_ok(&scenario(&url, name).await, name);
    }
    server.stop().await;
}

/// A done key stays done across kill -9 and a restart: the helper returns
/// the stored result and does not run the body again.
#[tokio::test]
async fn a_key_the_python_helper_completed_stays_done_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), &config(&dir.path().join("data")));
    let mut server = BinaryServer::start(&path, &[], None);
    assert_ok(
        &scenario(&server.admin, "before_restart").await,
        "before_restart",
    );
    server.kill9();
    let server = BinaryServer::start(&path, &[], None);
    assert_ok(
        &scenario(&server.admin, "after_restart").await,
        "after_restart",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_helper_runs_each_key_once_fences_a_late_worker_and_aborts_its_signal() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    let url = server.admin_url("");
    for name in [
        "concurrent",
        "stale",
        "heartbeat",
        "exception",
        "aborted",
        "busy",
        "unreachable",
    ] {
        assert_ok(&node_scenario(&url, name).await, name);
    }
    server.stop().await;
}

/// The Node helper's types (`index.d.ts`) compile under TypeScript's strict
/// checks, with a use of each export.
#[test]
fn the_node_helper_s_types_compile() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let use_site = dir.path().join("use.ts");
    std::fs::write(
        &use_site,
        format!(
            r#"import {{ Keys, KeyBusy, StaleFence, HookinboxUnavailable, seconds, type WorkContext }} from "{}";
const keys = new Keys({{ url: "http://127.0.0.1:8081", token: "t" }});
const charge = keys.idempotent(async (event: {{ id: string }}, ctx: WorkContext) => ({{ id: event.id, token: ctx.token, aborted: ctx.signal.aborted }}), {{ key: "json:/id", lease: "30s", onBusy: "wait" }});
async function main(): Promise<void> {{
  const result = await charge({{ id: "evt_1" }});
  const claim = await keys.claim("k", {{ lease: 30 }});
  if (claim.state === "claimed") await claim.complete({{ ok: true }});
  console.log(result, seconds("5m"), KeyBusy.name, StaleFence.name, HookinboxUnavailable.name);
}}
void main();
"#,
            root.join("clients/node/index.js").display()
        ),
    )
    .unwrap();
    let tsc = root.join("tests/grafana/node_modules/.bin/tsc");
    let out = std::process::Command::new(&tsc)
        .args([
            "--noEmit",
            "--strict",
            "--target",
            "es2022",
            "--module",
            "nodenext",
            "--moduleResolution",
            "nodenext",
            "--lib",
            "es2022,dom",
        ])
        .arg(&use_site)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} does not run ({e}): npm ci --prefix tests/grafana",
                tsc.display()
            )
        });
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
