//! Who the primary is: a key in a JetStream key-value bucket whose values
//! expire a lease after they were written (`max_age`), so the key is gone
//! a lease after its holder's last renewal.
//!
//! The primary holds the key and renews it (an update that names the
//! revision it last wrote) a few times a lease. A renewal refused because
//! the revision moved means another node took the key: this one must stop
//! answering 2xx (its publishes are fenced anyway, see `publish`). A
//! standby takes the key when it is gone, with an atomic create: of two
//! standbys only one succeeds.
//!
//! The key holds a [`Holder`]: the node's name and this process's random
//! instance id. Names are for people and may collide (a cloned VM image
//! keeps its host name); the instance never does, so a process only ever
//! takes its own writes for its own. Each node, primary or standby, also
//! keeps a presence key under its name (`node.<name>`), written at start
//! with an atomic create and renewed with the lease: a second process
//! with a live node's name is refused at start ([`Lease::announce`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use async_nats::jetstream::stream;

use super::publish::{ConnectError, StreamSettings, connect};

/// The key of the lease in its bucket.
const KEY: &str = "primary";

/// How often a start that finds its own name present looks again while
/// it waits for that name to lapse.
const PRESENCE_POLL: Duration = Duration::from_millis(250);

/// Who wrote a lease or presence key: a node's name and the random id of
/// the process that wrote it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    pub node: String,
    /// Absent in a key written by a build before instance ids (its value
    /// was the bare name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// Where its admin API listens (for the keys API), when it listens on
    /// an address others can reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<String>,
}

impl Holder {
    /// This process as a new holder: `node` and a fresh random instance.
    fn new(node: &str, admin: Option<std::net::SocketAddr>) -> Holder {
        Holder {
            node: node.to_owned(),
            instance: Some(format!("{:016x}", rand::random::<u64>())),
            // A wildcard address names no host: left out.
            admin: admin
                .filter(|a| !a.ip().is_unspecified())
                .map(|a| a.to_string()),
        }
    }

    fn encode(&self) -> bytes::Bytes {
        serde_json::to_vec(self)
            .expect("a holder serializes")
            .into()
    }

    /// A key's value: JSON, or a bare name from a build before instances.
    pub fn decode(value: &[u8]) -> Holder {
        serde_json::from_slice(value).unwrap_or_else(|_| Holder {
            node: String::from_utf8_lossy(value).into_owned(),
            instance: None,
            admin: None,
        })
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.instance {
            Some(instance) => write!(f, "{} (process {instance})", self.node),
            None => f.write_str(&self.node),
        }
    }
}

/// What a standby answers a request only the primary takes: where the
/// primary is, as far as this node last saw it in the lease.
pub fn standby_refusal(primary: Option<&Holder>) -> String {
    let rest =
        "send there, or through a load balancer that checks /readyz (200 only on the primary)";
    match primary {
        Some(Holder {
            node,
            admin: Some(admin),
            ..
        }) => format!(
            "this node is a replication standby: the primary is node {node:?} (its admin API at {admin}); {rest}"
        ),
        Some(Holder { node, .. }) => {
            format!("this node is a replication standby: the primary is node {node:?}; {rest}")
        }
        None => format!(
            "this node is a replication standby and no primary holds the lease now (a takeover may be under way): retry shortly; {rest}"
        ),
    }
}

/// The presence key of node `name` in the bucket: `node.` then the name,
/// each byte outside the characters a key may hold written `=XX`.
fn presence_key(name: &str) -> String {
    let mut key = String::from("node.");
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_') {
            key.push(b as char);
        } else {
            key.push_str(&format!("={b:02X}"));
        }
    }
    key
}

/// The primary as this node last saw it in the lease (updated at each read
/// of the key), for a standby's refusals to name where to go instead.
#[derive(Clone, Default)]
pub struct PrimaryWatch(Arc<Mutex<Option<Holder>>>);

impl PrimaryWatch {
    /// The holder last seen, if the key held one then.
    pub fn get(&self) -> Option<Holder> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn saw(&self, holder: Option<Holder>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = holder;
    }
}

/// The lease key as read: who holds it and when they last wrote it.
#[derive(Debug, Clone)]
pub struct Held {
    pub holder: Holder,
    /// The time of the holder's last write (its last renewal).
    pub written: std::time::SystemTime,
}

/// What a lease call found.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another node holds the key (it took it, or renewed it).
    #[error("the lease is held by {holder}")]
    Held { holder: Holder },
    /// Another live process goes by this node's name: it wrote the name's
    /// presence key within the last lease, and again while this one waited.
    #[error(
        "another process named {node:?} is running (it renewed its presence within the last {} s): give each node its own [replication] node name",
        lease.as_secs()
    )]
    NameTaken { node: String, lease: Duration },
    /// The bucket did not answer.
    #[error("the lease bucket did not answer: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// One node's handle on the lease.
pub struct Lease {
    store: kv::Store,
    /// This process: the node's name and its instance, the value it writes.
    me: Holder,
    value: bytes::Bytes,
    /// How long a key lives after its last write.
    lease: Duration,
    /// The revision this node last wrote, while it holds the key.
    revision: Mutex<Option<u64>>,
    /// The revision of this node's presence key it last wrote.
    presence: Mutex<Option<u64>>,
    /// The holder at the last read of the key.
    seen: PrimaryWatch,
    _client: async_nats::Client,
}

impl Lease {
    /// Connects and finds the bucket `<stream>_leader` (creating it with
    /// values that expire `lease` after they are written).
    pub async fn connect(
        settings: &StreamSettings,
        node: &str,
        lease: Duration,
        admin: Option<std::net::SocketAddr>,
    ) -> Result<Lease, LeaseError> {
        let (client, context) = connect(settings, "lease").await?;
        let bucket = format!("{}_leader", settings.stream);
        // The bucket's stream, made as the client's `create_key_value`
        // makes it, without its account query (whose answer the client
        // cannot read from a 2.9 server).
        // Tried for a budget: right after the NATS servers start, their
        // JetStream answers only once it has elected its leaders.
        let started = std::time::Instant::now();
        let store = loop {
            let found = async {
                if context.get_key_value(&bucket).await.is_err() {
                    context
                        .get_or_create_stream(stream::Config {
                            name: format!("KV_{bucket}"),
                            subjects: vec![format!("$KV.{bucket}.>")],
                            max_messages_per_subject: 1,
                            max_age: lease,
                            num_replicas: settings.replicas,
                            allow_rollup: true,
                            deny_delete: true,
                            allow_direct: true,
                            discard: stream::DiscardPolicy::New,
                            ..Default::default()
                        })
                        .await
                        .map_err(|e| LeaseError::Unavailable(e.to_string()))?;
                }
                context
                    .get_key_value(&bucket)
                    .await
                    .map_err(|e| LeaseError::Unavailable(e.to_string()))
            };
            match found.await {
                Ok(store) => break store,
                Err(e) if started.elapsed() >= settings.budget => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        };
        let me = Holder::new(node, admin);
        Ok(Lease {
            store,
            value: me.encode(),
            me,
            lease,
            revision: Mutex::new(None),
            presence: Mutex::new(None),
            seen: PrimaryWatch::default(),
            _client: client,
        })
    }

    /// Takes the key if no one holds it, or if it holds this process's
    /// own write (a renewal of its own that landed after its answer timed
    /// out). Another process's key, even under this node's name, is
    /// `Held`.
    pub async fn acquire(&self) -> Result<(), LeaseError> {
        match self.store.create(KEY, self.value.clone()).await {
            Ok(revision) => {
                self.held(Some(revision));
                Ok(())
            }
            Err(e) if e.kind() == CreateErrorKind::AlreadyExists => self.own_or_held().await,
            Err(e) => Err(LeaseError::Unavailable(e.to_string())),
        }
    }

    fn held(&self, revision: Option<u64>) {
        *self.revision.lock().unwrap_or_else(|p| p.into_inner()) = revision;
        if revision.is_some() {
            self.seen.saw(Some(self.me.clone()));
        }
    }

    /// The primary as last seen, shared with whoever names it.
    pub fn primary(&self) -> PrimaryWatch {
        self.seen.clone()
    }

    /// After a write refused because the key is not as this node left it:
    /// `Ok` if it holds this process's value (its revision taken as this
    /// node's), `Held` with its holder if another's, taken again if it is
    /// gone (it lapsed and no one took it: no one was promoted).
    async fn own_or_held(&self) -> Result<(), LeaseError> {
        // A read during an election can be stale (the key looks gone while
        // it is there): a create that finds it reads it again. Only another
        // node's name in it is an answer of "held".
        for _ in 0..3 {
            match self.store.entry(KEY).await {
                Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                    if entry.value == self.value {
                        self.held(Some(entry.revision));
                        return Ok(());
                    }
                    let holder = Holder::decode(&entry.value);
                    self.seen.saw(Some(holder.clone()));
                    return Err(LeaseError::Held { holder });
                }
                Ok(_) => match self.store.create(KEY, self.value.clone()).await {
                    Ok(revision) => {
                        self.held(Some(revision));
                        return Ok(());
                    }
                    Err(e) if e.kind() == CreateErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(LeaseError::Unavailable(e.to_string())),
                },
                Err(e) => return Err(LeaseError::Unavailable(e.to_string())),
            }
        }
        Err(LeaseError::Unavailable(
            "the lease key changed each time it was read".to_owned(),
        ))
    }

    /// Writes the key again, for another lease, if this node still holds
    /// it (or holds it again: it lapsed and no one took it); `Held` if
    /// another took it since.
    pub async fn renew(&self) -> Result<(), LeaseError> {
        // Not known since a renewal that could not be checked (no quorum):
        // whose the key is now decides.
        let Some(revision) = *self.revision.lock().unwrap_or_else(|p| p.into_inner()) else {
            return self.own_or_held().await;
        };
        match self.store.update(KEY, self.value.clone(), revision).await {
            Ok(revision) => {
                self.held(Some(revision));
                Ok(())
            }
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                self.held(None);
                self.own_or_held().await
            }
            Err(e) => Err(LeaseError::Unavailable(e.to_string())),
        }
    }

    /// The name of the node that holds the key now, if any.
    pub async fn holder(&self) -> Result<Option<String>, LeaseError> {
        Ok(self.held_by().await?.map(|held| held.holder.node))
    }

    /// Who holds the key now and when they last wrote it, if anyone.
    pub async fn held_by(&self) -> Result<Option<Held>, LeaseError> {
        let held = match self.store.entry(KEY).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => Some(Held {
                holder: Holder::decode(&entry.value),
                written: entry.created.into(),
            }),
            Ok(_) => None,
            Err(e) => return Err(LeaseError::Unavailable(e.to_string())),
        };
        self.seen.saw(held.as_ref().map(|h| h.holder.clone()));
        Ok(held)
    }

    /// Whether the key holds this process's own write.
    pub fn is_mine(&self, holder: &Holder) -> bool {
        *holder == self.me
    }

    /// Writes this node's presence key at start, with an atomic create. A
    /// key already there under this name is another process's: one that
    /// died within the last lease (this node restarted after a crash) lets
    /// it lapse, and this start waits for that, at most a lease and a
    /// margin; one that renews it meanwhile is alive, and this start is
    /// refused (`NameTaken`).
    pub async fn announce(&self) -> Result<(), LeaseError> {
        let key = presence_key(&self.me.node);
        // The key lives `lease` after its last write; a renewal comes every
        // quarter lease. A margin for the server's expiry timer.
        let deadline = std::time::Instant::now() + self.lease + Duration::from_secs(2);
        let mut told = false;
        loop {
            match self.store.create(&key, self.value.clone()).await {
                Ok(revision) => {
                    *self.presence.lock().unwrap_or_else(|p| p.into_inner()) = Some(revision);
                    return Ok(());
                }
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {}
                Err(e) => return Err(LeaseError::Unavailable(e.to_string())),
            }
            if std::time::Instant::now() >= deadline {
                return Err(LeaseError::NameTaken {
                    node: self.me.node.clone(),
                    lease: self.lease,
                });
            }
            if !told {
                told = true;
                tracing::warn!(
                    node = %self.me.node,
                    wait_s = (self.lease + Duration::from_secs(2)).as_secs(),
                    "a process named like this node was present within the last lease: waiting for its name to lapse (this node restarted after a crash?); if it renews it, this start is refused"
                );
            }
            tokio::time::sleep(PRESENCE_POLL).await;
        }
    }

    /// Renews this node's presence key (with the lease's ticks). A key
    /// rewritten by another process since says two live processes share
    /// the name: logged as an error, and written again.
    pub async fn keep_present(&self) -> Result<(), LeaseError> {
        let key = presence_key(&self.me.node);
        let revision = *self.presence.lock().unwrap_or_else(|p| p.into_inner());
        let unavailable = |e: &dyn std::fmt::Display| LeaseError::Unavailable(e.to_string());
        let renewed = match revision {
            Some(revision) => self.store.update(&key, self.value.clone(), revision).await,
            None => Err(UpdateErrorKind::WrongLastRevision.into()),
        };
        let revision = match renewed {
            Ok(revision) => revision,
            Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => {
                if let Ok(Some(entry)) = self.store.entry(&key).await
                    && entry.operation == kv::Operation::Put
                    && entry.value != self.value
                {
                    tracing::error!(
                        node = %self.me.node,
                        other = %Holder::decode(&entry.value),
                        "another live process writes this node's name: give each node its own [replication] node name"
                    );
                }
                self.store
                    .put(&key, self.value.clone())
                    .await
                    .map_err(|e| unavailable(&e))?
            }
            Err(e) => return Err(unavailable(&e)),
        };
        *self.presence.lock().unwrap_or_else(|p| p.into_inner()) = Some(revision);
        Ok(())
    }

    /// Waits until the process `holder` is gone: its name's presence key
    /// removed (it stopped, its last frame shipped) or lapsed (it died), or
    /// held by another process of that name; at most `within`. Whether it
    /// went. A new primary that waits for this before it writes leaves an
    /// old one that stepped down with nothing the stream did not take, so
    /// it follows with its data.
    pub async fn await_departure(&self, holder: &Holder, within: Duration) -> bool {
        let key = presence_key(&holder.node);
        let deadline = std::time::Instant::now() + within;
        loop {
            match self.store.entry(&key).await {
                Ok(Some(entry))
                    if entry.operation == kv::Operation::Put
                        && Holder::decode(&entry.value).instance == holder.instance => {}
                Ok(_) => return true,
                // Not answered: asked again until the deadline.
                Err(_) => {}
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(PRESENCE_POLL).await;
        }
    }

    /// The lease's length: how long a key lives after its last write.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Removes this node's presence key (a clean stop), so that its next
    /// start need not wait for it to lapse.
    pub async fn depart(&self) {
        let revision = self
            .presence
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(revision) = revision {
            let key = presence_key(&self.me.node);
            let _ = self
                .store
                .delete_expect_revision(&key, Some(revision))
                .await;
        }
    }

    /// Takes the key whoever holds it (`hookinbox promote`): the holder's
    /// next renewal fails and it steps down. Returns who held it.
    pub async fn take_over(&self) -> Result<Option<Holder>, LeaseError> {
        let before = self.held_by().await?.map(|held| held.holder);
        let revision = self
            .store
            .put(KEY, self.value.clone())
            .await
            .map_err(|e| LeaseError::Unavailable(e.to_string()))?;
        self.held(Some(revision));
        Ok(before)
    }

    /// This node's name in the lease.
    pub fn node(&self) -> &str {
        &self.me.node
    }

    /// This process's random instance id in the lease.
    pub fn instance(&self) -> &str {
        self.me.instance.as_deref().unwrap_or_default()
    }

    /// Gives the key up (a clean stop), so a standby need not wait for it
    /// to expire.
    pub async fn release(&self) -> Result<(), LeaseError> {
        let revision = self
            .revision
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(revision) = revision {
            self.store
                .delete_expect_revision(KEY, Some(revision))
                .await
                .map_err(|e| LeaseError::Unavailable(e.to_string()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Holder, presence_key};

    /// A holder's value reads back as written; a bare name (a build before
    /// instance ids) reads as that name with no instance.
    #[test]
    fn a_holder_reads_back_and_a_bare_name_is_a_holder_without_instance() {
        let me = Holder::new("vm-a", Some("10.0.0.2:8081".parse().unwrap()));
        assert_eq!(Holder::decode(&me.encode()), me);
        assert_eq!(me.admin.as_deref(), Some("10.0.0.2:8081"));
        assert_ne!(
            Holder::new("vm-a", None),
            me,
            "each process its own instance"
        );
        assert_eq!(
            Holder::new("vm-a", Some("0.0.0.0:8081".parse().unwrap())).admin,
            None
        );
        assert_eq!(
            Holder::decode(b"vm-a"),
            Holder {
                node: "vm-a".to_owned(),
                instance: None,
                admin: None,
            }
        );
    }

    /// A presence key holds only what a key may hold, and two names never
    /// share one.
    #[test]
    fn presence_keys_escape_what_a_key_cannot_hold() {
        assert_eq!(presence_key("vm-a_1"), "node.vm-a_1");
        assert_eq!(presence_key("db.example.com"), "node.db=2Eexample=2Ecom");
        assert_eq!(presence_key("a b"), "node.a=20b");
        assert_ne!(presence_key("a.b"), presence_key("a=2Eb"));
    }
}
