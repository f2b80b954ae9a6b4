//! What the real binary writes to its log: journald priorities when stderr
//! is the journal, nothing but JSON lines in JSON mode (the first start's
//! announcements included, without the secrets), per-event lines at debug
//! and a periodic summary at info, so a flood of traffic or of bad requests
//! writes a bounded number of lines.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::destination::{Destination, Mode};
use crate::support::{
    STANDARD_SECRET, client, eventually, eventually_sync, server_section, standard_headers,
    write_config,
};

/// The binary with stderr into a file that `JOURNAL_STREAM` names, as
/// systemd sets it for a service whose output goes to the journal.
struct Journaled {
    child: std::process::Child,
    log: std::path::PathBuf,
}

impl Journaled {
    /// With `journal`, stderr is the journal's stream and journald's
    /// native socket does not answer: lines go to the stream.
    fn start(dir: &std::path::Path, config: &str, journal: bool) -> Journaled {
        let socket = journal.then(|| dir.join("no-journald.socket"));
        Journaled::start_with(dir, config, socket.as_deref())
    }

    /// stderr is the journal's stream, and journald's native socket is
    /// `socket` (the process sends there when it answers).
    fn start_with(dir: &std::path::Path, config: &str, socket: Option<&Path>) -> Journaled {
        let path = write_config(dir, config);
        let log = dir.join("stderr.log");
        let file = std::fs::File::create(&log).unwrap();
        let meta = file.metadata().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookinbox"));
        cmd.args(["serve", "--config"])
            .arg(path)
            .env_remove("HOOKINBOX_LOG_FORMAT")
            .env_remove("HOOKINBOX_LOG_LEVEL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(file);
        if let Some(socket) = socket {
            cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
                .env("HOOKINBOX_JOURNAL_SOCKET", socket);
        } else {
            cmd.env_remove("JOURNAL_STREAM");
        }
        Journaled {
            child: cmd.spawn().unwrap(),
            log,
        }
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits for a line containing `text`; returns every line so far.
    fn wait_for(&self, text: &str) -> Vec<String> {
        eventually_sync(
            &format!("a line containing {text:?}"),
            Duration::from_secs(30),
            Duration::from_millis(20),
            || match self.lines() {
                lines if lines.iter().any(|l| l.contains(text)) => Ok(lines),
                lines => Err(format!("the log:\n{}", lines.join("\n"))),
            },
        )
    }

    fn records(&self) -> Vec<(u8, serde_json::Value)> {
        records(&self.log)
    }

    /// SIGTERM and the exit.
    fn stop(self) -> (std::process::ExitStatus, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let out = self.child.wait_with_output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

/// A stand-in for journald's native socket: a datagram socket at a path,
/// each datagram parsed as sd_journal_sendv(3) frames it.
struct FakeJournald {
    socket: tokio::net::UnixDatagram,
    entries: Vec<HashMap<String, Vec<u8>>>,
}

impl FakeJournald {
    fn bind(path: &Path) -> FakeJournald {
        let socket = tokio::net::UnixDatagram::bind(path).unwrap();
        FakeJournald {
            socket,
            entries: Vec::new(),
        }
    }

    /// Reads entries until a line's message is `text` (30 s at most); that
    /// entry.
    async fn wait_for(&mut self, text: &str) -> HashMap<String, Vec<u8>> {
        // The text format: `LEVEL target: message fields…`.
        let text = &format!(": {text}");
        let mut buf = vec![0u8; 1 << 16];
        eventually(
            &format!("an entry with {text:?}"),
            Duration::from_secs(30),
            Duration::from_millis(1),
            async || {
                // Every datagram waiting, each parsed (the process's probe
                // at start is an empty one).
                while let Ok(n) = self.socket.try_recv(&mut buf) {
                    if n > 0 {
                        self.entries.push(parse_entry(&buf[..n]));
                    }
                }
                let found = self.entries.iter().find(|e| {
                    e.get("MESSAGE")
                        .is_some_and(|m| String::from_utf8_lossy(m).contains(text))
                });
                match found {
                    Some(entry) => Ok(entry.clone()),
                    None => Err(format!(
                        "{:#?}",
                        self.entries.iter().map(text_of).collect::<Vec<_>>()
                    )),
                }
            },
        )
        .await
    }
}

/// An entry's fields, as text, for a failure's message.
fn text_of(entry: &HashMap<String, Vec<u8>>) -> HashMap<String, String> {
    entry
        .iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// `NAME=value\n`, or `NAME\n` + u64 LE length + value + `\n`.
fn parse_entry(mut data: &[u8]) -> HashMap<String, Vec<u8>> {
    let mut fields = HashMap::new();
    while !data.is_empty() {
        let end = data
            .iter()
            .position(|b| *b == b'\n')
            .expect("a field's end");
        let line = &data[..end];
        if let Some(eq) = line.iter().position(|b| *b == b'=') {
            let name = String::from_utf8(line[..eq].to_vec()).unwrap();
            fields.insert(name, line[eq + 1..].to_vec());
            data = &data[end + 1..];
        } else {
            let name = String::from_utf8(line.to_vec()).unwrap();
            let rest = &data[end + 1..];
            let len = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
            fields.insert(name, rest[8..8 + len].to_vec());
            assert_eq!(rest[8 + len], b'\n', "a framed value's end");
            data = &rest[8 + len + 1..];
        }
    }
    for name in fields.keys() {
        assert!(
            !name.is_empty()
                && !name.starts_with('_')
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "journald refuses the field name {name:?}"
        );
    }
    fields
}

/// The `<N>` priority and the JSON object of each line of the log at
/// `path`; fails on a line without either.
fn records(path: &std::path::Path) -> Vec<(u8, serde_json::Value)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let rest = line
                .strip_prefix('<')
                .unwrap_or_else(|| panic!("no priority prefix: {line}"));
            let (priority, json) = rest.split_once('>').unwrap();
            let value = serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            (priority.parse().unwrap(), value)
        })
        .collect()
}

/// The ingest address from the start line.
fn ingest_url(lines: &[String]) -> String {
    let line = lines
        .iter()
        .find(|l| l.contains("hookinbox is receiving webhooks"))
        .unwrap();
    let json = &line[line.find('{').unwrap()..];
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    format!("http://{}", v["listen"].as_str().unwrap())
}

#[tokio::test]
async fn under_journald_json_lines_carry_priorities_and_a_summary_replaces_per_event_lines() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let config = format!(
        r#"{}[log]
format = "json"
level = "info"
summary_interval = "1s"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"

[[source]]
name = "fresh"
kind = "standard"
generate_secret = true
"#,
        server_section(dir.path()),
        dest.url()
    );
    let server = Journaled::start(dir.path(), &config, true);
    let base = ingest_url(&server.wait_for("hookinbox is receiving webhooks"));
    let http = client();
    for i in 0..30 {
        let body = format!("{{\"n\":{i}}}").into_bytes();
        let headers = standard_headers(&format!("evt_{i}"), &body);
        let a = crate::support::post(&http, &format!("{base}/in/shop"), &headers, body).await;
        assert_eq!(a.status, 200);
    }
    // 30 refusals: past the per-minute budget of loud lines. Each carries a
    // body and a signature made with another secret, both marked, and neither
    // may reach the log: a refusal's line names the source and the reason.
    let marked_body = br#"{"card":"body-marker-4242"}"#.to_vec();
    let mut forged = standard_headers("evt_forged", &marked_body);
    for (name, value) in forged.iter_mut() {
        if name == "webhook-signature" {
            *value = "v1,c2lnbmF0dXJlLW1hcmtlcg==".to_owned();
        }
    }
    for _ in 0..30 {
        let a = crate::support::post(
            &http,
            &format!("{base}/in/shop"),
            &forged,
            marked_body.clone(),
        )
        .await;
        assert_eq!(a.status, 401);
    }
    eventually(
        "the 30 events are delivered",
        Duration::from_secs(30),
        Duration::from_millis(20),
        async || match dest.count() {
            n if n >= 30 => Ok(()),
            n => Err(format!("{n} delivered")),
        },
    )
    .await;
    // Summaries until they account for everything sent.
    let summed = eventually(
        "the summaries account for 30 received, 30 delivered and 30 rejected",
        Duration::from_secs(30),
        Duration::from_millis(100),
        async || {
            let summaries: Vec<serde_json::Value> = server
                .records()
                .into_iter()
                .filter(|(_, v)| v["message"] == "summary")
                .map(|(_, v)| v)
                .collect();
            let sum =
                |field: &str| -> u64 { summaries.iter().map(|v| v[field].as_u64().unwrap()).sum() };
            if sum("received") == 30 && sum("delivered") == 30 && sum("rejected") == 30 {
                Ok(sum("quieted"))
            } else {
                Err(format!("summaries: {summaries:#?}"))
            }
        },
    )
    .await;
    assert_eq!(summed, 30 - hookinbox::logs::LOUD_PER_MINUTE as u64);

    let (status, stdout) = server.stop();
    assert!(status.success());
    // Every line is `<N>{json}`: the announcements too, on stderr as JSON.
    let records = records(&dir.path().join("stderr.log"));
    assert!(stdout.trim().is_empty(), "stdout: {stdout}");
    let level_of = |p: u8| match p {
        3 => "ERROR",
        4 => "WARN",
        6 => "INFO",
        7 => "DEBUG",
        _ => panic!("priority {p}"),
    };
    for (priority, v) in &records {
        assert_eq!(v["level"], level_of(*priority), "{v}");
    }
    let generated = records
        .iter()
        .find(|(_, v)| v["secret"] == "source_secret")
        .expect("the generated secret is announced");
    assert_eq!(generated.1["source"], "fresh");
    let secret = std::fs::read_to_string(dir.path().join("secrets/fresh.secret")).unwrap();
    let text = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap();
    assert!(!text.contains(secret.trim()), "the secret is in the log");
    assert!(
        !text.contains(STANDARD_SECRET),
        "the source's secret is in the log"
    );
    for marker in ["body-marker-4242", "c2lnbmF0dXJlLW1hcmtlcg"] {
        assert!(
            !text.contains(marker),
            "a refused request's {marker} is in the log"
        );
    }
    // Per-event lines are at debug: none at info.
    for message in ["stored", "delivered"] {
        assert!(
            !records.iter().any(|(_, v)| v["message"] == message),
            "{message} at info"
        );
    }
    let loud = records
        .iter()
        .filter(|(p, v)| *p == 4 && v["message"] == "ingest rejected")
        .count();
    assert_eq!(loud, hookinbox::logs::LOUD_PER_MINUTE as usize);
    // A window with refusals is summarised at warn, so `journalctl -p
    // warning` shows it.
    assert!(
        records
            .iter()
            .any(|(p, v)| *p == 4 && v["message"] == "summary" && v["rejected"].as_u64() > Some(0))
    );
    // A bounded number of lines for 60 requests: the start, the 20 loud
    // refusals, a summary per second, the stop.
    assert!(records.len() < 70, "{} lines", records.len());
}

#[tokio::test]
async fn without_the_journal_text_lines_have_no_priority_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n",
        server_section(dir.path()),
    );
    let server = Journaled::start(dir.path(), &config, false);
    let lines = server.wait_for("hookinbox is receiving webhooks");
    let (status, _) = server.stop();
    assert!(status.success());
    for line in &lines {
        assert!(!line.starts_with('<'), "{line}");
    }
    // The text format's own shape: time, level, target, message.
    let start = lines
        .iter()
        .find(|l| l.contains("hookinbox is receiving webhooks"))
        .unwrap();
    assert!(start.contains(" INFO "), "{start}");
}

/// Regression: why the service died at start (a config error, a port in
/// use) was printed without a priority, so `journalctl -p warning` did not
/// show it. Under the journal it is filed at err (`<3>`); elsewhere the
/// line is plain.
#[test]
fn under_journald_a_fatal_error_at_start_is_filed_at_err() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port_in_use = format!(
        "{}[[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n",
        server_section(dir.path()),
    )
    .replacen(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"{}\"", taken.local_addr().unwrap()),
        1,
    );
    for (config, words) in [
        ("[server]\nlisten = \"nope\"\n".to_owned(), "server.listen"),
        (port_in_use, "cannot listen on"),
    ] {
        for journal in [true, false] {
            let server = Journaled::start(dir.path(), &config, journal);
            let out = server.child.wait_with_output().unwrap();
            assert!(!out.status.success());
            let log = std::fs::read_to_string(&server.log).unwrap();
            let line = log
                .lines()
                .find(|l| l.contains(words))
                .unwrap_or_else(|| panic!("no {words:?} in:\n{log}"));
            let want = if journal {
                "<3>hookinbox: "
            } else {
                "hookinbox: "
            };
            assert!(line.starts_with(want), "want {want:?}: {line}");
        }
    }
}

/// Under systemd each line is a native journal entry: the line as
/// `MESSAGE`, its priority, and what it names as fields of their own, so
/// `journalctl TRACE_ID=…` finds an event's lines. When journald's socket
/// goes away, the lines go to the stream, prefixed, and none is lost.
#[tokio::test]
async fn under_journald_lines_are_native_entries_whose_fields_name_the_event_and_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let app = Destination::start(Mode::FailEvery(2)).await;
    // A receiver nothing listens on: the trace ids are the point, not the
    // export.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = nobody.local_addr().unwrap();
    drop(nobody);
    let config = format!(
        "{}[log]\nlevel = \"debug\"\n\n[telemetry]\nendpoint = \"http://{dead}\"\n\n\
         [[source]]\nname = \"shop\"\nkind = \"standard\"\nsecret = \"{STANDARD_SECRET}\"\n\
         destination = \"{}\"\ninitial_interval = \"50ms\"\nmax_interval = \"100ms\"\n",
        server_section(dir.path()),
        app.url()
    );
    let socket = dir.path().join("journal.socket");
    let mut journald = FakeJournald::bind(&socket);
    let server = Journaled::start_with(dir.path(), &config, Some(&socket));
    let start = journald.wait_for("hookinbox is receiving webhooks").await;
    let start = text_of(&start);
    let base = format!("http://{}", start["LISTEN"]);
    assert_eq!(start["PRIORITY"], "6");
    assert_eq!(start["SYSLOG_IDENTIFIER"], "hookinbox");

    let http = client();
    let body = br#"{"type":"order.paid"}"#.to_vec();
    let headers = standard_headers("evt_journal_1", &body);
    let answer = crate::support::post(&http, &format!("{base}/in/shop"), &headers, body).await;
    assert_eq!(answer.status, 200);
    let id = answer.id().to_owned();
    let trace = hookinbox::telemetry::EventTrace::of(&id)
        .trace_id
        .to_string();

    let stored = text_of(&journald.wait_for("stored").await);
    assert_eq!(stored["ID"], id);
    assert_eq!(stored["EVENT_ID"], "evt_journal_1");
    assert_eq!(stored["SOURCE"], "shop");
    assert_eq!(stored["TRACE_ID"], trace);
    assert_eq!(stored["PRIORITY"], "7");
    assert!(stored["TARGET"].starts_with("hookinbox::"), "{stored:?}");
    // MESSAGE is the line the stream had: the text format without its time.
    assert!(
        stored["MESSAGE"].starts_with("DEBUG hookinbox::") && stored["MESSAGE"].contains(&trace),
        "{stored:?}"
    );

    // The first attempt fails, the second delivers: each line names its
    // own attempt's span in the event's trace.
    let failed = text_of(&journald.wait_for("attempt failed; will retry").await);
    let delivered = text_of(&journald.wait_for("delivered").await);
    for line in [&failed, &delivered] {
        assert_eq!(line["TRACE_ID"], trace, "{line:?}");
        assert_eq!(line["SPAN_ID"].len(), 16, "{line:?}");
        assert_eq!(line["ID"], id);
    }
    assert_ne!(failed["SPAN_ID"], delivered["SPAN_ID"]);
    assert_eq!(delivered["ATTEMPT"], "2");

    // A refusal at warn: `journalctl -p warning` shows it.
    let mut forged = standard_headers("evt_forged", b"{}");
    for (name, value) in forged.iter_mut() {
        if name == "webhook-signature" {
            *value = "v1,c2lnbmF0dXJlLW1hcmtlcg==".to_owned();
        }
    }
    let refused =
        crate::support::post(&http, &format!("{base}/in/shop"), &forged, b"{}".to_vec()).await;
    assert_eq!(refused.status, 401);
    let rejected = text_of(&journald.wait_for("ingest rejected").await);
    assert_eq!(rejected["PRIORITY"], "4", "{rejected:?}");
    assert_eq!(rejected["SOURCE"], "shop", "{rejected:?}");

    // Nothing went to the stream while journald took the entries.
    let streamed = server.lines();
    assert!(
        !streamed.iter().any(|l| l.contains("delivered")),
        "{streamed:?}"
    );

    // journald gone: the next lines go to the stream, with priorities.
    drop(journald);
    std::fs::remove_file(&socket).unwrap();
    let body = br#"{"type":"order.paid"}"#.to_vec();
    let headers = standard_headers("evt_journal_2", &body);
    let answer = crate::support::post(&http, &format!("{base}/in/shop"), &headers, body).await;
    assert_eq!(answer.status, 200);
    let lines = server.wait_for("evt_journal_2");
    let line = lines.iter().find(|l| l.contains("evt_journal_2")).unwrap();
    assert!(line.starts_with("<7>DEBUG hookinbox::"), "{line}");
    let (status, _) = server.stop();
    assert!(status.success());
}
