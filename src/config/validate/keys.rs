//! The `[keys]` section: the idempotency keys' default lease and ttl, and
//! the `[[keys.client]]` apps with their tokens and namespaces. The tokens
//! are read by `Ctx::read_secret`, like the admin token; no other section
//! is checked here.

use std::time::Duration;

use super::{Ctx, SecretSetting};
use crate::config::raw::{RawKeys, default};
use crate::config::{
    AdminConfig, ConfigError, GivenSecret, KeyClient, KeysConfig, Loaded, Secret, SecretPlan,
};

/// The longest lease: a worker that needs longer extends its claim.
pub const LONGEST_LEASE: Duration = Duration::from_secs(3600);
/// The longest ttl: a year outlives every provider's retries and the
/// guides' 7–30 days by far.
pub const LONGEST_TTL: Duration = Duration::from_secs(365 * 86_400);
/// The shortest lease and ttl: the store counts in milliseconds, but a
/// lease under a second expires before an HTTP answer reaches a worker.
const SHORTEST: Duration = Duration::from_secs(1);

pub(super) fn validate_keys(
    cx: &mut Ctx<'_>,
    rk: RawKeys,
    admin: &AdminConfig<Loaded>,
) -> Result<KeysConfig, ConfigError> {
    let lease = between(
        cx,
        "keys.lease",
        rk.lease.as_deref(),
        default::KEY_LEASE,
        LONGEST_LEASE,
    )?;
    let ttl = between(
        cx,
        "keys.ttl",
        rk.ttl.as_deref(),
        default::KEY_TTL,
        LONGEST_TTL,
    )?;
    let mut clients: Vec<KeyClient> = Vec::new();
    for (i, rc) in rk.client.into_iter().enumerate() {
        let at = |key: &str| format!("keys.client[{i}].{key}");
        let name = rc.name.unwrap_or_default();
        if name.trim().is_empty() {
            return Err(cx.err(at("name"), "is missing or empty: give each client a name"));
        }
        if clients.iter().any(|c| c.name == name) {
            return Err(cx.err(
                at("name"),
                format!("{name:?} is already the name of another client"),
            ));
        }
        let namespace = rc.namespace.unwrap_or_else(|| name.clone());
        if namespace.is_empty() {
            return Err(cx.err(at("namespace"), "is empty: leave it out to use the name"));
        }
        if clients.iter().any(|c| c.namespace == namespace) {
            return Err(cx.err(
                at("namespace"),
                format!(
                    "{namespace:?} is already another client's namespace: give each app its own"
                ),
            ));
        }
        let found = cx.read_secret(SecretSetting {
            key: at("token"),
            inline: rc.token.into_iter().collect(),
            env: rc.token_env,
            file: rc.token_file,
        })?;
        let Some(found) = found else {
            return Err(cx.err(at("token"), "is missing: set token_file or token_env"));
        };
        let text = found.text.trim();
        if text.is_empty() {
            return Err(cx.err(found.key, "is empty"));
        }
        if let SecretPlan::Given(admin) = &admin.token
            && admin.value.expose() == text
        {
            return Err(cx.err(
                found.key,
                "is the admin token: give each client a token of its own",
            ));
        }
        let hash: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()).into();
        if admin.users.iter().any(|u| u.token_sha256 == hash) {
            return Err(cx.err(
                found.key,
                "is an [[admin.user]] token: give each client a token of its own",
            ));
        }
        if clients.iter().any(|c| c.token.value.expose() == text) {
            return Err(cx.err(found.key, "is another client's token: give each its own"));
        }
        clients.push(KeyClient {
            name,
            namespace,
            token: GivenSecret {
                origin: found.origin,
                value: Secret::new(text),
            },
        });
    }
    Ok(KeysConfig {
        lease,
        ttl,
        clients,
    })
}

/// `value` (or `default`) as a duration from 1s to `longest`.
fn between(
    cx: &Ctx<'_>,
    key: &str,
    value: Option<&str>,
    default: &str,
    longest: Duration,
) -> Result<Duration, ConfigError> {
    let d = cx.duration(key, value, default, longest)?;
    if d < SHORTEST {
        return Err(cx.err(key, "must be at least 1s"));
    }
    Ok(d)
}
