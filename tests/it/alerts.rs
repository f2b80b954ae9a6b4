//! Alerts end to end: the real server posts to a loopback receiver. Each
//! kind (dead letters past the threshold, an old pending event, an open
//! circuit) fires once, names the host and links to what to look at, and
//! is followed by a "resolved" post when it clears; repeats wait for
//! `min_interval`; a refused post is tried again; both body formats.

use std::time::{Duration, Instant};

use hookinbox::clock::Clock;
use serde_json::Value;

use crate::destination::{Destination, Mode};
use crate::support::{STANDARD_SECRET, TestServer, eventually, server_section, standard_headers};

const TOKEN: &str = "test-admin-token-0123456789";

async fn send(server: &TestServer, source: &str, id: &str) -> String {
    let body = format!("{{\"id\":\"{id}\"}}").into_bytes();
    let a = server
        .post(&format!("/in/{source}"), &standard_headers(id, &body), body)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    a.id().to_owned()
}

/// The notices the receiver took (the `hookinbox` member of Slack bodies).
fn notices(receiver: &Destination, slack: bool) -> Vec<Value> {
    receiver
        .received()
        .iter()
        .filter(|r| r.answered == 200)
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            if slack {
                let mut notice = body["hookinbox"].clone();
                notice["text"] = body["text"].clone();
                notice
            } else {
                body
            }
        })
        .collect()
}

/// Waits until the receiver took a notice of `kind` in `status`; returns it.
async fn wait_notice(receiver: &Destination, slack: bool, kind: &str, status: &str) -> Value {
    eventually(
        &format!("a {status} {kind} notice"),
        Duration::from_secs(20),
        Duration::from_millis(20),
        async || {
            let got = notices(receiver, slack);
            match got
                .iter()
                .find(|n| n["alert"] == kind && n["status"] == status)
            {
                Some(n) => Ok(n.clone()),
                None => Err(format!("notices: {got:#?}")),
            }
        },
    )
    .await
}

/// A server with all three alert conditions on their way (Slack format,
/// `min_interval` an hour): `shop`'s destination refuses (400) its event,
/// which is dead at once; `api`'s fails (500), so its event waits and the
/// circuit opens.
struct Alerting {
    server: TestServer,
    receiver: Destination,
    failing: Destination,
    /// The dead-lettered event of `shop`.
    dead: String,
    _rejecting: Destination,
    _dir: tempfile::TempDir,
}

/// The firing notices of each kind, as the receiver took them.
struct Fired {
    dlq: Value,
    circuit: Value,
    late: Value,
}

impl Alerting {
    async fn start() -> Alerting {
        let dir = tempfile::tempdir().unwrap();
        let receiver = Destination::start(Mode::Ok).await;
        let rejecting = Destination::start(Mode::Status(400, "unknown order")).await;
        let failing = Destination::start(Mode::Status(500, "boom")).await;
        let text = format!(
            r#"{}[admin]
token = "{TOKEN}"

[alerts]
url = "{}"
dlq_threshold = 0
pending_age = "1s"
min_interval = "1h"
check_interval = "50ms"
host = "test-host"
dashboard_url = "https://inbox.example.com/ops"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"

[[source]]
name = "api"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
initial_interval = "50ms"
max_interval = "100ms"
max_attempts = 1000
breaker_failures = 1
breaker_cooldown = "300ms"
"#,
            server_section(dir.path()),
            receiver.url(),
            rejecting.url(),
            failing.url()
        );
        let server = TestServer::start(&text, Clock::system()).await;
        let dead = send(&server, "shop", "a_1").await;
        send(&server, "api", "a_2").await;
        Alerting {
            server,
            receiver,
            failing,
            dead,
            _rejecting: rejecting,
            _dir: dir,
        }
    }

    /// Waits until all three fired: a dead letter, a pending event older
    /// than 1 s, a circuit open.
    async fn fired(&self) -> Fired {
        Fired {
            dlq: wait_notice(&self.receiver, true, "dlq", "firing").await,
            circuit: wait_notice(&self.receiver, true, "circuit_open", "firing").await,
            late: wait_notice(&self.receiver, true, "pending_age", "firing").await,
        }
    }

    /// Clears each condition: the dead letter is ignored by an operator,
    /// the destination recovers and takes the waiting event.
    async fn clear(&self) {
        self.server
            .api(TOKEN)
            .ignore(&self.dead, "refunded by hand", None)
            .await;
        self.failing.set(Mode::Ok);
    }
}

#[tokio::test]
async fn each_kind_fires_naming_the_host_and_linking_to_what_to_look_at() {
    let alerting = Alerting::start().await;
    let Fired { dlq, circuit, late } = alerting.fired().await;
    assert_eq!(dlq["name"], "shop");
    assert_eq!(dlq["count"], 1);
    assert_eq!(dlq["host"], "test-host");
    assert!(dlq["reason"].as_str().unwrap().contains("400"), "{dlq}");
    assert_eq!(
        dlq["link"],
        "https://inbox.example.com/ops/#/dlq?source=shop"
    );
    assert_eq!(
        dlq["api"],
        "https://inbox.example.com/ops/api/events?source=shop&status=dead"
    );
    assert_eq!(dlq["resolved_at"], Value::Null);
    let text = dlq["text"].as_str().unwrap();
    assert!(
        text.starts_with("[FIRING] hookinbox on test-host: source shop has 1 dead-lettered events"),
        "{text}"
    );
    assert!(
        text.ends_with("https://inbox.example.com/ops/#/dlq?source=shop"),
        "{text}"
    );
    assert_eq!(circuit["name"], "api");
    assert!(
        circuit["reason"].as_str().unwrap().contains("500"),
        "{circuit}"
    );
    assert_eq!(
        circuit["api"],
        "https://inbox.example.com/ops/api/destinations"
    );
    assert_eq!(late["name"], "api");
    assert_eq!(late["count"], 1);
    assert_eq!(
        late["link"],
        "https://inbox.example.com/ops/#/events?source=api&status=pending"
    );
    alerting.server.stop().await;
}

#[tokio::test]
async fn each_kind_resolves_when_it_clears_with_the_start_it_fired_at() {
    let alerting = Alerting::start().await;
    let Fired { dlq, circuit, late } = alerting.fired().await;
    alerting.clear().await;
    let receiver = &alerting.receiver;
    for (kind, firing) in [
        ("dlq", &dlq),
        ("circuit_open", &circuit),
        ("pending_age", &late),
    ] {
        let resolved = wait_notice(receiver, true, kind, "resolved").await;
        assert_eq!(resolved["name"], firing["name"]);
        assert_eq!(resolved["host"], "test-host");
        assert_eq!(resolved["started_at"], firing["started_at"], "{kind}");
        assert!(resolved["resolved_at"].is_string(), "{resolved}");
        assert_eq!(resolved["link"], firing["link"]);
        let text = resolved["text"].as_str().unwrap();
        assert!(
            text.starts_with("[RESOLVED] hookinbox on test-host: "),
            "{text}"
        );
    }
    assert_eq!(
        notices(receiver, true)
            .iter()
            .find(|n| n["alert"] == "dlq" && n["status"] == "resolved")
            .unwrap()["count"],
        0
    );
    alerting.server.stop().await;
}

#[tokio::test]
async fn within_min_interval_each_kind_fires_and_resolves_once() {
    let alerting = Alerting::start().await;
    alerting.fired().await;
    alerting.clear().await;
    let receiver = &alerting.receiver;
    for kind in ["dlq", "circuit_open", "pending_age"] {
        wait_notice(receiver, true, kind, "resolved").await;
    }

    // Once each: min_interval is an hour, and nothing fires again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let all = notices(receiver, true);
    for kind in ["dlq", "circuit_open", "pending_age"] {
        for status in ["firing", "resolved"] {
            let n = all
                .iter()
                .filter(|n| n["alert"] == kind && n["status"] == status)
                .count();
            assert_eq!(n, 1, "{kind} {status}: {all:#?}");
        }
    }
    let metrics = alerting
        .server
        .metrics()
        .encode(hookinbox::metrics::Exposition::Prometheus);
    assert!(
        metrics.contains(
            "hookinbox_alerts_total{kind=\"circuit_open\",status=\"resolved\",sent=\"true\"} 1"
        ),
        "{metrics}"
    );
    alerting.server.stop().await;
}

#[tokio::test]
async fn the_json_format_repeats_a_lasting_alert_once_per_window_and_retries_a_refused_post() {
    let dir = tempfile::tempdir().unwrap();
    // The receiver refuses at first: the alert is tried again at the next
    // check, not dropped.
    let receiver = Destination::start(Mode::Status(503, "down")).await;
    let rejecting = Destination::start(Mode::Status(400, "unknown order")).await;
    let text = format!(
        r#"{}[alerts]
url = "{}"
format = "json"
dlq_threshold = 1
min_interval = "1500ms"
check_interval = "50ms"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
"#,
        server_section(dir.path()),
        receiver.url(),
        rejecting.url(),
    );
    let server = TestServer::start(&text, Clock::system()).await;
    let started = Instant::now();
    send(&server, "shop", "j_1").await;
    send(&server, "shop", "j_2").await;
    eventually(
        "the refused post is retried",
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || match receiver.count() {
            n if n >= 2 => Ok(()),
            n => Err(format!("{n} posts received")),
        },
    )
    .await;
    receiver.set(Mode::Ok);
    let first = wait_notice(&receiver, false, "dlq", "firing").await;
    // The plain object: no Slack text around it.
    assert!(first.get("text").is_none() && first.get("hookinbox").is_none());
    assert_eq!(first["count"], 2);
    assert_eq!(first["name"], "shop");
    let host = first["host"].as_str().unwrap();
    assert!(!host.is_empty());
    // No dashboard_url: the admin listener itself.
    let link = first["link"].as_str().unwrap();
    assert!(
        link.starts_with("http://127.0.0.1:") && link.ends_with("/#/dlq?source=shop"),
        "{link}"
    );

    // Still firing: repeated after min_interval, not before.
    let firing_at = || {
        receiver
            .received()
            .iter()
            .filter(|r| r.answered == 200)
            .map(|r| r.at)
            .collect::<Vec<_>>()
    };
    let at = eventually(
        "a repeat after the window",
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || match firing_at() {
            at if at.len() >= 2 => Ok(at),
            at => Err(format!("answered 200 at {at:?}")),
        },
    )
    .await;
    assert!(
        at[1] - at[0] >= Duration::from_millis(1500),
        "{:?}",
        at[1] - at[0]
    );
    let repeat = &notices(&receiver, false)[1];
    assert_eq!(repeat["status"], "firing");
    assert_eq!(repeat["started_at"], first["started_at"]);
    assert!(started.elapsed() >= Duration::from_millis(1500));
    // The receiver has the post before the alerter has read its answer and
    // counted it: wait for the count.
    let value = |series: &str| -> f64 {
        server
            .metrics()
            .encode(hookinbox::metrics::Exposition::Prometheus)
            .lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {series}"))
    };
    let sent = "hookinbox_alerts_total{kind=\"dlq\",status=\"firing\",sent=\"true\"}";
    eventually(
        &format!("{sent} >= 2"),
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || match value(sent) {
            v if v >= 2.0 => Ok(()),
            v => Err(format!("{sent} {v}")),
        },
    )
    .await;
    assert!(value("hookinbox_alerts_total{kind=\"dlq\",status=\"firing\",sent=\"false\"}") >= 2.0);
    assert!(value(sent) >= 2.0);
    server.stop().await;
}

/// The value of the sample `name{source="source"}` in a scrape, if any.
fn sample(scrape: &str, name: &str, source: &str) -> Option<f64> {
    let prefix = format!("{name}{{source=\"{source}\"}} ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().parse().unwrap())
}

/// A source that sets `expect_within` is quiet from the start until it
/// sends, and again when it stops: each spell fires once and resolves with
/// the next event, and the metrics and the stats say the same. A source
/// without it is never quiet.
#[tokio::test]
async fn a_source_quiet_past_expect_within_fires_and_resolves_with_its_next_event() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Destination::start(Mode::Ok).await;
    let app = Destination::start(Mode::Ok).await;
    let text = format!(
        r#"{}[admin]
token = "{TOKEN}"

[alerts]
url = "{}"
format = "json"
min_interval = "1h"
check_interval = "50ms"
host = "test-host"

[[source]]
name = "beat"
kind = "standard"
secret = "{STANDARD_SECRET}"
expect_within = "2s"
destination = "{}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"
"#,
        server_section(dir.path()),
        receiver.url(),
        app.url(),
        app.url()
    );
    let started = Instant::now();
    let server = TestServer::start(&text, Clock::system()).await;
    let api = server.api(TOKEN);

    // Nothing stored: quiet since the start, 2 s on.
    let first = wait_notice(&receiver, false, "quiet", "firing").await;
    assert!(started.elapsed() >= Duration::from_secs(2));
    assert_eq!(first["name"], "beat");
    assert_eq!(first["host"], "test-host");
    assert_eq!(first["count"], 0);
    let summary = first["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("no event from beat since hookinbox started")
            && summary.contains("(expected within 2s)"),
        "{summary}"
    );
    assert!(
        first["link"]
            .as_str()
            .unwrap()
            .ends_with("/#/events?source=beat"),
        "{first}"
    );
    assert!(
        first["api"]
            .as_str()
            .unwrap()
            .ends_with("/api/events?source=beat"),
        "{first}"
    );
    let stats = api.stats().await;
    let (beat, shop) = (&stats.sources["beat"], &stats.sources["shop"]);
    assert!(beat.quiet && beat.newest_received_at.is_none(), "{beat:?}");
    assert_eq!(beat.expect_within_ms, Some(2000));
    assert!(!shop.quiet && shop.expect_within_ms.is_none(), "{shop:?}");
    let scrape = server.admin("GET", "/metrics", Some(TOKEN), None).await;
    let scrape = scrape.json.as_str().unwrap();
    let expected = "hookinbox_source_expect_within_seconds";
    assert_eq!(sample(scrape, expected, "beat"), Some(2.0));
    assert_eq!(sample(scrape, expected, "shop"), None, "shop sets none");
    let quiet = sample(scrape, "hookinbox_source_quiet_seconds", "beat").unwrap();
    assert!(quiet >= 2.0, "quiet {quiet}");
    assert!(sample(scrape, "hookinbox_source_quiet_seconds", "shop").is_some());
    // A source without expect_within is never alerted on.
    assert!(
        notices(&receiver, false)
            .iter()
            .all(|n| n["name"] != "shop" || n["alert"] != "quiet")
    );

    // Two events: the spell ends with the first.
    send(&server, "beat", "b_1").await;
    send(&server, "beat", "b_2").await;
    let resolved = wait_notice(&receiver, false, "quiet", "resolved").await;
    assert_eq!(resolved["started_at"], first["started_at"]);
    assert!(
        resolved["summary"]
            .as_str()
            .unwrap()
            .starts_with("source beat sends again"),
        "{resolved}"
    );
    let beat = &api.stats().await.sources["beat"];
    assert!(!beat.quiet && beat.newest_received_at.is_some(), "{beat:?}");

    // Then nothing for 2 s: quiet again, with what it sent before.
    let again = eventually(
        "a second quiet spell fires",
        Duration::from_secs(20),
        Duration::from_millis(20),
        async || {
            let got = notices(&receiver, false);
            let firing: Vec<&Value> = got
                .iter()
                .filter(|n| n["alert"] == "quiet" && n["status"] == "firing")
                .collect();
            match firing.get(1) {
                Some(n) => Ok((*n).clone()),
                None => Err(format!("notices: {got:#?}")),
            }
        },
    )
    .await;
    assert_eq!(again["count"], 2, "{again}");
    let summary = again["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("no event from beat for ")
            && summary.contains("it usually sends every"),
        "{summary}"
    );
    assert!(api.stats().await.sources["beat"].quiet);
    server.stop().await;
}

/// A source's events departing from their learned payload shape: one
/// `drift` notice for the source, naming the event type, each pointer and
/// its change, and linking to the dashboard's Shapes view; it lasts while
/// the newest departure is under an hour old (the Prometheus rule's
/// window) and resolves once it is older, by the app's clock.
#[tokio::test]
async fn a_payload_departure_fires_one_drift_notice_naming_its_pointers_and_resolves_an_hour_on() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Destination::start(Mode::Ok).await;
    let app = Destination::start(Mode::Ok).await;
    let text = format!(
        r#"{}[admin]
token = "{TOKEN}"

[alerts]
url = "{}"
format = "json"
min_interval = "1h"
check_interval = "50ms"
host = "test-host"
dashboard_url = "https://inbox.example.com/ops"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
event_type = ["json:/type"]
destination = "{}"

[[source]]
name = "api"
kind = "standard"
secret = "{STANDARD_SECRET}"
event_type = ["json:/type"]
destination = "{}"
"#,
        server_section(dir.path()),
        receiver.url(),
        app.url(),
        app.url()
    );
    let (clock, skew) = Clock::skewed();
    let server = TestServer::start(&text, clock).await;
    let api = server.api(TOKEN);
    let send_json = async |source: &str, id: &str, body: Value| {
        let body = body.to_string().into_bytes();
        let a = server
            .post(&format!("/in/{source}"), &standard_headers(id, &body), body)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.json);
    };
    let learned = async |events: u64| {
        eventually(
            &format!("shop's shape has learned {events} events"),
            Duration::from_secs(10),
            Duration::from_millis(20),
            async || {
                let shapes: hookinbox::api::Shapes = api.get("/api/shapes?source=shop").await;
                match shapes.shapes.first() {
                    Some(s) if s.events == events => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await
    };
    let drift_notices = || -> Vec<Value> {
        notices(&receiver, false)
            .into_iter()
            .filter(|n| n["alert"] == "drift")
            .collect()
    };
    for i in 0..20 {
        let body = serde_json::json!({
            "type": "order.paid",
            "id": i,
            "amount": 100,
            "customer": {"email": "a@example.com"},
        });
        send_json("shop", &format!("evt_{i}"), body).await;
    }
    learned(20).await;
    // Learned, warm, and nothing departed: no notice.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(drift_notices().is_empty(), "{:#?}", drift_notices());

    // One event lacks a field and carries a number as text.
    let odd = serde_json::json!({"type": "order.paid", "id": 20, "amount": "100", "customer": {}});
    send_json("shop", "evt_odd", odd).await;
    let firing = wait_notice(&receiver, false, "drift", "firing").await;
    assert_eq!(firing["name"], "shop");
    assert_eq!(firing["host"], "test-host");
    assert_eq!(firing["count"], 2, "{firing}");
    let summary = firing["summary"].as_str().unwrap();
    assert!(
        summary.starts_with(
            "events of source shop departed from their learned payload shape 2 times in the last 1h: "
        ),
        "{summary}"
    );
    for named in [
        "order.paid /customer/email missing (was string)",
        "order.paid /amount type_changed from number to string",
    ] {
        assert!(summary.contains(named), "{named}: {summary}");
    }
    assert_eq!(
        firing["link"],
        "https://inbox.example.com/ops/#/shapes?source=shop"
    );
    assert_eq!(
        firing["api"],
        "https://inbox.example.com/ops/api/shapes?source=shop"
    );
    // The departure the notice names is the one the Shapes view lists.
    let shapes: hookinbox::api::Shapes = api.get("/api/shapes?source=shop").await;
    assert_eq!(shapes.drifts.len(), 2, "{shapes:?}");

    // Once, for the source that drifted: the next checks post nothing more
    // (min_interval is an hour), and `api` never drifted.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let all = drift_notices();
    assert_eq!(all.len(), 1, "{all:#?}");

    // 59 minutes on, the departure is still within the hour.
    skew.advance(Duration::from_secs(59 * 60));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let all = drift_notices();
    assert_eq!(all.len(), 1, "resolved within the hour: {all:#?}");

    // Past the hour: resolved, with the start it fired at.
    skew.advance(Duration::from_secs(2 * 60));
    let resolved = wait_notice(&receiver, false, "drift", "resolved").await;
    assert_eq!(resolved["name"], "shop");
    assert_eq!(resolved["started_at"], firing["started_at"]);
    assert!(resolved["resolved_at"].is_string(), "{resolved}");
    assert_eq!(resolved["count"], 0);
    assert_eq!(resolved["link"], firing["link"]);
    let summary = resolved["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("no new payload departure of source shop for 1h 1m"),
        "{summary}"
    );
    assert_eq!(drift_notices().len(), 2);
    server.stop().await;
}

/// Gap fill in hookinbox's own notices: a pass that gets back an event
/// Stripe could not deliver fires `missed_events` (resolved an hour on, by
/// the app's clock), and an endpoint Stripe disabled fires
/// `subscription_disabled` until a pass reads it enabled again. Both link
/// to the overview's Gap fill table and `api/reconcile`.
#[tokio::test]
async fn a_pass_that_gets_events_back_and_a_disabled_endpoint_each_notify_and_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Destination::start(Mode::Ok).await;
    let stripe = crate::providers::FakeStripe::start("rk_test_alerts");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    stripe.event(1, now - 60, false);
    stripe.set_endpoint_status("disabled");
    let text = format!(
        r#"{}[admin]
token = "{TOKEN}"

[alerts]
url = "{}"
format = "json"
min_interval = "1h"
check_interval = "50ms"
dashboard_url = "https://inbox.example.com/ops"

[[source]]
name = "stripe"
kind = "stripe"
secret = "whsec_alerts_endpoint_secret"

[source.reconcile]
token = "rk_test_alerts"
endpoint = "we_1Alerts"
interval = "1h"
api_base = "{}"
"#,
        server_section(dir.path()),
        receiver.url(),
        stripe.url()
    );
    let (clock, skew) = Clock::skewed();
    let server = TestServer::start(&text, clock).await;
    let pass = async || {
        let a = server
            .admin("POST", "/api/reconcile/stripe", Some(TOKEN), None)
            .await;
        assert_eq!(a.status, 200, "{:?}", a.json);
        a.json
    };
    // Nothing found yet: no notice of either kind.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(notices(&receiver, false).is_empty());

    let report = pass().await;
    assert_eq!(report["fetched"], 1, "{report}");
    let missed = wait_notice(&receiver, false, "missed_events", "firing").await;
    assert_eq!(missed["name"], "stripe");
    assert_eq!(missed["count"], 1);
    let summary = missed["summary"].as_str().unwrap();
    assert!(summary.contains("1 fetched from its API"), "{summary}");
    assert_eq!(missed["link"], "https://inbox.example.com/ops/#/");
    assert_eq!(missed["api"], "https://inbox.example.com/ops/api/reconcile");
    let disabled = wait_notice(&receiver, false, "subscription_disabled", "firing").await;
    assert_eq!(disabled["name"], "stripe");
    assert!(
        disabled["summary"].as_str().unwrap().contains("disabled"),
        "{disabled}"
    );

    // Enabled again: the next pass reads it and the notice resolves.
    stripe.set_endpoint_status("enabled");
    pass().await;
    wait_notice(&receiver, false, "subscription_disabled", "resolved").await;
    // An hour after the pass that got the event back, that resolves too.
    skew.advance(Duration::from_secs(61 * 60));
    wait_notice(&receiver, false, "missed_events", "resolved").await;
    let fired: Vec<Value> = notices(&receiver, false)
        .into_iter()
        .filter(|n| n["status"] == "firing")
        .collect();
    assert_eq!(fired.len(), 2, "one firing notice of each: {fired:#?}");
    server.stop().await;
}
