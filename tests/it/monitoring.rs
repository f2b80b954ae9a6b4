//! What a monitoring stack reads: `/metrics` in both text formats, checked by
//! `promtool check metrics` and the Prometheus Python client's parsers, every
//! series an alert rule needs present at 0 from the start; and the shipped
//! Grafana dashboard and Prometheus rules (`packaging/monitoring/`), checked
//! by promtool, Grafana's schema and against the names a real scrape has.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use hookinbox::clock::Clock;

use crate::destination::{Destination, Mode};
use crate::support::{STANDARD_SECRET, TestServer, eventually, server_section, standard_headers};

const TOKEN: &str = "test-admin-token-0123456789";

/// What Prometheus 2.x sends: OpenMetrics first, the classic text after.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn config(dir: &std::path::Path, dest: &Destination) -> String {
    format!(
        r#"{}[admin]
token = "{TOKEN}"

[[source]]
name = "shop"
kind = "standard"
secret = "{STANDARD_SECRET}"
destination = "{}"

[[source]]
name = "inbox"
kind = "standard"
secret = "{STANDARD_SECRET}"
expect_within = "6h"

[[source]]
name = "github"
kind = "github"
secret = "github-webhook-secret"

[source.reconcile]
hook = "repos/acme/shop/hooks/7"
token = "github_pat_never_used"
interval = "1h"
api_base = "http://127.0.0.1:9"
"#,
        server_section(dir),
        dest.url()
    )
}

/// A scrape: the content type and the text.
async fn scrape(server: &TestServer, accept: Option<&str>) -> (String, String) {
    let mut req = server
        .client
        .get(server.admin_url("/metrics"))
        .header("authorization", format!("Bearer {TOKEN}"));
    if let Some(accept) = accept {
        req = req.header("accept", accept);
    }
    let res = req.send().await.unwrap();
    assert_eq!(res.status(), 200);
    let kind = res.headers()["content-type"].to_str().unwrap().to_owned();
    (kind, res.text().await.unwrap())
}

/// The value of one series (`name{labels}` exactly as written), or panics.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// `promtool check metrics`: its lint of names, help and types. Silent and 0
/// when clean.
fn promtool_check_metrics(text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian: apt-get install prometheus)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
}

/// The families the Python client reads, with their types; fails when one
/// has no help, no samples or no type.
fn python_families(format: &str, text: &str) -> BTreeMap<String, String> {
    let out = crate::support::python_with("check_metrics.py", &[format], text.as_bytes());
    assert!(
        out.status.success(),
        "{format}: {}{} ({})",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        crate::support::PYTHON_SETUP
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn before_anything_happened_every_series_an_alert_reads_is_there_at_0() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;

    // Before anything happened: the classic format, and every series an
    // alert rule reads already at 0 (a series that appears at its first
    // increment reads "no data", and rate() misses that increment).
    let (kind, text) = scrape(&server, None).await;
    assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
    assert!(!text.contains("# EOF"), "{text}");
    promtool_check_metrics(&text);
    let families = python_families("prometheus", &text);
    for (family, kind) in [
        ("hookinbox_received", "counter"),
        ("hookinbox_rejected", "counter"),
        ("hookinbox_delivery_attempts", "counter"),
        ("hookinbox_ack_latency_seconds", "histogram"),
        ("hookinbox_commit_batch_size", "histogram"),
        ("hookinbox_pending", "gauge"),
        ("hookinbox_held", "gauge"),
        ("hookinbox_build_info", "gauge"),
        ("hookinbox_store_writable", "gauge"),
        ("hookinbox_store_file_bytes", "gauge"),
        ("hookinbox_store_file_disk_bytes", "gauge"),
        ("hookinbox_dedupe_memory_bytes", "gauge"),
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
    ] {
        assert_eq!(
            families.get(family).map(String::as_str),
            Some(kind),
            "{family}"
        );
    }
    for series in [
        "hookinbox_received_total{source=\"shop\"}",
        "hookinbox_received_total{source=\"inbox\"}",
        "hookinbox_rejected_total{source=\"shop\",reason=\"signature_mismatch\"}",
        "hookinbox_rejected_total{source=\"inbox\",reason=\"store_unavailable\"}",
        "hookinbox_rejected_total{source=\"(unknown)\",reason=\"unknown_source\"}",
        "hookinbox_delivery_attempts_total{source=\"shop\",destination=\"shop\",outcome=\"timeout\"}",
        "hookinbox_circuit_transitions_total{source=\"shop\",destination=\"shop\",state=\"open\"}",
        "hookinbox_circuit_state{source=\"shop\",destination=\"shop\"}",
        "hookinbox_dead_lettered_total{source=\"shop\",destination=\"shop\"}",
        "hookinbox_dlq_size{source=\"shop\"}",
        "hookinbox_held{source=\"inbox\"}",
        "hookinbox_oldest_pending_age_seconds{source=\"shop\"}",
        "hookinbox_alerts_total{kind=\"circuit_open\",status=\"resolved\",sent=\"false\"}",
    ] {
        assert_eq!(value(&text, series), 0.0, "{series}");
    }
    // A source without a destination has no delivery series.
    assert!(!text.contains("hookinbox_circuit_state{source=\"inbox\"}"));
    assert_eq!(value(&text, "hookinbox_store_writable"), 1.0);
    let build = format!(
        "hookinbox_build_info{{version=\"{}\",commit=\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.contains(&build), "{text}");
    let length = value(&text, "hookinbox_store_file_bytes{file=\"database\"}");
    let disk = value(&text, "hookinbox_store_file_disk_bytes{file=\"database\"}");
    // A new file: redb has written its header and first pages, and has
    // extended the file past them.
    assert!(disk > 0.0 && length > 0.0, "{disk} on disk, {length} long");
    // The log's series is there from the first scrape (`value` panics
    // on a missing one).
    value(&text, "hookinbox_store_file_disk_bytes{file=\"wal\"}");
    // No key yet: no run, and hash tables that have allocated nothing.
    assert_eq!(
        value(&text, "hookinbox_store_file_bytes{file=\"dedupe_runs\"}"),
        0.0
    );
    assert_eq!(value(&text, "hookinbox_dedupe_memory_bytes"), 0.0);
    assert!(value(&text, "hookinbox_store_filesystem_available_bytes") > 0.0);
    assert!(value(&text, "process_resident_memory_bytes") > 1e6);
    assert!(value(&text, "process_open_fds") >= 3.0);
    server.stop().await;
}

/// An event delivered, a duplicate, a refusal, one held; returns once the
/// destination has the event.
async fn some_traffic(server: &TestServer, dest: &Destination) {
    let body = b"{}".to_vec();
    let a = server
        .post("/in/shop", &standard_headers("m_1", &body), body.clone())
        .await;
    assert_eq!(a.status, 200);
    server
        .post("/in/shop", &standard_headers("m_1", &body), body.clone())
        .await;
    server
        .post("/in/inbox", &standard_headers("h_1", &body), body.clone())
        .await;
    let bad = server.post("/in/shop", &[], body).await;
    assert_eq!(bad.status, 401);
    eventually(
        "an event is delivered",
        Duration::from_secs(10),
        Duration::from_millis(10),
        async || match dest.count() {
            0 => Err("the destination received nothing".to_owned()),
            _ => Ok(()),
        },
    )
    .await;
}

#[tokio::test]
async fn after_traffic_both_formats_read_clean_with_the_same_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    some_traffic(&server, &dest).await;

    // What Prometheus asks for gets OpenMetrics, which its parser reads.
    let (kind, open) = scrape(&server, Some(PROMETHEUS_ACCEPT)).await;
    assert_eq!(
        kind,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(open.ends_with("# EOF\n"));
    let open_families = python_families("openmetrics", &open);
    assert_eq!(open_families["hookinbox_received"], "counter");
    assert_eq!(open_families["hookinbox_build_info"], "gauge");

    // A scraper that prefers the classic text gets it, with the same numbers.
    let (kind, text) = scrape(&server, Some("text/plain;version=0.0.4;q=1,*/*;q=0.1")).await;
    assert!(kind.starts_with("text/plain; version=0.0.4"));
    promtool_check_metrics(&text);
    python_families("prometheus", &text);
    for series in [
        "hookinbox_received_total{source=\"shop\"}",
        "hookinbox_duplicates_total{source=\"shop\"}",
        "hookinbox_rejected_total{source=\"shop\",reason=\"missing_signature\"}",
        "hookinbox_held{source=\"inbox\"}",
    ] {
        assert_eq!(value(&text, series), 1.0, "{series}");
        assert_eq!(value(&open, series), 1.0, "{series}");
    }
    // Two events' keys, in the dedupe index's hash tables.
    assert!(value(&text, "hookinbox_dedupe_memory_bytes") > 0.0);
    server.stop().await;
}

/// Runs `program` with `args` from the repository's root; fails with what
/// it said unless it exits 0. Returns its stdout.
fn run_ok(program: &str, args: &[&str], hint: &str) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("{program} does not run ({e}): {hint}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{program} {}: {said}\n({hint})",
        args.join(" ")
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PROMTOOL: &str = "Debian: apt-get install prometheus";
const RULES: &str = "packaging/monitoring/hookinbox.rules.yml";
const DASHBOARD: &str = "packaging/monitoring/hookinbox.dashboard.json";

#[tokio::test]
async fn the_shipped_rules_and_dashboard_pass_promtool_and_grafanas_schema_on_real_metric_names() {
    // The rules load, and their unit tests (each alert fires when it
    // should, with its labels and annotations, and not on healthy series)
    // pass.
    let checked = run_ok("promtool", &["check", "rules", RULES], PROMTOOL);
    assert!(checked.contains("SUCCESS: 14 rules found"), "{checked}");
    run_ok(
        "promtool",
        &[
            "test",
            "rules",
            "packaging/monitoring/hookinbox.rules.test.yml",
        ],
        PROMTOOL,
    );

    // The example scrape config loads with its rule file, once the token
    // file it names exists.
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("hookinbox.token");
    std::fs::write(&token, TOKEN).unwrap();
    let example = std::fs::read_to_string(format!(
        "{}/packaging/monitoring/prometheus.example.yml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert!(example.contains("credentials_file: /etc/prometheus/hookinbox.token"));
    let prometheus = dir.path().join("prometheus.yml");
    std::fs::write(
        &prometheus,
        example.replace("/etc/prometheus/hookinbox.token", token.to_str().unwrap()),
    )
    .unwrap();
    std::fs::copy(
        format!("{}/{RULES}", env!("CARGO_MANIFEST_DIR")),
        dir.path().join("hookinbox.rules.yml"),
    )
    .unwrap();
    run_ok(
        "promtool",
        &["check", "config", prometheus.to_str().unwrap()],
        PROMTOOL,
    );

    // Every metric the rules and the dashboard name is in a real scrape
    // (a renamed metric breaks here, not in an operator's Grafana), and the
    // dashboard type-checks against Grafana's own schema.
    let dest = Destination::start(Mode::Ok).await;
    let server = TestServer::start(&config(dir.path(), &dest), Clock::system()).await;
    let (_, text) = scrape(&server, None).await;
    server.stop().await;
    let scraped = dir.path().join("scrape.txt");
    std::fs::write(&scraped, text).unwrap();
    let out = run_ok(
        "node",
        &[
            "tests/grafana/validate.mjs",
            "--metrics",
            scraped.to_str().unwrap(),
            // A series only while a node holds the replication lease, which
            // this node (without [replication]) never reads.
            "--allow-metric",
            "hookinbox_replication_lease_holder",
            // Set by the first reconcile pass, which reads the provider's
            // subscription; none runs in this test.
            "--allow-metric",
            "hookinbox_source_subscription_active",
            "--rules",
            RULES,
            DASHBOARD,
        ],
        "npm ci --prefix tests/grafana --no-audit --no-fund",
    );
    assert!(out.contains("conforms to @grafana/schema"), "{out}");
}
