//! What the real binary writes to its log: journald priorities when stderr
//! is the journal, nothing but JSON lines in JSON mode (the first start's
//! announcements included, without the secrets), per-event lines at debug
//! and a periodic summary at info, so a flood of traffic or of bad requests
//! writes a bounded number of lines.

use std::os::unix::fs::MetadataExt;
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
    fn start(dir: &std::path::Path, config: &str, journal: bool) -> Journaled {
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
        if journal {
            cmd.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
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
