//! The config file as written: serde structs (a key left out is `None`),
//! what a key left out means ([`default`]: every default, in one place), and
//! the `HOOKINBOX_*` variables that override keys. `validate/` turns this
//! into a typed config; `show.rs` turns a typed config back into this.
//!
//! serde checks what a type can say: a value of the wrong type, an unknown
//! key, a name that is not one of a key's names (`kind`, `log.format`, …).
//! Those errors carry the line, the column and the key path ([`parse`]).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::values::parse_name;
use super::{
    AlertFormat, ConfigError, HmacAlgorithm, Kind, LogFormat, OnDeadLetter, Position, RedactFor,
    SignatureEncoding,
};

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub retention: RawRetention,
    #[serde(default)]
    pub log: RawLog,
    pub alerts: Option<RawAlerts>,
    pub admin: Option<RawAdmin>,
    pub keys: Option<RawKeys>,
    pub replication: Option<RawReplication>,
    pub telemetry: Option<RawTelemetry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source: Vec<RawSource>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<String>,
    pub admin_listen: Option<String>,
    pub data_dir: Option<String>,
    pub header_read_timeout: Option<String>,
    pub body_read_timeout: Option<String>,
    pub shutdown_timeout: Option<String>,
    pub max_connections: Option<u64>,
    pub max_buffered_body: Option<RawSize>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
    pub admin_socket: Option<String>,
    pub admin_socket_mode: Option<String>,
    pub admin_socket_group: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetention {
    pub dedupe_ttl: Option<String>,
    pub payload_ttl: Option<String>,
    pub dlq_ttl: Option<String>,
    pub audit_ttl: Option<String>,
    pub sweep_interval: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    pub level: Option<String>,
    pub format: Option<LogFormat>,
    pub summary_interval: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAlerts {
    pub url: Option<String>,
    pub dlq_threshold: Option<u64>,
    pub pending_age: Option<String>,
    pub min_interval: Option<String>,
    pub check_interval: Option<String>,
    /// How long before a source secret in use expires to alert.
    pub secret_notice: Option<String>,
    pub format: Option<AlertFormat>,
    pub host: Option<String>,
    pub dashboard_url: Option<String>,
}

/// `[telemetry]`: traces over OTLP/HTTP.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    pub endpoint: Option<String>,
    pub service_name: Option<String>,
    pub sample_ratio: Option<f64>,
    pub trace_url: Option<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub resource: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub token: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user: Vec<RawAdminUser>,
}

/// `[[admin.user]]`: a person's own token and role on the admin API.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdminUser {
    pub name: Option<String>,
    pub role: Option<String>,
    pub token: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    /// The token's SHA-256, hex: the config then holds no secret.
    pub token_sha256: Option<String>,
    /// RFC 3339: the token is refused from then on.
    pub expires: Option<String>,
}

/// `[keys]`: the idempotency keys' defaults and the apps that use them.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawKeys {
    pub lease: Option<String>,
    pub ttl: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client: Vec<RawKeyClient>,
}

/// `[replication]`: the write-ahead log replicated to a NATS JetStream
/// stream, and this node's role.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawReplication {
    pub url: Option<String>,
    pub stream: Option<String>,
    pub replicas: Option<u64>,
    pub role: Option<String>,
    pub lease: Option<String>,
    pub node: Option<String>,
    pub snapshot_interval: Option<String>,
    /// How frames are compressed in the stream: "zstd" or "none".
    pub compression: Option<String>,
    pub creds_file: Option<String>,
    /// A NATS server's `authorization { token }`, sent on connect.
    pub token: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    pub ca_file: Option<String>,
}

/// `[[keys.client]]`: one app, its token and its namespace.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawKeyClient {
    pub name: Option<String>,
    pub token: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    pub namespace: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    pub name: Option<String>,
    pub kind: Option<Kind>,
    pub secret: Option<String>,
    /// Secrets inline, or `[[source.secrets]]` tables (a name, an expiry).
    pub secrets: Option<Vec<RawSecretEntry>>,
    pub secret_env: Option<String>,
    pub secret_file: Option<String>,
    pub generate_secret: Option<bool>,
    pub tolerance: Option<String>,
    pub expect_within: Option<String>,
    pub max_body: Option<RawSize>,
    pub event_id: Option<OneOrMany>,
    pub event_type: Option<OneOrMany>,
    pub public_url: Option<String>,
    pub verify_token: Option<String>,
    pub verify_token_env: Option<String>,
    pub verify_token_file: Option<String>,
    /// A URL (one destination, set by the `destination_*` and delivery
    /// keys beside it) or `[[source.destination]]` tables.
    pub destination: Option<RawDestinations>,
    pub destination_secret: Option<String>,
    pub destination_secret_env: Option<String>,
    pub destination_secret_file: Option<String>,
    pub forward_headers: Option<Vec<String>>,
    pub destination_ca_file: Option<String>,
    pub destination_subject: Option<String>,
    pub destination_creds_file: Option<String>,
    pub filter_types: Option<Vec<String>>,
    pub filter_match: Option<String>,
    pub connect_timeout: Option<String>,
    pub timeout: Option<String>,
    pub initial_interval: Option<String>,
    pub max_interval: Option<String>,
    pub max_attempts: Option<u32>,
    pub max_age: Option<String>,
    pub retry_statuses: Option<Vec<CodeOrText>>,
    pub max_concurrency: Option<usize>,
    pub max_rate: Option<f64>,
    pub paused: Option<bool>,
    pub breaker_failures: Option<u32>,
    pub breaker_cooldown: Option<String>,
    pub ordering_key: Option<String>,
    pub ordering_on_dead_letter: Option<OnDeadLetter>,
    pub signature_header: Option<String>,
    pub algorithm: Option<HmacAlgorithm>,
    pub encoding: Option<SignatureEncoding>,
    pub prefix: Option<String>,
    pub signed_payload: Option<String>,
    pub timestamp_header: Option<String>,
    /// `[source.reconcile]`: ask the provider's API for what never arrived.
    pub reconcile: Option<RawReconcile>,
    /// JSON pointers (`*`: every item) masked for who may not read them.
    pub redact: Option<Vec<String>>,
    pub redact_for: Option<RedactFor>,
}

/// `[source.reconcile]`: the provider API a pass asks, its credential and
/// how often.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawReconcile {
    pub token: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<String>,
    pub interval: Option<String>,
    pub lookback: Option<String>,
    pub api_base: Option<String>,
    /// GitHub: `repos/OWNER/REPO/hooks/ID` or `orgs/ORG/hooks/ID`; GitLab:
    /// `projects/ID/hooks/ID` or `groups/ID/hooks/ID`.
    pub hook: Option<String>,
    /// Stripe: the webhook endpoint (`we_…`) whose status is checked;
    /// Svix (kind standard): the endpoint (`ep_…`) that sends here.
    pub endpoint: Option<String>,
    /// Svix (kind standard): the application (`app_…`) of `endpoint`.
    pub app: Option<String>,
    /// GitHub App (`hook = "app"`): the App's ID, and the file of its
    /// private key (PEM), which signs the JWT every call carries.
    pub app_id: Option<u64>,
    pub private_key_file: Option<String>,
    /// Paddle: the notification destination (`ntfset_…`) that sends here.
    pub notification_setting: Option<String>,
}

/// One of `secrets = […]`: the secret itself, or a table that names it,
/// says where it is kept and when it expires.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum RawSecretEntry {
    Text(String),
    Table(RawNamedSecret),
}

/// A `[[source.secrets]]` table: one secret, in exactly one place.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawNamedSecret {
    pub name: Option<String>,
    pub secret: Option<String>,
    pub secret_env: Option<String>,
    pub secret_file: Option<String>,
    /// RFC 3339, or a date (midnight UTC): it verifies nothing from then.
    pub expires: Option<String>,
}

/// Read by hand for the reason [`RawDestinations`] is.
impl<'de> Deserialize<'de> for RawSecretEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> serde::de::Visitor<'de> for Shape {
            type Value = RawSecretEntry;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a secret, or a table with name, secret_file (or secret, secret_env) and expires")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<RawSecretEntry, E> {
                Ok(RawSecretEntry::Text(text.to_owned()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawSecretEntry, A::Error> {
                RawNamedSecret::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RawSecretEntry::Table)
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

/// `destination = "…"`, or `[[source.destination]]` tables.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum RawDestinations {
    Url(String),
    Tables(Vec<RawDestination>),
}

/// Read by hand rather than `untagged`: an untagged enum would hide a
/// table's own error (an unknown key, a value of the wrong type) behind
/// "did not match any variant".
impl<'de> Deserialize<'de> for RawDestinations {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Shape;
        impl<'de> serde::de::Visitor<'de> for Shape {
            type Value = RawDestinations;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a URL, or [[source.destination]] tables")
            }

            fn visit_str<E: serde::de::Error>(self, url: &str) -> Result<RawDestinations, E> {
                Ok(RawDestinations::Url(url.to_owned()))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawDestinations, A::Error> {
                let mut tables = Vec::new();
                while let Some(table) = seq.next_element::<RawDestination>()? {
                    tables.push(table);
                }
                Ok(RawDestinations::Tables(tables))
            }
        }
        deserializer.deserialize_any(Shape)
    }
}

/// One `[[source.destination]]` table: the delivery keys of the one-URL
/// form, without their `destination_` prefix, and a name.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDestination {
    pub name: Option<String>,
    pub url: Option<String>,
    pub secret: Option<String>,
    pub secret_env: Option<String>,
    pub secret_file: Option<String>,
    pub ca_file: Option<String>,
    pub subject: Option<String>,
    pub creds_file: Option<String>,
    pub forward_headers: Option<Vec<String>>,
    pub filter_types: Option<Vec<String>>,
    pub filter_match: Option<String>,
    pub connect_timeout: Option<String>,
    pub timeout: Option<String>,
    pub initial_interval: Option<String>,
    pub max_interval: Option<String>,
    pub max_attempts: Option<u32>,
    pub max_age: Option<String>,
    pub retry_statuses: Option<Vec<CodeOrText>>,
    pub max_concurrency: Option<usize>,
    pub max_rate: Option<f64>,
    pub paused: Option<bool>,
    pub breaker_failures: Option<u32>,
    pub breaker_cooldown: Option<String>,
    pub ordering_key: Option<String>,
    pub ordering_on_dead_letter: Option<OnDeadLetter>,
}

/// Calls `$callback!` with every delivery key of the one-URL form, each
/// paired with its name in a `[[source.destination]]` table: the one list
/// both directions use.
macro_rules! flat_keys {
    ($callback:ident) => {
        $callback!(
            destination_secret => secret,
            destination_secret_env => secret_env,
            destination_secret_file => secret_file,
            destination_ca_file => ca_file,
            destination_subject => subject,
            destination_creds_file => creds_file,
            forward_headers => forward_headers,
            filter_types => filter_types,
            filter_match => filter_match,
            connect_timeout => connect_timeout,
            timeout => timeout,
            initial_interval => initial_interval,
            max_interval => max_interval,
            max_attempts => max_attempts,
            max_age => max_age,
            retry_statuses => retry_statuses,
            max_concurrency => max_concurrency,
            max_rate => max_rate,
            paused => paused,
            breaker_failures => breaker_failures,
            breaker_cooldown => breaker_cooldown,
            ordering_key => ordering_key,
            ordering_on_dead_letter => ordering_on_dead_letter,
        )
    };
}

impl RawSource {
    /// Moves the one-URL form's keys (`destination_secret`, `timeout`, …)
    /// into a table, each under its table name; returns the names of those
    /// that were set, to refuse them beside `[[source.destination]]` tables.
    pub fn take_flat_destination(&mut self) -> (RawDestination, Vec<&'static str>) {
        let mut set = Vec::new();
        macro_rules! take {
            ($($flat:ident => $table:ident),* $(,)?) => {
                RawDestination {
                    name: None,
                    url: None,
                    $($table: {
                        let v = self.$flat.take();
                        if v.is_some() {
                            set.push(stringify!($flat));
                        }
                        v
                    },)*
                }
            };
        }
        let table = flat_keys!(take);
        (table, set)
    }

    /// The inverse of [`RawSource::take_flat_destination`]: a table's keys
    /// written back in the one-URL form (`config check` shows a source the
    /// way it can be written).
    pub fn put_flat_destination(&mut self, table: RawDestination) {
        macro_rules! put {
            ($($flat:ident => $table:ident),* $(,)?) => {
                $(self.$flat = table.$table;)*
            };
        }
        self.destination = table.url.map(RawDestinations::Url);
        flat_keys!(put);
    }
}

/// The one-URL form's name of a table key (`secret` → `destination_secret`).
pub fn flat_key(table_key: &str) -> String {
    match table_key {
        "url" => "destination".to_owned(),
        "secret" | "secret_env" | "secret_file" | "ca_file" | "subject" | "creds_file" => {
            format!("destination_{table_key}")
        }
        other => other.to_owned(),
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(
    untagged,
    expecting = "expected a size: a number of bytes, or a string like \"512KiB\" or \"1MiB\""
)]
pub enum RawSize {
    Bytes(u64),
    Text(String),
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(untagged, expecting = "expected a string or a list of strings")]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(
    untagged,
    expecting = "expected a status code like 429 or a class like \"5xx\""
)]
pub enum CodeOrText {
    Code(u16),
    Text(String),
}

/// What a key left out means: every default of the file format, here and
/// nowhere else. `default.toml` tells operators the same values (and why),
/// and the test `default_toml_shows_the_defaults_of_the_code` holds the two
/// equal. Durations are text, parsed and bounded like a written value.
pub mod default {
    use super::super::{
        AlertFormat, DEFAULT_MAX_BODY, HmacAlgorithm, LogFormat, OnDeadLetter, SignatureEncoding,
        StatusPattern,
    };

    pub const LISTEN: &str = "127.0.0.1:8080";
    pub const ADMIN_LISTEN: &str = "127.0.0.1:8081";
    /// The admin socket's mode: its owner (hookinbox) and its group.
    pub const ADMIN_SOCKET_MODE: u32 = 0o660;
    pub const DATA_DIR: &str = "./hookinbox-data";
    pub const HEADER_READ_TIMEOUT: &str = "10s";
    pub const BODY_READ_TIMEOUT: &str = "30s";
    pub const SHUTDOWN_TIMEOUT: &str = "30s";
    /// A claim's lease when the claim names none: long enough for a
    /// webhook handler's work, short enough that a crashed worker's key is
    /// free again before the provider's next retry.
    pub const KEY_LEASE: &str = "30s";
    /// How long a key is kept after its last change: the 30 days the
    /// idempotency guides use for side effects such as emails.
    pub const KEY_TTL: &str = "30d";
    /// The replication stream's name: one per inbox.
    pub const REPLICATION_STREAM: &str = "hookinbox";
    pub const REPLICATION_REPLICAS: u64 = 1;
    /// A primary not heard of this long is replaced: longer than the
    /// renewals a NATS leader election can delay (3.6–8.2 s measured), so
    /// the lease is renewed several times a lease.
    pub const REPLICATION_LEASE: &str = "10s";
    /// How often the primary puts a snapshot of its database in the
    /// stream's object store (and the stream forgets the frames before the
    /// older of the two it keeps).
    pub const REPLICATION_SNAPSHOT_INTERVAL: &str = "1h";
    pub const MAX_CONNECTIONS: u64 = 1024;
    pub const MAX_BUFFERED_BODY: usize = 64 << 20;

    pub const DEDUPE_TTL: &str = "30d";
    pub const PAYLOAD_TTL: &str = "7d";
    pub const DLQ_TTL: &str = "30d";
    pub const AUDIT_TTL: &str = "1year";
    pub const SWEEP_INTERVAL: &str = "1m";

    pub const LOG_LEVEL: &str = "info";
    pub const LOG_FORMAT: LogFormat = LogFormat::Text;
    pub const LOG_SUMMARY_INTERVAL: &str = "1m";

    pub const DLQ_THRESHOLD: u64 = 0;
    pub const PENDING_AGE: &str = "1h";
    pub const MIN_INTERVAL: &str = "15m";
    pub const CHECK_INTERVAL: &str = "30s";
    pub const SECRET_NOTICE: &str = "7d";
    pub const ALERT_FORMAT: AlertFormat = AlertFormat::Slack;

    pub const GENERATE_SECRET: bool = false;
    pub const MAX_BODY: usize = DEFAULT_MAX_BODY;

    pub const FORWARD_HEADERS: [&str; 0] = [];
    pub const DESTINATION_SUBJECT: &str = "webhooks.{source}.{event_type}";
    pub const CONNECT_TIMEOUT: &str = "5s";
    pub const TIMEOUT: &str = "30s";
    pub const INITIAL_INTERVAL: &str = "5s";
    pub const MAX_INTERVAL: &str = "1h";
    pub const MAX_ATTEMPTS: u32 = 12;
    pub const MAX_AGE: &str = "3d";
    /// The answers that say "try again later"; any other non-2xx is final.
    pub const RETRY_STATUSES: [StatusPattern; 4] = [
        StatusPattern::Code(408),
        StatusPattern::Code(425),
        StatusPattern::Code(429),
        StatusPattern::Class(5),
    ];
    pub const MAX_CONCURRENCY: usize = 8;
    pub const PAUSED: bool = false;
    pub const BREAKER_FAILURES: u32 = 5;
    pub const BREAKER_COOLDOWN: &str = "30s";
    pub const ORDERING_ON_DEAD_LETTER: OnDeadLetter = OnDeadLetter::Skip;

    pub const ALGORITHM: HmacAlgorithm = HmacAlgorithm::Sha256;
    pub const ENCODING: SignatureEncoding = SignatureEncoding::Hex;
    pub const PREFIX: &str = "";
    pub const SIGNED_PAYLOAD: &str = "{body}";
    // [source.reconcile]; its lookback and api_base default per provider
    // (`validate/reconcile.rs`).
    pub const RECONCILE_INTERVAL: &str = "10m";
}

/// Parses the file. A TOML syntax error, a value of the wrong type, an
/// unknown key or a name that is not one of a key's names is reported with
/// its line and column, and (but for syntax) the key's path: toml's error
/// carries the span, `serde_path_to_error` the path (`source[1].kind`).
pub fn parse(text: &str, origin: &str) -> Result<RawConfig, ConfigError> {
    let located = |error: toml::de::Error, key: String| ConfigError {
        origin: origin.to_owned(),
        position: error.span().map(|span| Position::of(text, span.start)),
        key,
        source_name: None,
        message: error.message().trim_end().replace('\n', "; "),
    };
    let document = toml::de::Deserializer::parse(text).map_err(|e| located(e, String::new()))?;
    serde_path_to_error::deserialize(document).map_err(|e| {
        // "." is the path of the document itself.
        let key = Some(e.path().to_string()).filter(|p| p != ".");
        located(e.into_inner(), key.unwrap_or_default())
    })
}

/// The variables [`apply_env`] reads and the key each overrides.
const ENV_KEYS: [(&str, &str); 5] = [
    ("HOOKINBOX_LISTEN", "server.listen"),
    ("HOOKINBOX_ADMIN_LISTEN", "server.admin_listen"),
    ("HOOKINBOX_DATA_DIR", "server.data_dir"),
    ("HOOKINBOX_LOG_LEVEL", "log.level"),
    ("HOOKINBOX_LOG_FORMAT", "log.format"),
];

/// The keys whose value comes from a variable set in `env`: an error about
/// one of them is not about the file's line.
pub fn env_keys(env: &dyn Fn(&str) -> Option<String>) -> Vec<&'static str> {
    ENV_KEYS
        .iter()
        .filter(|(var, _)| env(var).is_some())
        .map(|(_, key)| *key)
        .collect()
}

/// Applies the `HOOKINBOX_*` variables, each of which overrides one
/// `[server]` or `[log]` key. Errors name the variable, not the file.
pub fn apply_env(
    raw: &mut RawConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let err = |name: &str, message: String| ConfigError {
        origin: "environment".into(),
        position: None,
        source_name: None,
        key: name.into(),
        message,
    };
    let var = |name: &str| match env(name) {
        Some(value) if value.trim().is_empty() => Err(err(
            name,
            "is set but empty; unset it or give it a value".into(),
        )),
        value => Ok(value),
    };
    let address = |name: &str| {
        let value = var(name)?;
        match &value {
            Some(text) if text.parse::<SocketAddr>().is_err() => Err(err(
                name,
                format!("{text:?} is not an address like 127.0.0.1:8080"),
            )),
            _ => Ok(value),
        }
    };
    if let Some(value) = address("HOOKINBOX_LISTEN")? {
        raw.server.listen = Some(value);
    }
    if let Some(value) = address("HOOKINBOX_ADMIN_LISTEN")? {
        raw.server.admin_listen = Some(value);
    }
    if let Some(value) = var("HOOKINBOX_DATA_DIR")? {
        raw.server.data_dir = Some(value);
    }
    if let Some(value) = var("HOOKINBOX_LOG_LEVEL")? {
        raw.log.level = Some(value);
    }
    if let Some(value) = var("HOOKINBOX_LOG_FORMAT")? {
        let format = parse_name(&value).map_err(|m| err("HOOKINBOX_LOG_FORMAT", m.to_string()))?;
        raw.log.format = Some(format);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;

    use super::*;
    use crate::config::{Config, DEFAULT_TOML};

    /// The section of `setting` (one `key = value` line): the one whose raw
    /// struct takes it, as a minimal config in which its keys take effect.
    fn section_of(setting: &str) -> Option<&'static str> {
        fn takes<T: DeserializeOwned>(setting: &str) -> bool {
            toml::from_str::<T>(setting).is_ok()
        }
        Some(if takes::<RawServer>(setting) {
            "[server]\n"
        } else if takes::<RawRetention>(setting) {
            "[retention]\n"
        } else if takes::<RawLog>(setting) {
            "[log]\n"
        } else if takes::<RawAlerts>(setting) {
            "[alerts]\nurl = \"http://127.0.0.1:9/\"\n"
        } else if takes::<RawTelemetry>(setting) {
            "[telemetry]\n"
        } else if takes::<RawKeys>(setting) {
            "[keys]\n"
        } else if takes::<RawReplication>(setting) {
            "[admin]\ntoken = \"0123456789abcdef0123\"\n[replication]\nurl = \"nats://127.0.0.1:9\"\nrole = \"standby\"\n"
        } else if takes::<RawSource>(setting) {
            // Delivery keys need a destination, ordering_on_dead_letter an
            // ordering_key.
            r#"[[source]]
name = "s"
kind = "github"
secret = "x"
destination = "http://127.0.0.1:9/"
ordering_key = "/id"
"#
        } else {
            return None;
        })
    }

    /// `default.toml` tells operators what a key left out means; `default`
    /// decides it. Every `key = value` it shows, commented out or not (up to
    /// the demo source), must change nothing when written into a config, so
    /// the two cannot drift apart.
    #[test]
    fn default_toml_shows_the_defaults_of_the_code() {
        // Shown as examples of a value, not as what a key left out means.
        const EXAMPLES: [&str; 15] = [
            "host",
            "dashboard_url",
            "tls_cert_file",
            "tls_key_file",
            "url",
            "token_file",
            "tolerance",
            "expect_within",
            "event_id",
            "event_type",
            "destination",
            "destination_secret_file",
            "destination_ca_file",
            "max_rate",
            "ordering_key",
        ];
        let demo = DEFAULT_TOML.find("\n[[source]]").unwrap();
        let mut checked = Vec::new();
        for line in DEFAULT_TOML[..demo].lines() {
            let setting = line.strip_prefix("# ").unwrap_or(line);
            let Some((key, _)) = setting.split_once('=') else {
                continue;
            };
            let key = key.trim_end();
            let is_key =
                !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
            if !is_key || EXAMPLES.contains(&key) {
                continue;
            }
            let config = section_of(setting)
                .unwrap_or_else(|| panic!("no section takes default.toml's {line:?}"));
            let load = |text: &str| {
                let config = Config::from_toml(text, "f.toml", None, &|_| None);
                format!("{:?}", config.unwrap_or_else(|e| panic!("{text}: {e}")))
            };
            assert_eq!(
                load(&format!("{config}{setting}\n")),
                load(config),
                "default.toml shows {line:?}, the code's default differs"
            );
            checked.push(key);
        }
        assert_eq!(
            checked,
            [
                "listen",
                "admin_listen",
                "data_dir",
                "header_read_timeout",
                "body_read_timeout",
                "shutdown_timeout",
                "max_connections",
                "max_buffered_body",
                "dedupe_ttl",
                "payload_ttl",
                "dlq_ttl",
                "audit_ttl",
                "sweep_interval",
                "level",
                "format",
                "summary_interval",
                "dlq_threshold",
                "pending_age",
                "min_interval",
                "check_interval",
                "format",
                "lease",
                "ttl",
                "max_body",
                "forward_headers",
                "connect_timeout",
                "timeout",
                "initial_interval",
                "max_interval",
                "max_attempts",
                "max_age",
                "retry_statuses",
                "max_concurrency",
                "paused",
                "breaker_failures",
                "breaker_cooldown",
                "ordering_on_dead_letter",
            ]
        );
    }
}
