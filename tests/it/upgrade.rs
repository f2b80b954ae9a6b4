//! An upgrade from release 0.1.0: data directories the 0.1.0 build wrote
//! (`tests/fixtures/v0.1.0/`, made by its `make.sh`; log format 6) open
//! with this one. `crashed/` was SIGKILLed with frames its redb file does
//! not hold, holding every kind of entry 0.1.0 logs (Interrupted, Audit,
//! Ingest, Duplicate, Claim, Finish delivered / retry / dead with the
//! attempts' headers, Change replay / ignore / erase / replay-to, Sweep,
//! KeyWrite put / remove, SetMeta); `clean/` is the same store after 0.1.0
//! replayed it and stopped on SIGTERM. `expected.json` is what 0.1.0 itself
//! showed after replaying. The real binary opens a copy of each: it must
//! replay exactly those frames (none for `clean/`) and show exactly that
//! (every event with its status and attempts, the idempotency keys, the
//! audit trail, the pause), then take new events and keys, and restart
//! cleanly with all of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, post, server_section, standard_headers, write_config,
};

const TOKEN: &str = "fixture-admin-token-0123456789";
const KEYS_TOKEN: &str = "fixture-keys-token-0123456789";
const DESTINATION_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const SOURCES: [&str; 4] = ["shop", "fan", "later", "inbox"];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v0.1.0")
}

fn expected() -> Value {
    serde_json::from_slice(&std::fs::read(fixture().join("expected.json")).unwrap()).unwrap()
}

/// A copy of the fixture's data dir `name` (its files and directories; git
/// keeps no empty one, such as `dedupe/`: the store makes it).
fn copy_of(name: &str, to: &Path) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }
    let data = to.join("data");
    copy(&fixture().join(name), &data);
    data
}

/// The fixture's config (`tests/fixtures/v0.1.0/hookinbox.toml`, without
/// `[replication]`) with every destination pointed at `app`, and nothing
/// expiring or swept while the test runs.
fn config(data: &Path, app: &Destination) -> String {
    let data = server_section(data);
    let app = app.url();
    let source = |name: &str| {
        format!(
            "[[source]]\nname = \"{name}\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n"
        )
    };
    let (shop, fan, later, inbox) = (
        source("shop"),
        source("fan"),
        source("later"),
        source("inbox"),
    );
    format!(
        r#"{data}[retention]
dedupe_ttl = "3650d"
payload_ttl = "3650d"
dlq_ttl = "3650d"
audit_ttl = "3650d"
sweep_interval = "1d"

[admin]
token = "{TOKEN}"

[keys]
lease = "30s"
ttl = "365d"

[[keys.client]]
name = "app"
token = "{KEYS_TOKEN}"

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

/// `got` shows everything `want` does: each field of an object (a field
/// `got` leaves out is null: a newer build may leave out what is empty, or
/// add fields), each element of an array, the same scalars.
fn assert_shows(got: &Value, want: &Value, what: &str) {
    match (got, want) {
        (_, Value::Object(fields)) => {
            for (key, value) in fields {
                let field = got.get(key).unwrap_or(&Value::Null);
                assert_shows(field, value, &format!("{what}.{key}"));
            }
        }
        (Value::Array(items), Value::Array(wanted)) => {
            assert_eq!(items.len(), wanted.len(), "{what}: {got} != {want}");
            for (n, (item, wanted)) in items.iter().zip(wanted).enumerate() {
                assert_shows(item, wanted, &format!("{what}[{n}]"));
            }
        }
        _ => assert_eq!(got, want, "{what}"),
    }
}

fn ms_of(time: &Value) -> u64 {
    let at = humantime::parse_rfc3339(time.as_str().unwrap()).unwrap();
    hookinbox::clock::unix_ms(at)
}

/// Whether 0.1.0's key record `view` is still live: its 365-day ttl from
/// the fixture's making has not run out. After, any build shows it gone.
fn live(view: &Value) -> bool {
    !view.is_null()
        && ms_of(&view["expires_at"]) > hookinbox::clock::unix_ms(std::time::SystemTime::now())
}

/// Everything `expected.json` lists is as 0.1.0 showed it: each event
/// (its summary, payload and attempts with their headers) and no other,
/// the destinations' pauses, the keys and the audit trail.
async fn shows_what_0_1_0_showed(server: &BinaryServer, expected: &Value) {
    let events = expected["events"].as_array().unwrap();
    for want in events {
        let (source, event_id) = (
            want["source"].as_str().unwrap(),
            want["event_id"].as_str().unwrap(),
        );
        let got = server.listed(TOKEN, source, event_id).await;
        assert_shows(&got, &want["summary"], event_id);
        let id = got["id"].as_str().unwrap();
        let detail = server
            .admin_ok(TOKEN, "GET", &format!("/api/events/{id}"), None)
            .await;
        assert_shows(
            &detail.json["payload"],
            &want["payload"],
            &format!("{event_id}: payload"),
        );
        assert_shows(
            &detail.json["attempt_history"],
            &want["attempt_history"],
            &format!("{event_id}: attempts"),
        );
    }
    let mut listed = 0;
    for source in SOURCES {
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
    assert_eq!(listed, events.len(), "only the fixture's events");

    // The pause the log set (shop; later is paused by the config).
    let destinations = server
        .admin_ok(TOKEN, "GET", "/api/destinations", None)
        .await;
    let listed = destinations.json["destinations"].as_array().unwrap();
    assert_eq!(listed.len(), expected["paused"].as_object().unwrap().len());
    for d in listed {
        let name = d["name"].as_str().unwrap();
        assert_eq!(d["paused"], expected["paused"][name], "{name}: {d}");
    }

    // The keys: each as shown, or gone (released, deleted, or past its ttl).
    for k in expected["keys"].as_array().unwrap() {
        let (namespace, key, view) = (
            k["namespace"].as_str().unwrap(),
            k["key"].as_str().unwrap(),
            &k["view"],
        );
        let got = server
            .admin(
                "GET",
                &format!("/api/keys/{key}?namespace={namespace}"),
                Some(TOKEN),
                None,
            )
            .await;
        if live(view) {
            assert_eq!(got.status, 200, "{key}: {:?}", got.json);
            assert_shows(&got.json, view, key);
        } else {
            assert_eq!(got.status, 404, "{key}: {:?}", got.json);
        }
    }
    let list = server
        .admin_ok(TOKEN, "GET", "/api/keys?namespace=app&limit=100", None)
        .await;
    let live_keys: Vec<Value> = expected["key_list"]["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| live(k))
        .cloned()
        .collect();
    assert_shows(&list.json["keys"], &Value::Array(live_keys), "the key list");

    // The audit trail, newest first, each record with its outcome.
    let trail = server
        .admin_ok(TOKEN, "GET", "/api/audit?limit=500", None)
        .await;
    assert_shows(
        &trail.json["entries"],
        &expected["audit"],
        "the audit trail",
    );

    // The activity counts (the Duplicate entry's one effect), while the
    // fixture is within the 168 hours `/api/activity` looks back.
    let made = ms_of(&expected["audit"][0]["at"]);
    let now = hookinbox::clock::unix_ms(std::time::SystemTime::now());
    if now.saturating_sub(made) < 160 * 3_600_000 {
        let minutes = server
            .admin_ok(TOKEN, "GET", "/api/activity?hours=168", None)
            .await;
        for (counter, want) in expected["activity"].as_object().unwrap() {
            let sum: u64 = minutes.json["minutes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m[counter].as_u64().unwrap())
                .sum();
            assert_eq!(Some(sum), want.as_u64(), "activity: {counter}");
        }
    }
}

/// Resends every event: each is a duplicate, under its id (an erased one's
/// too): the dedupe keys, those of the events in the log too, are there.
async fn every_event_is_a_duplicate(server: &BinaryServer, expected: &Value) {
    for want in expected["events"].as_array().unwrap() {
        let event_id = want["event_id"].as_str().unwrap();
        let body = want["body"].as_str().unwrap().as_bytes().to_vec();
        let source = want["source"].as_str().unwrap();
        let again = post(
            &client(),
            &server.url(&format!("/in/{source}")),
            &standard_headers(event_id, &body),
            body,
        )
        .await;
        assert_eq!(again.status, 200, "{event_id}: {:?}", again.json);
        assert!(again.is_duplicate(), "{event_id}: {:?}", again.json);
        assert_eq!(again.id(), want["summary"]["id"], "{event_id}");
    }
}

/// Posts a new `order.created` event to `source`: stored as new, under the
/// database's tag.
async fn post_new(server: &BinaryServer, expected: &Value, source: &str, event_id: &str) -> String {
    let body = json!({"id": event_id, "type": "order.created", "result": "ok"})
        .to_string()
        .into_bytes();
    let new = post(
        &client(),
        &server.url(&format!("/in/{source}")),
        &standard_headers(event_id, &body),
        body,
    )
    .await;
    assert_eq!(new.status, 200, "{:?}", new.json);
    assert!(!new.is_duplicate(), "{:?}", new.json);
    let old_id = expected["events"][0]["summary"]["id"].as_str().unwrap();
    assert_eq!(&new.id()[..12], &old_id[..12], "the database's tag");
    assert!(new.id() > old_id, "{} after {old_id}", new.id());
    new.id().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_and_a_crashed_log_of_release_0_1_0_open_as_it_showed_them_and_go_on() {
    let expected = expected();
    assert_eq!(expected["log_format"], 6);
    let dir = tempfile::tempdir().unwrap();
    let data = copy_of("crashed", dir.path());
    let app = Destination::start(Mode::Ok).await;
    let config = write_config(dir.path(), &config(&data, &app));
    let mut server = BinaryServer::start(&config, &[], None);

    // It replayed 0.1.0's frames, all of them: from the one after the
    // checkpoint (the promoted store's first, its Interrupted entry).
    let frames = &expected["log_frames"];
    assert_eq!(
        frames.as_u64().unwrap() as usize,
        expected["frames"].as_array().unwrap().len()
    );
    assert_eq!(expected["frames"][0]["entries"][0], "Interrupted");
    let replayed = server
        .log_record("replayed the write-ahead log")
        .unwrap_or_else(|| panic!("no replay in the log:\n{}", server.log_text()));
    assert_eq!(replayed["frames"], *frames, "{replayed}");
    assert_eq!(replayed["from"], expected["lsn_from"], "{replayed}");
    assert_eq!(replayed["to"], expected["lsn_to"], "{replayed}");
    let opened = server.log_record("store opened").unwrap();
    assert_eq!(opened["log_frames"], *frames, "{opened}");

    shows_what_0_1_0_showed(&server, &expected).await;
    every_event_is_a_duplicate(&server, &expected).await;
    assert!(
        app.received().is_empty(),
        "nothing goes out while paused or before its retry is due"
    );

    // Keys go on: the one done in the log answers its result to a claim
    // (while it lives); a new one is fenced by a token larger than any
    // 0.1.0 handed out.
    let done = expected["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == "win-done")
        .unwrap();
    let claim = json!({"lease": "1m", "ttl": "1d"});
    if live(&done["view"]) {
        let again = server
            .admin(
                "POST",
                "/api/keys/win-done/claim",
                Some(KEYS_TOKEN),
                Some(claim.clone()),
            )
            .await;
        assert_eq!(again.status, 200, "{:?}", again.json);
        assert_eq!(again.json["state"], "done");
        assert_eq!(again.json["result"], done["view"]["result"]);
    }
    let new = server
        .admin(
            "POST",
            "/api/keys/after-upgrade/claim",
            Some(KEYS_TOKEN),
            Some(claim),
        )
        .await;
    assert_eq!(new.status, 201, "{:?}", new.json);
    let token = new.json["token"].as_u64().unwrap();
    let old_token = expected["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["view"]["token"].as_u64())
        .max()
        .unwrap();
    assert!(token > old_token, "token {token} after 0.1.0's {old_token}");
    let completed = server
        .admin(
            "POST",
            "/api/keys/after-upgrade/complete",
            Some(KEYS_TOKEN),
            Some(json!({"token": token, "result": {"after": "upgrade"}})),
        )
        .await;
    assert_eq!(completed.status, 200, "{:?}", completed.json);

    // Events go on: a pending one goes out once its destination is resumed,
    // and a new one ingests (under the database's tag) and is delivered.
    server
        .admin_ok(TOKEN, "POST", "/api/destinations/later/resume", None)
        .await;
    let later = server
        .delivered(TOKEN, "later", "evt_later_1", Duration::from_secs(10))
        .await;
    server
        .admin_ok(TOKEN, "POST", "/api/destinations/shop/resume", None)
        .await;
    let after = post_new(&server, &expected, "shop", "evt_after_upgrade").await;
    server
        .delivered(TOKEN, "shop", "evt_after_upgrade", Duration::from_secs(10))
        .await;
    let received: Vec<String> = app
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert!(received.contains(&later["id"].as_str().unwrap().to_owned()));
    assert!(received.contains(&after));
    // Only those, and evt_new_retry once its logged retry time has passed
    // (an hour after the fixture was made).
    let retry = expected["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event_id"] == "evt_new_retry")
        .unwrap()["summary"]["id"]
        .as_str()
        .unwrap();
    assert!(
        received
            .iter()
            .all(|id| id == later["id"].as_str().unwrap() || *id == after || id == retry),
        "{received:?}"
    );
    // The audit trail goes on from 0.1.0's numbers.
    let trail = server
        .admin_ok(TOKEN, "GET", "/api/audit?limit=500", None)
        .await;
    let newest = trail.json["entries"][0]["id"].as_u64().unwrap();
    let old_newest = expected["audit"][0]["id"].as_u64().unwrap();
    assert_eq!(newest, old_newest + 2, "{:?}", trail.json["entries"][0]);
    assert_eq!(trail.json["entries"][0]["action"], "resume");
    assert!(server.terminate().success(), "{}", server.log_text());

    // A restart after that is clean: nothing to replay, everything there.
    let mut server = BinaryServer::start(&config, &[], None);
    assert!(
        server.log_record("replayed the write-ahead log").is_none(),
        "{}",
        server.log_text()
    );
    for (source, event_id) in [("shop", "evt_after_upgrade"), ("later", "evt_later_1")] {
        assert_eq!(
            server.listed(TOKEN, source, event_id).await["status"],
            "delivered"
        );
    }
    for want in expected["events"].as_array().unwrap() {
        let event_id = want["event_id"].as_str().unwrap();
        if !["evt_later_1", "evt_new_retry"].contains(&event_id) {
            let got = server
                .listed(TOKEN, want["source"].as_str().unwrap(), event_id)
                .await;
            assert_shows(&got, &want["summary"], event_id);
        }
    }
    let key = server
        .admin(
            "GET",
            "/api/keys/after-upgrade?namespace=app",
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(key.status, 200, "{:?}", key.json);
    assert_eq!(key.json["result"], json!({"after": "upgrade"}));
    let again = server
        .admin_ok(TOKEN, "GET", "/api/audit?limit=500", None)
        .await;
    assert_eq!(again.json["entries"], trail.json["entries"]);
    let destinations = server
        .admin_ok(TOKEN, "GET", "/api/destinations", None)
        .await;
    assert!(
        destinations.json["destinations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["paused"] == false),
        "{:?}",
        destinations.json
    );
    assert!(server.terminate().success(), "{}", server.log_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_release_0_1_0_shut_down_opens_as_it_showed_it() {
    let expected = expected();
    let dir = tempfile::tempdir().unwrap();
    let data = copy_of("clean", dir.path());
    let app = Destination::start(Mode::Ok).await;
    let config = write_config(dir.path(), &config(&data, &app));
    let mut server = BinaryServer::start(&config, &[], None);

    // Shut down cleanly: its log holds only frames the file has.
    assert!(
        server.log_record("replayed the write-ahead log").is_none(),
        "{}",
        server.log_text()
    );
    assert_eq!(server.log_record("store opened").unwrap()["log_frames"], 0);
    shows_what_0_1_0_showed(&server, &expected).await;
    every_event_is_a_duplicate(&server, &expected).await;

    // A new event to fan's app (not paused) is delivered.
    let id = post_new(&server, &expected, "fan", "evt_after_clean_upgrade").await;
    let got = server
        .delivered(
            TOKEN,
            "fan",
            "evt_after_clean_upgrade",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(got["destination"], "fan.app");
    let received: Vec<String> = app
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(received, [id]);
    assert!(server.terminate().success(), "{}", server.log_text());
}
