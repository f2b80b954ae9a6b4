//! A viewer in Chromium: the header says who is signed in, no page builds a
//! button for a change the role may not make, the API refuses the change
//! with 403 all the same, and each page still passes axe.

use fantoccini::Locator;
use serde_json::json;

use super::walk::assert_accessible;
use super::{EXPIRED_TOKEN, Scene, VIEWER_TOKEN, text_until, type_into};
use crate::support::client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_who_is_signed_in_and_no_action_buttons_and_the_api_refuses_it() {
    let scene = Scene::six_dead_events().await;
    let b = &scene.b;
    // The source redacts its customers from viewers (a reload takes it).
    let path = scene.config_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let redacting = text.replace(
        "name = \"shop\"\n",
        "name = \"shop\"\nredact = [\"/data/object/customer\"]\n",
    );
    assert_ne!(text, redacting);
    std::fs::write(&path, redacting).unwrap();
    scene.admin_post("/api/reload", json!({})).await;
    type_into(b, "#token", &format!("{VIEWER_TOKEN}\u{E007}")).await;
    text_until(b, "main h1", |t| t == "Overview").await;
    text_until(b, "#who", |t| t == "vera (viewer)").await;
    // The destinations' table is there, without a pause button.
    text_until(b, "tr[data-destination='shop'] th", |t| t == "shop").await;
    let buttons =
        |css: &'static str| async move { b.find_all(Locator::Css(css)).await.unwrap().len() };
    assert_eq!(buttons("button[data-focus^='pause:']").await, 0);
    assert_accessible(b, "overview as a viewer").await;

    b.goto(&format!("{}/#/event/{}", scene.server.admin, scene.ids[0]))
        .await
        .unwrap();
    text_until(b, "main h1", |t| t.starts_with("Event evt_alpha")).await;
    for css in ["#replay", "#ignore", "#erase"] {
        assert_eq!(buttons(css).await, 0, "{css} on the event page");
    }
    // What the viewer may do is still there.
    assert_eq!(buttons("#copy").await, 1);
    // The customer is masked on the page, and says why; nowhere in it is
    // the value.
    text_until(b, "#payload", |t| {
        t.contains("\"customer\": \"[redacted]\"")
    })
    .await;
    text_until(b, "#redacted-note", |t| {
        t.contains("your role may not read")
    })
    .await;
    let page = b.source().await.unwrap();
    assert!(
        !page.contains("cus_alpha"),
        "the viewer's event page holds the value"
    );
    assert_accessible(b, "event as a viewer").await;

    b.goto(&format!("{}/#/dlq", scene.server.admin))
        .await
        .unwrap();
    text_until(b, "main h1", |t| t == "Dead letters").await;
    text_until(b, "#dlq", |t| t.contains("evt_alpha")).await;
    for css in [
        "#replay-selected",
        "#ignore-selected",
        "#replay-matching",
        "#ignore-matching",
    ] {
        assert_eq!(buttons(css).await, 0, "{css} on the DLQ page");
    }
    assert_accessible(b, "dead letters as a viewer").await;

    // A viewer that calls the API anyway is refused, and nothing changes.
    let path = format!("/api/events/{}/replay", scene.ids[0]);
    let refused = client()
        .post(format!("{}{path}", scene.server.admin))
        .bearer_auth(VIEWER_TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["role_needed"], "operator");
    let event = super::admin_get(&scene.server, &format!("/api/events/{}", scene.ids[0])).await;
    assert_eq!(event["status"], "dead");
    scene.end().await;
}

/// An expired token is refused at sign-in, saying whose it is and since
/// when, and the page stays on the sign-in form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refused_at_sign_in_saying_since_when() {
    let scene = Scene::six_dead_events().await;
    let b = &scene.b;
    type_into(b, "#token", &format!("{EXPIRED_TOKEN}\u{E007}")).await;
    let said = text_until(b, "#signin-error", |t| t.contains("expired")).await;
    assert!(
        said.contains("old") && said.contains("2020-01-01T00:00:00Z"),
        "{said}"
    );
    assert!(b.find(Locator::Css("#token")).await.is_ok());
    assert_accessible(b, "sign-in with an expired token").await;
    scene.end().await;
}
