//! Gap fill against local fakes of the providers' APIs (`providers.rs`):
//! a pass asks GitHub to redeliver what failed and hookinbox does not
//! hold, and fetches from Stripe what it never delivered; both come in
//! once, the Stripe ones marked as fetched, and a restart resumes where the
//! passes got to. A refused credential is a metric and one call a pass.

use std::time::Duration;

use hookinbox::api::{EventOrigin, ReconcileOutcome, ReconcileReport};
use hookinbox::clock::Clock;
use hookinbox::verify::sign::{Signing, sign};

use crate::destination::{Destination, Mode};
use crate::providers::{FakeGithub, FakeStripe};
use crate::support::{
    BinaryServer, TestServer, client, eventually, sample, server_section, write_config,
};

const TOKEN: &str = "test-admin-token-0123456789";
const GH_SECRET: &str = "github-webhook-secret";
const GH_TOKEN: &str = "github_pat_fake_0123456789";
const STRIPE_SECRET: &str = "whsec_stripe_endpoint_secret";
const STRIPE_KEY: &str = "rk_test_fake_0123456789";

fn github_config(dir: &std::path::Path, api: &str, token: &str) -> String {
    format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "github"
kind = "github"
secret = "{GH_SECRET}"

[source.reconcile]
hook = "repos/acme/shop/hooks/7"
token = "{token}"
interval = "1h"
api_base = "{api}"
"#,
        server_section(dir)
    )
}

async fn reconcile(server: &TestServer, source: &str, query: &str) -> ReconcileReport {
    let a = server
        .admin(
            "POST",
            &format!("/api/reconcile/{source}{query}"),
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    serde_json::from_value(a.json).unwrap()
}

async fn scrape(server: &TestServer) -> String {
    server
        .client
        .get(server.admin_url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `hookinbox ARGS` with the admin token, off this test's runtime thread:
/// the server (in-process) and the fakes answer on it meanwhile.
async fn cli(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args(&args)
            .env("HOOKINBOX_ADMIN_TOKEN", TOKEN)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn push_body(n: u32) -> Vec<u8> {
    format!(r#"{{"ref":"refs/heads/main","after":"{n:040}","repository":{{"id":1}}}}"#).into_bytes()
}

/// 8 deliveries of a hook: 3 succeeded, 5 failed, of which 2 reached
/// hookinbox anyway (GitHub gave up waiting for the answer). A pass asks
/// for the other 3 exactly once; they arrive signed and are stored once;
/// a second pass asks for nothing.
#[tokio::test]
async fn github_failed_deliveries_hookinbox_lacks_are_redelivered_once() {
    let dir = tempfile::tempdir().unwrap();
    let github = FakeGithub::start(GH_TOKEN, GH_SECRET);
    let server = TestServer::start(
        &github_config(dir.path(), &github.url(), GH_TOKEN),
        Clock::system(),
    )
    .await;
    github.send_to(server.url("/in/github"));
    for n in 0..8u32 {
        let guid = format!("0b9e1c3a-0000-11ef-8000-00000000000{n}");
        let body = push_body(n);
        let failed = n >= 3;
        // 0–2 succeeded, 3–4 failed but reached hookinbox, 5–7 never did.
        if n < 5 {
            let a = server
                .post(
                    "/in/github",
                    &FakeGithub::headers(GH_SECRET, &guid, "push", &body),
                    body.clone(),
                )
                .await;
            assert_eq!(a.status, 200, "{:?}", a.json);
        }
        github.delivered(
            &guid,
            "push",
            &body,
            if failed { 502 } else { 200 },
            3600 - u64::from(n),
        );
    }
    assert_eq!(server.events().len(), 5);

    let dry = reconcile(&server, "github", "?dry_run=true").await;
    assert_eq!((dry.listed, dry.held, dry.resent), (5, 2, 3), "{dry:?}");
    assert!(github.attempts().is_empty(), "a dry run asks for nothing");

    let first = reconcile(&server, "github", "").await;
    assert_eq!(first.outcome, ReconcileOutcome::Ok, "{first:?}");
    assert_eq!(
        (first.listed, first.held, first.resent),
        (5, 2, 3),
        "{first:?}"
    );
    assert_eq!(first.subscription_active, Some(true));
    assert_eq!(github.attempts(), vec![1005, 1006, 1007]);
    eventually(
        "the 3 redeliveries stored",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || match server.events().len() {
            8 => Ok(()),
            n => Err(format!("{n} events")),
        },
    )
    .await;
    // Each guid once, received signed (not fetched).
    let mut guids: Vec<String> = server
        .events()
        .iter()
        .map(|e| e.record.event_id.clone())
        .collect();
    guids.sort();
    guids.dedup();
    assert_eq!(guids.len(), 8);
    let api = server.api(TOKEN);
    for e in server.events() {
        assert_eq!(api.event(&e.id).await.origin, EventOrigin::Received);
    }

    // Each source's last pass, as `hookinbox reconcile` prints it.
    let out = cli(&["reconcile", "--admin", &server.admin_url("")]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("repos/acme/shop/hooks/7")
            && stdout.contains("ok: 5 undelivered by the provider, 2 held, 3 asked to resend"),
        "{stdout}"
    );

    let second = reconcile(&server, "github", "").await;
    assert_eq!((second.listed, second.resent), (0, 0), "{second:?}");
    assert_eq!(
        github.attempts().len(),
        3,
        "the second pass asks for nothing"
    );

    let text = scrape(&server).await;
    assert_eq!(
        sample(
            &text,
            r#"hookinbox_reconciled_total{source="github",how="resent"}"#
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            r#"hookinbox_reconcile_runs_total{source="github",outcome="ok"}"#
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            r#"hookinbox_source_subscription_active{source="github"}"#
        ),
        1.0
    );

    // The provider disables the hook: the next pass says so.
    github.set_active(false);
    let disabled = reconcile(&server, "github", "").await;
    assert_eq!(disabled.subscription_active, Some(false));
    let text = scrape(&server).await;
    assert_eq!(
        sample(
            &text,
            r#"hookinbox_source_subscription_active{source="github"}"#
        ),
        0.0
    );
    server.stop().await;
}

/// A token GitHub refuses, with the real binary: each pass is one call (the
/// hook's), counted as `refused`, logged once (not on every pass, and never
/// with the token), and ingest goes on as before.
#[tokio::test]
async fn a_refused_credential_is_one_call_a_pass_one_log_line_and_a_metric() {
    let dir = tempfile::tempdir().unwrap();
    let github = FakeGithub::start(GH_TOKEN, GH_SECRET);
    let config = write_config(
        dir.path(),
        &github_config(
            &dir.path().join("data"),
            &github.url(),
            "github_pat_revoked",
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    for _ in 0..3 {
        let a = server
            .admin_ok(TOKEN, "POST", "/api/reconcile/github", None)
            .await;
        let r: ReconcileReport = serde_json::from_value(a.json).unwrap();
        assert_eq!(r.outcome, ReconcileOutcome::Refused, "{r:?}");
        let error = r.error.as_deref().unwrap();
        assert!(error.contains("refused the credential"), "{r:?}");
        assert!(!error.contains("revoked"), "no token in the error");
    }
    assert_eq!(github.calls(), 3, "one call a pass, no retries");
    let text = client()
        .get(format!("{}/metrics", server.admin))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        sample(
            &text,
            r#"hookinbox_reconcile_runs_total{source="github",outcome="refused"}"#
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            r#"hookinbox_reconcile_last_success_timestamp_seconds{source="github"}"#
        ),
        0.0
    );
    let body = push_body(1);
    let mut request = client().post(server.url("/in/github")).body(body.clone());
    for (name, value) in FakeGithub::headers(GH_SECRET, "guid-1", "push", &body) {
        request = request.header(name, value);
    }
    assert_eq!(request.send().await.unwrap().status(), 200);
    // A source without [source.reconcile] has no pass to run.
    let a = server
        .admin("POST", "/api/reconcile/nope", Some(TOKEN), None)
        .await;
    assert_eq!(a.status, 404);
    let a = server
        .admin(
            "POST",
            "/api/reconcile/github?since=forever",
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(a.status, 400);
    // `hookinbox reconcile` says the same, and exits non-zero.
    let out = cli(&["reconcile", "github", "--admin", &server.admin]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("github (repos/acme/shop/hooks/7): 0 undelivered by the provider"),
        "{stdout}"
    );
    assert!(
        stderr.contains("the pass ended refused: the provider refused the credential (401)"),
        "{stderr}"
    );
    let warned = "reconcile pass failed; the next one is in an interval";
    let record = server.log_record(warned).expect("the refusal is logged");
    assert_eq!(record["outcome"], "refused", "{record}");
    assert_eq!(record["source"], "github", "{record}");
    let log = server.log_text();
    assert_eq!(log.matches(warned).count(), 1, "logged once: {log}");
    assert!(!log.contains("github_pat_revoked"), "no token in the log");
}

fn stripe_config(dir: &std::path::Path, api: &str, destination: &str) -> String {
    format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "stripe"
kind = "stripe"
secret = "{STRIPE_SECRET}"
destination = "{destination}"
destination_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

[source.reconcile]
token = "{STRIPE_KEY}"
endpoint = "we_1Fake"
interval = "1h"
api_base = "{api}"
"#,
        server_section(dir)
    )
}

fn stripe_headers(id: &str, body: &[u8]) -> Vec<(String, String)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    sign(&Signing {
        kind: hookinbox::config::Kind::Stripe,
        secret: STRIPE_SECRET,
        body,
        event_id: id,
        event_type: None,
        timestamp: now,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap()
}

/// 250 events Stripe could not deliver, over 3 pages, 40 of them held:
/// 210 stored as fetched, byte for byte, delivered once each with
/// `hookinbox-origin: reconciled`. A 429 is waited out; a pass cut short
/// by a failure resumes, after a restart, where it kept its place; no event
/// is listed twice; later passes fetch only what is new.
#[tokio::test]
async fn stripe_undelivered_events_are_fetched_once_and_resumed_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let stripe = FakeStripe::start(STRIPE_KEY);
    let app = Destination::start(Mode::Ok).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let config = stripe_config(dir.path(), &stripe.url(), &app.url());
    let server = TestServer::start(&config, Clock::system()).await;
    let mut undelivered = Vec::new();
    for n in 0..270u32 {
        // 20 delivered ones among them: not listed.
        let delivered = n % 27 == 13 || n % 27 == 26;
        let e = stripe.event(n, now - 3600 + u64::from(n), delivered);
        if !delivered {
            undelivered.push(e);
        }
    }
    assert_eq!(undelivered.len(), 250);
    for e in undelivered.iter().step_by(6).take(40) {
        let body = e.bytes.as_bytes();
        let a = server
            .post("/in/stripe", &stripe_headers(&e.id, body), body.to_vec())
            .await;
        assert_eq!(a.status, 200, "{:?}", a.json);
    }
    // List calls: 1 page one, 2 a 429, 3 page two, 4 a 500.
    stripe.throttle_list_call(2);
    stripe.fail_list_call(4);
    let cut = reconcile(&server, "stripe", "").await;
    assert_eq!(cut.outcome, ReconcileOutcome::Failed, "{cut:?}");
    assert_eq!(cut.pages, 2, "{cut:?}");
    assert_eq!(cut.subscription_active, Some(true));
    server.stop().await;

    let server = TestServer::start(&config, Clock::system()).await;
    let resumed = reconcile(&server, "stripe", "").await;
    assert_eq!(resumed.outcome, ReconcileOutcome::Ok, "{resumed:?}");
    assert_eq!(
        resumed.pages, 1,
        "the walk goes on from its kept place: {resumed:?}"
    );
    assert_eq!(cut.listed + resumed.listed, 250);
    assert_eq!(cut.held + resumed.held, 40);
    assert_eq!(cut.fetched + resumed.fetched, 210);
    assert!(
        stripe.listed().values().all(|n| *n == 1),
        "no event listed twice"
    );
    assert_eq!(stripe.list_calls(), 5, "3 pages, a 429 and a 500");

    // Stored byte for byte, marked as fetched, with where from.
    let api = server.api(TOKEN);
    let mut fetched = 0;
    for e in &undelivered {
        let stored = server.store().find("stripe", &e.id).unwrap().unwrap();
        assert_eq!(stored.record.body, e.bytes.as_bytes());
        assert_eq!(
            stored.record.event_type.as_deref(),
            Some(e.event_type.as_str())
        );
        let detail = api.event(&stored.id).await;
        let origin = hookinbox::standard_webhooks::origin_of(&stored.record.headers);
        if origin.is_some() {
            fetched += 1;
            assert_eq!(detail.origin, EventOrigin::Reconciled);
            let header = |name: &str| {
                detail
                    .headers
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
            };
            assert_eq!(
                header("hookinbox-fetched-from"),
                Some(format!("{}/v1/events/{}", stripe.url(), e.id))
            );
            assert_eq!(
                header("hookinbox-api-version").as_deref(),
                Some("2024-06-20")
            );
            assert!(header("hookinbox-request-id").unwrap().starts_with("req_"));
        } else {
            assert_eq!(detail.origin, EventOrigin::Received);
        }
    }
    assert_eq!(fetched, 210);

    // Each delivered once; the fetched ones say so to the app.
    eventually(
        "every event delivered",
        Duration::from_secs(30),
        Duration::from_millis(50),
        async || match app.count() {
            n if n >= 250 => Ok(()),
            n => Err(format!("{n} delivered")),
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let received = app.received();
    assert_eq!(received.len(), 250);
    let marked = received
        .iter()
        .filter(|r| {
            r.headers
                .get("hookinbox-origin")
                .is_some_and(|v| v == "reconciled")
        })
        .count();
    assert_eq!(marked, 210);

    // Later passes: nothing, then only what is new.
    let idle = reconcile(&server, "stripe", "").await;
    assert_eq!((idle.listed, idle.fetched), (0, 0), "{idle:?}");
    for n in 270..275u32 {
        stripe.event(n, now + u64::from(n), false);
    }
    let more = reconcile(&server, "stripe", "").await;
    assert_eq!((more.listed, more.fetched), (5, 5), "{more:?}");
    assert!(
        stripe.listed().values().all(|n| *n == 1),
        "no event listed twice"
    );

    let text = scrape(&server).await;
    assert_eq!(
        sample(
            &text,
            r#"hookinbox_reconciled_total{source="stripe",how="fetched"}"#
        ),
        5.0 + resumed.fetched as f64
    );

    // By hand, from 2 hours ago: every event listed again, all held.
    let again = reconcile(&server, "stripe", "?since=2h").await;
    assert_eq!(
        (again.listed, again.held, again.fetched),
        (255, 255, 0),
        "{again:?}"
    );
    // It moved no cursor: the next pass finds nothing.
    let idle = reconcile(&server, "stripe", "").await;
    assert_eq!(idle.listed, 0, "{idle:?}");

    // A disabled endpoint is read on the next pass.
    stripe.set_endpoint_status("disabled");
    let disabled = reconcile(&server, "stripe", "").await;
    assert_eq!(disabled.subscription_active, Some(false));
    server.stop().await;
}
