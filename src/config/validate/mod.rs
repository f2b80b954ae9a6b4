//! Validation: the raw config (`raw.rs`) checked and turned into a typed
//! [`Config<Loaded>`](super::Config), defaults filled in from
//! [`default`](super::raw::default). Durations, sizes, addresses, URLs,
//! header names and which keys go together are checked here, and every
//! error names its key. The secrets the file names (inline, `*_env`,
//! `*_file`) are read here, by one reader, [`Ctx::read_secrets`].
//!
//! This file holds the entry points ([`validate`], [`validate_operator`]),
//! `Ctx` and the secret reader; each section's checks are in its own file:
//! `server.rs` (with `[retention]` and `[log]`), `admin.rs`, `keys.rs`, `replication.rs`, `alerts.rs`, `telemetry.rs`,
//! `source.rs`, `destination.rs` and `reconcile.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{RawConfig, RawSize, default};
pub use admin::ADMIN_NAME;
pub use keys::{LONGEST_LEASE, LONGEST_TTL};
pub use telemetry::TRACE_ID_FIELD;

use super::{
    AdminConfig, Config, ConfigError, Loaded, LogConfig, SecretOrigin, ServerConfig, SourceConfig,
    parse_duration, parse_size,
};
use admin::validate_admin;
use alerts::validate_alerts;
use keys::validate_keys;
use replication::validate_replication;
use server::{log_level, validate_retention, validate_server};
use source::validate_source;
use telemetry::validate_telemetry;

mod admin;
mod alerts;
mod telemetry;
mod destination;
mod keys;
mod reconcile;
mod replication;
mod server;
mod source;

/// The longest value of each kind of duration key. Each lies far beyond any
/// sensible setting, so it refuses only typos and absurd values, which would
/// otherwise pass `config check` and then overflow the time arithmetic
/// (`Instant + Duration` panics) on every connection or in the scheduler.
mod longest {
    use std::time::Duration;

    /// 1 h for a timeout: an HTTP exchange (a request head or body, a
    /// delivery attempt) or a graceful shutdown still running after an hour
    /// is hung, not slow; systemd's default stop timeout is 90 s.
    pub const TIMEOUT: Duration = Duration::from_secs(3600);
    /// 1 day for a signature's timestamp tolerance: providers use seconds to
    /// minutes, and a day-long window already lets a captured request be
    /// replayed all day.
    pub const TOLERANCE: Duration = Duration::from_secs(86_400);
    /// 2 months (humantime's "2months") for how long a source may send
    /// nothing: a monthly sender (an invoice run) with a month's slack.
    pub const EXPECT_WITHIN: Duration = Duration::from_secs(2 * 2_630_016);
    /// 1 day for how often something is looked at (the sweep, the alert
    /// check) or how long an open circuit waits for its probe: less than
    /// daily, and nobody sees it happen.
    pub const INTERVAL: Duration = Duration::from_secs(86_400);
    /// 7 days for a wait between retries and for the repeat window of an
    /// alert: longer outlives every provider's own retry schedule and any
    /// on-call week.
    pub const RETRY_INTERVAL: Duration = Duration::from_secs(7 * 86_400);
    /// 10 years (humantime's "10y") for a retention or an age: longer than
    /// the legal retention periods we know, and far from overflowing the
    /// `u64` millisecond timestamps the store adds it to.
    pub const AGE: Duration = Duration::from_secs(315_576_000);
}

/// What validation needs beside the raw config, and the warnings it finds.
struct Ctx<'a> {
    /// Where the config came from, for messages.
    origin: &'a str,
    /// The config file's directory: relative paths in it are resolved
    /// against it.
    base_dir: Option<&'a Path>,
    env: &'a dyn Fn(&str) -> Option<String>,
    /// When the config is read (Unix ms): what a setting dated in the
    /// past, like a person's `expires`, is warned of against.
    now_ms: u64,
    warnings: Vec<String>,
}

impl<'a> Ctx<'a> {
    fn new(
        origin: &'a str,
        base_dir: Option<&'a Path>,
        env: &'a dyn Fn(&str) -> Option<String>,
    ) -> Ctx<'a> {
        Ctx {
            origin,
            base_dir,
            env,
            now_ms: crate::clock::Clock::system().now_ms(),
            warnings: Vec::new(),
        }
    }

    /// An error at `key`: `message` is a sentence, or a value's typed
    /// error (`ValueError`, `LocatorError` …), which reads as one.
    fn err(&self, key: impl Into<String>, message: impl std::fmt::Display) -> ConfigError {
        ConfigError {
            origin: self.origin.to_owned(),
            position: None,
            source_name: None,
            key: key.into(),
            message: message.to_string(),
        }
    }

    /// `value` (or `default`) as a duration no longer than `longest`.
    fn duration(
        &self,
        key: &str,
        value: Option<&str>,
        default: &str,
        longest: Duration,
    ) -> Result<Duration, ConfigError> {
        let text = value.unwrap_or(default);
        let d = parse_duration(text).map_err(|m| self.err(key, m))?;
        if d > longest {
            return Err(self.err(
                key,
                format!(
                    "{text:?} is longer than the maximum of {} for this key",
                    humantime::format_duration(longest)
                ),
            ));
        }
        Ok(d)
    }

    /// [`Ctx::duration`] for a key that 0 makes meaningless (an interval, a
    /// wait, an attempt's timeout).
    fn positive_duration(
        &self,
        key: &str,
        value: Option<&str>,
        default: &str,
        longest: Duration,
    ) -> Result<Duration, ConfigError> {
        let d = self.duration(key, value, default, longest)?;
        if d.is_zero() {
            return Err(self.err(key, "must be longer than 0s"));
        }
        Ok(d)
    }

    /// A size in bytes (a number, or text like "64MiB"), at least 1.
    fn size(
        &self,
        key: &str,
        value: Option<RawSize>,
        default: usize,
    ) -> Result<usize, ConfigError> {
        let bytes = match value {
            None => default,
            Some(RawSize::Bytes(n)) => {
                usize::try_from(n).map_err(|_| self.err(key, "is too large"))?
            }
            Some(RawSize::Text(t)) => parse_size(&t).map_err(|m| self.err(key, m))?,
        };
        if bytes == 0 {
            return Err(self.err(key, "must be at least 1 byte"));
        }
        Ok(bytes)
    }

    /// A path as written in the config: relative ones are relative to the
    /// config file.
    fn path(&self, path: &str) -> PathBuf {
        let path = Path::new(path);
        match self.base_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_path_buf(),
        }
    }

    /// Reads every place `setting` names, in the order file, environment,
    /// inline (warned: a secret in the config file is in every copy of it).
    /// The one reader of secret files and variables: source secrets,
    /// destination keys and the admin token fail and warn alike.
    fn read_secrets(&mut self, setting: SecretSetting) -> Result<Vec<SecretText>, ConfigError> {
        let SecretSetting {
            key,
            inline,
            env,
            file,
        } = setting;
        let mut found = Vec::new();
        if let Some(path) = file {
            let path = self.path(&path);
            let key = format!("{key}_file");
            let text = std::fs::read_to_string(&path)
                .map_err(|e| self.err(&key, format!("cannot read {}: {e}", path.display())))?;
            found.push(SecretText {
                origin: SecretOrigin::File(path),
                key,
                text,
            });
        }
        if let Some(var) = env {
            let key = format!("{key}_env");
            let text = (self.env)(&var)
                .ok_or_else(|| self.err(&key, format!("environment variable {var} is not set")))?;
            found.push(SecretText {
                origin: SecretOrigin::Env(var),
                key,
                text,
            });
        }
        if !inline.is_empty() {
            self.warnings.push(format!(
                "{}: {key} is inline in the config, so in every copy of the file; prefer {key}_file or {key}_env",
                self.origin
            ));
            found.extend(inline.into_iter().map(|text| SecretText {
                origin: SecretOrigin::Inline,
                key: key.clone(),
                text,
            }));
        }
        Ok(found)
    }

    /// [`Ctx::read_secrets`] for a setting that names one place at most.
    fn read_secret(&mut self, setting: SecretSetting) -> Result<Option<SecretText>, ConfigError> {
        let places = [
            !setting.inline.is_empty(),
            setting.env.is_some(),
            setting.file.is_some(),
        ];
        if places.into_iter().filter(|set| *set).count() > 1 {
            let name = setting.key.rsplit('.').next().unwrap_or_default();
            return Err(self.err(
                &setting.key,
                format!("set only one of {name}, {name}_env, {name}_file"),
            ));
        }
        Ok(self.read_secrets(setting)?.pop())
    }
}

/// A secret setting as the file writes it: `{key}` inline, `{key}_env`,
/// `{key}_file`.
struct SecretSetting {
    /// How errors name it: `admin.token`, `source[0].secret`,
    /// `source[0].destination_secret`.
    key: String,
    inline: Vec<String>,
    env: Option<String>,
    file: Option<String>,
}

/// What one place named by a [`SecretSetting`] holds.
struct SecretText {
    origin: SecretOrigin,
    /// The key that named the place, for errors about the text.
    key: String,
    text: String,
}

impl SecretText {
    /// The secrets it holds: a file one a line (blank lines skipped), a
    /// variable whitespace-separated ones, an inline value itself.
    fn pieces(&self) -> Vec<&str> {
        match &self.origin {
            SecretOrigin::File(_) => self
                .text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect(),
            SecretOrigin::Env(_) => self.text.split_whitespace().collect(),
            SecretOrigin::Inline => vec![&self.text],
        }
    }
}

pub fn validate(
    raw: RawConfig,
    origin: &str,
    base_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config<Loaded>, ConfigError> {
    let mut cx = Ctx::new(origin, base_dir, env);
    let server = validate_server(&mut cx, raw.server)?;
    let retention = validate_retention(&cx, raw.retention)?;
    let log = LogConfig {
        level: log_level(
            &cx,
            raw.log
                .level
                .unwrap_or_else(|| default::LOG_LEVEL.to_owned()),
        )?,
        format: raw.log.format.unwrap_or(default::LOG_FORMAT),
        summary_interval: cx.positive_duration(
            "log.summary_interval",
            raw.log.summary_interval.as_deref(),
            default::LOG_SUMMARY_INTERVAL,
            longest::INTERVAL,
        )?,
    };
    let admin = validate_admin(&mut cx, raw.admin.unwrap_or_default(), true)?;
    let keys = validate_keys(&mut cx, raw.keys.unwrap_or_default(), &admin)?;
    let alerts = raw.alerts.map(|ra| validate_alerts(&cx, ra)).transpose()?;
    let telemetry = raw
        .telemetry
        .map(|rt| validate_telemetry(&cx, rt))
        .transpose()?;
    let replication = raw
        .replication
        .map(|rr| validate_replication(&mut cx, rr))
        .transpose()?;

    let mut sources: Vec<SourceConfig<Loaded>> = Vec::new();
    for (i, rs) in raw.source.into_iter().enumerate() {
        let source = validate_source(&mut cx, i, rs)?;
        if sources.iter().any(|s| s.name == source.name) {
            return Err(cx.err(
                format!("source[{i}].name"),
                format!(
                    "{:?} is already the name of another source",
                    source.name.as_str()
                ),
            ));
        }
        sources.push(source);
    }
    for (i, source) in sources.iter().enumerate() {
        if let Some(d) = source
            .destinations
            .iter()
            .find(|d| retention.dedupe_ttl < d.max_age)
        {
            cx.warnings.push(format!(
                "{origin}: retention.dedupe_ttl ({}) is shorter than source[{i}].max_age ({}): \
                 an event can still be retrying when its dedupe key expires; hookinbox keeps the \
                 key of a pending or held event until it finishes, but the provider's own retries \
                 of a finished event after dedupe_ttl are new events",
                humantime::format_duration(retention.dedupe_ttl),
                humantime::format_duration(d.max_age),
            ));
        }
    }
    if replication.is_some() {
        replication::given_secrets_only(&cx, &admin, &sources, &server.data_dir)?;
    }
    // Every source's largest event must fit in the budget, or it could never be taken.
    if let Some(big) = sources
        .iter()
        .find(|src| src.max_body > server.max_buffered_body)
    {
        return Err(cx.err(
            "server.max_buffered_body",
            format!(
                "{} bytes is smaller than source {:?}'s max_body ({} bytes): raise it or lower max_body",
                server.max_buffered_body,
                big.name.as_str(),
                big.max_body
            ),
        ));
    }

    Ok(Config {
        origin: origin.to_owned(),
        server,
        retention,
        log,
        admin,
        keys,
        replication,
        alerts,
        telemetry,
        sources,
        warnings: cx.warnings,
    })
}

/// The server and admin sections alone, for the operator commands: their
/// shell may lack the sources' secrets (set only in the service's
/// environment), and they need none of them.
pub fn validate_operator(
    raw: RawConfig,
    origin: &str,
    base_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(ServerConfig, AdminConfig<Loaded>), ConfigError> {
    let mut cx = Ctx::new(origin, base_dir, env);
    let server = validate_server(&mut cx, raw.server)?;
    let admin = validate_admin(&mut cx, raw.admin.unwrap_or_default(), false)?;
    Ok((server, admin))
}
