//! The dashboard in a real browser: headless Chromium driven over WebDriver
//! (Debian's `chromium` and `chromium-driver`), against the real binary and
//! a destination that fails and then recovers. Screenshots of each page go
//! to `target/dashboard/`. The regressions of one walk through it, with
//! axe-core on every page, are in `walk`. Every page a test waits on is
//! also checked for stray `null`, `false` and `undefined` text.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, eventually, eventually_sync, server_section,
    standard_headers, write_config,
};

mod attempts;
mod audit;
mod dlq_time;
mod gap_fill;
mod live;
mod roles;
mod shapes;
mod views;
mod walk;

const TOKEN: &str = "dashboard-test-token-0123456789";
/// The token of `vera`, a viewer, in [`Scene`]'s config.
const VIEWER_TOKEN: &str = "dashboard-viewer-token-0123456789";
/// The token of `otto`, an operator, in [`Scene`]'s config.
const OPERATOR_TOKEN: &str = "dashboard-operator-token-0123456789";
/// The token of `old`, an operator whose token expired in 2020.
const EXPIRED_TOKEN: &str = "dashboard-expired-token-0123456789";

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
        eventually_sync(
            "chromedriver listens",
            Duration::from_secs(20),
            Duration::from_millis(50),
            || {
                std::net::TcpStream::connect(("127.0.0.1", port))
                    .map(drop)
                    .map_err(|e| format!("connect to port {port}: {e}"))
            },
        );
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

/// Waits (10 s at most) until the element at `css` has text that `ok`
/// accepts; returns it. Every page a test visits is waited on here, so the
/// page is also checked for stray text ([`assert_no_stray_text`]) once it
/// shows what was awaited.
async fn text_until(b: &Client, css: &str, ok: impl Fn(&str) -> bool) -> String {
    let text = eventually(
        &format!("{css}'s text matches"),
        Duration::from_secs(10),
        Duration::from_millis(100),
        async || match b.find(Locator::Css(css)).await {
            Ok(el) => match el.text().await {
                Ok(text) if ok(&text) => Ok(text),
                Ok(text) => Err(format!("text {text:?}")),
                Err(e) => Err(format!("no text: {e}")),
            },
            Err(e) => Err(format!("not found: {e}")),
        },
    )
    .await;
    assert_no_stray_text(b).await;
    text
}

/// Every text node of the page whose whole text is `null`, `false` or
/// `undefined`, outside the payload and answers shown as sent (`pre`):
/// what `replaceChildren` and `append` make of a value `h` would have
/// left out, as in `cond ? node : null` or `can('operator') && node`.
const STRAY_TEXT: &str = "
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    const stray = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const text = n.nodeValue.trim();
      const at = n.parentElement;
      if (!['null', 'false', 'undefined'].includes(text) || at.closest('pre')) continue;
      const before = n.previousSibling ? n.previousSibling.textContent.trim().slice(0, 40) : '';
      stray.push(`${JSON.stringify(text)} in <${at.tagName.toLowerCase()}${at.id ? `#${at.id}` : ''}>` +
        (before ? ` after ${JSON.stringify(before)}` : ''));
    }
    return { page: location.hash || '#/', stray };";

/// Fails when the page shows a stray `null`, `false` or `undefined`
/// ([`STRAY_TEXT`]): the event page showed a `null` line, and a viewer's
/// dead-letter page `false` and `null`.
async fn assert_no_stray_text(b: &Client) {
    let found = b
        .execute(STRAY_TEXT, vec![])
        .await
        .unwrap_or_else(|e| panic!("the stray-text check: {e}"));
    let stray = found["stray"].as_array().cloned().unwrap_or_default();
    assert!(
        stray.is_empty(),
        "the page {} shows stray text: {}",
        found["page"],
        serde_json::to_string_pretty(&stray).unwrap()
    );
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

/// The page as a PNG in `target/dashboard/` (docs/dashboard.md's pictures
/// are copied from there). The focus ring a page's navigation leaves on
/// `main` (for screen readers) is taken off first: it is not the page.
async fn screenshot(b: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    b.execute(
        "document.activeElement && document.activeElement.blur()",
        vec![],
    )
    .await
    .unwrap();
    let png = b.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

async fn admin_get(server: &BinaryServer, path: &str) -> Value {
    crate::support::admin_json(&server.admin, TOKEN, path).await
}

/// Polls `path` of the admin API until `ok` accepts its answer (10 s at most).
async fn api_until(server: &BinaryServer, path: &str, ok: impl Fn(&Value) -> bool) -> Value {
    eventually(
        &format!("{path} matches"),
        Duration::from_secs(10),
        Duration::from_millis(100),
        async || {
            let v = admin_get(server, path).await;
            if ok(&v) { Ok(v) } else { Err(v.to_string()) }
        },
    )
    .await
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

/// A dashboard in a browser, over a server whose app refuses every event
/// (422: dead at once) until it is fixed. The fields drop in order: the
/// browser, the server, the app, the data, then chromedriver.
struct Scene {
    b: Client,
    server: BinaryServer,
    dest: Destination,
    /// The hookinbox ids of `evt_alpha`, `evt_bravo`, `evt_charlie`,
    /// `evt_delta`, `evt_foxtrot` and `evt_golf`, in the order sent.
    ids: Vec<String>,
    _dir: tempfile::TempDir,
    _driver: Driver,
}

impl Scene {
    /// Six `invoice.paid` events (customers `cus_alpha` … `cus_golf`), all
    /// dead, and the browser on the dashboard's sign-in page.
    async fn six_dead_events() -> Scene {
        let driver = Driver::start();
        let dir = tempfile::tempdir().unwrap();
        let dest = Destination::start(Mode::Status(422, "amount must be positive")).await;
        let config = write_config(
            dir.path(),
            &format!(
                r#"{}[admin]
token = "{TOKEN}"

[[admin.user]]
name = "vera"
role = "viewer"
token = "{VIEWER_TOKEN}"

[[admin.user]]
name = "otto"
role = "operator"
token = "{OPERATOR_TOKEN}"

[[admin.user]]
name = "old"
role = "operator"
token = "{EXPIRED_TOKEN}"
expires = "2020-01-01T00:00:00Z"

[telemetry]
endpoint = "http://127.0.0.1:{}"
trace_url = "http://tempo.example/trace/{{trace_id}}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"

"#,
                server_section(&dir.path().join("data")),
                // Traces go nowhere (a port nothing listens on): the page
                // links them all the same.
                crate::support::free_port(),
                dest.url()
            ),
        );
        let server = BinaryServer::start(&config, &[], None);

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
        Scene {
            b,
            server,
            dest,
            ids,
            _dir: dir,
            _driver: driver,
        }
    }

    /// The server's config file, to edit before a reload.
    fn config_path(&self) -> std::path::PathBuf {
        self._dir.path().join("hookinbox.toml")
    }

    /// Signs in by keyboard: the token, then Enter.
    async fn sign_in(&self) {
        type_into(&self.b, "#token", &format!("{TOKEN}\u{E007}")).await;
        text_until(&self.b, "main h1", |t| t == "Overview").await;
    }

    /// `POST`s to the admin API with the token; the answer must be 200.
    async fn admin_post(&self, path: &str, body: Value) {
        let r = client()
            .post(format!("{}{path}", self.server.admin))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }

    /// The app fixed, through the API: alpha and charlie replayed and
    /// delivered, bravo ignored; what the event page's steps leave behind.
    async fn alpha_and_charlie_delivered_bravo_ignored(&self) {
        self.dest.set(Mode::Ok);
        self.admin_post(&format!("/api/events/{}/replay", self.ids[0]), json!({}))
            .await;
        self.admin_post(
            &format!("/api/events/{}/ignore", self.ids[1]),
            json!({"note": "refunded by hand, ticket 4411"}),
        )
        .await;
        self.admin_post(&format!("/api/events/{}/replay", self.ids[2]), json!({}))
            .await;
        for id in [&self.ids[0], &self.ids[2]] {
            api_until(&self.server, &format!("/api/events/{id}"), |e| {
                e["status"] == "delivered"
            })
            .await;
        }
    }

    async fn end(mut self) {
        self.b.clone().close().await.unwrap();
        assert!(
            self.server.terminate().success(),
            "{}",
            self.server.log_text()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_refuses_a_wrong_token_in_words_agrees_with_stats_and_pauses_after_a_yes() {
    let scene = Scene::six_dead_events().await;
    let (b, server) = (&scene.b, &scene.server);

    // A wrong token is refused in words; the right one opens the overview.
    type_into(b, "#token", "not-the-token").await;
    click(b, "form button[type=submit]").await;
    text_until(b, "#signin-error", |t| {
        t.contains("did not accept that admin token")
    })
    .await;
    scene.sign_in().await;
    overview_matches_stats(b, server).await;
    text_until(b, "#destinations tr[data-destination=shop]", |t| {
        t.contains("last failure:")
    })
    .await;
    screenshot(b, "overview").await;
    // Pause and resume the destination, each after saying yes.
    click(b, "#destinations tr[data-destination=shop] button").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| t == "shop is paused.").await;
    text_until(b, "#destinations tr[data-destination=shop]", |t| {
        t.contains("paused")
    })
    .await;
    api_until(server, "/api/destinations", |d| {
        d["destinations"][0]["paused"] == true
    })
    .await;
    click(b, "#destinations tr[data-destination=shop] button").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| t == "shop is delivering again.").await;
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_page_finds_an_event_by_its_payload_and_pages_newest_first() {
    let scene = Scene::six_dead_events().await;
    let (b, server) = (&scene.b, &scene.server);
    scene.sign_in().await;

    // Find the first event by what its payload holds.
    b.goto(&format!("{}/#/events", server.admin)).await.unwrap();
    type_into(b, "#q", "cus_alpha").await;
    click(b, "form.filters button[type=submit]").await;
    text_until(b, "#search-progress", |t| {
        t.starts_with("Search complete: 6 payloads read in all")
    })
    .await;
    let rows = text_until(b, "#events tbody", |t| t.contains("evt_alpha")).await;
    assert!(!rows.contains("evt_bravo"), "{rows}");
    screenshot(b, "events-search").await;
    // Pages newest first, two at a time here, with the cursor.
    b.goto(&format!("{}/#/events?limit=2", server.admin))
        .await
        .unwrap();
    let first = text_until(b, "#events tbody", |t| t.contains("evt_golf")).await;
    assert!(
        first.contains("evt_foxtrot") && !first.contains("evt_delta"),
        "{first}"
    );
    click(b, "#more").await;
    text_until(b, "#events tbody", |t| {
        t.contains("evt_foxtrot") && t.contains("evt_charlie")
    })
    .await;
    // A search that stops early says how far back it looked, and goes on.
    b.goto(&format!("{}/#/events?q=invoice.paid&limit=2", server.admin))
        .await
        .unwrap();
    text_until(b, "#search-progress", |t| {
        t.starts_with("Scanned back to 20")
    })
    .await;
    click(b, "#more").await;
    text_until(b, "#events tbody", |t| t.contains("evt_charlie")).await;
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_page_says_why_it_died_and_replays_ignores_and_erases_after_a_yes() {
    let scene = Scene::six_dead_events().await;
    let (b, server, dest, ids) = (&scene.b, &scene.server, &scene.dest, &scene.ids);
    scene.sign_in().await;

    // Found by its payload and opened, it says why it died.
    b.goto(&format!("{}/#/events?q=cus_alpha", server.admin))
        .await
        .unwrap();
    text_until(b, "#events tbody", |t| t.contains("evt_alpha")).await;
    click(b, &format!("#events tr[data-id='{}'] a", ids[0])).await;
    text_until(b, "#what-happened", |t| {
        t.starts_with("Dead: your app answered 422") && t.ends_with("after 1 attempt.")
    })
    .await;
    text_until(b, "#attempts", |t| t.contains("amount must be positive")).await;
    text_until(b, "#payload", |t| t.contains("\"customer\": \"cus_alpha\"")).await;
    // Its trace, linked as [telemetry] trace_url says.
    let trace = admin_get(server, &format!("/api/events/{}", ids[0])).await["trace_id"]
        .as_str()
        .expect("a trace id")
        .to_owned();
    text_until(b, "#trace", |t| t == trace).await;
    let link = b.find(Locator::Css("#trace")).await.unwrap();
    assert_eq!(
        link.attr("href").await.unwrap().as_deref(),
        Some(format!("http://tempo.example/trace/{trace}").as_str())
    );
    screenshot(b, "event-dead").await;

    // The app is fixed: replay it, after saying yes, and see it delivered.
    dest.set(Mode::Ok);
    click(b, "#replay").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| t.starts_with("Replayed evt_alpha")).await;
    api_until(server, &format!("/api/events/{}", ids[0]), |e| {
        e["status"] == "delivered"
    })
    .await;
    b.refresh().await.unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Delivered at")).await;
    screenshot(b, "event-delivered").await;

    // Ignore the second: a note is required, and then it shows.
    b.goto(&format!("{}/#/event/{}", server.admin, ids[1]))
        .await
        .unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Dead:")).await;
    click(b, "#ignore").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "dialog .error", |t| t.contains("A note is required")).await;
    type_into(b, "#dialog-note", "refunded by hand, ticket 4411").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#what-happened", |t| {
        t.starts_with("Ignored at") && t.contains("refunded by hand, ticket 4411")
    })
    .await;
    text_until(b, "dl.facts", |t| {
        t.contains("refunded by hand, ticket 4411")
    })
    .await;

    // Delete its payload: it warns, asks for a note, and says what it did.
    click(b, "#erase").await;
    text_until(b, "dialog", |t| t.contains("cannot be brought back")).await;
    type_into(b, "#dialog-note", "customer asked for erasure").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| t == "Deleted the payload of evt_bravo.").await;
    text_until(b, "dl.facts", |t| t.contains("customer asked for erasure")).await;

    // Someone else replayed charlie while this page was open: the refusal
    // comes back in words.
    b.goto(&format!("{}/#/event/{}", server.admin, ids[2]))
        .await
        .unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Dead:")).await;
    dest.set(Mode::Slow(Duration::from_secs(3)));
    let r = client()
        .post(format!("{}/api/events/{}/replay", server.admin, ids[2]))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    click(b, "#replay").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| {
        t.starts_with("That cannot be done right now:")
    })
    .await;
    api_until(server, &format!("/api/events/{}", ids[2]), |e| {
        e["status"] == "delivered"
    })
    .await;
    dest.set(Mode::Ok);
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dlq_page_ignores_picked_events_and_replays_the_rest_by_filter_after_a_count() {
    let scene = Scene::six_dead_events().await;
    let (b, server, ids) = (&scene.b, &scene.server, &scene.ids);
    scene.alpha_and_charlie_delivered_bravo_ignored().await;
    scene.sign_in().await;

    // The dead-letter queue holds the other three.
    b.goto(&format!("{}/#/dlq", server.admin)).await.unwrap();
    let rows = text_until(b, "#dlq tbody", |t| {
        t.contains("evt_delta") && t.contains("evt_foxtrot") && t.contains("evt_golf")
    })
    .await;
    for gone in ["evt_alpha", "evt_bravo", "evt_charlie"] {
        assert!(!rows.contains(gone), "{rows}");
    }
    text_until(b, &format!("#dlq tr[data-id='{}']", ids[3]), |t| {
        t.contains("cus_delta")
    })
    .await;
    screenshot(b, "dlq").await;
    // One picked by hand and ignored with a note…
    click(
        b,
        &format!("#dlq tr[data-id='{}'] input[type=checkbox]", ids[4]),
    )
    .await;
    click(b, "#ignore-selected").await;
    text_until(b, "#dialog-title", |t| t == "Ignore 1 selected event?").await;
    type_into(b, "#dialog-note", "test order, not a real sale").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| t == "Ignored 1 of 1.").await;
    let rows = text_until(b, "#dlq tbody", |t| !t.contains("evt_foxtrot")).await;
    assert!(
        rows.contains("evt_delta") && rows.contains("evt_golf"),
        "{rows}"
    );
    // …and the rest replayed by the filter, after a count.
    click(b, "#replay-matching").await;
    text_until(b, "#dialog-title", |t| t == "Replay 2 events?").await;
    click(b, "#dialog-confirm").await;
    text_until(b, "#flash", |t| t == "Replayed 2 of 2.").await;
    text_until(b, "#dlq-empty", |t| t.contains("empty")).await;
    api_until(server, "/api/stats", |s| {
        s["sources"]["shop"]["stored"]["delivered"] == 4
    })
    .await;

    // The overview agrees with the API once everything settled.
    b.goto(&format!("{}/#/", server.admin)).await.unwrap();
    overview_matches_stats(b, server).await;
    text_until(
        b,
        "#sources tr[data-source=shop]:not(.sub) td[data-k=ignored]",
        |t| t == "2",
    )
    .await;
    scene.end().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_mode_shows_a_new_event_and_at_phone_width_only_tables_scroll_sideways() {
    let scene = Scene::six_dead_events().await;
    let (b, server, ids) = (&scene.b, &scene.server, &scene.ids);
    scene.alpha_and_charlie_delivered_bravo_ignored().await;
    scene.sign_in().await;

    // Live mode follows the event stream (one open while it is on) and
    // shows each event that arrives while the page is open, newest on top.
    b.goto(&format!("{}/#/events", server.admin)).await.unwrap();
    click(b, "#live").await;
    text_until(b, "#live-state", |t| {
        t == "Following new events as they are stored."
    })
    .await;
    let metrics = client()
        .get(format!("{}/metrics", server.admin))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        crate::support::sample(&metrics, "hookinbox_event_streams"),
        1.0
    );
    for id in ["evt_echo", "evt_echo_2"] {
        let body = br#"{"type":"invoice.created","data":{"object":{"id":"in_9"}}}"#.to_vec();
        let mut request = client().post(server.url("/in/shop")).body(body.clone());
        for (k, v) in standard_headers(id, &body) {
            request = request.header(k, v);
        }
        assert_eq!(request.send().await.unwrap().status(), 200);
    }
    text_until(b, "#events tbody tr:first-child", |t| {
        t.contains("evt_echo_2")
    })
    .await;
    text_until(b, "#events tbody tr:nth-child(2)", |t| {
        t.contains("evt_echo") && !t.contains("evt_echo_2")
    })
    .await;

    // At phone width nothing but the tables scrolls sideways.
    b.set_window_size(390, 844).await.unwrap();
    b.goto(&format!("{}/#/event/{}", server.admin, ids[0]))
        .await
        .unwrap();
    text_until(b, "#what-happened", |t| t.starts_with("Delivered")).await;
    let fits = b
        .execute(
            "return document.documentElement.scrollWidth <= window.innerWidth;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(fits, Value::Bool(true));
    screenshot(b, "event-phone").await;
    b.set_window_size(1280, 1100).await.unwrap();
    scene.end().await;
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

"#,
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
