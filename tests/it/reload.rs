//! A reload (`POST /api/reload`, SIGHUP) of the real binary: what may change
//! live is taken between two requests with none refused or dropped, what
//! only a restart takes is named and left as it was, and a config that
//! fails its checks is refused whole while the running one serves.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::destination::{Destination, Mode};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, eventually, post, server_section, standard_headers_with,
    write_config,
};

const ADMIN_TOKEN: &str = "reload-admin-token-0123456789abcdef";
/// The secret a provider rotates to.
const NEW_SECRET: &str = "whsec_bmV3LXNlY3JldC1mb3ItdGhlLXJlbG9hZC10ZXN0";

fn source(name: &str, secret: &str, app: Option<&str>) -> String {
    let mut s =
        format!("[[source]]\nname = \"{name}\"\nkind = \"standard\"\nsecret = \"{secret}\"\n");
    if let Some(app) = app {
        s.push_str(&format!(
            "destination = \"{app}\"\ninitial_interval = \"50ms\"\nmax_interval = \"100ms\"\n"
        ));
    }
    s.push('\n');
    s
}

fn config(dir: &std::path::Path, rest: &str) -> String {
    format!(
        "{}[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n{rest}",
        server_section(dir)
    )
}

async fn send(server: &BinaryServer, source: &str, secret: &str, id: &str) -> u16 {
    let body = format!(r#"{{"type":"order.paid","id":"{id}"}}"#).into_bytes();
    post(
        &client(),
        &server.url(&format!("/in/{source}")),
        &standard_headers_with(secret, id, &body),
        body,
    )
    .await
    .status
}

fn parts(answer: &serde_json::Value, list: &str) -> Vec<String> {
    answer[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {answer}"))
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p["part"].as_str().unwrap(),
                p["change"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn a_reload_takes_a_rotated_secret_a_new_source_and_destination_and_names_what_needs_a_restart()
 {
    let dir = tempfile::tempdir().unwrap();
    let shop_app = Destination::start(Mode::Ok).await;
    let billing_app = Destination::start(Mode::Ok).await;
    let old = Destination::start(Mode::Ok).await;
    let path = write_config(
        dir.path(),
        &config(
            dir.path(),
            &format!(
                "{}{}",
                source("shop", STANDARD_SECRET, Some(&shop_app.url())),
                source("gone", STANDARD_SECRET, Some(&old.url()))
            ),
        ),
    );
    let server = BinaryServer::start(&path, &[], None);
    assert_eq!(send(&server, "shop", STANDARD_SECRET, "evt_1").await, 200);
    assert_eq!(send(&server, "shop", NEW_SECRET, "evt_2").await, 401);

    // The provider rotates: both secrets for the overlap, the old one in a
    // file. A new source with its own destination; "gone" removed; and a
    // listen address changed, which only a restart takes.
    let old_secret = dir.path().join("shop-old.secret");
    std::fs::write(&old_secret, STANDARD_SECRET).unwrap();
    let text = config(
        dir.path(),
        &format!(
            "{}{}",
            source("shop", NEW_SECRET, Some(&shop_app.url())).replace(
                "secret = ",
                &format!("secret_file = {old_secret:?}\nsecret = ")
            ),
            source("billing", NEW_SECRET, Some(&billing_app.url()))
        ),
    )
    .replacen("listen = \"127.0.0.1:0\"", "listen = \"127.0.0.1:1\"", 1);
    std::fs::write(&path, text).unwrap();
    let answer = server
        .admin_ok(ADMIN_TOKEN, "POST", "/api/reload", None)
        .await
        .json;
    let applied = parts(&answer, "applied");
    for want in [
        "source.shop changed",
        "source.billing added",
        "source.gone removed",
        "destination.billing added",
        "destination.gone removed",
    ] {
        assert!(applied.contains(&want.to_owned()), "{want}: {answer}");
    }
    assert_eq!(
        parts(&answer, "needs_restart"),
        ["server changed"],
        "{answer}"
    );

    // Both verify while the provider switches.
    assert_eq!(send(&server, "shop", NEW_SECRET, "evt_3").await, 200);
    assert_eq!(send(&server, "shop", STANDARD_SECRET, "evt_4").await, 200);
    assert_eq!(send(&server, "billing", NEW_SECRET, "evt_5").await, 200);
    assert_eq!(send(&server, "gone", STANDARD_SECRET, "evt_6").await, 404);
    eventually(
        "each app receives its events",
        Duration::from_secs(30),
        Duration::from_millis(20),
        async || match (shop_app.count(), billing_app.count()) {
            (3, 1) => Ok(()),
            counts => Err(format!("{counts:?}")),
        },
    )
    .await;
    let listed = server
        .admin_ok(ADMIN_TOKEN, "GET", "/api/destinations", None)
        .await
        .json
        .to_string();
    assert!(
        listed.contains("billing") && !listed.contains("gone"),
        "{listed}"
    );

    // The reload is in the audit trail, by the admin.
    let trail = server
        .admin_ok(ADMIN_TOKEN, "GET", "/api/audit?action=reload", None)
        .await
        .json;
    assert_eq!(trail["entries"][0]["action"], "reload", "{trail}");
    assert_eq!(trail["entries"][0]["person"], "admin", "{trail}");
}

#[tokio::test]
async fn a_config_that_fails_its_checks_is_refused_whole_and_the_running_one_serves() {
    let dir = tempfile::tempdir().unwrap();
    let app = Destination::start(Mode::Ok).await;
    let path = write_config(
        dir.path(),
        &config(
            dir.path(),
            &source("shop", STANDARD_SECRET, Some(&app.url())),
        ),
    );
    let server = BinaryServer::start(&path, &[], None);
    // A rotated secret beside a destination URL that is not one.
    let bad = config(
        dir.path(),
        &format!(
            "{}{}",
            source("shop", NEW_SECRET, Some(&app.url())),
            source("billing", NEW_SECRET, Some("ftp://127.0.0.1/hook"))
        ),
    );
    std::fs::write(&path, bad).unwrap();
    let refused = server
        .admin("POST", "/api/reload", Some(ADMIN_TOKEN), None)
        .await;
    assert_eq!(refused.status, 422, "{:?}", refused.json);
    assert_eq!(refused.json["error"], "config_invalid");
    let reason = refused.json["reason"].as_str().unwrap();
    assert!(reason.contains("billing"), "{reason}");
    assert!(
        !reason.contains(NEW_SECRET),
        "a secret in the answer: {reason}"
    );
    // Nothing of it was taken.
    assert_eq!(send(&server, "shop", STANDARD_SECRET, "evt_1").await, 200);
    assert_eq!(send(&server, "shop", NEW_SECRET, "evt_2").await, 401);
    assert_eq!(send(&server, "billing", NEW_SECRET, "evt_3").await, 404);

    // The CLI says the same, and fails.
    let (code, _, stderr) = crate::cli::ops(&server.admin, ADMIN_TOKEN, &["reload".into()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("billing") && stderr.contains("422"),
        "{stderr}"
    );

    // Not without a token.
    let denied = server.admin("POST", "/api/reload", None, None).await;
    assert_eq!(denied.status, 401);

    // SIGHUP, once the file is good again.
    std::fs::write(
        &path,
        config(dir.path(), &source("shop", NEW_SECRET, Some(&app.url()))),
    )
    .unwrap();
    server.signal(libc::SIGHUP);
    eventually(
        "SIGHUP takes the rotated secret",
        Duration::from_secs(30),
        Duration::from_millis(50),
        async || match send(&server, "shop", NEW_SECRET, "evt_4").await {
            200 => Ok(()),
            status => Err(format!("{status}")),
        },
    )
    .await;
    assert_eq!(send(&server, "shop", STANDARD_SECRET, "evt_5").await, 401);
    // Again, with nothing changed since: the CLI says so.
    let (code, stdout, stderr) = crate::cli::ops(&server.admin, ADMIN_TOKEN, &["reload".into()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\nnothing changed\n"), "{stdout}");
}

/// Providers keep sending while the config changes under them: 10,000
/// signed events while it gains a source, a second destination and a
/// rotated secret (beside the one they sign with), and loses them again,
/// reload after reload. Every request valid before and after is taken,
/// and every event reaches the destination that was there throughout.
#[tokio::test]
async fn reloads_under_load_refuse_and_drop_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let app = Destination::start(Mode::Ok).await;
    let second = Destination::start(Mode::Ok).await;
    let billing = Destination::start(Mode::Ok).await;
    let base = source("shop", STANDARD_SECRET, Some(&app.url()));
    let rotated = dir.path().join("shop-new.secret");
    std::fs::write(&rotated, NEW_SECRET).unwrap();
    let grown = format!(
        "[[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n\
         secret_file = {rotated:?}\n\n\
         [[source.destination]]\nurl = \"{}\"\n\n\
         [[source.destination]]\nname = \"audit\"\nurl = \"{}\"\n\n{}",
        app.url(),
        second.url(),
        source("billing", NEW_SECRET, Some(&billing.url()))
    );
    let path = write_config(dir.path(), &config(dir.path(), &base));
    let server = Arc::new(BinaryServer::start(&path, &[], None));
    const SENDERS: usize = 8;
    const EACH: usize = 1_250;
    let refused = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::new();
    for sender in 0..SENDERS {
        let (server, refused) = (server.clone(), refused.clone());
        senders.push(tokio::spawn(async move {
            for i in 0..EACH {
                let id = format!("evt_{sender}_{i}");
                let status = send(&server, "shop", STANDARD_SECRET, &id).await;
                if status != 200 {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let mut reloads: usize = 0;
    while !senders.iter().all(|s| s.is_finished()) && reloads < 1_000 {
        let text = if reloads % 2 == 0 { &grown } else { &base };
        std::fs::write(&path, config(dir.path(), text)).unwrap();
        server
            .admin_ok(ADMIN_TOKEN, "POST", "/api/reload", None)
            .await;
        reloads += 1;
        if reloads % 2 == 1 {
            // While grown: the new source and the rotated secret verify.
            let id = format!("evt_billing_{reloads}");
            assert_eq!(send(&server, "billing", NEW_SECRET, &id).await, 200);
            let id = format!("evt_rotated_{reloads}");
            assert_eq!(send(&server, "shop", NEW_SECRET, &id).await, 200);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for s in senders {
        s.await.unwrap();
    }
    assert!(reloads >= 4, "the senders finished after {reloads} reloads");
    assert_eq!(refused.load(Ordering::Relaxed), 0);
    // Grown at the end: what waited for a removed destination goes out
    // when it is back.
    std::fs::write(&path, config(dir.path(), &grown)).unwrap();
    server
        .admin_ok(ADMIN_TOKEN, "POST", "/api/reload", None)
        .await;
    let (sent, grown_sent) = (SENDERS * EACH, reloads.div_ceil(2));
    eventually(
        "every event reaches its destinations",
        Duration::from_secs(60),
        Duration::from_millis(50),
        async || match (app.count(), billing.count()) {
            (a, b) if a == sent + grown_sent && b == grown_sent => Ok(()),
            counts => Err(format!(
                "{counts:?} of ({}, {grown_sent})",
                sent + grown_sent
            )),
        },
    )
    .await;
    assert!(second.count() > 0, "the added destination got nothing");
}

/// `[alerts]` and `expect_within` are the alerter's settings, which a
/// reload changes in place: alerts turned on by a reload fire for a source
/// the same reload added, quiet since then; turned off, nothing more is
/// posted.
#[tokio::test]
async fn a_reload_turns_alerts_on_for_a_source_it_adds_and_off_again() {
    let dir = tempfile::tempdir().unwrap();
    let receiver = Destination::start(Mode::Ok).await;
    let base = config(dir.path(), &source("shop", STANDARD_SECRET, None));
    let path = write_config(dir.path(), &base);
    let server = BinaryServer::start(&path, &[], None);

    let alerts = format!(
        "[alerts]\nurl = \"{}\"\nformat = \"json\"\ncheck_interval = \"50ms\"\nmin_interval = \"1h\"\n\n",
        receiver.url()
    );
    let sources = format!(
        "{}{}\nexpect_within = \"1s\"\n",
        source("shop", STANDARD_SECRET, None),
        source("beat", STANDARD_SECRET, None).trim_end()
    );
    std::fs::write(&path, config(dir.path(), &format!("{alerts}{sources}"))).unwrap();
    let answer = server
        .admin_ok(ADMIN_TOKEN, "POST", "/api/reload", None)
        .await
        .json;
    let applied = parts(&answer, "applied");
    assert!(applied.contains(&"alerts added".to_owned()), "{answer}");
    assert!(
        applied.contains(&"source.beat added".to_owned()),
        "{answer}"
    );
    assert_eq!(parts(&answer, "needs_restart"), Vec::<String>::new());

    let notice = eventually(
        "a quiet notice for the added source",
        Duration::from_secs(20),
        Duration::from_millis(20),
        async || {
            let got: Vec<serde_json::Value> = receiver
                .received()
                .iter()
                .map(|r| serde_json::from_slice(&r.body).unwrap())
                .collect();
            got.into_iter()
                .find(|n| n["alert"] == "quiet" && n["status"] == "firing")
                .ok_or_else(|| "none yet".to_owned())
        },
    )
    .await;
    assert_eq!(notice["name"], "beat");
    let summary = notice["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("no event from beat since a reload added it"),
        "{summary}"
    );

    // Off again: `beat` sends, which would resolve the alert within a
    // check, but no alert URL is left to post it to.
    std::fs::write(&path, config(dir.path(), &sources)).unwrap();
    let answer = server
        .admin_ok(ADMIN_TOKEN, "POST", "/api/reload", None)
        .await
        .json;
    assert_eq!(parts(&answer, "applied"), ["alerts removed"], "{answer}");
    let posted = receiver.count();
    assert_eq!(send(&server, "beat", STANDARD_SECRET, "evt_2").await, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        receiver.count(),
        posted,
        "a notice after alerts were removed"
    );
}
