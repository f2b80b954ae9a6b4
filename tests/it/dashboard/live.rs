//! Live mode across a server restart, in Chromium: the page says the
//! connection is lost, reconnects by itself with the last id it saw, and
//! shows what was stored before it was back.

use super::{Driver, TOKEN, click, text_until, type_into};
use crate::support::{
    BinaryServer, STANDARD_SECRET, client, free_port, standard_headers, write_config,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_mode_reconnects_after_a_server_restart_and_misses_nothing() {
    let driver = Driver::start();
    let dir = tempfile::tempdir().unwrap();
    // Fixed ports: the restarted server is where the page left it.
    let config = write_config(
        dir.path(),
        &format!(
            "[server]\nlisten = \"127.0.0.1:{}\"\nadmin_listen = \"127.0.0.1:{}\"\ndata_dir = {:?}\n\
             shutdown_timeout = \"5s\"\n\n[admin]\ntoken = \"{TOKEN}\"\n\n\
             [[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n",
            free_port(),
            free_port(),
            dir.path().join("data").display().to_string(),
        ),
    );
    let mut server = BinaryServer::start(&config, &[], None);
    let send = async |server: &BinaryServer, id: &str| {
        let body = br#"{"type":"invoice.created"}"#.to_vec();
        let mut request = client().post(server.url("/in/shop")).body(body.clone());
        for (k, v) in standard_headers(id, &body) {
            request = request.header(k, v);
        }
        assert_eq!(request.send().await.unwrap().status(), 200);
    };
    send(&server, "evt_before").await;

    let b = driver.browser().await;
    b.goto(&format!("{}/#/events", server.admin)).await.unwrap();
    type_into(&b, "#token", &format!("{TOKEN}\u{E007}")).await;
    text_until(&b, "main h1", |t| t == "Events").await;
    click(&b, "#live").await;
    text_until(&b, "#live-state", |t| {
        t == "Following new events as they are stored."
    })
    .await;

    assert!(server.terminate().success(), "{}", server.log_text());
    text_until(&b, "#live-state", |t| t == "Connection lost: reconnecting…").await;
    let server = BinaryServer::start(&config, &[], None);
    // Stored before the page is back: it comes by the last id the page saw.
    send(&server, "evt_after_restart_1").await;
    send(&server, "evt_after_restart_2").await;
    text_until(&b, "#events tbody tr:first-child", |t| {
        t.contains("evt_after_restart_2")
    })
    .await;
    text_until(&b, "#events tbody tr:nth-child(2)", |t| {
        t.contains("evt_after_restart_1")
    })
    .await;
    text_until(&b, "#events tbody tr:nth-child(3)", |t| {
        t.contains("evt_before")
    })
    .await;
    text_until(&b, "#live-state", |t| {
        t == "Following new events as they are stored."
    })
    .await;
    let rows = b
        .execute(
            "return document.querySelectorAll('#events tbody tr').length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(rows, serde_json::json!(3), "each event once");
    b.close().await.unwrap();
}
