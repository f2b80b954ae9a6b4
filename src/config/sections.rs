//! The server-wide sections of a validated config: `[server]`,
//! `[retention]`, `[log]`, `[admin]`, `[keys]` and `[alerts]`. Types only; `validate/`
//! makes them from the file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::resolve::{Resolved, Stage};

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub data_dir: PathBuf,
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub shutdown_timeout: Duration,
    /// Open ingest connections at most; past it a new one closes the open
    /// one that has waited longest for a request head.
    pub max_connections: usize,
    /// Request bodies held in memory at once, over all ingest requests
    /// (bodies of at most 64 KiB have a further quarter of it reserved).
    pub max_buffered_body: usize,
    /// TLS on the ingest listener (the admin listener stays on loopback).
    pub tls: Option<crate::tls::TlsFiles>,
    /// The admin API on a Unix domain socket too, for apps on the same VM.
    pub admin_socket: Option<AdminSocket>,
}

/// `server.admin_socket`: a Unix domain socket that serves the admin API as
/// `admin_listen` does (tokens and roles apply the same). Its file mode and
/// group say who may connect at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSocket {
    pub path: PathBuf,
    /// The socket file's permission bits (`admin_socket_mode`, default 0660).
    pub mode: u32,
    /// The socket file's group (`admin_socket_group`); `None`: the process's.
    pub group: Option<String>,
}

#[derive(Debug, Clone)]
pub struct RetentionConfig {
    pub dedupe_ttl: Duration,
    /// Delivered events are deleted this long after delivery.
    pub payload_ttl: Duration,
    /// Dead-lettered and ignored events are deleted this long after.
    pub dlq_ttl: Duration,
    /// Audit records are deleted this long after they were made.
    pub audit_ttl: Duration,
    pub sweep_interval: Duration,
}

/// `[telemetry]`: a trace per event, exported over OTLP/HTTP (protobuf)
/// from the SDK's batch thread. Absent: nothing is traced or exported.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP receiver; traces are POSTed to `{endpoint}/v1/traces`.
    /// `None`: the `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` variable, else `http://localhost:4318`.
    pub endpoint: Option<reqwest::Url>,
    /// `service.name`; `None`: `OTEL_SERVICE_NAME`, else `hookinbox`.
    pub service_name: Option<String>,
    /// The share of events traced, 0 to 1, decided by the trace id (so an
    /// event's ingest and every attempt are traced or none is).
    pub sample_ratio: f64,
    /// A link to a trace, `{trace_id}` in it replaced (Tempo, Jaeger,
    /// Honeycomb): the event page shows it.
    pub trace_url: Option<String>,
    /// Resource attributes beside `OTEL_RESOURCE_ATTRIBUTES`'s (these win).
    pub resource: std::collections::BTreeMap<String, String>,
}

/// Where and when to post alerts.
#[derive(Debug, Clone)]
pub struct AlertConfig {
    /// A URL that takes `{"text": …}` (a Slack incoming webhook, or your own).
    pub url: reqwest::Url,
    /// Alert when a source's DLQ holds more than this many events.
    pub dlq_threshold: u64,
    /// Alert when a source's oldest pending event is older than this.
    pub pending_age: Duration,
    /// The same alert (kind + source) at most once per this window.
    pub min_interval: Duration,
    /// How often the conditions are checked.
    pub check_interval: Duration,
    /// Alert this long before a source secret the provider still signs
    /// with expires.
    pub secret_notice: Duration,
    /// The body's shape: Slack's `{"text": …}` or the plain JSON object.
    pub format: AlertFormat,
    /// The machine named in each alert; `None`: the host name.
    pub host: Option<String>,
    /// Where people open the dashboard (a tunnel or proxy to the admin
    /// listener); `None`: `http://` the admin listener's address.
    pub dashboard_url: Option<reqwest::Url>,
}

/// The body an alert is posted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertFormat {
    /// `{"text": "…", "hookinbox": {…}}`: a Slack (or Mattermost, Rocket.Chat,
    /// Discord `/slack`) incoming webhook shows the text.
    Slack,
    /// The alert object alone, for a receiver of your own.
    Json,
}

/// The admin listener's bearer token (the role `admin`, the name
/// `admin`), and the people with tokens of their own.
#[derive(Debug, Clone)]
pub struct AdminConfig<S: Stage = Resolved> {
    pub token: S::AdminToken,
    pub users: Vec<AdminUser>,
}

/// `[[admin.user]]`: a person's token, kept only as its SHA-256, and what
/// it may do.
#[derive(Clone)]
pub struct AdminUser {
    pub name: String,
    pub role: crate::words::Role,
    pub token_sha256: [u8; 32],
    /// Unix milliseconds from which the token is refused.
    pub expires_ms: Option<u64>,
    /// Where the token came from, for `config check`.
    pub origin: AdminUserToken,
}

/// Where an `[[admin.user]]` token is kept, as `config check` shows it.
#[derive(Debug, Clone)]
pub enum AdminUserToken {
    Secret(super::SecretOrigin),
    Sha256,
}

impl std::fmt::Debug for AdminUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminUser")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("token_sha256", &"[redacted]")
            .field("expires_ms", &self.expires_ms)
            .finish()
    }
}

/// `[keys]`: the idempotency keys' defaults and the apps allowed to use
/// them, each in its own namespace.
#[derive(Debug, Clone)]
pub struct KeysConfig {
    /// A claim's lease when the claim names none.
    pub lease: Duration,
    /// How long a key is kept after its last change when the claim names
    /// no ttl.
    pub ttl: Duration,
    pub clients: Vec<KeyClient>,
}

/// `[replication]`: the write-ahead log replicated to a NATS JetStream
/// stream ([`crate::replicate`]), and this node's role.
#[derive(Debug, Clone)]
pub struct ReplicationConfig {
    /// One or more NATS servers (`nats://` or `tls://`).
    pub urls: Vec<reqwest::Url>,
    /// The stream's name, one per inbox.
    pub stream: String,
    /// The stream's replicas when the primary creates it.
    pub replicas: usize,
    pub role: crate::words::ReplicationRole,
    /// A primary not heard of this long is replaced by a standby.
    pub lease: Duration,
    /// This node's name in the lease.
    pub node: String,
    /// How often a primary snapshots its database for new standbys.
    pub snapshot_interval: Duration,
    /// How a primary compresses its frames in the stream.
    pub compression: crate::words::FrameCodec,
    pub creds_file: Option<std::path::PathBuf>,
    /// The token of a NATS server's `authorization { token }`, if it has one.
    pub token: Option<super::GivenSecret<super::Secret>>,
    pub ca_file: Option<std::path::PathBuf>,
}

/// One app allowed to use keys: its token reaches only its namespace.
#[derive(Debug, Clone)]
pub struct KeyClient {
    pub name: String,
    pub namespace: String,
    pub token: super::GivenSecret<super::Secret>,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub level: String,
    pub format: LogFormat,
    /// How often the one-line summary of what happened is logged at info.
    pub summary_interval: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}
