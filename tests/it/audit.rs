//! The audit trail on the real admin API: every change a person asks and
//! every one refused them (role, expired token) is recorded with who, when,
//! what, the note and the outcome; `GET /api/audit` filters and pages it;
//! no record holds a token or a payload byte; a backup holds the trail;
//! and after kill -9 of the real binary every change answered 2xx is there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;
use hookinbox::api::{AuditAction, AuditEntry, Role};
use hookinbox::clock::Clock;

const ADMIN: &str = "the-admin-token-0123456789";
const VIEWER: &str = "vera-viewer-token-0123456789";
const OPERATOR: &str = "otto-operator-token-0123456789";
const EXPIRED: &str = "old-operator-token-0123456789";
/// In every event's payload: no audit record may hold it.
const MARKER: &str = "PAYLOAD-MARKER-7f3a";

fn config(data: &std::path::Path) -> String {
    format!(
        "{}[admin]\ntoken = \"{ADMIN}\"\n\n\
         [[admin.user]]\nname = \"vera\"\nrole = \"viewer\"\ntoken = \"{VIEWER}\"\n\n\
         [[admin.user]]\nname = \"otto\"\nrole = \"operator\"\ntoken = \"{OPERATOR}\"\n\n\
         [[admin.user]]\nname = \"old\"\nrole = \"operator\"\ntoken = \"{EXPIRED}\"\nexpires = \"2020-01-01T00:00:00Z\"\n\n\
         {}{}destination = \"http://127.0.0.1:9/\"\n",
        server_section(data),
        standard_source("demo"),
        standard_source("app")
    )
}

async fn ingest(server: &TestServer, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let body = format!("{{\"id\":\"evt_{i}\",\"type\":\"t\",\"secret\":\"{MARKER}\"}}");
        let a = server
            .post(
                "/in/demo",
                &standard_headers(&format!("evt_{i}"), body.as_bytes()),
                body,
            )
            .await;
        assert_eq!(a.status, 200, "{:?}", a.json);
        ids.push(a.id().to_owned());
    }
    ids
}

/// The trail's first page (`query`: `GET /api/audit`'s), as a viewer reads it.
async fn trail(server: &TestServer, query: &str) -> Vec<AuditEntry> {
    server.api(VIEWER).audit(query).await.entries
}

#[tokio::test]
async fn every_change_and_every_refusal_is_recorded_with_who_what_the_note_and_the_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(&dir.path().join("data")), Clock::system()).await;
    let ids = ingest(&server, 3).await;
    assert!(
        trail(&server, "").await.is_empty(),
        "reads are not recorded"
    );

    // (token, method, path, body, status)
    let calls: Vec<(&str, &str, String, Option<Value>, u16)> = vec![
        (
            OPERATOR,
            "POST",
            format!("/api/events/{}/ignore", ids[0]),
            Some(json!({"note": "the customer cancelled"})),
            200,
        ),
        (
            OPERATOR,
            "POST",
            format!("/api/events/{}/replay", ids[0]),
            None,
            409,
        ),
        (
            OPERATOR,
            "POST",
            "/api/ignore".into(),
            Some(
                json!({"filter": {"source": "demo", "status": "held"}, "dry_run": true, "note": "dry"}),
            ),
            200,
        ),
        (
            OPERATOR,
            "POST",
            "/api/destinations/app/pause".into(),
            None,
            200,
        ),
        (
            VIEWER,
            "POST",
            format!("/api/events/{}/ignore", ids[1]),
            Some(json!({"note": "not mine to do"})),
            403,
        ),
        (VIEWER, "POST", "/api/sweep".into(), None, 403),
        (
            EXPIRED,
            "POST",
            "/api/destinations/app/resume".into(),
            None,
            401,
        ),
        (
            ADMIN,
            "DELETE",
            format!("/api/events/{}", ids[2]),
            Some(json!({"note": "erasure request 42"})),
            200,
        ),
        (ADMIN, "POST", "/api/sweep".into(), None, 200),
        (ADMIN, "GET", "/api/backup".into(), None, 200),
    ];
    let mut reasons = Vec::new();
    for (token, method, path, body, status) in &calls {
        let a = server.admin(method, path, Some(token), body.clone()).await;
        assert_eq!(a.status, *status, "{method} {path}: {:?}", a.json);
        reasons.push(a.json["reason"].as_str().map(str::to_owned));
    }

    let entries = trail(&server, "").await;
    assert_eq!(entries.len(), calls.len(), "{entries:#?}");
    // Newest first: the calls in reverse.
    let seen: Vec<(String, String, u16)> = entries
        .iter()
        .rev()
        .map(|e| {
            (
                e.person.clone(),
                e.action.as_str().to_owned(),
                e.outcome.as_ref().unwrap().status,
            )
        })
        .collect();
    let want: Vec<(String, String, u16)> = [
        ("otto", "ignore", 200),
        ("otto", "replay", 409),
        ("otto", "bulk_ignore", 200),
        ("otto", "pause", 200),
        ("vera", "ignore", 403),
        ("vera", "sweep", 403),
        ("old", "resume", 401),
        ("admin", "erase", 200),
        ("admin", "sweep", 200),
        ("admin", "backup", 200),
    ]
    .iter()
    .map(|(p, a, s)| (p.to_string(), a.to_string(), *s))
    .collect();
    assert_eq!(seen, want);
    // A refusal's error is what its caller was told.
    let errors: Vec<Option<String>> = entries
        .iter()
        .rev()
        .map(|e| e.outcome.as_ref().unwrap().error.clone())
        .collect();
    assert_eq!(errors, reasons);

    let by_action = |action: AuditAction, person: &str| {
        entries
            .iter()
            .find(|e| e.action == action && e.person == person)
            .unwrap()
            .clone()
    };
    let ignored = by_action(AuditAction::Ignore, "otto");
    assert_eq!(ignored.role, Role::Operator);
    assert_eq!(ignored.target.as_deref(), Some(ids[0].as_str()));
    assert_eq!(ignored.note.as_deref(), Some("the customer cancelled"));
    assert_eq!(ignored.outcome.as_ref().unwrap().error, None);
    let asked = std::time::UNIX_EPOCH + Duration::from_millis(ignored.at.0);
    let age = std::time::SystemTime::now().duration_since(asked).unwrap();
    assert!(age < Duration::from_secs(60), "at {:?}", ignored.at);

    let bulk = by_action(AuditAction::BulkIgnore, "otto");
    assert_eq!(
        bulk.filter,
        [
            ("source".to_owned(), "demo".to_owned()),
            ("status".to_owned(), "held".to_owned()),
        ]
        .into()
    );
    assert!(bulk.dry_run);
    assert_eq!(bulk.note.as_deref(), Some("dry"));
    let outcome = bulk.outcome.unwrap();
    assert_eq!((outcome.matched, outcome.changed), (Some(2), Some(0)));
    assert_eq!(
        by_action(AuditAction::Pause, "otto").target.as_deref(),
        Some("app")
    );
    let refused = by_action(AuditAction::Ignore, "vera");
    assert_eq!(refused.role, Role::Viewer);
    assert_eq!(
        refused.note.as_deref(),
        Some("not mine to do"),
        "a refusal records what was asked"
    );
    assert!(
        refused
            .outcome
            .as_ref()
            .and_then(|o| o.error.as_deref())
            .unwrap()
            .contains("needs the operator role; vera is a viewer"),
        "{refused:?}"
    );
    let expired = by_action(AuditAction::Resume, "old");
    assert!(
        expired
            .outcome
            .as_ref()
            .and_then(|o| o.error.as_deref())
            .unwrap()
            .contains("expired"),
        "{expired:?}"
    );
    assert_eq!(
        by_action(AuditAction::Erase, "admin").note.as_deref(),
        Some("erasure request 42")
    );

    // Filters and pages.
    let otto = trail(&server, "person=otto").await;
    assert_eq!(otto.len(), 4);
    assert!(otto.iter().all(|e| e.person == "otto"));
    let sweeps = trail(&server, "action=sweep").await;
    assert_eq!(sweeps.len(), 2);
    let page = server.api(VIEWER).audit("limit=3").await;
    let cursor = page.next_cursor.unwrap();
    let next = trail(&server, &format!("limit=3&cursor={cursor}")).await;
    assert_eq!(next[0].id, entries[3].id);
    for bad in ["?limit=0", "?action=launch", "?from=yesterday"] {
        let a = server
            .admin("GET", &format!("/api/audit{bad}"), Some(VIEWER), None)
            .await;
        assert_eq!(a.status, 400, "{bad}: {:?}", a.json);
    }
    let anonymous = server.admin("GET", "/api/audit", None, None).await;
    assert_eq!(anonymous.status, 401);

    // No token, no payload byte, in any record: the trail as sent, every
    // field of it, not only those the type reads; and a change that was
    // done has no error at all, not a null one.
    let raw = server.admin("GET", "/api/audit", Some(VIEWER), None).await;
    assert_eq!(raw.status, 200, "{:?}", raw.json);
    let first_ignore = raw.json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["action"] == "ignore")
        .unwrap();
    assert!(
        first_ignore["outcome"].get("error").is_none(),
        "{first_ignore}"
    );
    let text = raw.json["entries"].to_string();
    for secret in [ADMIN, VIEWER, OPERATOR, EXPIRED, MARKER] {
        assert!(!text.contains(secret), "{secret} in the trail: {text}");
    }
    server.stop().await;
}

/// A viewer's refused `POST /api/replay` was recorded without its filter,
/// so the trail could not say which events someone tried to change; an
/// expired token's refused bulk ignore too.
#[tokio::test]
async fn a_bulk_change_refused_for_the_role_is_recorded_with_its_filter() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(&dir.path().join("data")), Clock::system()).await;
    let asked = [
        (
            VIEWER,
            "/api/replay",
            json!({"filter": {"source": "demo", "status": "dead"}, "dry_run": true}),
            403,
        ),
        (
            EXPIRED,
            "/api/ignore",
            json!({"filter": {"source": "app", "type": "t"}, "note": "clean up"}),
            401,
        ),
    ];
    for (token, path, body, status) in &asked {
        let a = server
            .admin("POST", path, Some(token), Some(body.clone()))
            .await;
        assert_eq!(a.status, *status, "{path}: {:?}", a.json);
    }
    let entries = trail(&server, "").await;
    assert_eq!(entries.len(), 2, "{entries:#?}");
    let (ignore, replay) = (&entries[0], &entries[1]);
    let filter = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(
        (replay.person.as_str(), replay.action),
        ("vera", AuditAction::BulkReplay)
    );
    assert_eq!(
        replay.filter,
        filter(&[("source", "demo"), ("status", "dead")])
    );
    assert!(replay.dry_run);
    assert_eq!(replay.outcome.as_ref().unwrap().status, 403);
    assert_eq!(
        (ignore.person.as_str(), ignore.action),
        ("old", AuditAction::BulkIgnore)
    );
    assert_eq!(ignore.filter, filter(&[("source", "app"), ("type", "t")]));
    assert_eq!(ignore.note.as_deref(), Some("clean up"));
    assert_eq!(ignore.outcome.as_ref().unwrap().status, 401);
    server.stop().await;
}

/// A backup holds the trail: a server started on the backup's file lists
/// every record made before it.
#[tokio::test]
async fn a_backup_holds_the_trail() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(&dir.path().join("data")), Clock::system()).await;
    server.api(OPERATOR).pause("app").await;
    server.api(OPERATOR).resume("app").await;
    let before = trail(&server, "").await;
    let res = server
        .client
        .get(server.admin_url("/api/backup"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let bytes = res.bytes().await.unwrap();
    server.stop().await;

    let restored = dir.path().join("restored");
    std::fs::create_dir_all(&restored).unwrap();
    std::fs::write(restored.join(hookinbox::store::DB_FILE), &bytes).unwrap();
    let server = TestServer::start(&config(&restored), Clock::system()).await;
    let after = trail(&server, "").await;
    // The backup's own record is written once it is answered: after the copy.
    assert_eq!(after, before);
    assert_eq!(before.len(), 2);
    server.stop().await;
}

/// kill -9 of the real binary while two operators pause and resume with
/// notes: after the restart, every change that was answered 2xx is in the
/// trail with its outcome, and every record is whole.
#[tokio::test]
async fn after_kill_9_the_trail_holds_every_change_answered_2xx() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config_path = write_config(dir.path(), &config(&data));
    let mut server = BinaryServer::start(&config_path, &[], None);
    let admin = server.admin.clone();
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for worker in 0..4 {
        let (admin, stop) = (admin.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let http = client();
            let mut answered = Vec::new();
            for n in 0..2_000 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let note = format!("w{worker}-n{n}");
                let path = if n % 2 == 0 { "pause" } else { "resume" };
                let sent = http
                    .post(format!("{admin}/api/events/nope-{worker}-{n}/ignore"))
                    .bearer_auth(OPERATOR)
                    .json(&json!({ "note": note }))
                    .send()
                    .await;
                // The kill cuts some calls: only those answered count.
                if matches!(&sent, Ok(r) if r.status() == 404) {
                    answered.push((note.clone(), 404u64));
                }
                let sent = http
                    .post(format!("{admin}/api/destinations/app/{path}?note={note}"))
                    .bearer_auth(OPERATOR)
                    .send()
                    .await;
                if matches!(&sent, Ok(r) if r.status() == 200) {
                    answered.push((format!("{note}-{path}"), 200));
                }
            }
            answered
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill9();
    stop.store(true, Ordering::Relaxed);
    let mut answered = Vec::new();
    for w in workers {
        answered.extend(w.await.unwrap());
    }
    assert!(
        answered.len() > 20,
        "the kill must land mid-load: {}",
        answered.len()
    );

    let server = BinaryServer::start(&config_path, &[], None);
    let mut recorded = std::collections::HashMap::new();
    let mut cursor = String::new();
    loop {
        let page = admin_json(
            &server.admin,
            ADMIN,
            &format!("/api/audit?limit=500{cursor}"),
        )
        .await;
        for e in page["entries"].as_array().unwrap() {
            let note = e["note"].as_str().unwrap_or_default().to_owned();
            let key = match e["action"].as_str().unwrap() {
                "ignore" => note,
                action => format!("{note}-{action}"),
            };
            recorded.insert(key, e["outcome"]["status"].as_u64());
        }
        match page["next_cursor"].as_u64() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    for (key, status) in &answered {
        assert_eq!(
            recorded.get(key),
            Some(&Some(*status)),
            "{key}, answered {status}, is not in the trail with its outcome"
        );
    }
    let unanswered = recorded.values().filter(|s| s.is_none()).count();
    println!(
        "audit kill -9: {} changes answered before the kill, {} records after the restart, {unanswered} without an outcome",
        answered.len(),
        recorded.len()
    );
    assert!(
        unanswered <= 8,
        "at most one in flight per call: {unanswered}"
    );
}

/// `hookinbox audit`: a person's change through the CLI is listed under
/// their name, the table and `--json` agree, a filter narrows, an unknown
/// action is a usage error, and a viewer's refused sweep is listed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_the_trail_and_its_own_changes_are_in_it() {
    use crate::roles::cli;
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(&dir.path().join("data")), Clock::system()).await;
    let (code, _, err) = cli(&server, OPERATOR, &["destinations", "pause", "app"]).await;
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = cli(&server, VIEWER, &["sweep"]).await;
    assert_eq!(code, 1, "a viewer's sweep is refused: {err}");

    let (code, out, err) = cli(&server, VIEWER, &["audit"]).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("NOTE OR ERROR"),
        "{out}"
    );
    assert!(
        lines[1].contains("vera (viewer)")
            && lines[1].contains("sweep")
            && lines[1].contains("403"),
        "{out}"
    );
    assert!(
        lines[2].contains("otto (operator)")
            && lines[2].contains("pause")
            && lines[2].contains("app")
            && lines[2].contains("200"),
        "{out}"
    );

    let (code, out, err) = cli(&server, VIEWER, &["audit", "--person", "otto", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    let entries = page["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{out}");
    assert_eq!(entries[0]["action"], "pause");
    assert_eq!(entries[0]["outcome"]["status"], 200);

    // Every page with --json: one array of the records, as every listing
    // prints it (this printed an array of pages); --cursor pages on.
    let (code, out, err) = cli(
        &server,
        VIEWER,
        &["audit", "--limit", "1", "--all", "--json"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let all: Vec<Value> = serde_json::from_str(&out).expect(&out);
    let actions: Vec<&str> = all.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["sweep", "pause"], "{out}");
    let (_, out, _) = cli(&server, VIEWER, &["audit", "--limit", "1"]).await;
    let next = out
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("more: --cursor "))
        .expect(&out)
        .to_owned();
    let (code, out, err) = cli(
        &server,
        VIEWER,
        &["audit", "--limit", "1", "--cursor", &next],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("otto (operator)") && !out.contains("vera"),
        "{out}"
    );

    let (code, _, err) = cli(&server, VIEWER, &["audit", "--action", "launch"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown action \"launch\""), "{err}");
    server.stop().await;
}
