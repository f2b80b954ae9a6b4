//! Redaction against the real binary: a source's `redact` values never
//! reach a viewer (the event's API answer, a search, the event stream that
//! `listen` and the dashboard's live view read, `listen --replay`), checked
//! by searching the bytes of each answer; an operator reads them whole and
//! the audit trail says so; `redact_for = "everyone"` masks them for all;
//! the app always receives the bytes as sent.

use std::process::Command;
use std::time::Duration;

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, post, server_section, standard_headers_with,
    write_config,
};

const ADMIN: &str = "privacy-admin-token-0123456789abcdef";
const VIEWER: &str = "privacy-viewer-token-0123456789abcd";
const OPERATOR: &str = "privacy-operator-token-0123456789ab";

const EMAIL: &str = "ana.secret@example.com";
const CARD_1: &str = "4242424242424242";
const CARD_2: &str = "5555555555554444";
/// Every value the source redacts.
const SECRETS: [&str; 3] = [EMAIL, CARD_1, CARD_2];

fn body(id: &str) -> String {
    format!(
        r#"{{"id":"{id}","type":"charge.succeeded","data":{{"object":{{"customer_email":"{EMAIL}","amount":1200,
"cards":[{{"number":"{CARD_1}","brand":"visa"}},{{"number":"{CARD_2}","brand":"mc"}}]}}}}}}"#
    )
}

fn config(dir: &std::path::Path, app: &str, redact_for: &str) -> String {
    format!(
        "{}[admin]\ntoken = \"{ADMIN}\"\n\n\
         [[admin.user]]\nname = \"vera\"\nrole = \"viewer\"\ntoken = \"{VIEWER}\"\n\n\
         [[admin.user]]\nname = \"otto\"\nrole = \"operator\"\ntoken = \"{OPERATOR}\"\n\n\
         [[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n\
         destination = \"{app}\"\n\
         redact = [\"/data/object/customer_email\", \"/data/object/cards/*/number\"]\n{redact_for}\n",
        server_section(dir)
    )
}

async fn send(server: &BinaryServer, id: &str) -> String {
    let body = body(id).into_bytes();
    let a = post(
        &client(),
        &server.url("/in/shop"),
        &standard_headers_with(STANDARD_SECRET, id, &body),
        body,
    )
    .await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    a.id().to_owned()
}

/// The raw bytes of an admin API answer to `token`.
async fn raw(server: &BinaryServer, token: &str, path: &str) -> String {
    let res = client()
        .get(format!("{}{path}", server.admin))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{path}");
    res.text().await.unwrap()
}

/// The raw bytes of an event stream with payloads, up to event `id`'s.
async fn streamed(server: &BinaryServer, token: &str, id: &str) -> String {
    let mut res = client()
        .get(format!(
            "{}/api/events/stream?payload=true&since=2000-01-01T00:00:00Z",
            server.admin
        ))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut text = String::new();
    let read = async {
        while let Ok(Some(chunk)) = res.chunk().await {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
            if text.contains(&format!("id: {id}\n")) {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the event within 10 s");
    text
}

fn assert_masked(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} holds {secret}: {text}");
    }
}

fn assert_whole(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(text.contains(secret), "{what} lacks {secret}: {text}");
    }
}

/// The `read_unredacted` records of the audit trail, newest first.
async fn unredacted_reads(server: &BinaryServer) -> Vec<serde_json::Value> {
    let page: serde_json::Value =
        serde_json::from_str(&raw(server, ADMIN, "/api/audit?action=read_unredacted").await)
            .unwrap();
    page["entries"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_viewer_never_reads_a_redacted_value_an_operator_does_on_the_record_and_the_app_gets_every_byte()
 {
    let dir = tempfile::tempdir().unwrap();
    let app = Destination::start(Mode::Ok).await;
    let path = write_config(dir.path(), &config(dir.path(), &app.url(), ""));
    let server = BinaryServer::start(&path, &[], None);
    let id = send(&server, "ch_1").await;
    let got = app.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(
        got[0].body,
        body("ch_1").as_bytes(),
        "the app gets the bytes as sent"
    );

    // The viewer: the event's answer, searches, the stream.
    let detail = raw(&server, VIEWER, &format!("/api/events/{id}")).await;
    assert_masked("the viewer's event", &detail);
    let parsed: serde_json::Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(parsed["redacted"], true);
    let payload: serde_json::Value =
        serde_json::from_str(parsed["payload"]["data"].as_str().unwrap()).unwrap();
    assert_eq!(payload["data"]["object"]["customer_email"], "[redacted]");
    assert_eq!(
        payload["data"]["object"]["cards"][1]["number"],
        "[redacted]"
    );
    assert_eq!(payload["data"]["object"]["cards"][1]["brand"], "mc");
    assert_eq!(payload["data"]["object"]["amount"], 1200);
    for query in [
        format!("q={EMAIL}"),
        format!("q={CARD_2}"),
        "q=ana.secret".to_owned(),
        format!("match=/data/object/customer_email={EMAIL}"),
        format!("match=/data/object/cards/0/number={CARD_1}"),
    ] {
        let page = raw(&server, VIEWER, &format!("/api/events?{query}")).await;
        let found: serde_json::Value = serde_json::from_str(&page).unwrap();
        assert_eq!(
            found["events"].as_array().unwrap().len(),
            0,
            "{query}: {page}"
        );
    }
    // What the viewer may read still matches.
    let page = raw(&server, VIEWER, "/api/events?q=charge.succeeded").await;
    assert!(page.contains(&id), "{page}");
    assert_masked("the viewer's stream", &streamed(&server, VIEWER, &id).await);
    // `hookinbox listen --replay`, as the viewer: what reaches their app.
    let local = Destination::start(Mode::Ok).await;
    // Off the runtime's one thread, which serves the local app meanwhile.
    let (admin, url, state, event) = (
        server.admin.clone(),
        local.url(),
        dir.path().to_owned(),
        id.clone(),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_hookinbox"))
            .args([
                "listen",
                "--admin",
                &admin,
                "--forward-to",
                &url,
                "--replay",
                &event,
            ])
            .env("HOOKINBOX_ADMIN_TOKEN", VIEWER)
            .env("XDG_STATE_HOME", state)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let forwarded = local.wait_for(1, Duration::from_secs(10)).await;
    assert_masked(
        "what listen forwards for the viewer",
        &String::from_utf8_lossy(&forwarded[0].body),
    );
    assert!(unredacted_reads(&server).await.is_empty());

    // The operator reads it whole, each read on the record.
    let detail = raw(&server, OPERATOR, &format!("/api/events/{id}")).await;
    assert_whole("the operator's event", &detail);
    assert!(!detail.contains("\"redacted\""), "{detail}");
    let page = raw(&server, OPERATOR, &format!("/api/events?q={EMAIL}")).await;
    assert!(page.contains(&id), "the operator's search: {page}");
    assert_whole(
        "the operator's stream",
        &streamed(&server, OPERATOR, &id).await,
    );
    let reads = unredacted_reads(&server).await;
    let seen: Vec<(&str, Option<&str>)> = reads
        .iter()
        .map(|r| (r["person"].as_str().unwrap(), r["target"].as_str()))
        .collect();
    assert_eq!(
        seen,
        [("otto", None), ("otto", Some(id.as_str()))],
        "{reads:#?}"
    );
    assert_eq!(reads[0]["filter"]["payload"], "true");

    // For everyone: the operator's answers are masked too, and unrecorded.
    std::fs::write(
        &path,
        config(dir.path(), &app.url(), "redact_for = \"everyone\""),
    )
    .unwrap();
    server.admin_ok(ADMIN, "POST", "/api/reload", None).await;
    for token in [OPERATOR, ADMIN] {
        assert_masked(
            "an event for everyone",
            &raw(&server, token, &format!("/api/events/{id}")).await,
        );
        let page = raw(&server, token, &format!("/api/events?q={EMAIL}")).await;
        assert!(!page.contains(&id), "a search for everyone: {page}");
        assert_masked(
            "a stream for everyone",
            &streamed(&server, token, &id).await,
        );
    }
    assert_eq!(unredacted_reads(&server).await.len(), 2);

    // A replay delivers the bytes as received, whoever asks.
    server
        .admin_ok(OPERATOR, "POST", &format!("/api/events/{id}/replay"), None)
        .await;
    let got = app.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(got[1].body, body("ch_1").as_bytes());
}
