//! The dashboard in a real browser: headless Chromium driven over WebDriver
//! (Debian's `chromium` and `chromium-driver`), against the real binary and
//! a destination that fails and then recovers. Screenshots of each page go
//! to `target/dashboard/`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, server_section, standard_headers, write_config,
};

const TOKEN: &str = "dashboard-test-token-0123456789";

/// chromedriver on a free loopback port, killed on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Driver {
        let port = crate::support::free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (Debian: apt-get install chromium chromium-driver)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn browser(&self) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": "/usr/bin/chromium",
                // No name resolves but loopback: the network is unplugged.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,1100",
                         "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"]
            }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a Chromium session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (10 s at most) until the element at `css` has text that `ok` accepts; returns it.
async fn text_until(b: &Client, css: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    loop {
        if let Ok(el) = b.find(Locator::Css(css)).await
            && let Ok(text) = el.text().await
        {
            if ok(&text) {
                return text;
            }
            last = text;
        }
        assert!(
            Instant::now() < deadline,
            "{css}: text never matched; last {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn click(b: &Client, css: &str) {
    b.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

async fn type_into(b: &Client, css: &str, text: &str) {
    let el = b
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"));
    el.clear().await.unwrap();
    el.send_keys(text).await.unwrap();
}

async fn screenshot(b: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    let png = b.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

async fn admin_get(server: &BinaryServer, path: &str) -> Value {
    client()
        .get(format!("{}{path}", server.admin))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls `path` of the admin API until `ok` accepts its answer (10 s at most).
async fn api_until(server: &BinaryServer, path: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = admin_get(server, path).await;
        if ok(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{path} never matched: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The overview's cells for `source` equal what `/api/stats` says.
async fn overview_matches_stats(b: &Client, server: &BinaryServer) {
    let stats = admin_get(server, "/api/stats").await;
    let s = &stats["sources"]["shop"];
    let expect = [
        ("received", s["since_start"]["received"].clone()),
        ("duplicates", s["since_start"]["duplicates"].clone()),
        ("delivered", s["stored"]["delivered"].clone()),
        ("pending", s["stored"]["pending"].clone()),
        ("retrying", s["stored"]["retrying"].clone()),
        ("dead", s["stored"]["dead"].clone()),
        ("ignored", s["stored"]["ignored"].clone()),
        ("held", s["stored"]["held"].clone()),
    ];
    for (key, value) in expect {
        let css = format!("#sources tr[data-source=shop]:not(.sub) td[data-k={key}]");
        let want = value.to_string();
        text_until(b, &css, |t| t == want).await;
    }
    let paid = &s["since_start"]["by_type"]["invoice.paid"];
    let stored = &s["by_type"]["invoice.paid"];
    for (key, value) in [
        ("received", &paid["received"]),
        ("duplicates", &paid["duplicates"]),
        ("delivered", &stored["delivered"]),
        ("dead", &stored["dead"]),
        ("ignored", &stored["ignored"]),
    ] {
        let css = format!("#sources tr[data-type='invoice.paid'] td[data-k={key}]");
        let want = value.to_string();
        text_until(b, &css, |t| t == want).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_finds_replays_ignores_and_bulk_replays_dead_events_in_a_browser() {
    let driver = Driver::start();
    let dir = tempfile::tempdir().unwrap();
    // The app refuses every event (422: dead at once) until it is fixed.
    let dest = Destination::start(Mode::Status(422, "amount must be positive")).await;
    let config = write_config(
        dir.path(),
        &format!(
            "{}[admin]\ntoken = \"{TOKEN}\"\n\n\
             [[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n\
             destination = \"{}\"\n\n",
            server_section(&dir.path().join("data")),
            dest.url()
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);

    let mut ids = Vec::new();
    for (i, name) in ["alpha", "bravo", "charlie", "delta", "foxtrot", "golf"]
        .iter()
        .enumerate()
    {
        let body = format!(
            r#"{{"type":"invoice.paid","data":{{"object":{{"id":"in_{i}","customer":"cus_{name}"}}}}}}"#
        )
        .into_bytes();
        let mut request = client().post(server.url("/in/shop")).body(body.clone());
        for (k, v) in standard_headers(&format!("evt_{name}"), &body) {
            request = request.header(k, v);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
        ids.push(answer["id"].as_str().unwrap().to_owned());
    }
    api_until(&server, "/api/stats", |s| {
        s["sources"]["shop"]["stored"]["dead"] == 6
    })
    .await;

    let b = driver.browser().await;
    b.goto(&format!("{}/", server.admin)).await.unwrap();

    // A wrong token is refused in words; the right one opens the overview.
    type_into(&b, "#token", "not-the-token").await;
    click(&b, "form button[type=submit]").await;
    text_until(&b, "#signin-error", |t| {
        t.contains("did not accept that admin token")
    })
    .await;
    // By keyboard: the token, then Enter.
    type_into(&b, "#token", &format!("{TOKEN}\u{E007}")).await;
    text_until(&b, "main h1", |t| t == "Overview").await;
    overview_matches_stats(&b, &server).await;
    text_until(&b, "#destinations tr[data-destination=shop]", |t| {
        t.contains("last failure:")
    })
    .await;
    screenshot(&b, "overview").await;
    // Pause and resume the destination, each after saying yes.
    click(&b, "#destinations tr[data-destination=shop] button").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| t == "shop is paused.").await;
    text_until(&b, "#destinations tr[data-destination=shop]", |t| {
        t.contains("paused")
    })
    .await;
    api_until(&server, "/api/destinations", |d| {
        d["destinations"][0]["paused"] == true
    })
    .await;
    click(&b, "#destinations tr[data-destination=shop] button").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| t == "shop is delivering again.").await;

    // Find the first event by what its payload holds, and open it.
    b.goto(&format!("{}/#/events", server.admin)).await.unwrap();
    type_into(&b, "#q", "cus_alpha").await;
    click(&b, "form.filters button[type=submit]").await;
    text_until(&b, "#search-progress", |t| {
        t.starts_with("Search complete: 6 payloads read in all")
    })
    .await;
    let rows = text_until(&b, "#events tbody", |t| t.contains("evt_alpha")).await;
    assert!(!rows.contains("evt_bravo"), "{rows}");
    screenshot(&b, "events-search").await;
    // Pages newest first, two at a time here, with the cursor.
    b.goto(&format!("{}/#/events?limit=2", server.admin))
        .await
        .unwrap();
    let first = text_until(&b, "#events tbody", |t| t.contains("evt_golf")).await;
    assert!(
        first.contains("evt_foxtrot") && !first.contains("evt_delta"),
        "{first}"
    );
    click(&b, "#more").await;
    text_until(&b, "#events tbody", |t| {
        t.contains("evt_foxtrot") && t.contains("evt_charlie")
    })
    .await;
    // A search that stops early says how far back it looked, and goes on.
    b.goto(&format!("{}/#/events?q=invoice.paid&limit=2", server.admin))
        .await
        .unwrap();
    text_until(&b, "#search-progress", |t| {
        t.starts_with("Scanned back to 20")
    })
    .await;
    click(&b, "#more").await;
    text_until(&b, "#events tbody", |t| t.contains("evt_charlie")).await;
    b.goto(&format!("{}/#/events?q=cus_alpha", server.admin))
        .await
        .unwrap();
    text_until(&b, "#events tbody", |t| t.contains("evt_alpha")).await;
    click(&b, &format!("#events tr[data-id='{}'] a", ids[0])).await;
    text_until(&b, "#what-happened", |t| {
        t.starts_with("Dead: your app answered 422") && t.ends_with("after 1 attempt.")
    })
    .await;
    text_until(&b, "#attempts", |t| t.contains("amount must be positive")).await;
    text_until(&b, "#payload", |t| {
        t.contains("\"customer\": \"cus_alpha\"")
    })
    .await;
    screenshot(&b, "event-dead").await;

    // The app is fixed: replay it, after saying yes, and see it delivered.
    dest.set(Mode::Ok);
    click(&b, "#replay").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| t.starts_with("Replayed evt_alpha")).await;
    api_until(&server, &format!("/api/events/{}", ids[0]), |e| {
        e["status"] == "delivered"
    })
    .await;
    b.refresh().await.unwrap();
    text_until(&b, "#what-happened", |t| t.starts_with("Delivered at")).await;
    screenshot(&b, "event-delivered").await;

    // Ignore the second: a note is required, and then it shows.
    b.goto(&format!("{}/#/event/{}", server.admin, ids[1]))
        .await
        .unwrap();
    text_until(&b, "#what-happened", |t| t.starts_with("Dead:")).await;
    click(&b, "#ignore").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "dialog .error", |t| t.contains("A note is required")).await;
    type_into(&b, "#dialog-note", "refunded by hand, ticket 4411").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#what-happened", |t| {
        t.starts_with("Ignored at") && t.contains("refunded by hand, ticket 4411")
    })
    .await;
    text_until(&b, "dl.facts", |t| {
        t.contains("refunded by hand, ticket 4411")
    })
    .await;

    // Delete its payload: it warns, asks for a note, and says what it did.
    click(&b, "#erase").await;
    text_until(&b, "dialog", |t| t.contains("cannot be brought back")).await;
    type_into(&b, "#dialog-note", "customer asked for erasure").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| t == "Deleted the payload of evt_bravo.").await;
    text_until(&b, "dl.facts", |t| t.contains("customer asked for erasure")).await;

    // Someone else replayed charlie while this page was open: the refusal
    // comes back in words.
    b.goto(&format!("{}/#/event/{}", server.admin, ids[2]))
        .await
        .unwrap();
    text_until(&b, "#what-happened", |t| t.starts_with("Dead:")).await;
    dest.set(Mode::Slow(Duration::from_secs(3)));
    let r = client()
        .post(format!("{}/api/events/{}/replay", server.admin, ids[2]))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    click(&b, "#replay").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| {
        t.starts_with("That cannot be done right now:")
    })
    .await;
    api_until(&server, &format!("/api/events/{}", ids[2]), |e| {
        e["status"] == "delivered"
    })
    .await;
    dest.set(Mode::Ok);

    // The dead-letter queue holds the other three.
    b.goto(&format!("{}/#/dlq", server.admin)).await.unwrap();
    let rows = text_until(&b, "#dlq tbody", |t| {
        t.contains("evt_delta") && t.contains("evt_foxtrot") && t.contains("evt_golf")
    })
    .await;
    for gone in ["evt_alpha", "evt_bravo", "evt_charlie"] {
        assert!(!rows.contains(gone), "{rows}");
    }
    text_until(&b, &format!("#dlq tr[data-id='{}']", ids[3]), |t| {
        t.contains("cus_delta")
    })
    .await;
    screenshot(&b, "dlq").await;
    // One picked by hand and ignored with a note…
    click(
        &b,
        &format!("#dlq tr[data-id='{}'] input[type=checkbox]", ids[4]),
    )
    .await;
    click(&b, "#ignore-selected").await;
    text_until(&b, "#dialog-title", |t| t == "Ignore 1 selected event?").await;
    type_into(&b, "#dialog-note", "test order, not a real sale").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| t == "Ignored 1 of 1.").await;
    let rows = text_until(&b, "#dlq tbody", |t| !t.contains("evt_foxtrot")).await;
    assert!(
        rows.contains("evt_delta") && rows.contains("evt_golf"),
        "{rows}"
    );
    // …and the rest replayed by the filter, after a count.
    click(&b, "#replay-matching").await;
    text_until(&b, "#dialog-title", |t| t == "Replay 2 events?").await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| t == "Replayed 2 of 2.").await;
    text_until(&b, "#dlq-empty", |t| t.contains("empty")).await;
    api_until(&server, "/api/stats", |s| {
        s["sources"]["shop"]["stored"]["delivered"] == 4
    })
    .await;

    // Live mode shows an event that arrives while the page is open.
    b.goto(&format!("{}/#/events", server.admin)).await.unwrap();
    click(&b, "#live").await;
    let body = br#"{"type":"invoice.created","data":{"object":{"id":"in_9"}}}"#.to_vec();
    let mut request = client().post(server.url("/in/shop")).body(body.clone());
    for (k, v) in standard_headers("evt_echo", &body) {
        request = request.header(k, v);
    }
    assert_eq!(request.send().await.unwrap().status(), 200);
    text_until(&b, "#events tbody tr:first-child", |t| {
        t.contains("evt_echo")
    })
    .await;

    // At phone width nothing but the tables scrolls sideways.
    b.set_window_size(390, 844).await.unwrap();
    b.goto(&format!("{}/#/event/{}", server.admin, ids[0]))
        .await
        .unwrap();
    text_until(&b, "#what-happened", |t| t.starts_with("Delivered")).await;
    let fits = b
        .execute(
            "return document.documentElement.scrollWidth <= window.innerWidth;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(fits, Value::Bool(true));
    screenshot(&b, "event-phone").await;
    b.set_window_size(1280, 1100).await.unwrap();

    // The overview agrees with the API once everything settled.
    b.goto(&format!("{}/#/", server.admin)).await.unwrap();
    overview_matches_stats(&b, &server).await;
    text_until(
        &b,
        "#sources tr[data-source=shop]:not(.sub) td[data-k=ignored]",
        |t| t == "2",
    )
    .await;

    b.close().await.unwrap();
    assert!(server.terminate().success(), "{}", server.log_text());
}

/// The assets come with a policy that keeps the page to its own origin.
#[tokio::test]
async fn the_dashboard_is_served_without_the_token_and_only_loads_its_own_assets() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "{}[admin]\ntoken = \"{TOKEN}\"\n\n[[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n",
            server_section(&dir.path().join("data"))
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    for (path, kind) in [
        ("/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
        // A new tab asks for /favicon.ico: a 404 there was a console error.
        ("/ui/favicon.svg", "image/svg+xml"),
        ("/favicon.ico", "image/svg+xml"),
    ] {
        let r = client()
            .get(format!("{}{path}", server.admin))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let header = |name: &str| {
            r.headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        assert!(header("content-type").starts_with(kind), "{path}");
        assert!(
            header("content-security-policy").starts_with("default-src 'none'"),
            "{path}"
        );
        // Nothing from another origin (the SVG namespace is a name, not a load).
        let body = r
            .text()
            .await
            .unwrap()
            .replace("http://www.w3.org/2000/svg", "");
        if path == "/" {
            assert!(
                body.contains(r#"<link rel="icon" href="/ui/favicon.svg""#),
                "the page names its icon"
            );
        }
        if path.contains("favicon") {
            assert!(body.starts_with("<svg"), "{path}: {body}");
        }
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} names another origin"
        );
    }
    // The data still needs the token.
    let r = client()
        .get(format!("{}/api/stats", server.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(server.terminate().success());
}

/// A source with two destinations: the overview has a row for each, and an
/// event's page shows each delivery and replays it at one destination only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_each_destination_and_replays_at_one() {
    let driver = Driver::start();
    let dir = tempfile::tempdir().unwrap();
    let app = Destination::start(Mode::Ok).await;
    let billing = Destination::start(Mode::Status(422, "no such customer")).await;
    let config = write_config(
        dir.path(),
        &format!(
            "{}[admin]\ntoken = \"{TOKEN}\"\n\n\
             [[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n\
             [[source.destination]]\nurl = \"{}\"\n\
             [[source.destination]]\nname = \"billing\"\nurl = \"{}\"\n\n",
            server_section(&dir.path().join("data")),
            app.url(),
            billing.url()
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let body = br#"{"type":"invoice.paid","data":{"object":{"id":"in_1"}}}"#.to_vec();
    let mut request = client().post(server.url("/in/shop")).body(body.clone());
    for (k, v) in standard_headers("evt_fan", &body) {
        request = request.header(k, v);
    }
    let answer: Value = request.send().await.unwrap().json().await.unwrap();
    let id = answer["id"].as_str().unwrap().to_owned();
    api_until(&server, "/api/stats", |s| {
        let d = &s["sources"]["shop"]["destinations"];
        d["shop"]["stored"]["delivered"] == 1 && d["shop.billing"]["stored"]["dead"] == 1
    })
    .await;

    let b = driver.browser().await;
    b.goto(&format!("{}/", server.admin)).await.unwrap();
    type_into(&b, "#token", &format!("{TOKEN}\u{E007}")).await;
    text_until(&b, "main h1", |t| t == "Overview").await;
    text_until(
        &b,
        "#sources tr[data-destination='shop.billing'] td[data-k=dead]",
        |t| t == "1",
    )
    .await;
    text_until(
        &b,
        "#sources tr[data-destination='shop'] td[data-k=delivered]",
        |t| t == "1",
    )
    .await;

    b.goto(&format!("{}/#/event/{id}", server.admin))
        .await
        .unwrap();
    text_until(&b, "#deliveries tr[data-destination='shop.billing']", |t| {
        t.contains("dead") && t.contains("422")
    })
    .await;
    text_until(&b, "#deliveries tr[data-destination='shop']", |t| {
        t.contains("delivered")
    })
    .await;
    text_until(&b, "#what-happened", |t| {
        t == "Delivered to shop; dead at shop.billing (answered 422, after 1 attempt)."
    })
    .await;
    screenshot(&b, "event-deliveries").await;
    billing.set(Mode::Ok);
    click(
        &b,
        "#deliveries tr[data-destination='shop.billing'] button[aria-label='Replay here: shop.billing']",
    )
    .await;
    click(&b, "#dialog-confirm").await;
    text_until(&b, "#flash", |t| t == "Replayed evt_fan to shop.billing.").await;
    api_until(&server, &format!("/api/events/{id}"), |e| {
        e["status"] == "delivered"
    })
    .await;
    // The page shows what it read after the replay: load it again.
    b.refresh().await.unwrap();
    text_until(&b, "#deliveries tr[data-destination='shop.billing']", |t| {
        t.contains("delivered")
    })
    .await;
    assert_eq!(app.count(), 1, "the other destination got nothing again");
    assert_eq!(billing.count(), 2);
    b.close().await.unwrap();
    assert!(server.terminate().success(), "{}", server.log_text());
}

// ---- regressions found walking the dashboard with 200,000 events -------------

/// A provider id and an event type as long as real ones get: neither has a
/// space to wrap at.
const LONG_ID: &str = "evt_1NirD82eZvKYlo2CIvbZtJqC_from_the_2026_backfill_0001";
const LONG_TYPE: &str = "checkout.session.async_payment_succeeded.from_the_2026_backfill";

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
                "{}[admin]\ntoken = \"{TOKEN}\"\n\n\
                 [[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n\
                 [[source.destination]]\nurl = \"{}\"\n\
                 [[source.destination]]\nname = \"billing\"\nurl = \"{}\"\n\n",
                server_section(&dir.path().join("data")),
                app.url(),
                billing.url()
            ),
        );
        let server = BinaryServer::start(&config, &[], None);
        let body = exact_payload().into_bytes();
        let mut request = client().post(server.url("/in/shop")).body(body.clone());
        for (k, v) in standard_headers(LONG_ID, &body) {
            request = request.header(k, v);
        }
        let answer: Value = request.send().await.unwrap().json().await.unwrap();
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
/// impact serious or critical, printing every violation found.
async fn assert_accessible(b: &Client, page: &str) {
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
    let deadline = Instant::now() + Duration::from_secs(25);
    while text_until(b, updated, |t| t.starts_with("Updated")).await == before {
        assert!(Instant::now() < deadline, "the overview never refreshed");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
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
