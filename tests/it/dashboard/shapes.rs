//! The Shapes page in Chromium: what the drift watch learned per source and
//! event type, and a departure (an event that dropped a field every earlier
//! one had) listed with its pointer and a link to that event; the source
//! filter and the empty state; axe on each.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{Value, json};

use super::walk::assert_accessible;
use super::{Driver, TOKEN, api_until, click, screenshot, text_until, type_into};
use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, server_section, standard_headers, write_config,
};

/// Posts `body` to `source` as event `id`; returns hookinbox's id for it.
async fn send(server: &BinaryServer, source: &str, id: &str, body: Value) -> String {
    let body = body.to_string().into_bytes();
    let mut request = client()
        .post(server.url(&format!("/in/{source}")))
        .body(body.clone());
    for (k, v) in standard_headers(id, &body) {
        request = request.header(k, v);
    }
    let answer: Value = request.send().await.unwrap().json().await.unwrap();
    answer["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shapes_page_lists_a_dropped_field_with_its_pointer_and_links_to_the_event() {
    let driver = Driver::start();
    let dir = tempfile::tempdir().unwrap();
    let app = Destination::start(Mode::Ok).await;
    let config = write_config(
        dir.path(),
        &format!(
            r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{app}"

[[source]]
name = "api"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{app}"

"#,
            server_section(&dir.path().join("data")),
            app = app.url()
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    // Twenty orders teach their shape; the next lacks the customer's email.
    for i in 0..20 {
        let body = json!({"type": "order.paid", "id": i, "amount": 100,
                          "customer": {"email": "a@example.com"}});
        send(&server, "shop", &format!("evt_{i}"), body).await;
    }
    let odd = json!({"type": "order.paid", "id": 20, "amount": 100, "customer": {}});
    let odd_id = send(&server, "shop", "evt_odd", odd).await;
    // Three refunds: that shape still warms up.
    for i in 0..3 {
        let body = json!({"type": "order.refunded", "id": i});
        send(&server, "shop", &format!("ref_{i}"), body).await;
    }
    api_until(&server, "/api/shapes?source=shop", |v| {
        v["drifts"].as_array().is_some_and(|d| d.len() == 1)
            && v["shapes"]
                .as_array()
                .is_some_and(|s| s.iter().map(|s| &s["events"]).eq([&json!(21), &json!(3)]))
    })
    .await;

    let b = driver.browser().await;
    b.goto(&format!("{}/", server.admin)).await.unwrap();
    type_into(&b, "#token", &format!("{TOKEN}\u{E007}")).await;
    text_until(&b, "main h1", |t| t == "Overview").await;
    // Reached from the navigation.
    click(&b, "#nav a[data-page=shapes]").await;
    text_until(&b, "main h1", |t| t == "Payload shapes").await;
    let current = b
        .find(Locator::Css("#nav a[aria-current=page]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(current, "Shapes");

    // The departure: the field, its change and type, and the event.
    let row = "#drifts tbody tr[data-pointer='/customer/email']";
    let text = text_until(&b, row, |t| t.contains("missing")).await;
    for part in ["shop", "order.paid", "string", &odd_id] {
        assert!(text.contains(part), "{part}: {text}");
    }
    let rows = b.find_all(Locator::Css("#drifts tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 1, "one departure");
    let pointer = text_until(&b, &format!("{row} td[data-k=pointer]"), |t| !t.is_empty()).await;
    assert_eq!(pointer, "/customer/email");
    let link = b
        .find(Locator::Css(&format!("{row} a")))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap();
    assert_eq!(link.as_deref(), Some(format!("#/event/{odd_id}").as_str()));

    // Each shape: its fields with their types, how many events, warm or not.
    let paid = "section[data-type='order.paid']";
    text_until(&b, &format!("{paid} [data-k=state]"), |t| {
        t.starts_with("Learned from 21 events") && t.contains("1 departure recorded")
    })
    .await;
    text_until(
        &b,
        &format!("{paid} tr[data-pointer='/customer/email']"),
        |t| t.contains("string") && t.contains("20 of 21"),
    )
    .await;
    text_until(&b, &format!("{paid} tr[data-pointer='/amount']"), |t| {
        t.contains("number") && t.contains("21 of 21")
    })
    .await;
    text_until(
        &b,
        "section[data-type='order.refunded'] [data-k=state]",
        |t| {
            t.starts_with(&format!(
                "Warming up: 3 of {}",
                hookinbox::drift::shape::WARM
            ))
        },
    )
    .await;
    screenshot(&b, "shapes").await;
    assert_accessible(&b, "shapes with a departure").await;

    // The link opens the event that showed it.
    click(&b, &format!("{row} a")).await;
    text_until(&b, "main h1", |t| t.starts_with("Event evt_odd")).await;

    // Filtered to a source that sent nothing: the empty state, in words.
    b.goto(&format!("{}/#/shapes", server.admin)).await.unwrap();
    text_until(&b, "#drifts tbody", |t| t.contains("/customer/email")).await;
    b.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#source"))
        .await
        .unwrap()
        .select_by_value("api")
        .await
        .unwrap();
    click(&b, "form.filters button[type=submit]").await;
    text_until(&b, "#shapes-empty", |t| {
        t.starts_with("Nothing learned yet from api")
    })
    .await;
    text_until(&b, "#drifts-empty", |t| {
        t == "No departure recorded from api."
    })
    .await;
    let hash = b.execute("return location.hash;", vec![]).await.unwrap();
    assert_eq!(hash.as_str(), Some("#/shapes?source=api"));
    assert_accessible(&b, "shapes, nothing learned").await;

    b.close().await.unwrap();
    assert!(server.terminate().success(), "{}", server.log_text());
}
