//! Named operators and their roles on the real admin API: each role against
//! each path that changes something (allowed, or 403 naming the role needed
//! and nothing changed), reading for every role, `whoami`, an expired token
//! and a token given as its SHA-256.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::*;
use hookinbox::api::{Destinations, EventPage, Role};
use hookinbox::clock::Clock;

const ADMIN: &str = "the-admin-token-0123456789";
const VIEWER: &str = "vera-viewer-token-0123456789";
const OPERATOR: &str = "otto-operator-token-0123456789";
const ADMIN_USER: &str = "ada-admin-token-0123456789";
const EXPIRED: &str = "old-admin-token-0123456789";

fn config(data: &std::path::Path) -> String {
    let operator_hash = hex::encode(Sha256::digest(OPERATOR.as_bytes()));
    format!(
        "{}[admin]\ntoken = \"{ADMIN}\"\n\n\
         [[admin.user]]\nname = \"vera\"\nrole = \"viewer\"\ntoken = \"{VIEWER}\"\n\n\
         [[admin.user]]\nname = \"otto\"\nrole = \"operator\"\ntoken_sha256 = \"{operator_hash}\"\n\n\
         [[admin.user]]\nname = \"ada\"\nrole = \"admin\"\ntoken = \"{ADMIN_USER}\"\nexpires = \"2999-01-01T00:00:00Z\"\n\n\
         [[admin.user]]\nname = \"old\"\nrole = \"admin\"\ntoken = \"{EXPIRED}\"\nexpires = \"2020-01-01T00:00:00+01:00\"\n\n\
         {}{}destination = \"http://127.0.0.1:9/\"\n",
        server_section(data),
        standard_source("demo"),
        standard_source("app")
    )
}

/// Everything a change could touch, as the admin sees it. The events are
/// held (`demo` has no destination) and `app`, whose destination is
/// paused and resumed, has none, so nothing moves by itself.
async fn state(server: &TestServer) -> (EventPage, Destinations) {
    let api = server.api(ADMIN);
    (api.events("limit=500").await, api.destinations().await)
}

#[tokio::test]
async fn each_role_may_call_its_paths_and_gets_403_with_nothing_changed_on_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(&dir.path().join("data")), Clock::system()).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let body = format!("{{\"id\":\"evt_{i}\",\"type\":\"t\"}}");
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
    let id = &ids[0];
    let note = json!({"note": "roles test"});
    let bulk = json!({"filter": {"source": "demo"}, "dry_run": true});
    // (method, path, body, least role)
    let changes: Vec<(&str, String, Option<Value>, &str)> = vec![
        ("POST", format!("/api/events/{id}/replay"), None, "operator"),
        (
            "POST",
            format!("/api/events/{id}/ignore"),
            Some(note.clone()),
            "operator",
        ),
        ("POST", "/api/replay".into(), Some(bulk.clone()), "operator"),
        ("POST", "/api/ignore".into(), Some(bulk.clone()), "operator"),
        (
            "POST",
            "/api/destinations/demo/pause".into(),
            None,
            "operator",
        ),
        (
            "POST",
            "/api/destinations/demo/resume".into(),
            None,
            "operator",
        ),
        (
            "DELETE",
            format!("/api/events/{}", ids[1]),
            Some(note.clone()),
            "admin",
        ),
        ("POST", "/api/sweep".into(), None, "admin"),
        ("GET", "/api/backup".into(), None, "admin"),
        ("POST", "/api/replication/promote".into(), None, "admin"),
        (
            "DELETE",
            "/api/keys/k?namespace=n&note=x".into(),
            None,
            "admin",
        ),
    ];
    let rank = |role: &str| {
        ["viewer", "operator", "admin"]
            .iter()
            .position(|r| *r == role)
            .unwrap()
    };
    for (token, role) in [
        (VIEWER, "viewer"),
        (OPERATOR, "operator"),
        (ADMIN_USER, "admin"),
    ] {
        for (method, path, body, needed) in &changes {
            let before = state(&server).await;
            let a = server.admin(method, path, Some(token), body.clone()).await;
            if rank(role) >= rank(needed) {
                assert!(
                    ![401, 403].contains(&a.status),
                    "{role} {method} {path}: {} {:?}",
                    a.status,
                    a.json
                );
            } else {
                assert_eq!(a.status, 403, "{role} {method} {path}: {:?}", a.json);
                assert_eq!(a.json["error"], "forbidden");
                assert_eq!(a.json["role_needed"], *needed, "{role} {method} {path}");
                let reason = a.json["reason"].as_str().unwrap();
                assert!(reason.contains(needed) && reason.contains(role), "{reason}");
                assert_eq!(
                    state(&server).await,
                    before,
                    "{role} {method} {path} changed something"
                );
            }
        }
        // Every role reads.
        for path in [
            "/api/events",
            &format!("/api/events/{}", ids[2]),
            "/api/stats",
            "/api/destinations",
            "/metrics",
        ] {
            let a = server.admin("GET", path, Some(token), None).await;
            assert_eq!(a.status, 200, "{role} GET {path}");
        }
    }
    server.stop().await;
}

#[tokio::test]
async fn whoami_names_the_token_and_an_expired_or_unknown_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(&dir.path().join("data")), Clock::system()).await;
    for (token, name, role) in [
        (ADMIN, "admin", Role::Admin),
        (VIEWER, "vera", Role::Viewer),
        (OPERATOR, "otto", Role::Operator),
        (ADMIN_USER, "ada", Role::Admin),
    ] {
        let me = server.api(token).whoami().await;
        assert_eq!((me.name.as_str(), me.role), (name, role));
    }
    let ada = server
        .admin("GET", "/api/whoami", Some(ADMIN_USER), None)
        .await;
    assert_eq!(ada.json["expires"], "2999-01-01T00:00:00.000Z");
    let old = server
        .admin("GET", "/api/whoami", Some(EXPIRED), None)
        .await;
    assert_eq!(old.status, 401, "{:?}", old.json);
    let reason = old.json["reason"].as_str().unwrap();
    assert!(
        reason.contains("old") && reason.contains("expired at 2019-12-31T23:00:00Z"),
        "{reason}"
    );
    assert_eq!(
        server
            .admin("POST", "/api/sweep", Some(EXPIRED), None)
            .await
            .status,
        401
    );
    let wrong = server
        .admin("GET", "/api/whoami", Some("not-a-token-0123456789"), None)
        .await;
    assert_eq!(wrong.status, 401);
    // No token text in any answer.
    for a in [&old, &wrong] {
        let text = a.json.to_string();
        assert!(
            !text.contains(EXPIRED) && !text.contains("not-a-token"),
            "{text}"
        );
    }
    server.stop().await;
}

/// `hookinbox` with `token` (in a file) against the server's admin API:
/// (exit code, stdout, stderr).
pub(crate) async fn cli(server: &TestServer, token: &str, args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hookinbox"));
    command
        .args(args)
        .arg("--admin")
        .arg(server.admin_url(""))
        .arg("--token-file")
        .arg(&file)
        .env_remove("HOOKINBOX_CONFIG")
        .env_remove("HOOKINBOX_ADMIN_TOKEN");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_says_whose_token_it_uses_and_what_the_role_may_not_do() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(&dir.path().join("data")), Clock::system()).await;
    let (code, out, err) = cli(&server, VIEWER, &["whoami"]).await;
    assert_eq!((code, out.as_str()), (0, "vera (viewer)\n"), "{err}");
    let (code, out, _) = cli(&server, ADMIN_USER, &["whoami", "--json"]).await;
    assert_eq!(code, 0);
    let me: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (me["name"].as_str(), me["role"].as_str()),
        (Some("ada"), Some("admin"))
    );
    let (code, _, err) = cli(&server, VIEWER, &["sweep"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("POST /api/sweep needs the admin role; vera is a viewer"),
        "{err}"
    );
    let (code, _, err) = cli(&server, EXPIRED, &["stats"]).await;
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("the token of old expired at"), "{err}");
    assert!(!err.contains(EXPIRED), "{err}");
    server.stop().await;
}
