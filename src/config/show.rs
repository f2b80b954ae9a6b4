//! What `config check` prints: the effective config in the file's own form.
//!
//! The validated config is turned back into the raw structs of `raw.rs` and
//! serialized, so every key printed is a key of the file and every value
//! reads back as config. A secret is never printed: in its place stands
//! where it comes from (`secret_env = "VAR"`, `secret_file = "…"`), or
//! `"[redacted]"` for one written inline. Configured URLs are shown through
//! [`redact_url`].

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use super::raw::{
    CodeOrText, OneOrMany, RawAdmin, RawAdminUser, RawAlerts, RawConfig, RawDestination,
    RawDestinations, RawKeyClient, RawKeys, RawLog, RawNamedSecret, RawReconcile, RawReplication,
    RawRetention, RawSecretEntry, RawServer, RawSize, RawSource, RawTelemetry,
};
use super::{
    AdminUser, AdminUserToken, Config, DeliveryConfig, GivenSecret, Loaded, Locator, PayloadPart,
    ReconcileConfig, SecretOrigin, SecretPlan, SecretPurpose, SourceConfig, StatusPattern, Target,
    redact_url,
};

/// What stands for a secret written inline.
const REDACTED: &str = "[redacted]";

pub fn redacted_toml(config: &Config<Loaded>) -> String {
    let s = &config.server;
    let r = &config.retention;
    let raw = RawConfig {
        server: RawServer {
            listen: Some(s.listen.to_string()),
            admin_listen: Some(s.admin_listen.to_string()),
            data_dir: Some(path(&s.data_dir)),
            header_read_timeout: Some(human(s.header_read_timeout)),
            body_read_timeout: Some(human(s.body_read_timeout)),
            shutdown_timeout: Some(human(s.shutdown_timeout)),
            max_connections: Some(s.max_connections as u64),
            max_buffered_body: Some(RawSize::Bytes(s.max_buffered_body as u64)),
            tls_cert_file: s.tls.as_ref().map(|tls| path(&tls.cert)),
            tls_key_file: s.tls.as_ref().map(|tls| path(&tls.key)),
            admin_socket: s.admin_socket.as_ref().map(|socket| path(&socket.path)),
            admin_socket_mode: s
                .admin_socket
                .as_ref()
                .map(|socket| format!("{:04o}", socket.mode)),
            admin_socket_group: s
                .admin_socket
                .as_ref()
                .and_then(|socket| socket.group.clone()),
        },
        retention: RawRetention {
            dedupe_ttl: Some(human(r.dedupe_ttl)),
            payload_ttl: Some(human(r.payload_ttl)),
            dlq_ttl: Some(human(r.dlq_ttl)),
            audit_ttl: Some(human(r.audit_ttl)),
            sweep_interval: Some(human(r.sweep_interval)),
        },
        log: RawLog {
            level: Some(config.log.level.clone()),
            format: Some(config.log.format),
            summary_interval: Some(human(config.log.summary_interval)),
        },
        alerts: config.alerts.as_ref().map(|a| {
            let mut url = a.url.clone();
            // A Slack incoming-webhook URL carries its credential in the
            // path: of the alert URL, show only the host it goes to.
            url.set_path("/[redacted]");
            RawAlerts {
                url: Some(redact_url(&url)),
                dlq_threshold: Some(a.dlq_threshold),
                pending_age: Some(human(a.pending_age)),
                min_interval: Some(human(a.min_interval)),
                check_interval: Some(human(a.check_interval)),
                secret_notice: Some(human(a.secret_notice)),
                format: Some(a.format),
                host: a.host.clone(),
                dashboard_url: a.dashboard_url.as_ref().map(redact_url),
            }
        }),
        admin: {
            let (token, token_env, token_file) = match &config.admin.token {
                SecretPlan::Given(token) => place(token),
                SecretPlan::Generated => (None, None, None),
            };
            let user: Vec<RawAdminUser> = config.admin.users.iter().map(show_user).collect();
            (token.is_some() || token_env.is_some() || token_file.is_some() || !user.is_empty())
                .then_some(RawAdmin {
                    token,
                    token_env,
                    token_file,
                    user,
                })
        },
        keys: Some(RawKeys {
            lease: Some(human(config.keys.lease)),
            ttl: Some(human(config.keys.ttl)),
            client: config
                .keys
                .clients
                .iter()
                .map(|c| {
                    let (token, token_env, token_file) = place(&c.token);
                    RawKeyClient {
                        name: Some(c.name.clone()),
                        token,
                        token_env,
                        token_file,
                        namespace: Some(c.namespace.clone()),
                    }
                })
                .collect(),
        }),
        replication: config.replication.as_ref().map(|r| RawReplication {
            url: Some(r.urls.iter().map(redact_url).collect::<Vec<_>>().join(",")),
            stream: Some(r.stream.clone()),
            replicas: Some(r.replicas as u64),
            role: Some(r.role.as_str().to_owned()),
            lease: Some(human(r.lease)),
            node: Some(r.node.clone()),
            snapshot_interval: Some(human(r.snapshot_interval)),
            compression: Some(r.compression.as_str().to_owned()),
            creds_file: r.creds_file.as_deref().map(path),
            token: r.token.as_ref().and_then(|t| place(t).0),
            token_env: r.token.as_ref().and_then(|t| place(t).1),
            token_file: r.token.as_ref().and_then(|t| place(t).2),
            ca_file: r.ca_file.as_deref().map(path),
        }),
        telemetry: config.telemetry.as_ref().map(|t| RawTelemetry {
            endpoint: t.endpoint.as_ref().map(redact_url),
            service_name: t.service_name.clone(),
            sample_ratio: Some(t.sample_ratio),
            trace_url: t.trace_url.clone(),
            resource: t.resource.clone(),
        }),
        source: config.sources.iter().map(source).collect(),
    };
    let mut out = format!(
        "# effective configuration from {}\n",
        comment(&config.origin)
    );
    for purpose in left_to_data_dir(config) {
        let path = path(&purpose.path(&s.data_dir));
        let _ = writeln!(
            out,
            "# {}: generated on first start into {}",
            comment(&purpose.to_string()),
            comment(&path)
        );
    }
    out.push_str(
        &toml::to_string(&raw)
            .expect("the raw config holds only strings, numbers, booleans, lists and tables"),
    );
    out
}

fn source(s: &SourceConfig<Loaded>) -> RawSource {
    let mut raw = RawSource {
        name: Some(s.name.to_string()),
        kind: Some(s.kind),
        tolerance: s.tolerance.map(human),
        expect_within: s.expect_within.map(human),
        max_body: Some(RawSize::Bytes(s.max_body as u64)),
        event_id: s.event_id.as_deref().map(locators),
        event_type: s.event_type.as_deref().map(locators),
        // Twilio can call a URL with basic-auth credentials in it.
        public_url: s.public_url.as_deref().map(|u| {
            reqwest::Url::parse(u).map_or_else(|_| REDACTED.to_owned(), |u| redact_url(&u))
        }),
        redact: (!s.redact.is_empty())
            .then(|| s.redact.iter().map(|p| p.as_str().to_owned()).collect()),
        redact_for: (!s.redact.is_empty()).then_some(s.redact_for),
        ..RawSource::default()
    };
    match &s.secrets {
        SecretPlan::Generated => raw.generate_secret = Some(true),
        SecretPlan::Given(secrets) => {
            for secret in secrets {
                if secret.table {
                    let mut table = RawNamedSecret {
                        name: Some(secret.name.clone()),
                        expires: secret.expires.map(|at| at.to_string()),
                        ..RawNamedSecret::default()
                    };
                    match &secret.origin {
                        SecretOrigin::Inline => table.secret = Some(REDACTED.to_owned()),
                        SecretOrigin::Env(var) => table.secret_env = Some(var.clone()),
                        SecretOrigin::File(file) => table.secret_file = Some(path(file)),
                    }
                    let entries = raw.secrets.get_or_insert_with(Vec::new);
                    entries.push(RawSecretEntry::Table(table));
                    continue;
                }
                match &secret.origin {
                    SecretOrigin::Inline => raw
                        .secrets
                        .get_or_insert_with(Vec::new)
                        .push(RawSecretEntry::Text(REDACTED.to_owned())),
                    SecretOrigin::Env(var) => raw.secret_env = Some(var.clone()),
                    SecretOrigin::File(file) => raw.secret_file = Some(path(file)),
                }
            }
        }
    }
    if let Some(token) = &s.verify_token {
        (
            raw.verify_token,
            raw.verify_token_env,
            raw.verify_token_file,
        ) = place(token);
    }
    match s.destinations.as_slice() {
        [] => {}
        [one] if one.name.is_none() => raw.put_flat_destination(raw_destination(one)),
        many => {
            raw.destination = Some(RawDestinations::Tables(
                many.iter().map(raw_destination).collect(),
            ))
        }
    }
    if let Some(h) = &s.hmac {
        raw.signature_header = Some(h.signature_header.to_string());
        raw.algorithm = Some(h.algorithm);
        raw.encoding = Some(h.encoding);
        raw.prefix = Some(h.prefix.clone());
        raw.signed_payload = Some(
            h.signed_payload
                .iter()
                .map(|part| match part {
                    PayloadPart::Literal(text) => text.clone(),
                    PayloadPart::Body => "{body}".to_owned(),
                    PayloadPart::Timestamp => "{timestamp}".to_owned(),
                    PayloadPart::Header(name) => format!("{{header:{name}}}"),
                })
                .collect(),
        );
        raw.timestamp_header = h.timestamp_header.as_ref().map(|t| t.to_string());
    }
    raw.reconcile = s.reconcile.as_ref().map(reconcile);
    raw
}

/// A `[source.reconcile]` as the file writes it, its token by where it is kept.
fn reconcile(r: &ReconcileConfig) -> RawReconcile {
    let mut raw = RawReconcile {
        interval: Some(human(r.interval)),
        lookback: Some(human(r.lookback)),
        api_base: Some(redact_url(&r.api_base)),
        ..RawReconcile::default()
    };
    let token = match &r.target {
        Target::GithubHook { hook, token } => {
            raw.hook = Some(hook.to_string());
            token
        }
        Target::Stripe { token, endpoint } => {
            raw.endpoint = endpoint.clone();
            token
        }
        Target::GitlabHook { hook, token } => {
            raw.hook = Some(hook.to_string());
            token
        }
        Target::Paddle {
            token,
            notification_setting,
        } => {
            raw.notification_setting = notification_setting.clone();
            token
        }
        Target::Svix {
            token,
            app,
            endpoint,
        } => {
            raw.app = Some(app.clone());
            raw.endpoint = Some(endpoint.clone());
            token
        }
        Target::GithubApp { app_id, key } => {
            raw.hook = Some("app".to_owned());
            raw.app_id = Some(*app_id);
            raw.private_key_file = Some(path(key.path()));
            return raw;
        }
    };
    (raw.token, raw.token_env, raw.token_file) = place(token);
    raw
}

/// The secrets `config` leaves to the data dir, as [`Config::resolve`]
/// will read or generate them.
fn left_to_data_dir(config: &Config<Loaded>) -> Vec<SecretPurpose> {
    let mut left = Vec::new();
    if let SecretPlan::Generated = config.admin.token {
        left.push(SecretPurpose::Admin);
    }
    for s in &config.sources {
        if let SecretPlan::Generated = s.secrets {
            left.push(SecretPurpose::Ingest(s.name.clone()));
        }
        for dl in &s.destinations {
            if let SecretPlan::Generated = dl.secret {
                left.push(SecretPurpose::Destination(dl.route.clone()));
            }
        }
    }
    left
}

/// The keys `{key}`, `{key}_env`, `{key}_file` of a secret that takes one
/// place: the one that names where it comes from is set.
/// An `[[admin.user]]` as the file writes it, its token by where it is
/// kept (a hash written inline is shown redacted too: it is not needed to
/// read the config).
fn show_user(u: &AdminUser) -> RawAdminUser {
    let (token, token_env, token_file, token_sha256) = match &u.origin {
        AdminUserToken::Secret(origin) => {
            let (t, e, f) = origin_place(origin);
            (t, e, f, None)
        }
        AdminUserToken::Sha256 => (None, None, None, Some(REDACTED.to_owned())),
    };
    RawAdminUser {
        name: Some(u.name.clone()),
        role: Some(u.role.as_str().to_owned()),
        token,
        token_env,
        token_file,
        token_sha256,
        expires: u
            .expires_ms
            .map(|ms| humantime::format_rfc3339_millis(crate::clock::from_unix_ms(ms)).to_string()),
    }
}

fn place<T>(secret: &GivenSecret<T>) -> (Option<String>, Option<String>, Option<String>) {
    origin_place(&secret.origin)
}

fn origin_place(origin: &SecretOrigin) -> (Option<String>, Option<String>, Option<String>) {
    match origin {
        SecretOrigin::Inline => (Some(REDACTED.to_owned()), None, None),
        SecretOrigin::Env(var) => (None, Some(var.clone()), None),
        SecretOrigin::File(file) => (None, None, Some(path(file))),
    }
}

/// `text` fit for a TOML comment, which ends at a newline and may hold no
/// other control character: those are escaped.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn locators(list: &[Locator]) -> OneOrMany {
    OneOrMany::Many(list.iter().map(|l| l.to_string()).collect())
}

/// One destination as a `[[source.destination]]` table would write it.
fn raw_destination(dl: &DeliveryConfig<Loaded>) -> RawDestination {
    let mut raw = RawDestination {
        url: Some(redact_url(&dl.url)),
        name: dl.name.clone(),
        ..RawDestination::default()
    };
    if let SecretPlan::Given(key) = &dl.secret {
        (raw.secret, raw.secret_env, raw.secret_file) = place(key);
    }
    raw.ca_file = dl.ca.as_ref().map(|ca| path(&ca.path));
    if let Some(filter) = &dl.filter {
        raw.filter_types = filter
            .types
            .as_ref()
            .map(|t| t.iter().map(|p| p.as_str().to_owned()).collect());
        raw.filter_match = filter.matching.as_ref().map(|(p, v)| format!("{p}={v}"));
    }
    if let Some(js) = &dl.jetstream {
        raw.subject = Some(js.subject.to_string());
        raw.creds_file = js.creds_file.as_ref().map(|p| path(p));
    }
    raw.forward_headers = Some(dl.forward_headers.iter().map(|h| h.to_string()).collect());
    raw.connect_timeout = Some(human(dl.connect_timeout));
    raw.timeout = Some(human(dl.timeout));
    raw.initial_interval = Some(human(dl.initial_interval));
    raw.max_interval = Some(human(dl.max_interval));
    raw.max_attempts = Some(dl.max_attempts);
    raw.max_age = Some(human(dl.max_age));
    // A JetStream destination has no statuses to retry on.
    raw.retry_statuses = dl.jetstream.is_none().then(|| {
        dl.retry_statuses
            .iter()
            .map(|p| match p {
                StatusPattern::Code(code) => CodeOrText::Code(*code),
                StatusPattern::Class(_) => CodeOrText::Text(p.to_string()),
            })
            .collect()
    });
    raw.max_concurrency = Some(dl.max_concurrency);
    raw.max_rate = dl.max_rate;
    raw.paused = Some(dl.paused);
    raw.breaker_failures = Some(dl.breaker_failures);
    raw.breaker_cooldown = Some(human(dl.breaker_cooldown));
    if let Some(ordering) = &dl.ordering {
        raw.ordering_key = Some(ordering.pointer.clone());
        raw.ordering_on_dead_letter = Some(ordering.on_dead_letter);
    }
    raw
}
