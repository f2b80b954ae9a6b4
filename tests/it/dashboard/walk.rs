//! Regressions a tester found walking the dashboard with 200,000 events
//! stored, one test each, on one kind of scene ([`Walk`]): an event with a
//! long id and type, routed to two destinations, and a browser signed in.
//! Here too: axe-core on every page.

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use super::{Driver, TOKEN, admin_get, api_until, click, screenshot, text_until, type_into};
use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, server_section, standard_headers, write_config,
};

/// A provider id and an event type as long as real ones get: neither has a
/// space to wrap at.
const LONG_ID: &str = "evt_1NirD82eZvKYlo2CIvbZtJqC_from_the_2026_backfill_0001";
const LONG_TYPE: &str = "checkout.session.async_payment_succeeded.from_the_2026_backfill";

/// The `[[keys.client]]` app `shop`'s token.
const KEYS_TOKEN: &str = "walk-shop-keys-token-0123";

/// The payload as the provider sent it: an integer past 2^53, a number
/// written with an exponent, escapes, empty containers.
fn exact_payload() -> String {
    format!(
        r#"{{"type":"{LONG_TYPE}","id":820982911946154508,"amount":-1.50e+3,"memo":"caf\u00e9 \"q\" \\ done","nested":{{"empty":{{}},"list":[],"xs":[1,2.0]}},"data":{{"object":{{"customer":"cus_big"}}}}}}"#
    )
}

/// The same, indented two spaces a level, every number and string as sent.
const EXACT_PRETTY: &str = r#"{
  "type": "checkout.session.async_payment_succeeded.from_the_2026_backfill",
  "id": 820982911946154508,
  "amount": -1.50e+3,
  "memo": "caf\u00e9 \"q\" \\ done",
  "nested": {
    "empty": {},
    "list": [],
    "xs": [
      1,
      2.0
    ]
  },
  "data": {
    "object": {
      "customer": "cus_big"
    }
  }
}"#;

/// A server whose source `shop` has two destinations, the app (answering
/// 503, so its delivery stays pending) and `billing` (422: dead at once),
/// holding one event with a long id and type and [`exact_payload`], and a
/// browser signed in on the overview.
struct Walk {
    b: Client,
    server: BinaryServer,
    id: String,
    _app: Destination,
    _billing: Destination,
    _driver: Driver,
    _dir: tempfile::TempDir,
}

impl Walk {
    async fn start() -> Walk {
        let driver = Driver::start();
        let dir = tempfile::tempdir().unwrap();
        let app = Destination::start(Mode::Status(503, "down for maintenance")).await;
        let billing = Destination::start(Mode::Status(422, "no such customer")).await;
        let config = write_config(
            dir.path(),
            &format!(
                r#"{server}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
[[source.destination]]
url = "{app}"
[[source.destination]]
name = "billing"
url = "{billing}"

[[keys.client]]
name = "shop"
token = "{KEYS_TOKEN}"

"#,
                server = server_section(&dir.path().join("data")),
                app = app.url(),
                billing = billing.url()
            ),
        );
        let server = BinaryServer::start(&config, &[], None);
        let body = exact_payload().into_bytes();
        let mut request = client().post(server.url("/in/shop")).body(body.clone());
        for (k, v) in standard_headers(LONG_ID, &body) {
            request = request.header(k, v);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let answer: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "ingest answered {status} {text:?} ({e}); {}",
                server.log_text()
            )
        });
        let id = answer["id"].as_str().unwrap().to_owned();
        api_until(&server, "/api/stats", |s| {
            s["sources"]["shop"]["destinations"]["shop.billing"]["stored"]["dead"] == 1
        })
        .await;
        let b = driver.browser().await;
        b.goto(&format!("{}/", server.admin)).await.unwrap();
        type_into(&b, "#token", &format!("{TOKEN}\u{E007}")).await;
        text_until(&b, "main h1", |t| t == "Overview").await;
        Walk {
            b,
            server,
            id,
            _app: app,
            _billing: billing,
            _driver: driver,
            _dir: dir,
        }
    }

    async fn goto(&self, hash: &str) {
        self.b
            .goto(&format!("{}/{hash}", self.server.admin))
            .await
            .unwrap();
    }

    async fn finish(self) {
        let Walk { b, mut server, .. } = self;
        b.close().await.unwrap();
        assert!(server.terminate().success(), "{}", server.log_text());
    }
}

/// Evaluates `script` (a function body) in the page and returns its value.
async fn js(b: &Client, script: &str) -> Value {
    b.execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// axe-core as pinned in `tests/dashboard/package.json`.
fn axe_source() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/dashboard/node_modules/axe-core/axe.min.js");
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}. The dashboard's accessibility check needs axe-core: \
             run `npm ci --prefix tests/dashboard` first",
            path.display()
        )
    })
}

/// Runs axe-core on the page as it stands and fails on any violation of
/// impact serious or critical, printing every violation found; and on
/// stray `null`, `false` or `undefined` text.
pub(super) async fn assert_accessible(b: &Client, page: &str) {
    super::assert_no_stray_text(b).await;
    if js(b, "return typeof window.axe === 'object';").await != Value::Bool(true) {
        // WebDriver's scripts are not the page's: the policy does not stop them.
        js(b, &format!("{}\nreturn true;", axe_source())).await;
    }
    let found = b
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] })
               .then((r) => done(r.violations.map((v) => ({
                 id: v.id, impact: v.impact, help: v.help,
                 nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary}`),
               }))))
               .catch((e) => done([{ id: 'axe-failed', impact: 'critical', help: String(e), nodes: [] }]));",
            vec![],
        )
        .await
        .unwrap();
    let violations = found.as_array().cloned().unwrap_or_default();
    let grave = violations
        .iter()
        .filter(|v| v["impact"] == "serious" || v["impact"] == "critical")
        .count();
    let listing = serde_json::to_string_pretty(&violations).unwrap();
    eprintln!(
        "axe on {page}: {} violations, {grave} serious or critical",
        violations.len()
    );
    if !violations.is_empty() {
        eprintln!("{listing}");
    }
    assert_eq!(
        grave, 0,
        "axe on {page}: serious or critical violations:\n{listing}"
    );
}

/// The Events page had no destination filter, and a row showed only the
/// event's overall status: "pending" for an event dead at billing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_page_filters_by_destination_and_shows_each_destinations_status() {
    let w = Walk::start().await;
    let b = &w.b;
    let id = &w.id;
    w.goto("#/events").await;
    let row = format!("#events tr[data-id='{id}']");
    text_until(
        b,
        &format!("{row} [data-destination='shop.billing']"),
        |t| t.contains("dead"),
    )
    .await;
    text_until(b, &format!("{row} [data-destination='shop']"), |t| {
        t.contains("pending")
    })
    .await;
    screenshot(b, "events-per-destination").await;
    // The filter, chosen in the form.
    b.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#destination"))
        .await
        .unwrap()
        .select_by_value("shop.billing")
        .await
        .unwrap();
    b.find(Locator::Css("#status"))
        .await
        .unwrap()
        .select_by_value("dead")
        .await
        .unwrap();
    click(b, "form.filters button[type=submit]").await;
    text_until(b, "#events tbody", |t| t.contains(LONG_ID)).await;
    let hash = js(b, "return location.hash;").await;
    assert!(
        hash.as_str().unwrap().contains("destination=shop.billing"),
        "{hash}"
    );
    // The app's delivery is not dead: the same filter there finds nothing.
    w.goto("#/events?destination=shop&status=dead").await;
    text_until(b, "#events tbody", |t| t == "No events match.").await;
    let chosen = js(b, "return document.getElementById('destination').value;").await;
    assert_eq!(chosen, "shop");
    w.finish().await;
}

/// `JSON.parse` turned 820982911946154508 into 820982911946154500 and
/// `\u00e9` into é: the pretty payload must be the text as received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pretty_payload_keeps_every_number_and_escape_as_received() {
    let w = Walk::start().await;
    w.goto(&format!("#/event/{}", w.id)).await;
    text_until(&w.b, "#payload", |t| t.contains("cus_big")).await;
    let shown = js(
        &w.b,
        "return document.getElementById('payload').textContent;",
    )
    .await;
    assert_eq!(shown.as_str().unwrap(), EXACT_PRETTY);
    w.finish().await;
}

/// The 10-second refresh rebuilt the overview and dropped keyboard focus
/// from the Pause button to `body`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_refresh_keeps_keyboard_focus() {
    let w = Walk::start().await;
    let b = &w.b;
    let pause = "#destinations tr[data-destination=shop] button";
    click(b, pause).await;
    // The dialog asks; cancel by keyboard, and focus is back on the button.
    text_until(b, "#dialog-title", |t| t.starts_with("Pause")).await;
    js(
        b,
        "document.querySelector('dialog button.quiet').click(); return true;",
    )
    .await;
    let focused = "return document.activeElement.getAttribute('aria-label');";
    let label = js(b, focused).await;
    assert_eq!(label, "Pause deliveries to shop");
    let updated = "#view > div > p:last-child";
    let before = text_until(b, updated, |t| t.starts_with("Updated")).await;
    crate::support::eventually(
        "the overview refreshes",
        Duration::from_secs(25),
        Duration::from_millis(250),
        async || match text_until(b, updated, |t| t.starts_with("Updated")).await {
            now if now == before => Err(now),
            _ => Ok(()),
        },
    )
    .await;
    assert_eq!(js(b, focused).await, "Pause deliveries to shop");
    w.finish().await;
}

/// "Continue searching" found a match under "No match yet in what was
/// scanned.", and the last step said "Searched every stored event (40
/// payloads in this step)". A search's budget (200,000 payloads or 500 ms)
/// cannot be run out on purpose here, so the page is handed two steps as
/// the API would answer them: nothing in the first, a match in the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_messages_tell_the_truth_at_each_step() {
    let w = Walk::start().await;
    let b = &w.b;
    let real = admin_get(&w.server, "/api/events?q=cus_big").await;
    let found = real["events"][0].clone();
    assert_eq!(found["event_id"], LONG_ID, "{real}");
    let steps = json!([
        { "events": [], "next_cursor": 1000,
          "search": { "examined": 133, "scanned_back_to": "2026-11-20T10:00:00.000Z" } },
        { "events": [found], "next_cursor": null,
          "search": { "examined": 40, "scanned_back_to": "2026-11-19T09:00:00.000Z" } },
    ]);
    w.goto("#/events").await;
    text_until(b, "main h1", |t| t == "Events").await;
    b.execute(
        "const steps = arguments[0];
         const real = window.fetch;
         window.fetch = (url, init) => String(url).startsWith('/api/events?') && String(url).includes('q=')
           ? Promise.resolve(new Response(JSON.stringify(steps.shift()),
               { status: 200, headers: { 'Content-Type': 'application/json' } }))
           : real(url, init);
         location.hash = '#/events?q=cus_big';
         return true;",
        vec![steps],
    )
    .await
    .unwrap();
    text_until(b, "#search-progress", |t| {
        t.starts_with("Scanned back to 2026-11-20") && t.contains("133 payloads read so far")
    })
    .await;
    text_until(b, "#events tbody", |t| {
        t == "No match yet in what was scanned."
    })
    .await;
    click(b, "#more").await;
    let rows = text_until(b, "#events tbody", |t| t.contains(LONG_ID)).await;
    assert!(!rows.contains("No match yet"), "{rows}");
    let progress = text_until(b, "#search-progress", |t| t.starts_with("Search complete")).await;
    assert!(
        progress.contains("173 payloads read in all (40 in this step)"),
        "{progress}"
    );
    assert!(
        b.find(Locator::Css("#more")).await.is_err(),
        "nothing left to search"
    );
    w.finish().await;
}

/// axe-core found a scrollable table that no keyboard can reach and an
/// empty table header; at 390 px the event page scrolled sideways (its
/// heading did not wrap), and at 1280 px the overview's sources table hid
/// its last column. Every page is checked here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_page_passes_axe_and_fits_phone_and_desktop_widths() {
    // Fail at once, not after starting everything, when axe is not installed.
    axe_source();
    let w = Walk::start().await;
    let b = &w.b;
    let id = &w.id;
    assert_accessible(b, "overview").await;
    // At 1280 px the sources table shows its last column without scrolling.
    b.set_window_size(1280, 1100).await.unwrap();
    text_until(b, "#sources", |t| t.contains(LONG_TYPE)).await;
    let fit = js(
        b,
        "const wrap = document.getElementById('sources').closest('.table-wrap');
         const last = document.querySelector('#sources thead th:last-child');
         return { text: last.textContent, scroll: wrap.scrollWidth, client: wrap.clientWidth,
                  right: last.getBoundingClientRect().right, edge: wrap.getBoundingClientRect().right };",
    )
    .await;
    assert_eq!(fit["text"], "Oldest pending", "{fit}");
    assert!(
        fit["scroll"].as_f64() <= fit["client"].as_f64()
            && fit["right"].as_f64() <= fit["edge"].as_f64(),
        "the sources table is cut off at 1280 px: {fit}"
    );

    w.goto("#/events").await;
    text_until(b, "#events tbody", |t| t.contains(LONG_ID)).await;
    assert_accessible(b, "events").await;
    w.goto("#/events?q=cus_big").await;
    text_until(b, "#search-progress", |t| !t.is_empty()).await;
    assert_accessible(b, "events search").await;
    w.goto(&format!("#/event/{id}")).await;
    text_until(b, "#payload", |t| t.contains("cus_big")).await;
    assert_accessible(b, "event").await;
    click(b, "#ignore").await;
    text_until(b, "#dialog-title", |t| t == "Ignore this event?").await;
    assert_accessible(b, "event, asking before an ignore").await;
    click(b, "dialog button.quiet").await;
    w.goto("#/dlq").await;
    text_until(b, "#dlq tbody", |t| t.contains(LONG_ID)).await;
    assert_accessible(b, "dead letters").await;
    // The Shapes page: one event of the long type, its shape still warming
    // up (the page counts to the drift watch's own threshold).
    w.goto("#/shapes").await;
    let warm = hookinbox::drift::shape::WARM;
    text_until(
        b,
        &format!("section[data-type='{LONG_TYPE}'] [data-k=state]"),
        |t| t.starts_with(&format!("Warming up: 1 of {warm} events learned")),
    )
    .await;
    text_until(b, "#drifts-empty", |t| {
        t.starts_with("No departure recorded")
    })
    .await;
    assert_accessible(b, "shapes").await;

    // The Keys page: a busy key and one whose lease ran out.
    for (key, lease) in [(LONG_ID, "10m"), ("order:lapsed", "1s")] {
        let r = client()
            .post(format!("{}/api/keys/{key}/claim", w.server.admin))
            .bearer_auth(KEYS_TOKEN)
            .json(&json!({ "lease": lease }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{key}");
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    w.goto("#/keys").await;
    text_until(b, "#keys-busy-0 tbody", |t| t.contains(LONG_ID)).await;
    text_until(b, "#keys-lapsed-0 tbody", |t| t.contains("order:lapsed")).await;
    assert_accessible(b, "keys").await;

    // At phone width the event page does not scroll sideways.
    b.set_window_size(390, 844).await.unwrap();
    w.goto(&format!("#/event/{id}")).await;
    text_until(b, "#payload", |t| t.contains("cus_big")).await;
    let page = js(
        b,
        "const s = document.scrollingElement;
         const wide = [...document.querySelectorAll('body *')]
           .filter((e) => e.getBoundingClientRect().right > s.clientWidth + 1)
           .slice(0, 5).map((e) => `${e.tagName}#${e.id}.${e.className}`);
         return { scroll: s.scrollWidth, client: s.clientWidth, wide };",
    )
    .await;
    assert!(
        page["scroll"].as_f64() <= page["client"].as_f64(),
        "the event page scrolls sideways at 390 px: {page}"
    );
    screenshot(b, "event-phone-long-id").await;
    assert_accessible(b, "event at 390 px").await;
    b.set_window_size(1280, 1100).await.unwrap();

    // Signed out: the sign-in page.
    click(b, "#sign-out").await;
    text_until(b, "main h1", |t| t == "Sign in to hookinbox").await;
    assert_accessible(b, "sign-in").await;
    w.finish().await;
}
