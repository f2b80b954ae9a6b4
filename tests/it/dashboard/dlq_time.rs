//! The dead-letter page's time range, in Chromium: received from / before
//! round-trip through the address, narrow the list, and bound what "all
//! matching" counts and changes.

use std::time::{Duration, SystemTime};

use super::walk::assert_accessible;
use super::{Scene, click, text_until};

fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dlq_time_range_is_in_the_address_and_bounds_the_list_and_the_bulk_count() {
    let scene = Scene::six_dead_events().await;
    let (b, server) = (&scene.b, &scene.server);
    scene.sign_in().await;
    let hour = Duration::from_secs(3600);
    let now = SystemTime::now();

    // After every event: nothing listed, and nothing for "all matching".
    b.goto(&format!(
        "{}/#/dlq?from={}",
        server.admin,
        rfc3339(now + hour)
    ))
    .await
    .unwrap();
    text_until(b, "#dlq-empty", |t| t.contains("empty")).await;
    let from = b
        .find(fantoccini::Locator::Css("#from"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(!from.is_empty(), "the range is back in the form");
    click(b, "#replay-matching").await;
    text_until(b, "#flash", |t| {
        t == "Nothing matches this filter any more."
    })
    .await;

    // Around them: all six, and the form keeps the range in the address.
    b.goto(&format!(
        "{}/#/dlq?from={}&to={}",
        server.admin,
        rfc3339(now - hour),
        rfc3339(now + hour)
    ))
    .await
    .unwrap();
    let rows = text_until(b, "#dlq tbody", |t| t.matches("evt_").count() == 6).await;
    assert!(
        rows.contains("evt_alpha") && rows.contains("evt_golf"),
        "{rows}"
    );
    assert_accessible(b, "dead letters with a time range").await;
    click(b, "form.filters button[type=submit]").await;
    let hash = b.execute("return location.hash;", vec![]).await.unwrap();
    let hash = hash.as_str().unwrap_or_default().to_owned();
    assert!(hash.contains("from=") && hash.contains("to="), "{hash}");
    click(b, "#replay-matching").await;
    text_until(b, "#dialog-title", |t| t == "Replay 6 events?").await;
    let text = text_until(b, "dialog p", |t| t.contains("received from")).await;
    assert!(text.contains("received before"), "{text}");
    click(b, "dialog button[value=no]").await;
    scene.end().await;
}
