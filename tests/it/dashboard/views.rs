//! The views an on-call person reaches for, in Chromium: the event page
//! follows a replay's delivery by itself; the overview's chart range is in
//! the address (1 h, 6 h, 24 h, 7 d) and each destination's attempts,
//! error rate and p95 latency agree with `/api/activity`.

use std::time::Duration;

use super::walk::assert_accessible;
use super::{Scene, admin_get, click, text_until};
use crate::destination::Mode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_page_follows_a_replay_until_it_is_delivered() {
    let scene = Scene::six_dead_events().await;
    let (b, server) = (&scene.b, &scene.server);
    scene.sign_in().await;
    b.goto(&format!("{}/#/event/{}", server.admin, scene.ids[0]))
        .await
        .unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Dead:")).await;
    // The app answers after 3 s: the page shows it pending first.
    scene.dest.set(Mode::Slow(Duration::from_secs(3)));
    click(b, "#replay").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#live-note", |t| {
        t.starts_with("Following its deliveries")
    })
    .await;
    let pending = text_until(b, "#what-happened", |t| !t.starts_with("Dead:")).await;
    assert!(!pending.starts_with("Delivered"), "{pending}");
    // No reload: the page updates by itself.
    text_until(b, "#what-happened", |t| t.starts_with("Delivered at")).await;
    text_until(b, "section[data-round='1']", |t| t.contains("200")).await;
    let notes = b
        .find_all(fantoccini::Locator::Css("#live-note"))
        .await
        .unwrap();
    assert!(notes.is_empty(), "a delivered event is not followed");
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_range_is_in_the_address_and_each_destination_shows_its_error_rate_and_p95() {
    let scene = Scene::six_dead_events().await;
    let (b, server) = (&scene.b, &scene.server);
    scene.sign_in().await;
    scene.alpha_and_charlie_delivered_bravo_ignored().await;
    let activity = admin_get(server, "/api/activity?hours=1").await;
    let shop: Vec<&serde_json::Value> = activity["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["destination"] == "shop")
        .collect();
    let attempts: u64 = shop.iter().map(|d| d["attempts"].as_u64().unwrap()).sum();
    let failed: u64 = shop.iter().map(|d| d["failed"].as_u64().unwrap()).sum();
    assert_eq!((attempts, failed), (8, 6), "{activity}");

    b.goto(&format!("{}/#/", server.admin)).await.unwrap();
    let row = "#destination-health tr[data-destination=shop]";
    text_until(b, &format!("{row} td[data-k=attempts]"), |t| t == "8").await;
    text_until(b, &format!("{row} td[data-k=failed]"), |t| t == "6").await;
    text_until(b, &format!("{row} td[data-k=error-rate]"), |t| t == "75 %").await;
    text_until(b, &format!("{row} td[data-k=p95]"), |t| t.starts_with("≤ ")).await;
    text_until(b, "main", |t| t.contains("The last 6 hours, per minute")).await;
    assert_accessible(b, "overview with each destination's health").await;

    click(b, "nav.ranges a[data-hours='24']").await;
    text_until(b, "main", |t| {
        t.contains("The last 24 hours, per 2 minutes")
    })
    .await;
    let hash = b.execute("return location.hash;", vec![]).await.unwrap();
    assert_eq!(hash.as_str(), Some("#/?hours=24"));
    b.goto(&format!("{}/#/?hours=168", server.admin))
        .await
        .unwrap();
    text_until(b, "main", |t| t.contains("The last 7 days, per 14 minutes")).await;
    let current = b
        .find(fantoccini::Locator::Css("nav.ranges a[aria-current=true]"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(current, "7 d");
    text_until(b, &format!("{row} td[data-k=attempts]"), |t| t == "8").await;
    scene.end().await;
}
