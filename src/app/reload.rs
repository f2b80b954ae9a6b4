//! `Reloader`: the config and its secret files read again while serving
//! (SIGHUP, `systemctl reload`, `POST /api/reload`), checked whole, then
//! taken in place part by part.
//!
//! Live: each source's secrets, limits, routes and filters, sources added
//! and removed (ingest swaps its table whole); destinations added, changed
//! and removed (the scheduler's lanes); the admin token, the people's
//! tokens, the keys' clients and defaults (the admin API's access, swapped
//! whole); `[alerts]` and each source's `expect_within` (the alerter's
//! settings); the ingest TLS certificate and key. Everything else
//! (`[server]`, `[retention]`, `[log]`, `[replication]`, `[telemetry]`, a
//! source's `reconcile`) is read by tasks that started with it: a change there is named in the answer and left as it was until
//! a restart. A config that does not pass `config check`, or whose
//! destinations cannot be set up, is refused whole: nothing of it is taken.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use sha2::{Digest, Sha256};

use crate::admin::Access;
use crate::alert;
use crate::api::{self, ConfigChange, PartChanged};
use crate::config::{self, Config, SourceConfig};
use crate::deliver::Destination;
use crate::ingest::{IngestState, Sources};
use crate::metrics::Metrics;
use crate::schedule::{DeliveryHandle, Reconfigure, Wanted};
use crate::store::Store;
use crate::tls::Tls;

/// Why a reload took nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The config (or a secret file, or a TLS file, or a destination's
    /// setup) does not pass its checks.
    #[error("{0}")]
    Invalid(String),
    /// The store could not say which destinations are paused.
    #[error("cannot read the paused destinations: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// Reloads the running app's config. Cloned freely; reloads run one at a
/// time.
#[derive(Clone)]
pub struct Reloader(Arc<Inner>);

struct Inner {
    /// The config in force: the last reload's, with what it could not
    /// take kept as the process started.
    running: Mutex<Config>,
    live: Live,
}

/// The running parts a reload changes in place.
pub(super) struct Live {
    pub ingest: IngestState,
    pub delivery: DeliveryHandle,
    pub access: Arc<ArcSwap<Access>>,
    /// The alerter's settings: `[alerts]`, the sources, `expect_within`.
    pub alerts: tokio::sync::watch::Sender<alert::Settings>,
    /// Which secret verified what (ingest puts a reload's in force).
    pub secrets: crate::secrets::SecretBook,
    pub metrics: Metrics,
    pub store: Store,
    pub tls: Option<Tls>,
}

/// What a reload reads the config from: the process's environment, as at
/// start.
fn reread(origin: &str) -> Result<(Config, Vec<config::GeneratedSecret>), ReloadError> {
    let invalid = |e: &dyn std::fmt::Display| ReloadError::Invalid(e.to_string());
    let loaded = if origin == config::EMBEDDED_ORIGIN {
        Config::embedded(&config::process_env)
    } else {
        Config::load(std::path::Path::new(origin), &config::process_env)
    }
    .map_err(|e| invalid(&e))?;
    loaded.resolve().map_err(|e| invalid(&e))
}

impl Reloader {
    pub(super) fn new(config: Config, live: Live) -> Reloader {
        Reloader(Arc::new(Inner {
            running: Mutex::new(config),
            live,
        }))
    }

    /// Reads the config again and takes what may change live. Blocking
    /// (files, the store): run it off the runtime's workers.
    pub fn reload(&self) -> Result<api::Reloaded, ReloadError> {
        let inner = &self.0.live;
        let mut running = self.0.running.lock().unwrap_or_else(|p| p.into_inner());
        let (read, generated) = reread(&running.origin)?;
        let merged = merged(&running, read);
        let needs_restart = needs_restart(&running, &merged.read);
        let next = merged.config;
        // Everything that can fail, before anything is taken.
        let destinations = wanted(&running, &next)?;
        let paused_states = inner.store.paused_states()?;
        let sources = Sources::of(&next, &inner.secrets, &inner.metrics)
            .map_err(|e| ReloadError::Invalid(e.to_string()))?;
        // Last of what can fail: it swaps the certificate as it succeeds.
        if let Some(tls) = &inner.tls {
            tls.reload().map_err(|e| {
                ReloadError::Invalid(format!(
                    "cannot reload TLS (the certificate in use stays): {}",
                    crate::store::Report(&e)
                ))
            })?;
            tracing::info!("reload: reloaded the ingest TLS certificate and key");
        }
        // Taken: from here nothing refuses.
        inner.ingest.reconfigure(sources);
        super::declare(&inner.metrics, &next);
        inner.delivery.reconfigure(Reconfigure {
            destinations,
            paused_states,
        });
        inner.access.store(Arc::new(access_of(&next)));
        inner.alerts.send_replace(super::alert_settings(&next));
        for secret in &generated {
            tracing::info!(path = %secret.path.display(), "reload: generated a secret for a new part of the config (its file holds it)");
        }
        let applied = applied(&running, &next);
        let answer = api::Reloaded {
            origin: next.origin.clone(),
            applied,
            needs_restart,
            warnings: next.warnings.clone(),
        };
        *running = next;
        Ok(answer)
    }
}

/// Each destination `next` has: unchanged from `running` (its lane goes on,
/// nothing is built: a destination's HTTP client costs ≈ 2 ms), or built
/// anew. Fails on one that cannot be set up.
fn wanted(running: &Config, next: &Config) -> Result<Vec<Wanted>, ReloadError> {
    let before = destinations(running);
    let mut wanted = Vec::new();
    for source in &next.sources {
        for d in &source.destinations {
            let part = format!("destination.{}", d.route);
            let same = before.get(&part) == Some(&fingerprint(d, &key_bytes(&d.secret)));
            wanted.push(if same {
                Wanted::Unchanged(d.route.clone())
            } else {
                Wanted::Set(Box::new(
                    Destination::new(source.name.clone(), d.clone())
                        .map_err(|e| ReloadError::Invalid(e.to_string()))?,
                ))
            });
        }
    }
    Ok(wanted)
}

/// Who reaches the admin API and what it lists, as `config` says.
pub(super) fn access_of(config: &Config) -> Access {
    Access {
        token: config.admin.token.clone(),
        users: config.admin.users.clone(),
        keys: config.keys.clone(),
        sources: config.sources.iter().map(|s| s.name.to_string()).collect(),
        expect_within: super::expected_within(config),
        redactions: crate::admin::Redactions::of(config),
    }
}

/// The config to run: `read`, with what only a restart takes kept as
/// `running` has it; and `read` as it was, to name those parts.
struct Merged {
    config: Config,
    read: Config,
}

fn merged(running: &Config, read: Config) -> Merged {
    let mut config = read.clone();
    config.server = running.server.clone();
    config.retention = running.retention.clone();
    config.log = running.log.clone();
    config.replication = running.replication.clone();
    config.telemetry = running.telemetry.clone();
    for source in &mut config.sources {
        let before = running.source(source.name.as_str());
        source.reconcile = before.and_then(|b| b.reconcile.clone());
    }
    Merged { config, read }
}

/// The parts `read` changes that only a restart takes.
fn needs_restart(running: &Config, read: &Config) -> Vec<PartChanged> {
    let mut parts = Vec::new();
    // A section's Debug form hides its secrets, and none of these holds
    // one a reload could take anyway.
    macro_rules! sections {
        ($($field:ident),*) => {
            [$((stringify!($field), format!("{:?}", running.$field) != format!("{:?}", read.$field))),*]
        };
    }
    // The admin listener's connection cap rises once apps use keys there
    // (`admin_max_connections`): the listener took it at start.
    let keys_clients = |c: &Config| !c.keys.clients.is_empty();
    let cap = (
        "admin_connection_cap",
        keys_clients(running) != keys_clients(read),
    );
    for (part, changed) in sections!(server, retention, log, replication, telemetry)
        .into_iter()
        .chain([cap])
    {
        if changed {
            parts.push(PartChanged {
                part: part.to_owned(),
                change: ConfigChange::Changed,
            });
        }
    }
    let names: std::collections::BTreeSet<&str> = running
        .sources
        .iter()
        .chain(&read.sources)
        .map(|s| s.name.as_str())
        .collect();
    for name in names {
        let (before, after) = (running.source(name), read.source(name));
        let reconcile = |s: Option<&SourceConfig>| {
            s.and_then(|s| s.reconcile.as_ref())
                .map(|r| format!("{r:?}"))
        };
        let (b, a) = (reconcile(before), reconcile(after));
        if b != a {
            parts.push(PartChanged {
                part: format!("source.{name}.reconcile"),
                change: change(b, a),
            });
        }
    }
    parts
}

fn change<T>(before: Option<T>, after: Option<T>) -> ConfigChange {
    match (before, after) {
        (None, _) => ConfigChange::Added,
        (_, None) => ConfigChange::Removed,
        _ => ConfigChange::Changed,
    }
}

/// What taking `next` over `running` changed, part by part: sources,
/// destinations, the admin token, people, keys' clients and defaults.
fn applied(running: &Config, next: &Config) -> Vec<PartChanged> {
    let mut parts = Vec::new();
    let mut compare = |before: BTreeMap<String, Vec<u8>>, after: BTreeMap<String, Vec<u8>>| {
        let names: std::collections::BTreeSet<&String> =
            before.keys().chain(after.keys()).collect();
        for name in names {
            let (b, a) = (before.get(name), after.get(name));
            if b != a {
                parts.push(PartChanged {
                    part: name.clone(),
                    change: change(b, a),
                });
            }
        }
    };
    compare(sources(running), sources(next));
    compare(destinations(running), destinations(next));
    compare(admin(running), admin(next));
    compare(alerts(running), alerts(next));
    parts
}

/// `[alerts]`, when set (its URL may hold a token: only its fingerprint).
fn alerts(config: &Config) -> BTreeMap<String, Vec<u8>> {
    config
        .alerts
        .iter()
        .map(|a| ("alerts".to_owned(), fingerprint(a, &[])))
        .collect()
}

/// A fingerprint of what `debug` shows and of the secrets it hides.
fn fingerprint(debug: &dyn std::fmt::Debug, secrets: &[&[u8]]) -> Vec<u8> {
    let mut hash = Sha256::new();
    hash.update(format!("{debug:?}").as_bytes());
    for secret in secrets {
        hash.update((secret.len() as u64).to_le_bytes());
        hash.update(secret);
    }
    hash.finalize().to_vec()
}

/// A destination's signing keys, for its fingerprint.
fn key_bytes(keys: &crate::standard_webhooks::SigningKeys) -> Vec<&[u8]> {
    keys.keys().iter().map(|k| k.bytes()).collect()
}

/// Each source's ingest side (its destinations are their own parts).
fn sources(config: &Config) -> BTreeMap<String, Vec<u8>> {
    config
        .sources
        .iter()
        .map(|s| {
            let mut secrets: Vec<&[u8]> = s
                .secrets
                .iter()
                .map(|x| x.value.expose().as_bytes())
                .collect();
            if let Some(token) = &s.verify_token {
                secrets.push(token.value.expose().as_bytes());
            }
            let routes: Vec<_> = s
                .destinations
                .iter()
                .map(|d| (&d.route, &d.filter, &d.ordering))
                .collect();
            let named: Vec<_> = s.secrets.iter().map(|x| (&x.name, x.expires)).collect();
            let shown = (
                &s.kind,
                &s.tolerance,
                s.expect_within,
                named,
                &s.redact,
                s.redact_for,
                s.max_body,
                &s.event_id,
                &s.event_type,
                &s.public_url,
                &s.hmac,
                routes,
            );
            (format!("source.{}", s.name), fingerprint(&shown, &secrets))
        })
        .collect()
}

fn destinations(config: &Config) -> BTreeMap<String, Vec<u8>> {
    config
        .sources
        .iter()
        .flat_map(|s| &s.destinations)
        .map(|d| {
            (
                format!("destination.{}", d.route),
                fingerprint(d, &key_bytes(&d.secret)),
            )
        })
        .collect()
}

fn admin(config: &Config) -> BTreeMap<String, Vec<u8>> {
    let mut parts = BTreeMap::new();
    parts.insert(
        "admin.token".to_owned(),
        fingerprint(&(), &[config.admin.token.expose().as_bytes()]),
    );
    for user in &config.admin.users {
        parts.insert(
            format!("admin.user.{}", user.name),
            fingerprint(user, &[&user.token_sha256]),
        );
    }
    for client in &config.keys.clients {
        parts.insert(
            format!("keys.client.{}", client.name),
            fingerprint(
                &(&client.namespace,),
                &[client.token.value.expose().as_bytes()],
            ),
        );
    }
    parts.insert(
        "keys".to_owned(),
        fingerprint(&(config.keys.lease, config.keys.ttl), &[]),
    );
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ROTATED: &str = "whsec_bmV3LXNlY3JldC1mb3ItdGhlLXJlbG9hZC10ZXN0";

    /// Every secret given: resolving generates nothing, writes nothing.
    fn config(text: &str) -> Config {
        let text = format!(
            "[server]\ndata_dir = \"/nonexistent\"\n[admin]\ntoken = \"0123456789abcdef0123456789abcdef\"\n{text}"
        );
        let (config, generated) = Config::from_toml(&text, "f.toml", None, &|_| None)
            .unwrap()
            .resolve()
            .unwrap();
        assert!(generated.is_empty());
        config
    }

    fn source(name: &str, secret: &str) -> String {
        format!(
            "[[source]]\nname = \"{name}\"\nkind = \"standard\"\nsecret = \"{secret}\"\ndestination = \"http://127.0.0.1:9/{name}\"\ndestination_secret = \"{SECRET}\"\n"
        )
    }

    fn named(parts: &[PartChanged]) -> Vec<String> {
        parts
            .iter()
            .map(|p| format!("{} {}", p.part, p.change.as_str()))
            .collect()
    }

    #[test]
    fn a_rotated_secret_is_its_source_changed_and_nothing_else() {
        let before = config(&source("shop", SECRET));
        let after = config(&source("shop", ROTATED));
        assert_eq!(named(&applied(&before, &after)), ["source.shop changed"]);
        assert!(needs_restart(&before, &after).is_empty());
        assert!(applied(&before, &before).is_empty());
    }

    #[test]
    fn sources_destinations_and_people_are_named_as_added_removed_or_changed() {
        let before = config(&format!(
            "{}{}",
            source("shop", SECRET),
            source("old", SECRET)
        ));
        let after = config(&format!(
            "{}{}[[admin.user]]\nname = \"ana\"\nrole = \"viewer\"\ntoken = \"ana-token-0123456789abcdef0123\"\n",
            source("shop", SECRET),
            source("billing", SECRET)
        ));
        assert_eq!(
            named(&applied(&before, &after)),
            [
                "source.billing added",
                "source.old removed",
                "destination.billing added",
                "destination.old removed",
                "admin.user.ana added",
            ]
        );
    }

    #[test]
    fn the_first_keys_client_names_the_admin_connection_cap_too() {
        let before = config(&source("shop", SECRET));
        let after = config(&format!(
            "{}[[keys.client]]\nname = \"billing\"\ntoken = \"billing-token-0123456789abcdef\"\n",
            source("shop", SECRET)
        ));
        assert_eq!(
            named(&applied(&before, &after)),
            ["keys.client.billing added"]
        );
        assert_eq!(
            named(&needs_restart(&before, &after)),
            ["admin_connection_cap changed"]
        );
    }

    #[test]
    fn what_only_a_restart_takes_is_named_and_kept_as_it_runs() {
        let running = config(&source("shop", SECRET));
        let read = config(&format!(
            "[retention]\npayload_ttl = \"1d\"\n[alerts]\nurl = \"http://127.0.0.1:9/\"\n{}expect_within = \"1h\"\n",
            source("shop", ROTATED)
        ));
        assert_eq!(
            named(&needs_restart(&running, &read)),
            ["retention changed"]
        );
        let next = merged(&running, read).config;
        assert_eq!(
            format!("{:?}", next.retention),
            format!("{:?}", running.retention)
        );
        // What is live is taken: the rotated secret, `expect_within` and
        // the alerts.
        assert_eq!(next.sources[0].secrets[0].value.expose(), ROTATED);
        assert_eq!(
            next.sources[0].expect_within,
            Some(std::time::Duration::from_secs(3600))
        );
        assert_eq!(
            named(&applied(&running, &next)),
            ["source.shop changed", "alerts added"]
        );
    }
}
