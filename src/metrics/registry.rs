//! Building the registry: every `hookinbox_` family's name, help text and
//! buckets, registered once at start in the order the exposition prints them.
//!
//! Owns `Metrics::new` and nothing after it: recording is `record`'s, the
//! text formats `exposition`'s. Refuses to register a family anywhere else,
//! so a name or help text is written in one place (`families!`), and a
//! published name changes only here (the monitoring tests pin them).

use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::budget::Budget;
use super::labels::{
    AlertLabels, BuildLabels, CircuitLabels, DestinationLabel, DriftLabels, KeyClaimLabels,
    KindLabel, ListenerLabel, NamespaceLabel, NodeLabel, OutcomeLabels, ReasonLabel,
    ReconcileRunLabels, ReconciledLabels, RejectedLabels, SecretLabels, SourceLabel,
    StoreFileLabel,
};
use super::process::ProcessCollector;
use super::record::{Inner, Metrics};
use super::tally::{Recent, Totals, TypeTally};
use crate::words::Listener;

/// Ack latency buckets, seconds: from 1 ms (a lone request on a fast disk)
/// to 10 s (a stalled disk), doubling.
fn ack_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 14)
}

/// Received → delivered buckets, seconds: 10 ms to ~2 days, from a healthy
/// app to a long outage.
fn delivery_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.01, 4.0, 12)
}

/// A listener family with each listener's series already at 0, so both
/// show before the first connection.
fn per_listener<M: Default>() -> Family<ListenerLabel, M> {
    let family = Family::default();
    for &listener in Listener::ALL {
        let _ = family.get_or_create(&ListenerLabel { listener });
    }
    family
}

/// `build_info`'s one series, at 1: the labels are the information.
fn build_info() -> Family<BuildLabels, Gauge> {
    let family = Family::<BuildLabels, Gauge>::default();
    family
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            commit: env!("HOOKINBOX_COMMIT"),
        })
        .set(1);
    family
}

/// Registers each family in `$registry` under its name and help text, in the
/// order written (the exposition's order), and binds it to a local of the
/// given name and type: one entry per family. A family without `= init`
/// starts as its type's `Default`.
macro_rules! families {
    ($registry:expr; $($local:ident: $ty:ty $(= $init:expr)? => $name:literal, $help:literal;)+) => {
        $(
            let $local: $ty = families!(@init $($init)?);
            $registry.register($name, $help, $local.clone());
        )+
    };
    (@init) => { Default::default() };
    (@init $init:expr) => { $init };
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        root.register_collector(Box::new(ProcessCollector));
        let registry = root.sub_registry_with_prefix("hookinbox");
        families! { registry;
            received: Family<SourceLabel, Counter>
                => "received", "Events stored for the first time";
            duplicates: Family<SourceLabel, Counter>
                => "duplicates", "Requests answered as duplicates of a stored event";
            rejected: Family<RejectedLabels, Counter>
                => "rejected", "Requests refused, by reason; nothing was stored";
            ack_seconds: Family<SourceLabel, Histogram, fn() -> Histogram>
                = Family::new_with_constructor(|| Histogram::new(ack_buckets()))
                => "ack_latency_seconds", "From the request's arrival to its durable 2xx answer";
            attempts: Family<OutcomeLabels, Counter>
                => "delivery_attempts", "Delivery attempts, by outcome (delivered, retryable_status, rejected_status, timeout, connect, transport)";
            delivered: Family<DestinationLabel, Counter>
                => "delivered", "Events the destination accepted (2xx)";
            dead_lettered: Family<DestinationLabel, Counter>
                => "dead_lettered", "Events moved to the dead-letter queue";
            circuit: Family<CircuitLabels, Counter>
                => "circuit_transitions", "Circuit breaker state changes, by the state entered";
            attempt_seconds: Family<DestinationLabel, Histogram, fn() -> Histogram>
                = Family::new_with_constructor(|| Histogram::new(ack_buckets()))
                => "delivery_attempt_seconds", "How long one delivery attempt took";
            replayed: Family<SourceLabel, Counter>
                => "replayed", "Events an operator sent again";
            ignored: Family<SourceLabel, Counter>
                => "ignored", "Events an operator marked ignored, with a note";
            admin_rejected: Family<ReasonLabel, Counter>
                => "admin_rejected", "Admin API requests refused or failed, by reason";
            received_to_delivered: Family<DestinationLabel, Histogram, fn() -> Histogram>
                = Family::new_with_constructor(|| Histogram::new(delivery_buckets()))
                => "received_to_delivered_seconds", "From receipt (or replay) to the destination's 2xx";
            commit_batch: Histogram = Histogram::new(exponential_buckets(1.0, 2.0, 11))
                => "commit_batch_size", "Jobs (ingests, attempts, changes, sweep steps) per durable commit";
            commit_seconds: Histogram = Histogram::new(ack_buckets())
                => "commit_seconds", "How long one durable commit took, fsync included";
            pending: Family<SourceLabel, Gauge>
                => "pending", "Events waiting for delivery (including retrying), at the last scrape";
            retrying: Family<SourceLabel, Gauge>
                => "retrying", "Pending events with at least one failed attempt";
            dlq_size: Family<SourceLabel, Gauge>
                => "dlq_size", "Dead-lettered events in the store";
            oldest_pending_seconds: Family<SourceLabel, Gauge>
                => "oldest_pending_age_seconds", "Age of the oldest pending event (0 when none)";
            quiet_seconds: Family<SourceLabel, Gauge>
                => "source_quiet_seconds", "Seconds since the source's newest stored event was received (since hookinbox started, when it holds none)";
            expect_within_seconds: Family<SourceLabel, Gauge>
                => "source_expect_within_seconds", "The source's expect_within: quiet longer than this and it alerts (only sources that set it)";
            circuit_state: Family<DestinationLabel, Gauge>
                => "circuit_state", "Circuit breaker per destination: 0 closed, 1 half-open, 2 open";
            signature_matches: Family<SecretLabels, Counter>
                => "signature_matches", "Events each source secret verified (by its name): after a rotation, the old secret's count stops rising once the provider signs with the new one";
            payload_drift: Family<DriftLabels, Counter>
                => "payload_drift", "Fields an event's payload lacked, added or retyped against what its source sent before (each departure once)";
            drift_skipped: Family<SourceLabel, Counter>
                => "drift_skipped", "New events the payload drift watch did not learn: over its rate per source and type, or its queue full";
            reconcile_runs: Family<ReconcileRunLabels, Counter>
                => "reconcile_runs", "Reconcile passes of a source's provider API, by outcome (ok, refused: the credential, throttled, failed)";
            reconciled: Family<ReconciledLabels, Counter>
                => "reconciled", "Events the provider could not deliver and hookinbox never received, recovered by a reconcile pass: resent (asked again) or fetched (stored from the API)";
            reconcile_last_success: Family<SourceLabel, Gauge>
                => "reconcile_last_success_timestamp_seconds", "When a reconcile pass of the source last succeeded (unix seconds; 0 before the first)";
            subscription_active: Family<SourceLabel, Gauge>
                => "source_subscription_active", "1 while the provider still sends to this source (GitHub's hook active, Stripe's endpoint enabled), 0 once it disabled it, as the last reconcile pass read it";
            alerts: Family<AlertLabels, Counter>
                => "alerts", "Alerts posted to the alert URL, by kind; sent=\"false\" when the post failed";
            swept: Family<KindLabel, Counter>
                => "swept", "Things the sweeper deleted: delivered events, dead or ignored events, dedupe keys";
            open_connections: Family<ListenerLabel, Gauge> = per_listener()
                => "open_connections", "Connections open now, per listener";
            connection_limit_waits: Family<ListenerLabel, Counter> = per_listener()
                => "connection_limit_waits", "Times the listener had max_connections open, each with a request in progress, and left a new connection waiting";
            connections_evicted: Family<ListenerLabel, Counter> = per_listener()
                => "connections_evicted", "Connections closed to admit a new one past max_connections: each had waited longest for a request head (a slow client, or idle between requests)";
            tls_handshake_failures: Family<ListenerLabel, Counter> = per_listener()
                => "tls_handshake_failures", "TLS handshakes that failed or timed out (a client that does not trust the certificate, a scanner)";
            held: Family<SourceLabel, Gauge>
                => "held", "Events of a source without a destination, kept for the app to read, at the last scrape";
            filtered: Family<SourceLabel, Counter>
                => "filtered", "Events stored but not delivered: the destination's filter (filter_types, filter_match) did not take them";
            build_info: Family<BuildLabels, Gauge> = build_info()
                => "build_info", "Always 1; the labels say which build is running";
            store_file_bytes: Family<StoreFileLabel, Gauge>
                => "store_file_bytes", "Size of the store's files (the redb database, the write-ahead log, the dedupe index's runs), at the last scrape";
            store_file_disk_bytes: Family<StoreFileLabel, Gauge>
                => "store_file_disk_bytes", "Disk the database and the write-ahead log take: the blocks the filesystem allocated (redb extends its file before it writes there, and the part not yet written takes none), at the last scrape";
            dedupe_memory_bytes: Gauge
                => "dedupe_memory_bytes", "Memory the dedupe index holds (its runs' filters and page fences, and the keys in hash tables: the newest, kept and idempotency keys), at the last scrape";
            filesystem_available_bytes: Gauge
                => "store_filesystem_available_bytes", "Bytes free for hookinbox on the data directory's filesystem, at the last scrape";
            filesystem_size_bytes: Gauge
                => "store_filesystem_size_bytes", "Size of the data directory's filesystem";
            store_writable: Gauge
                => "store_writable", "1 while the store takes writes; 0 after a failed commit (a full or failing disk: ingest answers 503) until a probe commit passes";
            key_claims: Family<KeyClaimLabels, Counter>
                => "key_claims", "Claims of idempotency keys, by namespace and outcome (claimed, done, busy)";
            key_leases_expired: Family<NamespaceLabel, Counter>
                => "key_leases_expired", "Claims granted over a lease that had run out: a worker that took too long or died";
            event_streams: Gauge
                => "event_streams", "Event streams open now (GET /api/events/stream: hookinbox listen, events tail, the dashboard's live mode)";
            keys_stored: Gauge
                => "keys_stored", "Idempotency keys in the store (claimed or done, expired ones the sweeper has not reached included), at the last scrape";
            replication_role: Gauge
                => "replication_role", "This node's part in replication: 0 without [replication], 1 a standby, 2 the primary";
            replication_lease_holder: Family<NodeLabel, Gauge>
                => "replication_lease_holder", "1 for the node that holds the primary's lease, as this node last read it (no series while no node holds it)";
            replication_lease_renewed: Gauge
                => "replication_lease_renewed_timestamp_seconds", "When the lease's holder last renewed it (unix seconds), as this node last read it; 0 while no node holds it";
            replication_frames_behind: Gauge
                => "replication_frames_behind", "A standby's messages of the stream not applied yet, at its last look (0 on the primary)";
            replication_lag_seconds: Gauge
                => "replication_standby_lag_seconds", "A standby's lag: the age of the oldest message of the stream it has not applied (0 when it has applied them all, and on the primary)";
            replication_snapshot_ok: Gauge
                => "replication_snapshot_last_success_timestamp_seconds", "When the primary last had a current snapshot of its database in the stream's object store (taken, or nothing new to take), unix seconds; 0 on a standby";
            replication_snapshot_interval: Gauge
                => "replication_snapshot_interval_seconds", "[replication] snapshot_interval: how often the primary snapshots its database";
            replication_publish_failures: Counter
                => "replication_publish_failures", "Frames the stream did not take when shipped (its servers did not answer in time, or another writer appended): those batches were answered 503";
            replication_frame_bytes: Counter
                => "replication_frame_bytes", "Bytes of the frames the primary shipped to the stream, as its log holds them (a frame sent again after a failure counts again)";
            replication_sent_bytes: Counter
                => "replication_sent_bytes", "Bytes of those frames as published, after [replication] compression: with replication_frame_bytes, the compression ratio";
            replication_follow_failures: Counter
                => "replication_follow_failures", "Times a standby's following of the stream failed and was started again (its servers did not answer)";
            telemetry_spans_ended: Counter
                => "telemetry_spans_ended", "Spans [telemetry] recorded (sampled ones only), queued for the exporter";
            telemetry_spans_exported: Counter
                => "telemetry_spans_exported", "Spans the OTLP receiver took";
            telemetry_spans_failed: Counter
                => "telemetry_spans_failed", "Spans lost: the OTLP receiver could not be reached or refused them. Ended minus exported minus failed is what is queued, or was dropped when the queue was full";
        }
        Metrics {
            inner: Arc::new(Inner {
                registry: Mutex::new(root),
                open_connections,
                connection_limit_waits,
                connections_evicted,
                tls_handshake_failures,
                received,
                duplicates,
                rejected,
                ack_seconds,
                attempts,
                delivered,
                dead_lettered,
                circuit,
                attempt_seconds,
                replayed,
                ignored,
                admin_rejected,
                swept,
                received_to_delivered,
                commit_batch,
                commit_seconds,
                pending,
                retrying,
                dlq_size,
                oldest_pending_seconds,
                quiet_seconds,
                expect_within_seconds,
                circuit_state,
                signature_matches,
                payload_drift,
                drift_skipped,
                reconcile_runs,
                reconciled,
                reconcile_last_success,
                subscription_active,
                alerts,
                held,
                filtered,
                store_file_bytes,
                store_file_disk_bytes,
                filesystem_available_bytes,
                filesystem_size_bytes,
                store_writable,
                key_claims,
                key_leases_expired,
                keys_stored,
                replication_role,
                replication_lease_holder,
                replication_lease_renewed,
                replication_frames_behind,
                replication_lag_seconds,
                replication_snapshot_ok,
                replication_snapshot_interval,
                replication_publish_failures,
                replication_frame_bytes,
                replication_sent_bytes,
                replication_follow_failures,
                telemetry_spans_ended,
                telemetry_spans_exported,
                telemetry_spans_failed,
                dedupe_memory_bytes,
                event_streams,
                totals: Totals::default(),
                loud_rejections: Budget::default(),
                loud_dead_letters: Budget::default(),
                rejected_seen: Mutex::default(),
                recent_acks: Recent::default(),
                by_type: TypeTally::default(),
                recent_deliveries: Recent::default(),
            }),
        }
    }
}
