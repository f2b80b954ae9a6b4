//! The `[replication]` section: the NATS servers, the stream, this node's
//! role and its lease. Files it names are checked to be readable here, as
//! a destination's are. With it, every secret must be given
//! (`given_secrets_only`).

use std::path::Path;
use std::time::Duration;

use super::Ctx;
use crate::config::raw::{RawReplication, default};
use crate::config::{
    AdminConfig, ConfigError, Loaded, ReplicationConfig, SecretPlan, SecretPurpose, SourceConfig,
};

/// The longest lease: a primary gone a minute is long gone.
const LONGEST_LEASE: Duration = Duration::from_secs(60);
/// The shortest: one NATS leader election lasts several seconds, and a
/// lease that lapses during one replaces a primary that was never gone.
const SHORTEST_LEASE: Duration = Duration::from_secs(2);

/// Snapshots at most this often: each copies the whole database.
const SHORTEST_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(10);
/// At least this often: the stream keeps every frame since the older of
/// the two snapshots kept.
const LONGEST_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(7 * 24 * 3600);

pub(super) fn validate_replication(
    cx: &mut Ctx<'_>,
    rr: RawReplication,
) -> Result<ReplicationConfig, ConfigError> {
    let key = |k: &str| format!("replication.{k}");
    let Some(text) = rr.url else {
        return Err(cx.err(key("url"), "is required: the NATS servers to replicate to"));
    };
    let mut urls = Vec::new();
    for one in text.split(',').map(str::trim) {
        // The error names the key, not the text: a URL can hold a credential.
        let url = reqwest::Url::parse(one)
            .map_err(|e| cx.err(key("url"), format!("is not a list of URLs: {e}")))?;
        if !matches!(url.scheme(), "nats" | "tls") || url.host_str().is_none_or(str::is_empty) {
            return Err(cx.err(
                key("url"),
                "each server must be nats://host:port or tls://host:port",
            ));
        }
        urls.push(url);
    }
    let stream = rr
        .stream
        .unwrap_or_else(|| default::REPLICATION_STREAM.to_owned());
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if stream.is_empty() || stream.len() > 64 || !stream.chars().all(valid) {
        return Err(cx.err(
            key("stream"),
            "must be 1 to 64 letters, digits, '-' or '_' (a JetStream stream name)",
        ));
    }
    let replicas = rr.replicas.unwrap_or(default::REPLICATION_REPLICAS);
    if !(1..=5).contains(&replicas) {
        return Err(cx.err(key("replicas"), "must be 1 to 5 (JetStream's limit)"));
    }
    let role = match rr.role.as_deref() {
        Some("primary") => crate::words::ReplicationRole::Primary,
        Some("standby") => crate::words::ReplicationRole::Standby,
        Some(_) => return Err(cx.err(key("role"), "must be \"primary\" or \"standby\"")),
        None => {
            return Err(cx.err(
                key("role"),
                "is required: \"primary\" (takes webhooks) or \"standby\" (follows and takes over)",
            ));
        }
    };
    let lease = cx.duration(
        &key("lease"),
        rr.lease.as_deref(),
        default::REPLICATION_LEASE,
        LONGEST_LEASE,
    )?;
    if lease < SHORTEST_LEASE {
        return Err(cx.err(
            key("lease"),
            "must be at least 2s: shorter lapses during a NATS leader election",
        ));
    }
    let node = match rr.node {
        Some(node) => node,
        None => rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
    };
    let snapshot_interval = cx.duration(
        &key("snapshot_interval"),
        rr.snapshot_interval.as_deref(),
        default::REPLICATION_SNAPSHOT_INTERVAL,
        LONGEST_SNAPSHOT_INTERVAL,
    )?;
    if snapshot_interval < SHORTEST_SNAPSHOT_INTERVAL {
        return Err(cx.err(
            key("snapshot_interval"),
            "must be at least 10s: each snapshot copies the whole database",
        ));
    }
    let compression = match rr.compression.as_deref() {
        None => crate::words::FrameCodec::Zstd,
        Some(text) => crate::words::FrameCodec::parse(text)
            .ok_or_else(|| cx.err(key("compression"), "must be \"zstd\" or \"none\""))?,
    };
    if node.trim().is_empty() {
        return Err(cx.err(key("node"), "is empty: name this node"));
    }
    let token = cx
        .read_secret(super::SecretSetting {
            key: key("token"),
            inline: rr.token.into_iter().collect(),
            env: rr.token_env,
            file: rr.token_file,
        })?
        .map(|found| crate::config::GivenSecret {
            value: crate::config::Secret::new(found.text.trim().to_owned()),
            origin: found.origin,
        });
    let readable = |k: &str, path: Option<String>| -> Result<_, ConfigError> {
        let Some(path) = path else {
            return Ok(None);
        };
        let path = cx.path(&path);
        std::fs::metadata(&path)
            .map_err(|e| cx.err(key(k), format!("cannot read {}: {e}", path.display())))?;
        Ok(Some(path))
    };
    Ok(ReplicationConfig {
        urls,
        stream,
        replicas: replicas as usize,
        role,
        lease,
        node,
        snapshot_interval,
        compression,
        creds_file: readable("creds_file", rr.creds_file)?,
        token,
        ca_file: readable("ca_file", rr.ca_file)?,
    })
}

/// With `[replication]`, every secret must be given by the config: one
/// left to the data dir is generated per node, so after a takeover the new
/// primary would verify senders, sign deliveries or answer the admin API
/// with another key than the one the world was given (the app refused
/// every delivery in an outside drill). The first such secret is the
/// error, named with where to put it.
pub(super) fn given_secrets_only(
    cx: &Ctx<'_>,
    admin: &AdminConfig<Loaded>,
    sources: &[SourceConfig<Loaded>],
    data_dir: &Path,
) -> Result<(), ConfigError> {
    let why = "with [replication] every node must use the same secrets, and a secret \
               left to the data dir is generated per node";
    let kept = |purpose: SecretPurpose| purpose.path(data_dir).display().to_string();
    for (i, source) in sources.iter().enumerate() {
        if matches!(source.secrets, SecretPlan::Generated) {
            return Err(cx.err(
                format!("source[{i}].generate_secret"),
                format!(
                    "cannot be used {why}: give the secret with secret_file or secret_env on \
                     every node (a secret generated before is in {})",
                    kept(SecretPurpose::Ingest(source.name.clone()))
                ),
            ));
        }
        for (j, destination) in source.destinations.iter().enumerate() {
            if matches!(destination.secret, SecretPlan::Generated) {
                let setting = match &destination.name {
                    None if source.destinations.len() == 1 => {
                        format!("source[{i}].destination_secret_file")
                    }
                    _ => format!("source[{i}].destination[{j}].secret_file"),
                };
                return Err(cx.err(
                    format!("source[{i}]"),
                    format!(
                        "the key that signs deliveries to {:?} is not given, {why} (after a \
                         takeover the app would refuse every delivery): set {setting} to the \
                         same whsec_ key on every node (a key generated before is in {})",
                        destination.route,
                        kept(SecretPurpose::Destination(destination.route.clone()))
                    ),
                ));
            }
        }
    }
    if matches!(admin.token, SecretPlan::Generated) {
        return Err(cx.err(
            "admin.token",
            format!(
                "is not given, {why} (after a takeover the CLI, scripts and the dashboard would \
                 be refused): set admin.token_file or admin.token_env on every node (a token \
                 generated before is in {})",
                kept(SecretPurpose::Admin)
            ),
        ));
    }
    Ok(())
}
