//! What a reload costs: the release binary with `--sources` sources (100 by
//! default), each with a destination, and `POST /api/reload` timed
//! `--reloads` times (20) four ways: the file unchanged; one secret
//! rotated (one source changed); a source added and removed in turn (a new
//! source, a new destination's lane, a verifier and an HTTP client built);
//! and every destination's signing key rotated (every destination built
//! again, the worst case). The time is the request's, end to end on loopback: reading and
//! checking the file, building every source's verifier and every
//! destination (ingest and the scheduler take them whole), and the answer.
//!
//! Rerun: cargo bench --bench reload -- [--quick] [--sources N] [--reloads N] [--bin PATH]

#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use support::{Flags, ServeProcess};

const TOKEN: &str = "reload-bench-admin-token-0123456789";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ROTATED: &str = "whsec_bmV3LXNlY3JldC1mb3ItdGhlLXJlbG9hZC10ZXN0";

fn main() {
    let flags = Flags::from_env();
    let sources = flags.value("--sources", 100, 100);
    let reloads = flags.value("--reloads", 5, 20);
    let bin = flags
        .text("--bin")
        .unwrap_or("target/release/hookinbox")
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let admin_port = free_port();
    let config = |rotate: bool, extra: bool, keys: bool| {
        config_text(dir.path(), admin_port, sources, rotate, extra, keys)
    };
    let path = dir.path().join("hookinbox.toml");
    std::fs::write(&path, config(false, false, false)).unwrap();
    let mut server = ServeProcess::start(&bin, &path);
    let admin: SocketAddr = ([127, 0, 0, 1], admin_port).into();
    server.wait_ready(admin);
    println!(
        "hookinbox reload bench: {sources} sources, each with a destination; {reloads} reloads each way; {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!("| reload | p50 ms | max ms | parts applied |");
    println!("|---|---:|---:|---:|");
    let ways: [(&str, &dyn Fn(usize) -> String); 4] = [
        ("file unchanged", &|_| config(false, false, false)),
        ("one secret rotated", &|i| config(i % 2 == 0, false, false)),
        ("a source added, removed", &|i| {
            config(false, i % 2 == 0, false)
        }),
        ("every destination's key rotated", &|i| {
            config(false, false, i % 2 == 0)
        }),
    ];
    for (name, text) in ways {
        let mut took = Vec::new();
        let mut applied = 0;
        for i in 0..reloads {
            std::fs::write(&path, text(i)).unwrap();
            let started = Instant::now();
            let (status, body) = post(admin, "/api/reload");
            took.push(started.elapsed());
            assert_eq!(status, 200, "{body}");
            let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
            applied += answer["applied"].as_array().map_or(0, Vec::len);
        }
        took.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} a reload |",
            ms(took[took.len() / 2]),
            ms(took[took.len() - 1]),
            applied as f64 / reloads as f64
        );
    }
    server.stop();
    println!();
    println!(
        "rerun: cargo bench --bench reload -- --sources {sources} --reloads {reloads} --bin {bin}"
    );
}

/// `sources` standard sources, each with a destination on a loopback port
/// nothing listens on (no event is sent: nothing is delivered). `rotate`:
/// the first source's secret is another; `extra`: one more source; `keys`:
/// every destination signs with another key.
fn config_text(
    dir: &Path,
    admin_port: u16,
    sources: usize,
    rotate: bool,
    extra: bool,
    keys: bool,
) -> String {
    let mut text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:{admin_port}\"\n\
         data_dir = {:?}\n\n[admin]\ntoken = \"{TOKEN}\"\n\n",
        dir.join("data")
    );
    let count = sources + usize::from(extra);
    for i in 0..count {
        let secret = if rotate && i == 0 { ROTATED } else { SECRET };
        let key = if keys { ROTATED } else { SECRET };
        text.push_str(&format!(
            "[[source]]\nname = \"source{i}\"\nkind = \"standard\"\nsecret = \"{secret}\"\n\
             destination = \"http://127.0.0.1:9/hook/{i}\"\ndestination_secret = \"{key}\"\n\n"
        ));
    }
    text
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One POST with the admin token and `Connection: close`: (status, body).
fn post(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}
