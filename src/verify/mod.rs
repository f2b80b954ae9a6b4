//! Verification: the only place a request's bytes become a [`VerifiedEvent`].
//!
//! Owns each provider's signature scheme (checked on the raw body, before any
//! parsing, compared in constant time), timestamp tolerance, and where each
//! provider puts its event id and type. Refuses everything else: it never
//! stores, never answers HTTP, never reads config files or the environment.
//!
//! Order inside [`Verifier::verify`]: signature and timestamp first; only a
//! request that passed them has its body parsed (for the id, the type or a
//! provider's handshake: Slack's and Twitch's challenges, Zoom's URL
//! validation). Meta's subscription check is a GET with no body and no
//! signature: [`Verifier::subscribe`] holds its verify token instead.

mod schemes;
pub mod sign;

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::HeaderMap;
use sha2::Digest;

use crate::clock::unix_ms;
use crate::config::{Kind, Locator, SourceConfig, SourceName};
use crate::json_pointer;
use crate::standard_webhooks::{ORIGIN_HEADER, RECONCILED, StandardKeyError};
use crate::words::RejectReason;

/// What a request looks like to verification.
pub struct Request<'a> {
    pub headers: &'a HeaderMap,
    pub body: &'a Bytes,
    /// The path after `/in/{source}` (usually empty): Twilio signs the full URL.
    pub path_rest: &'a str,
    /// The raw query string, if any.
    pub query: Option<&'a str>,
}

/// A request that passed verification.
#[derive(Debug)]
pub enum Verified {
    /// A webhook event to store.
    Event(VerifiedEvent),
    /// A provider's endpoint check: answer it, store nothing.
    Handshake(Handshake),
}

/// A provider's check that the URL is theirs to call, and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Handshake {
    /// What the provider calls it, for the log line.
    pub what: &'static str,
    pub reply: HandshakeReply,
}

#[derive(Debug, Clone, PartialEq)]
pub enum HandshakeReply {
    /// The challenge echoed as `text/plain` (Slack, Twitch, Meta).
    Text(String),
    /// A JSON answer (Zoom: the plain token and its HMAC).
    Json(serde_json::Value),
}

/// The provider's id for an event, as found in the request: 1 to
/// [`EventId::MAX_LEN`] bytes of printable ASCII.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId(String);

impl EventId {
    /// 256: longer than any provider's id format (UUIDs, `evt_…`, ULIDs),
    /// short enough to keep the dedupe table's keys small.
    pub const MAX_LEN: usize = 256;

    pub fn parse(text: &str) -> Result<EventId, BadEventId> {
        if text.is_empty() {
            return Err(BadEventId::Empty);
        }
        if text.len() > Self::MAX_LEN {
            return Err(BadEventId::TooLong {
                limit: Self::MAX_LEN,
            });
        }
        if !text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
            return Err(BadEventId::NotPrintable);
        }
        Ok(EventId(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An event whose origin is proven: its signature verified, or it was
/// fetched from its provider's API with the source's credential
/// ([`VerifiedEvent::fetched`], marked so in its headers). Only this module
/// constructs one.
#[derive(Debug, Clone)]
pub struct VerifiedEvent {
    source: SourceName,
    event_id: EventId,
    event_type: Option<String>,
    content_type: Option<String>,
    headers: Vec<(String, String)>,
    body: Bytes,
    received_at_ms: u64,
    /// Which of the source's secrets verified it (see
    /// [`Verifier::secret_names`]); `None`: fetched, not signed.
    secret: Option<usize>,
}

impl VerifiedEvent {
    pub fn source(&self) -> &SourceName {
        &self.source
    }
    pub fn event_id(&self) -> &EventId {
        &self.event_id
    }
    pub fn event_type(&self) -> Option<&str> {
        self.event_type.as_deref()
    }
    pub fn content_type(&self) -> Option<&str> {
        self.content_type.as_deref()
    }
    /// The request headers worth keeping (see [`stored_headers`]).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }
    pub fn body(&self) -> &Bytes {
        &self.body
    }
    pub fn received_at_ms(&self) -> u64 {
        self.received_at_ms
    }
    pub fn secret(&self) -> Option<usize> {
        self.secret
    }

    /// An event hookinbox never received, fetched from its provider's API
    /// with the source's credential (a reconcile pass): the API call proves
    /// where it came from, no signature does. Its headers say so:
    /// [`ORIGIN_HEADER`]` = `[`RECONCILED`], then `provenance` (where and
    /// how it was fetched), each named under `hookinbox-`, which no request
    /// can set ([`stored_headers`] keeps none).
    pub fn fetched(
        source: SourceName,
        event_id: &str,
        event_type: Option<String>,
        body: Bytes,
        provenance: Vec<(String, String)>,
        received_at_ms: u64,
    ) -> Result<VerifiedEvent, BadEventId> {
        debug_assert!(provenance.iter().all(|(n, _)| n.starts_with(RESERVED)));
        let mut headers = vec![(ORIGIN_HEADER.to_owned(), RECONCILED.to_owned())];
        headers.extend(provenance);
        Ok(VerifiedEvent {
            source,
            event_id: EventId::parse(event_id)?,
            event_type,
            content_type: Some("application/json".to_owned()),
            headers,
            body,
            received_at_ms,
            secret: None,
        })
    }
}

/// The prefix of header names that are hookinbox's own: the delivery
/// contract's, and a stored event's provenance. Never kept from a request.
pub const RESERVED: &str = "hookinbox-";

/// Why a found event id is not one [`EventId::parse`] takes. It carries no
/// text of the id: a rejection's message is logged and answered, and the
/// id is the sender's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadEventId {
    #[error("the event id is empty")]
    Empty,
    #[error("the event id is longer than {limit} bytes")]
    TooLong { limit: usize },
    #[error("the event id has characters other than printable ASCII")]
    NotPrintable,
}

/// A source's secret that its kind cannot use (a Standard Webhooks secret
/// that is not base64): the operator's to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("source {:?}: {cause}", name.as_str())]
pub struct UnusableSecret {
    pub name: SourceName,
    #[source]
    pub cause: StandardKeyError,
}

/// Why a request was refused. Each maps to one HTTP status in `ingest`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("the {header} header is missing")]
    MissingSignature { header: String },
    #[error("the {header} header is malformed: {detail}")]
    MalformedSignature {
        header: String,
        detail: &'static str,
    },
    #[error("no signature in {header} matches any configured secret")]
    SignatureMismatch { header: String },
    /// Signed with a secret that has expired, and no other.
    #[error("the signature matches secret {secret:?}, which expired at {expired_at}")]
    ExpiredSecret {
        secret: String,
        expired_at: crate::api::Timestamp,
    },
    #[error("the signed timestamp is missing or unreadable")]
    BadTimestamp,
    #[error(
        "the signed timestamp is {age_secs}s away from now, outside the {tolerance_secs}s tolerance"
    )]
    StaleTimestamp { age_secs: i64, tolerance_secs: u64 },
    #[error("no event id found (looked in {looked_in})")]
    MissingEventId { looked_in: String },
    #[error("invalid event id: {0}")]
    InvalidEventId(BadEventId),
    #[error("the body is not valid {expected}, and the event id is in it")]
    UnparseableBody { expected: &'static str },
    #[error("hub.verify_token does not match the configured verify_token")]
    VerifyTokenMismatch,
    #[error("the subscription check is malformed: {0}")]
    MalformedHandshake(&'static str),
}

impl Rejection {
    /// The counter's reason; its text is also the public error code of a
    /// 400 (a 401 says only `invalid_signature`).
    pub fn reason(&self) -> RejectReason {
        match self {
            Rejection::MissingSignature { .. } => RejectReason::MissingSignature,
            Rejection::MalformedSignature { .. } => RejectReason::MalformedSignature,
            Rejection::SignatureMismatch { .. } => RejectReason::SignatureMismatch,
            Rejection::ExpiredSecret { .. } => RejectReason::ExpiredSecret,
            Rejection::BadTimestamp => RejectReason::BadTimestamp,
            Rejection::StaleTimestamp { .. } => RejectReason::StaleTimestamp,
            Rejection::MissingEventId { .. } => RejectReason::MissingEventId,
            Rejection::InvalidEventId(_) => RejectReason::InvalidEventId,
            Rejection::UnparseableBody { .. } => RejectReason::UnparseableBody,
            Rejection::VerifyTokenMismatch => RejectReason::VerifyTokenMismatch,
            Rejection::MalformedHandshake(_) => RejectReason::MalformedHandshake,
        }
    }

    /// Whether the request failed authentication (401) rather than being
    /// authentic but unusable (400).
    pub fn is_authentication(&self) -> bool {
        !matches!(
            self,
            Rejection::MissingEventId { .. }
                | Rejection::InvalidEventId(_)
                | Rejection::UnparseableBody { .. }
                | Rejection::MalformedHandshake(_)
        )
    }
}

/// One source's verifier: its scheme, decoded keys and resolved defaults.
pub struct Verifier {
    source: SourceName,
    scheme: schemes::Scheme,
    /// Each secret's name and expiry, in the scheme's key order.
    secrets: Vec<(String, Option<u64>)>,
    tolerance: Duration,
    event_id: Vec<Locator>,
    event_type: Vec<Locator>,
    /// Whether `event_type` is the kind's default (a Twitch revocation then
    /// gets the type `revocation`).
    default_event_type: bool,
    /// Meta's verify token (kind `meta` only).
    verify_token: Option<crate::config::Secret>,
}

impl Verifier {
    /// Fails when a secret cannot be used by the kind (e.g. a Standard
    /// Webhooks secret that is not base64).
    pub fn new(source: &SourceConfig) -> Result<Verifier, UnusableSecret> {
        let scheme = schemes::Scheme::new(source).map_err(|cause| UnusableSecret {
            name: source.name.clone(),
            cause,
        })?;
        Ok(Verifier {
            source: source.name.clone(),
            scheme,
            secrets: source
                .secrets
                .iter()
                .map(|s| (s.name.clone(), s.expires.map(|t| t.0)))
                .collect(),
            tolerance: source
                .tolerance
                .unwrap_or_else(|| default_tolerance(source.kind)),
            event_id: source
                .event_id
                .clone()
                .unwrap_or_else(|| default_event_id(source.kind)),
            event_type: source
                .event_type
                .clone()
                .unwrap_or_else(|| default_event_type(source.kind)),
            default_event_type: source.event_type.is_none(),
            verify_token: source.verify_token.as_ref().map(|t| t.value.clone()),
        })
    }

    /// Whether this source answers a GET (Meta's subscription check).
    pub fn answers_get(&self) -> bool {
        self.verify_token.is_some()
    }

    /// Meta's subscription check, `GET ?hub.mode=subscribe&hub.verify_token=…
    /// &hub.challenge=…`: the challenge, once the token matches (in constant
    /// time). Only a source with a verify token answers it.
    pub fn subscribe(&self, query: Option<&str>) -> Result<Handshake, Rejection> {
        use subtle::ConstantTimeEq;
        let Some(expected) = &self.verify_token else {
            return Err(Rejection::MalformedHandshake(
                "this source's kind has no subscription check",
            ));
        };
        let (mut mode, mut token, mut challenge) = (None, None, None);
        for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match &*k {
                "hub.mode" => mode = Some(v),
                "hub.verify_token" => token = Some(v),
                "hub.challenge" => challenge = Some(v),
                _ => {}
            }
        }
        let token = token.ok_or_else(|| Rejection::MissingSignature {
            header: "hub.verify_token".into(),
        })?;
        if !bool::from(token.as_bytes().ct_eq(expected.expose().as_bytes())) {
            return Err(Rejection::VerifyTokenMismatch);
        }
        if mode.as_deref() != Some("subscribe") {
            return Err(Rejection::MalformedHandshake(
                "hub.mode is not \"subscribe\"",
            ));
        }
        let challenge = challenge
            .filter(|c| !c.is_empty() && c.len() <= 256)
            .ok_or(Rejection::MalformedHandshake(
                "hub.challenge is missing, empty or longer than 256 bytes",
            ))?;
        Ok(Handshake {
            what: "Meta subscription check",
            reply: HandshakeReply::Text(challenge.into_owned()),
        })
    }

    pub fn verify(&self, req: &Request<'_>, now: SystemTime) -> Result<Verified, Rejection> {
        let checked = self.scheme.check(req)?;
        let secret = self.live_secret(checked.keys, unix_ms(now))?;
        if let Some(signed_at) = checked.signed_at {
            check_tolerance(signed_at, now, self.tolerance)?;
        }
        // Past this line the body is authentic and may be parsed.
        let mut body = ParsedBody::new(req);
        if let Some(signed_at_ms) = self.scheme.body_timestamp_ms(&mut body)? {
            check_tolerance(SignedAt::Millis(signed_at_ms), now, self.tolerance)?;
        }
        if let Some(handshake) = self.scheme.handshake(req, &mut body, secret) {
            return Ok(Verified::Handshake(handshake));
        }
        let event_id = self.find_event_id(req, &mut body)?;
        let fixed_type = self
            .default_event_type
            .then(|| self.scheme.fixed_event_type(req))
            .flatten();
        let event_type = match fixed_type {
            Some(t) => Some(t.to_owned()),
            None => self
                .event_type
                .iter()
                .find_map(|l| locate(l, req, &mut body).ok().flatten()),
        };
        Ok(Verified::Event(VerifiedEvent {
            source: self.source.clone(),
            event_id,
            event_type: event_type.map(|t| truncate(t, 128)),
            content_type: header_str(req.headers, http::header::CONTENT_TYPE.as_str())
                .map(str::to_owned),
            headers: stored_headers(req.headers),
            body: req.body.clone(),
            received_at_ms: unix_ms(now),
            secret: Some(secret),
        }))
    }

    /// Of `matched`, the one not expired at `now_ms` that expires last (no
    /// expiry: never), so a request a provider signs with its old and its
    /// new secret during a roll counts as the new one's; or the expired
    /// one that matched, to name in the refusal.
    fn live_secret(&self, matched: schemes::Matched, now_ms: u64) -> Result<usize, Rejection> {
        let mut expired = None;
        let mut live: Option<(usize, Option<u64>)> = None;
        for i in matched.iter() {
            let expires = self.secrets.get(i).and_then(|(_, at)| *at);
            match expires {
                Some(at) if at <= now_ms => expired = expired.or(Some((i, at))),
                _ => {
                    let later = |best: Option<u64>| match (expires, best) {
                        (None, Some(_)) => true,
                        (Some(a), Some(b)) => a > b,
                        _ => false,
                    };
                    if live.is_none_or(|(_, best)| later(best)) {
                        live = Some((i, expires));
                    }
                }
            }
        }
        if let Some((i, _)) = live {
            return Ok(i);
        }
        let (i, at) = expired.expect("a match names at least one secret");
        Err(Rejection::ExpiredSecret {
            secret: self.secrets[i].0.clone(),
            expired_at: crate::api::Timestamp(at),
        })
    }

    /// The names of this source's secrets, in the order
    /// [`VerifiedEvent::secret`] counts them.
    pub fn secret_names(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(|(name, _)| name.as_str())
    }

    fn find_event_id(
        &self,
        req: &Request<'_>,
        body: &mut ParsedBody<'_>,
    ) -> Result<EventId, Rejection> {
        // A locator that cannot read the body (JSON expected, form sent) falls
        // through to the next one; its error is reported only if none matches.
        let mut unreadable = None;
        for locator in &self.event_id {
            match locate(locator, req, body) {
                Ok(Some(id)) => return EventId::parse(&id).map_err(Rejection::InvalidEventId),
                Ok(None) => {}
                Err(e) => unreadable = unreadable.or(Some(e)),
            }
        }
        if let Some(e) = unreadable {
            return Err(e);
        }
        let looked_in: Vec<String> = self.event_id.iter().map(|l| l.to_string()).collect();
        Err(Rejection::MissingEventId {
            looked_in: looked_in.join(", "),
        })
    }
}

/// The provider's documented tolerance where it signs a timestamp.
fn default_tolerance(kind: Kind) -> Duration {
    match kind {
        // Paddle's SDKs allow 5 s; Linear's SDK 60 s; Twitch says 10 minutes.
        Kind::Paddle => Duration::from_secs(5),
        Kind::Linear => Duration::from_secs(60),
        Kind::Twitch => Duration::from_secs(600),
        // Stripe, Slack and Standard Webhooks all use 5 minutes.
        _ => Duration::from_secs(300),
    }
}

fn header_locator(name: &'static str) -> Locator {
    Locator::Header(http::HeaderName::from_static(name))
}

fn json_locator(pointer: &str) -> Locator {
    Locator::Json(pointer.to_owned())
}

/// Where each provider puts the id that stays the same across its retries.
pub fn default_event_id(kind: Kind) -> Vec<Locator> {
    match kind {
        Kind::Stripe => vec![json_locator("/id")],
        Kind::Github => vec![header_locator("x-github-delivery")],
        // Shopify: a repeated event id is the duplicate (one webhook per
        // subscription to a topic, each its own webhook id), but one
        // merchant action's deliveries to several topics share it: the
        // topic and the event id together, else the webhook id.
        Kind::Shopify => vec![
            Locator::Joined(vec![
                header_locator("x-shopify-topic"),
                header_locator("x-shopify-event-id"),
            ]),
            header_locator("x-shopify-webhook-id"),
        ],
        Kind::Slack => vec![json_locator("/event_id")],
        Kind::Standard => vec![header_locator("webhook-id"), header_locator("svix-id")],
        // Paddle makes a new notification (a new notification_id) for each
        // destination and each replay of one event; its event_id stays.
        Kind::Paddle => vec![json_locator("/event_id")],
        Kind::Linear => vec![header_locator("linear-delivery")],
        Kind::Twilio => vec![header_locator("i-twilio-idempotency-token")],
        Kind::Gitlab => vec![
            header_locator("idempotency-key"),
            header_locator("x-gitlab-event-uuid"),
        ],
        // Twitch resends a message under the same id.
        Kind::Twitch => vec![header_locator("twitch-eventsub-message-id")],
        // Zoom and Meta send no event id; their retries repeat the body byte
        // for byte (the signature and its timestamp are in headers), so its
        // hash is what stays the same.
        Kind::Zoom | Kind::Meta => vec![Locator::BodySha256],
        // Config validation requires event_id for hmac.
        Kind::Hmac => vec![],
    }
}

/// Where each provider puts the event type (none: Twilio; hmac: the config says).
pub fn default_event_type(kind: Kind) -> Vec<Locator> {
    match kind {
        Kind::Stripe | Kind::Standard => vec![json_locator("/type")],
        Kind::Github => vec![header_locator("x-github-event")],
        Kind::Shopify => vec![header_locator("x-shopify-topic")],
        Kind::Slack => vec![json_locator("/event/type"), json_locator("/type")],
        Kind::Paddle => vec![json_locator("/event_type")],
        Kind::Linear => vec![header_locator("linear-event"), json_locator("/type")],
        Kind::Gitlab => vec![header_locator("x-gitlab-event")],
        Kind::Twitch => vec![header_locator("twitch-eventsub-subscription-type")],
        Kind::Zoom => vec![json_locator("/event")],
        // WhatsApp and Instagram name the change ("messages"); Messenger
        // only the object ("page").
        Kind::Meta => vec![
            json_locator("/entry/0/changes/0/field"),
            json_locator("/object"),
        ],
        Kind::Twilio | Kind::Hmac => vec![],
    }
}

/// A timestamp a provider signed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SignedAt {
    Secs(i64),
    Millis(i64),
}

fn check_tolerance(
    signed_at: SignedAt,
    now: SystemTime,
    tolerance: Duration,
) -> Result<(), Rejection> {
    let now_ms = unix_ms(now) as i64;
    let signed_ms = match signed_at {
        SignedAt::Secs(s) => s.saturating_mul(1000),
        SignedAt::Millis(ms) => ms,
    };
    let age_ms = now_ms.saturating_sub(signed_ms);
    // Both directions: a timestamp from the future is as suspect as an old one.
    if age_ms.unsigned_abs() > tolerance.as_millis() as u64 {
        return Err(Rejection::StaleTimestamp {
            age_secs: age_ms / 1000,
            tolerance_secs: tolerance.as_secs(),
        });
    }
    Ok(())
}

/// The body, parsed at most once into a `Value` (for the kinds that read
/// several fields of it), and only after the signature verified.
struct ParsedBody<'a> {
    raw: &'a [u8],
    json: Option<Result<serde_json::Value, ()>>,
}

impl<'a> ParsedBody<'a> {
    fn new(req: &Request<'a>) -> ParsedBody<'a> {
        ParsedBody {
            raw: req.body,
            json: None,
        }
    }

    fn json(&mut self) -> Result<&serde_json::Value, Rejection> {
        let raw = self.raw;
        self.json
            .get_or_insert_with(|| serde_json::from_slice(raw).map_err(|_| ()))
            .as_ref()
            .map_err(|()| Rejection::UnparseableBody { expected: "JSON" })
    }
}

/// Finds a value; `Ok(None)` when absent, `Err` when the body had to be
/// parsed for it and could not be.
fn locate(
    locator: &Locator,
    req: &Request<'_>,
    body: &mut ParsedBody<'_>,
) -> Result<Option<String>, Rejection> {
    Ok(match locator {
        Locator::Header(name) => req
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
        // Read off the bytes: no `Value` of the whole body is built.
        Locator::Json(pointer) => {
            match json_pointer::value_at(body.raw, &json_pointer::tokens(pointer))
                .map_err(|json_pointer::NotJson| Rejection::UnparseableBody { expected: "JSON" })?
            {
                Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s),
                Some(serde_json::Value::Number(n)) => Some(n.to_string()),
                _ => None,
            }
        }
        Locator::Form(field) => form_urlencoded::parse(req.body)
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.into_owned())
            .filter(|v| !v.is_empty()),
        Locator::BodySha256 => Some(hex::encode(sha2::Sha256::digest(req.body))),
        Locator::Joined(parts) => {
            let mut joined = String::new();
            for part in parts {
                let Some(value) = locate(part, req, body)? else {
                    return Ok(None);
                };
                if !joined.is_empty() {
                    joined.push(':');
                }
                joined.push_str(&value);
            }
            Some(joined)
        }
    })
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

pub(crate) fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Headers never kept with an event: hop-by-hop, credentials of the caller,
/// and what the stored body makes redundant.
const UNSTORED_HEADERS: [&str; 10] = [
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    "te",
    "authorization",
    "proxy-authorization",
    "cookie",
];

/// The headers kept with an event, so that deliveries can forward the
/// provider's own headers (and the app's provider-SDK check keeps working).
/// None named under [`RESERVED`]: those are hookinbox's to set.
pub fn stored_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| !UNSTORED_HEADERS.contains(&name.as_str()))
        .filter(|(name, _)| !name.as_str().starts_with(RESERVED))
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
