//! An event's attempts in Chromium: grouped by round (the first delivery,
//! then each replay), each with what was sent and answered behind a
//! disclosure, the signature cut to its first characters; axe passes with
//! it open.

use fantoccini::Locator;

use super::walk::assert_accessible;
use super::{Scene, click, text_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_page_groups_attempts_by_round_and_shows_what_was_sent() {
    let scene = Scene::six_dead_events().await;
    let (b, server) = (&scene.b, &scene.server);
    scene.sign_in().await;
    scene.alpha_and_charlie_delivered_bravo_ignored().await;
    b.goto(&format!("{}/#/event/{}", server.admin, scene.ids[0]))
        .await
        .unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Delivered at")).await;
    let first = text_until(b, "section[data-round='0']", |t| t.contains("422")).await;
    assert!(first.starts_with("First delivery"), "{first}");
    let replay = text_until(b, "section[data-round='1']", |t| t.contains("200")).await;
    assert!(replay.starts_with("Replay 1"), "{replay}");
    // A replay's first attempt is #1, the `hookinbox-attempt` the app saw
    // (it was #2, counted across rounds).
    let number = "#attempts-round-1 tbody tr:first-child td:first-child";
    assert_eq!(text_until(b, number, |_| true).await, "1");
    click(b, "section[data-round='0'] details summary").await;
    let shown = text_until(b, "section[data-round='0'] details", |t| {
        t.contains("webhook-signature")
    })
    .await;
    assert!(
        shown.contains("Request headers") && shown.contains("Answer headers"),
        "{shown}"
    );
    assert!(shown.contains("hookinbox-attempt"), "{shown}");
    let signature = b
        .find(Locator::XPath(
            "//section[@data-round='0']//dt[text()='webhook-signature']/following-sibling::dd[1]",
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        signature.ends_with('…') && signature.chars().count() == 9,
        "{signature}"
    );
    assert_accessible(b, "an event's attempts, opened").await;
    scene.end().await;
}
