//! A validated destination of a source: where it delivers (an HTTP(S)
//! app or a NATS JetStream subject), which events it takes, and its retry,
//! rate, ordering and breaker rules. Types and their text forms only.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::resolve::{Resolved, Stage};

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

/// The text of a destination's pattern or template that is not of its
/// shape: a filter's event type, a JetStream subject, a retried status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Empty, or with a control character.
    #[error("{text:?} is not an event type or pattern")]
    EventType { text: String },
    #[error("{subject:?} has an empty token (two dots, or one at an end)")]
    EmptyToken { subject: String },
    /// `{…}` inside a token, or a placeholder other than the two.
    #[error("{token:?}: a placeholder is a whole token, {{source}} or {{event_type}}")]
    Placeholder { token: String },
    /// Whitespace or a wildcard, which are for subscribers.
    #[error("{token:?}: no whitespace, '*' or '>' in a subject")]
    Wildcard { token: String },
    #[error("{text:?}: expected a status code like 429 or a class like \"5xx\"")]
    Status { text: String },
}

/// An event type, or a pattern with `*` for any run of characters
/// (`invoice.*`, `*.created`, `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypePattern(String);

impl TypePattern {
    pub fn parse(text: &str) -> Result<TypePattern, PatternError> {
        if text.is_empty() || text.chars().any(char::is_control) {
            return Err(PatternError::EventType {
                text: text.to_owned(),
            });
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
    pub fn parse(text: &str) -> Result<SubjectTemplate, PatternError> {
        let tokens = text
            .split('.')
            .map(|token| match token {
                "{source}" => Ok(SubjectToken::Source),
                "{event_type}" => Ok(SubjectToken::EventType),
                "" => Err(PatternError::EmptyToken {
                    subject: text.to_owned(),
                }),
                t if t.contains(['{', '}']) => Err(PatternError::Placeholder {
                    token: t.to_owned(),
                }),
                t if t
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '*' || c == '>') =>
                {
                    Err(PatternError::Wildcard {
                        token: t.to_owned(),
                    })
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
    pub fn parse(text: &str) -> Result<StatusPattern, PatternError> {
        let bad = || PatternError::Status {
            text: text.to_owned(),
        };
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
