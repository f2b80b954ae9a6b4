//! Snapshots: now and then the primary puts a consistent copy of its
//! database (the online backup, [`Store::snapshot_to`]) into the JetStream
//! object store bucket `<stream>_snapshots`, named by the last log frame it
//! holds and carrying where that frame is in the stream. Two are kept, and
//! the stream forgets every frame up to the older one's: neither grows
//! without bound. A new standby restores the newest and applies the
//! stream's frames after it.
//!
//! A copy is uploaded only once its last frame is shipped by this node: a
//! copy may hold batches the stream has not taken yet, and a primary
//! replaced meanwhile never ships them (another primary's frame of that
//! number follows instead).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_nats::jetstream::object_store::{self, ObjectMetadata, ObjectStore};
use async_nats::jetstream::stream;
use futures_util::StreamExt;

use super::publish::{ConnectError, LSN_HEADER, PART_HEADER, StreamSettings, connect, header};
use crate::store::{DB_FILE, Store, StoreError};

/// Snapshots kept; the stream keeps the frames after the older one.
const KEEP: usize = 2;
/// The object store's chunk: a message of at most this many bytes.
const CHUNK: usize = 256 << 10;
/// How long a copy's last frame may take to ship before the copy is
/// dropped (tried again at the next interval).
const SHIP_WAIT: Duration = Duration::from_secs(30);

/// One snapshot in the bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub name: String,
    /// The last log frame the copy holds.
    pub lsn: u64,
    /// The stream sequence of that frame's last message.
    pub stream_seq: u64,
    /// The database's tag.
    pub tag: u32,
    pub bytes: u64,
}

/// Why a snapshot was not taken, listed or restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("the snapshot bucket {bucket}: {detail}")]
    Bucket { bucket: String, detail: String },
    #[error("copying the database for a snapshot failed")]
    Store(#[from] StoreError),
    #[error("frame {lsn} was not shipped within {SHIP_WAIT:?}: no snapshot this time")]
    Unshipped { lsn: u64 },
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The bucket of one stream's snapshots, and the stream.
pub struct Snapshots {
    bucket: ObjectStore,
    name: String,
    stream: stream::Stream,
    client: async_nats::Client,
}

impl Snapshots {
    /// Connects and finds the bucket `<stream>_snapshots`, creating it with
    /// the stream's replicas. The stream must exist (its primary makes it).
    pub async fn connect(settings: &StreamSettings) -> Result<Snapshots, SnapshotError> {
        let (client, context) = connect(settings, "snapshots").await?;
        let name = format!("{}_snapshots", settings.stream);
        let failed = |e: &dyn std::fmt::Display| SnapshotError::Bucket {
            bucket: name.clone(),
            detail: e.to_string(),
        };
        // Tried for a budget: right after the NATS servers start, their
        // JetStream answers only once it has elected its leaders.
        let started = Instant::now();
        let (bucket, stream) = loop {
            let found = async {
                let bucket = match context.get_object_store(&name).await {
                    Ok(bucket) => bucket,
                    Err(_) => context
                        .create_object_store(object_store::Config {
                            bucket: name.clone(),
                            description: Some("hookinbox database snapshots".into()),
                            num_replicas: settings.replicas,
                            ..Default::default()
                        })
                        .await
                        .map_err(|e| failed(&e))?,
                };
                let stream = context
                    .get_stream(&settings.stream)
                    .await
                    .map_err(|e| failed(&format!("cannot find its stream: {e}")))?;
                Ok::<_, SnapshotError>((bucket, stream))
            };
            match found.await {
                Ok(found) => break found,
                Err(e) if started.elapsed() >= settings.budget => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        };
        Ok(Snapshots {
            bucket,
            name,
            stream,
            client,
        })
    }

    fn failed(&self, e: impl std::fmt::Display) -> SnapshotError {
        SnapshotError::Bucket {
            bucket: self.name.clone(),
            detail: e.to_string(),
        }
    }

    /// The snapshots in the bucket, oldest first.
    pub async fn list(&self) -> Result<Vec<Snapshot>, SnapshotError> {
        let mut found = Vec::new();
        let mut listing = self.bucket.list().await.map_err(|e| self.failed(e))?;
        while let Some(info) = listing.next().await {
            let info = info.map_err(|e| self.failed(e))?;
            if info.deleted {
                continue;
            }
            let number = |key: &str| info.metadata.get(key).and_then(|v| v.parse::<u64>().ok());
            let tag = info
                .metadata
                .get("tag")
                .and_then(|t| u32::from_str_radix(t, 16).ok());
            match (number("lsn"), number("stream_seq"), tag) {
                (Some(lsn), Some(stream_seq), Some(tag)) => found.push(Snapshot {
                    name: info.name.clone(),
                    lsn,
                    stream_seq,
                    tag,
                    bytes: info.size as u64,
                }),
                _ => {
                    tracing::warn!(object = %info.name, bucket = %self.name, "not a hookinbox snapshot; ignored")
                }
            }
        }
        found.sort_by_key(|s| s.lsn);
        Ok(found)
    }

    /// Copies `store` into `scratch_dir`, waits until the copy's last frame
    /// is shipped, uploads it, and prunes: the snapshots past the last
    /// [`KEEP`] are deleted and the stream forgets the frames the older
    /// kept one holds. `None` when the store holds nothing newer than
    /// `after` (the last snapshot's frame).
    pub async fn take(
        &self,
        store: &Store,
        scratch_dir: &Path,
        after: u64,
    ) -> Result<Option<Snapshot>, SnapshotError> {
        let path = scratch_dir.join("snapshot.redb.part");
        let file_err = |path: &Path| {
            let path = path.to_owned();
            move |source| SnapshotError::File { path, source }
        };
        let _ = tokio::fs::remove_file(&path).await;
        let copied = {
            let (store, target) = (store.clone(), path.clone());
            tokio::task::spawn_blocking(move || store.snapshot_to(&target))
                .await
                .map_err(|e| SnapshotError::File {
                    path: path.clone(),
                    source: std::io::Error::other(e),
                })?
        };
        let result = async {
            let lsn = copied?;
            if lsn <= after {
                return Ok(None);
            }
            let waited = Instant::now();
            while store.shipped() < lsn {
                if waited.elapsed() > SHIP_WAIT {
                    return Err(SnapshotError::Unshipped { lsn });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let stream_seq = self
                .seq_of(lsn)
                .await?
                .ok_or_else(|| self.failed(format!("frame {lsn} is not in the stream")))?;
            let tag = store.tag();
            let metadata = HashMap::from([
                ("lsn".to_owned(), lsn.to_string()),
                ("stream_seq".to_owned(), stream_seq.to_string()),
                ("tag".to_owned(), format!("{tag:08x}")),
            ]);
            let mut file = tokio::fs::File::open(&path)
                .await
                .map_err(file_err(&path))?;
            let info = self
                .bucket
                .put(
                    ObjectMetadata {
                        name: format!("lsn-{lsn:020}"),
                        description: Some(format!("hookinbox database up to frame {lsn}")),
                        chunk_size: Some(CHUNK),
                        metadata,
                        headers: None,
                    },
                    &mut file,
                )
                .await
                .map_err(|e| self.failed(e))?;
            Ok(Some(Snapshot {
                name: info.name,
                lsn,
                stream_seq,
                tag,
                bytes: info.size as u64,
            }))
        }
        .await;
        let _ = tokio::fs::remove_file(&path).await;
        if result.as_ref().is_ok_and(Option::is_some) {
            self.prune().await?;
        }
        result
    }

    /// Deletes the snapshots past the newest [`KEEP`], the chunks of
    /// uploads that never finished, and the stream's frames up to the
    /// older kept snapshot's (but never the newest snapshot's last frame).
    async fn prune(&self) -> Result<(), SnapshotError> {
        let snapshots = self.list().await?;
        let cut = snapshots.len().saturating_sub(KEEP);
        for old in &snapshots[..cut] {
            self.bucket
                .delete(&old.name)
                .await
                .map_err(|e| self.failed(e))?;
        }
        let (Some(oldest), Some(newest)) = (snapshots.get(cut), snapshots.last()) else {
            return Ok(());
        };
        self.forget_orphan_chunks().await?;
        let mut stream = self.stream.clone();
        let first = stream
            .info()
            .await
            .map_err(|e| self.failed(e))?
            .state
            .first_sequence;
        // The newest snapshot's last frame stays: the stream then always
        // says where it ends and whose it is, idle or not.
        let keep_from = (oldest.stream_seq + 1).min(newest.stream_seq);
        if first < keep_from {
            stream
                .purge()
                .sequence(keep_from)
                .await
                .map_err(|e| self.failed(format!("purging the stream: {e}")))?;
            tracing::info!(
                up_to = keep_from - 1,
                frame = oldest.lsn,
                "the replication stream forgot the frames its older snapshot holds"
            );
        }
        Ok(())
    }

    /// Purges the chunks no snapshot names: an upload cut short (a stop, a
    /// lost connection) leaves its chunks behind without a name.
    async fn forget_orphan_chunks(&self) -> Result<(), SnapshotError> {
        let mut live = std::collections::HashSet::new();
        let mut listing = self.bucket.list().await.map_err(|e| self.failed(e))?;
        while let Some(info) = listing.next().await {
            let info = info.map_err(|e| self.failed(e))?;
            if !info.deleted {
                live.insert(info.nuid);
            }
        }
        let objects = self.bucket_stream().await.map_err(|e| self.failed(e))?;
        let prefix = format!("$O.{}.C.", self.name);
        let mut subjects = objects
            .info_with_subjects(format!("{prefix}>"))
            .await
            .map_err(|e| self.failed(e))?;
        let mut orphans = Vec::new();
        while let Some(subject) = subjects.next().await {
            let (subject, _) = subject.map_err(|e| self.failed(e))?;
            if subject
                .strip_prefix(&prefix)
                .is_some_and(|nuid| !live.contains(nuid))
            {
                orphans.push(subject);
            }
        }
        for subject in orphans {
            objects
                .purge()
                .filter(&subject)
                .await
                .map_err(|e| self.failed(e))?;
            tracing::info!(%subject, "purged the chunks of a snapshot upload that never finished");
        }
        Ok(())
    }

    async fn bucket_stream(
        &self,
    ) -> Result<stream::Stream, async_nats::jetstream::context::GetStreamError> {
        let context = async_nats::jetstream::new(self.client.clone());
        context.get_stream(format!("OBJ_{}", self.name)).await
    }

    /// The stream sequence of frame `lsn`'s last message, found by halving
    /// the stream (frame numbers grow with the sequence); `None` if the
    /// stream does not hold it.
    async fn seq_of(&self, lsn: u64) -> Result<Option<u64>, SnapshotError> {
        let mut stream = self.stream.clone();
        let info = stream.info().await.map_err(|e| self.failed(e))?;
        let (first, last) = (info.state.first_sequence, info.state.last_sequence);
        if info.state.messages == 0 {
            return Ok(None);
        }
        let frame_at = async |seq: u64| -> Result<(u64, bool), SnapshotError> {
            let message = self
                .stream
                .get_raw_message(seq)
                .await
                .map_err(|e| self.failed(format!("reading message {seq}: {e}")))?;
            let header = |name: &str| header(&message.headers, name);
            let last_part = match header(PART_HEADER).split_once('/') {
                Some((i, n)) => i == n,
                None => true,
            };
            Ok((header(LSN_HEADER).parse().unwrap_or(0), last_part))
        };
        // The first message whose frame is past `lsn`.
        let (mut low, mut high) = (first, last + 1);
        while low < high {
            let middle = low + (high - low) / 2;
            if frame_at(middle).await?.0 > lsn {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        if low == first {
            return Ok(None);
        }
        match frame_at(low - 1).await? {
            (found, true) if found == lsn => Ok(Some(low - 1)),
            _ => Ok(None),
        }
    }

    /// Restores the newest snapshot as `data_dir`'s database file (which
    /// must not exist yet); `None` when the bucket holds none.
    pub async fn restore_newest(&self, data_dir: &Path) -> Result<Option<Snapshot>, SnapshotError> {
        let Some(newest) = self.list().await?.pop() else {
            return Ok(None);
        };
        let started = Instant::now();
        let part = data_dir.join(format!("{DB_FILE}.restoring"));
        let target = data_dir.join(DB_FILE);
        let file_err = |path: &Path| {
            let path = path.to_owned();
            move |source| SnapshotError::File { path, source }
        };
        tokio::fs::create_dir_all(data_dir)
            .await
            .map_err(file_err(data_dir))?;
        let mut object = self
            .bucket
            .get(&newest.name)
            .await
            .map_err(|e| self.failed(e))?;
        {
            use std::os::unix::fs::OpenOptionsExt;
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&part)
                .map_err(file_err(&part))?;
            let mut file = tokio::fs::File::from_std(file);
            tokio::io::copy(&mut object, &mut file)
                .await
                .map_err(file_err(&part))?;
            file.sync_all().await.map_err(file_err(&part))?;
        }
        tokio::fs::rename(&part, &target)
            .await
            .map_err(file_err(&target))?;
        std::fs::File::open(data_dir)
            .and_then(|dir| dir.sync_all())
            .map_err(file_err(data_dir))?;
        tracing::info!(
            snapshot = %newest.name,
            bytes = newest.bytes,
            took_ms = started.elapsed().as_millis() as u64,
            "restored the newest snapshot; applying the stream's frames after it"
        );
        Ok(Some(newest))
    }
}

/// The primary's snapshots, one every `every` while the store has new
/// frames, until `stop`. A failed one is logged and tried again at the
/// next interval: the stream keeps its frames meanwhile.
pub async fn keep_taking(
    snapshots: Snapshots,
    store: Store,
    scratch_dir: PathBuf,
    every: Duration,
    stop: tokio_util::sync::CancellationToken,
    metrics: crate::metrics::Metrics,
) {
    // Current as of now: the first is due an interval from here.
    metrics.snapshot_current(std::time::SystemTime::now());
    let mut after = match snapshots.list().await {
        Ok(list) => list.last().map_or(0, |s| s.lsn),
        Err(e) => {
            tracing::warn!(error = %crate::store::Report(&e), "cannot list the snapshots");
            0
        }
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => return,
        }
        let started = Instant::now();
        let taken = tokio::select! {
            taken = snapshots.take(&store, &scratch_dir, after) => taken,
            () = stop.cancelled() => return,
        };
        match taken {
            Ok(Some(snapshot)) => {
                after = snapshot.lsn;
                metrics.snapshot_current(std::time::SystemTime::now());
                tracing::info!(
                    snapshot = %snapshot.name,
                    bytes = snapshot.bytes,
                    stream_seq = snapshot.stream_seq,
                    took_ms = started.elapsed().as_millis() as u64,
                    "snapshot taken"
                );
            }
            // Nothing new since the last: that one is current.
            Ok(None) => metrics.snapshot_current(std::time::SystemTime::now()),
            Err(e) => {
                tracing::warn!(error = %crate::store::Report(&e), "no snapshot this time; trying again at the next interval")
            }
        }
    }
}
