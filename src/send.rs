//! `hookinbox send`: sign and send webhooks exactly as a provider would.
//!
//! For users testing their setup (`hookinbox send --source demo`) and for
//! load tests (`--repeat`, `--concurrency`). Signing itself is
//! `verify::sign`; this module only builds bodies, sends, and reports.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use rand::Rng;

use crate::config::{self, Config, HmacSpec, Kind, Locator, SecretPlan, SecretPurpose};
use crate::json_pointer;
use crate::verify::sign::{Signing, sign, twilio_body_url};
use crate::verify::{default_event_id, default_event_type};

#[derive(Debug, Args)]
pub struct SendArgs {
    /// Sign as this provider: stripe, github, shopify, slack, standard, paddle,
    /// linear, twilio, gitlab, twitch, zoom, meta. Or use --source to take
    /// kind, secret and URL from a config.
    #[arg(long, required_unless_present = "source")]
    pub provider: Option<String>,
    /// The signing secret (with --provider).
    #[arg(long, env = "HOOKINBOX_SEND_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// Take kind, secret (including a generated one) and URL from this source of the config.
    #[arg(long, conflicts_with = "provider")]
    pub source: Option<String>,
    /// The config for --source (default: /etc/hookinbox/hookinbox.toml when
    /// it exists, else the embedded default).
    #[arg(long, short = 'c', env = "HOOKINBOX_CONFIG", requires = "source")]
    pub config: Option<PathBuf>,
    /// Where to POST, e.g. http://127.0.0.1:8080/in/stripe (default with --source: its ingest URL).
    #[arg(long)]
    pub url: Option<String>,
    /// The URL to sign, for Twilio when it differs from --url (a proxy in between).
    #[arg(long)]
    pub signed_url: Option<String>,
    /// The body, from a file, sent byte for byte: only the event id (and
    /// --event-type) are written in, where the provider carries them in the body.
    #[arg(long, conflicts_with = "body")]
    pub body_file: Option<PathBuf>,
    /// The body, inline. Default: a small JSON test event.
    #[arg(long)]
    pub body: Option<String>,
    /// The provider event id. Given: every request repeats it (duplicates).
    /// Absent: each request gets a fresh id (or, for one request, the body's own).
    #[arg(long)]
    pub event_id: Option<String>,
    /// The event type: in the provider's header (GitHub, Shopify, Linear,
    /// GitLab, Twitch) or written into the body (Stripe, Standard Webhooks,
    /// Slack, Paddle, Zoom, Meta); refused for Twilio.
    #[arg(long)]
    pub event_type: Option<String>,
    /// The content type (default: application/json, or form for a non-JSON Twilio body).
    #[arg(long)]
    pub content_type: Option<String>,
    /// How many requests to send.
    #[arg(long, default_value_t = 1)]
    pub repeat: u64,
    /// How many requests in flight at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Per-request timeout.
    #[arg(long, default_value = "30s", value_parser = config::parse_duration)]
    pub timeout: Duration,
    /// Print only the summary, not each answer.
    #[arg(long)]
    pub quiet: bool,
}

/// A reqwest client with rustls (ring) installed as the TLS provider.
pub fn http_client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    // Installing twice is harmless: the second call reports the first provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .context("cannot build the HTTP client")
}

struct Plan {
    kind: Kind,
    secret: String,
    url: String,
    signed_url: String,
    body: Vec<u8>,
    content_type: String,
    event_id: Option<String>,
    event_type: Option<String>,
    id_locators: Vec<Locator>,
    hmac: Option<HmacSpec>,
    repeat: u64,
}

fn plan(args: SendArgs) -> anyhow::Result<Plan> {
    let (kind, secret, default_url, id_locators, hmac, type_locators) = if let Some(name) =
        &args.source
    {
        let config = Config::load_or_packaged(args.config.as_deref(), &config::process_env)?;
        let source = config
            .source(name)
            .with_context(|| format!("{}: no source named {name:?}", config.origin))?;
        // The first that has not expired (an expired one verifies nothing).
        let now = crate::clock::Clock::system().now_ms();
        let given = match &source.secrets {
            SecretPlan::Given(secrets) => secrets
                .iter()
                .find(|s| s.expires.is_none_or(|at| at.0 > now))
                .or(secrets.first()),
            SecretPlan::Generated => None,
        };
        let secret = match given {
            Some(s) => s.value.expose().to_owned(),
            // Read, never generated: a secret no server has made yet is one
            // no server checks.
            None => {
                let path = SecretPurpose::Ingest(source.name.clone()).path(&config.server.data_dir);
                std::fs::read_to_string(&path)
                    .with_context(|| format!("source {name:?} has a generated secret, but {} cannot be read (has `hookinbox serve` started once?)", path.display()))?
                    .trim()
                    .to_owned()
            }
        };
        let locators = source
            .event_id
            .clone()
            .unwrap_or_else(|| default_event_id(source.kind));
        let url = format!("http://{}/in/{name}", config.server.listen);
        let types = source
            .event_type
            .clone()
            .unwrap_or_else(|| default_event_type(source.kind));
        (
            source.kind,
            secret,
            Some(url),
            locators,
            source.hmac.clone(),
            types,
        )
    } else {
        let kind = Kind::parse(args.provider.as_deref().unwrap_or_default())?;
        if kind == Kind::Hmac {
            bail!("--provider hmac needs the source's scheme: use --source NAME (with --config)");
        }
        let secret = args
            .secret
            .clone()
            .context("--secret is required with --provider")?;
        (
            kind,
            secret,
            None,
            default_event_id(kind),
            None,
            default_event_type(kind),
        )
    };
    let url = args
        .url
        .clone()
        .or(default_url)
        .context("--url is required with --provider")?;
    let mut body = match (&args.body_file, &args.body) {
        (Some(path), _) => {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
        }
        (None, Some(text)) => text.clone().into_bytes(),
        (None, None) => {
            br#"{"type":"hookinbox.test","data":{"message":"hello from hookinbox send"}}"#.to_vec()
        }
    };
    // --event-type goes where the provider puts it: a header (sign() adds
    // it) or the body (written in here, every other byte as given).
    if let Some(event_type) = &args.event_type {
        match type_locators.first() {
            Some(Locator::Json(pointer)) => {
                body = splice(&body, pointer, &serde_json::to_string(event_type)?)
                    .context("--event-type goes into this provider's body: give a JSON body")?;
            }
            Some(_) if kind != Kind::Hmac => {}
            _ => bail!(
                "--event-type: {} events carry no event type hookinbox reads; leave it out",
                kind.as_str()
            ),
        }
    }
    let looks_json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let content_type = args.content_type.clone().unwrap_or_else(|| {
        if kind == Kind::Twilio && !looks_json {
            "application/x-www-form-urlencoded"
        } else {
            "application/json"
        }
        .into()
    });
    if args.repeat == 0 || args.concurrency == 0 {
        bail!("--repeat and --concurrency must be at least 1");
    }
    let signed_url = args.signed_url.clone().unwrap_or_else(|| url.clone());
    Ok(Plan {
        kind,
        secret,
        signed_url,
        url,
        body,
        content_type,
        event_id: args.event_id.clone(),
        event_type: args.event_type.clone(),
        id_locators,
        hmac,
        repeat: args.repeat,
    })
}

impl Plan {
    /// The body and id of request `n`: the body as given, with only the
    /// event id (and Linear's signed timestamp) written into it where the
    /// provider carries them there.
    fn request(&self, n: u64, now_ms: u64) -> anyhow::Result<(Vec<u8>, String)> {
        let json_pointer = self.id_locators.iter().find_map(|l| match l {
            Locator::Json(p) => Some(p.as_str()),
            _ => None,
        });
        let not_json = "this provider reads the event id from the body: give a JSON body";
        let in_body = match json_pointer {
            Some(p) => json_pointer::value_at(&self.body, &json_pointer::tokens(p))
                .map_err(|_| anyhow::anyhow!(not_json))?
                .and_then(|v| v.as_str().map(str::to_owned))
                .filter(|s| !s.is_empty()),
            None => None,
        };
        let id = match (&self.event_id, &in_body) {
            (Some(id), _) => id.clone(),
            (None, Some(id)) if self.repeat == 1 => id.clone(),
            _ => format!("evt_{:016x}{n:08x}", rand::rng().random::<u64>()),
        };
        let mut body: std::borrow::Cow<[u8]> = std::borrow::Cow::Borrowed(&self.body);
        if let Some(p) = json_pointer
            && in_body.as_deref() != Some(id.as_str())
        {
            body = splice(&body, p, &serde_json::to_string(&id)?)
                .context(not_json)?
                .into();
        }
        if self.kind == Kind::Linear {
            // Linear signs its timestamp inside the body.
            body = splice(&body, "/webhookTimestamp", &now_ms.to_string())
                .context("Linear signs a timestamp in the body: give a JSON object body")?
                .into();
        }
        Ok((body.into_owned(), id))
    }
}

/// `body` with the value at `pointer` replaced by `value` (JSON text), or
/// added where the path ends early (objects made on the way, as the first
/// member of the deepest object that exists). Every other byte stays as
/// given: key order, spacing and escapes are the sender's.
fn splice(body: &[u8], pointer: &str, value: &str) -> anyhow::Result<Vec<u8>> {
    use serde_json::value::RawValue;
    let text = std::str::from_utf8(body).context("the body is not UTF-8")?;
    let offset = |raw: &str| raw.as_ptr() as usize - text.as_ptr() as usize;
    let tokens = json_pointer::tokens(pointer);
    let mut at: &RawValue = serde_json::from_str(text).context("the body is not JSON")?;
    for (i, token) in tokens.iter().enumerate() {
        let raw = at.get();
        if raw.starts_with('{') {
            let members: std::collections::HashMap<String, &RawValue> = serde_json::from_str(raw)?;
            if let Some(member) = members.get(token) {
                at = member;
                continue;
            }
            // Missing: insert it, objects for the rest of the path.
            let mut inserted = format!("{}:", serde_json::to_string(token)?);
            let rest = &tokens[i + 1..];
            for t in rest {
                inserted.push_str(&format!("{{{}:", serde_json::to_string(t)?));
            }
            inserted.push_str(value);
            inserted.push_str(&"}".repeat(rest.len()));
            if !members.is_empty() {
                inserted.push(',');
            }
            let after_brace = offset(raw) + 1;
            return Ok([
                &body[..after_brace],
                inserted.as_bytes(),
                &body[after_brace..],
            ]
            .concat());
        } else if raw.starts_with('[') {
            let items: Vec<&RawValue> = serde_json::from_str(raw)?;
            at = token
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get(i).copied())
                .with_context(|| format!("{pointer}: no element {token:?} in an array"))?;
        } else {
            bail!("{pointer}: {token:?} is inside a value that is not an object");
        }
    }
    let start = offset(at.get());
    let end = start + at.get().len();
    Ok([&body[..start], value.as_bytes(), &body[end..]].concat())
}

/// Where the requests go: over plain HTTP, one keep-alive connection per
/// worker straight on hyper (≈ 2/3 of reqwest's CPU per request, which
/// matters when `send` and the server share the machine's cores); over
/// HTTPS, reqwest's pooled client.
enum Transport {
    Plain {
        addr: std::net::SocketAddr,
        authority: String,
    },
    Tls(reqwest::Client),
}

impl Transport {
    async fn for_url(url: &str, timeout: Duration) -> anyhow::Result<Transport> {
        let uri: http::Uri = url.parse().with_context(|| format!("not a URL: {url}"))?;
        if uri.scheme_str() != Some("http") {
            return Ok(Transport::Tls(http_client(timeout)?));
        }
        let authority = uri
            .authority()
            .with_context(|| format!("no host in {url}"))?
            .clone();
        let port = authority.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((authority.host(), port))
            .await
            .with_context(|| format!("cannot resolve {}", authority.host()))?
            .next()
            .with_context(|| format!("{} resolves to no address", authority.host()))?;
        Ok(Transport::Plain {
            addr,
            authority: authority.to_string(),
        })
    }
}

/// One worker's way to the server: its own connection (plain HTTP, opened
/// on first use and again after a failure) or the shared client.
enum Link<'a> {
    Plain {
        addr: std::net::SocketAddr,
        authority: &'a str,
        open: Option<hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>>,
    },
    Tls(&'a reqwest::Client),
}

impl<'a> Link<'a> {
    fn new(transport: &'a Transport) -> Link<'a> {
        match transport {
            Transport::Plain { addr, authority } => Link::Plain {
                addr: *addr,
                authority,
                open: None,
            },
            Transport::Tls(client) => Link::Tls(client),
        }
    }

    /// POSTs `body` to `url`; the status and body of the answer.
    async fn post(
        &mut self,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        timeout: Duration,
    ) -> anyhow::Result<(u16, bytes::Bytes)> {
        match self {
            Link::Tls(client) => {
                let mut request = client.post(url).body(body);
                for (k, v) in headers {
                    request = request.header(k, v);
                }
                let response = request.send().await?;
                let status = response.status().as_u16();
                Ok((status, response.bytes().await?))
            }
            Link::Plain {
                addr,
                authority,
                open,
            } => {
                let answer = tokio::time::timeout(
                    timeout,
                    Link::plain(*addr, authority, open, url, headers, body),
                )
                .await;
                let answer = answer
                    .map_err(|_| {
                        anyhow::anyhow!("no answer within {}", humantime::format_duration(timeout))
                    })
                    .and_then(|a| a);
                if answer.is_err() {
                    // Its state is unknown: the next request opens another.
                    *open = None;
                }
                answer
            }
        }
    }

    async fn plain(
        addr: std::net::SocketAddr,
        authority: &str,
        open: &mut Option<
            hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>,
        >,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> anyhow::Result<(u16, bytes::Bytes)> {
        use http_body_util::BodyExt;
        let sender = match open {
            Some(sender) if !sender.is_closed() => sender,
            _ => {
                let stream = tokio::net::TcpStream::connect(addr)
                    .await
                    .with_context(|| format!("cannot connect to {addr}"))?;
                stream.set_nodelay(true)?;
                let (sender, connection) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                        .await?;
                tokio::spawn(connection);
                open.insert(sender)
            }
        };
        sender.ready().await?;
        let uri: http::Uri = url.parse()?;
        let mut request = http::Request::post(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(http::header::HOST, authority);
        for (k, v) in headers {
            request = request.header(k, v);
        }
        let request = request.body(http_body_util::Full::new(bytes::Bytes::from(body)))?;
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// Where `send` prints a line per answer: standard output, until its
/// reader goes away (`send --repeat 1000 | head -1`). Then nothing more is
/// printed and every request is still sent: the sends are the command's
/// job, the lines only its report, so stopping there would leave the
/// trial half made behind an exit 0. Any other failure to write fails.
#[derive(Default)]
struct Report {
    closed: AtomicBool,
}

impl Report {
    fn line(&self, text: String) -> anyhow::Result<()> {
        if self.closed.load(Ordering::Relaxed) {
            return Ok(());
        }
        match crate::exit::write_stdout(text.as_bytes()) {
            Err(e) if e.is::<crate::exit::StdoutClosed>() => {
                self.closed.store(true, Ordering::Relaxed);
                Ok(())
            }
            written => written,
        }
    }
}

/// Sends everything the args ask for; returns whether every answer was 2xx.
pub async fn run(args: SendArgs) -> anyhow::Result<bool> {
    let quiet = args.quiet;
    let concurrency = args.concurrency;
    let timeout = args.timeout;
    let plan = Arc::new(plan(args)?);
    let transport = Arc::new(Transport::for_url(&plan.url, timeout).await?);
    let next = Arc::new(AtomicU64::new(0));
    let report = Arc::new(Report::default());
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(plan.repeat as usize) {
        let (plan, transport, next, report) = (
            plan.clone(),
            transport.clone(),
            next.clone(),
            report.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut link = Link::new(&transport);
            let mut results: Vec<(Option<u16>, Duration, bool)> = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= plan.repeat {
                    return Ok::<_, anyhow::Error>(results);
                }
                let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
                let (body, id) = plan.request(n, now.as_millis() as u64)?;
                // Twilio covers a non-form body through bodySHA256 in the URL.
                let twilio_json = plan.kind == Kind::Twilio
                    && !plan
                        .content_type
                        .starts_with("application/x-www-form-urlencoded");
                let (url, signed_url) = if twilio_json {
                    (
                        twilio_body_url(&plan.url, &body),
                        twilio_body_url(&plan.signed_url, &body),
                    )
                } else {
                    (plan.url.clone(), plan.signed_url.clone())
                };
                let headers = sign(&Signing {
                    kind: plan.kind,
                    secret: &plan.secret,
                    body: &body,
                    event_id: &id,
                    event_type: plan.event_type.as_deref(),
                    timestamp: now.as_secs() as i64,
                    url: &signed_url,
                    content_type: &plan.content_type,
                    hmac: plan.hmac.as_ref().map(|h| (h, plan.id_locators.as_slice())),
                })?;
                let t0 = Instant::now();
                let outcome = link.post(&url, headers, body, timeout).await;
                let latency = t0.elapsed();
                match outcome {
                    Ok((status, answer)) => {
                        let text = String::from_utf8_lossy(&answer);
                        let duplicate = text.contains("\"duplicate\":true");
                        if !quiet {
                            report.line(format!(
                                "{n} {id} {status} {:.1}ms {}\n",
                                latency.as_secs_f64() * 1e3,
                                text.trim()
                            ))?;
                        }
                        results.push((Some(status), latency, duplicate));
                    }
                    Err(e) => {
                        if !quiet {
                            report.line(format!(
                                "{n} {id} error {:.1}ms {e:#}\n",
                                latency.as_secs_f64() * 1e3
                            ))?;
                        }
                        results.push((None, latency, false));
                    }
                }
            }
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await??);
    }
    let elapsed = started.elapsed();
    if report.closed.load(Ordering::Relaxed) {
        eprintln!("standard output was closed: the answers after it were not printed");
    }
    Ok(summarize(&all, elapsed))
}

fn summarize(results: &[(Option<u16>, Duration, bool)], elapsed: Duration) -> bool {
    let mut by_status: std::collections::BTreeMap<String, u64> = Default::default();
    for (status, _, _) in results {
        *by_status
            .entry(status.map_or("error".into(), |s| s.to_string()))
            .or_default() += 1;
    }
    let duplicates = results.iter().filter(|r| r.2).count();
    let mut latencies: Vec<Duration> = results.iter().map(|r| r.1).collect();
    latencies.sort();
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    let statuses: Vec<String> = by_status.iter().map(|(s, n)| format!("{s}×{n}")).collect();
    eprintln!(
        "sent {} in {:.2}s ({:.0}/s): {} ({} duplicates); latency p50 {:.1}ms p99 {:.1}ms",
        results.len(),
        elapsed.as_secs_f64(),
        results.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        statuses.join(" "),
        duplicates,
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
    );
    results
        .iter()
        .all(|(s, _, _)| s.is_some_and(|s| (200..300).contains(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_keeps_every_other_byte() {
        let body = br#"{ "type" : "a.b",  "id":"evt_old", "z": {"k": [1, 2]}, "u": "\u00e9" }"#;
        let out = splice(body, "/id", r#""evt_new""#).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{ "type" : "a.b",  "id":"evt_new", "z": {"k": [1, 2]}, "u": "\u00e9" }"#
        );
        let out = splice(body, "/z/k/1", "7").unwrap();
        assert!(String::from_utf8(out).unwrap().contains(r#""k": [1, 7]"#));
    }

    #[test]
    fn splice_adds_what_is_missing_as_first_members() {
        assert_eq!(
            splice(br#"{"a": 1}"#, "/id", r#""x""#).unwrap(),
            br#"{"id":"x","a": 1}"#
        );
        assert_eq!(splice(b"{}", "/id", r#""x""#).unwrap(), br#"{"id":"x"}"#);
        assert_eq!(
            splice(br#"{"data": {"n": 2}}"#, "/data/object/id", r#""y""#).unwrap(),
            br#"{"data": {"object":{"id":"y"},"n": 2}}"#
        );
    }

    #[test]
    fn splice_refuses_what_it_cannot_write_into() {
        assert!(splice(b"not json", "/id", "1").is_err());
        assert!(splice(br#"{"a": 1}"#, "/a/b", "1").is_err());
        assert!(splice(br#"[1]"#, "/5", "1").is_err());
        assert!(splice(br#"{"a": 1} trailing"#, "/a", "1").is_err());
    }
}
