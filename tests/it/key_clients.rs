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

/// The server's config on data dir `dir`, its admin socket at `socket`
/// (the helpers' `socket_path` / `socketPath` scenarios call over it).
fn config(dir: &Path, socket: &Path) -> String {
    format!(
        r#"{}admin_socket = {:?}

[admin]
token = "{ADMIN}"

[[keys.client]]
name = "shop"
token = "{SHOP}"
"#,
        server_section(dir),
        socket.display().to_string()
    )
}

/// Where a scenario finds the server: its admin URL and admin socket.
struct Serving {
    url: String,
    socket: std::path::PathBuf,
}

/// An in-process server on a data dir of its own, its admin socket in it.
async fn serve() -> (tempfile::TempDir, TestServer, Serving) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("admin.sock");
    let server = TestServer::start(&config(dir.path(), &socket), Clock::system()).await;
    let serving = Serving {
        url: server.admin_url(""),
        socket,
    };
    (dir, server, serving)
}

/// The helper a scenario script exercises.
#[derive(Clone, Copy)]
enum Helper {
    /// `clients/python/tests/{script}`, under the test's Python with the
    /// helper on its path.
    Python(&'static str),
    /// `clients/node/test/scenarios.mjs`, under node.
    Node,
}

/// Runs scenario `name` of `helper` against the server, off the test's
/// runtime thread (an in-process server answers on it meanwhile).
async fn run(helper: Helper, server: &Serving, name: &str) -> Output {
    let (url, socket, name) = (server.url.clone(), server.socket.clone(), name.to_owned());
    tokio::task::spawn_blocking(move || {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let (mut command, setup) = match helper {
            Helper::Python(script) => {
                let mut command = std::process::Command::new(python3());
                command
                    .arg(root.join("clients/python/tests").join(script))
                    .env("PYTHONPATH", root.join("clients/python"));
                (command, crate::support::PYTHON_SETUP)
            }
            Helper::Node => {
                let mut command = std::process::Command::new("node");
                command.arg(root.join("clients/node/test/scenarios.mjs"));
                (command, "Debian: apt-get install nodejs")
            }
        };
        command
            .arg(&name)
            .env("HOOKINBOX_KEYS_URL", &url)
            // Only the socket's own scenario is told of it: the others go
            // over TCP.
            .env_remove("HOOKINBOX_KEYS_SOCKET")
            .envs((name == "unix_socket").then_some(("HOOKINBOX_KEYS_SOCKET", &socket)))
            .env("HOOKINBOX_KEYS_TOKEN", SHOP)
            .output()
            .unwrap_or_else(|e| panic!("{:?} does not run ({setup}): {e}", command.get_program()))
    })
    .await
    .unwrap()
}

async fn scenario(server: &Serving, name: &str) -> Output {
    run(Helper::Python("scenarios.py"), server, name).await
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
    let (_dir, server, url) = serve().await;
    for name in [
        "concurrent",
        "stale",
        "heartbeat",
        "exception",
        "busy_raise",
        "context",
        "unreachable",
        "unix_socket",
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
    let socket = dir.path().join("admin.sock");
    let path = write_config(dir.path(), &config(&dir.path().join("data"), &socket));
    let mut server = BinaryServer::start(&path, &[], None);
    let serving = |server: &BinaryServer| Serving {
        url: server.admin.clone(),
        socket: socket.clone(),
    };
    assert_ok(
        &scenario(&serving(&server), "before_restart").await,
        "before_restart",
    );
    server.kill9();
    // The killed run's socket file is still there: the restart takes it over.
    assert!(socket.exists());
    let server = BinaryServer::start(&path, &[], None);
    assert_ok(
        &scenario(&serving(&server), "after_restart").await,
        "after_restart",
    );
    assert_ok(
        &scenario(&serving(&server), "unix_socket").await,
        "unix_socket",
    );
}

/// AWS Lambda Powertools' idempotency utility (the real package) with
/// `HookinboxPersistenceLayer` in place of its DynamoDB layer: its own
/// `idempotent_function` example runs once per order; 20 concurrent
/// invocations of one event run the handler once; an exception releases;
/// payload validation refuses another payload under a done key; an
/// invocation that outlived its time is fenced out; unreachable fails closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn powertools_idempotency_on_hookinbox_keys_runs_each_key_once() {
    let (_dir, server, url) = serve().await;
    for name in [
        "function",
        "handler",
        "exception",
        "validation",
        "timeout",
        "unreachable",
    ] {
        assert_ok(
            &run(Helper::Python("powertools_scenarios.py"), &url, name).await,
            name,
        );
    }
    server.stop().await;
}

/// The Python helper's type hints hold under `mypy --strict` (with the
/// Powertools layer, against the pinned Powertools' own hints).
#[test]
fn the_python_helper_passes_mypy_strict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(python3())
        .args(["-m", "mypy", "--strict", "--cache-dir"])
        .arg(cache.path())
        .arg(root.join("clients/python/hookinbox_keys"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mypy ({}): {}{}",
        crate::support::PYTHON_SETUP,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `pip install ./clients/python` installs the package, its Powertools
/// layer and its `py.typed` marker (built here without the network: the
/// test venv's setuptools, into a directory of its own).
#[test]
fn the_python_helper_installs_with_pip() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let (source, target) = (dir.path().join("src"), dir.path().join("site"));
    std::fs::create_dir(&source).unwrap();
    for file in ["pyproject.toml", "README.md"] {
        std::fs::copy(root.join("clients/python").join(file), source.join(file)).unwrap();
    }
    std::fs::create_dir(source.join("hookinbox_keys")).unwrap();
    for entry in std::fs::read_dir(root.join("clients/python/hookinbox_keys")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(
                &path,
                source
                    .join("hookinbox_keys")
                    .join(path.file_name().unwrap()),
            )
            .unwrap();
        }
    }
    let out = std::process::Command::new(python3())
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
        ])
        .arg(&target)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in ["__init__.py", "powertools.py", "py.typed"] {
        assert!(
            target.join("hookinbox_keys").join(file).is_file(),
            "{file} installed"
        );
    }
    let out = std::process::Command::new(python3())
        .args([
            "-c",
            "import hookinbox_keys, hookinbox_keys.powertools; print(hookinbox_keys.__file__)",
        ])
        .env("PYTHONPATH", &target)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&target.display().to_string()));
}

/// `npm install ./clients/node` gets the helper and its types: the files
/// `npm pack` would publish.
#[test]
fn the_node_helper_packs_its_code_and_types() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("npm")
        .args(["pack", "--dry-run", "--json"])
        .current_dir(root.join("clients/node"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut files: Vec<&str> = packed[0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    files.sort_unstable();
    assert_eq!(
        files,
        ["README.md", "index.d.ts", "index.js", "package.json"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_helper_runs_each_key_once_fences_a_late_worker_and_aborts_its_signal() {
    let (_dir, server, url) = serve().await;
    for name in [
        "concurrent",
        "stale",
        "heartbeat",
        "exception",
        "aborted",
        "busy",
        "unreachable",
        "unix_socket",
    ] {
        assert_ok(&run(Helper::Node, &url, name).await, name);
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
const local = new Keys({{ socketPath: "/run/hookinbox/admin.sock", token: "t", timeoutMs: 5000 }});
const charge = keys.idempotent(async (event: {{ id: string }}, ctx: WorkContext) => ({{ id: event.id, token: ctx.token, aborted: ctx.signal.aborted }}), {{ key: "json:/id", lease: "30s", onBusy: "wait" }});
async function main(): Promise<void> {{
  const result = await charge({{ id: "evt_1" }});
  const claim = await keys.claim("k", {{ lease: 30 }});
  if (claim.state === "claimed") await claim.complete({{ ok: true }});
  console.log(result, await local.get("k"), seconds("5m"), KeyBusy.name, StaleFence.name, HookinboxUnavailable.name);
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
