//! Unit tests of the schemes' edges. The providers' SDK vectors are checked
//! end to end in `tests/it/vectors.rs`.

use std::time::{Duration, UNIX_EPOCH};

use super::schemes::twilio_url;
use super::sign::{Signing, sign};
use super::*;
use crate::config::{Config, Secret};

fn source(kind: &str, secrets: &[&str], extra: &str) -> SourceConfig {
    let list: Vec<String> = secrets.iter().map(|s| format!("{s:?}")).collect();
    let text = format!(
        "[[source]]\nname = \"s\"\nkind = \"{kind}\"\nsecrets = [{}]\n{extra}\n",
        list.join(", ")
    );
    Config::from_toml(&text, "test", None, &|_| None)
        .unwrap()
        .sources
        .remove(0)
        .resolved()
}

fn headers(pairs: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    map
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

const STANDARD_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn secret_for(kind: Kind) -> &'static str {
    if kind == Kind::Standard {
        STANDARD_SECRET
    } else {
        "a-secret"
    }
}

/// Every kind's signer produces requests its verifier accepts, and the
/// verifier finds the id where the signer put it.
#[test]
fn every_kind_round_trips_through_sign_and_verify() {
    for kind in Kind::ALL {
        let extra = match kind {
            Kind::Twilio => "public_url = \"https://example.test/in/s\"\n",
            Kind::Hmac => "signature_header = \"x-sig\"\nevent_id = [\"header:x-id\"]\n",
            Kind::Meta => "verify_token = \"a-verify-token\"\n",
            _ => "",
        };
        let src = source(kind.as_str(), &[secret_for(kind)], extra);
        let body = br#"{"id":"evt_1","event_id":"evt_1","notification_id":"evt_1","webhookTimestamp":1700000000000,"type":"t"}"#;
        let hmac_spec = src.hmac.clone();
        let locators = src.event_id.clone().unwrap_or_default();
        // Twilio covers a JSON body through bodySHA256 in the URL it calls.
        let query = (kind == Kind::Twilio).then(|| {
            super::sign::twilio_body_url("https://example.test/in/s", body)
                .split_once('?')
                .unwrap()
                .1
                .to_owned()
        });
        let url = match &query {
            Some(q) => format!("https://example.test/in/s?{q}"),
            None => "https://example.test/in/s".to_owned(),
        };
        let signed = sign(&Signing {
            kind,
            secret: secret_for(kind),
            body,
            event_id: "evt_1",
            event_type: Some("t"),
            timestamp: 1_700_000_000,
            url: &url,
            content_type: "application/json",
            hmac: hmac_spec.as_ref().map(|h| (h, locators.as_slice())),
        })
        .unwrap();
        let map = headers(&signed);
        let body = Bytes::from_static(body);
        let req = Request {
            headers: &map,
            body: &body,
            path_rest: "",
            query: query.as_deref(),
        };
        let verifier = Verifier::new(&src).unwrap();
        match verifier.verify(&req, at(1_700_000_001)) {
            // Zoom and Meta send no id: the body's hash stands for one.
            Ok(Verified::Event(e)) if matches!(kind, Kind::Zoom | Kind::Meta) => assert_eq!(
                e.event_id().as_str(),
                hex::encode(sha2::Sha256::digest(body.as_ref())),
                "{kind}"
            ),
            // Shopify's key is the topic and the event id together.
            Ok(Verified::Event(e)) if kind == Kind::Shopify => {
                assert_eq!(e.event_id().as_str(), "t:evt_1")
            }
            Ok(Verified::Event(e)) => assert_eq!(e.event_id().as_str(), "evt_1", "{kind}"),
            other => panic!("{kind}: {other:?}"),
        }
        if kind == Kind::Gitlab {
            // GitLab sends a shared token, not a signature: the body is not covered.
            continue;
        }
        let tampered = Bytes::from_static(b"{\"id\":\"evt_2\"}");
        let req = Request {
            headers: &map,
            body: &tampered,
            path_rest: "",
            query: query.as_deref(),
        };
        let err = verifier.verify(&req, at(1_700_000_001)).unwrap_err();
        assert!(err.is_authentication(), "{kind}: {err:?}");
    }
}

#[test]
fn tolerance_applies_both_ways_and_names_the_age() {
    let src = source("standard", &[STANDARD_SECRET], "tolerance = \"5m\"");
    let body = Bytes::from_static(b"{}");
    let signed = sign(&Signing {
        kind: Kind::Standard,
        secret: STANDARD_SECRET,
        body: &body,
        event_id: "msg_1",
        event_type: None,
        timestamp: 1_700_000_000,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap();
    let map = headers(&signed);
    let req = Request {
        headers: &map,
        body: &body,
        path_rest: "",
        query: None,
    };
    let v = Verifier::new(&src).unwrap();
    assert!(v.verify(&req, at(1_700_000_300)).is_ok());
    assert!(v.verify(&req, at(1_699_999_700)).is_ok());
    assert_eq!(
        v.verify(&req, at(1_700_000_301)).unwrap_err(),
        Rejection::StaleTimestamp {
            age_secs: 301,
            tolerance_secs: 300
        }
    );
    assert!(matches!(
        v.verify(&req, at(1_699_999_699)).unwrap_err(),
        Rejection::StaleTimestamp { .. }
    ));
}

#[test]
fn a_missing_or_malformed_header_is_named() {
    let src = source("stripe", &["whsec_x"], "");
    let body = Bytes::from_static(b"{}");
    let v = Verifier::new(&src).unwrap();
    let empty = HeaderMap::new();
    let req = Request {
        headers: &empty,
        body: &body,
        path_rest: "",
        query: None,
    };
    assert_eq!(
        v.verify(&req, at(0)).unwrap_err(),
        Rejection::MissingSignature {
            header: "stripe-signature".into()
        }
    );
    let map = headers(&[("stripe-signature".into(), "v1=zz".into())]);
    let req = Request {
        headers: &map,
        body: &body,
        path_rest: "",
        query: None,
    };
    assert!(matches!(
        v.verify(&req, at(0)).unwrap_err(),
        Rejection::MalformedSignature { .. }
    ));
}

#[test]
fn a_standard_secret_that_is_not_base64_is_a_config_error() {
    let mut src = source("standard", &[STANDARD_SECRET], "");
    src.secrets[0].value = Secret::new("whsec_not base64!");
    let err = Verifier::new(&src).err().unwrap();
    assert_eq!(err.cause, StandardKeyError::NotBase64);
    assert!(err.to_string().contains("base64"), "{err}");
}

#[test]
fn event_ids_are_bounded_printable_ascii() {
    assert!(EventId::parse("evt_1").is_ok());
    assert!(EventId::parse("").is_err());
    assert!(EventId::parse(&"x".repeat(257)).is_err());
    assert!(EventId::parse("a\nb").is_err());
}

#[test]
fn twilio_url_keeps_the_request_path_and_query() {
    assert_eq!(
        twilio_url("https://h/in/t", "", Some("a=1")),
        "https://h/in/t?a=1"
    );
    assert_eq!(
        twilio_url("https://h/in/t/", "/sms", None),
        "https://h/in/t/sms"
    );
    assert_eq!(
        twilio_url("https://h/x?k=v", "", Some("a=1")),
        "https://h/x?k=v&a=1"
    );
}

#[test]
fn stored_headers_drop_credentials_and_hop_by_hop() {
    let map = headers(&[
        ("authorization".into(), "Bearer x".into()),
        ("cookie".into(), "a=b".into()),
        ("x-github-event".into(), "push".into()),
        ("content-length".into(), "3".into()),
    ]);
    assert_eq!(
        stored_headers(&map),
        vec![("x-github-event".to_owned(), "push".to_owned())]
    );
}

/// A sender cannot mark its request as fetched by a reconcile pass (or set
/// any header hookinbox names): `hookinbox-*` headers are never stored.
#[test]
fn stored_headers_keep_none_of_hookinbox_own() {
    let map = headers(&[
        ("hookinbox-origin".into(), "reconciled".into()),
        (
            "Hookinbox-Fetched-From".into(),
            "https://api.stripe.com".into(),
        ),
        ("x-github-event".into(), "push".into()),
    ]);
    let kept = stored_headers(&map);
    assert_eq!(kept, vec![("x-github-event".to_owned(), "push".to_owned())]);
    assert_eq!(crate::standard_webhooks::origin_of(&kept), None);
}

/// Signs `body` for `kind` with `secret` at 1_700_000_000 and verifies it
/// one second later, with `extra` headers added after signing (they are
/// not covered by Twitch's or Zoom's signatures).
fn verify_signed(
    v: &Verifier,
    kind: Kind,
    secret: &str,
    body: &'static [u8],
    extra: &[(&str, &str)],
) -> Result<Verified, Rejection> {
    let mut signed = sign(&Signing {
        kind,
        secret,
        body,
        event_id: "msg_1",
        event_type: Some("channel.follow"),
        timestamp: 1_700_000_000,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap();
    for (name, value) in extra {
        signed.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        signed.push(((*name).into(), (*value).into()));
    }
    let map = headers(&signed);
    let body = Bytes::from_static(body);
    v.verify(
        &Request {
            headers: &map,
            body: &body,
            path_rest: "",
            query: None,
        },
        at(1_700_000_001),
    )
}

/// Of the secrets that verify a request, the one counted is the one that
/// expires last; one that expired verifies nothing, and is named.
#[test]
fn a_request_signed_by_old_and_new_counts_for_the_new_and_an_expired_secret_is_refused() {
    const NEW: &str = "whsec_bmV3LXNlY3JldC1mb3ItdGhlLXJlbG9hZC10ZXN0";
    // `verify_signed` signs at 1,700,000,000 s and verifies a second later.
    let expiring = |at_ms: u64| {
        let mut src = source("standard", &[STANDARD_SECRET, NEW], "");
        src.secrets[0].expires = Some(crate::api::Timestamp(at_ms));
        Verifier::new(&src).unwrap()
    };
    let body: &'static [u8] = br#"{"type":"a"}"#;
    let signature = |secret: &str| {
        crate::standard_webhooks::StandardKey::parse(secret)
            .unwrap()
            .sign("msg_1", 1_700_000_000, body)
    };
    let counted = |v: &Verifier, sig: &str| match verify_signed(
        v,
        Kind::Standard,
        NEW,
        body,
        &[("webhook-signature", sig)],
    ) {
        Ok(Verified::Event(e)) => Ok(e.secret()),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e),
    };
    let later = expiring(1_700_000_500_000);
    let both = format!("{} {}", signature(STANDARD_SECRET), signature(NEW));
    // Signed by both (the old listed first): the new one's.
    assert_eq!(counted(&later, &both), Ok(Some(1)));
    // By the old alone, before it expires: the old one's.
    assert_eq!(counted(&later, &signature(STANDARD_SECRET)), Ok(Some(0)));
    // Past its expiry, the old alone is refused, naming it; both still pass.
    let past = expiring(1_700_000_000_000);
    let refused = counted(&past, &signature(STANDARD_SECRET)).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::ExpiredSecret);
    assert!(refused.to_string().contains("\"inline\""), "{refused}");
    assert!(refused.is_authentication());
    assert_eq!(counted(&past, &both), Ok(Some(1)));
}

fn handshake(verified: Result<Verified, Rejection>) -> Handshake {
    match verified {
        Ok(Verified::Handshake(h)) => h,
        other => panic!("not a handshake: {other:?}"),
    }
}

#[test]
fn twitch_verification_is_answered_with_its_challenge_and_revocations_are_events() {
    let v = Verifier::new(&source("twitch", &["twitch-secret"], "")).unwrap();
    let body = br#"{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}"#;
    let verification = [(
        "twitch-eventsub-message-type",
        "webhook_callback_verification",
    )];
    assert_eq!(
        handshake(verify_signed(
            &v,
            Kind::Twitch,
            "twitch-secret",
            body,
            &verification
        )),
        Handshake {
            what: "Twitch webhook_callback_verification",
            reply: HandshakeReply::Text("pogchamp-kappa-360noscope-vohiyo".into()),
        }
    );
    // Only after verification: another secret's signature is refused.
    assert!(matches!(
        verify_signed(&v, Kind::Twitch, "other-secret", body, &verification),
        Err(Rejection::SignatureMismatch { .. })
    ));
    // A notification carrying a "challenge" field is still an event.
    match verify_signed(&v, Kind::Twitch, "twitch-secret", body, &[]).unwrap() {
        Verified::Event(e) => {
            assert_eq!(e.event_id().as_str(), "msg_1");
            assert_eq!(e.event_type(), Some("channel.follow"));
        }
        other => panic!("{other:?}"),
    }
    // A revocation is stored, typed apart from the subscription's events.
    let revocation = [("twitch-eventsub-message-type", "revocation")];
    match verify_signed(&v, Kind::Twitch, "twitch-secret", body, &revocation).unwrap() {
        Verified::Event(e) => assert_eq!(e.event_type(), Some("revocation")),
        other => panic!("{other:?}"),
    }
    // Unless the config says where the type is.
    let typed = source(
        "twitch",
        &["twitch-secret"],
        "event_type = \"header:twitch-eventsub-subscription-type\"",
    );
    let typed = Verifier::new(&typed).unwrap();
    match verify_signed(&typed, Kind::Twitch, "twitch-secret", body, &revocation).unwrap() {
        Verified::Event(e) => assert_eq!(e.event_type(), Some("channel.follow")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn zoom_url_validation_is_answered_with_the_secret_that_signed_it() {
    let v = Verifier::new(&source("zoom", &["old-zoom-secret", "new-zoom-secret"], "")).unwrap();
    let body = br#"{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1700000000000,"event":"endpoint.url_validation"}"#;
    for secret in ["old-zoom-secret", "new-zoom-secret"] {
        let expected = hex::encode(super::schemes::mac(
            crate::config::HmacAlgorithm::Sha256,
            secret.as_bytes(),
            &[b"qgg8vlvZRS6UYooatFL8Aw"],
        ));
        assert_eq!(
            handshake(verify_signed(&v, Kind::Zoom, secret, body, &[])),
            Handshake {
                what: "Zoom endpoint.url_validation",
                reply: HandshakeReply::Json(serde_json::json!({
                    "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
                    "encryptedToken": expected,
                })),
            }
        );
    }
    assert!(matches!(
        verify_signed(&v, Kind::Zoom, "another-secret", body, &[]),
        Err(Rejection::SignatureMismatch { .. })
    ));
    // Any other event is stored, typed by its "event".
    match verify_signed(
        &v,
        Kind::Zoom,
        "new-zoom-secret",
        br#"{"event":"meeting.started","payload":{}}"#,
        &[],
    )
    .unwrap()
    {
        Verified::Event(e) => assert_eq!(e.event_type(), Some("meeting.started")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn meta_subscription_check_needs_the_verify_token() {
    let v = Verifier::new(&source("meta", &["app-secret"], "verify_token = \"vt-1\"")).unwrap();
    assert!(v.answers_get());
    assert_eq!(
        v.subscribe(Some(
            "hub.mode=subscribe&hub.verify_token=vt-1&hub.challenge=1158201444"
        )),
        Ok(Handshake {
            what: "Meta subscription check",
            reply: HandshakeReply::Text("1158201444".into()),
        })
    );
    assert_eq!(
        v.subscribe(Some(
            "hub.mode=subscribe&hub.verify_token=vt-2&hub.challenge=1"
        )),
        Err(Rejection::VerifyTokenMismatch)
    );
    assert_eq!(
        v.subscribe(Some("hub.mode=subscribe&hub.challenge=1")),
        Err(Rejection::MissingSignature {
            header: "hub.verify_token".into()
        })
    );
    assert!(matches!(
        v.subscribe(Some(
            "hub.mode=unsubscribe&hub.verify_token=vt-1&hub.challenge=1"
        )),
        Err(Rejection::MalformedHandshake(_))
    ));
    assert!(matches!(
        v.subscribe(Some("hub.mode=subscribe&hub.verify_token=vt-1")),
        Err(Rejection::MalformedHandshake(_))
    ));
    assert!(matches!(
        v.subscribe(None),
        Err(Rejection::MissingSignature { .. })
    ));
    // Its events are signed as GitHub's are, and the body's hash is their id.
    match verify_signed(
        &v,
        Kind::Meta,
        "app-secret",
        br#"{"object":"page","entry":[]}"#,
        &[],
    )
    .unwrap()
    {
        Verified::Event(e) => assert_eq!(e.event_type(), Some("page")),
        other => panic!("{other:?}"),
    }
    let github = Verifier::new(&source("github", &["s"], "")).unwrap();
    assert!(!github.answers_get());
}

/// The event id `verifier` finds in a request of `kind` signed as `sign`
/// does (`event_id` where the provider carries it), with `signed` headers
/// changed by `edit` first.
fn event_id_of(
    verifier: &Verifier,
    kind: Kind,
    body: &Bytes,
    event_id: &str,
    event_type: Option<&str>,
    edit: impl FnOnce(&mut Vec<(String, String)>),
) -> String {
    let mut signed = sign(&Signing {
        kind,
        secret: secret_for(kind),
        body,
        event_id,
        event_type,
        timestamp: 1_700_000_000,
        url: "https://example.test/in/s",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap();
    edit(&mut signed);
    let map = headers(&signed);
    let req = Request {
        headers: &map,
        body,
        path_rest: "",
        query: None,
    };
    match verifier.verify(&req, at(1_700_000_001)) {
        Ok(Verified::Event(e)) => e.event_id().as_str().to_owned(),
        other => panic!("{other:?}"),
    }
}

/// Regression (issue 44): Shopify sends one webhook per subscription to a
/// topic, each with its own `X-Shopify-Webhook-Id` and the same
/// `X-Shopify-Event-Id`: one event. One merchant action's deliveries to
/// two topics share the event id too: two events. Without an event id,
/// the webhook id.
#[test]
fn shopify_dedupes_on_the_topic_and_the_event_id_then_the_webhook_id() {
    let src = source("shopify", &[secret_for(Kind::Shopify)], "");
    let verifier = Verifier::new(&src).unwrap();
    let body = Bytes::from_static(br#"{"id":820982911946154508}"#);
    let key_of = |topic: &str, webhook_id: &str, event_id: Option<&str>| {
        event_id_of(
            &verifier,
            Kind::Shopify,
            &body,
            webhook_id,
            Some(topic),
            |signed| {
                signed.retain(|(name, _)| name != "x-shopify-event-id");
                if let Some(event_id) = event_id {
                    signed.push(("x-shopify-event-id".to_owned(), event_id.to_owned()));
                }
            },
        )
    };
    let first = key_of("orders/create", "wh-1", Some("ev-1"));
    assert_eq!(first, "orders/create:ev-1");
    assert_eq!(key_of("orders/create", "wh-2", Some("ev-1")), first);
    assert_ne!(key_of("orders/paid", "wh-3", Some("ev-1")), first);
    assert_eq!(key_of("orders/create", "wh-4", None), "wh-4");
}

/// Regression (issue 44): Paddle replays an event, and sends it to each
/// destination, as a new notification (a new `notification_id`) with the
/// same `event_id`: one event.
#[test]
fn paddle_dedupes_on_the_event_id_not_the_notification() {
    let src = source("paddle", &[secret_for(Kind::Paddle)], "");
    let verifier = Verifier::new(&src).unwrap();
    let key_of = |notification: &str| {
        let body = Bytes::from(format!(
            r#"{{"event_id":"evt_01h","event_type":"transaction.completed","notification_id":"{notification}"}}"#
        ));
        event_id_of(&verifier, Kind::Paddle, &body, "evt_01h", None, |_| {})
    };
    assert_eq!(key_of("ntf_1"), "evt_01h");
    assert_eq!(key_of("ntf_2"), "evt_01h");
}
