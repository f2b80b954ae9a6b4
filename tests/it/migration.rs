//! Databases written by the previous version (schema 5, commit 7e1936a:
//! `tests/fixtures/schema5/`, made by its `make.sh`) open with this one: the
//! events, their states, ids and dedupe keys are all there; what was pending
//! is delivered; a crash's write-ahead log written by the old build is
//! replayed; and the same source, given a second destination, fans out new
//! events while the old ones keep their one delivery.

use std::path::Path;
use std::time::Duration;

use hookinbox::api::EventSummary;
use hookinbox::clock::Clock;
use serde_json::json;

use crate::destination::{Destination, Mode};
use crate::support::{STANDARD_SECRET, TestServer, eventually, server_section, standard_headers};

const TOKEN: &str = "fixture-admin-token-0123456789";
const DESTINATION_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn copy_fixture(name: &str, to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/schema5")
        .join(name);
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// The fixture's sources, now with `shop` sent to a second, named
/// destination, and nothing paused.
fn config(dir: &Path, app: &Destination, audit: &Destination) -> String {
    let server = server_section(dir);
    let (app, audit) = (app.url(), audit.url());
    let source = |name: &str| {
        format!(
            r#"[[source]]
name = "{name}"
kind = "standard"
secret = "{STANDARD_SECRET}"
"#
        )
    };
    let (shop, later, inbox, keyed) = (
        source("shop"),
        source("later"),
        source("inbox"),
        source("keyed"),
    );
    format!(
        r#"{server}[admin]
token = "{TOKEN}"

{shop}[[source.destination]]
url = "{app}"
secret = "{DESTINATION_SECRET}"
filter_types = ["order.*"]
[[source.destination]]
name = "audit"
url = "{audit}"

{later}destination = "{app}"
destination_secret = "{DESTINATION_SECRET}"

{inbox}
{keyed}destination = "{app}"
destination_secret = "{DESTINATION_SECRET}"
ordering_key = "/customer"
"#
    )
}

async fn find(server: &TestServer, source: &str, event_id: &str) -> EventSummary {
    let mut events = server
        .api(TOKEN)
        .events(&format!("source={source}&event_id={event_id}"))
        .await
        .events;
    assert_eq!(events.len(), 1, "{source}/{event_id}: {events:?}");
    events.remove(0)
}

async fn wait_status(
    server: &TestServer,
    source: &str,
    event_id: &str,
    want: &str,
) -> EventSummary {
    eventually(
        &format!("{source}/{event_id} is {want}"),
        Duration::from_secs(15),
        Duration::from_millis(20),
        async || {
            let e = find(server, source, event_id).await;
            if e.status.as_str() == want {
                Ok(e)
            } else {
                Err(format!("{event_id}: {e:?}"))
            }
        },
    )
    .await
}

fn schema_version(data_dir: &Path) -> u8 {
    let db = redb::Database::open(data_dir.join("hookinbox.redb")).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let meta = txn
        .open_table(redb::TableDefinition::<&str, &[u8]>::new("meta"))
        .unwrap();
    let version = redb::ReadableTable::get(&meta, "schema_version")
        .unwrap()
        .unwrap();
    version.value()[0]
}

async fn opens_and_keeps_everything(fixture: &str) {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture(fixture, dir.path());
    assert_eq!(schema_version(dir.path()), 5, "the fixture is schema 5");
    let app = Destination::start(Mode::Ok).await;
    let audit = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &app, &audit), Clock::system()).await;

    // Finished events keep their status, their one delivery and their ids.
    let mut old_ids = Vec::new();
    for (source, event_id, status) in [
        ("shop", "evt_ok_1", "delivered"),
        ("shop", "evt_ok_2", "delivered"),
        ("shop", "evt_ok_3", "delivered"),
        ("shop", "evt_refuse_1", "dead"),
        ("shop", "evt_filtered_1", "filtered"),
        ("inbox", "evt_held_1", "held"),
    ] {
        let e = find(&server, source, event_id).await;
        assert_eq!(e.status.as_str(), status, "{event_id}: {e:?}");
        assert_eq!(e.deliveries.len(), 1, "{event_id}: {e:?}");
        assert_eq!(e.deliveries[0].destination, source);
        old_ids.push(e.id);
    }
    // What was pending goes out now (to the destination it was routed to),
    // a key's events in received order; the crashed fixture's keyed events
    // come from the old build's write-ahead log.
    for (source, event_id) in [
        ("later", "evt_later_1"),
        ("later", "evt_later_2"),
        ("keyed", "evt_keyed_1"),
        ("keyed", "evt_keyed_2"),
    ] {
        let e = wait_status(&server, source, event_id, "delivered").await;
        old_ids.push(e.id);
    }
    let received: Vec<String> = app
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(received.len(), 4, "{received:?}");
    let keyed: Vec<&String> = received
        .iter()
        .filter(|id| old_ids[8..].contains(id))
        .collect();
    assert_eq!(keyed, [&old_ids[8], &old_ids[9]], "in received order");
    assert!(
        audit.received().is_empty(),
        "old events keep their one route"
    );

    // The dedupe keys came along: a provider's retry is a duplicate.
    let body = json!({"id": "evt_ok_1", "type": "order.created", "ok": true})
        .to_string()
        .into_bytes();
    let again = server
        .post("/in/shop", &standard_headers("evt_ok_1", &body), body)
        .await;
    assert_eq!(again.status, 200);
    assert!(again.is_duplicate());
    assert_eq!(again.id(), old_ids[0]);

    // The dead one replays to its destination.
    let dead = &old_ids[3];
    server.api(TOKEN).replay(dead, None).await;
    wait_status(&server, "shop", "evt_refuse_1", "delivered").await;

    // A new event fans out to both destinations, under a new id.
    let body = json!({"id": "evt_new", "type": "order.created", "ok": true})
        .to_string()
        .into_bytes();
    let new = server
        .post("/in/shop", &standard_headers("evt_new", &body), body)
        .await;
    assert_eq!(new.status, 200, "{:?}", new.json);
    assert!(!old_ids.contains(&new.id().to_owned()));
    assert_eq!(&new.id()[..12], &old_ids[0][..12], "the database's tag");
    let e = wait_status(&server, "shop", "evt_new", "delivered").await;
    let routes: Vec<&str> = e
        .deliveries
        .iter()
        .map(|d| d.destination.as_str())
        .collect();
    assert_eq!(routes, ["shop", "shop.audit"]);
    assert_eq!(audit.received().len(), 1);
    server.stop().await;
    assert_eq!(
        schema_version(dir.path()),
        hookinbox::store::schema::SCHEMA_VERSION,
        "marked as migrated"
    );

    // And it opens again as it is.
    let server = TestServer::start(&config(dir.path(), &app, &audit), Clock::system()).await;
    assert_eq!(server.events().len(), 11);
    server.stop().await;
}

#[tokio::test]
async fn a_database_the_previous_version_closed_opens_with_every_event() {
    opens_and_keeps_everything("clean").await;
}

#[tokio::test]
async fn a_database_the_previous_version_crashed_on_replays_its_log() {
    opens_and_keeps_everything("crashed").await;
}
