//! Several destinations per source through the real server: each event goes
//! to every destination whose filter takes it, each delivery on its own
//! queue with its own retries, pause, circuit and dead letters; lists,
//! stats, replay and ignore work per (event, destination).

use std::time::Duration;

use hookinbox::api::EventStatus;
use hookinbox::clock::Clock;
use serde_json::json;

use crate::destination::{Destination, Mode};
use crate::support::{STANDARD_SECRET, TestServer, eventually, server_section, standard_headers};

const TOKEN: &str = "test-admin-token-0123456789";

async fn send(server: &TestServer, id: &str, event_type: &str) -> String {
    let body = json!({"type": event_type, "n": id})
        .to_string()
        .into_bytes();
    let a = server
        .post("/in/shop", &standard_headers(id, &body), body)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    a.id().to_owned()
}

/// `destination → status` of each delivery of event `id`.
async fn deliveries(server: &TestServer, id: &str) -> Vec<(String, String)> {
    let event = server.api(TOKEN).event(id).await;
    event
        .summary
        .deliveries
        .into_iter()
        .map(|d| (d.destination, d.status.as_str().to_owned()))
        .collect()
}

async fn wait_for(server: &TestServer, id: &str, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(d, s)| ((*d).to_owned(), (*s).to_owned()))
        .collect();
    eventually(
        &format!("{id}'s deliveries are {want:?}"),
        Duration::from_secs(15),
        Duration::from_millis(20),
        async || {
            let got = deliveries(server, id).await;
            if got == want {
                Ok(())
            } else {
                Err(format!("{id}: {got:?}"))
            }
        },
    )
    .await
}

fn ids(dest: &Destination) -> Vec<String> {
    dest.received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect()
}

async fn listed(server: &TestServer, query: &str) -> Vec<String> {
    let page = server.api(TOKEN).events(query).await;
    page.events.into_iter().map(|e| e.id).collect()
}

/// One source, three destinations: the app takes everything; billing takes
/// `invoice.*`, answers 500 and gives up after one attempt; analytics is
/// paused. `invoice` (`invoice.paid`) and `customer` (`customer.created`)
/// have been sent and have settled on every queue.
struct Fanout {
    server: TestServer,
    app: Destination,
    billing: Destination,
    analytics: Destination,
    invoice: String,
    customer: String,
    _dir: tempfile::TempDir,
}

impl Fanout {
    async fn start() -> Fanout {
        let dir = tempfile::tempdir().unwrap();
        let app = Destination::start(Mode::Ok).await;
        let billing = Destination::start(Mode::Status(500, "down")).await;
        let analytics = Destination::start(Mode::Ok).await;
        let text = format!(
            r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
[[source.destination]]
url = "{}"
[[source.destination]]
name = "billing"
url = "{}"
filter_types = ["invoice.*"]
max_attempts = 1
[[source.destination]]
name = "analytics"
url = "{}"
paused = true
"#,
            server_section(dir.path()),
            app.url(),
            billing.url(),
            analytics.url(),
        );
        let server = TestServer::start(&text, Clock::system()).await;
        let invoice = send(&server, "e1", "invoice.paid").await;
        let customer = send(&server, "e2", "customer.created").await;

        wait_for(
            &server,
            &invoice,
            &[
                ("shop", "delivered"),
                ("shop.billing", "dead"),
                ("shop.analytics", "pending"),
            ],
        )
        .await;
        wait_for(
            &server,
            &customer,
            &[("shop", "delivered"), ("shop.analytics", "pending")],
        )
        .await;
        Fanout {
            server,
            app,
            billing,
            analytics,
            invoice,
            customer,
            _dir: dir,
        }
    }

    /// Resumes analytics and waits until its backlog is delivered.
    async fn resume_analytics(&self) {
        let (server, invoice, customer) = (&self.server, &self.invoice, &self.customer);
        server.api(TOKEN).resume("shop.analytics").await;
        wait_for(
            server,
            customer,
            &[("shop", "delivered"), ("shop.analytics", "delivered")],
        )
        .await;
        wait_for(
            server,
            invoice,
            &[
                ("shop", "delivered"),
                ("shop.billing", "dead"),
                ("shop.analytics", "delivered"),
            ],
        )
        .await;
    }

    /// With billing fixed, replays the invoice to billing alone and waits
    /// until it is delivered there (a replay naming no such destination is
    /// 404 first).
    async fn replay_invoice_to_billing(&self) {
        let (server, invoice) = (&self.server, &self.invoice);
        self.billing.set(Mode::Ok);
        let unknown = server
            .admin(
                "POST",
                &format!("/api/events/{invoice}/replay?destination=shop.nope"),
                Some(TOKEN),
                None,
            )
            .await;
        assert_eq!(unknown.status, 404, "{:?}", unknown.json);
        server
            .api(TOKEN)
            .replay(invoice, Some("shop.billing"))
            .await;
        wait_for(
            server,
            invoice,
            &[
                ("shop", "delivered"),
                ("shop.billing", "delivered"),
                ("shop.analytics", "delivered"),
            ],
        )
        .await;
    }
}

#[tokio::test]
async fn each_destination_gets_only_what_its_filter_takes_on_its_own_queue() {
    let f = Fanout::start().await;
    let (server, invoice, customer) = (&f.server, &f.invoice, &f.customer);
    assert_eq!(ids(&f.app), [invoice.clone(), customer.clone()]);
    assert_eq!(
        ids(&f.billing),
        std::slice::from_ref(invoice),
        "its filter took e1 only"
    );
    assert!(ids(&f.analytics).is_empty(), "paused");
    // The event as a whole is pending while one destination still has it.
    let shown = server.api(TOKEN).event(invoice).await;
    assert_eq!(shown.summary.status, EventStatus::Pending);
    let destinations: Vec<&str> = shown
        .attempt_history
        .iter()
        .map(|a| a.destination.as_str())
        .collect();
    assert_eq!(destinations, ["shop", "shop.billing"]);
    f.server.stop().await;
}

#[tokio::test]
async fn lists_and_stats_count_each_delivery_under_its_destination() {
    let f = Fanout::start().await;
    let (server, invoice, customer) = (&f.server, &f.invoice, &f.customer);
    assert_eq!(
        listed(server, "destination=shop.billing&status=dead").await,
        std::slice::from_ref(invoice)
    );
    assert_eq!(
        listed(server, "destination=shop.analytics&status=pending").await,
        [customer.clone(), invoice.clone()]
    );
    assert_eq!(
        listed(server, "source=shop").await,
        [customer.clone(), invoice.clone()],
        "one row per event"
    );
    let stats = server.api(TOKEN).stats().await;
    let shop = &stats.sources["shop"];
    assert_eq!(shop.destinations["shop.billing"].stored.dead, 1);
    assert_eq!(shop.destinations["shop.analytics"].stored.pending, 2);
    assert_eq!(shop.destinations["shop"].stored.delivered, 2);
    assert_eq!(shop.stored.delivered, 2);
    f.server.stop().await;
}

#[tokio::test]
async fn resuming_a_destination_sends_its_backlog_there_and_nowhere_else() {
    let f = Fanout::start().await;
    f.resume_analytics().await;
    assert_eq!(ids(&f.analytics), [f.invoice.clone(), f.customer.clone()]);
    assert_eq!(ids(&f.app).len(), 2, "the app got nothing again");
    assert_eq!(ids(&f.billing).len(), 1, "billing got nothing again");
    f.server.stop().await;
}

#[tokio::test]
async fn a_replay_to_one_destination_resends_it_there_only() {
    let f = Fanout::start().await;
    let (server, invoice) = (&f.server, &f.invoice);
    f.resume_analytics().await;
    f.replay_invoice_to_billing().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ids(&f.billing), [invoice.clone(), invoice.clone()]);
    assert_eq!(ids(&f.app).len(), 2, "the app got nothing again");
    assert_eq!(ids(&f.analytics).len(), 2, "analytics got nothing again");
    let shown = server.api(TOKEN).event(invoice).await;
    assert_eq!(shown.summary.status, EventStatus::Delivered);
    let billing = shown
        .summary
        .deliveries
        .iter()
        .find(|d| d.destination == "shop.billing")
        .expect("a delivery to shop.billing");
    assert_eq!(billing.replays, 1);
    f.server.stop().await;
}

#[tokio::test]
async fn each_destination_signs_with_its_own_key_under_the_same_webhook_id() {
    let f = Fanout::start().await;
    f.resume_analytics().await;
    f.replay_invoice_to_billing().await;
    let a = &f.app.received()[0];
    let b = &f.billing.received()[1];
    assert_eq!(a.header("webhook-id"), b.header("webhook-id"));
    assert_ne!(a.header("webhook-signature"), b.header("webhook-signature"));
    f.server.stop().await;
}

#[tokio::test]
async fn metrics_count_deliveries_and_dead_letters_per_destination() {
    let f = Fanout::start().await;
    f.resume_analytics().await;
    f.replay_invoice_to_billing().await;
    let metrics = f
        .server
        .metrics()
        .encode(hookinbox::metrics::Exposition::Prometheus);
    for line in [
        "hookinbox_delivered_total{source=\"shop\",destination=\"shop.analytics\"} 2\n",
        "hookinbox_delivered_total{source=\"shop\",destination=\"shop.billing\"} 1\n",
        "hookinbox_dead_lettered_total{source=\"shop\",destination=\"shop.billing\"} 1\n",
        "hookinbox_delivered_total{source=\"shop\",destination=\"shop\"} 2\n",
    ] {
        assert!(metrics.contains(line), "no {line:?} in\n{metrics}");
    }
    f.server.stop().await;
}

#[tokio::test]
async fn an_event_no_destination_takes_is_filtered_and_replays_to_the_one_named() {
    let dir = tempfile::tempdir().unwrap();
    let a = Destination::start(Mode::Ok).await;
    let b = Destination::start(Mode::Ok).await;
    let text = format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
[[source.destination]]
name = "a"
url = "{}"
filter_types = ["a.*"]
[[source.destination]]
name = "b"
url = "{}"
filter_types = ["b.*"]
"#,
        server_section(dir.path()),
        a.url(),
        b.url(),
    );
    let server = TestServer::start(&text, Clock::system()).await;
    let filtered = send(&server, "e1", "c.created").await;
    let pending_to_a = send(&server, "e2", "a.created").await;
    wait_for(&server, &pending_to_a, &[("shop.a", "delivered")]).await;
    assert_eq!(
        deliveries(&server, &filtered).await,
        [("shop".to_owned(), "filtered".to_owned())]
    );
    assert_eq!(
        server.api(TOKEN).event(&filtered).await.summary.status,
        EventStatus::Filtered
    );

    // Two destinations could take it: the operator names one.
    let ambiguous = server
        .admin(
            "POST",
            &format!("/api/events/{filtered}/replay"),
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(ambiguous.status, 409, "{:?}", ambiguous.json);
    assert!(
        ambiguous.json["reason"]
            .as_str()
            .unwrap()
            .contains("shop.a, shop.b"),
        "{:?}",
        ambiguous.json
    );
    server.api(TOKEN).replay(&filtered, Some("shop.b")).await;
    wait_for(&server, &filtered, &[("shop.b", "delivered")]).await;
    assert_eq!(ids(&b), std::slice::from_ref(&filtered));
    assert_eq!(ids(&a), std::slice::from_ref(&pending_to_a));

    // Ignore at one destination: refused when that one is done.
    let done = server
        .admin(
            "POST",
            &format!("/api/events/{pending_to_a}/ignore?destination=shop.a"),
            Some(TOKEN),
            Some(json!({"note": "x"})),
        )
        .await;
    assert_eq!(done.status, 409, "{:?}", done.json);
    let wrong = server
        .admin(
            "POST",
            &format!("/api/events/{pending_to_a}/ignore?destination=shop.b"),
            Some(TOKEN),
            Some(json!({"note": "x"})),
        )
        .await;
    assert_eq!(wrong.status, 409, "not routed there: {:?}", wrong.json);
    server.stop().await;
}
