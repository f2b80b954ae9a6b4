//! What redaction costs a viewed event, two ways.
//!
//! 1. In process: `redact::apply` on the benches' Stripe-like payload
//!    (≈ 1.3 KB), with no pointer, one, three, and a wildcard over an
//!    array, `--events` payloads (20,000) each: ns per payload.
//! 2. End to end: the release binary with two sources that differ only in
//!    `redact` (three pointers on `masked`, none on `plain`), `--stored`
//!    events each (500). A viewer reads each event's detail (`GET
//!    /api/events/{id}`) from each source, round after round alternating
//!    (`--rounds`, 3), one keep-alive connection; then an operator reads
//!    the masked ones (each read is first written to the audit trail,
//!    durably); then a viewer's search that matches nothing reads every
//!    payload of each source (`q`, masked first on `masked`).
//!
//! Rerun: cargo bench --bench redact -- [--quick] [--events N] [--stored N] [--rounds N] [--bin PATH]

#[allow(dead_code)]
#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use hookinbox::redact::{Pattern, apply};
use support::{Flags, SECRET, ServeProcess, signed_headers, stripe_like_body, unix_now};

const ADMIN: &str = "redact-bench-admin-token-0123456789";
const VIEWER: &str = "redact-bench-viewer-token-012345678";
const OPERATOR: &str = "redact-bench-operator-token-0123456";
const POINTERS: [&str; 3] = [
    "/data/object/receipt_email",
    "/data/object/shipping",
    "/data/object/fingerprint",
];

fn main() {
    let flags = Flags::from_env();
    let events = flags.value("--events", 2_000, 20_000);
    let stored = flags.value("--stored", 100, 500);
    let rounds = flags.value("--rounds", 1, 3);
    let bin = flags
        .text("--bin")
        .unwrap_or("target/release/hookinbox")
        .to_owned();
    println!(
        "hookinbox redaction bench: {} cores",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    in_process(events);
    end_to_end(&bin, stored, rounds);
    println!();
    println!(
        "rerun: cargo bench --bench redact -- --events {events} --stored {stored} --rounds {rounds} --bin {bin}"
    );
}

fn in_process(events: usize) {
    let bodies: Vec<String> = (0..events)
        .map(|i| stripe_like_body(&support::event_id(i), i))
        .collect();
    let mean = bodies.iter().map(String::len).sum::<usize>() / events;
    println!();
    println!("In process, {events} payloads of {mean} bytes on average:");
    println!();
    println!("| patterns | ns per payload | values masked per payload |");
    println!("|---|---:|---:|");
    let sets: [(&str, Vec<&str>); 4] = [
        ("none", vec![]),
        ("1: /data/object/receipt_email", vec![POINTERS[0]]),
        ("3: email, shipping, fingerprint", POINTERS.to_vec()),
        (
            "1 wildcard: /data/object/tags/*",
            vec!["/data/object/tags/*"],
        ),
    ];
    for (name, texts) in sets {
        let patterns: Vec<Pattern> = texts.iter().map(|t| Pattern::parse(t).unwrap()).collect();
        let mut masked = 0usize;
        let started = Instant::now();
        for body in &bodies {
            let shown = apply(&patterns, body.as_bytes());
            masked += std::hint::black_box(shown.bytes())
                .windows(12)
                .filter(|w| *w == b"\"[redacted]\"")
                .count();
        }
        let took = started.elapsed();
        // The count's own scan is not redaction: time it alone and take it off.
        let scan = Instant::now();
        let mut again = 0usize;
        for body in &bodies {
            again += std::hint::black_box(body.as_bytes())
                .windows(12)
                .filter(|w| *w == b"\"[redacted]\"")
                .count();
        }
        let scan = scan.elapsed();
        std::hint::black_box(again);
        let ns = took.saturating_sub(scan).as_nanos() as f64 / events as f64;
        println!(
            "| {name} | {ns:.0} | {:.1} |",
            masked as f64 / events as f64
        );
    }
}

fn end_to_end(bin: &str, stored: usize, rounds: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (ingest, admin) = (support::free_port(), support::free_port());
    let path = dir.path().join("hookinbox.toml");
    std::fs::write(&path, config(dir.path(), ingest, admin)).unwrap();
    let mut server = ServeProcess::start(bin, &path);
    server.wait_ready(admin);
    let mut ids = [Vec::new(), Vec::new()];
    let mut conn = Conn::open(ingest);
    for (s, source) in ["plain", "masked"].into_iter().enumerate() {
        for i in 0..stored {
            let id = support::event_id(s * stored + i);
            let body = stripe_like_body(&id, i);
            let headers = signed_headers(&id, body.as_bytes(), unix_now());
            let (status, answer) = conn.send(
                "POST",
                &format!("/in/{source}"),
                None,
                &headers,
                body.as_bytes(),
            );
            assert_eq!(status, 200, "{answer}");
            let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
            ids[s].push(answer["id"].as_str().unwrap().to_owned());
        }
    }
    let mut conn = Conn::open(admin);
    let mut read = |token: &str, ids: &[String]| -> (Duration, usize) {
        let started = Instant::now();
        let mut masked = 0;
        for id in ids {
            let (status, body) =
                conn.send("GET", &format!("/api/events/{id}"), Some(token), &[], b"");
            assert_eq!(status, 200, "{body}");
            masked += usize::from(body.contains("\"redacted\":true"));
        }
        (started.elapsed(), masked)
    };
    println!();
    println!(
        "End to end, {stored} events a source, one keep-alive connection, {rounds} rounds alternating:"
    );
    println!();
    println!("| read | round µs per event | events masked |");
    println!("|---|---|---:|");
    let mut rows: Vec<(String, Vec<f64>, usize)> = vec![
        ("viewer, plain source".into(), vec![], 0),
        ("viewer, masked source (3 pointers)".into(), vec![], 0),
        ("operator, masked source (audited)".into(), vec![], 0),
    ];
    for _ in 0..rounds {
        for (row, (token, s)) in [(VIEWER, 0), (VIEWER, 1), (OPERATOR, 1)]
            .into_iter()
            .enumerate()
        {
            let (took, masked) = read(token, &ids[s]);
            rows[row].1.push(took.as_secs_f64() * 1e6 / stored as f64);
            rows[row].2 = masked;
        }
    }
    for (name, per, masked) in &rows {
        let per: Vec<String> = per.iter().map(|us| format!("{us:.1}")).collect();
        println!("| {name} | {} | {masked} |", per.join(" · "));
    }
    println!();
    println!("| viewer search (q matches nothing) | round µs per payload examined |");
    println!("|---|---|");
    for source in ["plain", "masked"] {
        let mut per = Vec::new();
        for _ in 0..rounds {
            let started = Instant::now();
            let (status, body) = conn.send(
                "GET",
                &format!("/api/events?source={source}&q=nowhere-to-be-found&limit=500"),
                Some(VIEWER),
                &[],
                b"",
            );
            let took = started.elapsed();
            assert_eq!(status, 200, "{body}");
            let page: serde_json::Value = serde_json::from_str(&body).unwrap();
            let examined = page["search"]["examined"].as_u64().unwrap().max(1);
            per.push(format!("{:.2}", took.as_secs_f64() * 1e6 / examined as f64));
        }
        println!("| {source} | {} |", per.join(" · "));
    }
    server.stop();
}

fn config(dir: &Path, ingest: SocketAddr, admin: SocketAddr) -> String {
    let redact: Vec<String> = POINTERS.iter().map(|p| format!("{p:?}")).collect();
    format!(
        "[server]\nlisten = \"{ingest}\"\nadmin_listen = \"{admin}\"\ndata_dir = {:?}\n\n\
         [admin]\ntoken = \"{ADMIN}\"\n\n\
         [[admin.user]]\nname = \"vera\"\nrole = \"viewer\"\ntoken = \"{VIEWER}\"\n\n\
         [[admin.user]]\nname = \"otto\"\nrole = \"operator\"\ntoken = \"{OPERATOR}\"\n\n\
         [[source]]\nname = \"plain\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\n\n\
         [[source]]\nname = \"masked\"\nkind = \"standard\"\nsecret = \"{SECRET}\"\nredact = [{}]\n",
        dir.join("data"),
        redact.join(", ")
    )
}

/// One keep-alive HTTP/1.1 connection.
struct Conn(BufReader<TcpStream>);

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Conn(BufReader::new(s))
    }

    /// One request; (status, body).
    fn send(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        headers: &[(String, String)],
        body: &[u8],
    ) -> (u16, String) {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(token) = token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let s = self.0.get_mut();
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        let status = line.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
        let mut length = 0;
        loop {
            line.clear();
            self.0.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
        }
        let mut answer = vec![0; length];
        self.0.read_exact(&mut answer).unwrap();
        (status, String::from_utf8(answer).unwrap())
    }
}
