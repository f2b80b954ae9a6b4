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

use super::{ParsedBody, Rejection, Request, SignedAt, header_str};
use crate::config::{HmacAlgorithm, HmacSpec, Kind, PayloadPart, SignatureEncoding, SourceConfig};
use crate::standard_webhooks::StandardKey;

pub(super) struct Scheme {
    kind: Kind,
    /// The MAC keys (or, for GitLab, the tokens), one per active secret.
    keys: Vec<Vec<u8>>,
    public_url: Option<String>,
    hmac: Option<HmacSpec>,
}

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
pub(crate) fn signing_key(kind: Kind, secret: &str) -> Result<Vec<u8>, String> {
    match kind {
        Kind::Standard => StandardKey::parse(secret)
            .map(|key| key.bytes().to_vec())
            .map_err(|e| e.to_string()),
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
    pub(super) fn new(source: &SourceConfig) -> Result<Scheme, String> {
        let keys = source
            .secrets
            .iter()
            .map(|s| signing_key(source.kind, s.expose()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Scheme {
            kind: source.kind,
            keys,
            public_url: source.public_url.clone(),
            hmac: source.hmac.clone(),
        })
    }

    /// True when any key's MAC of `parts` equals any of `candidates`.
    fn matches(&self, algorithm: HmacAlgorithm, parts: &[&[u8]], candidates: &[Vec<u8>]) -> bool {
        self.keys.iter().any(|key| {
            let expected = mac(algorithm, key, parts);
            candidates
                .iter()
                .any(|c| bool::from(expected.as_slice().ct_eq(c.as_slice())))
        })
    }

    fn require_match(
        &self,
        header: &str,
        algorithm: HmacAlgorithm,
        parts: &[&[u8]],
        candidates: &[Vec<u8>],
    ) -> Result<(), Rejection> {
        if candidates.is_empty() {
            return Err(malformed(header, "it carries no signature"));
        }
        if self.matches(algorithm, parts, candidates) {
            Ok(())
        } else {
            Err(Rejection::SignatureMismatch {
                header: header.to_owned(),
            })
        }
    }

    /// Checks the signature; returns the signed timestamp, if any.
    pub(super) fn check(&self, req: &Request<'_>) -> Result<Option<SignedAt>, Rejection> {
        let body: &[u8] = req.body;
        let sha256 = HmacAlgorithm::Sha256;
        match self.kind {
            Kind::Stripe => {
                const H: &str = "stripe-signature";
                let value = required(req, H)?;
                let mut timestamp = None;
                let mut candidates = Vec::new();
                for item in value.split(',') {
                    match item.trim().split_once('=') {
                        Some(("t", t)) => timestamp = Some(t),
                        Some(("v1", sig)) => candidates.push(
                            hex::decode(sig)
                                .map_err(|_| malformed(H, "a v1 signature is not hex"))?,
                        ),
                        _ => {}
                    }
                }
                let t = timestamp.ok_or_else(|| malformed(H, "it has no t= timestamp"))?;
                let secs = parse_secs(H, t)?;
                self.require_match(H, sha256, &[t.as_bytes(), b".", body], &candidates)?;
                Ok(Some(SignedAt::Secs(secs)))
            }
            Kind::Github => {
                const H: &str = "x-hub-signature-256";
                let value = required(req, H)?;
                let hex_sig = value
                    .strip_prefix("sha256=")
                    .ok_or_else(|| malformed(H, "it does not start with sha256="))?;
                let sig =
                    hex::decode(hex_sig).map_err(|_| malformed(H, "the signature is not hex"))?;
                self.require_match(H, sha256, &[body], &[sig])?;
                Ok(None)
            }
            Kind::Shopify => {
                const H: &str = "x-shopify-hmac-sha256";
                let sig = B64
                    .decode(required(req, H)?)
                    .map_err(|_| malformed(H, "the signature is not base64"))?;
                self.require_match(H, sha256, &[body], &[sig])?;
                Ok(None)
            }
            Kind::Slack => {
                const H: &str = "x-slack-signature";
                const T: &str = "x-slack-request-timestamp";
                let ts = required(req, T)?;
                let secs = parse_secs(T, ts)?;
                let hex_sig = required(req, H)?
                    .strip_prefix("v0=")
                    .ok_or_else(|| malformed(H, "it does not start with v0="))?;
                let sig =
                    hex::decode(hex_sig).map_err(|_| malformed(H, "the signature is not hex"))?;
                self.require_match(H, sha256, &[b"v0:", ts.as_bytes(), b":", body], &[sig])?;
                Ok(Some(SignedAt::Secs(secs)))
            }
            Kind::Standard => {
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
                self.require_match(
                    sig_h,
                    sha256,
                    &[id.as_bytes(), b".", ts.as_bytes(), b".", body],
                    &candidates,
                )?;
                Ok(Some(SignedAt::Secs(secs)))
            }
            Kind::Paddle => {
                const H: &str = "paddle-signature";
                let value = required(req, H)?;
                let mut timestamp = None;
                let mut candidates = Vec::new();
                for item in value.split(';') {
                    match item.trim().split_once('=') {
                        Some(("ts", t)) => timestamp = Some(t),
                        Some(("h1", sig)) => candidates.push(
                            hex::decode(sig)
                                .map_err(|_| malformed(H, "an h1 signature is not hex"))?,
                        ),
                        _ => {}
                    }
                }
                let t = timestamp.ok_or_else(|| malformed(H, "it has no ts= timestamp"))?;
                let secs = parse_secs(H, t)?;
                self.require_match(H, sha256, &[t.as_bytes(), b":", body], &candidates)?;
                Ok(Some(SignedAt::Secs(secs)))
            }
            Kind::Linear => {
                const H: &str = "linear-signature";
                let sig = hex::decode(required(req, H)?)
                    .map_err(|_| malformed(H, "the signature is not hex"))?;
                self.require_match(H, sha256, &[body], &[sig])?;
                // Linear signs its timestamp inside the body: see body_timestamp_ms.
                Ok(None)
            }
            Kind::Twilio => self.check_twilio(req).map(|()| None),
            Kind::Gitlab => {
                const H: &str = "x-gitlab-token";
                let token = header_str(req.headers, H)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| missing(H))?;
                if self
                    .keys
                    .iter()
                    .any(|k| bool::from(k.as_slice().ct_eq(token.as_bytes())))
                {
                    Ok(None)
                } else {
                    Err(Rejection::SignatureMismatch {
                        header: H.to_owned(),
                    })
                }
            }
            Kind::Hmac => self.check_hmac(req),
        }
    }

    fn check_twilio(&self, req: &Request<'_>) -> Result<(), Rejection> {
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

    fn check_hmac(&self, req: &Request<'_>) -> Result<Option<SignedAt>, Rejection> {
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
        self.require_match(h, spec.algorithm, &parts, &[sig])?;
        timestamp.map(parse_any_timestamp).transpose()
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

    /// Slack's `url_verification`: the challenge to echo.
    pub(super) fn challenge(&self, body: &mut ParsedBody<'_>) -> Option<String> {
        if self.kind != Kind::Slack {
            return None;
        }
        let json = body.json().ok()?;
        if json.get("type")?.as_str()? != "url_verification" {
            return None;
        }
        Some(json.get("challenge")?.as_str()?.to_owned())
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
