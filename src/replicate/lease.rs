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

use std::sync::Mutex;
use std::time::Duration;

use async_nats::jetstream::kv::{self, CreateErrorKind, UpdateErrorKind};
use async_nats::jetstream::stream;

use super::publish::{ConnectError, StreamSettings, connect};

/// The key of the lease in its bucket.
const KEY: &str = "primary";

/// What a lease call found.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another node holds the key (it took it, or renewed it).
    #[error("the lease is {holder:?}'s")]
    Held { holder: String },
    /// The bucket did not answer.
    #[error("the lease bucket did not answer: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// One node's handle on the lease.
pub struct Lease {
    store: kv::Store,
    /// This node's name, the value it writes.
    node: String,
    /// The revision this node last wrote, while it holds the key.
    revision: Mutex<Option<u64>>,
    _client: async_nats::Client,
}

impl Lease {
    /// Connects and finds the bucket `<stream>_leader` (creating it with
    /// values that expire `lease` after they are written).
    pub async fn connect(
        settings: &StreamSettings,
        node: &str,
        lease: Duration,
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
        Ok(Lease {
            store,
            node: node.to_owned(),
            revision: Mutex::new(None),
            _client: client,
        })
    }

    /// Takes the key if no one holds it, or if it holds this node's name
    /// (this node restarted within a lease, or a renewal of its own landed
    /// after its answer timed out): node names are unique.
    pub async fn acquire(&self) -> Result<(), LeaseError> {
        match self.store.create(KEY, self.node.clone().into()).await {
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
    }

    /// After a write refused because the key is not as this node left it:
    /// `Ok` if it holds this node's name (its revision taken as this
    /// node's), `Held` with its holder if another's, taken again if it is
    /// gone (it lapsed and no one took it: no one was promoted).
    async fn own_or_held(&self) -> Result<(), LeaseError> {
        // A read during an election can be stale (the key looks gone while
        // it is there): a create that finds it reads it again. Only another
        // node's name in it is an answer of "held".
        for _ in 0..3 {
            match self.store.entry(KEY).await {
                Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                    if *entry.value == *self.node.as_bytes() {
                        self.held(Some(entry.revision));
                        return Ok(());
                    }
                    return Err(LeaseError::Held {
                        holder: String::from_utf8_lossy(&entry.value).into_owned(),
                    });
                }
                Ok(_) => match self.store.create(KEY, self.node.clone().into()).await {
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
        match self
            .store
            .update(KEY, self.node.clone().into(), revision)
            .await
        {
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

    /// Who holds the key now, if anyone.
    pub async fn holder(&self) -> Result<Option<String>, LeaseError> {
        match self.store.entry(KEY).await {
            Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                Ok(Some(String::from_utf8_lossy(&entry.value).into_owned()))
            }
            Ok(_) => Ok(None),
            Err(e) => Err(LeaseError::Unavailable(e.to_string())),
        }
    }

    /// Takes the key whoever holds it (`hookinbox promote`): the holder's
    /// next renewal fails and it steps down. Returns who held it.
    pub async fn take_over(&self) -> Result<Option<String>, LeaseError> {
        let before = self.holder().await?;
        let revision = self
            .store
            .put(KEY, self.node.clone().into())
            .await
            .map_err(|e| LeaseError::Unavailable(e.to_string()))?;
        self.held(Some(revision));
        Ok(before)
    }

    /// This node's name in the lease.
    pub fn node(&self) -> &str {
        &self.node
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
