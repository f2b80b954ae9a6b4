//! The `[admin]` section: the admin token and its place, and the
//! `[[admin.user]]` people, each with a role and a token kept only as its
//! SHA-256. The secrets are read by `Ctx::read_secret`, not here; no other
//! section is checked here.

use sha2::{Digest, Sha256};

use super::{Ctx, SecretSetting};
use crate::api::Timestamp;
use crate::config::raw::{RawAdmin, RawAdminUser};
use crate::config::{
    AdminConfig, AdminUser, AdminUserToken, ConfigError, GivenSecret, Loaded, Secret, SecretPlan,
};
use crate::words::Role;

/// The name the `[admin]` token signs in as.
pub const ADMIN_NAME: &str = "admin";

/// The shortest token: 16 characters, as the admin token's.
const SHORTEST_TOKEN: usize = 16;

/// The admin token: from a file, the environment, or inline; none means it
/// is left to the data dir. With `users`, the `[[admin.user]]` entries too
/// (the operator commands leave them out: their token files may be
/// readable only by their own people).
pub(super) fn validate_admin(
    cx: &mut Ctx<'_>,
    ra: RawAdmin,
    users: bool,
) -> Result<AdminConfig<Loaded>, ConfigError> {
    let found = cx.read_secret(SecretSetting {
        key: "admin.token".into(),
        inline: ra.token.into_iter().collect(),
        env: ra.token_env,
        file: ra.token_file,
    })?;
    let token = match found {
        None => SecretPlan::Generated,
        Some(found) => {
            let text = found.text.trim();
            if text.len() < SHORTEST_TOKEN {
                return Err(cx.err(found.key, "must be at least 16 characters"));
            }
            SecretPlan::Given(GivenSecret {
                origin: found.origin,
                value: Secret::new(text),
            })
        }
    };
    let mut out: Vec<AdminUser> = Vec::new();
    if users {
        for (i, ru) in ra.user.into_iter().enumerate() {
            let user = validate_user(cx, i, ru, &token, &out)?;
            out.push(user);
        }
    }
    Ok(AdminConfig { token, users: out })
}

fn validate_user(
    cx: &mut Ctx<'_>,
    i: usize,
    ru: RawAdminUser,
    admin: &SecretPlan<GivenSecret<Secret>>,
    before: &[AdminUser],
) -> Result<AdminUser, ConfigError> {
    let at = |key: &str| format!("admin.user[{i}].{key}");
    let name = ru.name.unwrap_or_default();
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        return Err(cx.err(at("name"), "is missing or empty: give each user a name"));
    }
    if name == ADMIN_NAME {
        return Err(cx.err(
            at("name"),
            "\"admin\" is the name of the [admin] token: choose another",
        ));
    }
    if before.iter().any(|u| u.name == name) {
        return Err(cx.err(
            at("name"),
            format!("{name:?} is already another user's name"),
        ));
    }
    let role = match ru.role.as_deref() {
        Some(text) => Role::parse(text).ok_or_else(|| {
            cx.err(
                at("role"),
                format!("{text:?} is not a role: viewer, operator or admin"),
            )
        })?,
        None => {
            return Err(cx.err(at("role"), "is missing: viewer, operator or admin"));
        }
    };
    let expires_ms = match ru.expires.as_deref() {
        Some(text) => Some(
            text.parse::<Timestamp>()
                .map_err(|e| cx.err(at("expires"), e))?
                .0,
        ),
        None => None,
    };
    // Loaded all the same (a token that expired is refused saying whose
    // and since when, and the audit trail records the try), but said at
    // load: otherwise the first to learn of it is the person, at 3 a.m.
    if let (Some(ms), Some(text)) = (expires_ms, ru.expires.as_deref())
        && ms <= cx.now_ms
    {
        cx.warnings.push(format!(
            "{}: {} ({name:?}) is {text}, already past: {name}'s token is refused; \
             give a later date or remove the user",
            cx.origin,
            at("expires")
        ));
    }
    let found = cx.read_secret(SecretSetting {
        key: at("token"),
        inline: ru.token.into_iter().collect(),
        env: ru.token_env,
        file: ru.token_file,
    })?;
    let (token_sha256, origin) = match (found, ru.token_sha256) {
        (Some(_), Some(_)) => {
            return Err(cx.err(
                at("token_sha256"),
                "set only one of token, token_env, token_file, token_sha256",
            ));
        }
        (None, None) => {
            return Err(cx.err(
                at("token"),
                "is missing: set token_file, token_env or token_sha256",
            ));
        }
        (Some(found), None) => {
            let text = found.text.trim();
            if text.len() < SHORTEST_TOKEN {
                return Err(cx.err(found.key, "must be at least 16 characters"));
            }
            if let SecretPlan::Given(admin) = admin
                && admin.value.expose() == text
            {
                return Err(cx.err(
                    found.key,
                    "is the [admin] token: give each user a token of their own",
                ));
            }
            let hash: [u8; 32] = Sha256::digest(text.as_bytes()).into();
            (hash, AdminUserToken::Secret(found.origin))
        }
        (None, Some(hex_text)) => {
            let mut hash = [0u8; 32];
            hex::decode_to_slice(hex_text.trim(), &mut hash).map_err(|_| {
                cx.err(
                    at("token_sha256"),
                    "must be 64 hex digits: the SHA-256 of the token (sha256sum)",
                )
            })?;
            (hash, AdminUserToken::Sha256)
        }
    };
    if before.iter().any(|u| u.token_sha256 == token_sha256) {
        return Err(cx.err(at("token"), "is another user's token: give each their own"));
    }
    Ok(AdminUser {
        name,
        role,
        token_sha256,
        expires_ms,
        origin,
    })
}
