//! From a loaded config to a running one: every secret the config leaves to
//! the data dir is read from `<data_dir>/secrets/`, or generated there on the
//! first start.
//!
//! The type says which side of that step a config is on. A
//! `Config<Loaded>` (what `Config::load` returns, and all that `config check`
//! and `send` need) may still lack secrets; a `Config<Resolved>` (the
//! default type parameter) has every one, so `App::start` and the modules
//! below it cannot be handed a source without its secrets, a destination
//! without its key or an admin API without its token.

use std::fmt;
use std::path::{Path, PathBuf};

use super::secret::{ADMIN_TOKEN_NAME, generated_secret_path, load_or_generate_secret};
use super::{
    AdminConfig, Config, DeliveryConfig, Kind, Secret, SecretOrigin, SourceConfig, SourceName,
    SourceSecret,
};

/// The name of a source's secret that the data dir holds.
pub const GENERATED_NAME: &str = "generated";
use crate::standard_webhooks::{SigningKeys, StandardKey, StandardKeyError};

/// Which side of [`Config::resolve`] a config is on: the types of its three
/// kinds of secret.
pub trait Stage: Clone + fmt::Debug {
    /// A source's secrets (several during a rotation).
    type SourceSecrets: Clone + fmt::Debug;
    /// The key that signs a destination's deliveries.
    type DestinationKey: Clone + fmt::Debug;
    /// The admin API's bearer token.
    type AdminToken: Clone + fmt::Debug;
}

/// Loaded and validated: the secrets the config gives are read (with where
/// each came from); the others are still left to the data dir.
#[derive(Debug, Clone)]
pub enum Loaded {}

/// Every secret present: what the running app takes.
#[derive(Debug, Clone)]
pub enum Resolved {}

impl Stage for Loaded {
    type SourceSecrets = SecretPlan<Vec<SourceSecret>>;
    type DestinationKey = SecretPlan<GivenSecret<SigningKeys>>;
    type AdminToken = SecretPlan<GivenSecret<Secret>>;
}

impl Stage for Resolved {
    type SourceSecrets = Vec<SourceSecret>;
    type DestinationKey = SigningKeys;
    type AdminToken = Secret;
}

/// A secret of a loaded config.
#[derive(Debug, Clone)]
pub enum SecretPlan<T> {
    /// The config gives it: read at load.
    Given(T),
    /// Left to the data dir: read from `<data_dir>/secrets/`, where the first
    /// start generates it.
    Generated,
}

/// A secret the config gives, and where it came from.
#[derive(Debug, Clone)]
pub struct GivenSecret<T> {
    pub origin: SecretOrigin,
    pub value: T,
}

/// A secret generated on this start, to show the operator once.
#[derive(Debug, Clone)]
pub struct GeneratedSecret {
    pub purpose: SecretPurpose,
    pub secret: Secret,
    /// The file that keeps it (mode 0600).
    pub path: PathBuf,
}

/// What a secret kept in the data dir is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretPurpose {
    /// The secret a source's sender signs with; ingest verifies.
    Ingest(SourceName),
    /// The key hookinbox signs a destination's deliveries with (named by
    /// its route: the source's name, or `source.name`); the app verifies.
    Destination(String),
    /// The admin API's bearer token.
    Admin,
}

impl SecretPurpose {
    /// The name its file is kept under, for [`generated_secret_path`].
    fn file_name(&self) -> String {
        match self {
            SecretPurpose::Ingest(source) => source.to_string(),
            SecretPurpose::Destination(source) => format!("{source}.destination"),
            SecretPurpose::Admin => ADMIN_TOKEN_NAME.to_owned(),
        }
    }

    /// Where it is kept under `data_dir`: what `serve` writes, and `send`
    /// and the operator commands read.
    pub fn path(&self, data_dir: &Path) -> PathBuf {
        generated_secret_path(data_dir, &self.file_name())
    }
}

impl fmt::Display for SecretPurpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretPurpose::Ingest(source) => write!(f, "the secret of source {source:?}"),
            SecretPurpose::Destination(route) => {
                write!(f, "the key that signs deliveries to destination {route:?}")
            }
            SecretPurpose::Admin => f.write_str("the admin token"),
        }
    }
}

/// A secret left to the data dir that cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Its file cannot be read, or not created on the first start.
    #[error("{purpose} ({})", path.display())]
    Io {
        purpose: SecretPurpose,
        path: PathBuf,
        #[source]
        cause: std::io::Error,
    },
    /// A delivery key's file edited by hand into something else.
    #[error(
        "{purpose} ({}) is not usable; delete the file to have a new key generated",
        path.display()
    )]
    UnusableKey {
        purpose: SecretPurpose,
        path: PathBuf,
        #[source]
        cause: StandardKeyError,
    },
}

/// A secret that an operator's command reads from the server's data dir,
/// where the server generated it, cannot be had. The command generates
/// nothing: a missing file is the server's to make.
#[derive(Debug, thiserror::Error)]
pub enum ReadSecretError {
    /// `listen --destination` names a route the config does not have.
    #[error("{origin}: no destination {route:?}")]
    NoDestination { origin: String, route: String },
    /// The admin token's file: usually a permission the command lacks.
    #[error(
        "{origin}: the admin token is generated, but {} cannot be read ({cause}); \
         run as the service's user or root, or set HOOKINBOX_ADMIN_TOKEN",
        path.display()
    )]
    AdminToken {
        origin: String,
        path: PathBuf,
        #[source]
        cause: std::io::Error,
    },
    /// A destination key's file, likewise.
    #[error(
        "{purpose} is generated, but {} cannot be read ({cause}); run as the service's user or root",
        path.display()
    )]
    Unreadable {
        purpose: SecretPurpose,
        path: PathBuf,
        #[source]
        cause: std::io::Error,
    },
    /// A destination key's file that holds no key.
    #[error("{purpose} ({}): {cause}", path.display())]
    UnusableKey {
        purpose: SecretPurpose,
        path: PathBuf,
        #[source]
        cause: StandardKeyError,
    },
}

impl Config<Loaded> {
    /// Reads every secret this config leaves to its data dir, generating
    /// those that do not exist yet (the first start). Returns the config with
    /// every secret present, and the secrets generated just now, to show the
    /// operator once.
    pub fn resolve(self) -> Result<(Config, Vec<GeneratedSecret>), ResolveError> {
        let data_dir = self.server.data_dir.clone();
        let mut generated = Vec::new();
        let token = match self.admin.token {
            SecretPlan::Given(token) => token.value,
            // Hex, like the secret of a non-standard source.
            SecretPlan::Generated => {
                keep(&data_dir, SecretPurpose::Admin, Kind::Hmac, &mut generated)?
            }
        };
        let sources = self
            .sources
            .into_iter()
            .map(|source| source.resolve(&data_dir, &mut generated))
            .collect::<Result<_, _>>()?;
        let config = Config {
            origin: self.origin,
            server: self.server,
            retention: self.retention,
            log: self.log,
            admin: AdminConfig {
                token,
                users: self.admin.users,
            },
            keys: self.keys,
            replication: self.replication,
            alerts: self.alerts,
            telemetry: self.telemetry,
            sources,
            warnings: self.warnings,
        };
        Ok((config, generated))
    }
}

impl SourceConfig<Loaded> {
    /// [`Config::resolve`] for one source: its secrets and its delivery key,
    /// read from or generated into `data_dir` when the config leaves them
    /// there; each generated now is added to `generated`.
    pub fn resolve(
        self,
        data_dir: &Path,
        generated: &mut Vec<GeneratedSecret>,
    ) -> Result<SourceConfig, ResolveError> {
        let secrets = match self.secrets {
            SecretPlan::Given(secrets) => secrets,
            SecretPlan::Generated => {
                let purpose = SecretPurpose::Ingest(self.name.clone());
                let path = purpose.path(data_dir);
                vec![SourceSecret {
                    name: GENERATED_NAME.to_owned(),
                    table: false,
                    origin: SecretOrigin::File(path),
                    expires: None,
                    value: keep(data_dir, purpose, self.kind, generated)?,
                }]
            }
        };
        let mut destinations = Vec::with_capacity(self.destinations.len());
        for dl in self.destinations {
            let secret = match dl.secret {
                SecretPlan::Given(key) => key.value,
                SecretPlan::Generated => {
                    let purpose = SecretPurpose::Destination(dl.route.clone());
                    let text = keep(data_dir, purpose.clone(), Kind::Standard, generated)?;
                    // Generated text always parses; a file edited by hand may not.
                    StandardKey::parse(text.expose())
                        .map(SigningKeys::one)
                        .map_err(|cause| ResolveError::UnusableKey {
                            path: purpose.path(data_dir),
                            purpose,
                            cause,
                        })?
                }
            };
            destinations.push(DeliveryConfig {
                name: dl.name,
                route: dl.route,
                url: dl.url,
                secret,
                ca: dl.ca,
                jetstream: dl.jetstream,
                filter: dl.filter,
                forward_headers: dl.forward_headers,
                connect_timeout: dl.connect_timeout,
                timeout: dl.timeout,
                initial_interval: dl.initial_interval,
                max_interval: dl.max_interval,
                max_attempts: dl.max_attempts,
                max_age: dl.max_age,
                retry_statuses: dl.retry_statuses,
                max_concurrency: dl.max_concurrency,
                max_rate: dl.max_rate,
                paused: dl.paused,
                ordering: dl.ordering,
                breaker_failures: dl.breaker_failures,
                breaker_cooldown: dl.breaker_cooldown,
            });
        }
        Ok(SourceConfig {
            name: self.name,
            kind: self.kind,
            secrets,
            tolerance: self.tolerance,
            expect_within: self.expect_within,
            max_body: self.max_body,
            event_id: self.event_id,
            event_type: self.event_type,
            public_url: self.public_url,
            verify_token: self.verify_token,
            destinations,
            hmac: self.hmac,
            reconcile: self.reconcile,
            redact: self.redact,
            redact_for: self.redact_for,
        })
    }
}

#[cfg(test)]
impl SourceConfig<Loaded> {
    /// A source whose config gives every secret, resolved: for tests, which
    /// have no data dir. Panics if the source leaves a secret to one.
    pub(crate) fn resolved(self) -> SourceConfig {
        self.resolve(Path::new("/nonexistent/data-dir"), &mut Vec::new())
            .expect("the test source gives every secret")
    }
}

/// The secret kept in `data_dir` for `purpose`, in the form of `kind`,
/// created if it does not exist yet (and then added to `generated`).
impl Config<Loaded> {
    /// The key that signs deliveries to destination `route`, as the server
    /// reads it, without generating anything: for `hookinbox listen
    /// --destination`, which signs as that destination does.
    pub fn destination_key(&self, route: &str) -> Result<SigningKeys, ReadSecretError> {
        let destination = self
            .sources
            .iter()
            .flat_map(|s| &s.destinations)
            .find(|d| d.route == route)
            .ok_or_else(|| ReadSecretError::NoDestination {
                origin: self.origin.clone(),
                route: route.to_owned(),
            })?;
        match &destination.secret {
            SecretPlan::Given(key) => Ok(key.value.clone()),
            SecretPlan::Generated => {
                let purpose = SecretPurpose::Destination(route.to_owned());
                let path = purpose.path(&self.server.data_dir);
                let text = match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(cause) => {
                        return Err(ReadSecretError::Unreadable {
                            purpose,
                            path,
                            cause,
                        });
                    }
                };
                StandardKey::parse(text.trim())
                    .map(SigningKeys::one)
                    .map_err(|cause| ReadSecretError::UnusableKey {
                        purpose,
                        path,
                        cause,
                    })
            }
        }
    }
}

fn keep(
    data_dir: &Path,
    purpose: SecretPurpose,
    kind: Kind,
    generated: &mut Vec<GeneratedSecret>,
) -> Result<Secret, ResolveError> {
    let path = purpose.path(data_dir);
    match load_or_generate_secret(data_dir, &purpose.file_name(), kind) {
        Ok((secret, created)) => {
            if created {
                generated.push(GeneratedSecret {
                    purpose,
                    secret: secret.clone(),
                    path,
                });
            }
            Ok(secret)
        }
        Err(cause) => Err(ResolveError::Io {
            purpose,
            path,
            cause,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str) -> Config<Loaded> {
        Config::from_toml(text, "f.toml", None, &|_| None).unwrap()
    }

    #[test]
    fn the_first_start_generates_what_the_config_leaves_to_the_data_dir_and_later_starts_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            r#"[server]
data_dir = {:?}

[[source]]
name = "demo"
kind = "standard"
generate_secret = true
destination = "http://127.0.0.1:9/app"

[[source]]
name = "gh"
kind = "github"
secret = "given"
"#,
            dir.path().display().to_string()
        );
        let (config, generated) = loaded(&text).resolve().unwrap();
        let purposes: Vec<String> = generated.iter().map(|g| g.purpose.to_string()).collect();
        assert_eq!(
            purposes,
            [
                "the admin token",
                "the secret of source \"demo\"",
                "the key that signs deliveries to destination \"demo\"",
            ]
        );
        for g in &generated {
            assert!(g.path.starts_with(dir.path().join("secrets")), "{g:?}");
            let kept = std::fs::read_to_string(&g.path).unwrap();
            assert_eq!(kept.trim(), g.secret.expose());
        }
        assert_eq!(config.admin.token, generated[0].secret);
        assert_eq!(config.sources[0].secrets[0].value, generated[1].secret);
        assert_eq!(config.sources[0].secrets[0].name, GENERATED_NAME);
        assert_eq!(config.sources[1].secrets[0].value, Secret::new("given"));

        // The second start reads the same secrets and announces none.
        let (again, generated) = loaded(&text).resolve().unwrap();
        assert!(generated.is_empty(), "{generated:?}");
        assert_eq!(again.admin.token, config.admin.token);
        assert_eq!(again.sources[0].secrets, config.sources[0].secrets);
    }

    #[test]
    fn a_delivery_key_file_edited_into_garbage_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = generated_secret_path(dir.path(), "shop.destination");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "not base64!\n").unwrap();
        let text = format!(
            r#"[server]
data_dir = {:?}

[admin]
token = "0123456789abcdef"

[[source]]
name = "shop"
kind = "github"
secret = "x"
destination = "http://127.0.0.1:9/app"
"#,
            dir.path().display().to_string()
        );
        let err = loaded(&text).resolve().unwrap_err();
        assert!(matches!(err, ResolveError::UnusableKey { .. }), "{err:?}");
        let shown = err.to_string();
        assert!(
            shown.contains("destination \"shop\"") && shown.contains(&path.display().to_string()),
            "{shown}"
        );
    }

    /// `listen --destination` reads a key without generating one: a route
    /// the config lacks, a key not generated yet and one edited into
    /// garbage are told apart, each naming what to look at.
    #[test]
    fn reading_a_destination_key_tells_a_missing_route_from_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            r#"[server]
data_dir = {:?}

[[source]]
name = "shop"
kind = "github"
secret = "x"
destination = "http://127.0.0.1:9/app"
"#,
            dir.path().display().to_string()
        );
        let config = loaded(&text);
        let err = config.destination_key("nowhere").unwrap_err();
        assert!(
            matches!(&err, ReadSecretError::NoDestination { route, .. } if route == "nowhere"),
            "{err:?}"
        );
        let err = config.destination_key("shop").unwrap_err();
        assert!(matches!(err, ReadSecretError::Unreadable { .. }), "{err:?}");
        assert!(
            err.to_string().contains("run as the service's user"),
            "{err}"
        );

        let path = generated_secret_path(dir.path(), "shop.destination");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "not base64!\n").unwrap();
        let err = config.destination_key("shop").unwrap_err();
        assert!(
            matches!(err, ReadSecretError::UnusableKey { .. }),
            "{err:?}"
        );
    }
}
