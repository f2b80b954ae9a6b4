//! The `Metrics` handle and its typed methods: what each module records
//! (an event received, an attempt, a circuit change), the gauges set before
//! a scrape, the series declared at 0 at start, and the counts stats reads.
//!
//! Owns which families and side tables one happening touches, so a caller
//! makes one call and the totals, budgets and families agree. Refuses to
//! name a family (`registry` does) or to format text (`exposition` does).
//!
//! This file holds the handle, the series declared at start, the totals and
//! the encoding; the typed methods are in one file per area of the product:
//! `listener`, `ingest`, `delivery`, `store` (with the sweeper) and
//! `operations` (alerts, replays, ignores, admin refusals), `keys`
//! (idempotency keys) and `telemetry` (the trace exporter).

mod delivery;
mod ingest;
mod keys;
mod listener;
mod operations;
pub use operations::StreamOpen;
mod replication;
pub use replication::StandbyLag;
mod store;
mod telemetry;

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::budget::Budget;
use super::exposition::{Exposition, to_prometheus_text};
use super::labels::{
    AlertLabels, CircuitLabels, DestinationLabel, DriftLabels, KeyClaimLabels, KindLabel,
    ListenerLabel, NamespaceLabel, OutcomeLabels, ReasonLabel, ReconcileRunLabels,
    ReconciledLabels, RejectedLabels, SecretLabels, SourceLabel, StoreFile, StoreFileLabel,
};
use super::tally::{Recent, Tally, Totals, TypeTally};
use crate::words::{
    AdminReason, AlertKind, AlertStatus, AttemptOutcome, Circuit, DriftChange, ReconcileOutcome,
    ReconciledHow, RejectReason, SweptKind, UNKNOWN_SOURCE,
};

/// The handle every module records through: a clone shares the registry
/// (one `Arc`). Built by `Metrics::new` (`registry`).
#[derive(Clone)]
pub struct Metrics {
    pub(super) inner: Arc<Inner>,
}

/// The families and side tables behind every clone of a [`Metrics`].
pub(super) struct Inner {
    pub(super) registry: Mutex<Registry>,
    pub(super) open_connections: Family<ListenerLabel, Gauge>,
    pub(super) connection_limit_waits: Family<ListenerLabel, Counter>,
    pub(super) connections_evicted: Family<ListenerLabel, Counter>,
    pub(super) tls_handshake_failures: Family<ListenerLabel, Counter>,
    pub(super) received: Family<SourceLabel, Counter>,
    pub(super) duplicates: Family<SourceLabel, Counter>,
    pub(super) rejected: Family<RejectedLabels, Counter>,
    pub(super) ack_seconds: Family<SourceLabel, Histogram, fn() -> Histogram>,
    pub(super) attempts: Family<OutcomeLabels, Counter>,
    pub(super) delivered: Family<DestinationLabel, Counter>,
    pub(super) dead_lettered: Family<DestinationLabel, Counter>,
    pub(super) circuit: Family<CircuitLabels, Counter>,
    pub(super) attempt_seconds: Family<DestinationLabel, Histogram, fn() -> Histogram>,
    pub(super) replayed: Family<SourceLabel, Counter>,
    pub(super) ignored: Family<SourceLabel, Counter>,
    pub(super) admin_rejected: Family<ReasonLabel, Counter>,
    pub(super) swept: Family<KindLabel, Counter>,
    pub(super) received_to_delivered: Family<DestinationLabel, Histogram, fn() -> Histogram>,
    pub(super) commit_batch: Histogram,
    pub(super) commit_seconds: Histogram,
    pub(super) pending: Family<SourceLabel, Gauge>,
    pub(super) retrying: Family<SourceLabel, Gauge>,
    pub(super) dlq_size: Family<SourceLabel, Gauge>,
    pub(super) oldest_pending_seconds: Family<SourceLabel, Gauge>,
    pub(super) quiet_seconds: Family<SourceLabel, Gauge>,
    pub(super) expect_within_seconds: Family<SourceLabel, Gauge>,
    pub(super) circuit_state: Family<DestinationLabel, Gauge>,
    pub(super) signature_matches: Family<SecretLabels, Counter>,
    pub(super) payload_drift: Family<DriftLabels, Counter>,
    pub(super) drift_skipped: Family<SourceLabel, Counter>,
    pub(super) reconcile_runs: Family<ReconcileRunLabels, Counter>,
    pub(super) reconciled: Family<ReconciledLabels, Counter>,
    pub(super) reconcile_last_success: Family<SourceLabel, Gauge>,
    pub(super) subscription_active: Family<SourceLabel, Gauge>,
    pub(super) alerts: Family<AlertLabels, Counter>,
    pub(super) held: Family<SourceLabel, Gauge>,
    pub(super) filtered: Family<SourceLabel, Counter>,
    pub(super) store_file_bytes: Family<StoreFileLabel, Gauge>,
    pub(super) store_file_disk_bytes: Family<StoreFileLabel, Gauge>,
    pub(super) filesystem_available_bytes: Gauge,
    pub(super) filesystem_size_bytes: Gauge,
    pub(super) store_writable: Gauge,
    pub(super) key_claims: Family<KeyClaimLabels, Counter>,
    pub(super) key_leases_expired: Family<NamespaceLabel, Counter>,
    pub(super) keys_stored: Gauge,
    pub(super) replication_role: Gauge,
    pub(super) replication_lease_holder: Family<crate::metrics::labels::NodeLabel, Gauge>,
    pub(super) replication_lease_renewed: Gauge,
    pub(super) replication_frames_behind: Gauge,
    pub(super) replication_lag_seconds: Gauge,
    pub(super) replication_snapshot_ok: Gauge,
    pub(super) replication_snapshot_interval: Gauge,
    pub(super) replication_publish_failures: Counter,
    pub(super) replication_frame_bytes: Counter,
    pub(super) replication_sent_bytes: Counter,
    pub(super) replication_follow_failures: Counter,
    pub(super) telemetry_spans_ended: Counter,
    pub(super) telemetry_spans_exported: Counter,
    pub(super) telemetry_spans_failed: Counter,
    pub(super) dedupe_memory_bytes: Gauge,
    pub(super) event_streams: Gauge,
    /// Sums over every source, for the log's periodic summary.
    pub(super) totals: Totals,
    /// How many refusals and dead letters may be logged at warn this minute.
    pub(super) loud_rejections: Budget,
    pub(super) loud_dead_letters: Budget,
    /// Label pairs `rejected` has seen, so stats can list them.
    pub(super) rejected_seen: Mutex<std::collections::BTreeSet<(String, RejectReason)>>,
    /// The last acks per source, for stats' p50/p99.
    pub(super) recent_acks: Recent,
    pub(super) by_type: TypeTally,
    /// The last received → delivered latencies per source, likewise.
    pub(super) recent_deliveries: Recent,
}

/// A source as `/metrics` declares it before anything happened, so every
/// series an alert rule reads exists at 0 (not "no data").
pub struct Declared<'a> {
    pub name: &'a str,
    /// Its destinations' names: their delivery and circuit series exist too.
    pub destinations: Vec<&'a str>,
    /// Its `expect_within`, a constant series for alert rules to compare with.
    pub expect_within: Option<std::time::Duration>,
    /// It has `[source.reconcile]`: its pass series exist.
    pub reconciled: bool,
}

/// What the store holds of one source, set just before a scrape.
#[derive(Clone, Copy, Debug, Default)]
pub struct SourceGauges {
    /// Waiting for delivery, retrying included.
    pub pending: u64,
    pub retrying: u64,
    pub held: u64,
    pub dead: u64,
    pub oldest_pending: std::time::Duration,
    /// Since its newest event was received (or hookinbox started).
    pub quiet: std::time::Duration,
}

/// The store's files and the room left beside them, set before a scrape.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreDisk {
    pub database_bytes: u64,
    pub database_disk_bytes: u64,
    pub wal_bytes: u64,
    pub wal_disk_bytes: u64,
    pub dedupe_runs_bytes: u64,
    pub dedupe_memory_bytes: u64,
    pub filesystem_available_bytes: u64,
    pub filesystem_size_bytes: u64,
}

impl Metrics {
    /// Creates every series of the configured sources at 0: each reason a
    /// request can be refused for, each attempt outcome and circuit state of
    /// a destination, each alert kind, sweep kind and admin refusal. A
    /// counter that appears only at its first increment reads "no data" to
    /// an alert rule, and `rate()` misses that first increment.
    pub fn declare(&self, sources: &[Declared<'_>]) {
        let inner = &*self.inner;
        let _ = inner.rejected.get_or_create(&RejectedLabels {
            source: UNKNOWN_SOURCE.to_owned(),
            reason: RejectReason::UnknownSource,
        });
        for source in sources {
            let label = SourceLabel {
                source: source.name.to_owned(),
            };
            for family in [&inner.received, &inner.duplicates] {
                let _ = family.get_or_create(&label);
            }
            let _ = inner.ack_seconds.get_or_create(&label);
            let _ = inner.drift_skipped.get_or_create(&label);
            for &change in DriftChange::ALL {
                let _ = inner.payload_drift.get_or_create(&DriftLabels {
                    source: source.name.to_owned(),
                    change,
                });
            }
            for &reason in RejectReason::ALL {
                if reason != RejectReason::UnknownSource {
                    let _ = inner.rejected.get_or_create(&RejectedLabels {
                        source: source.name.to_owned(),
                        reason,
                    });
                }
            }
            for family in [
                &inner.held,
                &inner.pending,
                &inner.retrying,
                &inner.dlq_size,
                &inner.oldest_pending_seconds,
                &inner.quiet_seconds,
            ] {
                let _ = family.get_or_create(&label);
            }
            if source.reconciled {
                let _ = inner.reconcile_last_success.get_or_create(&label);
                for &outcome in ReconcileOutcome::ALL {
                    let _ = inner.reconcile_runs.get_or_create(&ReconcileRunLabels {
                        source: source.name.to_owned(),
                        outcome,
                    });
                }
                for &how in ReconciledHow::ALL {
                    let _ = inner.reconciled.get_or_create(&ReconciledLabels {
                        source: source.name.to_owned(),
                        how,
                    });
                }
            }
            if let Some(within) = source.expect_within {
                inner
                    .expect_within_seconds
                    .get_or_create(&label)
                    .set(i64::try_from(within.as_secs()).unwrap_or(i64::MAX));
            }
            if !source.destinations.is_empty() {
                for family in [&inner.replayed, &inner.ignored, &inner.filtered] {
                    let _ = family.get_or_create(&label);
                }
            }
            for &destination in &source.destinations {
                let to = DestinationLabel::new(source.name, destination);
                let _ = inner.circuit_state.get_or_create(&to);
                for family in [&inner.delivered, &inner.dead_lettered] {
                    let _ = family.get_or_create(&to);
                }
                let _ = inner.attempt_seconds.get_or_create(&to);
                let _ = inner.received_to_delivered.get_or_create(&to);
                for &outcome in AttemptOutcome::ALL {
                    let _ = inner.attempts.get_or_create(&OutcomeLabels {
                        source: source.name.to_owned(),
                        destination: destination.to_owned(),
                        outcome,
                    });
                }
                for &state in Circuit::ALL {
                    let _ = inner.circuit.get_or_create(&CircuitLabels {
                        source: source.name.to_owned(),
                        destination: destination.to_owned(),
                        state,
                    });
                }
            }
        }
        for &kind in AlertKind::ALL {
            for &status in AlertStatus::ALL {
                for sent in [true, false] {
                    let _ = inner
                        .alerts
                        .get_or_create(&AlertLabels { kind, status, sent });
                }
            }
        }
        for &kind in SweptKind::ALL {
            let _ = inner.swept.get_or_create(&KindLabel { kind });
        }
        for &reason in AdminReason::ALL {
            let _ = inner.admin_rejected.get_or_create(&ReasonLabel { reason });
        }
        for &file in StoreFile::ALL {
            let _ = inner
                .store_file_bytes
                .get_or_create(&StoreFileLabel { file });
        }
        for file in [StoreFile::Database, StoreFile::Wal] {
            let _ = inner
                .store_file_disk_bytes
                .get_or_create(&StoreFileLabel { file });
        }
    }

    /// Counts since the start over every source.
    pub fn tally(&self) -> Tally {
        let t = &self.inner.totals;
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        Tally {
            received: get(&t.received),
            duplicates: get(&t.duplicates),
            rejected: get(&t.rejected),
            delivered: get(&t.delivered),
            failed_attempts: get(&t.failed_attempts),
            dead_lettered: get(&t.dead_lettered),
            quieted: self.inner.loud_rejections.quieted() + self.inner.loud_dead_letters.quieted(),
        }
    }

    /// Every metric, in `format`.
    pub fn encode(&self, format: Exposition) -> String {
        let mut out = String::new();
        let registry = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        match format {
            Exposition::OpenMetrics => out,
            Exposition::Prometheus => to_prometheus_text(&out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exposition lines that start with `series`, e.g. `hookinbox_swept_total{`,
    /// sorted: a family prints its series in hash order.
    fn lines<'a>(text: &'a str, series: &str) -> Vec<&'a str> {
        let mut lines: Vec<&str> = text.lines().filter(|l| l.starts_with(series)).collect();
        lines.sort_unstable();
        lines
    }

    #[test]
    fn enum_labels_render_as_the_published_values() {
        let metrics = Metrics::new();
        metrics.swept(SweptKind::DeadOrIgnored, 2);
        metrics.alert(AlertKind::PendingAge, AlertStatus::Resolved, false);
        metrics.admin_rejected(AdminReason::StoreUnavailable);
        let _ = metrics.rejected(UNKNOWN_SOURCE, RejectReason::UnknownSource);
        let _ = metrics.rejected("shop", RejectReason::StaleTimestamp);
        let shop = DestinationLabel::new("shop", "shop.app");
        metrics.attempt(&shop, AttemptOutcome::RetryableStatus, Default::default());
        metrics.circuit(&shop, Circuit::HalfOpen);
        metrics.set_circuit_state(&shop, Circuit::Open);
        let text = metrics.encode(Exposition::OpenMetrics);
        assert_eq!(
            lines(&text, "hookinbox_delivery_attempts_total{"),
            [
                "hookinbox_delivery_attempts_total{source=\"shop\",destination=\"shop.app\",outcome=\"retryable_status\"} 1"
            ]
        );
        assert_eq!(
            lines(&text, "hookinbox_circuit_transitions_total{"),
            [
                "hookinbox_circuit_transitions_total{source=\"shop\",destination=\"shop.app\",state=\"half_open\"} 1"
            ]
        );
        // A listener's label is its `as_str`, the logs' word. Pinned:
        // changing it renames published series.
        assert_eq!(
            lines(&text, "hookinbox_open_connections{"),
            [
                "hookinbox_open_connections{listener=\"admin\"} 0",
                "hookinbox_open_connections{listener=\"admin_socket\"} 0",
                "hookinbox_open_connections{listener=\"ingest\"} 0",
            ]
        );
        assert_eq!(
            lines(&text, "hookinbox_circuit_state{"),
            ["hookinbox_circuit_state{source=\"shop\",destination=\"shop.app\"} 2"]
        );
        assert_eq!(
            lines(&text, "hookinbox_rejected_total{"),
            [
                "hookinbox_rejected_total{source=\"(unknown)\",reason=\"unknown_source\"} 1",
                "hookinbox_rejected_total{source=\"shop\",reason=\"stale_timestamp\"} 1",
            ]
        );
        assert_eq!(
            lines(&text, "hookinbox_swept_total{"),
            ["hookinbox_swept_total{kind=\"dead_or_ignored\"} 2"]
        );
        assert_eq!(
            lines(&text, "hookinbox_alerts_total{"),
            ["hookinbox_alerts_total{kind=\"pending_age\",status=\"resolved\",sent=\"false\"} 1"]
        );
        assert_eq!(
            lines(&text, "hookinbox_admin_rejected_total{"),
            ["hookinbox_admin_rejected_total{reason=\"store_unavailable\"} 1"]
        );
    }
}
