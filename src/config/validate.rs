//! Validation: the raw config (`raw.rs`) checked and turned into a typed
//! [`Config<Loaded>`](super::Config), defaults filled in from
//! [`default`](super::raw::default). Durations, sizes, addresses, URLs,
//! header names and which keys go together are checked here, and every
//! error names its key. The secrets the file names (inline, `*_env`,
//! `*_file`) are read here, by one reader, [`Ctx::read_secrets`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{
    self, CodeOrText, OneOrMany, RawAdmin, RawAlerts, RawConfig, RawDestination, RawDestinations,
    RawRetention, RawServer, RawSize, RawSource, default,
};
use super::{
    AdminConfig, AlertConfig, CaFile, Config, ConfigError, DeliveryConfig, DeliveryFilter,
    GivenSecret, HmacSpec, JetStreamTarget, Kind, Loaded, Locator, LogConfig, OrderingConfig,
    PayloadPart, RetentionConfig, Secret, SecretOrigin, SecretPlan, ServerConfig, SourceConfig,
    SourceName, StatusPattern, SubjectTemplate, TypePattern, parse_duration, parse_size,
};
use crate::standard_webhooks::StandardKey;

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

/// Past this, one process runs out of file descriptors long before.
const MAX_CONNECTIONS_LIMIT: u64 = 1_000_000;

/// What validation needs beside the raw config, and the warnings it finds.
struct Ctx<'a> {
    /// Where the config came from, for messages.
    origin: &'a str,
    /// The config file's directory: relative paths in it are resolved
    /// against it.
    base_dir: Option<&'a Path>,
    env: &'a dyn Fn(&str) -> Option<String>,
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
            warnings: Vec::new(),
        }
    }

    fn err(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            origin: self.origin.to_owned(),
            position: None,
            source_name: None,
            key: key.into(),
            message: message.into(),
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
    let admin = validate_admin(&mut cx, raw.admin.unwrap_or_default())?;
    let alerts = raw.alerts.map(|ra| validate_alerts(&cx, ra)).transpose()?;

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
        alerts,
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
    let admin = validate_admin(&mut cx, raw.admin.unwrap_or_default())?;
    Ok((server, admin))
}

fn validate_server(cx: &mut Ctx<'_>, s: RawServer) -> Result<ServerConfig, ConfigError> {
    let addr = |key: &str, value: Option<&str>, default: &str| {
        let text = value.unwrap_or(default);
        text.parse().map_err(|_| {
            cx.err(
                key,
                format!("{text:?} is not an address like 127.0.0.1:8080"),
            )
        })
    };
    let max_connections = match s.max_connections.unwrap_or(default::MAX_CONNECTIONS) {
        n @ 1..=MAX_CONNECTIONS_LIMIT => n as usize,
        n => {
            return Err(cx.err(
                "server.max_connections",
                format!("{n} is not between 1 and {MAX_CONNECTIONS_LIMIT}"),
            ));
        }
    };
    let max_buffered_body = cx.size(
        "server.max_buffered_body",
        s.max_buffered_body,
        default::MAX_BUFFERED_BODY,
    )?;
    let tls = match (&s.tls_cert_file, &s.tls_key_file) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            let files = crate::tls::TlsFiles {
                cert: cx.path(cert),
                key: cx.path(key),
            };
            // Read now: a wrong path or a key that does not match is a
            // config error, not a listener that cannot handshake.
            files
                .load()
                .map_err(|e| cx.err("server.tls_cert_file", e.to_string()))?;
            Some(files)
        }
        (Some(_), None) => {
            return Err(cx.err(
                "server.tls_key_file",
                "is required with server.tls_cert_file",
            ));
        }
        (None, Some(_)) => {
            return Err(cx.err(
                "server.tls_cert_file",
                "is required with server.tls_key_file",
            ));
        }
    };
    let timeout = |key: &str, value: &Option<String>, default: &str| {
        cx.duration(key, value.as_deref(), default, longest::TIMEOUT)
    };
    let server = ServerConfig {
        listen: addr("server.listen", s.listen.as_deref(), default::LISTEN)?,
        admin_listen: addr(
            "server.admin_listen",
            s.admin_listen.as_deref(),
            default::ADMIN_LISTEN,
        )?,
        data_dir: PathBuf::from(s.data_dir.as_deref().unwrap_or(default::DATA_DIR)),
        header_read_timeout: timeout(
            "server.header_read_timeout",
            &s.header_read_timeout,
            default::HEADER_READ_TIMEOUT,
        )?,
        body_read_timeout: timeout(
            "server.body_read_timeout",
            &s.body_read_timeout,
            default::BODY_READ_TIMEOUT,
        )?,
        shutdown_timeout: timeout(
            "server.shutdown_timeout",
            &s.shutdown_timeout,
            default::SHUTDOWN_TIMEOUT,
        )?,
        max_connections,
        max_buffered_body,
        tls,
    };
    if server.listen == server.admin_listen && server.listen.port() != 0 {
        return Err(cx.err("server.admin_listen", "must differ from server.listen"));
    }
    // Allowed (behind a firewall or a VPN it is useful), but said out loud.
    if !server.admin_listen.ip().is_loopback() {
        cx.warnings.push(format!(
            "{}: server.admin_listen (HOOKINBOX_ADMIN_LISTEN) {} is reachable from other hosts: the admin token is then the only guard of the admin API (every payload, replay, backup); keep it on 127.0.0.1 unless a firewall or VPN stands in front",
            cx.origin, server.admin_listen
        ));
    }
    Ok(server)
}

fn validate_retention(cx: &Ctx<'_>, r: RawRetention) -> Result<RetentionConfig, ConfigError> {
    let age = |key: &str, value: Option<String>, default: &str| {
        cx.duration(key, value.as_deref(), default, longest::AGE)
    };
    Ok(RetentionConfig {
        dedupe_ttl: age("retention.dedupe_ttl", r.dedupe_ttl, default::DEDUPE_TTL)?,
        payload_ttl: age("retention.payload_ttl", r.payload_ttl, default::PAYLOAD_TTL)?,
        dlq_ttl: age("retention.dlq_ttl", r.dlq_ttl, default::DLQ_TTL)?,
        sweep_interval: cx.positive_duration(
            "retention.sweep_interval",
            r.sweep_interval.as_deref(),
            default::SWEEP_INTERVAL,
            longest::INTERVAL,
        )?,
    })
}

fn validate_alerts(cx: &Ctx<'_>, ra: RawAlerts) -> Result<AlertConfig, ConfigError> {
    let text = ra
        .url
        .as_deref()
        .ok_or_else(|| cx.err("alerts.url", "is required in [alerts]"))?;
    let url = reqwest::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| cx.err("alerts.url", "must be an http(s) URL"))?;
    let positive = |key: &str, value: Option<String>, default: &str, longest: Duration| {
        cx.positive_duration(key, value.as_deref(), default, longest)
    };
    Ok(AlertConfig {
        url,
        dlq_threshold: ra.dlq_threshold.unwrap_or(default::DLQ_THRESHOLD),
        pending_age: positive(
            "alerts.pending_age",
            ra.pending_age,
            default::PENDING_AGE,
            longest::AGE,
        )?,
        min_interval: positive(
            "alerts.min_interval",
            ra.min_interval,
            default::MIN_INTERVAL,
            longest::RETRY_INTERVAL,
        )?,
        check_interval: positive(
            "alerts.check_interval",
            ra.check_interval,
            default::CHECK_INTERVAL,
            longest::INTERVAL,
        )?,
        format: ra.format.unwrap_or(default::ALERT_FORMAT),
        host: match ra.host {
            Some(host) if host.trim().is_empty() || host.chars().any(char::is_control) => {
                return Err(cx.err("alerts.host", "must be a name without control characters"));
            }
            host => host,
        },
        dashboard_url: ra
            .dashboard_url
            .map(|text| {
                reqwest::Url::parse(&text)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
                    .ok_or_else(|| cx.err("alerts.dashboard_url", "must be an http(s) URL"))
            })
            .transpose()?,
    })
}

/// The admin token: from a file, the environment, or inline; none means it
/// is left to the data dir.
fn validate_admin(cx: &mut Ctx<'_>, ra: RawAdmin) -> Result<AdminConfig<Loaded>, ConfigError> {
    let found = cx.read_secret(SecretSetting {
        key: "admin.token".into(),
        inline: ra.token.into_iter().collect(),
        env: ra.token_env,
        file: ra.token_file,
    })?;
    let Some(found) = found else {
        return Ok(AdminConfig {
            token: SecretPlan::Generated,
        });
    };
    let text = found.text.trim();
    if text.len() < 16 {
        return Err(cx.err(found.key, "must be at least 16 characters"));
    }
    Ok(AdminConfig {
        token: SecretPlan::Given(GivenSecret {
            origin: found.origin,
            value: Secret::new(text),
        }),
    })
}

fn validate_source(
    cx: &mut Ctx<'_>,
    i: usize,
    mut rs: RawSource,
) -> Result<SourceConfig<Loaded>, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let name = rs
        .name
        .as_deref()
        .ok_or_else(|| cx.err(key("name"), "is required"))?;
    let name = SourceName::parse(name).map_err(|m| cx.err(key("name"), m))?;
    let kind = rs.kind.ok_or_else(|| cx.err(key("kind"), "is required"))?;

    let found = cx.read_secrets(SecretSetting {
        key: key("secret"),
        inline: rs
            .secret
            .take()
            .into_iter()
            .chain(rs.secrets.take().into_iter().flatten())
            .collect(),
        env: rs.secret_env.take(),
        file: rs.secret_file.take(),
    })?;
    let mut secrets = Vec::new();
    for place in found {
        // A file holds one secret a line; a variable, whitespace-separated ones.
        let texts: Vec<&str> = match &place.origin {
            SecretOrigin::File(_) => place
                .text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect(),
            SecretOrigin::Env(_) => place.text.split_whitespace().collect(),
            SecretOrigin::Inline => vec![&place.text],
        };
        if texts.is_empty() {
            let what = match &place.origin {
                SecretOrigin::File(path) => format!("{} holds no secret", path.display()),
                SecretOrigin::Env(var) => format!("environment variable {var} is set but empty"),
                SecretOrigin::Inline => "is empty".to_owned(),
            };
            return Err(cx.err(&place.key, what));
        }
        for text in texts {
            if ["sk_live_", "sk_test_", "rk_live_", "rk_test_"]
                .iter()
                .any(|p| text.starts_with(p))
            {
                cx.warnings.push(format!(
                    "{}: {} looks like a Stripe API key, not a webhook signing secret: \
                     Stripe signs webhooks with the endpoint's secret (whsec_…, in the \
                     dashboard under Developers → Webhooks); keep API keys out of hookinbox",
                    cx.origin, place.key
                ));
            }
            // Refused here, naming the key, rather than by the verifier at start.
            if kind == Kind::Standard {
                StandardKey::parse(text).map_err(|e| cx.err(&place.key, e.to_string()))?;
            }
            secrets.push(GivenSecret {
                origin: place.origin.clone(),
                value: Secret::new(text),
            });
        }
    }
    let generate = rs.generate_secret.unwrap_or(default::GENERATE_SECRET);
    if generate && !secrets.is_empty() {
        return Err(cx.err(
            key("generate_secret"),
            "cannot be combined with secret, secrets, secret_env or secret_file",
        ));
    }
    if !generate && secrets.is_empty() {
        return Err(cx.err(
            format!("source[{i}]"),
            "has no secret: set secret_file, secret_env or generate_secret = true",
        ));
    }
    if secrets.iter().any(|s| s.value.expose().is_empty()) {
        return Err(cx.err(format!("source[{i}]"), "has an empty secret"));
    }
    let secrets = if generate {
        SecretPlan::Generated
    } else {
        SecretPlan::Given(secrets)
    };

    let tolerance = rs
        .tolerance
        .as_deref()
        .map(|t| cx.duration(&key("tolerance"), Some(t), t, longest::TOLERANCE))
        .transpose()?;
    let signs_time = match kind {
        Kind::Github | Kind::Shopify | Kind::Gitlab | Kind::Twilio | Kind::Meta => false,
        Kind::Hmac => rs.timestamp_header.is_some(),
        _ => true,
    };
    if tolerance.is_some() && !signs_time {
        cx.warnings.push(format!(
            "{}: {} has no effect: {} signs no timestamp, so there is no age to check \
             (dedupe by event id is the replay defence)",
            cx.origin,
            key("tolerance"),
            kind.as_str()
        ));
    }
    let max_body = cx.size(&key("max_body"), rs.max_body.take(), default::MAX_BODY)?;
    let locators = |field: &str, value: Option<OneOrMany>| {
        let Some(value) = value else { return Ok(None) };
        let texts = match value {
            OneOrMany::One(text) => vec![text],
            OneOrMany::Many(texts) => texts,
        };
        let list = texts
            .iter()
            .map(|t| Locator::parse(t).map_err(|m| cx.err(key(field), m)))
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(cx.err(key(field), "must name at least one place"));
        }
        Ok(Some(list))
    };
    let event_id = locators("event_id", rs.event_id.take())?;
    let event_type = locators("event_type", rs.event_type.take())?;

    let public_url = match rs.public_url.take() {
        Some(u) => {
            reqwest::Url::parse(&u)
                .map_err(|e| cx.err(key("public_url"), format!("is not a URL: {e}")))?;
            Some(u)
        }
        None if kind == Kind::Twilio => {
            return Err(cx.err(
                key("public_url"),
                "is required for twilio: the URL Twilio calls, which it signs",
            ));
        }
        None => None,
    };
    let verify_token = validate_verify_token(cx, i, kind, &mut rs)?;
    let destinations = validate_destinations(cx, i, &name, &mut rs)?;

    let hmac_keys = [
        ("signature_header", rs.signature_header.is_some()),
        ("algorithm", rs.algorithm.is_some()),
        ("encoding", rs.encoding.is_some()),
        ("prefix", rs.prefix.is_some()),
        ("signed_payload", rs.signed_payload.is_some()),
        ("timestamp_header", rs.timestamp_header.is_some()),
    ];
    let hmac = if kind == Kind::Hmac {
        Some(validate_hmac(cx, i, rs)?)
    } else {
        if let Some((k, _)) = hmac_keys.iter().find(|(_, set)| *set) {
            return Err(cx.err(
                key(k),
                format!("applies only to kind = \"hmac\", not {kind}"),
            ));
        }
        None
    };
    if kind == Kind::Hmac && event_id.is_none() {
        return Err(cx.err(
            key("event_id"),
            "is required for kind = \"hmac\": e.g. [\"header:X-Event-Id\"], [\"json:/id\"] or [\"body-sha256\"]",
        ));
    }

    Ok(SourceConfig {
        name,
        kind,
        secrets,
        tolerance,
        max_body,
        event_id,
        event_type,
        public_url,
        verify_token,
        destinations,
        hmac,
    })
}

/// Meta's verify token: required for kind `meta` (Meta will not subscribe
/// a URL that fails its check), refused for every other kind.
fn validate_verify_token(
    cx: &mut Ctx<'_>,
    i: usize,
    kind: Kind,
    rs: &mut RawSource,
) -> Result<Option<GivenSecret<Secret>>, ConfigError> {
    let key = format!("source[{i}].verify_token");
    let found = cx.read_secret(SecretSetting {
        key: key.clone(),
        inline: rs.verify_token.take().into_iter().collect(),
        env: rs.verify_token_env.take(),
        file: rs.verify_token_file.take(),
    })?;
    match (kind, found) {
        (Kind::Meta, None) => Err(cx.err(
            key,
            "is required for kind = \"meta\": the Verify Token typed into the app's webhook \
             settings, which Meta sends back to check the URL (set verify_token_file or \
             verify_token_env)",
        )),
        (Kind::Meta, Some(found)) => {
            let text = found.text.trim();
            if text.is_empty() {
                return Err(cx.err(found.key, "is empty"));
            }
            Ok(Some(GivenSecret {
                origin: found.origin,
                value: Secret::new(text),
            }))
        }
        (_, None) => Ok(None),
        (_, Some(found)) => Err(cx.err(
            found.key,
            format!("applies only to kind = \"meta\", not {kind}"),
        )),
    }
}

/// At most this many destinations per source: a delivery key per
/// destination is written with each event.
pub const MAX_DESTINATIONS: usize = 16;

/// The destinations of `source[i]`: the one-URL form (`destination = "…"`
/// with the delivery keys beside it, which all need it), or
/// `[[source.destination]]` tables (and then none of those keys beside).
fn validate_destinations(
    cx: &mut Ctx<'_>,
    i: usize,
    source: &SourceName,
    rs: &mut RawSource,
) -> Result<Vec<DeliveryConfig<Loaded>>, ConfigError> {
    let (flat, set) = rs.take_flat_destination();
    let tables = match rs.destination.take() {
        None => {
            if let Some(k) = set.first() {
                return Err(cx.err(
                    format!("source[{i}].{k}"),
                    "applies only to a source with a destination",
                ));
            }
            return Ok(Vec::new());
        }
        Some(RawDestinations::Url(url)) => {
            let table = RawDestination {
                url: Some(url),
                ..flat
            };
            let key = |k: &str| format!("source[{i}].{}", raw::flat_key(k));
            return Ok(vec![validate_destination(cx, &key, source, table)?]);
        }
        Some(RawDestinations::Tables(tables)) => tables,
    };
    if let Some(k) = set.first() {
        return Err(cx.err(
            format!("source[{i}].{k}"),
            "cannot stand beside [[source.destination]] tables: set it in each table",
        ));
    }
    if tables.is_empty() {
        return Err(cx.err(
            format!("source[{i}].destination"),
            "holds no table: leave it out to hold events, or add a [[source.destination]] with a url",
        ));
    }
    if tables.len() > MAX_DESTINATIONS {
        return Err(cx.err(
            format!("source[{i}].destination"),
            format!("has {} tables: at most {MAX_DESTINATIONS}", tables.len()),
        ));
    }
    let mut out: Vec<DeliveryConfig<Loaded>> = Vec::new();
    for (j, table) in tables.into_iter().enumerate() {
        let key = |k: &str| format!("source[{i}].destination[{j}].{k}");
        let d = validate_destination(cx, &key, source, table)?;
        if out.iter().any(|o| o.route == d.route) {
            let message = match &d.name {
                Some(name) => format!("{name:?} names another destination of this source too"),
                None => "is left out in another table too: at most one destination goes \
                         without a name (it is named after its source)"
                    .to_owned(),
            };
            return Err(cx.err(key("name"), message));
        }
        out.push(d);
    }
    Ok(out)
}

/// One destination, from a table (or the one-URL form moved into one);
/// `key` names a table key the way the file wrote it.
fn validate_destination(
    cx: &mut Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    source: &SourceName,
    mut rs: RawDestination,
) -> Result<DeliveryConfig<Loaded>, ConfigError> {
    let name = match rs.name.take() {
        None => None,
        Some(name) => Some(SourceName::parse(&name).map_err(|_| {
            cx.err(
                key("name"),
                format!("{name:?} is not a valid destination name: use 1 to 64 characters of a-z, 0-9, '_' and '-'"),
            )
        })?),
    };
    let route = match &name {
        None => source.to_string(),
        Some(name) => format!("{source}.{name}"),
    };
    let name = name.map(|n| n.to_string());
    let Some(url) = rs.url.take() else {
        return Err(cx.err(key("url"), "is required: where this destination is"));
    };
    // The error names the key, not the text: a URL can hold a credential.
    let url =
        reqwest::Url::parse(&url).map_err(|e| cx.err(key("url"), format!("is not a URL: {e}")))?;
    let nats = match url.scheme() {
        "http" | "https" => false,
        "nats" | "tls" => true,
        other => {
            return Err(cx.err(
                key("url"),
                format!(
                    "scheme {other:?}: use http or https (an app), or nats or tls (NATS JetStream)"
                ),
            ));
        }
    };
    let jetstream = if nats {
        if url.host_str().is_none_or(str::is_empty) {
            return Err(cx.err(key("url"), "names no NATS server host"));
        }
        if rs.retry_statuses.is_some() {
            return Err(cx.err(
                key("retry_statuses"),
                "applies only to an http(s) destination: JetStream answers with an ack, not a status",
            ));
        }
        let template = rs
            .subject
            .take()
            .unwrap_or_else(|| default::DESTINATION_SUBJECT.to_owned());
        let subject = SubjectTemplate::parse(&template).map_err(|m| cx.err(key("subject"), m))?;
        let creds_file = match rs.creds_file.take() {
            None => None,
            Some(path) => {
                let path = cx.path(&path);
                std::fs::metadata(&path).map_err(|e| {
                    cx.err(
                        key("creds_file"),
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                Some(path)
            }
        };
        Some(JetStreamTarget {
            subject,
            creds_file,
        })
    } else {
        for (k, set) in [
            ("subject", rs.subject.is_some()),
            ("creds_file", rs.creds_file.is_some()),
        ] {
            if set {
                return Err(cx.err(key(k), "applies only to a nats:// (JetStream) destination"));
            }
        }
        None
    };

    let found = cx.read_secret(SecretSetting {
        key: key("secret"),
        inline: rs.secret.take().into_iter().collect(),
        env: rs.secret_env.take(),
        file: rs.secret_file.take(),
    })?;
    let secret = match found {
        None => SecretPlan::Generated,
        Some(found) => SecretPlan::Given(GivenSecret {
            value: StandardKey::parse(found.text.trim())
                .map_err(|e| cx.err(&found.key, e.to_string()))?,
            origin: found.origin,
        }),
    };

    let ca = match rs.ca_file.take() {
        None => None,
        Some(path) => {
            let path = cx.path(&path);
            let pem = std::fs::read(&path).map_err(|e| {
                cx.err(
                    key("ca_file"),
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            match reqwest::Certificate::from_pem_bundle(&pem) {
                Ok(certs) if !certs.is_empty() => {}
                _ => {
                    return Err(cx.err(
                        key("ca_file"),
                        format!("{} holds no PEM certificate", path.display()),
                    ));
                }
            }
            Some(CaFile { path, pem })
        }
    };
    let forward_headers = match rs.forward_headers.take() {
        None => default::FORWARD_HEADERS.map(String::from).to_vec(),
        Some(names) => names,
    };
    let forward_headers = forward_headers
        .iter()
        .map(|h| {
            http::HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
                cx.err(
                    key("forward_headers"),
                    format!("{h:?} is not a header name"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for h in &forward_headers {
        if SIGNATURE_HEADERS.contains(&h.as_str()) {
            cx.warnings.push(format!(
                "{}: {} forwards {h}, a provider's signature: a retry, a delivery after a pause \
                 or a replay arrives later than the provider signed it, and SDKs refuse old \
                 signatures (Stripe's after 300 s), so the app would dead-letter them; have the \
                 app verify hookinbox's webhook-signature with a Standard Webhooks library instead \
                 (docs/verify/ in the source tree)",
                cx.origin,
                key("forward_headers")
            ));
        }
    }
    if let Some(h) = forward_headers.iter().find(|h| {
        let h = h.as_str();
        h.starts_with("webhook-") || h.starts_with("hookinbox-") || h == "content-type"
    }) {
        return Err(cx.err(
            key("forward_headers"),
            format!("{h:?} is one of the headers hookinbox sets itself on deliveries"),
        ));
    }
    let duration = |k: &str, v: &Option<String>, default: &str, longest: Duration| {
        cx.positive_duration(&key(k), v.as_deref(), default, longest)
    };
    let initial_interval = duration(
        "initial_interval",
        &rs.initial_interval,
        default::INITIAL_INTERVAL,
        longest::RETRY_INTERVAL,
    )?;
    let max_interval = duration(
        "max_interval",
        &rs.max_interval,
        default::MAX_INTERVAL,
        longest::RETRY_INTERVAL,
    )?;
    if max_interval < initial_interval {
        return Err(cx.err(key("max_interval"), "must be at least initial_interval"));
    }
    let retry_statuses = match rs.retry_statuses.take() {
        None => default::RETRY_STATUSES.to_vec(),
        Some(list) => list
            .into_iter()
            .map(|c| match c {
                CodeOrText::Code(n) => StatusPattern::parse(&n.to_string()),
                CodeOrText::Text(t) => StatusPattern::parse(&t),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| cx.err(key("retry_statuses"), m))?,
    };
    if retry_statuses.iter().any(|p| p.matches(200)) {
        return Err(cx.err(
            key("retry_statuses"),
            "cannot include 2xx: those are deliveries",
        ));
    }
    let max_attempts = rs.max_attempts.unwrap_or(default::MAX_ATTEMPTS);
    if max_attempts == 0 {
        return Err(cx.err(key("max_attempts"), "must be at least 1"));
    }
    let max_concurrency = rs.max_concurrency.unwrap_or(default::MAX_CONCURRENCY);
    if !(1..=1024).contains(&max_concurrency) {
        return Err(cx.err(key("max_concurrency"), "must be between 1 and 1024"));
    }
    if let Some(rate) = rs.max_rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(cx.err(
            key("max_rate"),
            "must be a positive number of events per second",
        ));
    }
    let breaker_failures = rs.breaker_failures.unwrap_or(default::BREAKER_FAILURES);
    if breaker_failures == 0 {
        return Err(cx.err(key("breaker_failures"), "must be at least 1"));
    }
    let ordering = match rs.ordering_key.take() {
        Some(pointer) if pointer.starts_with('/') => Some(OrderingConfig {
            pointer,
            on_dead_letter: rs
                .ordering_on_dead_letter
                .unwrap_or(default::ORDERING_ON_DEAD_LETTER),
        }),
        Some(pointer) => {
            return Err(cx.err(
                key("ordering_key"),
                format!("{pointer:?} is not a JSON pointer: it starts with \"/\", like \"/data/object/id\""),
            ));
        }
        None if rs.ordering_on_dead_letter.is_some() => {
            return Err(cx.err(key("ordering_on_dead_letter"), "needs ordering_key"));
        }
        None => None,
    };
    let types = match rs.filter_types.take() {
        None => None,
        Some(list) if list.is_empty() => {
            return Err(cx.err(
                key("filter_types"),
                "is empty: it would filter out every event (leave it out to take every type)",
            ));
        }
        Some(list) => Some(
            list.iter()
                .map(|t| TypePattern::parse(t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| cx.err(key("filter_types"), m))?,
        ),
    };
    let matching = match rs.filter_match.take() {
        None => None,
        Some(text) => {
            match text.split_once('=') {
                Some((pointer, value)) if pointer.trim().starts_with('/') => {
                    Some((pointer.trim().to_owned(), value.trim().to_owned()))
                }
                _ => {
                    return Err(cx.err(
                    key("filter_match"),
                    format!("{text:?} is not /json/pointer=value, like \"/data/object/livemode=true\""),
                ));
                }
            }
        }
    };
    let filter =
        (types.is_some() || matching.is_some()).then_some(DeliveryFilter { types, matching });
    Ok(DeliveryConfig {
        name,
        route,
        url,
        secret,
        ca,
        jetstream,
        filter,
        forward_headers,
        connect_timeout: duration(
            "connect_timeout",
            &rs.connect_timeout,
            default::CONNECT_TIMEOUT,
            longest::TIMEOUT,
        )?,
        timeout: duration("timeout", &rs.timeout, default::TIMEOUT, longest::TIMEOUT)?,
        initial_interval,
        max_interval,
        max_attempts,
        max_age: duration("max_age", &rs.max_age, default::MAX_AGE, longest::AGE)?,
        retry_statuses,
        max_concurrency,
        max_rate: rs.max_rate,
        paused: rs.paused.unwrap_or(default::PAUSED),
        ordering,
        breaker_failures,
        breaker_cooldown: duration(
            "breaker_cooldown",
            &rs.breaker_cooldown,
            default::BREAKER_COOLDOWN,
            longest::INTERVAL,
        )?,
    })
}

fn validate_hmac(cx: &Ctx<'_>, i: usize, rs: RawSource) -> Result<HmacSpec, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let header = |k: &str, v: &str| {
        http::HeaderName::from_bytes(v.as_bytes())
            .map_err(|_| cx.err(key(k), format!("{v:?} is not a header name")))
    };
    let signature_header = rs
        .signature_header
        .as_deref()
        .ok_or_else(|| cx.err(key("signature_header"), "is required for kind = \"hmac\""))?;
    let signature_header = header("signature_header", signature_header)?;
    let timestamp_header = rs
        .timestamp_header
        .as_deref()
        .map(|v| header("timestamp_header", v))
        .transpose()?;
    let template = rs
        .signed_payload
        .as_deref()
        .unwrap_or(default::SIGNED_PAYLOAD);
    let signed_payload = parse_template(template).map_err(|m| cx.err(key("signed_payload"), m))?;
    if !signed_payload.contains(&PayloadPart::Body) {
        return Err(cx.err(
            key("signed_payload"),
            "must include {body}: a signature that does not cover the body proves nothing",
        ));
    }
    if signed_payload.contains(&PayloadPart::Timestamp) && timestamp_header.is_none() {
        return Err(cx.err(
            key("timestamp_header"),
            "is required when signed_payload uses {timestamp}",
        ));
    }
    Ok(HmacSpec {
        signature_header,
        algorithm: rs.algorithm.unwrap_or(default::ALGORITHM),
        encoding: rs.encoding.unwrap_or(default::ENCODING),
        prefix: rs.prefix.unwrap_or_else(|| default::PREFIX.to_owned()),
        signed_payload,
        timestamp_header,
    })
}

/// Parses a template such as `"{timestamp}.{body}"` or
/// `"{header:Twitch-Eventsub-Message-Id}{header:Twitch-Eventsub-Message-Timestamp}{body}"`.
fn parse_template(template: &str) -> Result<Vec<PayloadPart>, String> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(PayloadPart::Literal(rest[..open].to_owned()));
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("unclosed '{{' in {template:?}"))?
            + open;
        let name = &rest[open + 1..close];
        parts.push(match name {
            "body" => PayloadPart::Body,
            "timestamp" => PayloadPart::Timestamp,
            _ => match name.strip_prefix("header:") {
                Some(h) => PayloadPart::Header(
                    http::HeaderName::from_bytes(h.as_bytes()).map_err(|_| format!("{h:?} is not a header name"))?,
                ),
                None => return Err(format!("unknown placeholder {{{name}}}: use {{body}}, {{timestamp}} or {{header:Name}}")),
            },
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(PayloadPart::Literal(rest.to_owned()));
    }
    Ok(parts)
}

/// Headers that carry a provider's signature of the request (lowercase).
const SIGNATURE_HEADERS: [&str; 10] = [
    "stripe-signature",
    "x-hub-signature-256",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "svix-signature",
    "paddle-signature",
    "linear-signature",
    "x-twilio-signature",
    "x-gitlab-token",
    "x-hub-signature",
];

/// `log.level`: a level, or comma-separated `target=level` directives.
/// Anything else would pass the log filter and then log nothing.
fn log_level(cx: &Ctx<'_>, text: String) -> Result<String, ConfigError> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    for part in text.split(',') {
        let level = part.rsplit_once('=').map_or(part, |(_, l)| l).trim();
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(cx.err(
                "log.level",
                format!(
                    "{level:?} is not a level: use trace, debug, info, warn, error or off \
                     (or target=level directives, comma-separated)"
                ),
            ));
        }
    }
    Ok(text)
}
