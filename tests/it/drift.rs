//! Payload drift against the real server: a source's events teach their
//! shape, and a later event that lacks a field every earlier one had, or
//! carries a number as text, is stored and answered as usual and recorded
//! (`GET /api/shapes`, `payload_drift_total`) once. What was learned
//! outlives a restart.

use std::time::Duration;

use hookinbox::clock::Clock;
use hookinbox::words::DriftChange;

use crate::support::{STANDARD_SECRET, TestServer, eventually, server_section, standard_headers};

const TOKEN: &str = "test-admin-token-0123456789";

fn config(dir: &std::path::Path) -> String {
    format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
event_type = ["json:/type"]
"#,
        server_section(dir)
    )
}

async fn send(server: &TestServer, id: &str, body: serde_json::Value) {
    let body = body.to_string().into_bytes();
    let a = server
        .post("/in/shop", &standard_headers(id, &body), body)
        .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
}

/// The shapes once `(shop, order.paid)` has learned `events` events.
async fn learned(server: &TestServer, events: u64) -> hookinbox::api::Shapes {
    let api = server.api(TOKEN);
    eventually(
        &format!("the shape has learned {events} events"),
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || {
            let shapes: hookinbox::api::Shapes = api.get("/api/shapes?source=shop").await;
            match shapes.shapes.iter().find(|s| s.event_type == "order.paid") {
                Some(s) if s.events == events => Ok(shapes),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await
}

fn drift_count(scrape: &str, change: DriftChange) -> f64 {
    let series = format!(
        "hookinbox_payload_drift_total{{source=\"shop\",change=\"{}\"}} ",
        change.as_str()
    );
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in the scrape"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_missing_field_and_a_retyped_one_are_recorded_once_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    for i in 0..20 {
        let body = serde_json::json!({
            "type": "order.paid",
            "id": i,
            "amount": 100,
            "customer": {"email": "a@example.com"},
        });
        send(&server, &format!("evt_{i}"), body).await;
    }
    learned(&server, 20).await;
    let odd = serde_json::json!({"type": "order.paid", "id": 20, "amount": "100", "customer": {}});
    send(&server, "evt_odd", odd.clone()).await;
    let shapes = learned(&server, 21).await;

    let found: Vec<(String, DriftChange, String, String)> = shapes
        .drifts
        .iter()
        .map(|d| (d.pointer.clone(), d.change, d.was.clone(), d.now.clone()))
        .collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.contains(&(
        "/customer/email".into(),
        DriftChange::Missing,
        "string".into(),
        String::new()
    )));
    assert!(found.contains(&(
        "/amount".into(),
        DriftChange::TypeChanged,
        "number".into(),
        "string".into()
    )));
    let odd_id = shapes.drifts[0].event.clone();
    let stored = server.api(TOKEN).event(&odd_id).await;
    assert_eq!(
        stored.summary.event_id, "evt_odd",
        "the drifting event is stored as any other"
    );

    // The same departure again is not news.
    send(&server, "evt_odd_2", odd).await;
    let shapes = learned(&server, 22).await;
    assert_eq!(shapes.drifts.len(), 2);
    let scrape = server.admin("GET", "/metrics", Some(TOKEN), None).await;
    let scrape = scrape.json.as_str().unwrap().to_owned();
    assert_eq!(drift_count(&scrape, DriftChange::Missing), 1.0);
    assert_eq!(drift_count(&scrape, DriftChange::TypeChanged), 1.0);
    assert_eq!(drift_count(&scrape, DriftChange::Added), 0.0);
    server.stop().await;

    // A restart keeps what was learned, and the departures.
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    let shapes = learned(&server, 22).await;
    assert_eq!(shapes.drifts.len(), 2);
    // Another source's query sees none of it.
    let other: hookinbox::api::Shapes = server.api(TOKEN).get("/api/shapes?source=github").await;
    assert!(other.shapes.is_empty() && other.drifts.is_empty());
    server.stop().await;
}
