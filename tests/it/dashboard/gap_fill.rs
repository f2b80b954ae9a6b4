//! Gap fill in Chromium: the overview lists each source with
//! `[source.reconcile]`, its last pass and what the provider says of the
//! subscription; an event a pass fetched says on its page that it came from
//! the provider's API, not signed, and from where; axe on both.

use super::walk::assert_accessible;
use super::{Driver, TOKEN, text_until, type_into};
use crate::providers::FakeStripe;
use crate::support::{BinaryServer, server_section, write_config};

const STRIPE_KEY: &str = "rk_test_fake_dashboard";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_the_last_pass_and_a_fetched_event_says_where_from() {
    let driver = Driver::start();
    let dir = tempfile::tempdir().unwrap();
    let stripe = FakeStripe::start(STRIPE_KEY);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let missed = stripe.event(1, now - 60, false);
    let config = write_config(
        dir.path(),
        &format!(
            r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "stripe"
kind = "stripe"
secret = "whsec_dashboard_endpoint_secret"

[source.reconcile]
token = "{STRIPE_KEY}"
endpoint = "we_1Dashboard"
interval = "1h"
api_base = "{}"
"#,
            server_section(&dir.path().join("data")),
            stripe.url()
        ),
    );
    let server = BinaryServer::start(&config, &[], None);
    let pass = server
        .admin_ok(TOKEN, "POST", "/api/reconcile/stripe", None)
        .await
        .json;
    assert_eq!(pass["fetched"], 1, "{pass}");
    stripe.set_endpoint_status("disabled");
    let pass = server
        .admin_ok(TOKEN, "POST", "/api/reconcile/stripe", None)
        .await
        .json;
    assert_eq!(pass["subscription_active"], false, "{pass}");
    let listed = server
        .admin_ok(TOKEN, "GET", "/api/events?source=stripe", None)
        .await
        .json;
    let id = listed["events"][0]["id"].as_str().unwrap().to_owned();

    let b = driver.browser().await;
    b.goto(&format!("{}/", server.admin)).await.unwrap();
    type_into(&b, "#token", &format!("{TOKEN}\u{E007}")).await;
    text_until(&b, "main h1", |t| t == "Overview").await;
    let row = "#reconcile tr[data-source=stripe]";
    text_until(&b, &format!("{row} td[data-k=outcome]"), |t| t == "ok").await;
    text_until(&b, &format!("{row} td[data-k=subscription]"), |t| {
        t == "DISABLED by the provider"
    })
    .await;
    text_until(&b, &format!("{row} td[data-k=found]"), |t| {
        t.starts_with("0 undelivered by the provider")
    })
    .await;
    text_until(&b, &format!("{row} td[data-k=last_success]"), |t| t != "—").await;
    assert_accessible(&b, "overview with gap fill").await;

    b.goto(&format!("{}/#/event/{id}", server.admin))
        .await
        .unwrap();
    text_until(&b, "main h1", |t| {
        t.starts_with(&format!("Event {}", missed.id))
    })
    .await;
    let facts = text_until(&b, "dl.facts", |t| t.contains("Origin")).await;
    assert!(
        facts.contains("Fetched from the provider’s API by a reconcile pass"),
        "{facts}"
    );
    assert!(
        facts.contains(&format!("{}/v1/events/{}", stripe.url(), missed.id)),
        "{facts}"
    );
    assert!(facts.contains("API version 2024-06-20"), "{facts}");
    assert_accessible(&b, "a fetched event").await;
}
