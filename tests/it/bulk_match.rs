//! Bulk changes that look inside payloads: `q` and `match` in a bulk
//! filter, over real HTTP: the dry run counts exactly the dead events
//! whose payload matches, the change touches only them, the answer says
//! how many payloads were read, a bad match is a 400 with nothing changed,
//! and the CLI's `dlq` commands take `--q` and `--match`.

use std::time::Duration;

use serde_json::json;

use crate::destination::{Destination, Mode};
use crate::support::*;
use hookinbox::clock::Clock;

const ADMIN: &str = "bulk-match-admin-token-0123456789";

async fn dead(server: &TestServer, n: usize) {
    eventually(
        "every event dead",
        Duration::from_secs(10),
        Duration::from_millis(20),
        async || {
            let page = server
                .admin(
                    "GET",
                    "/api/events?status=dead&limit=500",
                    Some(ADMIN),
                    None,
                )
                .await;
            match page.json["events"].as_array().map(Vec::len) {
                Some(got) if got == n => Ok(()),
                got => Err(format!("{got:?}")),
            }
        },
    )
    .await;
}

async fn statuses(server: &TestServer) -> Vec<(String, String)> {
    let page = server
        .admin("GET", "/api/events?limit=500", Some(ADMIN), None)
        .await;
    let mut out: Vec<(String, String)> = page.json["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["event_id"].as_str().unwrap().to_owned(),
                e["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
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

    let filter = json!({"status": "dead", "match": "/data/customer=cus_b"});
    let dry = server
        .admin(
            "POST",
            "/api/ignore",
            Some(ADMIN),
            Some(json!({"filter": filter, "dry_run": true, "note": "dry"})),
        )
        .await;
    assert_eq!(dry.status, 200, "{:?}", dry.json);
    assert_eq!(dry.json["matched"], 4);
    assert_eq!(dry.json["examined"], 12);
    let before = statuses(&server).await;
    assert!(before.iter().all(|(_, s)| s == "dead"));

    let done = server
        .admin(
            "POST",
            "/api/ignore",
            Some(ADMIN),
            Some(json!({"filter": filter, "note": "cus_b closed their account"})),
        )
        .await;
    assert_eq!(done.status, 200, "{:?}", done.json);
    assert_eq!(
        (done.json["matched"].clone(), done.json["changed"].clone()),
        (json!(4), json!(4))
    );
    let after = statuses(&server).await;
    for (event_id, status) in &after {
        let i: usize = event_id[4..].parse().unwrap();
        let want = if i % 3 == 1 { "ignored" } else { "dead" };
        assert_eq!(status, want, "{event_id}");
    }

    // Text, with the list's filters: the vip events still dead (a, c).
    let q = server
        .admin(
            "POST",
            "/api/replay",
            Some(ADMIN),
            Some(json!({"filter": {"status": "dead", "q": "vip-"}, "dry_run": true})),
        )
        .await;
    assert_eq!(q.json["matched"], 4, "{:?}", q.json);

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
    let trail = server
        .admin("GET", "/api/audit?action=bulk_ignore", Some(ADMIN), None)
        .await;
    let entries = trail.json["entries"].as_array().unwrap();
    let ignored = entries
        .iter()
        .find(|e| e["outcome"]["changed"] == 4)
        .unwrap();
    assert_eq!(ignored["filter"]["match"], "/data/customer=cus_b");

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
