//! `server.admin_socket`: the admin API on a Unix domain socket, with the
//! file mode and group that say who may connect; tokens and roles apply as
//! on `admin_listen`; a stale socket file is taken over, a live one or a
//! file that is not a socket refused; the file goes when hookinbox stops.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use hookinbox::clock::Clock;

use crate::support::{TestServer, server_section};

const ADMIN: &str = "socket-admin-token-0123456789";
const SHOP: &str = "socket-shop-keys-token-0123";

fn config(dir: &Path, socket: &str) -> String {
    format!(
        "{}{socket}\n[admin]\ntoken = \"{ADMIN}\"\n\n[[keys.client]]\nname = \"shop\"\ntoken = \"{SHOP}\"\n",
        server_section(dir)
    )
}

/// A client whose every request goes over the socket at `path`.
fn over(path: &Path) -> reqwest::Client {
    reqwest::Client::builder()
        .unix_socket(path)
        .build()
        .unwrap()
}

/// The name and id of this process's primary group.
fn own_group() -> (String, u32) {
    let gid = nix::unistd::getgid();
    let group = nix::unistd::Group::from_gid(gid)
        .unwrap()
        .expect("a named group");
    (group.name, gid.as_raw())
}

#[tokio::test]
async fn the_admin_api_answers_on_the_socket_with_its_mode_group_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin.sock");
    let (group, gid) = own_group();
    let server = TestServer::start(
        &config(
            dir.path(),
            &format!(
                "admin_socket = {:?}\nadmin_socket_mode = \"0640\"\nadmin_socket_group = {group:?}\n",
                path.display().to_string()
            ),
        ),
        Clock::system(),
    )
    .await;
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_eq!(meta.gid(), gid);

    let client = over(&path);
    let stats = client
        .get("http://localhost/api/stats")
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(stats.status(), 200);
    // The token is checked as on admin_listen: the socket is no way around it.
    let refused = client
        .get("http://localhost/api/stats")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let client_on_events = client
        .get("http://localhost/api/events")
        .bearer_auth(SHOP)
        .send()
        .await
        .unwrap();
    assert_eq!(client_on_events.status(), 403);
    // An app claims and completes a key over it.
    let claim: serde_json::Value = client
        .post("http://localhost/api/keys/order-1/claim")
        .bearer_auth(SHOP)
        .json(&serde_json::json!({"lease": "30s"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(claim["state"], "claimed", "{claim}");
    let done = client
        .post("http://localhost/api/keys/order-1/complete")
        .bearer_auth(SHOP)
        .json(&serde_json::json!({"token": claim["token"], "result": {"ok": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 200);
    // The same key over TCP: one store behind both.
    let key = server.api(SHOP).key("order-1", None).await;
    assert_eq!(key.state, hookinbox::api::KeyStateName::Done);

    server.stop().await;
    assert!(
        !path.exists(),
        "the socket file is removed when hookinbox stops"
    );
}

#[tokio::test]
async fn a_stale_socket_is_taken_over_and_a_live_one_or_a_plain_file_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin.sock");
    let line = format!("admin_socket = {:?}\n", path.display().to_string());
    // A socket file nobody accepts on: what a killed run leaves.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let first = TestServer::start(&config(&dir.path().join("a"), &line), Clock::system()).await;
    let answer = over(&path)
        .get("http://localhost/healthz")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);

    // A second hookinbox (its own data dir) naming the same, live socket.
    let second =
        TestServer::try_start(&config(&dir.path().join("b"), &line), Clock::system()).await;
    let Err(error) = second else {
        panic!("a second server took over a live socket")
    };
    assert!(
        error
            .to_string()
            .contains("another process accepts connections on it"),
        "{error}"
    );
    // The first one still serves on it.
    let answer = over(&path)
        .get("http://localhost/healthz")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    first.stop().await;

    std::fs::write(&path, "not a socket").unwrap();
    let Err(error) =
        TestServer::try_start(&config(&dir.path().join("c"), &line), Clock::system()).await
    else {
        panic!("a plain file was replaced by the socket")
    };
    assert!(error.to_string().contains("is not a socket"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
}

#[tokio::test]
async fn an_unknown_group_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin.sock");
    let line = format!(
        "admin_socket = {:?}\nadmin_socket_group = \"no-such-group-hookinbox\"\n",
        path.display().to_string()
    );
    let Err(error) = TestServer::try_start(&config(dir.path(), &line), Clock::system()).await
    else {
        panic!("started with a group that does not exist")
    };
    assert!(
        error
            .to_string()
            .contains("admin_socket_group \"no-such-group-hookinbox\": no such group"),
        "{error}"
    );
    assert!(!path.exists());
}
