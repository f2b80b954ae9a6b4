//! A write-ahead log the previous build wrote (frame format 0, commit
//! 9cb7a00: `tests/fixtures/log0/`, made by its `make.sh`) replays with this
//! one. The fixture was SIGKILLed with frames the redb file does not hold,
//! holding every kind of entry the writer logs (Ingest, Duplicate, Claim,
//! Finish delivered / retry / dead, Change replay / ignore / erase /
//! replay-to, Sweep, SetMeta); `expected.json` is what the old build itself
//! listed after replaying it. The real binary opens a copy: it must say it
//! replayed those frames and list exactly that, keep the dedupe keys and the
//! pause the log set, and then go on delivering and ingesting.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, post, server_section, standard_headers, write_config,
};

const TOKEN: &str = "fixture-admin-token-0123456789";
const DESTINATION_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log0")
}

/// The fixture's config (`tests/fixtures/log0/hookinbox.toml`) with every
/// destination pointed at `app`.
fn config(data: &Path, app: &Destination) -> String {
    let data = server_section(data);
    let app = app.url();
    let source = |name: &str| {
        format!(
            r#"[[source]]
name = "{name}"
kind = "standard"
secret = "{STANDARD_SECRET}"
"#
        )
    };
    let (shop, fan, later, inbox) = (
        source("shop"),
        source("fan"),
        source("later"),
        source("inbox"),
    );
    format!(
        r#"{data}[admin]
token = "{TOKEN}"

{shop}destination = "{app}"
destination_secret = "{DESTINATION_SECRET}"
filter_types = ["order.*"]
max_attempts = 5
initial_interval = "1h"
max_interval = "1h"

{fan}
[[source.destination]]
name = "app"
url = "{app}"
secret = "{DESTINATION_SECRET}"
filter_types = ["order.*"]

{later}destination = "{app}"
destination_secret = "{DESTINATION_SECRET}"
paused = true

{inbox}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_the_previous_version_wrote_replays_every_kind_of_entry() {
    let expected: Value =
        serde_json::from_slice(&std::fs::read(fixture().join("expected.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    for name in ["hookinbox.redb", "hookinbox.wal"] {
        std::fs::copy(fixture().join("crashed").join(name), data.join(name)).unwrap();
    }
    let app = Destination::start(Mode::Ok).await;
    let config = write_config(dir.path(), &config(&data, &app));
    let mut server = BinaryServer::start(&config, &[], None);

    // It replayed the old build's frames, all of them.
    let frames = &expected["log_frames"];
    assert!(frames.as_u64().unwrap() >= 9, "{frames}");
    let replayed = server
        .log_record("replayed the write-ahead log")
        .unwrap_or_else(|| panic!("no replayed line in the log:\n{}", server.log_text()));
    assert_eq!(replayed["frames"], *frames, "{replayed}");
    assert_eq!(replayed["from"], expected["lsn_from"], "{replayed}");
    assert_eq!(replayed["to"], expected["lsn_to"], "{replayed}");
    let opened = server
        .log_record("store opened")
        .unwrap_or_else(|| panic!("no opened line in the log:\n{}", server.log_text()));
    assert_eq!(opened["log_frames"], *frames, "{opened}");

    // Every event as the old build listed it after its own replay: status,
    // attempts, replays, times, notes, erasure, dead letter, per delivery.
    let events = expected["events"].as_array().unwrap();
    for want in events {
        let (source, event_id) = (
            want["source"].as_str().unwrap(),
            want["event_id"].as_str().unwrap(),
        );
        let got = server.listed(TOKEN, source, event_id).await;
        for (key, value) in want["summary"].as_object().unwrap() {
            assert_eq!(got[key], *value, "{event_id}: {key}: {got}");
        }
        let id = got["id"].as_str().unwrap();
        let detail = server
            .admin_ok(TOKEN, "GET", &format!("/api/events/{id}"), None)
            .await;
        assert_eq!(
            detail.json["payload"], want["payload"],
            "{event_id}: the payload (empty: erased)"
        );
        assert_eq!(
            detail.json["attempt_history"].as_array().unwrap().len() as u64,
            want["attempts_recorded"].as_u64().unwrap(),
            "{event_id}: {}",
            detail.json
        );
    }
    // … and nothing else.
    let mut listed = 0;
    for source in ["shop", "fan", "later", "inbox"] {
        let page = server
            .admin_ok(
                TOKEN,
                "GET",
                &format!("/api/events?source={source}&limit=100"),
                None,
            )
            .await;
        listed += page.json["events"].as_array().unwrap().len();
    }
    assert_eq!(listed, events.len());

    // The pause the log set (shop; later is paused by the config).
    let destinations = server
        .admin_ok(TOKEN, "GET", "/api/destinations", None)
        .await;
    for d in destinations.json["destinations"].as_array().unwrap() {
        let name = d["name"].as_str().unwrap();
        assert_eq!(
            d["paused"], expected["paused"][name],
            "{name}: {destinations:?}"
        );
    }
    assert_eq!(expected["paused"]["shop"], true);

    // The dedupe keys, those of events in the log too: a resend of each is a
    // duplicate with its id (an erased one's too).
    for want in events {
        let event_id = want["event_id"].as_str().unwrap();
        let body = want["body"].as_str().unwrap().as_bytes().to_vec();
        let again = post(
            &client(),
            &server.url(&format!("/in/{}", want["source"].as_str().unwrap())),
            &standard_headers(event_id, &body),
            body,
        )
        .await;
        assert_eq!(again.status, 200, "{event_id}: {:?}", again.json);
        assert!(again.is_duplicate(), "{event_id}: {:?}", again.json);
        assert_eq!(again.id(), want["summary"]["id"], "{event_id}");
    }
    assert!(
        app.received().is_empty(),
        "nothing goes out while paused or before its retry is due"
    );

    // It goes on: a pending event goes out once its destination is resumed,
    // and a new event ingests (under the database's tag) and is delivered.
    server
        .admin_ok(TOKEN, "POST", "/api/destinations/later/resume", None)
        .await;
    let later = server
        .delivered(TOKEN, "later", "evt_later_1", Duration::from_secs(5))
        .await;
    server
        .admin_ok(TOKEN, "POST", "/api/destinations/shop/resume", None)
        .await;
    let body = json!({"id": "evt_after", "type": "order.created", "result": "ok"})
        .to_string()
        .into_bytes();
    let new = post(
        &client(),
        &server.url("/in/shop"),
        &standard_headers("evt_after", &body),
        body,
    )
    .await;
    assert_eq!(new.status, 200, "{:?}", new.json);
    assert!(!new.is_duplicate());
    let old_ids: Vec<&str> = events
        .iter()
        .map(|e| e["summary"]["id"].as_str().unwrap())
        .collect();
    assert!(!old_ids.contains(&new.id()));
    assert_eq!(&new.id()[..12], &old_ids[0][..12], "the database's tag");
    server
        .delivered(TOKEN, "shop", "evt_after", Duration::from_secs(5))
        .await;
    let received: Vec<String> = app
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert!(received.contains(&later["id"].as_str().unwrap().to_owned()));
    assert!(received.contains(&new.id().to_owned()));
    // Only those, and evt_new_retry once its logged retry time has passed
    // (an hour after the fixture was made).
    let retry = &events
        .iter()
        .find(|e| e["event_id"] == "evt_new_retry")
        .unwrap()["summary"]["id"];
    assert!(
        received
            .iter()
            .all(|id| id == later["id"].as_str().unwrap() || id == new.id() || *retry == **id),
        "{received:?}"
    );
    assert!(server.terminate().success(), "{}", server.log_text());
}
