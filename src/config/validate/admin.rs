//! The `[admin]` section: the admin token and its place. The secret is read
//! by `Ctx::read_secret`, not here; no other section is checked here.

use super::{Ctx, SecretSetting};
use crate::config::raw::RawAdmin;
use crate::config::{AdminConfig, ConfigError, GivenSecret, Loaded, Secret, SecretPlan};

/// The admin token: from a file, the environment, or inline; none means it
/// is left to the data dir.
pub(super) fn validate_admin(
    cx: &mut Ctx<'_>,
    ra: RawAdmin,
) -> Result<AdminConfig<Loaded>, ConfigError> {
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
