//! The providers' own SDK vectors (`tests/vectors`, made by
//! `tests/vectors/generate/generate.sh`), sent over real HTTP: each is
//! accepted and stored (a handshake answered as its `expect` says, and
//! nothing stored); after any change to the body, the signature header or
//! the secret, or with the clock outside tolerance, it gets 401 and nothing
//! is stored. `HOOKINBOX_VECTORS=DIR` runs them on a freshly generated set.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hookinbox::clock::Clock;

use crate::support::{TestServer, server_section};

#[derive(Clone)]
struct Vector {
    file: String,
    provider: String,
    secrets: Vec<String>,
    /// When the SDK signed it (None: the provider signs no timestamp).
    signed_at: Option<SystemTime>,
    /// The path and query to POST to (Twilio signs its URL).
    path_query: String,
    public_url: Option<String>,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
    /// GET or POST.
    method: String,
    /// Meta's verify token.
    verify_token: Option<String>,
    /// A handshake's answer: `{"challenge": text}` or the JSON answer itself.
    expect: Option<serde_json::Value>,
}

fn vectors_dir() -> PathBuf {
    match std::env::var_os("HOOKINBOX_VECTORS") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors"),
    }
}

fn load() -> Vec<Vector> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("the vectors directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let file = path.file_stem().unwrap().to_string_lossy().into_owned();
            let secrets = match v.get("secrets_all").and_then(|s| s.as_array()) {
                Some(all) => all.iter().map(|s| s.as_str().unwrap().to_owned()).collect(),
                None => vec![v["secret"].as_str().unwrap().to_owned()],
            };
            let signed_at = match &v["timestamp"] {
                serde_json::Value::Number(n) => {
                    Some(UNIX_EPOCH + Duration::from_secs(n.as_u64().unwrap()))
                }
                serde_json::Value::String(s) => Some(humantime::parse_rfc3339(s).unwrap()),
                _ => None,
            };
            let (public_url, query) = match v.get("url").and_then(|u| u.as_str()) {
                Some(url) => match url.split_once('?') {
                    Some((base, q)) => (Some(base.to_owned()), format!("?{q}")),
                    None => (Some(url.to_owned()), String::new()),
                },
                None => (None, String::new()),
            };
            let mut headers: Vec<(String, String)> = v["headers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            if let Some(content_type) = v["content_type"].as_str() {
                headers.push(("content-type".into(), content_type.to_owned()));
            }
            Vector {
                provider: v["provider"].as_str().unwrap().to_owned(),
                secrets,
                signed_at,
                path_query: format!("/in/v{query}"),
                public_url,
                body: v["body"].as_str().unwrap().as_bytes().to_vec(),
                headers,
                method: v["method"].as_str().unwrap_or("POST").to_owned(),
                verify_token: v["verify_token"].as_str().map(str::to_owned),
                expect: v.get("expect").cloned(),
                file,
            }
        })
        .collect()
}

impl Vector {
    fn kind(&self) -> &str {
        match self.provider.as_str() {
            "standardwebhooks" | "svix" => "standard",
            other => other,
        }
    }

    /// A source named `v` for this vector, holding `secrets`.
    fn config(&self, dir: &std::path::Path, secrets: &[String]) -> String {
        let list: Vec<String> = secrets.iter().map(|s| format!("{s:?}")).collect();
        let mut text = server_section(dir);
        text += &format!(
            "[[source]]\nname = \"v\"\nkind = \"{}\"\nsecrets = [{}]\n",
            self.kind(),
            list.join(", ")
        );
        if let Some(url) = &self.public_url
            && self.provider == "twilio"
        {
            text += &format!("public_url = {url:?}\n");
        }
        if self.provider == "meta" {
            let token = self.verify_token.as_deref().unwrap_or("a-verify-token");
            text += &format!("verify_token = {token:?}\n");
        }
        // Vectors made from published examples carry no provider event id
        // (GitHub's docs vector has no X-GitHub-Delivery, Slack's slash command
        // no event_id, Twilio's JSON vectors no idempotency token): such a
        // source falls back to the body's hash, as a user would configure it.
        text += match self.provider.as_str() {
            "github" => "event_id = [\"header:x-github-delivery\", \"body-sha256\"]\n",
            "slack" => "event_id = [\"json:/event_id\", \"form:trigger_id\"]\n",
            "twilio" => "event_id = [\"header:i-twilio-idempotency-token\", \"body-sha256\"]\n",
            _ => "",
        };
        text
    }

    /// The clock one second after signing (now, for unsigned-timestamp providers).
    fn fresh_clock(&self) -> Clock {
        Clock::fixed(
            self.signed_at
                .map_or_else(SystemTime::now, |t| t + Duration::from_secs(1)),
        )
    }

    /// The header that carries the signature (or GitLab's token).
    fn signature_header(&self) -> &str {
        let names = [
            "stripe-signature",
            "x-hub-signature-256",
            "x-shopify-hmac-sha256",
            "x-slack-signature",
            "webhook-signature",
            "svix-signature",
            "paddle-signature",
            "linear-signature",
            "x-twilio-signature",
            "x-gitlab-token",
            "twitch-eventsub-message-signature",
            "x-zm-signature",
        ];
        self.headers
            .iter()
            .map(|(k, _)| k.as_str())
            .find(|k| names.contains(&k.to_ascii_lowercase().as_str()))
            .unwrap_or_else(|| panic!("{}: no signature header", self.file))
    }

    /// The provider's own tolerance (what the SDK that made the vector uses).
    fn tolerance(&self) -> Option<Duration> {
        self.signed_at?;
        Some(Duration::from_secs(match self.provider.as_str() {
            "paddle" => 5,
            "linear" => 60,
            "twitch" => 600,
            _ => 300,
        }))
    }
}

/// Changes the last signature character before any base64 padding: still
/// well-formed hex or base64, no longer the right MAC.
fn tamper_signature(value: &str) -> String {
    let mut chars: Vec<char> = value.chars().collect();
    let i = chars
        .iter()
        .rposition(|c| c.is_ascii_alphanumeric())
        .unwrap();
    chars[i] = if chars[i] == '0' { '1' } else { '0' };
    chars.into_iter().collect()
}

/// Rotation headers carry several signatures: any one valid passes, so all
/// of them are changed.
fn tamper_every_signature(value: &str) -> String {
    let mut out = String::new();
    let mut item = String::new();
    for c in value.chars() {
        if matches!(c, ' ' | ',' | ';') {
            if item.chars().any(|c| c.is_ascii_alphanumeric()) {
                out += &tamper_signature(&item);
            } else {
                out += &item;
            }
            item.clear();
            out.push(c);
        } else {
            item.push(c);
        }
    }
    out + &tamper_signature(&item)
}

fn tamper_body(body: &[u8]) -> Vec<u8> {
    // One character changed; JSON stays JSON and a form stays a form.
    let text = String::from_utf8(body.to_vec()).unwrap();
    let changed = tamper_signature(&text);
    assert_ne!(changed, text);
    changed.into_bytes()
}

async fn answer(
    v: &Vector,
    secrets: &[String],
    clock: Clock,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> (u16, String, usize) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&v.config(dir.path(), secrets), clock).await;
    let a = if v.method == "GET" {
        let res = server
            .client
            .get(server.url(&v.path_query))
            .send()
            .await
            .unwrap();
        crate::support::answer(res).await
    } else {
        server.post(&v.path_query, headers, body).await
    };
    let stored = server.events().len();
    server.stop().await;
    (a.status, a.json.to_string(), stored)
}

/// What a handshake vector must be answered with, as the test helper reads
/// an answer: a text challenge as a JSON string, a JSON answer as itself.
fn expected_answer(expect: &serde_json::Value) -> String {
    match expect.get("challenge").and_then(|c| c.as_str()) {
        // As `support::answer` reads a text body: JSON if it parses as JSON.
        Some(text) => serde_json::from_str(text)
            .unwrap_or_else(|_| serde_json::Value::String(text.to_owned()))
            .to_string(),
        None => expect.to_string(),
    }
}

#[tokio::test]
async fn every_vector_is_accepted_and_every_tampered_copy_refused() {
    let vectors = load();
    assert!(
        vectors.len() >= 20,
        "expected the shared vectors, found {}",
        vectors.len()
    );
    for v in &vectors {
        let name = &v.file;
        // Accepted as given, with all secrets configured and with each alone.
        let mut secret_sets = vec![v.secrets.clone()];
        if v.secrets.len() > 1 {
            secret_sets.extend(v.secrets.iter().map(|s| vec![s.clone()]));
        }
        for secrets in &secret_sets {
            let (status, body, stored) =
                answer(v, secrets, v.fresh_clock(), &v.headers, v.body.clone()).await;
            assert_eq!(status, 200, "{name}: {body}");
            match &v.expect {
                // A handshake: answered as the provider asks, nothing stored.
                Some(expect) => {
                    assert_eq!(body, expected_answer(expect), "{name}");
                    assert_eq!(stored, 0, "{name}");
                }
                None => assert_eq!(stored, 1, "{name}"),
            }
        }

        // Meta's subscription check carries a token, not a signature.
        if v.method == "GET" {
            let token = v.verify_token.as_deref().unwrap();
            let mut wrong = v.clone();
            wrong.path_query = v.path_query.replace(token, "not-the-verify-token");
            assert_ne!(wrong.path_query, v.path_query);
            let (status, body, stored) =
                answer(&wrong, &v.secrets, v.fresh_clock(), &[], Vec::new()).await;
            assert_eq!((status, stored), (401, 0), "{name}: wrong token: {body}");
            assert!(body.contains("invalid_signature"), "{name}: {body}");
            continue;
        }

        // The signature header changed.
        let sig = v.signature_header().to_owned();
        let tampered: Vec<(String, String)> = v
            .headers
            .iter()
            .map(|(k, val)| {
                if *k == sig {
                    (k.clone(), tamper_every_signature(val))
                } else {
                    (k.clone(), val.clone())
                }
            })
            .collect();
        let (status, body, stored) =
            answer(v, &v.secrets, v.fresh_clock(), &tampered, v.body.clone()).await;
        assert_eq!(
            (status, stored),
            (401, 0),
            "{name}: tampered header: {body}"
        );
        assert!(body.contains("invalid_signature"), "{name}: {body}");

        // The body changed. GitLab sends a shared token, not a signature:
        // nothing covers its body, so there is nothing to detect.
        if v.provider != "gitlab" {
            let (status, body, stored) = answer(
                v,
                &v.secrets,
                v.fresh_clock(),
                &v.headers,
                tamper_body(&v.body),
            )
            .await;
            assert_eq!((status, stored), (401, 0), "{name}: tampered body: {body}");
        }

        // Another secret.
        let wrong = vec![if v.kind() == "standard" {
            "whsec_aG9va2luYm94LXdyb25nLXNlY3JldC0wMDAwMDA=".to_owned()
        } else {
            format!("{}-wrong", v.secrets[0])
        }];
        let (status, body, stored) =
            answer(v, &wrong, v.fresh_clock(), &v.headers, v.body.clone()).await;
        assert_eq!((status, stored), (401, 0), "{name}: wrong secret: {body}");

        // The clock just outside tolerance, both ways.
        if let (Some(at), Some(tolerance)) = (v.signed_at, v.tolerance()) {
            for clock in [
                at + tolerance + Duration::from_secs(2),
                at - tolerance - Duration::from_secs(2),
            ] {
                let (status, body, stored) = answer(
                    v,
                    &v.secrets,
                    Clock::fixed(clock),
                    &v.headers,
                    v.body.clone(),
                )
                .await;
                assert_eq!((status, stored), (401, 0), "{name}: stale: {body}");
                assert!(body.contains("tolerance"), "{name}: {body}");
            }
        }
    }
}

#[tokio::test]
async fn stored_vector_keeps_raw_bytes_id_and_type() {
    let v = load()
        .into_iter()
        .find(|v| v.file == "stripe_node")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&v.config(dir.path(), &v.secrets), v.fresh_clock()).await;
    let a = server.post(&v.path_query, &v.headers, v.body.clone()).await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    let stored = server
        .store()
        .find("v", "evt_hookinbox_0001")
        .unwrap()
        .expect("stored under the body's id");
    assert_eq!(stored.id, a.id());
    assert_eq!(stored.record.body, v.body, "the exact raw bytes");
    assert_eq!(
        stored.record.event_type.as_deref(),
        Some("payment_intent.succeeded")
    );
    assert_eq!(
        stored.record.content_type.as_deref(),
        Some("application/json")
    );
    assert!(
        stored
            .record
            .headers
            .iter()
            .any(|(k, _)| k == "stripe-signature")
    );
    server.stop().await;
}

#[tokio::test]
async fn slack_url_verification_is_answered_with_its_challenge_and_not_stored() {
    let secret = "hookinbox0slack0signing0secret00";
    let body = br#"{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let now = SystemTime::now();
    let headers = hookinbox::verify::sign::sign(&hookinbox::verify::sign::Signing {
        kind: hookinbox::config::Kind::Slack,
        secret,
        body,
        event_id: "",
        event_type: None,
        timestamp: now.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[[source]]\nname = \"slack\"\nkind = \"slack\"\nsecret = \"{secret}\"\n",
        server_section(dir.path())
    );
    let server = TestServer::start(&config, Clock::system()).await;
    let a = server.post("/in/slack", &headers, body.to_vec()).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json,
        serde_json::Value::String("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into())
    );
    assert!(server.events().is_empty());
    // The challenge is answered only after verification.
    let a = server
        .post(
            "/in/slack",
            &[("x-slack-signature".into(), "v0=00".into())],
            body.to_vec(),
        )
        .await;
    assert_eq!(a.status, 401);
    server.stop().await;
}

/// Twitch's revocation (built as Twitch documents it) is stored, typed
/// `revocation`, so the app learns the subscription ended; its
/// notification is typed by the subscription.
#[tokio::test]
async fn a_twitch_revocation_is_stored_as_type_revocation() {
    for (file, expected_type) in [
        ("twitch_revocation_ref", "revocation"),
        ("twitch_ref", "channel.follow"),
    ] {
        let v = load().into_iter().find(|v| v.file == file).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&v.config(dir.path(), &v.secrets), v.fresh_clock()).await;
        let a = server.post(&v.path_query, &v.headers, v.body.clone()).await;
        assert_eq!(a.status, 200, "{file}: {:?}", a.json);
        let events = server.events();
        assert_eq!(events.len(), 1, "{file}");
        assert_eq!(
            events[0].record.event_type.as_deref(),
            Some(expected_type),
            "{file}"
        );
        server.stop().await;
    }
}
