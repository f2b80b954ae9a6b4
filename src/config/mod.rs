//! Configuration: embedded commented defaults → TOML file → `HOOKINBOX_*`
//! environment → one validated [`Config`] with typed fields → its secrets
//! resolved.
//!
//! This module owns parsing, validation and secrets only. It knows the
//! vocabulary of a source (kind, secrets, where the event id lives) but no
//! provider facts: the per-kind defaults for tolerance and event id belong
//! to `verify`. Secrets named by the file (inline, `*_env`, `*_file`) are read
//! at load, and those left to the data dir by [`Config::resolve`]: here, once,
//! so no other module reads the environment or a secret file.
//!
//! `raw.rs` holds the file as written and what a key left out means;
//! `validate/` checks it into a typed config; `show.rs` prints a config
//! back in the file's form, secrets redacted; `resolve.rs` is the step from a
//! loaded config to one with every secret.

mod raw;
mod resolve;
mod secret;
mod show;
mod validate;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use resolve::{
    GeneratedSecret, GivenSecret, Loaded, ResolveError, Resolved, SecretPlan, SecretPurpose, Stage,
};
pub use secret::{Secret, SecretOrigin};

/// The embedded default configuration: it serves with no file at all.
pub const DEFAULT_TOML: &str = include_str!("default.toml");

/// Where a configuration came from, for error messages.
pub const EMBEDDED_ORIGIN: &str = "<embedded default config>";

/// The validated configuration every module receives its slice of. `S` is
/// [`Loaded`] until [`Config::resolve`] has read the secrets the config
/// leaves to the data dir, and [`Resolved`] (every secret present) after.
#[derive(Debug, Clone)]
pub struct Config<S: Stage = Resolved> {
    /// The file it was read from, or [`EMBEDDED_ORIGIN`].
    pub origin: String,
    pub server: ServerConfig,
    pub retention: RetentionConfig,
    pub log: LogConfig,
    pub admin: AdminConfig<S>,
    /// `None`: no alert URL configured (metrics and logs still tell).
    pub alerts: Option<AlertConfig>,
    pub sources: Vec<SourceConfig<S>>,
    /// Non-fatal findings (inline secrets, …) to log at start.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub data_dir: PathBuf,
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub shutdown_timeout: Duration,
    /// Open ingest connections at most; past it a new one closes the open
    /// one that has waited longest for a request head.
    pub max_connections: usize,
    /// Request bodies held in memory at once, over all ingest requests
    /// (bodies of at most 64 KiB have a further quarter of it reserved).
    pub max_buffered_body: usize,
    /// TLS on the ingest listener (the admin listener stays on loopback).
    pub tls: Option<crate::tls::TlsFiles>,
}

#[derive(Debug, Clone)]
pub struct RetentionConfig {
    pub dedupe_ttl: Duration,
    /// Delivered events are deleted this long after delivery.
    pub payload_ttl: Duration,
    /// Dead-lettered and ignored events are deleted this long after.
    pub dlq_ttl: Duration,
    pub sweep_interval: Duration,
}

/// Where and when to post alerts.
#[derive(Debug, Clone)]
pub struct AlertConfig {
    /// A URL that takes `{"text": …}` (a Slack incoming webhook, or your own).
    pub url: reqwest::Url,
    /// Alert when a source's DLQ holds more than this many events.
    pub dlq_threshold: u64,
    /// Alert when a source's oldest pending event is older than this.
    pub pending_age: Duration,
    /// The same alert (kind + source) at most once per this window.
    pub min_interval: Duration,
    /// How often the conditions are checked.
    pub check_interval: Duration,
    /// The body's shape: Slack's `{"text": …}` or the plain JSON object.
    pub format: AlertFormat,
    /// The machine named in each alert; `None`: the host name.
    pub host: Option<String>,
    /// Where people open the dashboard (a tunnel or proxy to the admin
    /// listener); `None`: `http://` the admin listener's address.
    pub dashboard_url: Option<reqwest::Url>,
}

/// The body an alert is posted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertFormat {
    /// `{"text": "…", "hookinbox": {…}}`: a Slack (or Mattermost, Rocket.Chat,
    /// Discord `/slack`) incoming webhook shows the text.
    Slack,
    /// The alert object alone, for a receiver of your own.
    Json,
}

/// The admin listener's bearer token.
#[derive(Debug, Clone)]
pub struct AdminConfig<S: Stage = Resolved> {
    pub token: S::AdminToken,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub level: String,
    pub format: LogFormat,
    /// How often the one-line summary of what happened is logged at info.
    pub summary_interval: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// A source's name: the `{source}` of `POST /in/{source}`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceName(Arc<str>);

impl SourceName {
    /// 1 to 64 characters of `a-z 0-9 _ -`: safe in a URL path, a metric label
    /// and a file name without escaping.
    pub fn parse(text: &str) -> Result<SourceName, String> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if ok {
            Ok(SourceName(Arc::from(text)))
        } else {
            Err(format!(
                "{text:?} is not a valid source name: use 1 to 64 characters of a-z, 0-9, '_' and '-'"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// The provider scheme a source verifies with. Its names in the file are
/// [`Kind::as_str`]'s (a test holds serde's to them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Stripe,
    Github,
    Shopify,
    Slack,
    /// "svix" and "standardwebhooks" are the same scheme under other names.
    #[serde(
        alias = "svix",
        alias = "standardwebhooks",
        alias = "standard-webhooks"
    )]
    Standard,
    Paddle,
    Linear,
    Twilio,
    Gitlab,
    /// Twitch EventSub over webhooks.
    Twitch,
    Zoom,
    /// Meta's Graph API webhooks: WhatsApp Cloud API, Messenger, Instagram.
    #[serde(alias = "whatsapp", alias = "facebook", alias = "instagram")]
    Meta,
    Hmac,
}

impl Kind {
    pub const ALL: [Kind; 13] = [
        Kind::Stripe,
        Kind::Github,
        Kind::Shopify,
        Kind::Slack,
        Kind::Standard,
        Kind::Paddle,
        Kind::Linear,
        Kind::Twilio,
        Kind::Gitlab,
        Kind::Twitch,
        Kind::Zoom,
        Kind::Meta,
        Kind::Hmac,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Stripe => "stripe",
            Kind::Github => "github",
            Kind::Shopify => "shopify",
            Kind::Slack => "slack",
            Kind::Standard => "standard",
            Kind::Paddle => "paddle",
            Kind::Linear => "linear",
            Kind::Twilio => "twilio",
            Kind::Gitlab => "gitlab",
            Kind::Twitch => "twitch",
            Kind::Zoom => "zoom",
            Kind::Meta => "meta",
            Kind::Hmac => "hmac",
        }
    }

    /// A kind as the config file names it (`send --provider` takes the same names).
    pub fn parse(text: &str) -> Result<Kind, String> {
        parse_name(text)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where in a request a value (event id, event type) is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locator {
    /// `header:Name`: a request header (case-insensitive).
    Header(http::HeaderName),
    /// `json:/pointer`: an RFC 6901 pointer into a JSON body.
    Json(String),
    /// `form:name`: a field of an `application/x-www-form-urlencoded` body.
    Form(String),
    /// `body-sha256`: the hex SHA-256 of the raw body, for senders with no id.
    BodySha256,
}

impl Locator {
    pub fn parse(text: &str) -> Result<Locator, String> {
        if text == "body-sha256" {
            return Ok(Locator::BodySha256);
        }
        let Some((prefix, rest)) = text.split_once(':') else {
            return Err(format!(
                "{text:?} is not a locator: use \"header:Name\", \"json:/pointer\", \"form:name\" or \"body-sha256\""
            ));
        };
        match prefix {
            "header" => http::HeaderName::from_bytes(rest.as_bytes())
                .map(Locator::Header)
                .map_err(|_| format!("{rest:?} is not a valid header name")),
            "json" if rest.is_empty() || rest.starts_with('/') => {
                Ok(Locator::Json(rest.to_owned()))
            }
            "json" => Err(format!("JSON pointer {rest:?} must start with '/'")),
            "form" if !rest.is_empty() => Ok(Locator::Form(rest.to_owned())),
            _ => Err(format!(
                "{text:?} is not a locator: use \"header:Name\", \"json:/pointer\", \"form:name\" or \"body-sha256\""
            )),
        }
    }
}

impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Locator::Header(name) => write!(f, "header:{name}"),
            Locator::Json(pointer) => write!(f, "json:{pointer}"),
            Locator::Form(name) => write!(f, "form:{name}"),
            Locator::BodySha256 => f.write_str("body-sha256"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HmacAlgorithm {
    Sha1,
    Sha256,
    Sha512,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignatureEncoding {
    Hex,
    Base64,
}

/// One piece of an `hmac` source's `signed_payload` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadPart {
    Literal(String),
    Body,
    Timestamp,
    Header(http::HeaderName),
}

/// The generic `hmac` kind's scheme.
#[derive(Debug, Clone)]
pub struct HmacSpec {
    pub signature_header: http::HeaderName,
    pub algorithm: HmacAlgorithm,
    pub encoding: SignatureEncoding,
    pub prefix: String,
    pub signed_payload: Vec<PayloadPart>,
    pub timestamp_header: Option<http::HeaderName>,
}

#[derive(Debug, Clone)]
pub struct SourceConfig<S: Stage = Resolved> {
    pub name: SourceName,
    pub kind: Kind,
    /// Every active secret, in the order read (file, environment, inline).
    /// Once resolved, never empty.
    pub secrets: S::SourceSecrets,
    /// `None`: the kind's default (see `verify`).
    pub tolerance: Option<Duration>,
    pub max_body: usize,
    /// `None`: the kind's default (see `verify`).
    pub event_id: Option<Vec<Locator>>,
    pub event_type: Option<Vec<Locator>>,
    pub public_url: Option<String>,
    /// Meta's subscription check (`GET …?hub.verify_token=…`): the token
    /// typed into the app's webhook settings. Set for kind `meta` only.
    pub verify_token: Option<GivenSecret<Secret>>,
    /// Where and how events are delivered, each destination on its own
    /// queue; none: events are held.
    pub destinations: Vec<DeliveryConfig<S>>,
    pub hmac: Option<HmacSpec>,
}

/// One destination of a source and the rules for delivering to it.
#[derive(Debug, Clone)]
pub struct DeliveryConfig<S: Stage = Resolved> {
    /// The table's `name`; `None`: the source's own destination (the
    /// one-URL form, or the one table without a name).
    pub name: Option<String>,
    /// Its queue's name, which the store, the admin API and the metrics
    /// know it by: the source's name, or `source.name`.
    pub route: String,
    pub url: reqwest::Url,
    /// The Standard Webhooks key that signs deliveries.
    pub secret: S::DestinationKey,
    /// Extra trusted roots for an HTTPS (or TLS NATS) destination with a
    /// private CA, beside the system's.
    pub ca: Option<CaFile>,
    /// `Some`: a NATS JetStream destination (`nats://` or `tls://`);
    /// `None`: an HTTP(S) app.
    pub jetstream: Option<JetStreamTarget>,
    /// `Some`: only the events it accepts are delivered.
    pub filter: Option<DeliveryFilter>,
    /// Provider headers passed through to the app, beside hookinbox's own.
    pub forward_headers: Vec<http::HeaderName>,
    pub connect_timeout: Duration,
    /// For the whole attempt: connect, send, and read the answer.
    pub timeout: Duration,
    pub initial_interval: Duration,
    pub max_interval: Duration,
    pub max_attempts: u32,
    /// Counted from receipt (or the last replay); past it, dead-letter.
    pub max_age: Duration,
    /// Statuses that are retried; any other non-2xx dead-letters at once.
    pub retry_statuses: Vec<StatusPattern>,
    pub max_concurrency: usize,
    /// Events per second at most; `None`: no limit.
    pub max_rate: Option<f64>,
    pub paused: bool,
    /// Per-key ordering; `None`: events are delivered in any order.
    pub ordering: Option<OrderingConfig>,
    /// Consecutive failed attempts that open the circuit.
    pub breaker_failures: u32,
    /// How long an open circuit waits before one probe.
    pub breaker_cooldown: Duration,
}

/// Which events a destination takes; the others are stored as filtered,
/// never delivered. Both parts must pass when both are set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFilter {
    /// The event's type matches one of these; `None`: any type.
    pub types: Option<Vec<TypePattern>>,
    /// The value at a JSON pointer in the body: `(pointer, value)`, with
    /// the value compared as a JSON scalar or as a string's text.
    pub matching: Option<(String, String)>,
}

/// An event type, or a pattern with `*` for any run of characters
/// (`invoice.*`, `*.created`, `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypePattern(String);

impl TypePattern {
    pub fn parse(text: &str) -> Result<TypePattern, String> {
        if text.is_empty() || text.chars().any(char::is_control) {
            return Err(format!("{text:?} is not an event type or pattern"));
        }
        Ok(TypePattern(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `event_type` matches: equal, or with each `*` standing for
    /// any run of characters (none included).
    pub fn matches(&self, event_type: &str) -> bool {
        let mut parts = self.0.split('*');
        let first = parts.next().unwrap_or("");
        let Some(mut rest) = event_type.strip_prefix(first) else {
            return false;
        };
        let parts: Vec<&str> = parts.collect();
        let Some((last, middle)) = parts.split_last() else {
            // No `*`: the whole type.
            return rest.is_empty();
        };
        for part in middle {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.len() >= last.len() && rest.ends_with(last)
    }
}

/// Where a JetStream destination publishes: `destination = "nats://…"`.
#[derive(Debug, Clone)]
pub struct JetStreamTarget {
    /// The subject of each event's message.
    pub subject: SubjectTemplate,
    /// A NATS credentials file (JWT and NKey seed), for an account server.
    pub creds_file: Option<PathBuf>,
}

/// A NATS subject with `{source}` and `{event_type}` in place of whole
/// tokens, e.g. `webhooks.{source}.{event_type}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectTemplate {
    tokens: Vec<SubjectToken>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SubjectToken {
    Literal(String),
    Source,
    EventType,
}

/// What stands for an event without a type in a subject.
pub const NO_TYPE_TOKEN: &str = "_";

impl SubjectTemplate {
    /// Tokens are separated by `.`; each is `{source}`, `{event_type}`, or
    /// literal text without whitespace, `*` or `>` (wildcards are for
    /// subscribers, not publishers).
    pub fn parse(text: &str) -> Result<SubjectTemplate, String> {
        let tokens = text
            .split('.')
            .map(|token| match token {
                "{source}" => Ok(SubjectToken::Source),
                "{event_type}" => Ok(SubjectToken::EventType),
                "" => Err(format!(
                    "{text:?} has an empty token (two dots, or one at an end)"
                )),
                t if t.contains(['{', '}']) => Err(format!(
                    "{t:?}: a placeholder is a whole token, {{source}} or {{event_type}}"
                )),
                t if t
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '*' || c == '>') =>
                {
                    Err(format!("{t:?}: no whitespace, '*' or '>' in a subject"))
                }
                t => Ok(SubjectToken::Literal(t.to_owned())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SubjectTemplate { tokens })
    }

    /// The subject of an event. An event type's own dots make tokens
    /// (`invoice.paid` → `….invoice.paid`, so `webhooks.stripe.invoice.>`
    /// subscribes to a family); characters a subject cannot hold become `_`,
    /// as does an empty token, and a missing type is [`NO_TYPE_TOKEN`].
    pub fn render(&self, source: &str, event_type: Option<&str>) -> String {
        let mut out = String::new();
        for (i, token) in self.tokens.iter().enumerate() {
            if i > 0 {
                out.push('.');
            }
            match token {
                SubjectToken::Literal(t) => out.push_str(t),
                SubjectToken::Source => push_tokens(&mut out, source),
                SubjectToken::EventType => match event_type {
                    Some(t) => push_tokens(&mut out, t),
                    None => out.push_str(NO_TYPE_TOKEN),
                },
            }
        }
        out
    }
}

/// `value` as one or more subject tokens (split on its dots).
fn push_tokens(out: &mut String, value: &str) {
    for (i, part) in value.split('.').enumerate() {
        if i > 0 {
            out.push('.');
        }
        if part.is_empty() {
            out.push('_');
        }
        out.extend(part.chars().map(|c| {
            if c.is_whitespace() || c.is_control() || c == '*' || c == '>' {
                '_'
            } else {
                c
            }
        }));
    }
}

impl std::fmt::Display for SubjectTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, token) in self.tokens.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            match token {
                SubjectToken::Literal(t) => f.write_str(t)?,
                SubjectToken::Source => f.write_str("{source}")?,
                SubjectToken::EventType => f.write_str("{event_type}")?,
            }
        }
        Ok(())
    }
}

/// A destination's extra trusted roots: the file named, and the PEM read
/// from it at load.
#[derive(Debug, Clone)]
pub struct CaFile {
    pub path: PathBuf,
    pub pem: Vec<u8>,
}

/// Events with the same key (a JSON pointer into the body) are delivered one
/// at a time, in the order received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderingConfig {
    pub pointer: String,
    pub on_dead_letter: OnDeadLetter,
}

/// What a dead-lettered event does to the later events of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDeadLetter {
    /// They go on; the dead one is out of the line.
    Skip,
    /// They wait until it is replayed (and delivered) or ignored.
    Block,
}

/// One entry of `retry_statuses`: a code like 429, or a class like "5xx".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusPattern {
    Code(u16),
    Class(u16),
}

impl StatusPattern {
    pub fn parse(text: &str) -> Result<StatusPattern, String> {
        let bad = || format!("{text:?}: expected a status code like 429 or a class like \"5xx\"");
        if let Some(class) = text.strip_suffix("xx") {
            let c: u16 = class.parse().map_err(|_| bad())?;
            return if (1..=5).contains(&c) {
                Ok(StatusPattern::Class(c))
            } else {
                Err(bad())
            };
        }
        let code: u16 = text.parse().map_err(|_| bad())?;
        if (100..=599).contains(&code) {
            Ok(StatusPattern::Code(code))
        } else {
            Err(bad())
        }
    }

    pub fn matches(self, status: u16) -> bool {
        match self {
            StatusPattern::Code(c) => c == status,
            StatusPattern::Class(c) => status / 100 == c,
        }
    }
}

impl std::fmt::Display for StatusPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusPattern::Code(c) => write!(f, "{c}"),
            StatusPattern::Class(c) => write!(f, "{c}xx"),
        }
    }
}

/// A configuration error: names the file (or variable), the line and column
/// when the TOML parser found it, the key, and what is wrong:
/// `hookinbox.toml:12:11: source[0].kind: unknown variant …`.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    pub origin: String,
    /// Where in the file: the parser's place, or the value of the key that
    /// validation refused (`None` when the text cannot tell, as for a
    /// variable).
    pub position: Option<Position>,
    /// The key path, like `source[0].tolerance`; empty when there is none
    /// (a syntax error, a file that cannot be read).
    pub key: String,
    /// The name of the source the key belongs to, as the file gives it:
    /// `source[3]` alone makes the reader count tables.
    pub source_name: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(position) = self.position {
            write!(f, ":{position}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        if let Some(source) = &self.source_name {
            write!(f, " (source {source:?})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl ConfigError {
    /// Adds what the file's `text` tells about the key: where its value is
    /// (validation finds a bad value in the typed structs, which have
    /// forgotten it), and the name of the source it is in. A key the file
    /// does not have (a value that is missing) is placed at the nearest
    /// table that holds it. A key in `from_env` took a variable's value:
    /// the file's line for it would mislead.
    fn locate(mut self, text: &str, from_env: &[&str]) -> ConfigError {
        if self.key.is_empty() || from_env.contains(&self.key.as_str()) {
            return self;
        }
        let Ok(document) = toml::de::DeTable::parse(text) else {
            return self;
        };
        let mut at = None;
        let mut table = Some(document.get_ref());
        for segment in self.key.split('.') {
            let (name, index) = match segment.split_once('[') {
                Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
                None => (segment, None),
            };
            let Some(found) = table.and_then(|t| member(t, name)) else {
                break;
            };
            let mut value = found;
            if let (Some(i), toml::de::DeValue::Array(items)) = (index, found.get_ref()) {
                value = items.get(i).unwrap_or(found);
                if name == "source" && self.source_name.is_none() {
                    self.source_name = items
                        .get(i)
                        .and_then(|s| match s.get_ref() {
                            toml::de::DeValue::Table(t) => member(t, "name"),
                            _ => None,
                        })
                        .and_then(|n| match n.get_ref() {
                            toml::de::DeValue::String(n) => Some(n.to_string()),
                            _ => None,
                        });
                }
            }
            at = Some(value.span().start);
            table = match value.get_ref() {
                toml::de::DeValue::Table(t) => Some(t),
                _ => None,
            };
        }
        if self.position.is_none() {
            self.position = at.map(|offset| Position::of(text, offset));
        }
        self
    }
}

/// The value of `key` in a parsed table.
fn member<'t, 'i>(
    table: &'t toml::de::DeTable<'i>,
    key: &str,
) -> Option<&'t toml::Spanned<toml::de::DeValue<'i>>> {
    table
        .iter()
        .find(|(k, _)| &**k.get_ref() == key)
        .map(|(_, v)| v)
}

/// A place in a config file, both counted from 1; the column in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text`.
    fn of(text: &str, offset: usize) -> Position {
        // A span from the parser falls on a character boundary; be safe anyway.
        let end = (0..=offset.min(text.len()))
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        let before = &text[..end];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The text of the config file at `path`, and its name for messages.
fn read_config_file(path: &Path) -> Result<(String, String), ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        origin: origin.clone(),
        position: None,
        key: String::new(),
        source_name: None,
        message: format!("cannot read the config file: {e}"),
    })?;
    Ok((text, origin))
}

/// Where the packaged install keeps its config: the operator commands'
/// default when it exists. `HOOKINBOX_PACKAGED_CONFIG` names another place
/// (the tests' way to point it at files they make; not in `--help`).
pub const PACKAGED_CONFIG: &str = "/etc/hookinbox/hookinbox.toml";

/// The config file a command reads: `path` if given, else the packaged
/// config when it is there; `None`: the embedded default. A packaged
/// config that cannot be opened is an error, not the default.
fn given_or_packaged(
    path: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(path) = path {
        return Ok(Some(path.to_owned()));
    }
    let packaged =
        env("HOOKINBOX_PACKAGED_CONFIG").map_or_else(|| PACKAGED_CONFIG.into(), PathBuf::from);
    let opened = std::fs::File::open(&packaged).map(drop);
    Ok(packaged_is_there(&packaged, opened)?.then_some(packaged))
}

/// Whether the packaged config at `path` is there to read, from what
/// opening it did. Only "not found" means not installed, the embedded
/// default's cue. Anything else is an error: a user outside the hookinbox
/// group meets "permission denied" (`/etc/hookinbox` is 0750), and falling
/// back to the default would show them a config the server does not run.
fn packaged_is_there(path: &Path, opened: std::io::Result<()>) -> Result<bool, ConfigError> {
    let error = match opened {
        Ok(()) => return Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => e,
    };
    let why = match error.kind() {
        std::io::ErrorKind::PermissionDenied => {
            "permission denied; use sudo or join the hookinbox group (or pass --config)".to_owned()
        }
        _ => error.to_string(),
    };
    Err(ConfigError {
        origin: path.display().to_string(),
        position: None,
        key: String::new(),
        source_name: None,
        message: format!("cannot read the packaged config: {why}"),
    })
}

/// What the operator commands (`stats`, `events`, …) need of the server's
/// config: where its admin API listens and how its token is kept. Loaded
/// without the sources, whose secrets the operator's shell may not have.
#[derive(Debug)]
pub struct OperatorView {
    /// The file it came from, or the embedded default.
    pub origin: String,
    pub admin_listen: SocketAddr,
    pub data_dir: PathBuf,
    token: SecretPlan<GivenSecret<Secret>>,
}

impl OperatorView {
    /// `path`'s server and admin sections with the environment applied;
    /// without a path, the packaged config if it exists, else the embedded
    /// default.
    pub fn load(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OperatorView, ConfigError> {
        let path = given_or_packaged(path, env)?;
        let path = path.as_deref();
        let (text, origin) = match path {
            Some(path) => read_config_file(path)?,
            None => (DEFAULT_TOML.to_owned(), EMBEDDED_ORIGIN.to_owned()),
        };
        let mut file = raw::parse(&text, &origin).map_err(|e| e.locate(&text, &[]))?;
        raw::apply_env(&mut file, env)?;
        let from_env = raw::env_keys(env);
        let (server, admin) =
            validate::validate_operator(file, &origin, path.and_then(Path::parent), env)
                .map_err(|e| e.locate(&text, &from_env))?;
        Ok(OperatorView {
            origin,
            admin_listen: server.admin_listen,
            data_dir: server.data_dir,
            token: admin.token,
        })
    }

    /// The admin API's URL: the listen address, or loopback where it
    /// listens on every address.
    pub fn admin_url(&self) -> String {
        let mut addr = self.admin_listen;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        format!("http://{addr}")
    }

    /// The admin token: as the config gives it, or the one the server
    /// generated under its data dir.
    pub fn token(&self) -> Result<String, String> {
        match &self.token {
            SecretPlan::Given(given) => Ok(given.value.expose().to_owned()),
            SecretPlan::Generated => {
                let path = SecretPurpose::Admin.path(&self.data_dir);
                std::fs::read_to_string(&path)
                    .map(|t| t.trim().to_owned())
                    .map_err(|e| {
                        format!(
                            "{}: the admin token is generated, but {} cannot be read ({e}); \
                             run as the service's user or root, or set HOOKINBOX_ADMIN_TOKEN",
                            self.origin,
                            path.display()
                        )
                    })
            }
        }
    }
}

/// 1 MiB: larger than any provider's documented payload (Stripe and GitHub
/// cap theirs well below), small enough that a flood of them cannot exhaust memory.
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;

impl Config<Loaded> {
    /// The embedded default with the environment applied.
    pub fn embedded(env: &dyn Fn(&str) -> Option<String>) -> Result<Config<Loaded>, ConfigError> {
        Config::from_toml(DEFAULT_TOML, EMBEDDED_ORIGIN, None, env)
    }

    /// Reads `path`, applies the environment, validates.
    pub fn load(
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config<Loaded>, ConfigError> {
        let (text, origin) = read_config_file(path)?;
        Config::from_toml(&text, &origin, path.parent(), env)
    }

    /// `path`, else the packaged config if it exists, else the embedded
    /// default: what the commands that inspect a server's config (`config
    /// check`, `send --source`) read, as the operator commands do
    /// ([`OperatorView::load`]).
    pub fn load_or_packaged(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config<Loaded>, ConfigError> {
        match given_or_packaged(path, env)? {
            Some(path) => Config::load(&path, env),
            None => Config::embedded(env),
        }
    }

    /// `base_dir` resolves relative `*_file` paths (the config file's directory).
    pub fn from_toml(
        text: &str,
        origin: &str,
        base_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config<Loaded>, ConfigError> {
        let mut file = raw::parse(text, origin).map_err(|e| e.locate(text, &[]))?;
        raw::apply_env(&mut file, env)?;
        let from_env = raw::env_keys(env);
        validate::validate(file, origin, base_dir, env).map_err(|e| e.locate(text, &from_env))
    }

    /// The effective configuration as TOML, secrets redacted: what `config check` prints.
    pub fn to_redacted_toml(&self) -> String {
        show::redacted_toml(self)
    }
}

impl<S: Stage> Config<S> {
    pub fn source(&self, name: &str) -> Option<&SourceConfig<S>> {
        self.sources.iter().find(|s| s.name.as_str() == name)
    }
}

/// One of the names a serde enum of the file takes (`"json"`, `"stripe"`),
/// with the same error as in the file: "unknown variant `x`, expected …".
fn parse_name<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    use serde::de::IntoDeserializer;
    let text: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
        text.into_deserializer();
    T::deserialize(text).map_err(|e| e.to_string())
}

/// The environment of this process, for [`Config::load`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A URL as it may be shown in `config check`, a log line or the admin API:
/// scheme, host, port and path stay readable; the user info, the query and
/// the fragment, any of which may carry a credential (a password, an API
/// key), are replaced by `[redacted]`. This is the one function that decides
/// what of a configured URL is shown.
pub fn redact_url(url: &reqwest::Url) -> String {
    let mut shown = format!("{}://", url.scheme());
    if !url.username().is_empty() || url.password().is_some() {
        shown.push_str("[redacted]@");
    }
    shown.push_str(url.host_str().unwrap_or_default());
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(url.path());
    if url.query().is_some() {
        shown.push_str("?[redacted]");
    }
    if url.fragment().is_some() {
        shown.push_str("#[redacted]");
    }
    shown
}

/// Parses "30s", "5m", "3d", "250ms".
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        format!("{text:?} is not a duration ({e}); use e.g. \"500ms\", \"30s\", \"5m\", \"3d\"")
    })
}

/// Parses "1048576", "512KiB", "1MiB", "64KB".
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let unit_bytes: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?}; use B, KiB, MiB or GiB"
            ));
        }
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size; use e.g. \"512KiB\" or \"1MiB\""))?;
    n.checked_mul(unit_bytes)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// A bad value a variable gave is not placed at the file's line for
    /// the key it overrides.
    #[test]
    fn a_bad_value_from_a_variable_is_not_placed_in_the_file() {
        let env = |name: &str| (name == "HOOKINBOX_LOG_LEVEL").then(|| "loud".to_owned());
        let err = Config::from_toml("[log]\nlevel = \"info\"\n", "f.toml", None, &env)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("f.toml: log.level: \"loud\""), "{err}");
        let err = Config::from_toml("[log]\nlevel = \"loud\"\n", "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("f.toml:2:9: log.level: \"loud\""), "{err}");
    }

    /// Regression: a user outside the hookinbox group cannot open the
    /// packaged config (`/etc/hookinbox` is 0750), and `exists()` read that
    /// as "not installed": the embedded default was used in silence. Tests
    /// run as root, which no permission stops, so the error is injected.
    #[test]
    fn a_packaged_config_that_cannot_be_opened_is_an_error_not_the_default() {
        use std::io::{Error, ErrorKind};
        let path = Path::new(PACKAGED_CONFIG);
        assert!(packaged_is_there(path, Ok(())).unwrap());
        assert!(!packaged_is_there(path, Err(Error::from(ErrorKind::NotFound))).unwrap());
        let denied = packaged_is_there(path, Err(Error::from(ErrorKind::PermissionDenied)))
            .unwrap_err()
            .to_string();
        assert_eq!(
            denied,
            "/etc/hookinbox/hookinbox.toml: cannot read the packaged config: permission denied; \
             use sudo or join the hookinbox group (or pass --config)"
        );
        let other = packaged_is_there(path, Err(Error::from(ErrorKind::NotADirectory)));
        assert!(other.is_err());
    }

    #[test]
    fn embedded_default_is_valid_and_serves_demo() {
        let config = Config::embedded(&no_env).unwrap();
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(config.server.admin_listen.to_string(), "127.0.0.1:8081");
        assert_eq!(config.server.data_dir, PathBuf::from("./hookinbox-data"));
        assert_eq!(config.sources.len(), 1);
        let demo = &config.sources[0];
        assert_eq!(demo.name.as_str(), "demo");
        assert_eq!(demo.kind, Kind::Standard);
        assert!(matches!(demo.secrets, SecretPlan::Generated));
        assert_eq!(demo.max_body, DEFAULT_MAX_BODY);
    }

    #[test]
    fn a_subject_template_renders_each_event_type_as_tokens_nats_can_hold() {
        let t = SubjectTemplate::parse("webhooks.{source}.{event_type}").unwrap();
        assert_eq!(t.to_string(), "webhooks.{source}.{event_type}");
        assert_eq!(
            t.render("shop", Some("invoice.paid")),
            "webhooks.shop.invoice.paid"
        );
        assert_eq!(t.render("shop", None), "webhooks.shop._");
        assert_eq!(t.render("shop", Some("a b*>")), "webhooks.shop.a_b__");
        assert_eq!(t.render("shop", Some("a..b.")), "webhooks.shop.a._.b._");
        for bad in [
            "a..b",
            ".a",
            "a.",
            "a.{x}",
            "a.b*",
            "a.>",
            "x{source}",
            "a b",
        ] {
            assert!(SubjectTemplate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn type_patterns_match_whole_types_with_stars_for_any_run() {
        let m = |p: &str, t: &str| TypePattern::parse(p).unwrap().matches(t);
        assert!(m("invoice.paid", "invoice.paid"));
        assert!(!m("invoice.paid", "invoice.paid.x"));
        assert!(!m("invoice", "invoice.paid"));
        assert!(m("invoice.*", "invoice.paid"));
        assert!(m("invoice.*", "invoice.payment_failed.retry"));
        assert!(!m("invoice.*", "invoice"));
        assert!(!m("invoice.*", "charge.invoice.paid"));
        assert!(m("*.created", "customer.created"));
        assert!(!m("*.created", "customer.created.x"));
        assert!(m("*", "anything"));
        assert!(m("a*b*c", "a-b-c"));
        assert!(m("a*b*c", "abc"));
        assert!(!m("a*b*c", "a-c-b"));
        assert!(!m("ab*ba", "aba"), "the start and end may not overlap");
        assert!(TypePattern::parse("").is_err());
    }

    #[test]
    fn filters_need_a_destination_and_say_what_is_wrong() {
        let source = |rest: &str| {
            format!("[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n{rest}")
        };
        let load = |rest: &str| Config::from_toml(&source(rest), "f.toml", None, &no_env);
        let ok = load(
            "destination = \"http://127.0.0.1:9/\"\nfilter_types = [\"push\", \"pull_request*\"]\n\
             filter_match = \"/repository/private = false\"\n",
        )
        .unwrap();
        let filter = ok.sources[0].destinations[0].filter.clone().unwrap();
        assert_eq!(filter.types.unwrap().len(), 2);
        assert_eq!(
            filter.matching,
            Some(("/repository/private".to_owned(), "false".to_owned()))
        );
        for (rest, key, words) in [
            (
                "filter_types = [\"push\"]\n",
                "source[0].filter_types",
                "with a destination",
            ),
            (
                "destination = \"http://127.0.0.1:9/\"\nfilter_types = []\n",
                "source[0].filter_types",
                "every event",
            ),
            (
                "destination = \"http://127.0.0.1:9/\"\nfilter_types = [\"\"]\n",
                "source[0].filter_types",
                "not an event type",
            ),
            (
                "destination = \"http://127.0.0.1:9/\"\nfilter_match = \"livemode=true\"\n",
                "source[0].filter_match",
                "/json/pointer=value",
            ),
            (
                "destination = \"http://127.0.0.1:9/\"\nfilter_match = \"/livemode\"\n",
                "source[0].filter_match",
                "/json/pointer=value",
            ),
        ] {
            let err = load(rest).unwrap_err().to_string();
            assert!(
                err.starts_with("f.toml:")
                    && err.contains(&format!(": {key} (source \"s\"): "))
                    && err.contains(words),
                "{rest}: {err}"
            );
        }
    }

    #[test]
    fn destination_tables_give_each_destination_its_own_route_and_keys() {
        let source = |rest: &str| {
            format!("[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n{rest}")
        };
        let load = |rest: &str| Config::from_toml(&source(rest), "f.toml", None, &no_env);
        let ok = load(
            "[[source.destination]]\nurl = \"http://127.0.0.1:9/app\"\nmax_concurrency = 2\n\
             [[source.destination]]\nname = \"billing\"\nurl = \"http://127.0.0.1:9/b\"\n\
             filter_types = [\"invoice.*\"]\nordering_key = \"/customer\"\n\
             [[source.destination]]\nname = \"stream\"\nurl = \"nats://127.0.0.1:4222\"\n\
             subject = \"gh.{event_type}\"\n",
        )
        .unwrap();
        let d = &ok.sources[0].destinations;
        let routes: Vec<&str> = d.iter().map(|d| d.route.as_str()).collect();
        assert_eq!(routes, ["s", "s.billing", "s.stream"]);
        assert_eq!((d[0].max_concurrency, d[1].max_concurrency), (2, 8));
        assert!(d[0].filter.is_none() && d[1].filter.is_some());
        assert!(d[1].ordering.is_some() && d[0].ordering.is_none());
        assert!(d[2].jetstream.is_some());
        // `config check` writes them back as tables, which load the same.
        let shown = ok.to_redacted_toml();
        assert!(shown.contains("[[source.destination]]"), "{shown}");
        let again = Config::from_toml(&shown, "shown.toml", None, &no_env).unwrap();
        let again: Vec<&str> = again.sources[0]
            .destinations
            .iter()
            .map(|d| d.route.as_str())
            .collect();
        assert_eq!(again, routes);
        // The one-URL form stays one: shown back flat.
        let flat = load("destination = \"http://127.0.0.1:9/\"\ntimeout = \"5s\"\n").unwrap();
        assert_eq!(flat.sources[0].destinations[0].route, "s");
        assert!(!flat.to_redacted_toml().contains("[[source.destination]]"));

        let table = |body: &str| format!("[[source.destination]]\n{body}\n");
        for (rest, key, words) in [
            (
                format!(
                    "timeout = \"5s\"\n{}",
                    table("url = \"http://127.0.0.1:9/\"")
                ),
                "source[0].timeout",
                "set it in each table",
            ),
            (
                table("name = \"a\""),
                "source[0].destination[0].url",
                "is required",
            ),
            (
                table("name = \"Bad.Name\"\nurl = \"http://127.0.0.1:9/\""),
                "source[0].destination[0].name",
                "not a valid destination name",
            ),
            (
                format!(
                    "{}{}",
                    table("name = \"a\"\nurl = \"http://127.0.0.1:9/\""),
                    table("name = \"a\"\nurl = \"http://127.0.0.1:9/x\"")
                ),
                "source[0].destination[1].name",
                "another destination",
            ),
            (
                format!(
                    "{}{}",
                    table("url = \"http://127.0.0.1:9/\""),
                    table("url = \"http://127.0.0.1:9/x\"")
                ),
                "source[0].destination[1].name",
                "at most one destination goes without a name",
            ),
            (
                table("url = \"http://127.0.0.1:9/\"\ndestination_secret = \"x\""),
                "source[0].destination[0].destination_secret",
                "unknown field",
            ),
            (
                table("url = \"http://127.0.0.1:9/\"\nsubject = \"a\""),
                "source[0].destination[0].subject",
                "nats://",
            ),
            (
                "destination = []\n".to_owned(),
                "source[0].destination",
                "holds no table",
            ),
            (
                "destination = 5\n".to_owned(),
                "source[0].destination",
                "a URL, or [[source.destination]] tables",
            ),
            (
                (0..17)
                    .map(|i| table(&format!("name = \"d{i}\"\nurl = \"http://127.0.0.1:9/\"")))
                    .collect::<String>(),
                "source[0].destination",
                "at most 16",
            ),
        ] {
            let err = load(&rest).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(words), "{rest}: {err}");
        }
    }

    #[test]
    fn jetstream_keys_fit_only_their_kind_of_destination() {
        let source = |rest: &str| {
            format!("[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n{rest}")
        };
        let load = |rest: &str| Config::from_toml(&source(rest), "f.toml", None, &no_env);
        let nats = load(
            "destination = \"nats://127.0.0.1:4222\"\ndestination_subject = \"gh.{event_type}\"\n",
        )
        .unwrap();
        let dl = &nats.sources[0].destinations[0];
        let js = dl.jetstream.as_ref().unwrap();
        assert_eq!(js.subject.render("s", Some("push")), "gh.push");
        let http = load("destination = \"http://127.0.0.1:9/\"\n").unwrap();
        assert!(http.sources[0].destinations[0].jetstream.is_none());
        for (rest, key, words) in [
            (
                "destination = \"http://127.0.0.1:9/\"\ndestination_subject = \"a\"\n",
                "source[0].destination_subject",
                "nats://",
            ),
            (
                "destination = \"nats://127.0.0.1:4222\"\nretry_statuses = [503]\n",
                "source[0].retry_statuses",
                "http(s)",
            ),
            (
                "destination = \"nats://127.0.0.1:4222\"\ndestination_subject = \"a..b\"\n",
                "source[0].destination_subject",
                "empty token",
            ),
            (
                "destination = \"ftp://127.0.0.1/\"\n",
                "source[0].destination",
                "nats or tls",
            ),
            (
                "destination = \"nats://127.0.0.1:4222\"\ndestination_creds_file = \"/nonexistent/x.creds\"\n",
                "source[0].destination_creds_file",
                "cannot read",
            ),
        ] {
            let err = load(rest).unwrap_err().to_string();
            assert!(
                err.starts_with("f.toml:")
                    && err.contains(&format!(": {key} (source \"s\"): "))
                    && err.contains(words),
                "{rest}: {err}"
            );
        }
    }

    #[test]
    fn environment_overrides_the_file() {
        let env = |name: &str| match name {
            "HOOKINBOX_LISTEN" => Some("127.0.0.1:9999".to_owned()),
            "HOOKINBOX_DATA_DIR" => Some("/tmp/x".to_owned()),
            _ => None,
        };
        let config = Config::embedded(&env).unwrap();
        assert_eq!(config.server.listen.to_string(), "127.0.0.1:9999");
        assert_eq!(config.server.data_dir, PathBuf::from("/tmp/x"));
    }

    #[test]
    fn bad_environment_value_names_the_variable() {
        let env = |name: &str| (name == "HOOKINBOX_ADMIN_LISTEN").then(|| "nope".to_owned());
        let err = Config::embedded(&env).unwrap_err().to_string();
        assert!(
            err.starts_with("environment: HOOKINBOX_ADMIN_LISTEN: "),
            "{err}"
        );
    }

    #[test]
    fn errors_name_file_key_and_problem() {
        let text = "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret = \"x\"\ntolerance = \"5 parsecs\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f.toml:5:13: source[0].tolerance (source \"s\"): "),
            "{err}"
        );

        let text = "[[source]]\nname = \"s\"\nkind = \"paypal\"\nsecret = \"x\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("source[0].kind") && err.contains("unknown variant `paypal`"),
            "{err}"
        );

        let text = "[[source]]\nname = \"s\"\nkind = \"github\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("source[0]") && err.contains("no secret"),
            "{err}"
        );

        let text = "[server]\nlisten = \"127.0.0.1:1\"\nbogus = 1\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("f.toml:3:1: ") && err.contains("bogus"),
            "{err}"
        );
    }

    /// What serde finds (a syntax error, a value of the wrong type, a name
    /// that is not one of a key's names) is reported at its line and column
    /// and, but for syntax, with the key's path; the message names the bad
    /// value and what the key takes.
    #[test]
    fn toml_errors_name_the_line_column_and_key() {
        let error = |text: &str| {
            Config::from_toml(text, "f.toml", None, &no_env)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error("[server]\nlisten = \"127.0.0.1:1\"\nmax_connections = \"many\"\n"),
            "f.toml:3:19: server.max_connections: invalid type: string \"many\", expected u64"
        );
        assert_eq!(
            error(
                "[[source]]\nname = \"a\"\nkind = \"github\"\nsecret = \"x\"\n\n\
                 [[source]]\nname = \"b\"\nkind = \"paypal\"\n"
            ),
            "f.toml:8:8: source[1].kind (source \"b\"): unknown variant `paypal`, expected one of \
             `stripe`, `github`, `shopify`, `slack`, `standard`, `standard-webhooks`, \
             `standardwebhooks`, `svix`, `paddle`, `linear`, `twilio`, `gitlab`, `twitch`, `zoom`, `facebook`, `instagram`, `meta`, `whatsapp`, `hmac`"
        );
        // The column counts characters, not bytes.
        assert_eq!(
            error("[log] # journal → ☃\nformat = \"xml\"\n"),
            "f.toml:2:10: log.format: unknown variant `xml`, expected `text` or `json`"
        );
        // In a list, toml's position is the list's; the path names the item.
        assert_eq!(
            error("[[source]]\nname = \"s\"\nretry_statuses = [429, true]\n"),
            "f.toml:3:18: source[0].retry_statuses[1] (source \"s\"): expected a status code like 429 or a class like \"5xx\""
        );
        assert_eq!(
            error("[server\nlisten = 1\n"),
            "f.toml:1:8: unclosed table, expected `]`"
        );
        // A variable's bad value names the variable, with the same message.
        let env = |name: &str| (name == "HOOKINBOX_LOG_FORMAT").then(|| "xml".to_owned());
        assert_eq!(
            Config::embedded(&env).unwrap_err().to_string(),
            "environment: HOOKINBOX_LOG_FORMAT: unknown variant `xml`, expected `text` or `json`"
        );
    }

    /// The file names a kind as `Kind::as_str` does (which logs and metric
    /// labels use), so serde's names cannot drift from it.
    #[test]
    fn every_kind_is_named_in_the_file_as_as_str_names_it() {
        for kind in Kind::ALL {
            assert_eq!(Kind::parse(kind.as_str()), Ok(kind));
            assert_eq!(
                toml::Value::try_from(kind).unwrap().as_str(),
                Some(kind.as_str())
            );
        }
        assert_eq!(Kind::parse("svix"), Ok(Kind::Standard));
    }

    #[test]
    fn duplicate_source_names_are_rejected() {
        let text = "[[source]]\nname = \"a\"\nkind = \"github\"\nsecret = \"x\"\n\
                    [[source]]\nname = \"a\"\nkind = \"github\"\nsecret = \"y\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("source[1].name") && err.contains("already"),
            "{err}"
        );
    }

    #[test]
    fn secrets_come_from_env_file_and_inline_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("gh.secret"), "one\n\n two \n").unwrap();
        let text = "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret_file = \"gh.secret\"\n\
                    secret_env = \"GH_SECRET\"\nsecrets = [\"four\"]\n";
        let env = |name: &str| (name == "GH_SECRET").then(|| "three".to_owned());
        let config = Config::from_toml(text, "f.toml", Some(dir.path()), &env).unwrap();
        let SecretPlan::Given(given) = &config.sources[0].secrets else {
            panic!("{config:?}");
        };
        let secrets: Vec<&str> = given.iter().map(|s| s.value.expose()).collect();
        assert_eq!(secrets, ["one", "two", "three", "four"]);
        assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);

        let text = "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret_env = \"MISSING\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("source[0].secret_env") && err.contains("MISSING"),
            "{err}"
        );
    }

    #[test]
    fn redacted_output_never_contains_a_secret() {
        let text = "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret = \"s3cr3t-value\"\n";
        let config = Config::from_toml(text, "f.toml", None, &no_env).unwrap();
        let shown = config.to_redacted_toml();
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
        assert!(shown.contains("[redacted]"), "{shown}");
        // The printed config is itself a config file (with secrets replaced).
        assert!(raw::parse(&shown, "shown").is_ok(), "{shown}");
        assert!(format!("{config:?}").contains("[redacted]"));
    }

    /// Of every secret, `config check` shows where it comes from: the
    /// variable, the file, `[redacted]` for one written inline, and a note
    /// for one left to the data dir. Never the value.
    #[test]
    fn redacted_output_shows_where_each_secret_comes_from() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gh.secret"),
            "file-secret-1\nfile-secret-2\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("admin.token"), "file-admin-token-0123").unwrap();
        let text = "[admin]\ntoken_file = \"admin.token\"\n\n\
                    [[source]]\nname = \"gh\"\nkind = \"github\"\nsecret_file = \"gh.secret\"\n\
                    secret_env = \"GH_SECRET\"\nsecret = \"inline-secret\"\n\
                    destination = \"http://127.0.0.1:9/app\"\n\
                    destination_secret_env = \"DEST_KEY\"\n\n\
                    [[source]]\nname = \"demo\"\nkind = \"standard\"\ngenerate_secret = true\n\
                    destination = \"http://127.0.0.1:9/demo\"\n";
        let env = |name: &str| match name {
            "GH_SECRET" => Some("env-secret".to_owned()),
            "DEST_KEY" => Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned()),
            _ => None,
        };
        let config = Config::from_toml(text, "f.toml", Some(dir.path()), &env).unwrap();
        let shown = config.to_redacted_toml();
        for secret in [
            "file-secret",
            "file-admin-token",
            "env-secret",
            "inline-secret",
            "MfKQ9r8",
        ] {
            assert!(!shown.contains(secret), "{secret} is shown:\n{shown}");
        }
        let file = |name: &str| dir.path().join(name).display().to_string();
        for line in [
            format!("[admin]\ntoken_file = {:?}\n", file("admin.token")),
            format!(
                "secrets = [\"[redacted]\"]\nsecret_env = \"GH_SECRET\"\nsecret_file = {:?}\n",
                file("gh.secret")
            ),
            "destination_secret_env = \"DEST_KEY\"\n".to_owned(),
            "kind = \"standard\"\ngenerate_secret = true\n".to_owned(),
            "# the secret of source \"demo\": generated on first start into ./hookinbox-data/secrets/demo.secret\n"
                .to_owned(),
            "# the key that signs deliveries to destination \"demo\": generated on first start into ./hookinbox-data/secrets/demo.destination.secret\n"
                .to_owned(),
        ] {
            assert!(shown.contains(&line), "no {line:?} in\n{shown}");
        }
        assert!(!shown.contains("admin token"), "{shown}");
        assert!(raw::parse(&shown, "shown").is_ok(), "{shown}");
    }

    #[test]
    fn meta_needs_a_verify_token_and_no_other_kind_takes_one() {
        let error = |text: &str, env: &dyn Fn(&str) -> Option<String>| {
            Config::from_toml(text, "f.toml", None, env)
                .unwrap_err()
                .to_string()
        };
        let meta = "[[source]]\nname = \"wa\"\nkind = \"whatsapp\"\nsecret_env = \"APP_SECRET\"\n";
        let env = |name: &str| match name {
            "APP_SECRET" => Some("app-secret".to_owned()),
            "VT" => Some("the-verify-token".to_owned()),
            "EMPTY" => Some("  ".to_owned()),
            _ => None,
        };
        let err = error(meta, &env);
        assert!(
            err.contains("source[0].verify_token (source \"wa\"): is required for kind = \"meta\""),
            "{err}"
        );
        let err = error(&format!("{meta}verify_token_env = \"EMPTY\"\n"), &env);
        assert!(
            err.contains("source[0].verify_token_env (source \"wa\"): is empty"),
            "{err}"
        );
        let err = error(
            &format!("{meta}verify_token_env = \"VT\"\nverify_token = \"x\"\n"),
            &env,
        );
        assert!(err.contains("set only one of verify_token"), "{err}");

        let config = Config::from_toml(
            &format!("{meta}verify_token_env = \"VT\"\n"),
            "f.toml",
            None,
            &env,
        )
        .unwrap();
        let source = &config.sources[0];
        assert_eq!(source.kind, Kind::Meta);
        let token = source.verify_token.as_ref().unwrap();
        assert_eq!(token.value.expose(), "the-verify-token");
        assert_eq!(token.origin, SecretOrigin::Env("VT".into()));
        let shown = config.to_redacted_toml();
        assert!(shown.contains("verify_token_env = \"VT\"\n"), "{shown}");
        assert!(!shown.contains("the-verify-token"), "{shown}");

        let err = error(
            "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret = \"s\"\nverify_token = \"t\"\n",
            &env,
        );
        assert!(
            err.starts_with(
                "f.toml:5:16: source[0].verify_token (source \"gh\"): applies only to kind = \"meta\", not github"
            ),
            "{err}"
        );
    }

    /// Regression (found by `config::props`): a control character in
    /// `data_dir` ended the comment that names a generated secret's file, and
    /// `config check` printed something that was no longer TOML.
    #[test]
    fn a_control_character_in_a_path_stays_inside_its_comment() {
        let env = |name: &str| (name == "HOOKINBOX_DATA_DIR").then(|| "data\ndir\u{7f}".to_owned());
        let shown = Config::embedded(&env).unwrap().to_redacted_toml();
        assert!(raw::parse(&shown, "shown").is_ok(), "{shown}");
        assert!(
            shown.contains("data\\ndir\\u{7f}/secrets/admin.token.secret\n"),
            "{shown}"
        );
    }

    /// A `standard` source's secret is a Standard Webhooks key: one that is
    /// not is refused at load, naming the key it came from.
    #[test]
    fn a_standard_source_secret_that_is_not_a_key_names_its_key() {
        let text = "[[source]]\nname = \"s\"\nkind = \"standard\"\nsecret_env = \"S\"\n";
        let env = |name: &str| (name == "S").then(|| "whsec_not base64!".to_owned());
        let err = Config::from_toml(text, "f.toml", None, &env).unwrap_err();
        assert_eq!(err.key, "source[0].secret_env");
        assert!(err.message.contains("base64"), "{err}");
    }

    /// Regression: `header_read_timeout = "500000000000y"` passed `config
    /// check`, then every connection panicked adding it to an `Instant`; a
    /// huge `breaker_cooldown` killed the scheduler the same way. Every
    /// duration key is bounded at load.
    #[test]
    fn every_duration_key_refuses_an_absurd_value_naming_key_value_and_maximum() {
        let alerts = "[alerts]\nurl = \"http://127.0.0.1:9/alerts\"\n";
        let source = "[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n\
                      destination = \"http://127.0.0.1:9/app\"\n";
        // (section, key, the key as errors name it, its maximum)
        let keys = [
            (
                "[server]\n",
                "header_read_timeout",
                "server.header_read_timeout",
                "1h",
            ),
            (
                "[server]\n",
                "body_read_timeout",
                "server.body_read_timeout",
                "1h",
            ),
            (
                "[server]\n",
                "shutdown_timeout",
                "server.shutdown_timeout",
                "1h",
            ),
            (
                "[retention]\n",
                "dedupe_ttl",
                "retention.dedupe_ttl",
                "10years",
            ),
            (
                "[retention]\n",
                "payload_ttl",
                "retention.payload_ttl",
                "10years",
            ),
            ("[retention]\n", "dlq_ttl", "retention.dlq_ttl", "10years"),
            (
                "[retention]\n",
                "sweep_interval",
                "retention.sweep_interval",
                "1day",
            ),
            (alerts, "pending_age", "alerts.pending_age", "10years"),
            (alerts, "min_interval", "alerts.min_interval", "7days"),
            (alerts, "check_interval", "alerts.check_interval", "1day"),
            (source, "tolerance", "source[0].tolerance", "1day"),
            (source, "connect_timeout", "source[0].connect_timeout", "1h"),
            (source, "timeout", "source[0].timeout", "1h"),
            (
                source,
                "initial_interval",
                "source[0].initial_interval",
                "7days",
            ),
            (source, "max_interval", "source[0].max_interval", "7days"),
            (source, "max_age", "source[0].max_age", "10years"),
            (
                source,
                "breaker_cooldown",
                "source[0].breaker_cooldown",
                "1day",
            ),
        ];
        for (section, key, named, max) in keys {
            for value in ["500000000000y", "1000y"] {
                let text = format!("{section}{key} = \"{value}\"\n");
                let err = match Config::from_toml(&text, "f.toml", None, &no_env) {
                    Ok(_) => panic!("{key} = {value:?} was accepted"),
                    Err(e) => e,
                };
                assert_eq!(err.key, named, "{err}");
                assert!(
                    err.message.contains(value) && err.message.contains(max),
                    "{key}: {err}"
                );
            }
            // The maximum itself is allowed (alone: initial_interval must
            // also stay under max_interval).
            if key != "initial_interval" {
                let text = format!("{section}{key} = \"{max}\"\n");
                if let Err(e) = Config::from_toml(&text, "f.toml", None, &no_env) {
                    panic!("{key} = {max:?}: {e}");
                }
            }
        }
    }

    /// An admin listener reachable from other hosts is allowed (behind a
    /// firewall or a VPN it is useful) but named: its token is then the only
    /// thing between the network and every payload, replay and backup.
    #[test]
    fn a_non_loopback_admin_listener_is_warned_about() {
        let warned = |addr: &str| {
            let text = format!("[server]\nadmin_listen = \"{addr}\"\n");
            let config = Config::from_toml(&text, "f.toml", None, &no_env).unwrap();
            config
                .warnings
                .iter()
                .any(|w| w.contains("server.admin_listen") && w.contains("admin token"))
        };
        assert!(warned("0.0.0.0:8081"));
        assert!(warned("[::]:8081"));
        assert!(warned("192.0.2.10:8081"));
        assert!(!warned("127.0.0.1:8081"));
        assert!(!warned("[::1]:8081"));
        // The environment's address is judged too.
        let env = |name: &str| (name == "HOOKINBOX_ADMIN_LISTEN").then(|| "0.0.0.0:9".to_owned());
        let config = Config::embedded(&env).unwrap();
        assert!(
            config.warnings.iter().any(|w| w.contains("admin token")),
            "{:?}",
            config.warnings
        );
    }

    #[test]
    fn an_unknown_log_level_is_refused_and_directives_pass() {
        let load = |level: &str| {
            let text = format!("[log]\nlevel = \"{level}\"\n");
            Config::from_toml(&text, "f.toml", None, &no_env).map(|c| c.log.level)
        };
        let err = load("verbose").unwrap_err().to_string();
        assert!(
            err.contains("log.level") && err.contains("\"verbose\" is not a level"),
            "{err}"
        );
        assert!(load("hookinbox=loud,info").is_err());
        for ok in [
            "info",
            "WARN",
            "off",
            "hookinbox=debug,warn",
            "hookinbox::store=trace",
        ] {
            assert_eq!(load(ok).unwrap(), ok);
        }
        // The environment's level is judged too.
        let env = |name: &str| (name == "HOOKINBOX_LOG_LEVEL").then(|| "chatty".to_owned());
        let err = Config::embedded(&env).unwrap_err().to_string();
        assert!(err.contains("\"chatty\" is not a level"), "{err}");
    }

    #[test]
    fn an_empty_secret_variable_or_file_is_named() {
        let text = "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret_env = \"PAY_SECRET\"\n";
        let env = |name: &str| (name == "PAY_SECRET").then(|| "  ".to_owned());
        let err = Config::from_toml(text, "f.toml", None, &env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("source[0].secret_env")
                && err.contains("environment variable PAY_SECRET is set but empty"),
            "{err}"
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("empty.secret");
        std::fs::write(&file, "\n\n").unwrap();
        let text = format!(
            "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret_file = {:?}\n",
            file.display().to_string()
        );
        let err = Config::from_toml(&text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("holds no secret") && err.contains("empty.secret"),
            "{err}"
        );
    }

    /// Each accepted-but-suspicious setting is named in a warning, and a
    /// plain config warns about none of them.
    #[test]
    fn settings_that_would_surprise_are_warned_about() {
        let warnings = |source: &str, retention: &str| {
            let text =
                format!("{retention}[[source]]\nname = \"s\"\nsecret_env = \"S\"\n{source}\n");
            let env = |name: &str| (name == "S").then(|| "whsec_abc".to_owned());
            Config::from_toml(&text, "f.toml", None, &env)
                .unwrap()
                .warnings
        };
        let has = |w: &[String], needle: &str| w.iter().any(|x| x.contains(needle));
        let plain = warnings(
            "kind = \"stripe\"\ntolerance = \"5m\"\ndestination = \"http://127.0.0.1:3000/\"",
            "",
        );
        assert!(plain.is_empty(), "{plain:?}");

        let w = warnings("kind = \"github\"\ntolerance = \"5m\"", "");
        assert!(
            has(
                &w,
                "source[0].tolerance has no effect: github signs no timestamp"
            ),
            "{w:?}"
        );

        let w = warnings(
            "kind = \"stripe\"\ndestination = \"http://127.0.0.1:3000/\"\nforward_headers = [\"Stripe-Signature\"]",
            "",
        );
        assert!(has(&w, "forwards stripe-signature"), "{w:?}");

        let w = warnings(
            "kind = \"stripe\"\ndestination = \"http://127.0.0.1:3000/\"\nmax_age = \"3d\"",
            "[retention]\ndedupe_ttl = \"1d\"\n",
        );
        assert!(
            has(
                &w,
                "retention.dedupe_ttl (1day) is shorter than source[0].max_age (3days)"
            ),
            "{w:?}"
        );

        let text = "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret_env = \"S\"\n";
        let env = |name: &str| (name == "S").then(|| "sk_live_51Habc".to_owned());
        let w = Config::from_toml(text, "f.toml", None, &env)
            .unwrap()
            .warnings;
        assert!(
            has(&w, "source[0].secret_env looks like a Stripe API key"),
            "{w:?}"
        );
        assert!(
            !has(&w, "sk_live_51Habc"),
            "a warning never holds the secret: {w:?}"
        );
    }

    #[test]
    fn redact_url_keeps_where_it_goes_and_hides_credentials() {
        let shown = |text: &str| redact_url(&reqwest::Url::parse(text).unwrap());
        // Nothing to hide: exactly the URL as configured.
        for plain in [
            "http://127.0.0.1:9000/hooks",
            "https://app.example.com/",
            "http://[::1]:8080/in",
        ] {
            assert_eq!(shown(plain), plain);
        }
        assert_eq!(
            shown("http://u:pw@host/x?k=token"),
            "http://[redacted]@host/x?[redacted]"
        );
        assert_eq!(
            shown("https://only-user@host:8443/x#frag"),
            "https://[redacted]@host:8443/x#[redacted]"
        );
        assert_eq!(
            shown("https://:pw@host/?"),
            "https://[redacted]@host/?[redacted]"
        );
    }

    #[test]
    fn hmac_kind_needs_its_scheme_and_an_id() {
        let text = "[[source]]\nname = \"h\"\nkind = \"hmac\"\nsecret = \"x\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("signature_header"), "{err}");

        let text = "[[source]]\nname = \"h\"\nkind = \"hmac\"\nsecret = \"x\"\nsignature_header = \"X-Sig\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("event_id"), "{err}");

        let text = "[[source]]\nname = \"h\"\nkind = \"hmac\"\nsecret = \"x\"\nsignature_header = \"X-Sig\"\n\
                    event_id = [\"header:X-Id\"]\nsigned_payload = \"{timestamp}.{body}\"\n";
        let err = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("timestamp_header"), "{err}");
    }

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("512KiB").unwrap(), 512 << 10);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("1XB").is_err());
        assert_eq!(
            parse_duration("3d").unwrap(),
            Duration::from_secs(3 * 86400)
        );
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    }
}
