//! The providers' signature schemes, checked on the raw bytes.
//!
//! Each check finds the signature header, computes the MAC of what the
//! provider signs with every configured secret, and compares in constant time
//! against every signature the header carries (rotation: any valid pair
//! passes). It returns the signed timestamp, if the provider signs one, for the
//! caller to hold against the tolerance.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::Digest;
use subtle::ConstantTimeEq;

use super::{Handshake, HandshakeReply, ParsedBody, Rejection, Request, SignedAt, header_str};
use crate::config::{HmacAlgorithm, HmacSpec, Kind, PayloadPart, SignatureEncoding, SourceConfig};
use crate::standard_webhooks::{StandardKey, StandardKeyError};

pub(super) struct Scheme {
    kind: Kind,
    /// The MAC keys (or, for GitLab, the tokens), one per active secret.
    keys: Vec<Vec<u8>>,
    public_url: Option<String>,
    hmac: Option<HmacSpec>,
}

/// A request whose signature verified.
pub(super) struct Checked {
    /// The timestamp the provider signed, if it signs one.
    pub(super) signed_at: Option<SignedAt>,
    /// Which configured secrets verified it (a sender may sign with
    /// several): the caller picks one that has not expired.
    pub(super) keys: Matched,
}

/// The configured secrets (by position, the first 64) that verified a
/// request: never none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Matched(u64);

impl Matched {
    /// The positions, in order.
    pub(super) fn iter(self) -> impl Iterator<Item = usize> {
        // Each set bit, lowest first: one step per match, not per position.
        std::iter::successors(Some(self.0), |rest| Some(rest & rest.wrapping_sub(1)))
            .take_while(|&rest| rest != 0)
            .map(|rest| rest.trailing_zeros() as usize)
    }
}

impl Checked {
    fn at(keys: Matched, signed_at: SignedAt) -> Checked {
        Checked {
            signed_at: Some(signed_at),
            keys,
        }
    }

    fn untimed(keys: Matched) -> Checked {
        Checked {
            signed_at: None,
            keys,
        }
    }
}

/// Most keys a scheme holds: one bit each in [`Matched`].
const MAX_KEYS: usize = 64;

/// Computes an HMAC over the concatenation of `parts`.
pub(crate) fn mac(algorithm: HmacAlgorithm, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        let mut m = <M as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().to_vec()
    }
    match algorithm {
        HmacAlgorithm::Sha1 => run::<Hmac<sha1::Sha1>>(key, parts),
        HmacAlgorithm::Sha256 => run::<Hmac<sha2::Sha256>>(key, parts),
        HmacAlgorithm::Sha512 => run::<Hmac<sha2::Sha512>>(key, parts),
    }
}

/// The MAC key of a secret for a kind. Standard Webhooks (and Svix) keys are
/// decoded by [`StandardKey`]; Stripe uses its `whsec_…` string whole; every
/// other provider uses the secret's bytes.
pub(crate) fn signing_key(kind: Kind, secret: &str) -> Result<Vec<u8>, StandardKeyError> {
    match kind {
        Kind::Standard => StandardKey::parse(secret).map(|key| key.bytes().to_vec()),
        _ => Ok(secret.as_bytes().to_vec()),
    }
}

fn missing(header: &str) -> Rejection {
    Rejection::MissingSignature {
        header: header.to_owned(),
    }
}

fn malformed(header: &str, detail: &'static str) -> Rejection {
    Rejection::MalformedSignature {
        header: header.to_owned(),
        detail,
    }
}

fn required<'r>(req: &'r Request<'_>, name: &str) -> Result<&'r str, Rejection> {
    header_str(req.headers, name)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| missing(name))
}

fn parse_secs(header: &str, value: &str) -> Result<i64, Rejection> {
    value
        .trim()
        .parse()
        .map_err(|_| malformed(header, "the timestamp is not a number"))
}

impl Scheme {
    pub(super) fn new(source: &SourceConfig) -> Result<Scheme, StandardKeyError> {
        let keys = source
            .secrets
            .iter()
            .take(MAX_KEYS)
            .map(|s| signing_key(source.kind, s.value.expose()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scheme {
            kind: source.kind,
            keys,
            public_url: source.public_url.clone(),
            hmac: source.hmac.clone(),
        })
    }

    /// Every key whose MAC of `parts` equals any of `candidates`.
    fn matching_keys(
        &self,
        algorithm: HmacAlgorithm,
        parts: &[&[u8]],
        candidates: &[Vec<u8>],
    ) -> u64 {
        let mut matched = 0;
        for (i, key) in self.keys.iter().enumerate() {
            let expected = mac(algorithm, key, parts);
            if candidates
                .iter()
                .any(|c| bool::from(expected.as_slice().ct_eq(c.as_slice())))
            {
                matched |= 1 << i;
            }
        }
        matched
    }

    /// The keys that verify `parts`, or why none does.
    fn require_match(
        &self,
        header: &str,
        algorithm: HmacAlgorithm,
        parts: &[&[u8]],
        candidates: &[Vec<u8>],
    ) -> Result<Matched, Rejection> {
        if candidates.is_empty() {
            return Err(malformed(header, "it carries no signature"));
        }
        match self.matching_keys(algorithm, parts, candidates) {
            0 => Err(Rejection::SignatureMismatch {
                header: header.to_owned(),
            }),
            matched => Ok(Matched(matched)),
        }
    }

    /// Slack's and Zoom's scheme: `v0=` + hex HMAC of `v0:{timestamp}:{body}`,
    /// the timestamp in its own header.
    fn check_v0(&self, req: &Request<'_>, h: &str, t: &str) -> Result<Checked, Rejection> {
        let ts = required(req, t)?;
        let secs = parse_secs(t, ts)?;
        let hex_sig = required(req, h)?
            .strip_prefix("v0=")
            .ok_or_else(|| malformed(h, "it does not start with v0="))?;
        let sig = hex::decode(hex_sig).map_err(|_| malformed(h, "the signature is not hex"))?;
        let parts: [&[u8]; 4] = [b"v0:", ts.as_bytes(), b":", req.body];
        let key = self.require_match(h, HmacAlgorithm::Sha256, &parts, &[sig])?;
        Ok(Checked::at(key, SignedAt::Secs(secs)))
    }

    /// Checks the signature; returns the signed timestamp, if any, and the
    /// key that verified it.
    pub(super) fn check(&self, req: &Request<'_>) -> Result<Checked, Rejection> {
        let body: &[u8] = req.body;
        let sha256 = HmacAlgorithm::Sha256;
        match self.kind {
            Kind::Stripe => self.check_stripe(req),
            // Meta signs its Graph API webhooks as GitHub does.
            Kind::Github | Kind::Meta => {
                const H: &str = "x-hub-signature-256";
                let value = required(req, H)?;
                let hex_sig = value
                    .strip_prefix("sha256=")
                    .ok_or_else(|| malformed(H, "it does not start with sha256="))?;
                let sig =
                    hex::decode(hex_sig).map_err(|_| malformed(H, "the signature is not hex"))?;
                let key = self.require_match(H, sha256, &[body], &[sig])?;
                Ok(Checked::untimed(key))
            }
            Kind::Shopify => {
                const H: &str = "x-shopify-hmac-sha256";
                let sig = B64
                    .decode(required(req, H)?)
                    .map_err(|_| malformed(H, "the signature is not base64"))?;
                let key = self.require_match(H, sha256, &[body], &[sig])?;
                Ok(Checked::untimed(key))
            }
            Kind::Slack => self.check_v0(req, "x-slack-signature", "x-slack-request-timestamp"),
            Kind::Zoom => self.check_v0(req, "x-zm-signature", "x-zm-request-timestamp"),
            Kind::Twitch => {
                const H: &str = "twitch-eventsub-message-signature";
                let id = required(req, "twitch-eventsub-message-id")?;
                let ts = required(req, "twitch-eventsub-message-timestamp")?;
                let hex_sig = required(req, H)?
                    .strip_prefix("sha256=")
                    .ok_or_else(|| malformed(H, "it does not start with sha256="))?;
                let sig =
                    hex::decode(hex_sig).map_err(|_| malformed(H, "the signature is not hex"))?;
                let key =
                    self.require_match(H, sha256, &[id.as_bytes(), ts.as_bytes(), body], &[sig])?;
                Ok(Checked::at(key, parse_any_timestamp(ts)?))
            }
            Kind::Standard => self.check_standard(req),
            Kind::Paddle => self.check_paddle(req),
            Kind::Linear => {
                const H: &str = "linear-signature";
                let sig = hex::decode(required(req, H)?)
                    .map_err(|_| malformed(H, "the signature is not hex"))?;
                let key = self.require_match(H, sha256, &[body], &[sig])?;
                // Linear signs its timestamp inside the body: see body_timestamp_ms.
                Ok(Checked::untimed(key))
            }
            Kind::Twilio => self.check_twilio(req).map(Checked::untimed),
            Kind::Gitlab => {
                const H: &str = "x-gitlab-token";
                let token = header_str(req.headers, H)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| missing(H))?;
                let matched = self
                    .keys
                    .iter()
                    .enumerate()
                    .filter(|(_, k)| bool::from(k.as_slice().ct_eq(token.as_bytes())))
                    .fold(0, |set, (i, _)| set | 1 << i);
                match matched {
                    0 => Err(Rejection::SignatureMismatch {
                        header: H.to_owned(),
                    }),
                    set => Ok(Checked::untimed(Matched(set))),
                }
            }
            Kind::Hmac => self.check_hmac(req),
        }
    }

    /// Stripe's scheme: `t={timestamp},v1={hex HMAC of "{t}.{body}"}`, any
    /// number of `v1` signatures (one per active secret at Stripe).
    fn check_stripe(&self, req: &Request<'_>) -> Result<Checked, Rejection> {
        const H: &str = "stripe-signature";
        let body: &[u8] = req.body;
        let sha256 = HmacAlgorithm::Sha256;
        let value = required(req, H)?;
        let mut timestamp = None;
        let mut candidates = Vec::new();
        for item in value.split(',') {
            match item.trim().split_once('=') {
                Some(("t", t)) => timestamp = Some(t),
                Some(("v1", sig)) => candidates
                    .push(hex::decode(sig).map_err(|_| malformed(H, "a v1 signature is not hex"))?),
                _ => {}
            }
        }
        let t = timestamp.ok_or_else(|| malformed(H, "it has no t= timestamp"))?;
        let secs = parse_secs(H, t)?;
        let key = self.require_match(H, sha256, &[t.as_bytes(), b".", body], &candidates)?;
        Ok(Checked::at(key, SignedAt::Secs(secs)))
    }

    /// Standard Webhooks (and Svix under `svix-*` names): `v1,{base64 HMAC of
    /// "{id}.{timestamp}.{body}"}`, space-separated, id and time in headers.
    fn check_standard(&self, req: &Request<'_>) -> Result<Checked, Rejection> {
        let body: &[u8] = req.body;
        let sha256 = HmacAlgorithm::Sha256;
        // Svix sends the same scheme under svix-* names.
        let (id_h, ts_h, sig_h) = if req.headers.contains_key("webhook-signature") {
            ("webhook-id", "webhook-timestamp", "webhook-signature")
        } else if req.headers.contains_key("svix-signature") {
            ("svix-id", "svix-timestamp", "svix-signature")
        } else {
            return Err(missing("webhook-signature"));
        };
        let id = required(req, id_h)?;
        let ts = required(req, ts_h)?;
        let secs = parse_secs(ts_h, ts)?;
        let mut candidates = Vec::new();
        for item in required(req, sig_h)?.split_whitespace() {
            // Other versions (e.g. v1a, asymmetric) are skipped, as the spec says.
            if let Some(b64) = item.strip_prefix("v1,") {
                candidates.push(
                    B64.decode(b64)
                        .map_err(|_| malformed(sig_h, "a v1 signature is not base64"))?,
                );
            }
        }
        let key = self.require_match(
            sig_h,
            sha256,
            &[id.as_bytes(), b".", ts.as_bytes(), b".", body],
            &candidates,
        )?;
        Ok(Checked::at(key, SignedAt::Secs(secs)))
    }

    /// Paddle's scheme: `ts={timestamp};h1={hex HMAC of "{ts}:{body}"}`, any
    /// number of `h1` signatures.
    fn check_paddle(&self, req: &Request<'_>) -> Result<Checked, Rejection> {
        const H: &str = "paddle-signature";
        let body: &[u8] = req.body;
        let sha256 = HmacAlgorithm::Sha256;
        let value = required(req, H)?;
        let mut timestamp = None;
        let mut candidates = Vec::new();
        for item in value.split(';') {
            match item.trim().split_once('=') {
                Some(("ts", t)) => timestamp = Some(t),
                Some(("h1", sig)) => candidates.push(
                    hex::decode(sig).map_err(|_| malformed(H, "an h1 signature is not hex"))?,
                ),
                _ => {}
            }
        }
        let t = timestamp.ok_or_else(|| malformed(H, "it has no ts= timestamp"))?;
        let secs = parse_secs(H, t)?;
        let key = self.require_match(H, sha256, &[t.as_bytes(), b":", body], &candidates)?;
        Ok(Checked::at(key, SignedAt::Secs(secs)))
    }

    fn check_twilio(&self, req: &Request<'_>) -> Result<Matched, Rejection> {
        const H: &str = "x-twilio-signature";
        let sig = B64
            .decode(required(req, H)?)
            .map_err(|_| malformed(H, "the signature is not base64"))?;
        let url = twilio_url(
            self.public_url.as_deref().unwrap_or_default(),
            req.path_rest,
            req.query,
        );
        // Twilio's signature-settings header selects HMAC-SHA256 for shared-key
        // webhooks; the key is the same secret either way, so this choice gives
        // an attacker nothing.
        let algorithm = match header_str(req.headers, "x-twilio-webhooks-signature-settings") {
            Some(s) if s.contains("algorithm=HMAC_SHA256") => HmacAlgorithm::Sha256,
            _ => HmacAlgorithm::Sha1,
        };
        let body_hash = req.query.and_then(|q| {
            form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "bodySHA256")
                .map(|(_, v)| v.into_owned())
        });
        let signed = if let Some(expected) = body_hash {
            // JSON bodies: the URL carries the body's hash and is signed alone.
            let actual = hex::encode(sha2::Sha256::digest(req.body));
            if !bool::from(
                actual
                    .as_bytes()
                    .ct_eq(expected.to_ascii_lowercase().as_bytes()),
            ) {
                return Err(Rejection::SignatureMismatch {
                    header: H.to_owned(),
                });
            }
            url
        } else if is_form(req) || req.body.is_empty() {
            twilio_signed_string(url, req.body, true)
        } else {
            // Twilio's signature covers form parameters, not other bodies: a
            // JSON body is authentic only through bodySHA256 in the signed URL.
            return Err(malformed(
                H,
                "a body that is not a form must be covered by bodySHA256 in the URL",
            ));
        };
        self.require_match(H, algorithm, &[signed.as_bytes()], &[sig])
    }

    fn check_hmac(&self, req: &Request<'_>) -> Result<Checked, Rejection> {
        let spec = self
            .hmac
            .as_ref()
            .expect("config validation requires the hmac spec");
        let h = spec.signature_header.as_str();
        let value = required(req, h)?;
        let encoded = value
            .strip_prefix(spec.prefix.as_str())
            .ok_or_else(|| malformed(h, "it lacks the configured prefix"))?;
        let sig = match spec.encoding {
            SignatureEncoding::Hex => {
                hex::decode(encoded.trim()).map_err(|_| malformed(h, "the signature is not hex"))?
            }
            SignatureEncoding::Base64 => B64
                .decode(encoded.trim())
                .map_err(|_| malformed(h, "the signature is not base64"))?,
        };
        let timestamp = spec
            .timestamp_header
            .as_ref()
            .map(|t| required(req, t.as_str()))
            .transpose()?;
        let mut parts: Vec<&[u8]> = Vec::with_capacity(spec.signed_payload.len());
        for part in &spec.signed_payload {
            parts.push(match part {
                PayloadPart::Literal(l) => l.as_bytes(),
                PayloadPart::Body => req.body,
                PayloadPart::Timestamp => timestamp.unwrap_or_default().as_bytes(),
                PayloadPart::Header(name) => required(req, name.as_str())?.as_bytes(),
            });
        }
        let keys = self.require_match(h, spec.algorithm, &parts, &[sig])?;
        Ok(Checked {
            signed_at: timestamp.map(parse_any_timestamp).transpose()?,
            keys,
        })
    }

    /// Providers that sign a timestamp inside the body (Linear).
    pub(super) fn body_timestamp_ms(
        &self,
        body: &mut ParsedBody<'_>,
    ) -> Result<Option<i64>, Rejection> {
        if self.kind != Kind::Linear {
            return Ok(None);
        }
        match body
            .json()?
            .get("webhookTimestamp")
            .and_then(|v| v.as_i64())
        {
            Some(ms) => Ok(Some(ms)),
            None => Err(Rejection::BadTimestamp),
        }
    }

    /// The provider's check of a new URL, in a verified request: Slack's
    /// `url_verification` and Twitch's `webhook_callback_verification` (echo
    /// the challenge), Zoom's `endpoint.url_validation` (the plain token and
    /// its HMAC under `key`, the secret that verified the request).
    pub(super) fn handshake(
        &self,
        req: &Request<'_>,
        body: &mut ParsedBody<'_>,
        key: usize,
    ) -> Option<Handshake> {
        match self.kind {
            Kind::Slack => {
                let json = body.json().ok()?;
                if json.get("type")?.as_str()? != "url_verification" {
                    return None;
                }
                Some(Handshake {
                    what: "Slack url_verification",
                    reply: HandshakeReply::Text(json.get("challenge")?.as_str()?.to_owned()),
                })
            }
            Kind::Twitch => {
                if header_str(req.headers, "twitch-eventsub-message-type")?
                    != "webhook_callback_verification"
                {
                    return None;
                }
                let challenge = body.json().ok()?.get("challenge")?.as_str()?;
                Some(Handshake {
                    what: "Twitch webhook_callback_verification",
                    reply: HandshakeReply::Text(challenge.to_owned()),
                })
            }
            Kind::Zoom => {
                let json = body.json().ok()?;
                if json.get("event")?.as_str()? != "endpoint.url_validation" {
                    return None;
                }
                let plain = json.pointer("/payload/plainToken")?.as_str()?;
                let encrypted = hex::encode(mac(
                    HmacAlgorithm::Sha256,
                    &self.keys[key],
                    &[plain.as_bytes()],
                ));
                Some(Handshake {
                    what: "Zoom endpoint.url_validation",
                    reply: HandshakeReply::Json(
                        serde_json::json!({"plainToken": plain, "encryptedToken": encrypted}),
                    ),
                })
            }
            _ => None,
        }
    }

    /// A type that replaces the kind's default locators: a Twitch
    /// revocation carries its subscription's type in the same header as a
    /// notification, so it is typed `revocation` to stand apart.
    pub(super) fn fixed_event_type(&self, req: &Request<'_>) -> Option<&'static str> {
        (self.kind == Kind::Twitch
            && header_str(req.headers, "twitch-eventsub-message-type") == Some("revocation"))
        .then_some("revocation")
    }
}

fn is_form(req: &Request<'_>) -> bool {
    header_str(req.headers, "content-type")
        .is_some_and(|ct| ct.starts_with("application/x-www-form-urlencoded"))
}

/// The URL Twilio signed: the configured public URL, plus whatever path and
/// query this request added to it.
pub(crate) fn twilio_url(public_url: &str, path_rest: &str, query: Option<&str>) -> String {
    let mut url = public_url.trim_end_matches('/').to_owned();
    url.push_str(path_rest);
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        url.push(if public_url.contains('?') { '&' } else { '?' });
        url.push_str(q);
    }
    url
}

/// Twilio's string to sign: the URL, then each form parameter's name and
/// value, sorted by name (and by value for repeated names).
pub(crate) fn twilio_signed_string(mut url: String, body: &[u8], form: bool) -> String {
    if form {
        let mut params: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
        params.sort();
        for (k, v) in params {
            url.push_str(&k);
            url.push_str(&v);
        }
    }
    url
}

/// Unix seconds, unix milliseconds (13 digits and more), or RFC 3339.
fn parse_any_timestamp(value: &str) -> Result<SignedAt, Rejection> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        let n: i64 = value.parse().map_err(|_| Rejection::BadTimestamp)?;
        // 10^11 seconds is the year 5138: anything larger is milliseconds.
        return Ok(if n >= 100_000_000_000 {
            SignedAt::Millis(n)
        } else {
            SignedAt::Secs(n)
        });
    }
    let t = humantime::parse_rfc3339(value).map_err(|_| Rejection::BadTimestamp)?;
    Ok(SignedAt::Millis(crate::clock::unix_ms(t) as i64))
}
