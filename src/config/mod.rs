//! Configuration: embedded commented defaults → TOML file → `HOOKINBOX_*`
//! environment → one validated [`Config`] with typed fields → its secrets
//! resolved.
//!
//! This module owns parsing, validation and secrets only. It knows the
//! vocabulary of a source (kind, secrets, where the event id lives) but no
//! provider facts: the per-kind defaults for tolerance and event id belong
//! to `verify`. Secrets named by the file (inline, `*_env`, `*_file`) are read
//! at load, and those left to the data dir by [`Config::resolve`]: here, once,
//! so no other part of the server reads the environment or a secret file.
//! The operator commands run beside a server, not in it, and read their own:
//! `ctl` its admin token (`--token-file`, `HOOKINBOX_ADMIN_TOKEN`) and `send`
//! a generated secret from the data dir, at the path [`SecretPurpose`] names.
//!
//! `raw.rs` holds the file as written and what a key left out means;
//! `validate/` checks it into a typed config; `show.rs` prints a config
//! back in the file's form, secrets redacted; `resolve.rs` is the step from a
//! loaded config to one with every secret. `load.rs` reads the file and the
//! environment; the validated types are in `sections.rs` (server, retention,
//! log, admin, keys, alerts), `source.rs` and `destination.rs`; `error.rs` is
//! [`ConfigError`]; `values.rs` the text forms of durations, sizes and names.

mod destination;
mod error;
mod load;
mod raw;
mod reconcile;
mod resolve;
mod secret;
mod sections;
mod show;
mod source;
mod validate;
mod values;

pub use destination::{
    CaFile, DeliveryConfig, DeliveryFilter, JetStreamTarget, NO_TYPE_TOKEN, OnDeadLetter,
    OrderingConfig, PatternError, StatusPattern, SubjectTemplate, TypePattern,
};
pub use error::{ConfigError, Position};
pub use load::{OperatorView, PACKAGED_CONFIG, process_env};
pub use reconcile::{AppKey, GithubHook, GitlabHook, GitlabOwner, ReconcileConfig, Target};
pub use resolve::{
    GeneratedSecret, GivenSecret, Loaded, ReadSecretError, ResolveError, Resolved, SecretPlan,
    SecretPurpose, Stage,
};
pub use secret::{Secret, SecretOrigin, generated_secret_path, load_or_generate_secret};
pub use sections::{
    AdminConfig, AdminSocket, AdminUser, AdminUserToken, AlertConfig, AlertFormat, KeyClient,
    KeysConfig, LogConfig, LogFormat, ReplicationConfig, RetentionConfig, ServerConfig,
    TelemetryConfig,
};
pub use source::{
    DEFAULT_MAX_BODY, HmacAlgorithm, HmacSpec, InvalidName, Kind, Locator, LocatorError,
    PayloadPart, RedactFor, SignatureEncoding, SourceConfig, SourceName, SourceSecret,
};
pub use validate::{ADMIN_NAME, LONGEST_LEASE, LONGEST_TTL, TRACE_ID_FIELD};
pub use values::{ValueError, parse_duration, parse_size, redact_url};

/// The embedded default configuration: it serves with no file at all.
pub const DEFAULT_TOML: &str = include_str!("default.toml");

/// Where a configuration came from, for error messages.
pub const EMBEDDED_ORIGIN: &str = "<embedded default config>";

/// The validated configuration every module receives its slice of. `S` is
/// [`Loaded`] until [`Config::resolve`] has read the secrets the config
/// leaves to the data dir, and [`Resolved`] (every secret present) after.
#[derive(Debug, Clone)]
pub struct Config<S: Stage = Resolved> {
    /// The file it was read from, or [`EMBEDDED_ORIGIN`].
    pub origin: String,
    pub server: ServerConfig,
    pub retention: RetentionConfig,
    pub log: LogConfig,
    pub admin: AdminConfig<S>,
    /// Idempotency keys: their defaults and the apps that may use them.
    pub keys: KeysConfig,
    /// `None`: this node alone, its log on its own disk.
    pub replication: Option<ReplicationConfig>,
    /// `None`: no alert URL configured (metrics and logs still tell).
    pub alerts: Option<AlertConfig>,
    /// `None`: no traces (`[telemetry]` absent).
    pub telemetry: Option<TelemetryConfig>,
    pub sources: Vec<SourceConfig<S>>,
    /// Non-fatal findings (inline secrets, …) to log at start.
    pub warnings: Vec<String>,
}

impl<S: Stage> Config<S> {
    pub fn source(&self, name: &str) -> Option<&SourceConfig<S>> {
        self.sources.iter().find(|s| s.name.as_str() == name)
    }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod users_tests;
