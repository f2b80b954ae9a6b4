//! Bulk changes that look inside payloads: `q` and `match` in a bulk
//! filter, over real HTTP: the dry run counts exactly the dead events
//! whose payload matches, the change touches only them, the answer says
//! how many payloads were read, a bad match is a 400 with nothing changed,
//! and the CLI's `dlq` commands take `--q` and `--match`.

use std::time::Duration;

use serde_json::json;

use crate::destination::{Destination, Mode};
use crate::support::*;
use hookinbox::api::{AuditAction, BulkRequest, EventQuery, EventStatus};
use hookinbox::clock::Clock;

const ADMIN: &str = "bulk-match-admin-token-0123456789";

async fn dead(server: &TestServer, n: usize) {
    eventually(
        "every event dead",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || {
            let page = server.api(ADMIN).events("status=dead&limit=500").await;
            match page.events.len() {
                got if got == n => Ok(()),
                got => Err(format!("{got}")),
            }
        },
    )
    .await;
}

async fn statuses(server: &TestServer) -> Vec<(String, String)> {
    let page = server.api(ADMIN).events("limit=500").await;
    let mut out: Vec<(String, String)> = page
        .events
        .into_iter()
        .map(|e| (e.event_id, e.status.as_str().to_owned()))
        .collect();
    out.sort();
    out
}

/// Dead events whose payload's value at the pointer is the one `pointer_match` gives.
fn dead_matching(pointer_match: &str) -> EventQuery {
    EventQuery {
        status: Some(EventStatus::Dead),
        pointer_match: Some(pointer_match.to_owned()),
        ..EventQuery::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_change_with_a_payload_match_touches_only_the_events_whose_payload_matches() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Status(422, "no such customer")).await;
    let config = format!(
        "{}[admin]\ntoken = \"{ADMIN}\"\n\n{}destination = \"{}\"\n",
        server_section(&dir.path().join("data")),
        standard_source("shop"),
        dest.url()
    );
    let server = TestServer::start(&config, Clock::system()).await;
    // Customers a, b, c in turn; the note "vip" in every third.
    for i in 0..12 {
        let customer = ["cus_a", "cus_b", "cus_c"][i % 3];
        let note = if i % 3 == 0 { "vip" } else { "plain" };
        let body = format!(
            r#"{{"type":"invoice.paid","data":{{"customer":"{customer}","note":"{note}-{i}"}}}}"#
        );
        let a = server
            .post(
                "/in/shop",
                &standard_headers(&format!("evt_{i:02}"), body.as_bytes()),
                body,
            )
            .await;
        assert_eq!(a.status, 200);
    }
    dead(&server, 12).await;

    let api = server.api(ADMIN);
    let dry = api
        .bulk_ignore(&BulkRequest {
            filter: dead_matching("/data/customer=cus_b"),
            dry_run: true,
            note: Some("dry".to_owned()),
        })
        .await;
    assert_eq!(dry.matched, 4, "{dry:?}");
    assert_eq!(dry.examined, Some(12), "{dry:?}");
    let before = statuses(&server).await;
    assert!(before.iter().all(|(_, s)| s == "dead"));

    let done = api
        .bulk_ignore(&BulkRequest {
            filter: dead_matching("/data/customer=cus_b"),
            dry_run: false,
            note: Some("cus_b closed their account".to_owned()),
        })
        .await;
    assert_eq!((done.matched, done.changed), (4, 4), "{done:?}");
    let after = statuses(&server).await;
    for (event_id, status) in &after {
        let i: usize = event_id[4..].parse().unwrap();
        let want = if i % 3 == 1 { "ignored" } else { "dead" };
        assert_eq!(status, want, "{event_id}");
    }

    // Text, with the list's filters: the vip events still dead (a, c).
    let q = api
        .bulk_replay(&BulkRequest {
            filter: EventQuery {
                status: Some(EventStatus::Dead),
                q: Some("vip-".to_owned()),
                ..EventQuery::default()
            },
            dry_run: true,
            note: None,
        })
        .await;
    assert_eq!(q.matched, 4, "{q:?}");

    // A bad match is a 400, and nothing changes.
    for bad in [
        json!({"match": "customer=cus_a"}),
        json!({"q": ""}),
        json!({"status": "dead", "cursor": 5}),
    ] {
        let refused = server
            .admin(
                "POST",
                "/api/ignore",
                Some(ADMIN),
                Some(json!({"filter": bad, "note": "x"})),
            )
            .await;
        assert_eq!(refused.status, 400, "{bad}: {:?}", refused.json);
    }
    assert_eq!(statuses(&server).await, after);

    // The audit trail has the match in the bulk change's filter.
    let trail = api.audit("action=bulk_ignore").await;
    let ignored = trail
        .entries
        .iter()
        .find(|e| e.outcome.as_ref().and_then(|o| o.changed) == Some(4))
        .unwrap();
    assert_eq!(ignored.action, AuditAction::BulkIgnore);
    assert_eq!(ignored.filter["match"], "/data/customer=cus_b");

    // The CLI: a dry run with --match says how many payloads it read.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookinbox"))
        .args([
            "dlq",
            "replay",
            "--match",
            "/data/customer=cus_c",
            "--dry-run",
        ])
        .arg("--admin")
        .arg(server.admin_url(""))
        .env("HOOKINBOX_ADMIN_TOKEN", ADMIN)
        .env_remove("HOOKINBOX_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(text, "dry run: 4 events match (8 payloads read)\n");
    server.stop().await;
}
