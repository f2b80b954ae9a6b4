//! Secrets: a newtype that never prints itself, where a secret the config
//! gives comes from, and the secrets hookinbox generates (kept 0600 under the
//! data dir).

use std::fmt;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::Engine;
use rand::RngCore;

use super::Kind;

/// A secret as the user configured it. `Debug` and `Display` print `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret text. Call only where the secret is used: signing, verifying,
    /// printing it once to the operator who asked for it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where a secret the config gives comes from: what `config check` shows in
/// its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretOrigin {
    /// Written in the config file itself (allowed, warned: it is then in every
    /// copy and backup of the file).
    Inline,
    /// The environment variable of this name.
    Env(String),
    /// This file (a relative path in the config is resolved against the
    /// config file's directory).
    File(PathBuf),
}

/// A fresh random secret in the form the kind's senders expect: Standard
/// Webhooks keys are `whsec_` + base64 of 24 random bytes (as Svix issues
/// them), others 32 random bytes in hex.
pub fn generate_secret_text(kind: Kind) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    match kind {
        Kind::Standard => format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode(&bytes[..24])
        ),
        _ => hex::encode(bytes),
    }
}

/// The name the generated admin API token is kept under. Source names cannot
/// contain '.', so no source's file clashes with it.
pub const ADMIN_TOKEN_NAME: &str = "admin.token";

/// Where the generated secret called `name` is kept: `<data_dir>/secrets/
/// <name>.secret`. Every reader and writer of these files asks here, so
/// `serve`, `send` and the operator commands cannot disagree on the place.
pub fn generated_secret_path(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join("secrets").join(format!("{name}.secret"))
}

/// Returns the generated secret called `name`, creating it (0600, in a 0700
/// directory) on first call. The flag is true when it was created just now,
/// so the caller prints it once. Errors do not repeat the path: the caller
/// names the file.
pub fn load_or_generate_secret(
    data_dir: &Path,
    name: &str,
    kind: Kind,
) -> std::io::Result<(Secret, bool)> {
    let path = generated_secret_path(data_dir, name);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let text = text.trim();
            if text.is_empty() {
                return Err(std::io::Error::other(
                    "the file is empty: delete it to have a new secret generated",
                ));
            }
            return Ok((Secret::new(text), false));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let dir = path.parent().expect("secret path has a parent");
    // Created 0700 from the start (data dir included), never widened then narrowed.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let text = generate_secret_text(kind);
    // create_new: two processes racing on first start cannot both win.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(format!("{text}\n").as_bytes())?;
    file.sync_all()?;
    Ok((Secret::new(text), true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_secret() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "[redacted] [redacted]");
    }

    #[test]
    fn generated_secret_is_kept_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (first, created) = load_or_generate_secret(dir.path(), "demo", Kind::Standard).unwrap();
        assert!(created);
        assert!(first.expose().starts_with("whsec_"));
        let mode = std::fs::metadata(generated_secret_path(dir.path(), "demo"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, created) = load_or_generate_secret(dir.path(), "demo", Kind::Standard).unwrap();
        assert!(!created);
        assert_eq!(first, again);
    }
}
