//! What the store records: each durable commit, and the gauges set just
//! before a scrape (what each source holds, the files and the disk, whether
//! the store takes writes); and what the sweeper deleted.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::{Metrics, SourceGauges, StoreDisk};
use crate::metrics::labels::{KindLabel, SourceLabel, StoreFile, StoreFileLabel};
use crate::words::SweptKind;

impl Metrics {
    /// One durable commit of `jobs` jobs that took `took`.
    pub fn commit(&self, jobs: usize, took: std::time::Duration) {
        self.inner.commit_batch.observe(jobs as f64);
        self.inner.commit_seconds.observe(took.as_secs_f64());
    }

    /// The store's state of `source`, set just before a scrape.
    pub fn set_source_gauges(&self, source: &str, held: SourceGauges) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        let gauge = |family: &Family<SourceLabel, Gauge>, value: u64| {
            family
                .get_or_create(&label)
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        };
        gauge(&self.inner.pending, held.pending);
        gauge(&self.inner.retrying, held.retrying);
        gauge(&self.inner.held, held.held);
        gauge(&self.inner.dlq_size, held.dead);
        gauge(
            &self.inner.oldest_pending_seconds,
            held.oldest_pending.as_secs(),
        );
        gauge(&self.inner.quiet_seconds, held.quiet.as_secs());
    }

    /// The store's files and filesystem, set just before a scrape.
    pub fn set_store_disk(&self, disk: StoreDisk) {
        let bytes = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        // The runs have no disk series: written whole, their length is
        // their disk.
        for (file, size, on_disk) in [
            (
                StoreFile::Database,
                disk.database_bytes,
                Some(disk.database_disk_bytes),
            ),
            (StoreFile::Wal, disk.wal_bytes, Some(disk.wal_disk_bytes)),
            (StoreFile::DedupeRuns, disk.dedupe_runs_bytes, None),
        ] {
            let label = StoreFileLabel { file };
            self.inner
                .store_file_bytes
                .get_or_create(&label)
                .set(bytes(size));
            if let Some(on_disk) = on_disk {
                self.inner
                    .store_file_disk_bytes
                    .get_or_create(&label)
                    .set(bytes(on_disk));
            }
        }
        self.inner
            .dedupe_memory_bytes
            .set(bytes(disk.dedupe_memory_bytes));
        self.inner
            .filesystem_available_bytes
            .set(bytes(disk.filesystem_available_bytes));
        self.inner
            .filesystem_size_bytes
            .set(bytes(disk.filesystem_size_bytes));
    }

    /// Whether the store takes writes, set just before a scrape.
    pub fn set_store_writable(&self, writable: bool) {
        self.inner.store_writable.set(i64::from(writable));
    }

    pub fn swept(&self, kind: SweptKind, n: u64) {
        self.inner
            .swept
            .get_or_create(&KindLabel { kind })
            .inc_by(n);
    }
}
