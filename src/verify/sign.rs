//! Signing a request exactly as each provider would: the mirror of the
//! schemes, for `hookinbox send`, benchmarks and tests. It shares the MAC and
//! key derivation with verification, and is tested against the providers'
//! own SDK vectors so the two cannot drift apart together.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

use super::schemes::{mac, signing_key, twilio_signed_string};
use crate::config::{HmacAlgorithm, HmacSpec, Kind, Locator, PayloadPart, SignatureEncoding};
use crate::standard_webhooks::{StandardKey, StandardKeyError};

/// Why a request cannot be signed as its provider would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error(transparent)]
    Key(#[from] StandardKeyError),
    /// An `hmac` request without its source's scheme.
    #[error("signing an hmac request needs its scheme")]
    NoScheme,
    /// The scheme signs a header that `send` does not set.
    #[error("signed_payload needs header {name}, which send does not set")]
    UnsetHeader { name: String },
}

/// What to sign.
pub struct Signing<'a> {
    pub kind: Kind,
    pub secret: &'a str,
    pub body: &'a [u8],
    /// The provider event id, for providers that carry it in a header.
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    /// Unix seconds to sign at.
    pub timestamp: i64,
    /// The full URL the request goes to (Twilio signs it).
    pub url: &'a str,
    pub content_type: &'a str,
    /// For `hmac` sources: the scheme, and the event id locators (to know
    /// which header carries the id).
    pub hmac: Option<(&'a HmacSpec, &'a [Locator])>,
}

/// The URL Twilio calls for a body that is not a form: the body's SHA-256 in
/// the query, so the signature over the URL covers it.
pub fn twilio_body_url(url: &str, body: &[u8]) -> String {
    use sha2::Digest;
    let sep = if url.contains('?') { '&' } else { '?' };
    format!(
        "{url}{sep}bodySHA256={}",
        hex::encode(sha2::Sha256::digest(body))
    )
}

/// The headers the provider would send, signature included. For Twilio,
/// `url` is the URL as sent, including bodySHA256 for a non-form body (see
/// [`twilio_body_url`]).
pub fn sign(s: &Signing<'_>) -> Result<Vec<(String, String)>, SignError> {
    let key = signing_key(s.kind, s.secret)?;
    let hex_mac = |parts: &[&[u8]]| hex::encode(mac(HmacAlgorithm::Sha256, &key, parts));
    let b64_mac = |alg, parts: &[&[u8]]| B64.encode(mac(alg, &key, parts));
    let ts = s.timestamp.to_string();
    let body = s.body;
    let typ = s.event_type;
    let mut h: Vec<(String, String)> = vec![("content-type".into(), s.content_type.into())];
    let mut push = |name: &str, value: String| h.push((name.into(), value));
    match s.kind {
        Kind::Stripe => push(
            "stripe-signature",
            format!("t={ts},v1={}", hex_mac(&[ts.as_bytes(), b".", body])),
        ),
        Kind::Github => {
            push("x-github-delivery", s.event_id.into());
            push("x-github-event", typ.unwrap_or("ping").into());
            push(
                "x-hub-signature-256",
                format!("sha256={}", hex_mac(&[body])),
            );
        }
        Kind::Shopify => {
            push("x-shopify-webhook-id", s.event_id.into());
            push("x-shopify-event-id", s.event_id.into());
            push("x-shopify-topic", typ.unwrap_or("orders/create").into());
            push(
                "x-shopify-hmac-sha256",
                b64_mac(HmacAlgorithm::Sha256, &[body]),
            );
        }
        // The same scheme under each provider's header names.
        Kind::Slack | Kind::Zoom => {
            let (time_header, signature_header) = if s.kind == Kind::Slack {
                ("x-slack-request-timestamp", "x-slack-signature")
            } else {
                ("x-zm-request-timestamp", "x-zm-signature")
            };
            push(time_header, ts.clone());
            push(
                signature_header,
                format!("v0={}", hex_mac(&[b"v0:", ts.as_bytes(), b":", body])),
            );
        }
        Kind::Meta => push(
            "x-hub-signature-256",
            format!("sha256={}", hex_mac(&[body])),
        ),
        Kind::Twitch => {
            let at = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(u64::try_from(s.timestamp).unwrap_or_default());
            let at = humantime::format_rfc3339_nanos(at).to_string();
            let signature = hex_mac(&[s.event_id.as_bytes(), at.as_bytes(), body]);
            push("twitch-eventsub-message-id", s.event_id.into());
            push("twitch-eventsub-message-timestamp", at);
            push("twitch-eventsub-message-type", "notification".into());
            push("twitch-eventsub-message-retry", "0".into());
            push(
                "twitch-eventsub-subscription-type",
                typ.unwrap_or("channel.follow").into(),
            );
            push("twitch-eventsub-subscription-version", "1".into());
            push(
                "twitch-eventsub-message-signature",
                format!("sha256={signature}"),
            );
        }
        Kind::Standard => {
            // The signer deliveries use, so what `send`, the benches and the
            // tests sign is what hookinbox itself puts on the wire.
            let key = StandardKey::parse(s.secret)?;
            push("webhook-id", s.event_id.into());
            push("webhook-timestamp", ts.clone());
            push("webhook-signature", key.sign(s.event_id, s.timestamp, body));
        }
        Kind::Paddle => push(
            "paddle-signature",
            format!("ts={ts};h1={}", hex_mac(&[ts.as_bytes(), b":", body])),
        ),
        Kind::Linear => {
            push("linear-delivery", s.event_id.into());
            if let Some(t) = typ {
                push("linear-event", t.into());
            }
            push("linear-signature", hex_mac(&[body]));
        }
        Kind::Twilio => {
            let form = s
                .content_type
                .starts_with("application/x-www-form-urlencoded");
            let signed = twilio_signed_string(s.url.to_owned(), body, form);
            push("i-twilio-idempotency-token", s.event_id.into());
            push(
                "x-twilio-signature",
                b64_mac(HmacAlgorithm::Sha1, &[signed.as_bytes()]),
            );
        }
        Kind::Gitlab => {
            push("idempotency-key", s.event_id.into());
            push("x-gitlab-event", typ.unwrap_or("Push Hook").into());
            push("x-gitlab-token", s.secret.into());
        }
        Kind::Hmac => {
            let (spec, id_locators) = s.hmac.ok_or(SignError::NoScheme)?;
            sign_hmac(s, spec, id_locators, &key, &ts, &mut h)?;
        }
    }
    Ok(h)
}

/// The generic `hmac` kind: the id and timestamp headers its scheme names,
/// then the MAC of its `signed_payload` (which may take any header already
/// in `h`) in the scheme's header, prefix and encoding.
fn sign_hmac(
    s: &Signing<'_>,
    spec: &HmacSpec,
    id_locators: &[Locator],
    key: &[u8],
    ts: &str,
    h: &mut Vec<(String, String)>,
) -> Result<(), SignError> {
    let body = s.body;
    if let Some(Locator::Header(name)) = id_locators.first() {
        h.push((name.as_str().into(), s.event_id.into()));
    }
    if let Some(t) = &spec.timestamp_header {
        h.push((t.as_str().into(), ts.into()));
    }
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for part in &spec.signed_payload {
        parts.push(match part {
            PayloadPart::Literal(l) => l.as_bytes().to_vec(),
            PayloadPart::Body => body.to_vec(),
            PayloadPart::Timestamp => ts.as_bytes().to_vec(),
            PayloadPart::Header(name) => h
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name.as_str()))
                .map(|(_, v)| v.as_bytes().to_vec())
                .ok_or_else(|| SignError::UnsetHeader {
                    name: name.to_string(),
                })?,
        });
    }
    let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let raw = mac(spec.algorithm, key, &refs);
    let encoded = match spec.encoding {
        SignatureEncoding::Hex => hex::encode(raw),
        SignatureEncoding::Base64 => B64.encode(raw),
    };
    h.push((
        spec.signature_header.as_str().into(),
        format!("{}{encoded}", spec.prefix),
    ));
    Ok(())
}
