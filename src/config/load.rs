//! Loading: which file a command reads (given, packaged or the embedded
//! default), the text parsed, the `HOOKINBOX_*` environment applied over it,
//! then validated; `OperatorView`, the slice the operator commands load.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::resolve::{GivenSecret, Loaded, ReadSecretError, SecretPlan, SecretPurpose};
use super::secret::Secret;
use super::{Config, DEFAULT_TOML, EMBEDDED_ORIGIN, raw, show, validate};

/// The text of the config file at `path`, and its name for messages.
fn read_config_file(path: &Path) -> Result<(String, String), ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        origin: origin.clone(),
        position: None,
        key: String::new(),
        source_name: None,
        message: format!("cannot read the config file: {e}"),
    })?;
    Ok((text, origin))
}

/// Where the packaged install keeps its config: the operator commands'
/// default when it exists. `HOOKINBOX_PACKAGED_CONFIG` names another place
/// (the tests' way to point it at files they make; not in `--help`).
pub const PACKAGED_CONFIG: &str = "/etc/hookinbox/hookinbox.toml";

/// The config file a command reads: `path` if given, else the packaged
/// config when it is there; `None`: the embedded default. A packaged
/// config that cannot be opened is an error, not the default.
fn given_or_packaged(
    path: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(path) = path {
        return Ok(Some(path.to_owned()));
    }
    let packaged =
        env("HOOKINBOX_PACKAGED_CONFIG").map_or_else(|| PACKAGED_CONFIG.into(), PathBuf::from);
    let opened = std::fs::File::open(&packaged).map(drop);
    Ok(packaged_is_there(&packaged, opened)?.then_some(packaged))
}

/// Whether the packaged config at `path` is there to read, from what
/// opening it did. Only "not found" means not installed, the embedded
/// default's cue. Anything else is an error: a user outside the hookinbox
/// group meets "permission denied" (`/etc/hookinbox` is 0750), and falling
/// back to the default would show them a config the server does not run.
pub(super) fn packaged_is_there(
    path: &Path,
    opened: std::io::Result<()>,
) -> Result<bool, ConfigError> {
    let error = match opened {
        Ok(()) => return Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => e,
    };
    let why = match error.kind() {
        std::io::ErrorKind::PermissionDenied => {
            "permission denied; use sudo or join the hookinbox group (or pass --config)".to_owned()
        }
        _ => error.to_string(),
    };
    Err(ConfigError {
        origin: path.display().to_string(),
        position: None,
        key: String::new(),
        source_name: None,
        message: format!("cannot read the packaged config: {why}"),
    })
}

/// What the operator commands (`stats`, `events`, …) need of the server's
/// config: where its admin API listens and how its token is kept. Loaded
/// without the sources, whose secrets the operator's shell may not have.
#[derive(Debug)]
pub struct OperatorView {
    /// The file it came from, or the embedded default.
    pub origin: String,
    pub admin_listen: SocketAddr,
    pub data_dir: PathBuf,
    token: SecretPlan<GivenSecret<Secret>>,
}

impl OperatorView {
    /// `path`'s server and admin sections with the environment applied;
    /// without a path, the packaged config if it exists, else the embedded
    /// default.
    pub fn load(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OperatorView, ConfigError> {
        let path = given_or_packaged(path, env)?;
        let path = path.as_deref();
        let (text, origin) = match path {
            Some(path) => read_config_file(path)?,
            None => (DEFAULT_TOML.to_owned(), EMBEDDED_ORIGIN.to_owned()),
        };
        let mut file = raw::parse(&text, &origin).map_err(|e| e.locate(&text, &[]))?;
        raw::apply_env(&mut file, env)?;
        let from_env = raw::env_keys(env);
        let (server, admin) =
            validate::validate_operator(file, &origin, path.and_then(Path::parent), env)
                .map_err(|e| e.locate(&text, &from_env))?;
        Ok(OperatorView {
            origin,
            admin_listen: server.admin_listen,
            data_dir: server.data_dir,
            token: admin.token,
        })
    }

    /// The admin API's URL: the listen address, or loopback where it
    /// listens on every address.
    pub fn admin_url(&self) -> String {
        let mut addr = self.admin_listen;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        format!("http://{addr}")
    }

    /// The admin token: as the config gives it, or the one the server
    /// generated under its data dir.
    pub fn token(&self) -> Result<String, ReadSecretError> {
        match &self.token {
            SecretPlan::Given(given) => Ok(given.value.expose().to_owned()),
            SecretPlan::Generated => {
                let path = SecretPurpose::Admin.path(&self.data_dir);
                match std::fs::read_to_string(&path) {
                    Ok(text) => Ok(text.trim().to_owned()),
                    Err(cause) => Err(ReadSecretError::AdminToken {
                        origin: self.origin.clone(),
                        path,
                        cause,
                    }),
                }
            }
        }
    }
}

impl Config<Loaded> {
    /// The embedded default with the environment applied.
    pub fn embedded(env: &dyn Fn(&str) -> Option<String>) -> Result<Config<Loaded>, ConfigError> {
        Config::from_toml(DEFAULT_TOML, EMBEDDED_ORIGIN, None, env)
    }

    /// Reads `path`, applies the environment, validates.
    pub fn load(
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config<Loaded>, ConfigError> {
        let (text, origin) = read_config_file(path)?;
        Config::from_toml(&text, &origin, path.parent(), env)
    }

    /// `path`, else the packaged config if it exists, else the embedded
    /// default: what the commands that inspect a server's config (`config
    /// check`, `send --source`) read, as the operator commands do
    /// ([`OperatorView::load`]).
    pub fn load_or_packaged(
        path: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config<Loaded>, ConfigError> {
        match given_or_packaged(path, env)? {
            Some(path) => Config::load(&path, env),
            None => Config::embedded(env),
        }
    }

    /// `base_dir` resolves relative `*_file` paths (the config file's directory).
    pub fn from_toml(
        text: &str,
        origin: &str,
        base_dir: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config<Loaded>, ConfigError> {
        let mut file = raw::parse(text, origin).map_err(|e| e.locate(text, &[]))?;
        raw::apply_env(&mut file, env)?;
        let from_env = raw::env_keys(env);
        validate::validate(file, origin, base_dir, env).map_err(|e| e.locate(text, &from_env))
    }

    /// The effective configuration as TOML, secrets redacted: what `config check` prints.
    pub fn to_redacted_toml(&self) -> String {
        show::redacted_toml(self)
    }
}

/// The environment of this process, for [`Config::load`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
