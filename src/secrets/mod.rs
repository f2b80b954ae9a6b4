//! Which secret verifies what: for each source secret, when hookinbox
//! first had it, when it last verified an event and how many; what
//! `hookinbox secrets` lists (never a value) and the expiry alert judges.
//!
//! A secret is known by a fingerprint (SHA-256 of its source and its value,
//! truncated), so its record follows it across a rename, a reload and a
//! restart, and a rotated value starts a record of its own. Ingest records
//! a match with two atomic writes on a handle it got when its table was
//! built ([`SecretBook::handles`]); the [`Keeper`] writes the records to
//! the store's `meta` table at most every [`KEEP_EVERY`] when they changed,
//! and once more at the end, so a restart loses none but the last minute's
//! (and the metric `hookinbox_signature_matches_total` says the same per
//! process).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::api::{self, Timestamp};
use crate::clock::Clock;
use crate::config::{Config, SecretOrigin};
use crate::store::Store;
use crate::supervise::TaskError;

/// How often changed records are written (and what a crash may lose).
pub const KEEP_EVERY: Duration = Duration::from_secs(60);
/// The first byte of what is kept: its encoding's version.
const KEPT_VERSION: u8 = 1;

type Fingerprint = [u8; 16];

/// One secret's use. Shared by ingest (which records), the book and the
/// keeper.
#[derive(Debug)]
pub struct SecretUse {
    first_seen_ms: AtomicU64,
    /// 0: never.
    last_match_ms: AtomicU64,
    matches: AtomicU64,
    book: Arc<Changed>,
}

#[derive(Debug, Default)]
struct Changed(AtomicBool);

impl SecretUse {
    /// It verified an event at `now_ms`.
    pub fn matched(&self, now_ms: u64) {
        self.last_match_ms.fetch_max(now_ms, Ordering::Relaxed);
        self.matches.fetch_add(1, Ordering::Relaxed);
        if !self.book.0.load(Ordering::Relaxed) {
            self.book.0.store(true, Ordering::Relaxed);
        }
    }

    fn last_match_ms(&self) -> Option<u64> {
        Some(self.last_match_ms.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }
}

/// A secret of the config in force, with its use.
#[derive(Debug, Clone)]
pub struct Entry {
    pub source: String,
    pub name: String,
    pub place: api::SecretPlace,
    pub expires_ms: Option<u64>,
    fingerprint: Fingerprint,
    used: Arc<SecretUse>,
}

impl Entry {
    /// The handle ingest records its matches on.
    pub fn used(&self) -> Arc<SecretUse> {
        self.used.clone()
    }

    pub fn last_match_ms(&self) -> Option<u64> {
        self.used.last_match_ms()
    }
}

/// Every secret's record, and the config's secrets in force. Cloned freely.
#[derive(Clone)]
pub struct SecretBook(Arc<Inner>);

struct Inner {
    uses: Mutex<HashMap<Fingerprint, Arc<SecretUse>>>,
    current: ArcSwap<Vec<Entry>>,
    changed: Arc<Changed>,
    clock: Clock,
}

/// A record as the store keeps it.
#[derive(Serialize, Deserialize)]
struct Kept {
    fingerprint: Fingerprint,
    first_seen_ms: u64,
    last_match_ms: u64,
    matches: u64,
}

fn fingerprint(source: &str, secret: &str) -> Fingerprint {
    let mut hash = Sha256::new();
    hash.update(b"hookinbox secret\0");
    hash.update(source.as_bytes());
    hash.update(b"\0");
    hash.update(secret.as_bytes());
    let mut out = [0; 16];
    out.copy_from_slice(&hash.finalize()[..16]);
    out
}

fn place(origin: &SecretOrigin) -> api::SecretPlace {
    match origin {
        SecretOrigin::Inline => api::SecretPlace::Inline,
        SecretOrigin::Env(var) => api::SecretPlace::Env { var: var.clone() },
        SecretOrigin::File(path) => api::SecretPlace::File {
            path: path.display().to_string(),
        },
    }
}

impl SecretBook {
    pub fn new(clock: Clock) -> SecretBook {
        SecretBook(Arc::new(Inner {
            uses: Mutex::new(HashMap::new()),
            current: ArcSwap::from_pointee(Vec::new()),
            changed: Arc::default(),
            clock,
        }))
    }

    /// The entries of `config`'s secrets, each with its record (a new one,
    /// first seen now, for a secret never had before); by source name, in
    /// each source's order. Not yet in force: see [`SecretBook::take`].
    pub fn handles(&self, config: &Config) -> Vec<Entry> {
        let now = self.0.clock.now_ms();
        let mut uses = self.0.uses.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        for source in &config.sources {
            for secret in &source.secrets {
                let fingerprint = fingerprint(source.name.as_str(), secret.value.expose());
                let used = uses.entry(fingerprint).or_insert_with(|| {
                    self.0.changed.0.store(true, Ordering::Relaxed);
                    Arc::new(SecretUse {
                        first_seen_ms: AtomicU64::new(now),
                        last_match_ms: AtomicU64::new(0),
                        matches: AtomicU64::new(0),
                        book: self.0.changed.clone(),
                    })
                });
                out.push(Entry {
                    source: source.name.to_string(),
                    name: secret.name.clone(),
                    place: place(&secret.origin),
                    expires_ms: secret.expires.map(|t| t.0),
                    fingerprint,
                    used: used.clone(),
                });
            }
        }
        out
    }

    /// Puts `entries` (from [`SecretBook::handles`]) in force: what is
    /// listed, judged and kept from now on.
    pub fn take(&self, entries: Vec<Entry>) {
        self.0.current.store(Arc::new(entries));
    }

    /// The secrets in force.
    pub fn current(&self) -> Arc<Vec<Entry>> {
        self.0.current.load_full()
    }

    /// What `GET /api/secrets` answers.
    pub fn listing(&self) -> api::SecretList {
        let now = self.0.clock.now_ms();
        let secrets = self
            .current()
            .iter()
            .map(|e| api::SecretInfo {
                source: e.source.clone(),
                name: e.name.clone(),
                place: e.place.clone(),
                first_seen: Timestamp(e.used.first_seen_ms.load(Ordering::Relaxed)),
                expires: e.expires_ms.map(Timestamp),
                expired: e.expires_ms.is_some_and(|at| at <= now),
                last_match: e.last_match_ms().map(Timestamp),
                matches: e.used.matches.load(Ordering::Relaxed),
            })
            .collect();
        api::SecretList {
            now: Timestamp(now),
            secrets,
        }
    }

    /// Takes what `store` kept into the records: the earlier first sight,
    /// the later match, and the matches counted before this process.
    fn merge(&self, kept: Vec<Kept>) {
        let mut uses = self.0.uses.lock().unwrap_or_else(|p| p.into_inner());
        for k in kept {
            let used = uses.entry(k.fingerprint).or_insert_with(|| {
                Arc::new(SecretUse {
                    first_seen_ms: AtomicU64::new(k.first_seen_ms),
                    last_match_ms: AtomicU64::new(0),
                    matches: AtomicU64::new(0),
                    book: self.0.changed.clone(),
                })
            });
            used.first_seen_ms
                .fetch_min(k.first_seen_ms, Ordering::Relaxed);
            used.last_match_ms
                .fetch_max(k.last_match_ms, Ordering::Relaxed);
            used.matches.fetch_add(k.matches, Ordering::Relaxed);
        }
    }

    /// The records of the secrets in force, as the store keeps them.
    fn encode(&self) -> Vec<u8> {
        let kept: Vec<Kept> = self
            .current()
            .iter()
            .map(|e| Kept {
                fingerprint: e.fingerprint,
                first_seen_ms: e.used.first_seen_ms.load(Ordering::Relaxed),
                last_match_ms: e.used.last_match_ms.load(Ordering::Relaxed),
                matches: e.used.matches.load(Ordering::Relaxed),
            })
            .collect();
        let mut out = vec![KEPT_VERSION];
        out.extend(postcard::to_allocvec(&kept).expect("records serialise"));
        out
    }
}

fn decode(bytes: &[u8]) -> Option<Vec<Kept>> {
    match bytes.split_first() {
        Some((&KEPT_VERSION, rest)) => postcard::from_bytes(rest).ok(),
        _ => None,
    }
}

/// Keeps the book's records in the store.
pub struct Keeper {
    pub book: SecretBook,
    pub store: Store,
}

impl Keeper {
    /// Reads what the store kept (on a standby, at its promotion: after the
    /// primary it followed kept its last), then writes the records every
    /// [`KEEP_EVERY`] when they changed, and once more when `stop` ends it.
    pub async fn run(self, stop: CancellationToken) -> Result<(), TaskError> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || store.secrets_state()).await {
            Ok(Ok(Some(bytes))) => match decode(&bytes) {
                Some(kept) => self.book.merge(kept),
                None => tracing::warn!(
                    "secrets: what was kept of their use cannot be read; counting again"
                ),
            },
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e.report(), "secrets: cannot read what was kept of their use; counting again")
            }
            Err(_) => {}
        }
        let mut keep = tokio::time::interval(KEEP_EVERY);
        keep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        keep.tick().await;
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                _ = keep.tick() => self.keep().await,
            }
        }
        self.keep().await;
        Ok(())
    }

    async fn keep(&self) {
        let changed = &self.book.0.changed.0;
        if !changed.swap(false, Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.store.set_secrets_state(self.book.encode()).await {
            changed.store(true, Ordering::Relaxed);
            tracing::warn!(error = %e.report(), "secrets: cannot keep their use; trying again later");
        }
    }
}

#[cfg(test)]
mod tests;
