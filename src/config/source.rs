//! A validated `[[source]]`: its name, its kind, where its event id and
//! type are found, and the generic `hmac` scheme. Types and their text
//! forms only; the provider facts (per-kind defaults) belong to `verify`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::destination::DeliveryConfig;
use super::reconcile::ReconcileConfig;
use super::resolve::{GivenSecret, Resolved, Stage};
use super::secret::{Secret, SecretOrigin};
use super::values::{ValueError, parse_name};

/// A source's name: the `{source}` of `POST /in/{source}`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceName(Arc<str>);

impl SourceName {
    /// 1 to 64 characters of `a-z 0-9 _ -`: safe in a URL path, a metric label
    /// and a file name without escaping.
    pub fn parse(text: &str) -> Result<SourceName, InvalidName> {
        let ok = !text.is_empty()
            && text.len() <= 64
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if ok {
            Ok(SourceName(Arc::from(text)))
        } else {
            Err(InvalidName {
                text: text.to_owned(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A name that [`SourceName::parse`] refuses. A destination's name has the
/// same shape, and its validation says "destination" over `text`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a valid source name: use 1 to 64 characters of a-z, 0-9, '_' and '-'")]
pub struct InvalidName {
    pub text: String,
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
    pub fn parse(text: &str) -> Result<Kind, ValueError> {
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
    /// `A & B`: every part found, their values joined by `:` in order; not
    /// found if any part is missing. Shopify's event id is shared by the
    /// deliveries of one merchant action across topics, so its key is the
    /// topic and the event id together.
    Joined(Vec<Locator>),
}

/// Between the parts of a [`Locator::Joined`] as written.
const JOIN: &str = " & ";

/// A locator's text that names no place in a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocatorError {
    /// No known prefix (or `form:` with no field).
    #[error(
        "{text:?} is not a locator: use \"header:Name\", \"json:/pointer\", \"form:name\" or \"body-sha256\""
    )]
    Unknown { text: String },
    #[error("{name:?} is not a valid header name")]
    HeaderName { name: String },
    /// `json:` followed by something that is not an RFC 6901 pointer.
    #[error("JSON pointer {pointer:?} must start with '/'")]
    RelativePointer { pointer: String },
}

impl Locator {
    pub fn parse(text: &str) -> Result<Locator, LocatorError> {
        if text.contains(JOIN) {
            let parts = text
                .split(JOIN)
                .map(|part| Locator::parse_one(part.trim()))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Locator::Joined(parts));
        }
        Locator::parse_one(text)
    }

    fn parse_one(text: &str) -> Result<Locator, LocatorError> {
        if text == "body-sha256" {
            return Ok(Locator::BodySha256);
        }
        let unknown = || LocatorError::Unknown {
            text: text.to_owned(),
        };
        let Some((prefix, rest)) = text.split_once(':') else {
            return Err(unknown());
        };
        match prefix {
            "header" => http::HeaderName::from_bytes(rest.as_bytes())
                .map(Locator::Header)
                .map_err(|_| LocatorError::HeaderName {
                    name: rest.to_owned(),
                }),
            "json" if rest.is_empty() || rest.starts_with('/') => {
                Ok(Locator::Json(rest.to_owned()))
            }
            "json" => Err(LocatorError::RelativePointer {
                pointer: rest.to_owned(),
            }),
            "form" if !rest.is_empty() => Ok(Locator::Form(rest.to_owned())),
            _ => Err(unknown()),
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
            Locator::Joined(parts) => {
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(JOIN)?;
                    }
                    write!(f, "{part}")?;
                }
                Ok(())
            }
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
    /// Every secret, in the order read (file, environment, inline, then
    /// the `[[source.secrets]]` tables). Once resolved, never empty.
    pub secrets: S::SourceSecrets,
    /// `None`: the kind's default (see `verify`).
    pub tolerance: Option<Duration>,
    /// A new event is expected at least this often: longer without one and
    /// the source is quiet (a metric, an alert). `None`: never quiet.
    pub expect_within: Option<Duration>,
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
    /// Asks the provider's API for the events that never arrived.
    pub reconcile: Option<ReconcileConfig>,
    /// The values masked in its payloads for whom [`RedactFor`] names
    /// (`redact`); none: every reader sees them.
    pub redact: Vec<crate::redact::Pattern>,
    pub redact_for: RedactFor,
}

/// Who sees a source's `redact` values masked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedactFor {
    /// Viewers: operators and admins read the payload whole (each read is
    /// in the audit trail).
    #[default]
    Viewers,
    /// Everyone who reads through the admin API.
    Everyone,
}

/// One of a source's signing secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSecret {
    /// Unique within its source: a `[[source.secrets]]` table's `name`, or
    /// where it is kept (the file's name, `$VAR`, `inline`; `:2`, `:3` for
    /// the second and third from one place). Never the secret.
    pub name: String,
    /// Given as a `[[source.secrets]]` table (`config check` prints it back
    /// as one).
    pub table: bool,
    /// Where it is kept: a secret the data dir holds is that file.
    pub origin: SecretOrigin,
    /// From then on it verifies nothing.
    pub expires: Option<crate::api::Timestamp>,
    pub value: Secret,
}

/// 1 MiB: larger than any provider's documented payload (Stripe and GitHub
/// cap theirs well below), small enough that a flood of them cannot exhaust memory.
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;
