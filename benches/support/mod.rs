//! Shared by the benches: real events, signed as a provider would and
//! verified by hookinbox's own verifier, so the store sees the real shape.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use hookinbox::config::{Config, Kind};
use hookinbox::verify::sign::{Signing, sign};
use hookinbox::verify::{Request, Verified, VerifiedEvent, Verifier};

/// The bench's command line: `--quick` and `--name value` flags.
pub struct Flags(Vec<String>);

impl Flags {
    pub fn from_env() -> Flags {
        Flags(std::env::args().collect())
    }

    pub fn quick(&self) -> bool {
        self.has("--quick")
    }

    /// Whether `flag` was given.
    pub fn has(&self, flag: &str) -> bool {
        self.0.iter().any(|a| a == flag)
    }

    /// The value after `flag`; else `quick` with --quick, else `full`.
    pub fn value(&self, flag: &str, quick: usize, full: usize) -> usize {
        self.text(flag)
            .and_then(|v| v.parse().ok())
            .unwrap_or(if self.quick() { quick } else { full })
    }

    /// The word after `flag`, if given.
    pub fn text(&self, flag: &str) -> Option<&str> {
        self.0
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.0.get(i + 1))
            .map(String::as_str)
    }
}

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The verifier of a Standard Webhooks source `name` signed with [`SECRET`].
/// The source gives its secret: resolving it writes nothing to `data_dir`.
pub fn standard_verifier(name: &str, data_dir: &Path) -> Arc<Verifier> {
    let mut config = Config::from_toml(
        &format!("[[source]]\nname = \"{name}\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n"),
        "bench",
        None,
        &|_| None,
    )
    .unwrap();
    let source = config.sources.remove(0);
    let source = source.resolve(data_dir, &mut Vec::new()).unwrap();
    Arc::new(Verifier::new(&source).unwrap())
}

/// Standard Webhooks headers for `body` with event id `id`, signed at `ts`.
pub fn signed_headers(id: &str, body: &[u8], ts: i64) -> Vec<(String, String)> {
    sign(&Signing {
        kind: Kind::Standard,
        secret: SECRET,
        body,
        event_id: id,
        event_type: None,
        timestamp: ts,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap()
}

/// A loopback address no one listens on (for a child server's listener).
#[allow(dead_code)]
pub fn free_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub fn event_id(i: usize) -> String {
    format!(
        "evt_{i:012}_{:08x}",
        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32
    )
}

/// Signs and verifies `n` events numbered from `first`.
pub fn make_events(verifier: &Verifier, first: usize, n: usize) -> Vec<VerifiedEvent> {
    (first..first + n)
        .map(|i| {
            let id = event_id(i);
            let body = stripe_like_body(&id, i);
            verified(verifier, &id, body)
        })
        .collect()
}

/// Event `id` with `body`, signed now and verified by `verifier` (whose
/// source it then belongs to), as a provider's request would be.
pub fn verified(verifier: &Verifier, id: &str, body: String) -> VerifiedEvent {
    let body = Bytes::from(body);
    let mut map = http::HeaderMap::new();
    for (k, v) in signed_headers(id, &body, unix_now()) {
        map.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    let request = Request {
        headers: &map,
        body: &body,
        path_rest: "",
        query: None,
    };
    match verifier.verify(&request, SystemTime::now()) {
        Ok(Verified::Event(e)) => e,
        other => panic!("{other:?}"),
    }
}

/// The type of [`stripe_like_body`]'s events.
const STRIPE_TYPE: &str = "payment_intent.succeeded";

/// ≈1.2 KB, varied per event so pages are not trivially alike.
pub fn stripe_like_body(id: &str, i: usize) -> String {
    stripe_like_body_of_type(id, i, STRIPE_TYPE)
}

/// [`stripe_like_body`] with `"type"` set to `event_type`.
pub fn stripe_like_body_of_type(id: &str, i: usize, event_type: &str) -> String {
    let h = (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D);
    format!(
        r#"{{"id":"{id}","object":"event","api_version":"2024-06-20","created":{created},"type":"{event_type}","livemode":false,"pending_webhooks":1,"request":{{"id":"req_{h:016x}","idempotency_key":"{h:x}-{i}"}},"data":{{"object":{{"id":"pi_{h:024x}","object":"payment_intent","amount":{amount},"amount_received":{amount},"currency":"eur","customer":"cus_{c:014x}","description":"Order #{i} — café crème","latest_charge":"ch_{h:020x}","metadata":{{"order_id":"{i}","sku":"SKU-{s:06}","note":"customer {c:x} paid with card ending {last4:04}"}},"payment_method":"pm_{c:018x}","payment_method_types":["card"],"receipt_email":"buyer{i}@example.com","shipping":{{"name":"Buyer {i}","address":{{"line1":"{i} Rue de la Paix","city":"Paris","postal_code":"750{pc:02}","country":"FR"}}}},"status":"succeeded","statement_descriptor":"HOOKINBOX {s}","risk":{{"level":"normal","score":{risk},"rule":"rule_{h:x}"}},"fingerprint":"{h:016x}{c:016x}","tags":["order-{i}","customer-{c:x}","batch-{s}","region-eu-west","channel-web","campaign-{risk}"]}}}}}}"#,
        created = 1_700_000_000 + i,
        amount = 100 + (h % 100_000),
        c = h >> 8,
        s = h % 1_000_000,
        last4 = h % 10_000,
        pc = h % 20,
        risk = h % 100,
    )
}

/// `hookinbox serve` as a child process (logs at warn, to nowhere).
#[allow(dead_code)]
pub struct ServeProcess(std::process::Child);

#[allow(dead_code)]
impl ServeProcess {
    pub fn start(bin: &str, config: &Path) -> ServeProcess {
        let child = std::process::Command::new(bin)
            .args(["serve", "--config"])
            .arg(config)
            .env("HOOKINBOX_LOG_LEVEL", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {bin}: {e} (build it: cargo build --release)"));
        ServeProcess(child)
    }

    /// Until `/readyz` answers 200 (60 s at most).
    pub fn wait_ready(&mut self, admin: std::net::SocketAddr) {
        use std::io::{Read, Write};
        for _ in 0..600 {
            if let Ok(mut s) = std::net::TcpStream::connect(admin) {
                let _ = write!(
                    s,
                    "GET /readyz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
                );
                let mut answer = String::new();
                if s.read_to_string(&mut answer).is_ok() && answer.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("hookinbox did not become ready");
    }

    pub fn stop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}
