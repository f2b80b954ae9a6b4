//! A provider rotating its signing secret, against the real binary: the
//! new secret arrives by reload beside the old one, nothing is refused
//! while the provider switches, the match metric and `hookinbox secrets`
//! move from the old secret to the new, the old one stops verifying at
//! its expiry, and what was counted outlives a restart.

use std::time::{Duration, SystemTime};

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, eventually, post, server_section, standard_headers_with,
    write_config,
};

const ADMIN_TOKEN: &str = "secrets-admin-token-0123456789abcdef";
const NEW_SECRET: &str = "whsec_bmV3LXNlY3JldC1mb3ItdGhlLXJvdGF0aW9uLXRlc3Q=";

fn config(dir: &std::path::Path, alerts: &str, secrets: &str) -> String {
    format!(
        "{}[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n[alerts]\nurl = \"{alerts}\"\nformat = \"json\"\n\
         check_interval = \"50ms\"\nmin_interval = \"1h\"\nsecret_notice = \"1h\"\n\n\
         [[source]]\nname = \"shop\"\nkind = \"standard\"\n\n{secrets}",
        server_section(dir)
    )
}

/// The `secret_expiring` notices the receiver took, in order.
fn notices(receiver: &Destination) -> Vec<serde_json::Value> {
    receiver
        .received()
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).unwrap())
        .filter(|n| n["alert"] == "secret_expiring")
        .collect()
}

async fn wait_notice(receiver: &Destination, status: &str, nth: usize) -> serde_json::Value {
    eventually(
        &format!("{status} notice #{nth}"),
        Duration::from_secs(20),
        Duration::from_millis(20),
        async || {
            let got = notices(receiver);
            got.iter()
                .filter(|n| n["status"] == status)
                .nth(nth)
                .cloned()
                .ok_or_else(|| format!("{got:#?}"))
        },
    )
    .await
}

fn table(name: &str, secret: &str, expires: Option<&str>) -> String {
    let mut t = format!("[[source.secrets]]\nname = \"{name}\"\nsecret = \"{secret}\"\n");
    if let Some(at) = expires {
        t.push_str(&format!("expires = \"{at}\"\n"));
    }
    t.push('\n');
    t
}

async fn send(server: &BinaryServer, secret: &str, id: &str) -> (u16, serde_json::Value) {
    let body = format!(r#"{{"type":"order.paid","id":"{id}"}}"#).into_bytes();
    let a = post(
        &client(),
        &server.url("/in/shop"),
        &standard_headers_with(secret, id, &body),
        body,
    )
    .await;
    (a.status, a.json)
}

async fn scrape(server: &BinaryServer) -> String {
    let answer = server.admin_ok(ADMIN_TOKEN, "GET", "/metrics", None).await;
    answer.json.as_str().expect("the text format").to_owned()
}

/// `hookinbox_signature_matches_total` for `secret` of `shop`.
async fn matches(server: &BinaryServer, secret: &str) -> u64 {
    let scrape = scrape(server).await;
    let prefix =
        format!("hookinbox_signature_matches_total{{source=\"shop\",secret=\"{secret}\"}} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn listed(server: &BinaryServer) -> Vec<serde_json::Value> {
    let (code, out, err) = crate::cli::ops(
        &server.admin,
        ADMIN_TOKEN,
        &["secrets".into(), "--json".into()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains(STANDARD_SECRET) && !out.contains(NEW_SECRET),
        "a secret's value in {out}"
    );
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    list["secrets"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_provider_switches_secrets_mid_stream_and_the_old_one_stops_at_its_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Destination::start(Mode::Ok).await;
    let alerts = receiver.url();
    // The old secret expires a few seconds on: time to switch, then past.
    let expires_at = SystemTime::now() + Duration::from_secs(10);
    let expires = humantime::format_rfc3339_seconds(expires_at).to_string();
    let path = write_config(
        dir.path(),
        &config(dir.path(), &alerts, &table("old", STANDARD_SECRET, None)),
    );
    let mut server = BinaryServer::start(&path, &[], None);
    for i in 0..20 {
        assert_eq!(
            send(&server, STANDARD_SECRET, &format!("evt_a{i}")).await.0,
            200
        );
    }

    // The provider rolls its secret: the new one beside the old, which
    // now expires.
    let both = format!(
        "{}{}",
        table("new", NEW_SECRET, None),
        table("old", STANDARD_SECRET, Some(&expires))
    );
    std::fs::write(&path, config(dir.path(), &alerts, &both)).unwrap();
    server
        .admin_ok(ADMIN_TOKEN, "POST", "/api/reload", None)
        .await;
    // Mid-stream the provider switches: old, then new, none refused.
    // While it still signs with the expiring secret, that is an alert;
    // once it signs with the new one, the alert resolves.
    for i in 0..10 {
        assert_eq!(
            send(&server, STANDARD_SECRET, &format!("evt_b{i}")).await.0,
            200
        );
    }
    let firing = wait_notice(&receiver, "firing", 0).await;
    assert_eq!(firing["name"], "shop");
    let summary = firing["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("secret \"old\" expires in") && summary.contains("still verifies"),
        "{summary}"
    );
    for i in 10..20 {
        assert_eq!(send(&server, NEW_SECRET, &format!("evt_b{i}")).await.0, 200);
    }
    wait_notice(&receiver, "resolved", 0).await;
    assert_eq!(matches(&server, "old").await, 30);
    assert_eq!(matches(&server, "new").await, 10);
    let rows = listed(&server);
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["new", "old"]);
    let (new, old) = (&rows[0], &rows[1]);
    assert_eq!(
        (new["matches"].as_u64(), old["matches"].as_u64()),
        (Some(10), Some(30))
    );
    assert!(
        new["last_match"].as_str() >= old["last_match"].as_str(),
        "{rows:?}"
    );
    assert_eq!(old["expired"], false);
    assert!(old["expires"].as_str().unwrap().starts_with(&expires[..19]));
    assert_eq!(old["place"]["kind"], "inline");

    // Past its expiry the old secret verifies nothing; the new one does.
    let wait = expires_at
        .duration_since(SystemTime::now())
        .unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(200)).await;
    let (status, answer) = send(&server, STANDARD_SECRET, "evt_late").await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(send(&server, NEW_SECRET, "evt_c").await.0, 200);
    assert_eq!(matches(&server, "old").await, 30);
    let scrape = scrape(&server).await;
    assert!(
        scrape.contains("hookinbox_rejected_total{source=\"shop\",reason=\"expired_secret\"} 1"),
        "{scrape}"
    );
    let refused = server.log_record("ingest rejected").unwrap_or_default();
    assert!(
        refused.to_string().contains("expired"),
        "the refusal's log line names the expiry: {refused}"
    );
    assert_eq!(listed(&server)[1]["expired"], true);
    // Expired while the provider signs with the new one: no alert again.
    assert_eq!(notices(&receiver).len(), 2, "{:#?}", notices(&receiver));

    // A restart keeps what was counted: the old one's 30 and last match.
    let before = listed(&server);
    assert!(server.terminate().success());
    let server = BinaryServer::start(&path, &[], None);
    let after = listed(&server);
    for (b, a) in before.iter().zip(&after) {
        for field in ["name", "first_seen", "last_match", "matches"] {
            assert_eq!(b[field], a[field], "{field}: {before:?} then {after:?}");
        }
    }
}

/// The key hookinbox signs deliveries with today, and the one the app
/// moves to.
const SIGNING_OLD: &str = "whsec_b2xkLXNpZ25pbmcta2V5LWZvci10aGUtYXBwLTAx";
const SIGNING_NEW: &str = "whsec_bmV3LXNpZ25pbmcta2V5LWZvci10aGUtYXBwLTAy";
/// A key the app might hold by mistake.
const SIGNING_OTHER: &str = "whsec_b3RoZXItc2lnbmluZy1rZXktbm90LWNvbmZpZ3U=";

/// Whether the official `standardwebhooks` package (PyPI), knowing only
/// `secret`, verifies the delivery `r`.
fn app_verifies(r: &crate::destination::Received, secret: &str) -> bool {
    crate::support::official_verify(r, secret, &r.body).is_ok()
}

/// The app moves to a new key at its own pace: the destination's key file
/// gains the new key beside the old (a reload), every delivery then
/// carries both signatures and verifies for an app that knows either one,
/// and once the old key is dropped (another reload) only the new verifies.
#[tokio::test]
async fn a_destination_with_two_keys_signs_with_both_until_the_old_one_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let app = Destination::start(Mode::Ok).await;
    let keys = dir.path().join("app.keys");
    std::fs::write(&keys, format!("{SIGNING_OLD}\n")).unwrap();
    let text = format!(
        "{}[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n[[source]]\nname = \"shop\"\nkind = \"standard\"\n\
         secret = \"{STANDARD_SECRET}\"\ndestination = \"{}\"\ndestination_secret_file = {keys:?}\n",
        server_section(dir.path()),
        app.url()
    );
    let path = write_config(dir.path(), &text);
    let server = BinaryServer::start(&path, &[], None);
    let reload = async || {
        let answer = server
            .admin_ok(ADMIN_TOKEN, "POST", "/api/reload", None)
            .await
            .json;
        assert!(
            answer.to_string().contains("destination.shop"),
            "the key file's change is the destination's: {answer}"
        );
    };
    let deliveries = async |from: usize, n: usize| {
        for i in from..from + n {
            assert_eq!(
                send(&server, STANDARD_SECRET, &format!("evt_{i}")).await.0,
                200
            );
        }
        app.wait_for(from + n, Duration::from_secs(20)).await
    };

    let got = deliveries(0, 1).await;
    assert_eq!(got[0].header("webhook-signature").split(' ').count(), 1);
    assert!(app_verifies(&got[0], SIGNING_OLD));
    assert!(!app_verifies(&got[0], SIGNING_NEW));

    // Both keys: the app may switch whenever it likes.
    std::fs::write(&keys, format!("{SIGNING_OLD}\n{SIGNING_NEW}\n")).unwrap();
    reload().await;
    let got = deliveries(1, 3).await;
    for r in &got[1..] {
        assert_eq!(r.header("webhook-signature").split(' ').count(), 2);
        assert!(
            app_verifies(r, SIGNING_OLD),
            "an app that knows only the old key"
        );
        assert!(
            app_verifies(r, SIGNING_NEW),
            "an app that knows only the new key"
        );
        assert!(
            !app_verifies(r, SIGNING_OTHER),
            "a key hookinbox does not hold"
        );
    }

    // The app has switched: the old key is dropped.
    std::fs::write(&keys, format!("{SIGNING_NEW}\n")).unwrap();
    reload().await;
    let got = deliveries(4, 1).await;
    assert!(app_verifies(&got[4], SIGNING_NEW));
    assert!(!app_verifies(&got[4], SIGNING_OLD));
}
