//! The audit page in Chromium: an operator ignores an event with a note and
//! replays another from the dashboard, a viewer's attempt is refused by
//! the API; the audit page shows who, when, what and the note, its filters
//! round-trip through the address, and it passes axe.

use fantoccini::Locator;
use serde_json::json;

use super::walk::assert_accessible;
use super::{OPERATOR_TOKEN, Scene, VIEWER_TOKEN, click, text_until, type_into};
use crate::support::client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_changes_show_on_the_audit_page_with_who_when_and_the_note() {
    let scene = Scene::six_dead_events().await;
    let (b, server, ids) = (&scene.b, &scene.server, &scene.ids);
    type_into(b, "#token", &format!("{OPERATOR_TOKEN}\u{E007}")).await;
    text_until(b, "#who", |t| t == "otto (operator)").await;

    b.goto(&format!("{}/#/event/{}", server.admin, ids[1]))
        .await
        .unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Dead:")).await;
    click(b, "#ignore").await;
    type_into(b, "#dialog-note", "refunded by hand, ticket 4411").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#what-happened", |t| t.starts_with("Ignored at")).await;
    b.goto(&format!("{}/#/event/{}", server.admin, ids[0]))
        .await
        .unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Dead:")).await;
    click(b, "#replay").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| t.to_lowercase().contains("replay")).await;

    // A viewer that calls the API is refused, and that is recorded too.
    let refused = client()
        .post(format!("{}/api/events/{}/replay", server.admin, ids[2]))
        .bearer_auth(VIEWER_TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    b.goto(&format!("{}/#/audit", server.admin)).await.unwrap();
    text_until(b, "main h1", |t| t == "Audit trail").await;
    let rows = text_until(b, "#audit tbody", |t| t.matches("\n").count() >= 2).await;
    let lines: Vec<&str> = rows.lines().collect();
    assert!(
        lines[0].contains("vera (viewer)")
            && lines[0].contains("replay")
            && lines[0].contains("403"),
        "{rows}"
    );
    assert!(
        lines[1].contains("otto (operator)")
            && lines[1].contains("replay")
            && lines[1].contains("200"),
        "{rows}"
    );
    assert!(
        lines[2].contains("otto (operator)")
            && lines[2].contains("ignore")
            && lines[2].contains("refunded by hand, ticket 4411"),
        "{rows}"
    );
    assert!(
        lines[2].contains(&ids[1]),
        "the target is the event: {rows}"
    );
    assert_accessible(b, "audit trail").await;

    // The filter goes into the address, and the address back into the form.
    type_into(b, "#person", "otto").await;
    click(b, "form.filters button[type=submit]").await;
    text_until(b, "#audit tbody", |t| !t.contains("vera")).await;
    let hash = b.execute("return location.hash;", vec![]).await.unwrap();
    let hash = hash.as_str().unwrap_or_default().to_owned();
    assert_eq!(hash, "#/audit?person=otto");
    b.goto(&format!("{}/{hash}&action=ignore", server.admin))
        .await
        .unwrap();
    let only = text_until(b, "#audit tbody", |t| t.lines().count() == 1).await;
    assert!(only.contains("refunded by hand"), "{only}");
    let person = b
        .find(Locator::Css("#person"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(person.as_deref(), Some("otto"));
    let action = b
        .find(Locator::Css("#action"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap();
    assert_eq!(action.as_deref(), Some("ignore"));
    scene.end().await;
}
