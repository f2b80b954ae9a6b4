//! Property tests of verification: whatever a caller sends, every scheme
//! verifies the request or rejects it, and never panics; a correctly signed
//! request is always accepted, and any one-byte change of its body is always
//! rejected.
//!
//! Arbitrary bytes rarely get past a scheme's first check (the header is
//! missing), so each scheme is also fed near-valid requests: correctly
//! signed ones with a header or the query mutated (cut, spliced with the
//! scheme's own separators, replaced, repeated, dropped). Those reach the list
//! splitting, decoding, timestamp and comparison branches.
//!
//! Case counts are kept moderate (a few hundred) so the whole property suite
//! runs in seconds in a debug build; `PROPTEST_CASES=100000` runs deeper.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;

use super::sign::{Signing, sign, twilio_body_url};
use super::*;
use crate::config::Config;

/// When the signer signs; the verifier's clock is near it.
const SIGNED_AT: i64 = 1_700_000_000;
const TWILIO_URL: &str = "https://inbox.example/in/s";
const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The generic `hmac` kind's variants: prefix or not, hex or base64, each
/// algorithm, a timestamp and a header inside the signed payload.
const HMAC_SPECS: [&str; 4] = [
    r#"signature_header = "x-sig"
prefix = "sha256="
"#,
    r#"signature_header = "x-sig"
encoding = "base64"
algorithm = "sha512"
"#,
    r#"signature_header = "x-sig"
algorithm = "sha1"
timestamp_header = "x-ts"
signed_payload = "{timestamp}.{body}"
"#,
    r#"signature_header = "x-sig"
prefix = "v1="
timestamp_header = "x-ts"
signed_payload = "{header:x-id}:{timestamp}:{body}"
"#,
];

/// Every header name a scheme or a default locator reads, and a few more.
static HEADER_NAMES: [&str; 24] = [
    "stripe-signature",
    "x-hub-signature-256",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "svix-id",
    "svix-timestamp",
    "svix-signature",
    "paddle-signature",
    "linear-signature",
    "linear-delivery",
    "x-twilio-signature",
    "x-twilio-webhooks-signature-settings",
    "i-twilio-idempotency-token",
    "x-gitlab-token",
    "idempotency-key",
    "x-github-delivery",
    "x-sig",
    "x-ts",
    "x-id",
    "content-type",
];

/// One configured source under test and the secret its sender signs with.
struct Case {
    source: SourceConfig,
    verifier: Verifier,
    secret: &'static str,
}

fn secret_for(kind: Kind) -> &'static str {
    if kind == Kind::Standard {
        STANDARD_SECRET
    } else {
        "a-secret"
    }
}

/// Every kind, and every `hmac` variant (whose id is in the `x-id` header
/// its signer sets). With `body_ids`, every other kind finds its event id in
/// the body's hash, so only the signature decides; else each kind's own
/// locators apply. Each source has a second, older secret listed first, so a
/// match is found only after a rotation's miss.
fn build(body_ids: bool) -> Vec<Case> {
    let other_standard = format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(b"an older key, still accepted")
    );
    let mut cases = Vec::new();
    let event_id = if body_ids {
        "event_id = [\"body-sha256\"]\n"
    } else {
        ""
    };
    let mut add = |kind: Kind, extra: &str| {
        let secret = secret_for(kind);
        let older = if kind == Kind::Standard {
            other_standard.as_str()
        } else {
            "an-older-secret"
        };
        let text = format!(
            "[[source]]\nname = \"s\"\nkind = \"{kind}\"\nsecrets = [{older:?}, {secret:?}]\n{extra}"
        );
        let source = Config::from_toml(&text, "test", None, &|_| None)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .sources
            .remove(0)
            .resolved();
        let verifier = Verifier::new(&source).unwrap();
        cases.push(Case {
            source,
            verifier,
            secret,
        });
    };
    for kind in Kind::ALL {
        match kind {
            Kind::Twilio => add(kind, &format!("public_url = \"{TWILIO_URL}\"\n{event_id}")),
            Kind::Meta => add(
                kind,
                &format!("verify_token = \"a-verify-token\"\n{event_id}"),
            ),
            Kind::Hmac => {
                for spec in HMAC_SPECS {
                    add(
                        kind,
                        &format!("{spec}event_id = [\"header:x-id\", \"body-sha256\"]\n"),
                    );
                }
            }
            _ => add(kind, event_id),
        }
    }
    cases
}

/// Sources with each kind's own event id locators.
fn with_default_ids() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| build(false))
}

/// Sources whose event id is always found (the body's hash), so that only
/// the signature decides.
fn with_body_ids() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| build(true))
}

fn at(secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs as u64)
}

/// A correctly signed request for `case`: headers, query, and the body as
/// the signer sent it (Linear signs a timestamp inside a JSON body).
fn signed(case: &Case, body: &[u8]) -> (Vec<(String, String)>, Option<String>, Vec<u8>) {
    let kind = case.source.kind;
    let body = if kind == Kind::Linear {
        serde_json::json!({
            "webhookTimestamp": SIGNED_AT * 1000,
            "data": String::from_utf8_lossy(body),
        })
        .to_string()
        .into_bytes()
    } else {
        body.to_vec()
    };
    // Twilio covers a body that is not a form by its hash in the signed URL.
    let url = twilio_body_url(TWILIO_URL, &body);
    let query = (kind == Kind::Twilio).then(|| url.split_once('?').unwrap().1.to_owned());
    let locators = case.source.event_id.clone().unwrap_or_default();
    let headers = sign(&Signing {
        kind,
        secret: case.secret,
        body: &body,
        event_id: "evt_1",
        event_type: Some("t"),
        timestamp: SIGNED_AT,
        url: &url,
        content_type: "application/json",
        hmac: case.source.hmac.as_ref().map(|h| (h, locators.as_slice())),
    })
    .unwrap();
    (headers, query, body)
}

/// Builds a header map, dropping pairs that are not valid HTTP (hyper would
/// refuse them before verification).
fn header_map(pairs: &[(String, Vec<u8>)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value),
        ) {
            map.append(n, v);
        }
    }
    map
}

fn verify(
    case: &Case,
    headers: &HeaderMap,
    body: &[u8],
    query: Option<&str>,
    path_rest: &str,
    now: SystemTime,
) -> Result<Verified, Rejection> {
    let body = Bytes::copy_from_slice(body);
    case.verifier.verify(
        &Request {
            headers,
            body: &body,
            path_rest,
            query,
        },
        now,
    )
}

/// Fragments the schemes split and decode on.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(",".to_owned()),
        Just(";".to_owned()),
        Just("=".to_owned()),
        Just(" ".to_owned()),
        Just("\t".to_owned()),
        Just("t=".to_owned()),
        Just("v1=".to_owned()),
        Just("v1,".to_owned()),
        Just("ts=".to_owned()),
        Just("h1=".to_owned()),
        Just("v0=".to_owned()),
        Just("sha256=".to_owned()),
        Just("algorithm=HMAC_SHA256".to_owned()),
        Just("bodySHA256=".to_owned()),
        Just("-9223372036854775808".to_owned()),
        Just("99999999999999999999".to_owned()),
        Just("1970-01-01T00:00:00Z".to_owned()),
        "[0-9a-f]{0,70}",
        "[A-Za-z0-9+/=]{0,90}",
        "[ -~]{0,20}",
    ]
}

/// A header value's bytes: mostly visible ASCII, sometimes obs-text.
fn value_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => "[ -~]{0,80}".prop_map(String::into_bytes),
        1 => proptest::collection::vec(any::<u8>(), 0..80),
    ]
}

/// One change to a signed request.
#[derive(Debug, Clone)]
enum Mutation {
    /// Remove bytes `from..from+len` of header `index` (positions wrap).
    Cut {
        index: usize,
        from: usize,
        len: usize,
    },
    /// Insert `text` into header `index` at `at`.
    Splice {
        index: usize,
        at: usize,
        text: String,
    },
    /// Replace header `index`'s value.
    Replace { index: usize, value: Vec<u8> },
    /// Send header `index` twice, the second time with `value`.
    Repeat { index: usize, value: Vec<u8> },
    /// Leave header `index` out.
    Drop { index: usize },
    /// Add a header the scheme may read.
    Add { name: &'static str, value: Vec<u8> },
    /// Replace (or add) the query string.
    Query(String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let index = any::<usize>;
    prop_oneof![
        (index(), any::<usize>(), 1..40usize).prop_map(|(index, from, len)| Mutation::Cut {
            index,
            from,
            len
        }),
        (index(), any::<usize>(), fragment()).prop_map(|(index, at, text)| Mutation::Splice {
            index,
            at,
            text
        }),
        (index(), value_bytes()).prop_map(|(index, value)| Mutation::Replace { index, value }),
        (index(), value_bytes()).prop_map(|(index, value)| Mutation::Repeat { index, value }),
        index().prop_map(|index| Mutation::Drop { index }),
        (proptest::sample::select(&HEADER_NAMES[..]), value_bytes())
            .prop_map(|(name, value)| Mutation::Add { name, value }),
        prop_oneof![
            "[ -~]{0,60}",
            fragment().prop_map(|f| format!("bodySHA256={f}")),
        ]
        .prop_map(Mutation::Query),
    ]
}

fn apply(mutation: &Mutation, headers: &mut Vec<(String, Vec<u8>)>, query: &mut Option<String>) {
    let n = headers.len().max(1);
    match mutation {
        Mutation::Cut { index, from, len } => {
            if let Some((_, v)) = headers.get_mut(index % n) {
                let from = from % (v.len() + 1);
                let to = (from + len).min(v.len());
                v.drain(from..to);
            }
        }
        Mutation::Splice { index, at, text } => {
            if let Some((_, v)) = headers.get_mut(index % n) {
                let at = at % (v.len() + 1);
                v.splice(at..at, text.bytes());
            }
        }
        Mutation::Replace { index, value } => {
            if let Some((_, v)) = headers.get_mut(index % n) {
                *v = value.clone();
            }
        }
        Mutation::Repeat { index, value } => {
            if let Some((name, _)) = headers.get(index % n) {
                headers.push((name.clone(), value.clone()));
            }
        }
        Mutation::Drop { index } => {
            if index % n < headers.len() {
                headers.remove(index % n);
            }
        }
        Mutation::Add { name, value } => headers.push(((*name).to_owned(), value.clone())),
        Mutation::Query(q) => *query = Some(q.clone()),
    }
}

/// Bodies: arbitrary bytes, JSON shaped like the providers' (ids, a Slack
/// challenge, a Linear timestamp), and forms.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        (
            "[ -~]{0,20}",
            prop_oneof![
                Just(serde_json::json!(null)),
                any::<i64>().prop_map(|n| serde_json::json!(n)),
                any::<f64>().prop_map(|f| serde_json::json!(f)),
                "[ -~]{0,30}".prop_map(|s| serde_json::json!(s)),
            ],
        )
            .prop_map(|(text, value)| {
                serde_json::json!({
                    "id": value, "event_id": text, "type": "url_verification",
                    "challenge": value, "webhookTimestamp": value,
                    "notification_id": text, "event": {"type": value},
                })
                .to_string()
                .into_bytes()
            }),
        "([a-zA-Z%+=&0-9]{0,20}){0,5}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary headers, body, query and path: verified or rejected.
    #[test]
    fn arbitrary_requests_are_verified_or_rejected_never_a_panic(
        case in 0..with_default_ids().len(),
        headers in proptest::collection::vec(
            (
                prop_oneof![
                    4 => proptest::sample::select(&HEADER_NAMES[..]).prop_map(str::to_owned),
                    1 => "[a-z-]{1,12}",
                ],
                value_bytes(),
            ),
            0..8,
        ),
        body in body(),
        query in proptest::option::of("[ -~]{0,60}"),
        path_rest in "(/[ -~]{0,10}){0,2}",
        now in 0i64..4_102_444_800,
    ) {
        let case = &with_default_ids()[case];
        let _ = verify(case, &header_map(&headers), &body, query.as_deref(), &path_rest, at(now));
    }

    /// A correctly signed request with one to three mutations of its headers
    /// or query: verified or rejected, never a panic.
    #[test]
    fn near_valid_requests_are_verified_or_rejected_never_a_panic(
        case in 0..with_default_ids().len(),
        body in body(),
        mutations in proptest::collection::vec(mutation(), 1..4),
        skew in -400i64..400,
    ) {
        let case = &with_default_ids()[case];
        let (pairs, mut query, body) = signed(case, &body);
        let mut headers: Vec<(String, Vec<u8>)> =
            pairs.into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
        for m in &mutations {
            apply(m, &mut headers, &mut query);
        }
        let _ = verify(case, &header_map(&headers), &body, query.as_deref(), "", at(SIGNED_AT + skew));
    }

    /// The signer's request passes; changing any one byte of its body makes
    /// it fail authentication. (GitLab sends a shared token that does not
    /// cover the body: it is checked for acceptance only.)
    #[test]
    fn a_signed_request_passes_and_any_one_byte_change_of_its_body_fails(
        case in 0..with_body_ids().len(),
        body in proptest::collection::vec(any::<u8>(), 1..300),
        position in any::<usize>(),
        flip in 1u8..=255,
    ) {
        let case = &with_body_ids()[case];
        let kind = case.source.kind;
        let (pairs, query, body) = signed(case, &body);
        let headers = header_map(
            &pairs.into_iter().map(|(k, v)| (k, v.into_bytes())).collect::<Vec<_>>(),
        );
        let now = at(SIGNED_AT + 1);
        let accepted = verify(case, &headers, &body, query.as_deref(), "", now);
        prop_assert!(
            matches!(accepted, Ok(Verified::Event(_)) | Ok(Verified::Handshake(_))),
            "{kind}: {accepted:?}"
        );
        if kind != Kind::Gitlab {
            let mut changed = body.clone();
            let i = position % changed.len();
            changed[i] ^= flip;
            let refused = verify(case, &headers, &changed, query.as_deref(), "", now);
            prop_assert!(
                matches!(refused, Err(Rejection::SignatureMismatch { .. })),
                "{kind}: byte {i} changed: {refused:?}"
            );
        }
    }
}

/// A JSON pointer: segments from a small alphabet (so they hit the keys the
/// bodies have), escapes, and arbitrary text.
fn pointer() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::collection::vec(
            prop_oneof![
                Just("id".to_owned()),
                Just("a".to_owned()),
                Just("0".to_owned()),
                Just("~0".to_owned()),
                Just("~1".to_owned()),
                Just("~".to_owned()),
                Just(String::new()),
                "[ -~]{0,6}",
            ],
            0..4,
        )
        .prop_map(|segments| segments.iter().map(|s| format!("/{s}")).collect()),
        1 => "/[ -~]{0,20}",
    ]
}

/// A JSON document whose keys come from the pointers' alphabet.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        prop_oneof![Just(String::new()), "[ -~]{0,300}", ".{0,20}"]
            .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("id".to_owned()),
                    Just("a".to_owned()),
                    Just("0".to_owned()),
                    Just("~".to_owned()),
                    Just("/".to_owned()),
                    Just(String::new())
                ],
                inner,
                0..4,
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An event id (or type) locator as configured.
fn locator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("header:x-id".to_owned()),
        Just("body-sha256".to_owned()),
        pointer().prop_map(|p| format!("json:{p}")),
        prop_oneof![Just("id".to_owned()), "[ -~]{1,8}"].prop_map(|f| format!("form:{f}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Past a valid signature, finding the event id and type in headers,
    /// JSON, forms or the body's hash yields a valid id or a 400-class
    /// rejection (never an authentication failure, never a panic).
    #[test]
    fn event_ids_are_found_or_refused_never_a_panic(
        ids in proptest::collection::vec(locator(), 1..4),
        types in proptest::collection::vec(locator(), 1..3),
        body in prop_oneof![
            json_value().prop_map(|v| v.to_string().into_bytes()),
            "(id=[ -~]{0,300}&?){0,3}".prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..100),
        ],
        id_header in proptest::option::of(value_bytes()),
    ) {
        let quoted = |l: &[String]| {
            l.iter().map(|s| toml::Value::String(s.clone()).to_string()).collect::<Vec<_>>().join(", ")
        };
        let text = format!(
            r#"[[source]]
name = "s"
kind = "standard"
secret = "{STANDARD_SECRET}"
event_id = [{}]
event_type = [{}]
"#,
            quoted(&ids),
            quoted(&types),
        );
        // Some generated locators are not valid config: refused at load.
        let Ok(mut config) = Config::from_toml(&text, "test", None, &|_| None) else {
            return Ok(());
        };
        let source = config.sources.remove(0).resolved();
        let verifier = Verifier::new(&source).unwrap();
        let mut pairs: Vec<(String, Vec<u8>)> = sign(&Signing {
            kind: Kind::Standard,
            secret: STANDARD_SECRET,
            body: &body,
            event_id: "msg_1",
            event_type: None,
            timestamp: SIGNED_AT,
            url: "",
            content_type: "application/json",
            hmac: None,
        })
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect();
        if let Some(v) = id_header {
            pairs.push(("x-id".to_owned(), v));
        }
        let headers = header_map(&pairs);
        let body = Bytes::from(body);
        let req = Request { headers: &headers, body: &body, path_rest: "", query: None };
        match verifier.verify(&req, at(SIGNED_AT)) {
            Ok(Verified::Event(e)) => {
                prop_assert!(EventId::parse(e.event_id().as_str()).is_ok());
                prop_assert!(e.event_type().is_none_or(|t| t.len() <= 128));
            }
            Ok(Verified::Handshake(_)) => prop_assert!(false, "a standard source has no handshake"),
            Err(r) => prop_assert!(!r.is_authentication(), "{r:?}"),
        }
    }
}
