//! What `hookinbox listen` keeps between runs, on the developer's machine
//! (`$XDG_STATE_HOME/hookinbox/listen`, else `~/.local/state/…`): one
//! cursor file per server and filter, written after each event forwarded,
//! and the development signing key, generated once. Nothing of it is on
//! the server.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::api::StreamQuery;
use crate::config::{self, Kind};
use crate::standard_webhooks::StandardKey;

/// `listen`'s directory of state.
pub(super) fn dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    anyhow!(
                        "neither XDG_STATE_HOME nor HOME is set: nowhere to keep listen's position"
                    )
                })?;
            PathBuf::from(home).join(".local/state")
        }
    };
    Ok(base.join("hookinbox/listen"))
}

/// The development key: generated on first use (0600), the same on every
/// run after, so the app's `.env` holds it once.
pub(super) fn development_key(dir: &Path) -> anyhow::Result<(StandardKey, String, PathBuf)> {
    let (secret, _) = config::load_or_generate_secret(dir, "signing-key", Kind::Standard)
        .with_context(|| {
            format!(
                "cannot keep the development signing key in {}",
                dir.display()
            )
        })?;
    let path = config::generated_secret_path(dir, "signing-key");
    let text = secret.expose().to_owned();
    let key = StandardKey::parse(&text).map_err(|e| {
        anyhow!(
            "{}: {e}; delete it to have a new key generated",
            path.display()
        )
    })?;
    Ok((key, text, path))
}

/// Where one server and filter's position is kept.
#[derive(Debug, Serialize, Deserialize)]
struct Saved {
    server: String,
    /// The stream's query less where it starts and the payload flag: what
    /// makes two listens the same.
    filter: StreamQuery,
    /// The id the next run resumes after.
    after: String,
}

/// The cursor file of one server and filter.
pub(super) struct Cursor {
    path: PathBuf,
    server: String,
    filter: StreamQuery,
}

impl Cursor {
    pub(super) fn new(dir: &Path, server: &str, query: &StreamQuery) -> Cursor {
        let filter = StreamQuery {
            after: None,
            since: None,
            payload: None,
            ..query.clone()
        };
        let name = serde_json::to_string(&(server, &filter)).unwrap_or_default();
        let digest = sha2::Sha256::digest(name.as_bytes());
        Cursor {
            path: dir.join(format!("{}.json", hex::encode(&digest[..8]))),
            server: server.to_owned(),
            filter,
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The id saved by the last run, if any.
    pub(super) fn load(&self) -> anyhow::Result<Option<String>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(anyhow!("cannot read {}: {e}", self.path.display())),
        };
        let saved: Saved = serde_json::from_str(&text).map_err(|e| {
            anyhow!(
                "{} is not listen's position file ({e}): delete it, or start with --from-now",
                self.path.display()
            )
        })?;
        Ok((saved.server == self.server && saved.filter == self.filter).then_some(saved.after))
    }

    /// Saves `after` for the next run: written whole, then renamed over the
    /// old file, so a kill leaves one or the other.
    pub(super) fn save(&self, after: &str) -> anyhow::Result<()> {
        let saved = Saved {
            server: self.server.clone(),
            filter: self.filter.clone(),
            after: after.to_owned(),
        };
        let dir = self.path.parent().expect("a file in a directory");
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&saved)?)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .with_context(|| format!("cannot save listen's position in {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_kept_per_server_and_filter() {
        let dir = tempfile::tempdir().unwrap();
        let stripe = StreamQuery {
            source: Some("stripe".into()),
            ..StreamQuery::default()
        };
        let a = Cursor::new(dir.path(), "http://127.0.0.1:9001", &stripe);
        assert_eq!(a.load().unwrap(), None);
        a.save("hbx_1").unwrap();
        a.save("hbx_2").unwrap();
        assert_eq!(a.load().unwrap().as_deref(), Some("hbx_2"));
        // Another filter or server starts afresh; `after` is not a filter.
        let other_server = Cursor::new(dir.path(), "http://127.0.0.1:9002", &stripe);
        assert_eq!(other_server.load().unwrap(), None);
        let all = Cursor::new(dir.path(), "http://127.0.0.1:9001", &StreamQuery::default());
        assert_eq!(all.load().unwrap(), None);
        let resumed = StreamQuery {
            after: Some("hbx_0".into()),
            ..stripe.clone()
        };
        let same = Cursor::new(dir.path(), "http://127.0.0.1:9001", &resumed);
        assert_eq!(same.load().unwrap().as_deref(), Some("hbx_2"));
        // A broken file is said, not taken for "no position".
        std::fs::write(a.path(), "{").unwrap();
        assert!(a.load().unwrap_err().to_string().contains("--from-now"));
    }

    #[test]
    fn the_development_key_is_generated_once() {
        let dir = tempfile::tempdir().unwrap();
        let (first, text, path) = development_key(dir.path()).unwrap();
        assert!(text.starts_with("whsec_"), "{text}");
        let (again, same, _) = development_key(dir.path()).unwrap();
        assert_eq!((first, text), (again, same));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
