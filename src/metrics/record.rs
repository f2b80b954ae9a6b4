//! The `Metrics` handle and its typed methods: what each module records
//! (an event received, an attempt, a circuit change), the gauges set before
//! a scrape, the series declared at 0 at start, and the counts stats reads.
//!
//! Owns which families and side tables one happening touches, so a caller
//! makes one call and the totals, budgets and families agree. Refuses to
//! name a family (`registry` does) or to format text (`exposition` does).

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::budget::Budget;
use super::exposition::{Exposition, to_prometheus_text};
use super::labels::{
    AdminReason, AlertKind, AlertLabels, AlertStatus, AttemptOutcome, Circuit, CircuitLabels,
    DestinationLabel, KindLabel, Listener, ListenerLabel, OutcomeLabels, ReasonLabel, RejectReason,
    RejectedLabels, SourceLabel, StoreFile, StoreFileLabel, SweptKind, UNKNOWN_SOURCE,
};
use super::tally::{Recent, Tally, Totals, TypeTally};

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
    pub(super) circuit_state: Family<DestinationLabel, Gauge>,
    pub(super) alerts: Family<AlertLabels, Counter>,
    pub(super) held: Family<SourceLabel, Gauge>,
    pub(super) filtered: Family<SourceLabel, Counter>,
    pub(super) store_file_bytes: Family<StoreFileLabel, Gauge>,
    pub(super) filesystem_available_bytes: Gauge,
    pub(super) filesystem_size_bytes: Gauge,
    pub(super) store_writable: Gauge,
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
}

/// The store's files and the room left beside them, set before a scrape.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreDisk {
    pub database_bytes: u64,
    pub wal_bytes: u64,
    pub filesystem_available_bytes: u64,
    pub filesystem_size_bytes: u64,
}

impl Metrics {
    /// A connection opened (`+1`) or closed (`-1`) on `listener`.
    pub fn connection(&self, listener: Listener, delta: i64) {
        self.inner
            .open_connections
            .get_or_create(&ListenerLabel { listener })
            .inc_by(delta);
    }

    pub fn tls_handshake_failed(&self, listener: Listener) {
        self.inner
            .tls_handshake_failures
            .get_or_create(&ListenerLabel { listener })
            .inc();
    }

    /// A waiting connection was closed to admit a new one.
    pub fn connection_evicted(&self, listener: Listener) {
        self.inner
            .connections_evicted
            .get_or_create(&ListenerLabel { listener })
            .inc();
    }

    pub fn connection_limit_wait(&self, listener: Listener) {
        self.inner
            .connection_limit_waits
            .get_or_create(&ListenerLabel { listener })
            .inc();
    }

    /// A new event of `event_type` (`store::NO_TYPE` for none) stored.
    pub fn received(&self, source: &str, event_type: &str, ack: std::time::Duration) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.received.get_or_create(&label).inc();
        Totals::add(&self.inner.totals.received);
        self.inner.by_type.count(source, event_type, false);
        self.inner
            .ack_seconds
            .get_or_create(&label)
            .observe(ack.as_secs_f64());
        self.inner.recent_acks.remember(source, ack);
    }

    /// p50 and p99 of the last acks of `source`, in ms.
    pub fn recent_ack_ms(&self, source: &str) -> Option<(f64, f64)> {
        self.inner.recent_acks.percentiles(source)
    }

    /// p50 and p99 of `source`'s last received → delivered latencies, in ms.
    pub fn recent_delivery_ms(&self, source: &str) -> Option<(f64, f64)> {
        self.inner.recent_deliveries.percentiles(source)
    }

    /// Every (reason, count) of `source`'s rejections since start, in the
    /// order of the reasons' text.
    pub fn rejected_by_reason(&self, source: &str) -> Vec<(RejectReason, u64)> {
        let seen = self
            .inner
            .rejected_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut counts: Vec<(RejectReason, u64)> = seen
            .into_iter()
            .filter(|(s, _)| s == source)
            .map(|(s, r)| (r, self.rejected_count(&s, r)))
            .collect();
        counts.sort_by_key(|(r, _)| r.as_str());
        counts
    }

    /// A repeat of a stored event of `event_type` answered as a duplicate.
    pub fn duplicate(&self, source: &str, event_type: &str, ack: std::time::Duration) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.duplicates.get_or_create(&label).inc();
        Totals::add(&self.inner.totals.duplicates);
        self.inner.by_type.count(source, event_type, true);
        self.inner
            .ack_seconds
            .get_or_create(&label)
            .observe(ack.as_secs_f64());
        self.inner.recent_acks.remember(source, ack);
    }

    /// `source` is the configured name, or [`UNKNOWN_SOURCE`]. Returns
    /// whether the refusal's log line may be loud (within this minute's
    /// [`Budget`]).
    #[must_use = "says at which level to log the refusal"]
    pub fn rejected(&self, source: &str, reason: RejectReason) -> bool {
        Totals::add(&self.inner.totals.rejected);
        self.inner
            .rejected_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((source.to_owned(), reason));
        self.inner
            .rejected
            .get_or_create(&RejectedLabels {
                source: source.to_owned(),
                reason,
            })
            .inc();
        self.inner.loud_rejections.take()
    }

    pub fn attempt(
        &self,
        to: &DestinationLabel,
        outcome: AttemptOutcome,
        took: std::time::Duration,
    ) {
        if outcome != AttemptOutcome::Delivered {
            Totals::add(&self.inner.totals.failed_attempts);
        }
        self.inner
            .attempts
            .get_or_create(&OutcomeLabels {
                source: to.source.clone(),
                destination: to.destination.clone(),
                outcome,
            })
            .inc();
        self.inner
            .attempt_seconds
            .get_or_create(to)
            .observe(took.as_secs_f64());
    }

    pub fn delivered(&self, to: &DestinationLabel, since_received: std::time::Duration) {
        self.inner.delivered.get_or_create(to).inc();
        Totals::add(&self.inner.totals.delivered);
        self.inner
            .received_to_delivered
            .get_or_create(to)
            .observe(since_received.as_secs_f64());
        self.inner
            .recent_deliveries
            .remember(&to.source, since_received);
    }

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
    }

    /// The store's files and filesystem, set just before a scrape.
    pub fn set_store_disk(&self, disk: StoreDisk) {
        let bytes = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        for (file, size) in [
            (StoreFile::Database, disk.database_bytes),
            (StoreFile::Wal, disk.wal_bytes),
        ] {
            self.inner
                .store_file_bytes
                .get_or_create(&StoreFileLabel { file })
                .set(bytes(size));
        }
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
            ] {
                let _ = family.get_or_create(&label);
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

    pub fn alert(&self, kind: AlertKind, status: AlertStatus, sent: bool) {
        self.inner
            .alerts
            .get_or_create(&AlertLabels { kind, status, sent })
            .inc();
    }

    pub fn set_circuit_state(&self, to: &DestinationLabel, state: Circuit) {
        self.inner
            .circuit_state
            .get_or_create(to)
            .set(state.level());
    }

    /// A new event the destination's filter did not take.
    pub fn filtered(&self, source: &str) {
        self.inner
            .filtered
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .inc();
    }

    /// Returns whether the dead letter's log line may be loud (within this
    /// minute's [`Budget`]).
    #[must_use = "says at which level to log the dead letter"]
    pub fn dead_lettered(&self, to: &DestinationLabel) -> bool {
        self.inner.dead_lettered.get_or_create(to).inc();
        Totals::add(&self.inner.totals.dead_lettered);
        self.inner.loud_dead_letters.take()
    }

    pub fn circuit(&self, to: &DestinationLabel, state: Circuit) {
        self.inner
            .circuit
            .get_or_create(&CircuitLabels {
                source: to.source.clone(),
                destination: to.destination.clone(),
                state,
            })
            .inc();
    }

    pub fn replayed(&self, source: &str) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.replayed.get_or_create(&label).inc();
    }

    pub fn ignored(&self, source: &str) {
        let label = SourceLabel {
            source: source.to_owned(),
        };
        self.inner.ignored.get_or_create(&label).inc();
    }

    pub fn admin_rejected(&self, reason: AdminReason) {
        self.inner
            .admin_rejected
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }

    pub fn swept(&self, kind: SweptKind, n: u64) {
        self.inner
            .swept
            .get_or_create(&KindLabel { kind })
            .inc_by(n);
    }

    pub fn admin_rejected_count(&self, reason: AdminReason) -> u64 {
        self.inner
            .admin_rejected
            .get_or_create(&ReasonLabel { reason })
            .get()
    }

    /// Attempts at `destination` (a source's own is named after it).
    pub fn attempt_count(&self, source: &str, destination: &str, outcome: AttemptOutcome) -> u64 {
        self.inner
            .attempts
            .get_or_create(&OutcomeLabels {
                source: source.to_owned(),
                destination: destination.to_owned(),
                outcome,
            })
            .get()
    }

    pub fn circuit_count(&self, source: &str, destination: &str, state: Circuit) -> u64 {
        self.inner
            .circuit
            .get_or_create(&CircuitLabels {
                source: source.to_owned(),
                destination: destination.to_owned(),
                state,
            })
            .get()
    }

    /// (event type, received, duplicates) of `source` since the start.
    pub fn by_type(&self, source: &str) -> Vec<(String, u64, u64)> {
        self.inner.by_type.of(source)
    }

    pub fn received_count(&self, source: &str) -> u64 {
        self.inner
            .received
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .get()
    }

    pub fn duplicate_count(&self, source: &str) -> u64 {
        self.inner
            .duplicates
            .get_or_create(&SourceLabel {
                source: source.to_owned(),
            })
            .get()
    }

    pub fn rejected_count(&self, source: &str, reason: RejectReason) -> u64 {
        self.inner
            .rejected
            .get_or_create(&RejectedLabels {
                source: source.to_owned(),
                reason,
            })
            .get()
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
        // `Listener` derives its encoding, which prints the variant's name,
        // not its `as_str` (the logs' word). Pinned: changing it renames
        // published series.
        assert_eq!(
            lines(&text, "hookinbox_open_connections{"),
            [
                "hookinbox_open_connections{listener=\"admin\"} 0",
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
