//! Idempotency keys over HTTP against the real server (issue 28): one
//! winner among concurrent claims, a lapsed lease handed on under a larger
//! token with the late worker fenced off, done keys answering their result,
//! release and extend, each bad input refused without a change, and the two
//! kinds of token kept to their own paths and namespaces.

use std::time::Duration;

use hookinbox::api::{KeyStateName, KeyView};
use hookinbox::clock::Clock;
use hookinbox::words::AdminReason;

use crate::support::sample;
use serde_json::{Value, json};

use crate::support::{Answer, TestServer, eventually, server_section, standard_source};

const ADMIN: &str = "test-admin-token-0123456789";
const SHOP: &str = "shop-keys-token-0123";
const MAIL: &str = "mail-keys-token-0123";

fn config(dir: &std::path::Path) -> String {
    format!(
        r#"{}[admin]
token = "{ADMIN}"

[keys]
lease = "30s"

[[keys.client]]
name = "shop"
token = "{SHOP}"

[[keys.client]]
name = "mail"
namespace = "mailer"
token = "{MAIL}"

{}"#,
        server_section(dir),
        standard_source("inbox")
    )
}

async fn start() -> (tempfile::TempDir, TestServer) {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&config(dir.path()), Clock::system()).await;
    (dir, server)
}

/// `POST /api/keys/{key}/{action}` with `token` and a JSON body.
async fn call(server: &TestServer, token: &str, key: &str, action: &str, body: Value) -> Answer {
    server
        .admin(
            "POST",
            &format!("/api/keys/{key}/{action}"),
            Some(token),
            Some(body),
        )
        .await
}

/// `POST` with a body sent as is, not as JSON.
async fn call_raw(server: &TestServer, token: &str, path: &str, body: &str) -> Answer {
    let res = server
        .client
        .post(server.admin_url(path))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    crate::support::answer(res).await
}

async fn show(server: &TestServer, key: &str) -> Answer {
    server
        .admin("GET", &format!("/api/keys/{key}"), Some(SHOP), None)
        .await
}

/// The shop's key `key`, which must be there.
async fn key(server: &TestServer, key: &str) -> KeyView {
    server.api(SHOP).key(key, None).await
}

/// A done key's result as JSON (`null` when none was stored).
fn result_of(key: &KeyView) -> Value {
    key.result
        .as_ref()
        .map_or(Value::Null, |r| serde_json::from_str(r.get()).unwrap())
}

fn token_of(a: &Answer) -> u64 {
    assert_eq!(a.status, 201, "{:?}", a.json);
    a.json["token"].as_u64().unwrap()
}

#[tokio::test]
async fn a_hundred_concurrent_claims_of_a_new_key_have_one_winner() {
    let (_dir, server) = start().await;
    let server = std::sync::Arc::new(server);
    let mut claims = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let server = server.clone();
        claims.spawn(async move { call(&server, SHOP, "evt_1", "claim", json!({})).await });
    }
    let answers = claims.join_all().await;
    let won: Vec<_> = answers.iter().filter(|a| a.status == 201).collect();
    let busy: Vec<_> = answers.iter().filter(|a| a.status == 409).collect();
    assert_eq!((won.len(), busy.len()), (1, 99), "{answers:?}");
    assert_eq!(won[0].json["state"], "claimed");
    for a in busy {
        assert_eq!(a.json["state"], "busy", "{:?}", a.json);
        assert_eq!(a.json["lease_until"], won[0].json["lease_until"]);
        let after: u64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=30).contains(&after), "Retry-After {after}");
    }
}

#[tokio::test]
async fn a_lapsed_lease_goes_to_the_next_claimant_and_the_late_worker_is_fenced_off() {
    let (_dir, server) = start().await;
    let a = token_of(&call(&server, SHOP, "order:1", "claim", json!({"lease": "1s"})).await);
    // B retries as a busy answer tells it to, until A's lease has run out.
    let b = eventually(
        "A's lease runs out and B claims",
        Duration::from_secs(5),
        Duration::from_millis(100),
        async || {
            let answer = call(&server, SHOP, "order:1", "claim", json!({})).await;
            match answer.status {
                201 => Ok(token_of(&answer)),
                409 => Err(format!("{:?}", answer.json)),
                _ => panic!("{answer:?}"),
            }
        },
    )
    .await;
    assert!(b > a, "B's token {b} is larger than A's {a}");
    let done = call(
        &server,
        SHOP,
        "order:1",
        "complete",
        json!({"token": b, "result": {"by": "b"}}),
    )
    .await;
    assert_eq!(done.status, 200, "{:?}", done.json);
    assert_eq!(done.json["result"], json!({"by": "b"}));
    let late = call(
        &server,
        SHOP,
        "order:1",
        "complete",
        json!({"token": a, "result": {"by": "a"}}),
    )
    .await;
    assert_eq!((late.status, &late.json), (409, &json!({"state": "stale"})));
    let now = key(&server, "order:1").await;
    assert_eq!(now.state, KeyStateName::Done, "{now:?}");
    assert_eq!(result_of(&now), json!({"by": "b"}));
    assert_eq!(now.claims, Some(2));
}

#[tokio::test]
async fn a_completed_key_answers_done_with_its_result_to_every_later_claim() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "mail%2F42", "claim", json!({"ttl": "7d"})).await);
    let done = call(
        &server,
        SHOP,
        "mail%2F42",
        "complete",
        json!({"token": t, "result": [1, "two"]}),
    )
    .await;
    assert_eq!(done.status, 200, "{:?}", done.json);
    assert!(done.json["completed_at"].as_str().unwrap().ends_with('Z'));
    for _ in 0..2 {
        let again = call(&server, SHOP, "mail%2F42", "claim", json!({})).await;
        assert_eq!(again.status, 200, "{:?}", again.json);
        assert_eq!(again.json["state"], "done");
        assert_eq!(again.json["result"], json!([1, "two"]));
        assert_eq!(again.json["completed_at"], done.json["completed_at"]);
    }
    // The completer's retried complete is answered as done, not stale.
    let retried = call(&server, SHOP, "mail%2F42", "complete", json!({"token": t})).await;
    assert_eq!(retried.status, 200, "{:?}", retried.json);
    assert_eq!(retried.json["result"], json!([1, "two"]));
    // Without a result, done says null.
    let u = token_of(&call(&server, SHOP, "bare", "claim", json!({})).await);
    let bare = call(&server, SHOP, "bare", "complete", json!({"token": u})).await;
    assert_eq!(bare.json["result"], Value::Null);
    assert!(bare.json.as_object().unwrap().contains_key("result"));
    // The key as read back, every field: "mail/42" was percent-encoded.
    let read = key(&server, "mail%2F42").await;
    for (field, at) in [
        ("completed_at", read.completed_at),
        ("created_at", read.created_at),
        ("expires_at", read.expires_at),
    ] {
        assert!(at.is_some(), "{field}: {read:?}");
    }
    assert_eq!(read.claims, Some(1));
}

#[tokio::test]
async fn release_frees_a_key_and_extend_moves_its_lease() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "k", "claim", json!({"lease": "5s"})).await);
    let extended = call(
        &server,
        SHOP,
        "k",
        "extend",
        json!({"token": t, "lease": "10m"}),
    )
    .await;
    assert_eq!(extended.status, 200, "{:?}", extended.json);
    assert_eq!(extended.json["token"], t);
    let busy = call(&server, SHOP, "k", "claim", json!({})).await;
    assert_eq!(busy.status, 409);
    let after: u64 = busy.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        after > 500,
        "the lease was extended to 10m: Retry-After {after}"
    );
    let wrong = call(&server, SHOP, "k", "release", json!({"token": t + 1000})).await;
    assert_eq!(
        (wrong.status, &wrong.json),
        (409, &json!({"state": "stale"}))
    );
    let freed = call(&server, SHOP, "k", "release", json!({"token": t})).await;
    assert_eq!(
        (freed.status, &freed.json),
        (200, &json!({"state": "free"}))
    );
    assert_eq!(show(&server, "k").await.status, 404);
    let gone = call(&server, SHOP, "k", "release", json!({"token": t})).await;
    assert_eq!(gone.status, 404, "{:?}", gone.json);
    let extend_gone = call(&server, SHOP, "k", "extend", json!({"token": t})).await;
    assert_eq!(extend_gone.status, 404, "{:?}", extend_gone.json);
    let complete_gone = call(&server, SHOP, "k", "complete", json!({"token": t})).await;
    assert_eq!(complete_gone.status, 404, "{:?}", complete_gone.json);
    let next = token_of(&call(&server, SHOP, "k", "claim", json!({})).await);
    assert!(next > t);
}

#[tokio::test]
async fn each_bad_input_is_refused_with_its_reason_and_changes_nothing() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "k", "claim", json!({})).await);
    let before = show(&server, "k").await.json;
    let long_key = "x".repeat(257);
    let big = format!(r#"{{"token": {t}, "result": "{}"}}"#, "x".repeat(64 * 1024));
    let cases: Vec<(String, String, u16, &str)> = vec![
        (
            format!("/api/keys/{long_key}/claim"),
            "{}".into(),
            400,
            "1 to 256 bytes",
        ),
        (
            "/api/keys//claim".into(),
            "{}".into(),
            400,
            "this one is 0 bytes",
        ),
        (
            "/api/keys//complete".into(),
            "{}".into(),
            400,
            "this one is 0 bytes",
        ),
        (
            "/api/keys/k/claim".into(),
            r#"{"lease": "0s"}"#.into(),
            400,
            "lease: must be from 1s to 1h",
        ),
        (
            "/api/keys/k/claim".into(),
            r#"{"lease": "2h"}"#.into(),
            400,
            "lease: must be from 1s to 1h",
        ),
        (
            "/api/keys/k/claim".into(),
            r#"{"lease": "soon"}"#.into(),
            400,
            "is not a duration",
        ),
        (
            "/api/keys/k/claim".into(),
            r#"{"ttl": "0s"}"#.into(),
            400,
            "ttl: must be from 1s",
        ),
        (
            "/api/keys/k/claim".into(),
            r#"{"ttl": "366d"}"#.into(),
            400,
            "ttl: must be from 1s to 365d",
        ),
        (
            "/api/keys/k/claim".into(),
            r#"{"lease": "5s", "owner": "me"}"#.into(),
            400,
            "unknown field `owner`",
        ),
        (
            "/api/keys/k/complete".into(),
            big,
            413,
            "at most 65536 bytes",
        ),
        (
            "/api/keys/k/complete".into(),
            format!(r#"{{"token": {t}, "result": nope}}"#),
            400,
            "not what this path takes",
        ),
        (
            "/api/keys/k/complete".into(),
            r#"{"result": 1}"#.into(),
            400,
            "missing field `token`",
        ),
        (
            "/api/keys/k/complete".into(),
            r#"{"token": "abc"}"#.into(),
            400,
            "invalid type",
        ),
        (
            "/api/keys/k/release".into(),
            "".into(),
            400,
            "not what this path takes",
        ),
        (
            "/api/keys/k/extend".into(),
            format!(r#"{{"token": {t}, "lease": "0s"}}"#),
            400,
            "lease: must be",
        ),
        (
            "/api/keys/k/extend".into(),
            format!(r#"{{"token": {t}, "lease": "61m"}}"#),
            400,
            "lease: must be",
        ),
    ];
    for (path, body, status, reason) in cases {
        let refused_before = server.metrics().admin_rejected_count(if status == 413 {
            AdminReason::PayloadTooLarge
        } else {
            AdminReason::BadRequest
        });
        let a = call_raw(&server, SHOP, &path, &body).await;
        assert_eq!(a.status, status, "{path} {:?}", a.json);
        let said = a.json["reason"].as_str().unwrap_or_default();
        assert!(said.contains(reason), "{path}: {said:?} lacks {reason:?}");
        assert!(
            !said.contains("xxxxxxxxxx"),
            "the reason quotes the body: {said}"
        );
        let refused_after = server.metrics().admin_rejected_count(if status == 413 {
            AdminReason::PayloadTooLarge
        } else {
            AdminReason::BadRequest
        });
        assert_eq!(refused_after, refused_before + 1, "{path}: counted once");
        assert_eq!(
            show(&server, "k").await.json,
            before,
            "{path}: the key changed"
        );
    }
    assert_eq!(show(&server, &long_key).await.status, 400);
}

#[tokio::test]
async fn each_token_reaches_only_its_own_paths_and_namespace() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "k", "claim", json!({})).await);
    // The admin token changes no key but by delete.
    for action in ["claim", "complete", "release", "extend"] {
        let a = call(&server, ADMIN, "k", action, json!({"token": t})).await;
        assert_eq!(a.status, 403, "{action}: {:?}", a.json);
        assert!(
            a.json["reason"]
                .as_str()
                .unwrap()
                .contains("[[keys.client]] token"),
            "{:?}",
            a.json
        );
    }
    let forbidden_before = server
        .metrics()
        .admin_rejected_count(AdminReason::Forbidden);
    // A client reaches its own namespace only: mail's "k" is another key.
    let other = call(&server, MAIL, "k", "claim", json!({})).await;
    assert_eq!(other.status, 201, "{:?}", other.json);
    assert_ne!(other.json["token"], t);
    let a = server
        .admin("GET", "/api/keys/k?namespace=mailer", Some(SHOP), None)
        .await;
    assert_eq!(a.status, 403, "{:?}", a.json);
    let a = server
        .admin(
            "POST",
            "/api/keys/k/claim?namespace=mailer",
            Some(SHOP),
            None,
        )
        .await;
    assert_eq!(a.status, 403, "{:?}", a.json);
    assert_eq!(
        server
            .admin("GET", "/api/keys/k?namespace=shop", Some(SHOP), None)
            .await
            .status,
        200
    );
    // A client's token reaches no other admin path, and deletes nothing.
    let a = server
        .admin(
            "DELETE",
            "/api/keys/k?namespace=shop&note=x",
            Some(SHOP),
            None,
        )
        .await;
    assert_eq!(a.status, 403, "{:?}", a.json);
    assert!(a.json["reason"].as_str().unwrap().contains("admin token"));
    let a = server.admin("GET", "/api/events", Some(SHOP), None).await;
    assert_eq!(a.status, 403, "{:?}", a.json);
    assert_eq!(
        server
            .metrics()
            .admin_rejected_count(AdminReason::Forbidden),
        forbidden_before + 4
    );
    // No token, or an unknown one.
    for token in [None, Some("not-a-token")] {
        let a = server
            .admin("POST", "/api/keys/k/claim", token, Some(json!({})))
            .await;
        assert_eq!(a.status, 401, "{:?}", a.json);
        let a = server.admin("GET", "/api/keys/k", token, None).await;
        assert_eq!(a.status, 401, "{:?}", a.json);
    }
    // The admin token reads any namespace it names, and must name one.
    let a = server.admin("GET", "/api/keys/k", Some(ADMIN), None).await;
    assert_eq!(a.status, 400, "{:?}", a.json);
    for ns in ["shop", "mailer"] {
        let a = server.api(ADMIN).key("k", Some(ns)).await;
        assert_eq!(a.state, KeyStateName::Claimed, "{ns}");
    }
    assert_eq!(key(&server, "k").await.token, Some(t), "nothing changed");
}

#[tokio::test]
async fn deleting_a_key_needs_the_admin_token_a_namespace_and_a_note() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "k", "claim", json!({})).await);
    for (path, reason) in [
        ("/api/keys/k?namespace=shop", "note"),
        ("/api/keys/k?namespace=shop&note=", "note"),
        ("/api/keys/k?note=stuck", "namespace"),
    ] {
        let a = server.admin("DELETE", path, Some(ADMIN), None).await;
        assert_eq!(a.status, 400, "{path}: {:?}", a.json);
        assert!(
            a.json["reason"].as_str().unwrap().contains(reason),
            "{:?}",
            a.json
        );
        assert_eq!(key(&server, "k").await.token, Some(t));
    }
    let a = server
        .admin(
            "DELETE",
            "/api/keys/k?namespace=shop&note=worker%20died",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!((a.status, &a.json), (200, &json!({"state": "free"})));
    assert_eq!(show(&server, "k").await.status, 404);
    let a = server
        .admin(
            "DELETE",
            "/api/keys/k?namespace=shop&note=again",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(a.status, 404, "{:?}", a.json);
    let stale = call(&server, SHOP, "k", "complete", json!({"token": t})).await;
    assert_eq!(stale.status, 404, "{:?}", stale.json);
}

#[tokio::test]
async fn the_openapi_document_has_every_key_path() {
    let (_dir, server) = start().await;
    let doc = server.admin("GET", "/api/openapi.json", None, None).await;
    let paths = doc.json["paths"].as_object().unwrap();
    for path in ["claim", "complete", "release", "extend"] {
        let path = format!("/api/keys/{{key}}/{path}");
        assert!(paths[&path]["post"].is_object(), "{path}");
    }
    assert!(paths["/api/keys/{key}"]["get"].is_object());
    assert!(paths["/api/keys/{key}"]["delete"].is_object());
    assert!(paths["/api/key-namespaces"]["get"].is_object());
    let out = crate::support::python("validate_openapi.py", doc.json.to_string().as_bytes());
    assert!(
        out.status.success(),
        "{}{} ({})",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        crate::support::PYTHON_SETUP
    );
}

#[tokio::test]
async fn claims_lapsed_leases_and_stored_keys_are_counted_per_configured_namespace() {
    let (_dir, server) = start().await;
    let scrape = async || {
        let a = server.admin("GET", "/metrics", Some(ADMIN), None).await;
        assert_eq!(a.status, 200);
        a.json.as_str().unwrap().to_owned()
    };
    let text = scrape().await;
    for ns in ["shop", "mailer"] {
        for outcome in ["claimed", "done", "busy"] {
            let series =
                format!("hookinbox_key_claims_total{{namespace=\"{ns}\",outcome=\"{outcome}\"}}");
            assert_eq!(sample(&text, &series), 0.0, "{series} is there at 0");
        }
        let series = format!("hookinbox_key_leases_expired_total{{namespace=\"{ns}\"}}");
        assert_eq!(sample(&text, &series), 0.0);
    }
    assert_eq!(sample(&text, "hookinbox_keys_stored"), 0.0);

    let t = token_of(&call(&server, SHOP, "k", "claim", json!({})).await);
    assert_eq!(
        call(&server, SHOP, "k", "claim", json!({})).await.status,
        409
    );
    call(&server, SHOP, "k", "complete", json!({"token": t})).await;
    assert_eq!(
        call(&server, SHOP, "k", "claim", json!({})).await.status,
        200
    );
    token_of(&call(&server, SHOP, "lapse", "claim", json!({"lease": "1s"})).await);
    eventually(
        "the 1s lease runs out and a claim takes it over",
        Duration::from_secs(5),
        Duration::from_millis(100),
        async || match call(&server, SHOP, "lapse", "claim", json!({}))
            .await
            .status
        {
            201 => Ok(()),
            status => Err(format!("{status}")),
        },
    )
    .await;
    let text = scrape().await;
    let claims = |outcome: &str| {
        sample(
            &text,
            &format!("hookinbox_key_claims_total{{namespace=\"shop\",outcome=\"{outcome}\"}}"),
        )
    };
    assert_eq!(claims("claimed"), 3.0, "k, lapse, and lapse taken over");
    assert_eq!(claims("done"), 1.0);
    assert!(claims("busy") >= 1.0);
    assert_eq!(
        sample(
            &text,
            "hookinbox_key_leases_expired_total{namespace=\"shop\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "hookinbox_key_claims_total{namespace=\"mailer\",outcome=\"claimed\"}"
        ),
        0.0
    );
    assert_eq!(sample(&text, "hookinbox_keys_stored"), 2.0);
}

/// `GET /api/keys` (admin token): a namespace's keys, the most recently
/// changed first, a page at a time, by state.
#[tokio::test]
async fn the_admin_lists_a_namespaces_keys_in_pages_by_state() {
    let (_dir, server) = start().await;
    for k in ["a", "b", "c"] {
        let t = token_of(&call(&server, SHOP, k, "claim", json!({})).await);
        if k != "b" {
            call(
                &server,
                SHOP,
                k,
                "complete",
                json!({"token": t, "result": k}),
            )
            .await;
        }
    }
    token_of(&call(&server, MAIL, "z", "claim", json!({})).await);
    let list = async |query: &str| {
        let page = server.api(ADMIN).keys(query).await;
        let keys: Vec<String> = page
            .keys
            .into_iter()
            .map(|k| k.key.expect("a listed key names itself"))
            .collect();
        (keys, page.next_after)
    };
    assert_eq!(
        list("namespace=shop").await,
        (vec!["c".into(), "b".into(), "a".into()], None)
    );
    let (first, next) = list("namespace=shop&limit=2").await;
    assert_eq!(first, ["c", "b"]);
    let next = next.expect("a cursor");
    assert_eq!(
        list(&format!("namespace=shop&limit=2&after={next}")).await,
        (vec!["a".into()], None)
    );
    assert_eq!(list("namespace=shop&state=done").await.0, ["c", "a"]);
    assert_eq!(list("namespace=shop&state=claimed").await.0, ["b"]);
    assert_eq!(list("namespace=mailer").await.0, ["z"]);
    for (query, status) in [
        ("", 400),
        ("namespace=shop&state=busy", 400),
        ("namespace=shop&limit=0", 400),
        ("namespace=shop&after=b", 400),
    ] {
        let a = server
            .admin("GET", &format!("/api/keys?{query}"), Some(ADMIN), None)
            .await;
        assert_eq!(a.status, status, "{query}: {:?}", a.json);
    }
    let a = server
        .admin("GET", "/api/keys?namespace=shop", Some(SHOP), None)
        .await;
    assert_eq!(a.status, 403, "a client does not list: {:?}", a.json);
}

/// `hookinbox keys show|list|delete` against the real server, with the
/// admin token, as an operator runs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_shows_lists_and_deletes_keys() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "order%2F7", "claim", json!({})).await);
    call(
        &server,
        SHOP,
        "order%2F7",
        "complete",
        json!({"token": t, "result": {"id": 7}}),
    )
    .await;
    token_of(&call(&server, SHOP, "stuck", "claim", json!({})).await);
    let admin = server.admin_url("");
    let run = async |args: &[&str]| {
        let (admin, args) = (
            admin.clone(),
            args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        );
        tokio::task::spawn_blocking(move || crate::cli::ops(&admin, ADMIN, &args))
            .await
            .unwrap()
    };
    let (code, out, err) = run(&["keys", "show", "order/7", "--namespace", "shop"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("key           order/7\nstate         done\n"),
        "{out}"
    );
    assert!(out.contains("result        {\"id\":7}"), "{out}");

    let (code, out, err) =
        run(&["keys", "list", "--namespace", "shop", "--state", "claimed"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("KEY") && out.contains("stuck") && !out.contains("order/7"),
        "{out}"
    );
    let (code, out, _) = run(&[
        "keys",
        "list",
        "--namespace",
        "shop",
        "--limit",
        "1",
        "--json",
    ])
    .await;
    assert_eq!(code, 0);
    let page: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(page["keys"][0]["key"], "stuck", "the newest first: {out}");
    assert!(page["next_after"].is_string(), "{out}");
    let (_, out, _) = run(&[
        "keys",
        "list",
        "--namespace",
        "shop",
        "--limit",
        "1",
        "--all",
    ])
    .await;
    assert!(
        out.contains("order/7") && out.contains("stuck") && !out.contains("more:"),
        "{out}"
    );
    // Every page with --json: one array of the keys, as every listing
    // prints it (this printed {"keys": …, "next_after": null}).
    let (code, out, err) = run(&[
        "keys",
        "list",
        "--namespace",
        "shop",
        "--limit",
        "1",
        "--all",
        "--json",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    let all: Vec<Value> = serde_json::from_str(&out).expect(&out);
    let keys: Vec<&str> = all.iter().map(|k| k["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["stuck", "order/7"], "{out}");
    // The next page is --cursor, as in every listing; --after, its old
    // name, still works for the scripts that use it.
    let next = page["next_after"].as_str().unwrap();
    let (_, out, _) = run(&["keys", "list", "--namespace", "shop", "--limit", "1"]).await;
    assert!(
        out.ends_with(&format!("more: --cursor {next:?} (or --all)\n")),
        "{out}"
    );
    for flag in ["--cursor", "--after"] {
        let (code, out, err) = run(&[
            "keys",
            "list",
            "--namespace",
            "shop",
            "--limit",
            "1",
            flag,
            next,
        ])
        .await;
        assert_eq!(code, 0, "{flag}: {err}");
        assert!(
            out.contains("order/7") && !out.contains("stuck"),
            "{flag}: {out}"
        );
    }

    let (code, _, err) = run(&["keys", "delete", "stuck", "--namespace", "shop"]).await;
    assert_eq!(code, 2, "--note is required: {err}");
    let (code, out, err) = run(&[
        "keys",
        "delete",
        "stuck",
        "--namespace",
        "shop",
        "--note",
        "worker died",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "stuck (shop): deleted, free again\n");
    let (code, _, err) = run(&["keys", "show", "stuck", "--namespace", "shop"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("404") && err.contains("no key \"stuck\""),
        "{err}"
    );
}

/// Runs `hookinbox keys …` with the admin token against `server`.
async fn keys_cli(server: &TestServer, args: &[&str]) -> (i32, String, String) {
    let (admin, args) = (
        server.admin_url(""),
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
    );
    tokio::task::spawn_blocking(move || crate::cli::ops(&admin, ADMIN, &args))
        .await
        .unwrap()
}

/// `keys list --namespace nosuch` printed "no keys" and exited 0, as if a
/// typo were an empty namespace: it names the namespaces there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_an_unknown_namespace_are_refused_naming_the_known_ones() {
    let (_dir, server) = start().await;
    let (code, out, err) = keys_cli(&server, &["keys", "list", "--namespace", "nosuch"]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("unknown namespace \"nosuch\"") && err.contains("\"mailer\", \"shop\""),
        "{err}"
    );
    assert_eq!(out, "");
    for path in ["/api/keys?namespace=nosuch", "/api/keys/k?namespace=nosuch"] {
        let a = server.admin("GET", path, Some(ADMIN), None).await;
        assert_eq!(a.status, 404, "{path}: {:?}", a.json);
    }
    let empty = server.api(ADMIN).keys("namespace=mailer").await;
    assert!(
        empty.keys.is_empty(),
        "a namespace that holds no key yet: {empty:?}"
    );
}

/// `keys list` showed a claim whose lease had run out as "claimed", as if
/// a worker still held it; the dashboard's Keys page says claimable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_list_shows_a_claim_whose_lease_ran_out_as_claimable() {
    let (_dir, server) = start().await;
    token_of(&call(&server, SHOP, "held", "claim", json!({"lease": "10m"})).await);
    token_of(&call(&server, SHOP, "lapsed", "claim", json!({"lease": "1s"})).await);
    let state_of = |out: &str, key: &str| -> String {
        out.lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_default()
            .to_owned()
    };
    let out = eventually(
        "the 1s lease runs out and the list says so",
        Duration::from_secs(10),
        Duration::from_millis(200),
        async || {
            let (code, out, err) =
                keys_cli(&server, &["keys", "list", "--namespace", "shop"]).await;
            assert_eq!(code, 0, "{err}");
            match state_of(&out, "lapsed").as_str() {
                "claimable" => Ok(out),
                _ => Err(out),
            }
        },
    )
    .await;
    assert_eq!(state_of(&out, "held"), "busy", "{out}");
    let (_, out, _) = keys_cli(&server, &["keys", "show", "lapsed", "--namespace", "shop"]).await;
    assert!(out.contains("\nstate         claimable"), "{out}");
}

/// A done key is kept for its ttl, then gone: a claim of it is new again,
/// under a larger token.
#[tokio::test]
async fn a_done_key_past_its_ttl_is_claimed_anew() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "k", "claim", json!({"ttl": "1s"})).await);
    call(
        &server,
        SHOP,
        "k",
        "complete",
        json!({"token": t, "result": 1}),
    )
    .await;
    assert_eq!(
        call(&server, SHOP, "k", "claim", json!({})).await.status,
        200
    );
    let again = eventually(
        "the done key's 1s ttl runs out",
        Duration::from_secs(5),
        Duration::from_millis(100),
        async || {
            let a = call(&server, SHOP, "k", "claim", json!({})).await;
            match a.status {
                201 => Ok(token_of(&a)),
                _ => Err(format!("{:?}", a.json)),
            }
        },
    )
    .await;
    assert!(again > t);
    assert_eq!(key(&server, "k").await.claims, Some(1), "a new life");
}

#[tokio::test]
async fn post_sweep_removes_a_done_key_past_its_ttl_and_counts_it() {
    let (_dir, server) = start().await;
    let t = token_of(&call(&server, SHOP, "swept", "claim", json!({"ttl": "1s"})).await);
    let done = call(&server, SHOP, "swept", "complete", json!({"token": t})).await;
    assert_eq!(done.status, 200, "{:?}", done.json);
    // A key with the default ttl stays.
    let u = token_of(&call(&server, SHOP, "kept", "claim", json!({})).await);
    call(&server, SHOP, "kept", "complete", json!({"token": u})).await;
    let first = server.api(ADMIN).sweep().await;
    assert_eq!(first.keys, 0, "{first:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let swept = server.api(ADMIN).sweep().await;
    assert_eq!(swept.keys, 1, "{swept:?}");
    assert_eq!(show(&server, "swept").await.status, 404);
    assert_eq!(key(&server, "kept").await.state, KeyStateName::Done);
    let metrics = server.admin("GET", "/metrics", Some(ADMIN), None).await;
    let text = metrics.json.as_str().unwrap();
    assert!(
        text.contains("hookinbox_swept_total{kind=\"idempotency_key\"} 1"),
        "{text}"
    );
    // The OpenAPI document names the added field.
    let doc = server.admin("GET", "/api/openapi.json", None, None).await;
    assert!(
        doc.json["components"]["schemas"]["SweepResult"]["properties"]["keys"].is_object(),
        "{}",
        doc.json["components"]["schemas"]["SweepResult"]
    );
}

/// The dashboard's Keys page reads `/api/key-namespaces`, then each
/// namespace's claimed keys: busy ones and those whose lease ran out.
#[tokio::test]
async fn the_keys_pages_data_names_each_namespace_and_its_claimed_keys() {
    let (_dir, server) = start().await;
    let names = server
        .admin("GET", "/api/key-namespaces", Some(ADMIN), None)
        .await;
    assert_eq!(names.status, 200, "{:?}", names.json);
    assert_eq!(
        names.json,
        json!({"namespaces": [
            {"namespace": "mailer", "clients": ["mail"]},
            {"namespace": "shop", "clients": ["shop"]},
        ]})
    );
    // The admin token's: a client's is refused, and no token is.
    let client = server
        .admin("GET", "/api/key-namespaces", Some(SHOP), None)
        .await;
    assert_eq!(client.status, 403, "{:?}", client.json);
    let none = server.admin("GET", "/api/key-namespaces", None, None).await;
    assert_eq!(none.status, 401, "{:?}", none.json);
    // A key named so is still a key.
    let named = call(&server, SHOP, "key-namespaces", "claim", json!({})).await;
    assert_eq!(named.status, 201, "{:?}", named.json);

    let busy = token_of(&call(&server, SHOP, "busy", "claim", json!({})).await);
    let lapsed = token_of(&call(&server, SHOP, "lapsed", "claim", json!({"lease": "1s"})).await);
    let t = token_of(&call(&server, SHOP, "done", "claim", json!({})).await);
    call(&server, SHOP, "done", "complete", json!({"token": t})).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let list = server
        .api(ADMIN)
        .keys("namespace=shop&state=claimed&limit=500")
        .await;
    let keys = &list.keys;
    let names: Vec<&str> = keys.iter().map(|k| k.key.as_deref().unwrap()).collect();
    assert_eq!(names, ["lapsed", "busy", "key-namespaces"], "{list:?}");
    assert_eq!(keys[0].token, Some(lapsed));
    assert_eq!(keys[1].token, Some(busy));
    for k in keys {
        assert!(k.lease_until.is_some(), "{k:?}");
    }
    // The page tells them apart by lease_until against the time now.
    let until =
        |k: &KeyView| std::time::UNIX_EPOCH + Duration::from_millis(k.lease_until.unwrap().0);
    let now = std::time::SystemTime::now();
    assert!(until(&keys[1]) > now && until(&keys[0]) <= now, "{keys:?}");
}
