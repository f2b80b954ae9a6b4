//! The operator's commands (`stats`, `events`, `dlq`, `destinations`,
//! `sweep`, `backup`): clients of the admin API of a running server.
//!
//! Tables for people by default, the API's JSON with `--json`. Exit codes:
//! 0 done; 1 the server refused or failed (not found, conflict, 5xx); 2
//! usage; 3 the server cannot be reached; 4 the token is missing or wrong.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::config::SecretPurpose;
use crate::exit::{EXIT_FAILURE, EXIT_UNAUTHORIZED, EXIT_UNREACHABLE, EXIT_USAGE, Failure};

/// Where the admin API is and how to authenticate.
#[derive(Debug, Args)]
pub struct Remote {
    /// The admin listener's URL.
    #[arg(
        long,
        global = true,
        env = "HOOKINBOX_ADMIN_URL",
        default_value = "http://127.0.0.1:8081"
    )]
    pub admin: String,
    /// A file holding the admin token (else HOOKINBOX_ADMIN_TOKEN, else the
    /// default data dir's generated token).
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct Filter {
    #[arg(long)]
    pub source: Option<String>,
    /// pending, held, delivered, dead or ignored.
    #[arg(long)]
    pub status: Option<String>,
    /// The provider's event type.
    #[arg(long = "type")]
    pub event_type: Option<String>,
    /// The provider's event id.
    #[arg(long)]
    pub event_id: Option<String>,
    /// Received at or after (RFC 3339).
    #[arg(long)]
    pub from: Option<String>,
    /// Received before (RFC 3339).
    #[arg(long)]
    pub to: Option<String>,
}

impl Filter {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("source", &self.source),
            ("status", &self.status),
            ("type", &self.event_type),
            ("event_id", &self.event_id),
            ("from", &self.from),
            ("to", &self.to),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect()
    }

    fn json(&self) -> serde_json::Map<String, Value> {
        self.pairs()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v)))
            .collect()
    }
}

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// List events, newest first.
    List {
        #[command(flatten)]
        filter: Filter,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Continue from a previous page's cursor.
        #[arg(long)]
        cursor: Option<u64>,
    },
    /// One event: payload, headers and every attempt.
    Show { id: String },
    /// Deliver one event again (same webhook-id).
    Replay { id: String },
    /// Stop delivering one event; the note is required.
    Ignore {
        id: String,
        #[arg(long)]
        note: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Dead-lettered events, newest first.
    List {
        #[arg(long)]
        source: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Replay dead-lettered events matching the filter (all of a source by default).
    Replay {
        #[command(flatten)]
        filter: Filter,
        /// Only count what would be replayed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Ignore dead-lettered events matching the filter, with a note.
    Ignore {
        #[command(flatten)]
        filter: Filter,
        #[arg(long)]
        note: String,
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DestinationsCommand {
    /// Each destination: paused, circuit, in flight.
    List,
    /// Stop delivering to it; events accumulate.
    Pause { name: String },
    /// Deliver again; what accumulated goes out oldest first.
    Resume { name: String },
}

#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// Counts per source and event type, latencies, DLQ size.
    Stats,
    /// Search, show, replay and ignore events.
    #[command(subcommand)]
    Events(EventsCommand),
    /// The dead-letter queue: list, replay, ignore.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Destinations: list, pause, resume.
    #[command(subcommand)]
    Destinations(DestinationsCommand),
    /// Sweep expired data now.
    Sweep,
    /// Save a consistent copy of the database to a file.
    Backup {
        #[arg(long)]
        out: PathBuf,
    },
}

struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

fn fail(code: u8, error: anyhow::Error) -> Failure {
    Failure { code, error }
}

fn token(remote: &Remote) -> Result<String, Failure> {
    let from_file = |path: &PathBuf| {
        std::fs::read_to_string(path)
            .map(|t| t.trim().to_owned())
            .with_context(|| format!("cannot read the admin token from {}", path.display()))
    };
    if let Some(path) = &remote.token_file {
        return from_file(path).map_err(|e| fail(EXIT_UNAUTHORIZED, e));
    }
    if let Ok(t) = std::env::var("HOOKINBOX_ADMIN_TOKEN")
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_owned());
    }
    // The token a server started here with the default data_dir generated.
    let default = SecretPurpose::Admin.path(Path::new("hookinbox-data"));
    if default.exists() {
        return from_file(&default).map_err(|e| fail(EXIT_UNAUTHORIZED, e));
    }
    Err(fail(
        EXIT_UNAUTHORIZED,
        anyhow!(
            "no admin token: set HOOKINBOX_ADMIN_TOKEN or --token-file (the server printed it on first start and keeps it in <data_dir>/secrets/admin.token.secret)"
        ),
    ))
}

impl Client {
    fn new(remote: &Remote) -> Result<Client, Failure> {
        let http =
            crate::send::http_client(Duration::from_secs(600)).map_err(|e| fail(EXIT_USAGE, e))?;
        Ok(Client {
            base: remote.admin.trim_end_matches('/').to_owned(),
            token: token(remote)?,
            http,
        })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<reqwest::Response, Failure> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        let res = req.send().await.map_err(|e| {
            fail(
                EXIT_UNREACHABLE,
                anyhow!(
                    "cannot reach the hookinbox admin API at {}: is the server running? ({e})",
                    self.base
                ),
            )
        })?;
        let status = res.status();
        if status.is_success() {
            return Ok(res);
        }
        let text = res.text().await.unwrap_or_default();
        let reason = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["reason"].as_str().map(str::to_owned))
            .unwrap_or(text);
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(fail(
                EXIT_UNAUTHORIZED,
                anyhow!(
                    "the admin API refused the token (401): check HOOKINBOX_ADMIN_TOKEN or --token-file"
                ),
            ));
        }
        Err(fail(
            EXIT_FAILURE,
            anyhow!("{} {path}: {status}: {reason}", "admin API"),
        ))
    }

    async fn json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Failure> {
        let res = self.call(method, path, body).await?;
        let bytes = res
            .bytes()
            .await
            .map_err(|e| fail(EXIT_FAILURE, anyhow!("the answer broke off: {e}")))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| fail(EXIT_FAILURE, anyhow!("unreadable answer: {e}")))
    }
}

pub async fn run(remote: Remote, command: OpsCommand) -> Result<(), Failure> {
    use reqwest::Method;
    let client = Client::new(&remote)?;
    let out = match command {
        OpsCommand::Stats => {
            let v = client.json(Method::GET, "/api/stats", None).await?;
            (v.clone(), stats_table(&v))
        }
        OpsCommand::Events(EventsCommand::List {
            filter,
            limit,
            cursor,
        }) => {
            let mut q = filter.pairs();
            q.push(("limit", limit.to_string()));
            if let Some(c) = cursor {
                q.push(("cursor", c.to_string()));
            }
            let v = client
                .json(Method::GET, &format!("/api/events?{}", query(&q)), None)
                .await?;
            (v.clone(), events_table(&v))
        }
        OpsCommand::Events(EventsCommand::Show { id }) => {
            let v = client
                .json(Method::GET, &format!("/api/events/{id}"), None)
                .await?;
            (v.clone(), event_detail(&v))
        }
        OpsCommand::Events(EventsCommand::Replay { id }) => {
            let v = client
                .json(Method::POST, &format!("/api/events/{id}/replay"), None)
                .await?;
            (
                v.clone(),
                format!(
                    "{id}: replayed, now {}\n",
                    v["status"].as_str().unwrap_or("?")
                ),
            )
        }
        OpsCommand::Events(EventsCommand::Ignore { id, note }) => {
            let v = client
                .json(
                    Method::POST,
                    &format!("/api/events/{id}/ignore"),
                    Some(json!({"note": note})),
                )
                .await?;
            (v.clone(), format!("{id}: ignored\n"))
        }
        OpsCommand::Dlq(DlqCommand::List { source, limit }) => {
            let mut q = vec![("status", "dead".to_owned()), ("limit", limit.to_string())];
            if let Some(s) = source {
                q.push(("source", s));
            }
            let v = client
                .json(Method::GET, &format!("/api/events?{}", query(&q)), None)
                .await?;
            (v.clone(), events_table(&v))
        }
        OpsCommand::Dlq(DlqCommand::Replay { filter, dry_run }) => {
            let mut body = filter.json();
            body.insert("status".into(), json!("dead"));
            body.insert("dry_run".into(), json!(dry_run));
            let v = client
                .json(Method::POST, "/api/replay", Some(Value::Object(body)))
                .await?;
            (v.clone(), bulk_text(&v, "replayed"))
        }
        OpsCommand::Dlq(DlqCommand::Ignore {
            filter,
            note,
            dry_run,
        }) => {
            let mut body = filter.json();
            body.insert("status".into(), json!("dead"));
            body.insert("dry_run".into(), json!(dry_run));
            body.insert("note".into(), json!(note));
            let v = client
                .json(Method::POST, "/api/ignore", Some(Value::Object(body)))
                .await?;
            (v.clone(), bulk_text(&v, "ignored"))
        }
        OpsCommand::Destinations(DestinationsCommand::List) => {
            let v = client.json(Method::GET, "/api/destinations", None).await?;
            (v.clone(), destinations_table(&v))
        }
        OpsCommand::Destinations(DestinationsCommand::Pause { name }) => {
            let v = client
                .json(
                    Method::POST,
                    &format!("/api/destinations/{name}/pause"),
                    None,
                )
                .await?;
            (v, format!("{name}: paused\n"))
        }
        OpsCommand::Destinations(DestinationsCommand::Resume { name }) => {
            let v = client
                .json(
                    Method::POST,
                    &format!("/api/destinations/{name}/resume"),
                    None,
                )
                .await?;
            (v, format!("{name}: resumed\n"))
        }
        OpsCommand::Sweep => {
            let v = client.json(Method::POST, "/api/sweep", None).await?;
            let s = &v["swept"];
            let text = format!(
                "swept {} delivered, {} dead or ignored, {} dedupe keys in {} ms\n",
                s["delivered"], s["dead_or_ignored"], s["dedupe_keys"], s["millis"]
            );
            (v, text)
        }
        OpsCommand::Backup { out } => {
            let bytes = backup(&client, &out).await?;
            let v = json!({"out": out.display().to_string(), "bytes": bytes});
            (
                v,
                format!("backup written to {} ({bytes} bytes)\n", out.display()),
            )
        }
    };
    let (value, text) = out;
    let mut stdout = std::io::stdout().lock();
    let written = if remote.json {
        writeln!(
            stdout,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        )
    } else {
        write!(stdout, "{text}")
    };
    written.map_err(|e| fail(EXIT_FAILURE, e.into()))
}

/// Streams the backup into `out` through a temp file, renamed when whole.
async fn backup(client: &Client, out: &std::path::Path) -> Result<u64, Failure> {
    let mut res = client
        .call(reqwest::Method::GET, "/api/backup", None)
        .await?;
    let partial = out.with_extension("partial");
    let io = |e: std::io::Error| fail(EXIT_FAILURE, anyhow!("{}: {e}", out.display()));
    let mut file = create_private(&partial).map_err(io)?;
    let mut bytes = 0u64;
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| fail(EXIT_FAILURE, anyhow!("the backup download broke off: {e}")))?
    {
        file.write_all(&chunk).map_err(io)?;
        bytes += chunk.len() as u64;
    }
    file.sync_all().map_err(io)?;
    std::fs::rename(&partial, out).map_err(io)?;
    Ok(bytes)
}

/// Creates (or truncates) `path` readable by its owner only: a backup holds
/// every stored payload, which the usual umask 022 would make world-readable.
fn create_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // The mode applies only to a file this call creates; a partial file left
    // by an earlier broken download keeps its own. Tighten it before a byte
    // is written.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

fn query(pairs: &[(&str, String)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())))
        .finish()
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

fn events_table(v: &Value) -> String {
    let events = v["events"].as_array().cloned().unwrap_or_default();
    if events.is_empty() {
        return "no events\n".into();
    }
    let rows = events
        .iter()
        .map(|e| {
            vec![
                cell(&e["id"]),
                cell(&e["source"]),
                cell(&e["event_id"]),
                cell(&e["event_type"]),
                cell(&e["status"]),
                cell(&e["received_at"]),
                cell(&e["attempts"]),
                e["dead_letter"]["reason"]
                    .as_str()
                    .map(|r| r.chars().take(60).collect())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "ID", "SOURCE", "EVENT ID", "TYPE", "STATUS", "RECEIVED", "ATTEMPTS", "WHY DEAD",
        ],
        rows,
    );
    if let Some(c) = v["next_cursor"].as_u64() {
        out.push_str(&format!("more: --cursor {c}\n"));
    }
    out
}

fn event_detail(v: &Value) -> String {
    let mut out = String::new();
    for key in [
        "id",
        "source",
        "event_id",
        "event_type",
        "status",
        "received_at",
        "attempts",
        "replays",
        "next_attempt_at",
        "delivered_at",
    ] {
        out.push_str(&format!("{key:<16}{}\n", cell(&v[key])));
    }
    if let Some(reason) = v["dead_letter"]["reason"].as_str() {
        out.push_str(&format!("{:<16}{reason}\n", "dead_letter"));
    }
    if let Some(note) = v["note"]["text"].as_str() {
        out.push_str(&format!("{:<16}{note}\n", "note"));
    }
    out.push_str("\nattempts:\n");
    let attempts = v["attempt_history"].as_array().cloned().unwrap_or_default();
    let rows = attempts
        .iter()
        .map(|a| {
            vec![
                cell(&a["n"]),
                cell(&a["started_at"]),
                cell(&a["outcome"]),
                cell(&a["status"]),
                cell(&a["latency_ms"]),
                cell(if a["error"].is_null() {
                    &a["response_snippet"]
                } else {
                    &a["error"]
                })
                .chars()
                .take(80)
                .collect(),
            ]
        })
        .collect();
    out.push_str(&table(
        &["#", "STARTED", "OUTCOME", "STATUS", "MS", "DETAIL"],
        rows,
    ));
    out.push_str(&format!(
        "\npayload ({}):\n{}\n",
        cell(&v["payload"]["encoding"]),
        cell(&v["payload"]["data"])
    ));
    out
}

fn destinations_table(v: &Value) -> String {
    let list = v["destinations"].as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return "no destinations: every source holds its events\n".into();
    }
    let rows = list
        .iter()
        .map(|d| {
            vec![
                cell(&d["name"]),
                cell(&d["url"]),
                cell(&d["paused"]),
                cell(&d["circuit"]),
                format!("{}/{}", cell(&d["in_flight"]), cell(&d["max_concurrency"])),
            ]
        })
        .collect();
    table(&["NAME", "URL", "PAUSED", "CIRCUIT", "IN FLIGHT"], rows)
}

fn stats_table(v: &Value) -> String {
    let Some(sources) = v["sources"].as_object() else {
        return "no sources\n".into();
    };
    let rows = sources
        .iter()
        .map(|(name, s)| {
            let st = &s["stored"];
            vec![
                name.clone(),
                cell(&s["since_start"]["received"]),
                cell(&s["since_start"]["duplicates"]),
                cell(&st["pending"]),
                cell(&st["retrying"]),
                cell(&st["held"]),
                cell(&st["delivered"]),
                cell(&st["dead"]),
                cell(&st["ignored"]),
                s["success_rate"]
                    .as_f64()
                    .map(|r| format!("{:.1}%", r * 100.0))
                    .unwrap_or_else(|| "-".into()),
                s["oldest_pending_age_ms"]
                    .as_u64()
                    .map(|ms| {
                        humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
                    })
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table(
        &[
            "SOURCE",
            "RECEIVED",
            "DUPES",
            "PENDING",
            "RETRYING",
            "HELD",
            "DELIVERED",
            "DEAD",
            "IGNORED",
            "SUCCESS",
            "OLDEST PENDING",
        ],
        rows,
    )
}

fn bulk_text(v: &Value, action: &str) -> String {
    if v["dry_run"] == json!(true) {
        return format!("dry run: {} events match\n", v["matched"]);
    }
    let mut out = format!("{} matched, {} {action}\n", v["matched"], v[action]);
    for r in v["refused"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  refused {}: {}\n",
            cell(&r["id"]),
            cell(&r["reason"])
        ));
    }
    out
}
