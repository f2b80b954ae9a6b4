//! One delivery attempt: the signed POST to the app (or the publish to a
//! JetStream stream, `jetstream.rs`) and what came back.
//!
//! Sends the delivery contract (DESIGN.md): the exact raw body, the
//! contract's headers as `standard_webhooks::Message` builds them
//! (`webhook-id`, the event's public id, stable across attempts and
//! replays; `webhook-timestamp`; `webhook-signature`, signed with the
//! destination's own key; the `hookinbox-*` headers and the original
//! content type), then the provider headers the source forwards; a
//! JetStream message carries the same headers. It knows nothing of schedules or
//! storage: the scheduler gives it an event and an attempt number and gets
//! back an [`Attempt`] to record.

pub mod breaker;
pub mod jetstream;
pub mod policy;

use std::time::Duration;

use tokio::time::Instant;

use crate::clock::Clock;
use crate::config::{DeliveryConfig, SourceName};
use crate::standard_webhooks::{Message, SIGNATURE_AT, SigningKeys};
use crate::store::StoredEvent;
use crate::store::schema::{Attempt, AttemptClass};
use crate::words::AttemptOutcome;

/// What every delivery request says it is.
const USER_AGENT: &str = concat!("hookinbox/", env!("CARGO_PKG_VERSION"));
/// The start of an answer kept with the attempt, for people reading the DLQ.
pub const SNIPPET_BYTES: usize = 512;
/// An answer is read up to this much, then the connection is dropped.
const READ_CAP: usize = 64 * 1024;
/// The answer's headers kept with an attempt, at most.
pub const MAX_ANSWER_HEADERS: usize = 32;
/// A header's value kept with an attempt is cut to this many bytes.
const MAX_HEADER_VALUE: usize = 256;
/// How much of a secret or a signature an attempt keeps: enough to tell
/// two apart, too little to use.
const SHOWN_CHARS: usize = 8;

/// Whether a header's value is a secret or a signature, which an attempt
/// keeps only the start of: the contract's signature, and any header named
/// like a credential (a provider's forwarded signature, an app's cookie).
fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "signature",
        "authorization",
        "token",
        "secret",
        "cookie",
        "key",
        "password",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// A header as an attempt keeps it: a secret's or a signature's first
/// [`SHOWN_CHARS`] characters and `…`; any other value cut to
/// [`MAX_HEADER_VALUE`] bytes.
pub fn shown(name: &str, value: &str) -> (String, String) {
    let value = if is_secret(name) {
        match value.char_indices().nth(SHOWN_CHARS) {
            Some((end, _)) => format!("{}…", &value[..end]),
            None => "…".to_owned(),
        }
    } else {
        let mut end = value.len().min(MAX_HEADER_VALUE);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        value[..end].to_owned()
    };
    (name.to_ascii_lowercase(), value)
}

/// What an attempt keeps of the request's headers: those the event does
/// not determine (the signature's start, forwarded provider headers),
/// cut by [`shown`]. Each attempt's row is written in the delivery's
/// commit, so the rest, rebuilt on reading ([`Message::sent`]), is not
/// stored: keeping every header cost 8–37 % of deliveries per second
/// (docs/benchmarks.md#attempts-in-full-2026-11-27).
/// `headers` are what [`Destination::contract_headers`] made: the
/// contract's first `contract` (the signature among them), then the
/// forwarded ones.
fn kept(headers: &[(String, String)], contract: usize) -> Vec<(String, String)> {
    headers
        .get(SIGNATURE_AT)
        .into_iter()
        .chain(headers.get(contract..).unwrap_or_default())
        .map(|(k, v)| shown(k, v))
        .collect()
}

/// A source's destination, ready to send to.
pub struct Destination {
    /// The source whose events it receives.
    pub source: SourceName,
    pub config: DeliveryConfig,
    key: SigningKeys,
    transport: Transport,
}

/// How a destination is reached.
enum Transport {
    /// An app: one POST per attempt.
    Http(reqwest::Client),
    /// A JetStream stream: one publish per attempt, acked by the stream.
    JetStream(Box<jetstream::Link>),
}

/// Why a destination cannot be made ready to deliver; the app does not
/// start. Each names the destination's route.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Its `ca_file` holds no certificate reqwest can use: the operator's
    /// to fix, and a restart would fail the same way.
    #[error("destination {route}: ca_file: {cause}")]
    CaFile {
        route: String,
        #[source]
        cause: reqwest::Error,
    },
    /// The HTTP client (its TLS backend) cannot be built.
    #[error("destination {route}: cannot build the HTTP client: {cause}")]
    HttpClient {
        route: String,
        #[source]
        cause: reqwest::Error,
    },
}

impl Destination {
    /// Its name: its queue's, the route (the source's name, or `source.name`).
    pub fn name(&self) -> &str {
        &self.config.route
    }

    pub fn new(source: SourceName, config: DeliveryConfig) -> Result<Destination, SetupError> {
        let key = config.secret.clone();
        let name = config.route.clone();
        if let Some(target) = config.jetstream.clone() {
            let link = jetstream::Link::new(&config, target);
            return Ok(Destination {
                source,
                config,
                key,
                transport: Transport::JetStream(Box::new(link)),
            });
        }
        // Installing twice is harmless: the second call reports the first provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder();
        if let Some(ca) = &config.ca {
            let roots = reqwest::Certificate::from_pem_bundle(&ca.pem).map_err(|cause| {
                SetupError::CaFile {
                    route: name.clone(),
                    cause,
                }
            })?;
            builder = builder.tls_certs_merge(roots);
        }
        let client = builder
            .connect_timeout(config.connect_timeout)
            .timeout(config.timeout)
            // A redirect is an answer (3xx, dead-lettered with its status),
            // never a reason to post the payload somewhere else.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(USER_AGENT)
            .pool_max_idle_per_host(config.max_concurrency)
            .build()
            .map_err(|cause| SetupError::HttpClient { route: name, cause })?;
        Ok(Destination {
            source,
            config,
            key,
            transport: Transport::Http(client),
        })
    }

    /// The headers of one attempt at `started_ms`, the same on an HTTP
    /// request and a JetStream message: the contract's, then the provider's
    /// it forwards, then the attempt's trace context (`trace`: none without
    /// `[telemetry]`), which replaces a forwarded one of the same name; and
    /// how many are the contract's. The signature covers none of them.
    fn contract_headers(
        &self,
        event: &StoredEvent,
        attempt: u32,
        started_ms: u64,
        trace: Vec<(String, String)>,
    ) -> (Vec<(String, String)>, usize) {
        let rec = &event.record;
        let message = Message {
            id: &event.id,
            source: &rec.source,
            event_id: &rec.event_id,
            event_type: rec.event_type.as_deref(),
            content_type: rec.content_type.as_deref(),
            origin: crate::standard_webhooks::origin_of(&rec.headers),
            body: &rec.body,
        };
        let mut headers = message.headers(&self.key, attempt, started_ms);
        let contract = headers.len();
        for (name, value) in &rec.headers {
            if self
                .config
                .forward_headers
                .iter()
                .any(|h| h.as_str().eq_ignore_ascii_case(name))
            {
                headers.push((name.clone(), value.clone()));
            }
        }
        if !trace.is_empty() {
            headers.retain(|(name, _)| !trace.iter().any(|(t, _)| t.eq_ignore_ascii_case(name)));
            headers.extend(trace);
        }
        (headers, contract)
    }

    /// Sends `event` once, with `trace`'s headers (the attempt's trace
    /// context). Returns what happened and, on 429/503, the wait the
    /// destination asked for.
    pub async fn attempt(
        &self,
        event: &StoredEvent,
        attempt: u32,
        clock: &Clock,
        trace: Vec<(String, String)>,
    ) -> (Attempt, Option<Duration>) {
        let started_ms = clock.now_ms();
        let timer = Instant::now();
        let rec = &event.record;
        let (headers, contract) = self.contract_headers(event, attempt, started_ms, trace);
        let client = match &self.transport {
            Transport::Http(client) => client,
            Transport::JetStream(link) => {
                let mut map = async_nats::HeaderMap::new();
                for (name, value) in &headers {
                    // A value NATS cannot carry (a line break) is left out
                    // rather than allowed to break the message's framing.
                    if !value.contains(['\r', '\n']) {
                        map.insert(name.as_str(), value.as_str());
                    }
                }
                // A replay is a new publish on purpose: outside the first
                // round's id, so the stream's duplicate window keeps it.
                let msg_id = match event.state.replays {
                    0 => event.id.clone(),
                    n => format!("{}.r{n}", event.id),
                };
                let subject = link.subject(&rec.source, rec.event_type.as_deref());
                let published = link.publish(subject, &msg_id, map, rec.body.clone()).await;
                let record = Attempt {
                    started_ms,
                    latency_ms: timer.elapsed().as_millis() as u64,
                    class: published.class,
                    status: None,
                    error: published.error,
                    response_snippet: published.answer,
                    round: event.state.replays,
                    first_byte_ms: None,
                    request_headers: kept(&headers, contract),
                    response_headers: Vec::new(),
                };
                return (record, None);
            }
        };
        let mut req = client.post(self.config.url.clone());
        for (name, value) in &headers {
            req = req.header(name.as_str(), value.as_str());
        }
        let request = req.body(rec.body.clone()).send();
        // reqwest's own timeout covers the exchange; this one also bounds the
        // body read below, whatever the destination does.
        let result = tokio::time::timeout(self.config.timeout, async {
            let mut response = request.await?;
            let first_byte_ms = timer.elapsed().as_millis() as u64;
            let answer_headers: Vec<(String, String)> = response
                .headers()
                .iter()
                .take(MAX_ANSWER_HEADERS)
                .map(|(k, v)| shown(k.as_str(), &String::from_utf8_lossy(v.as_bytes())))
                .collect();
            let status = response.status().as_u16();
            let retry_after = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| policy::parse_retry_after(v, clock.now()));
            let mut body = Vec::new();
            while body.len() < READ_CAP {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    Ok(None) => break,
                    // The status is what counts; a broken answer body does not undo it.
                    Err(_) => break,
                }
            }
            Ok::<_, reqwest::Error>((status, retry_after, body, first_byte_ms, answer_headers))
        })
        .await;
        let latency_ms = timer.elapsed().as_millis() as u64;
        let mut request_headers = kept(&headers, contract);
        request_headers.push(shown("user-agent", USER_AGENT));
        let mut record = Attempt {
            started_ms,
            latency_ms,
            class: AttemptClass::Transport,
            status: None,
            error: None,
            response_snippet: None,
            round: event.state.replays,
            first_byte_ms: None,
            request_headers,
            response_headers: Vec::new(),
        };
        let mut asked = None;
        match result {
            Ok(Ok((status, retry_after, body, first_byte_ms, answer_headers))) => {
                record.class = policy::classify_status(&self.config, status);
                record.status = Some(status);
                record.response_snippet = snippet(&body);
                record.first_byte_ms = Some(first_byte_ms);
                record.response_headers = answer_headers;
                if matches!(status, 429 | 503) {
                    asked = retry_after;
                }
            }
            Ok(Err(e)) => {
                record.class = if e.is_timeout() {
                    AttemptClass::Timeout
                } else if e.is_connect() {
                    AttemptClass::Connect
                } else {
                    AttemptClass::Transport
                };
                record.error = Some(error_chain(e));
            }
            Err(_) => {
                record.class = AttemptClass::Timeout;
                record.error = Some(format!(
                    "no complete answer within {}",
                    humantime::format_duration(self.config.timeout)
                ));
            }
        }
        (record, asked)
    }
}

/// The error and its causes, one line; no URL query (it may hold a token).
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn snippet(body: &[u8]) -> Option<String> {
    if body.is_empty() {
        return None;
    }
    let mut end = body.len().min(SNIPPET_BYTES);
    // Cut on a character boundary when the body is UTF-8.
    while end > 0 && end < body.len() && (body[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    Some(String::from_utf8_lossy(&body[..end]).into_owned())
}

/// The word for a class: the metrics' label and the admin API's outcome.
impl From<AttemptClass> for AttemptOutcome {
    fn from(class: AttemptClass) -> AttemptOutcome {
        match class {
            AttemptClass::Delivered => AttemptOutcome::Delivered,
            AttemptClass::RetryableStatus => AttemptOutcome::RetryableStatus,
            AttemptClass::RejectedStatus => AttemptOutcome::RejectedStatus,
            AttemptClass::Timeout => AttemptOutcome::Timeout,
            AttemptClass::Connect => AttemptOutcome::Connect,
            AttemptClass::Transport => AttemptOutcome::Transport,
            AttemptClass::Interrupted => AttemptOutcome::Interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signature or a credential keeps its first 8 characters; anything
    /// else is kept, cut to 256 bytes on a character boundary; names are
    /// lower case.
    #[test]
    fn an_attempt_keeps_only_the_start_of_a_secret() {
        let cases = [
            (
                "webhook-signature",
                "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
                "v1,K5oZf…",
            ),
            ("Authorization", "Bearer abcdefghijklmnop", "Bearer a…"),
            ("Stripe-Signature", "t=1,v1=abc", "t=1,v1=a…"),
            ("set-cookie", "session=0123456789", "session=…"),
            ("x-api-key", "short", "…"),
            ("X-Request-Id", "req_123", "req_123"),
        ];
        for (name, value, want) in cases {
            assert_eq!(
                shown(name, value),
                (name.to_ascii_lowercase(), want.to_owned()),
                "{name}"
            );
        }
        let long = "é".repeat(200);
        let (_, kept) = shown("x-trace", &long);
        assert!(
            kept.len() <= 256 && long.starts_with(&kept),
            "{}",
            kept.len()
        );
    }

    /// The admin API and the DLQ reason show `as_str`, the metrics their
    /// label: one word each.
    #[test]
    fn the_metric_label_says_what_the_admin_api_says() {
        for class in [
            AttemptClass::Delivered,
            AttemptClass::RetryableStatus,
            AttemptClass::RejectedStatus,
            AttemptClass::Timeout,
            AttemptClass::Connect,
            AttemptClass::Transport,
            AttemptClass::Interrupted,
        ] {
            assert_eq!(AttemptOutcome::from(class).as_str(), class.as_str());
        }
    }

    #[test]
    fn snippets_are_capped_on_a_character_boundary() {
        assert_eq!(snippet(b""), None);
        assert_eq!(snippet(b"oops").as_deref(), Some("oops"));
        let long = "é".repeat(400);
        let s = snippet(long.as_bytes()).unwrap();
        assert!(
            s.len() <= SNIPPET_BYTES && s.chars().all(|c| c == 'é'),
            "{s}"
        );
    }
}
