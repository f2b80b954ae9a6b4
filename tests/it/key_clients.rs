//! The keys helpers (`clients/`) against the real server: each scenario of
//! `clients/python/tests/scenarios.py` runs under the test's Python with the
//! helper on its path, against a hookinbox on loopback with a
//! `[[keys.client]]`; the restart scenario kills the real binary with -9.

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
