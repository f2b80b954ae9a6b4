//! Test support: a real in-process server on an ephemeral loopback port with
//! a temp data dir, a child-process runner for the real binary, and HTTP
//! helpers. No mocks: every test talks HTTP to hookinbox and reads redb.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hookinbox::api;
use hookinbox::app::App;
use hookinbox::clock::Clock;
use hookinbox::config::Config;
use hookinbox::store::{Store, StoreOptions, StoredEvent};
use hookinbox::verify::sign::{Signing, sign};
use tokio_util::sync::{CancellationToken, DropGuard};

pub const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The `[server]` section pointing at `dir`, with short timeouts for tests.
pub fn server_section(dir: &Path) -> String {
    format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\ndata_dir = {:?}\n\
         header_read_timeout = \"1s\"\nbody_read_timeout = \"1s\"\nshutdown_timeout = \"5s\"\n\n",
        dir.display().to_string()
    )
}

/// The `[admin]` section a replicating node needs: with `[replication]`
/// every secret must be given, the admin token too.
pub const REPLICATION_ADMIN: &str = "[admin]\ntoken = \"replication-admin-token-0123456789\"\n\n";

/// A `standard` source named `name` with the test secret.
pub fn standard_source(name: &str) -> String {
    format!(
        "[[source]]\nname = \"{name}\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n\n"
    )
}

pub fn client() -> reqwest::Client {
    hookinbox::send::http_client(Duration::from_secs(30)).unwrap()
}

/// An answer: status, headers, and the body as JSON (or as a JSON string if it is not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub json: serde_json::Value,
}

impl Answer {
    pub fn is_duplicate(&self) -> bool {
        self.json.get("duplicate") == Some(&serde_json::Value::Bool(true))
    }
    pub fn id(&self) -> &str {
        self.json["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id in {:?}", self.json))
    }
}

pub async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> Answer {
    let mut req = client.post(url).body(body);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let res = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    answer(res).await
}

/// `method url` on an admin listener with `token` (`None`: no token sent)
/// and a JSON `body`; the answer, whatever its status.
async fn admin_call(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> Answer {
    let mut req = client.request(method.parse().unwrap(), url);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let res = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    answer(res).await
}

/// Status, headers and body (JSON, or a JSON string if it is not JSON).
pub async fn answer(res: reqwest::Response) -> Answer {
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    Answer {
        status,
        headers,
        json,
    }
}

/// Standard Webhooks headers for `body` with provider id `id`, signed now.
pub fn standard_headers(id: &str, body: &[u8]) -> Vec<(String, String)> {
    standard_headers_with(STANDARD_SECRET, id, body)
}

/// [`standard_headers`] signed with `secret` (a rotated one, another source's).
pub fn standard_headers_with(secret: &str, id: &str, body: &[u8]) -> Vec<(String, String)> {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    sign(&Signing {
        kind: hookinbox::config::Kind::Standard,
        secret,
        body,
        event_id: id,
        event_type: None,
        timestamp: now,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap()
}

/// The real app, in-process, on 127.0.0.1:0.
pub struct TestServer {
    pub app: Option<App>,
    pub base: String,
    /// Cancels the app's shutdown token when dropped (or on `stop`).
    stop: Option<DropGuard>,
    pub client: reqwest::Client,
}

impl TestServer {
    /// Starts with `config` (a full TOML text) and the given clock.
    pub async fn start(config: &str, clock: Clock) -> TestServer {
        TestServer::try_start(config, clock).await.unwrap()
    }

    /// [`TestServer::start`], or why the app did not start (the config must
    /// be valid).
    pub async fn try_start(
        config: &str,
        clock: Clock,
    ) -> Result<TestServer, hookinbox::app::AppError> {
        let (config, _generated) = Config::from_toml(config, "test", None, &|_| None)
            .unwrap()
            .resolve()
            .unwrap();
        let ingest = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone().drop_guard();
        let listeners = hookinbox::app::Listeners { ingest, admin };
        let app = App::start(config, listeners, clock, shutdown).await?;
        let base = format!("http://{}", app.ingest_addr());
        Ok(TestServer {
            app: Some(app),
            base,
            stop: Some(stop),
            client: client(),
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.app.as_ref().unwrap().admin_addr())
    }

    /// An admin API call with `token` (or none); the answer as JSON.
    pub async fn admin(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<serde_json::Value>,
    ) -> Answer {
        admin_call(&self.client, &self.admin_url(path), method, token, body).await
    }

    /// The admin API with `token`, typed: requests that must succeed, and
    /// answers as the crate's own `api` types (for a refusal, use
    /// [`TestServer::admin`] and look at its status).
    pub fn api<'s>(&'s self, token: &'s str) -> Api<'s> {
        Api {
            server: self,
            token,
        }
    }

    pub async fn post(
        &self,
        path: &str,
        headers: &[(String, String)],
        body: impl Into<Vec<u8>>,
    ) -> Answer {
        post(&self.client, &self.url(path), headers, body.into()).await
    }

    pub fn store(&self) -> &Store {
        self.app.as_ref().unwrap().store()
    }

    pub fn metrics(&self) -> &hookinbox::metrics::Metrics {
        self.app.as_ref().unwrap().metrics()
    }

    /// Every stored event.
    pub fn events(&self) -> Vec<StoredEvent> {
        self.store().scan(0, usize::MAX).unwrap()
    }

    /// Graceful shutdown; returns once the database is closed.
    pub async fn stop(mut self) {
        drop(self.stop.take());
        self.app.take().unwrap().wait().await.unwrap();
    }
}

/// Every event in the database of `data_dir`, read with the server stopped.
pub async fn read_all(data_dir: &Path) -> Vec<StoredEvent> {
    let options = StoreOptions::new(data_dir, Duration::from_secs(86400));
    let (store, writer) = tokio::task::spawn_blocking(move || Store::open(options))
        .await
        .unwrap()
        .unwrap();
    let all = store.scan(0, usize::MAX).unwrap();
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
    all
}

/// Waits until `check` passes: polls it every `every` until it returns
/// `Ok(value)`, and returns that value. `Err(observation)` means "not yet";
/// after `within` it panics with `what` was awaited and the last observation.
/// `check` may itself assert (what must hold on every poll until then).
pub async fn eventually<T>(
    what: &str,
    within: Duration,
    every: Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let seen = match check().await {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        assert!(
            Instant::now() < deadline,
            "not within {within:?}: {what}\nlast seen: {seen}"
        );
        tokio::time::sleep(every).await;
    }
}

/// [`eventually`] for a synchronous `check`; blocks the thread between polls.
pub fn eventually_sync<T>(
    what: &str,
    within: Duration,
    every: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let seen = match check() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        assert!(
            Instant::now() < deadline,
            "not within {within:?}: {what}\nlast seen: {seen}"
        );
        std::thread::sleep(every);
    }
}

/// A span of time that load or sampling runs for: not a wait for a
/// condition (that is [`eventually`]), but "send until N are refused or a
/// minute is up". The one place outside [`eventually`] where the tests
/// keep a deadline (`tidy` refuses one written out in a test).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    ends: Instant,
}

impl Window {
    /// From now, for `length`.
    pub fn of(length: Duration) -> Window {
        Window {
            ends: Instant::now() + length,
        }
    }

    pub fn is_over(&self) -> bool {
        Instant::now() >= self.ends
    }

    /// What is left of it; zero once it is over.
    pub fn left(&self) -> Duration {
        self.ends.saturating_duration_since(Instant::now())
    }
}

/// How `child` exited, waiting `within` for it; past that it is killed
/// and this panics naming `what` was awaited.
pub fn exit_within(child: &mut Child, what: &str, within: Duration) -> std::process::ExitStatus {
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        eventually_sync(what, within, Duration::from_millis(20), || {
            child
                .try_wait()
                .unwrap()
                .ok_or_else(|| "still running".to_owned())
        })
    }));
    waited.unwrap_or_else(|panic| {
        let _ = child.kill();
        let _ = child.wait();
        std::panic::resume_unwind(panic)
    })
}

/// At most `n` lines from `lines` (a child's output, see [`lines_of`]),
/// as many as arrive within `within`: fewer when it ends or falls silent.
pub fn next_lines(
    lines: &std::sync::mpsc::Receiver<String>,
    n: usize,
    within: Duration,
) -> Vec<String> {
    let window = Window::of(within);
    let mut got = Vec::new();
    while got.len() < n {
        match lines.recv_timeout(window.left()) {
            Ok(line) => got.push(line),
            Err(_) => break,
        }
    }
    got
}

/// The first line from `lines` that `want` takes, within `within`; panics
/// naming `what` was awaited and every line seen before.
pub fn line_where(
    lines: &std::sync::mpsc::Receiver<String>,
    what: &str,
    within: Duration,
    want: impl Fn(&str) -> bool,
) -> String {
    let window = Window::of(within);
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(window.left()) {
            Ok(line) if want(&line) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("not within {within:?}: {what}; printed: {seen:#?}"),
        }
    }
}

/// A loopback port free a moment ago, for a child process to listen on
/// (another process could take it in between; the tests run on loopback
/// where that is rare enough).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real `hookinbox` binary as a child process.
pub struct BinaryServer {
    pub child: Child,
    pub base: String,
    /// The admin listener's URL.
    pub admin: String,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl BinaryServer {
    /// Runs `hookinbox serve --config <config_path>` and waits until it listens.
    /// `pre_exec` runs in the child before exec (e.g. to set rlimits).
    pub fn start(
        config_path: &Path,
        env: &[(&str, &str)],
        pre_exec: Option<fn() -> std::io::Result<()>>,
    ) -> BinaryServer {
        // HOOKINBOX_TEST_BINARY runs another build (an earlier one, to
        // measure a fix before and after with the same test).
        let binary = std::env::var_os("HOOKINBOX_TEST_BINARY")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_hookinbox").into());
        let mut cmd = Command::new(binary);
        cmd.args(["serve", "--config"]).arg(config_path);
        cmd.env("HOOKINBOX_LOG_FORMAT", "json")
            .env("HOOKINBOX_LOG_LEVEL", "info");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdout(Stdio::null());
        if let Some(f) = pre_exec {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure only calls async-signal-safe libc functions.
            unsafe {
                cmd.pre_exec(f);
            }
        }
        BinaryServer::start_command(cmd)
    }

    /// Runs a prepared `hookinbox serve` command (JSON logs) and waits until it listens.
    pub fn start_command(mut cmd: Command) -> BinaryServer {
        cmd.stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn hookinbox");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                // A standby says it follows instead (it takes no webhooks).
                if line.contains("hookinbox is receiving webhooks")
                    || line.contains("hookinbox is following the primary as a standby")
                {
                    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                    let _ = tx.send((
                        v["listen"].as_str().unwrap().to_owned(),
                        v["admin"].as_str().unwrap_or_default().to_owned(),
                    ));
                }
                sink.lock().unwrap().push(line);
            }
        });
        let (addr, admin) = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addrs) => addrs,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "hookinbox did not start listening; log:\n{}",
                    log.lock().unwrap().join("\n")
                );
            }
        };
        BinaryServer {
            child,
            base: format!("http://{addr}"),
            admin: format!("http://{admin}"),
            log,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn kill9(&mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }

    /// SIGTERM, then the exit status (within 30 s).
    /// Sends `signal` (SIGHUP, SIGTERM, …) to the child.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        let child = &mut self.child;
        eventually_sync(
            "hookinbox exits after SIGTERM",
            Duration::from_secs(30),
            Duration::from_millis(20),
            || child.try_wait().unwrap().ok_or("still running".to_owned()),
        )
    }

    /// What the child printed on stdout (after it exited).
    pub fn stdout_text(&mut self) -> String {
        use std::io::Read;
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            let _ = stdout.read_to_string(&mut out);
        }
        out
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The first JSON line of the log whose message is `message`.
    pub fn log_record(&self, message: &str) -> Option<serde_json::Value> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["message"] == message)
    }

    /// An admin API call with `token` (`None`: no token sent); the answer,
    /// whatever its status.
    pub async fn admin(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<serde_json::Value>,
    ) -> Answer {
        let url = format!("{}{path}", self.admin);
        admin_call(&client(), &url, method, token, body).await
    }

    /// An admin API call with `token` that must answer 200.
    pub async fn admin_ok(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Answer {
        let a = self.admin(method, path, Some(token), body).await;
        assert_eq!(a.status, 200, "{method} {path}: {:?}", a.json);
        a
    }

    /// The one event `source` stored under `event_id`, as the admin API's
    /// list shows it (raw JSON: the upgrade tests compare it with what an
    /// earlier release showed).
    pub async fn listed(&self, token: &str, source: &str, event_id: &str) -> serde_json::Value {
        let path = format!("/api/events?source={source}&event_id={event_id}");
        let a = self.admin_ok(token, "GET", &path, None).await;
        let events = a.json["events"].as_array().unwrap();
        assert_eq!(events.len(), 1, "{source}/{event_id}: {events:?}");
        events[0].clone()
    }

    /// [`BinaryServer::listed`] once its status is `delivered`, waiting up to
    /// `within`.
    pub async fn delivered(
        &self,
        token: &str,
        source: &str,
        event_id: &str,
        within: Duration,
    ) -> serde_json::Value {
        eventually(
            &format!("{source}/{event_id} is delivered"),
            within,
            Duration::from_millis(20),
            async || {
                let e = self.listed(token, source, event_id).await;
                if e["status"] == "delivered" {
                    Ok(e)
                } else {
                    Err(e.to_string())
                }
            },
        )
        .await
    }
}

impl Drop for BinaryServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `text` to `dir/hookinbox.toml` and returns its path.
pub fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("hookinbox.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A JSON body of about `size` bytes that LZ4 cannot shrink (hex of a cheap
/// PRNG stream seeded by `n`): what fills a disk, unlike repeated letters,
/// which the store compresses to almost nothing.
pub fn incompressible_body(size: usize, n: u64) -> Vec<u8> {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut pad = String::with_capacity(size + 16);
    while pad.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pad.push_str(&format!("{x:016x}"));
    }
    format!("{{\"type\":\"big\",\"n\":{n},\"pad\":\"{pad}\"}}").into_bytes()
}

/// Held by the tests that load the whole machine (thousands of
/// connections, hundreds of MiB of uploads) or measure it (memory and
/// descriptors under a soak), so that none of them runs beside another:
/// each measures what it does, not its neighbour, and a load does not
/// starve a measurement into a false failure. Other tests still run beside
/// them.
pub async fn machine_to_myself() -> tokio::sync::MutexGuard<'static, ()> {
    static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    HEAVY.lock().await
}

/// The child's resident memory, in bytes (from /proc).
pub fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kib * 1024
}

/// A test CA and a `localhost` certificate it signed, all PEM.
pub struct TestCertificate {
    pub ca: String,
    pub leaf: String,
    pub key: String,
}

/// A fresh test CA and `localhost` leaf (rcgen), for TLS on loopback.
pub fn certificate() -> TestCertificate {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    TestCertificate {
        ca: ca.pem(),
        leaf: leaf.pem(),
        key: key.serialize_pem(),
    }
}

/// How the README's test command installs the Python packages the tests
/// use, for the messages of tests that need them.
pub const PYTHON_SETUP: &str =
    "python3 -m venv target/py && target/py/bin/pip install -r tests/py/requirements.txt";

/// The Python that has `tests/py/requirements.txt` installed:
/// `HOOKINBOX_TEST_PYTHON`, else the venv the README's test command makes
/// (`target/py`: Debian 12's own Python refuses `pip install`, PEP 668),
/// else `python3` on the PATH.
pub fn python3() -> PathBuf {
    if let Some(python) = std::env::var_os("HOOKINBOX_TEST_PYTHON") {
        return python.into();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/py/bin/python");
    if venv.exists() {
        venv
    } else {
        "python3".into()
    }
}

/// Runs `tests/py/<script>` with `input` on stdin under [`python3`];
/// returns its exit status and output.
pub fn python(script: &str, input: &[u8]) -> std::process::Output {
    python_with(script, &[], input)
}

/// Runs tests/py/verify_delivery.py: the official `standardwebhooks` package
/// from PyPI (tests/py/requirements.txt), knowing only `secret`, checks
/// delivery `r`'s signature over `body`.
pub fn official_verify(
    r: &crate::destination::Received,
    secret: &str,
    body: &[u8],
) -> Result<(), String> {
    let headers: serde_json::Map<String, serde_json::Value> = r
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().into()))
        .collect();
    let input = serde_json::json!({
        "secret": secret,
        "headers": headers,
        "body_b64": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, body),
    });
    let out = python("verify_delivery.py", input.to_string().as_bytes());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "the official library is missing: {PYTHON_SETUP}\n{stderr}"
    );
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{stderr}", String::from_utf8_lossy(&out.stdout)))
    }
}

/// [`python`] with arguments after the script's path.
pub fn python_with(script: &str, args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let path = format!("{}/tests/py/{script}", env!("CARGO_MANIFEST_DIR"));
    let python = python3();
    let mut child = Command::new(&python)
        .arg(path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} runs ({PYTHON_SETUP}): {e}", python.display()));
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// The scrape's value of the series `series` (its name and labels as printed).
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}

/// The lines a child writes to `pipe`, on a channel, as they come.
pub fn lines_of(pipe: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// `GET admin + path` with `token`; the answer as JSON.
pub async fn admin_json(admin: &str, token: &str, path: &str) -> serde_json::Value {
    client()
        .get(format!("{admin}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: not JSON: {e}"))
}

/// The admin API as a test calls it when the call must succeed: each
/// method asserts a 200 (naming the call and the answer) and returns the
/// answer as the crate's own wire type, so a test reads fields, not JSON
/// paths ([`TestServer::api`]).
pub struct Api<'s> {
    server: &'s TestServer,
    token: &'s str,
}

impl Api<'_> {
    /// `method path` with `body`, which must answer 200: every success of
    /// the admin API but a key's first claim (201), which tests call raw.
    pub async fn call(&self, method: &str, path: &str, body: Option<serde_json::Value>) -> Answer {
        let a = self
            .server
            .admin(method, path, Some(self.token), body)
            .await;
        assert_eq!(a.status, 200, "{method} {path}: {:?}", a.json);
        a
    }

    /// `GET path`, which must answer 200 with a `T`.
    pub async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let a = self.call("GET", path, None).await;
        serde_json::from_value(a.json.clone())
            .unwrap_or_else(|e| panic!("GET {path}: not the answer's type: {e}: {:?}", a.json))
    }

    pub async fn event(&self, id: &str) -> hookinbox::api::EventDetail {
        self.get(&format!("/api/events/{id}")).await
    }

    /// `GET /api/events?query`.
    pub async fn events(&self, query: &str) -> hookinbox::api::EventPage {
        self.get(&format!("/api/events?{query}")).await
    }

    pub async fn stats(&self) -> hookinbox::api::Stats {
        self.get("/api/stats").await
    }

    pub async fn destinations(&self) -> hookinbox::api::Destinations {
        self.get("/api/destinations").await
    }

    /// Replays event `id`, to `destination` only if given.
    pub async fn replay(&self, id: &str, destination: Option<&str>) -> Answer {
        let to = destination.map_or(String::new(), |d| format!("?destination={d}"));
        self.call("POST", &format!("/api/events/{id}/replay{to}"), None)
            .await
    }

    /// Ignores event `id` with `note`, at `destination` only if given.
    pub async fn ignore(&self, id: &str, note: &str, destination: Option<&str>) -> Answer {
        let to = destination.map_or(String::new(), |d| format!("?destination={d}"));
        self.call(
            "POST",
            &format!("/api/events/{id}/ignore{to}"),
            Some(serde_json::json!({ "note": note })),
        )
        .await
    }

    pub async fn pause(&self, destination: &str) -> Answer {
        self.call(
            "POST",
            &format!("/api/destinations/{destination}/pause"),
            None,
        )
        .await
    }

    pub async fn resume(&self, destination: &str) -> Answer {
        self.call(
            "POST",
            &format!("/api/destinations/{destination}/resume"),
            None,
        )
        .await
    }

    /// `POST path` with `body`, which must answer 200 with a `T`.
    pub async fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> T {
        let a = self.call("POST", path, body).await;
        serde_json::from_value(a.json.clone())
            .unwrap_or_else(|e| panic!("POST {path}: not the answer's type: {e}: {:?}", a.json))
    }

    /// Ignores event `id` with `note` (every delivery it applies to): the
    /// event as it is now.
    pub async fn ignored(&self, id: &str, note: &str) -> api::EventSummary {
        self.post(
            &format!("/api/events/{id}/ignore"),
            Some(serde_json::json!({ "note": note })),
        )
        .await
    }

    /// `DELETE /api/events/{id}` with `note`: its payload and headers
    /// erased; the event as it is now.
    pub async fn erase(&self, id: &str, note: &str) -> api::EventSummary {
        let path = format!("/api/events/{id}");
        let a = self
            .call("DELETE", &path, Some(serde_json::json!({ "note": note })))
            .await;
        serde_json::from_value(a.json.clone())
            .unwrap_or_else(|e| panic!("DELETE {path}: not the answer's type: {e}: {:?}", a.json))
    }

    /// `POST /api/replay`: the events `request` filters, replayed (or
    /// counted, for a dry run).
    pub async fn bulk_replay(&self, request: &api::BulkRequest) -> api::BulkResult {
        self.post("/api/replay", Some(serde_json::to_value(request).unwrap()))
            .await
    }

    /// `POST /api/ignore`: the events `request` filters, ignored with its
    /// note (or counted, for a dry run).
    pub async fn bulk_ignore(&self, request: &api::BulkRequest) -> api::BulkResult {
        self.post("/api/ignore", Some(serde_json::to_value(request).unwrap()))
            .await
    }

    pub async fn sweep(&self) -> api::SweepResult {
        self.post("/api/sweep", None).await
    }

    /// `GET /api/activity?query`.
    pub async fn activity(&self, query: &str) -> api::Activity {
        self.get(&format!("/api/activity?{query}")).await
    }

    /// `GET /api/audit?query`.
    pub async fn audit(&self, query: &str) -> api::AuditPage {
        self.get(&format!("/api/audit?{query}")).await
    }

    pub async fn whoami(&self) -> api::Whoami {
        self.get("/api/whoami").await
    }

    /// `GET /api/keys/{key}` (`key` as the path writes it), in `namespace`
    /// if given (the admin token must name one; a client's is its own).
    pub async fn key(&self, key: &str, namespace: Option<&str>) -> api::KeyView {
        let scope = namespace.map_or(String::new(), |n| format!("?namespace={n}"));
        self.get(&format!("/api/keys/{key}{scope}")).await
    }

    /// `GET /api/keys?query`: a page of one namespace's keys.
    pub async fn keys(&self, query: &str) -> api::KeyList {
        self.get(&format!("/api/keys?{query}")).await
    }
}
