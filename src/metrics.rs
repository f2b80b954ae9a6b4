//! Counters and histograms, kept in a Prometheus registry.
//!
//! Owns metric names, labels and help texts; refuses event ids or any other
//! unbounded value as a label. Modules record through the typed methods here
//! so a metric's name lives in one place. Every label but the source is an
//! enum declared here, so the compiler refuses a label value a caller made
//! up; a source label is a configured name, or [`UNKNOWN_SOURCE`]. Modules
//! that have their own enum for the same thing map it here once (`From`
//! beside their enum): this file imports nothing of the crate, so anything
//! may import it. It also owns the per-minute [`Budget`] of loud log lines:
//! a refusal or dead letter is counted and budgeted in one call, and the
//! summary line reads what the budgets quieted from the same [`Tally`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Declares a label value enum whose text is given beside each variant.
///
/// Not `#[derive(EncodeLabelValue)]`: the derive prints the variant's name
/// (`RetryableStatus`), and the published series say `retryable_status`.
macro_rules! label_values {
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The label value as the exposition prints it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some($name::ALL.iter().map(|v| v.as_str())))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {}

        // The admin API writes the same text (`crate::api`).
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == text)
                    .ok_or_else(|| {
                        let expected: Vec<&str> = $name::ALL.iter().map(|v| v.as_str()).collect();
                        serde::de::Error::custom(format!(
                            "unknown {} {text:?}, expected one of {}",
                            stringify!($name),
                            expected.join(", ")
                        ))
                    })
            }
        }
    };
}

/// The source label of a request to no configured source. Never the name
/// the request sent: that is caller-chosen, an unbounded label.
pub const UNKNOWN_SOURCE: &str = "(unknown)";

label_values! {
    /// Why ingest refused a request (`rejected{reason}`). Finer than the
    /// public error code, which says `invalid_signature` for each of the
    /// signature and timestamp failures; otherwise the same text.
    pub enum RejectReason {
        UnknownSource => "unknown_source",
        BodyTooLarge => "body_too_large",
        BodyTimeout => "body_timeout",
        BodyUnreadable => "body_unreadable",
        Busy => "busy",
        MissingSignature => "missing_signature",
        MalformedSignature => "malformed_signature",
        SignatureMismatch => "signature_mismatch",
        BadTimestamp => "bad_timestamp",
        StaleTimestamp => "stale_timestamp",
        MissingEventId => "missing_event_id",
        InvalidEventId => "invalid_event_id",
        UnparseableBody => "unparseable_body",
        VerifyTokenMismatch => "verify_token_mismatch",
        MalformedHandshake => "malformed_handshake",
        StoreUnavailable => "store_unavailable",
        StoreError => "store_error",
    }
}

label_values! {
    /// How one delivery attempt ended (`delivery_attempts{outcome}`); the
    /// same text as the attempt's `outcome` in the admin API
    /// (`deliver` maps `AttemptClass` here, and a test there holds them equal).
    pub enum AttemptOutcome {
        Delivered => "delivered",
        RetryableStatus => "retryable_status",
        RejectedStatus => "rejected_status",
        Timeout => "timeout",
        Connect => "connect",
        Transport => "transport",
        Interrupted => "interrupted",
    }
}

label_values! {
    /// A circuit breaker's state (`circuit_transitions{state}`, and the
    /// `circuit_state` gauge's value); `deliver::breaker` maps its
    /// `CircuitState` here.
    pub enum Circuit {
        Closed => "closed",
        HalfOpen => "half_open",
        Open => "open",
    }
}

impl Circuit {
    /// The `circuit_state` gauge's value, as its help text says.
    fn level(self) -> i64 {
        match self {
            Circuit::Closed => 0,
            Circuit::HalfOpen => 1,
            Circuit::Open => 2,
        }
    }
}

label_values! {
    /// What the sweeper deleted (`swept{kind}`).
    pub enum SweptKind {
        Delivered => "delivered",
        DeadOrIgnored => "dead_or_ignored",
        DedupeKey => "dedupe_key",
    }
}

label_values! {
    /// Why an alert was posted (`alerts{kind}`); also the alert's name in
    /// its JSON body and log line.
    pub enum AlertKind {
        /// A source's DLQ holds more than `dlq_threshold` events.
        Dlq => "dlq",
        /// A source's oldest pending event is older than `pending_age`.
        PendingAge => "pending_age",
        /// A destination's circuit is open.
        CircuitOpen => "circuit_open",
    }
}

label_values! {
    /// Why the admin API refused or failed a request (`admin_rejected{reason}`);
    /// also the `error` code of its JSON answer.
    pub enum AdminReason {
        Unauthorized => "unauthorized",
        NotFound => "not_found",
        BadRequest => "bad_request",
        Conflict => "conflict",
        StoreUnavailable => "store_unavailable",
        StoreError => "store_error",
        InternalError => "internal_error",
    }
}

label_values! {
    /// Whether an alert post says a condition fires or has cleared
    /// (`alerts{status}`, and the alert body's `status`).
    pub enum AlertStatus {
        Firing => "firing",
        Resolved => "resolved",
    }
}

label_values! {
    /// One of the store's files (`store_file_bytes{file}`).
    pub enum StoreFile {
        Database => "database",
        Wal => "wal",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreFileLabel {
    file: StoreFile,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    /// The git commit the binary was built from (`build.rs`), or `unknown`.
    commit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

label_values! {
    /// Which listener a connection came to (as the logs name it).
    pub enum Listener {
        Ingest => "ingest",
        Admin => "admin",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabel {
    pub listener: Listener,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RejectedLabels {
    pub source: String,
    pub reason: RejectReason,
}

/// A destination's series: its source and its name (the source's name for
/// the one-URL form, `source.name` for a `[[source.destination]]` table).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DestinationLabel {
    pub source: String,
    pub destination: String,
}

impl DestinationLabel {
    pub fn new(source: &str, destination: &str) -> DestinationLabel {
        DestinationLabel {
            source: source.to_owned(),
            destination: destination.to_owned(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub source: String,
    pub destination: String,
    pub outcome: AttemptOutcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CircuitLabels {
    pub source: String,
    pub destination: String,
    pub state: Circuit,
}

/// Ack latency buckets, seconds: from 1 ms (a lone request on a fast disk)
/// to 10 s (a stalled disk), doubling.
fn ack_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 14)
}

#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Mutex<Registry>,
    open_connections: Family<ListenerLabel, Gauge>,
    connection_limit_waits: Family<ListenerLabel, Counter>,
    connections_evicted: Family<ListenerLabel, Counter>,
    tls_handshake_failures: Family<ListenerLabel, Counter>,
    received: Family<SourceLabel, Counter>,
    duplicates: Family<SourceLabel, Counter>,
    rejected: Family<RejectedLabels, Counter>,
    ack_seconds: Family<SourceLabel, Histogram, fn() -> Histogram>,
    attempts: Family<OutcomeLabels, Counter>,
    delivered: Family<DestinationLabel, Counter>,
    dead_lettered: Family<DestinationLabel, Counter>,
    circuit: Family<CircuitLabels, Counter>,
    attempt_seconds: Family<DestinationLabel, Histogram, fn() -> Histogram>,
    replayed: Family<SourceLabel, Counter>,
    ignored: Family<SourceLabel, Counter>,
    admin_rejected: Family<ReasonLabel, Counter>,
    swept: Family<KindLabel, Counter>,
    received_to_delivered: Family<DestinationLabel, Histogram, fn() -> Histogram>,
    commit_batch: Histogram,
    commit_seconds: Histogram,
    pending: Family<SourceLabel, Gauge>,
    retrying: Family<SourceLabel, Gauge>,
    dlq_size: Family<SourceLabel, Gauge>,
    oldest_pending_seconds: Family<SourceLabel, Gauge>,
    circuit_state: Family<DestinationLabel, Gauge>,
    alerts: Family<AlertLabels, Counter>,
    held: Family<SourceLabel, Gauge>,
    filtered: Family<SourceLabel, Counter>,
    store_file_bytes: Family<StoreFileLabel, Gauge>,
    filesystem_available_bytes: Gauge,
    filesystem_size_bytes: Gauge,
    store_writable: Gauge,
    /// Sums over every source, for the log's periodic summary.
    totals: Totals,
    /// How many refusals and dead letters may be logged at warn this minute.
    loud_rejections: Budget,
    loud_dead_letters: Budget,
    /// Label pairs `rejected` has seen, so stats can list them.
    rejected_seen: Mutex<std::collections::BTreeSet<(String, RejectReason)>>,
    /// The last acks per source, for stats' p50/p99.
    recent_acks: Recent,
    by_type: TypeTally,
    /// The last received → delivered latencies per source, likewise.
    recent_deliveries: Recent,
}

/// Received and duplicates per source and event type since the start, for
/// `/api/stats` and the dashboard. Not metric families: a provider sends
/// hundreds of event types, too many labels for a scraper. Past
/// [`TypeTally::TYPES`] types of one source, new ones count together under
/// [`OTHER_TYPES`], so memory stays bounded whatever arrives.
#[derive(Default)]
struct TypeTally(Mutex<std::collections::HashMap<String, TypesOf>>);

/// One source's event types → (received, duplicates).
type TypesOf = std::collections::HashMap<String, (u64, u64)>;

/// Where a source's types beyond [`TypeTally::TYPES`] are counted.
pub const OTHER_TYPES: &str = "(other types)";

impl TypeTally {
    const TYPES: usize = 1000;

    fn count(&self, source: &str, event_type: &str, duplicate: bool) {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !all.contains_key(source) {
            all.insert(source.to_owned(), Default::default());
        }
        let types = all.get_mut(source).expect("inserted above");
        let key = if types.contains_key(event_type) || types.len() < TypeTally::TYPES {
            event_type
        } else {
            OTHER_TYPES
        };
        if !types.contains_key(key) {
            types.insert(key.to_owned(), (0, 0));
        }
        let tally = types.get_mut(key).expect("inserted above");
        if duplicate {
            tally.1 += 1;
        } else {
            tally.0 += 1;
        }
    }

    fn of(&self, source: &str) -> Vec<(String, u64, u64)> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.get(source).map_or_else(Vec::new, |types| {
            types
                .iter()
                .map(|(t, &(received, duplicates))| (t.clone(), received, duplicates))
                .collect()
        })
    }
}

/// The last [`Recent::KEPT`] latencies per source, in ms: stats' p50 and p99
/// of what happened lately, without reading the store.
#[derive(Default)]
struct Recent(Mutex<std::collections::HashMap<String, std::collections::VecDeque<f64>>>);

impl Recent {
    const KEPT: usize = 4096;

    fn remember(&self, source: &str, took: std::time::Duration) {
        let mut recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // No allocation on the hot path once the source has its window.
        if !recent.contains_key(source) {
            recent.insert(source.to_owned(), Default::default());
        }
        let window = recent.get_mut(source).expect("inserted above");
        if window.len() == Recent::KEPT {
            window.pop_front();
        }
        window.push_back(took.as_secs_f64() * 1e3);
    }

    /// p50 and p99 of `source`'s window, in ms.
    fn percentiles(&self, source: &str) -> Option<(f64, f64)> {
        let mut values: Vec<f64> = {
            let recent = self.0.lock().unwrap_or_else(|p| p.into_inner());
            recent.get(source)?.iter().copied().collect()
        };
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let at = |p: f64| values[((values.len() - 1) as f64 * p) as usize];
        Some((at(0.5), at(0.99)))
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AlertLabels {
    pub kind: AlertKind,
    pub status: AlertStatus,
    /// `false` when the post failed; prints as `true`/`false`.
    pub sent: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: SweptKind,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: AdminReason,
}

/// The text format a scraper gets from [`Metrics::encode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus text format 0.0.4: what every scraper and parser reads.
    Prometheus,
    /// OpenMetrics 1.0.0, for a scraper that asks for it.
    OpenMetrics,
}

impl Exposition {
    /// The format an `Accept` header prefers: OpenMetrics only when it is
    /// acceptable with a higher quality than the classic text (Prometheus
    /// itself asks for both, OpenMetrics first); 0.0.4 otherwise, and
    /// without a header.
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let Some(accept) = accept else {
            return Exposition::Prometheus;
        };
        let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics > text {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// OpenMetrics text → Prometheus text 0.0.4, for what this registry writes:
/// a counter family `x` (samples `x_total`) is declared as `x_total`, as the
/// classic format names a family by its samples; `# UNIT` and `# EOF` have no
/// classic form and are left out; samples stay as they are.
fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ');
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" | "histogram" | "summary" => ("", kind),
                _ => ("", "untyped"),
            };
            if let Some((help_name, text)) = help.take().filter(|(n, _)| *n == name) {
                out.push_str(&format!("# HELP {help_name}{suffix} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name}{suffix} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `process_*`, the names Prometheus's own clients use, read from `/proc`
/// at each scrape: CPU, memory, file descriptors, start time.
#[derive(Debug)]
struct ProcessCollector;

impl prometheus_client::collector::Collector for ProcessCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        fn emit(
            encoder: &mut prometheus_client::encoding::DescriptorEncoder,
            name: &str,
            help: &str,
            metric: impl EncodeMetric,
        ) -> Result<(), std::fmt::Error> {
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
        }
        // Not on Linux, or /proc hidden: no process metrics, the rest stays.
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        if let Ok(stat) = me.stat() {
            let ticks = procfs::ticks_per_second() as f64;
            let cpu = (stat.utime + stat.stime) as f64 / ticks;
            emit(
                &mut encoder,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                ConstCounter::new(cpu),
            )?;
            emit(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                ConstGauge::new((stat.rss * procfs::page_size()) as i64),
            )?;
            emit(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                ConstGauge::new(stat.vsize as i64),
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                emit(
                    &mut encoder,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    ConstGauge::new(boot as f64 + stat.starttime as f64 / ticks),
                )?;
            }
        }
        if let Ok(open) = me.fd_count() {
            emit(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors.",
                ConstGauge::new(open as i64),
            )?;
        }
        if let Ok(limits) = me.limits()
            && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
        {
            emit(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                ConstGauge::new(max as i64),
            )?;
        }
        Ok(())
    }
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

/// How many lines of one kind (a refusal, a dead letter) may be logged at
/// warn or error per minute; past it they go to debug and the summary counts
/// them. 20: enough to see the sources and reasons of a burst, and a flood of
/// a million bad requests still writes 20 lines a minute.
pub const LOUD_PER_MINUTE: u32 = 20;

/// A budget of [`LOUD_PER_MINUTE`] lines per minute of one kind. Here, not
/// in `logs`: [`Metrics`] holds one per kind and counts what it quieted in
/// [`Tally::quieted`], and this module reaches nothing of the crate above it.
#[derive(Debug, Default)]
pub struct Budget {
    /// The current minute's start and the lines it has used.
    window: Mutex<Option<(Instant, u32)>>,
    /// Lines sent to debug since the start.
    quieted: AtomicU64,
}

impl Budget {
    /// Whether one more line may be loud now; counts it either way.
    pub fn take(&self) -> bool {
        self.take_at(Instant::now())
    }

    fn take_at(&self, now: Instant) -> bool {
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let (started, used) = match *window {
            Some((started, used)) if now.duration_since(started) < Duration::from_secs(60) => {
                (started, used)
            }
            _ => (now, 0),
        };
        let loud = used < LOUD_PER_MINUTE;
        *window = Some((started, used.saturating_add(1)));
        if !loud {
            self.quieted.fetch_add(1, Ordering::Relaxed);
        }
        loud
    }

    /// Lines this budget sent to debug since the start.
    pub fn quieted(&self) -> u64 {
        self.quieted.load(Ordering::Relaxed)
    }
}

/// Counts since the start over every source, for the log's summary line.
#[derive(Default)]
struct Totals {
    received: std::sync::atomic::AtomicU64,
    duplicates: std::sync::atomic::AtomicU64,
    rejected: std::sync::atomic::AtomicU64,
    delivered: std::sync::atomic::AtomicU64,
    failed_attempts: std::sync::atomic::AtomicU64,
    dead_lettered: std::sync::atomic::AtomicU64,
}

impl Totals {
    fn add(counter: &std::sync::atomic::AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A snapshot of [`Totals`]; two of them give what happened in between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub received: u64,
    pub duplicates: u64,
    pub rejected: u64,
    pub delivered: u64,
    /// Delivery attempts that did not deliver (the event may retry).
    pub failed_attempts: u64,
    pub dead_lettered: u64,
    /// Lines sent to debug past their per-minute budget.
    pub quieted: u64,
}

impl Tally {
    /// What happened between `earlier` and this snapshot.
    pub fn since(self, earlier: Tally) -> Tally {
        Tally {
            received: self.received - earlier.received,
            duplicates: self.duplicates - earlier.duplicates,
            rejected: self.rejected - earlier.rejected,
            delivered: self.delivered - earlier.delivered,
            failed_attempts: self.failed_attempts - earlier.failed_attempts,
            dead_lettered: self.dead_lettered - earlier.dead_lettered,
            quieted: self.quieted - earlier.quieted,
        }
    }

    pub fn is_quiet(&self) -> bool {
        *self == Tally::default()
    }

    /// Something went wrong: a refusal, a failed attempt, a dead letter.
    pub fn has_trouble(&self) -> bool {
        self.rejected + self.failed_attempts + self.dead_lettered > 0
    }
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
        let received = Family::<SourceLabel, Counter>::default();
        let duplicates = Family::<SourceLabel, Counter>::default();
        let rejected = Family::<RejectedLabels, Counter>::default();
        let ack_seconds: Family<SourceLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(ack_buckets()));
        registry.register(
            "received",
            "Events stored for the first time",
            received.clone(),
        );
        registry.register(
            "duplicates",
            "Requests answered as duplicates of a stored event",
            duplicates.clone(),
        );
        registry.register(
            "rejected",
            "Requests refused, by reason; nothing was stored",
            rejected.clone(),
        );
        registry.register(
            "ack_latency_seconds",
            "From the request's arrival to its durable 2xx answer",
            ack_seconds.clone(),
        );
        let attempts = Family::<OutcomeLabels, Counter>::default();
        let delivered = Family::<DestinationLabel, Counter>::default();
        let dead_lettered = Family::<DestinationLabel, Counter>::default();
        let circuit = Family::<CircuitLabels, Counter>::default();
        let attempt_seconds: Family<DestinationLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(ack_buckets()));
        registry.register(
            "delivery_attempts",
            "Delivery attempts, by outcome (delivered, retryable_status, rejected_status, timeout, connect, transport)",
            attempts.clone(),
        );
        registry.register(
            "delivered",
            "Events the destination accepted (2xx)",
            delivered.clone(),
        );
        registry.register(
            "dead_lettered",
            "Events moved to the dead-letter queue",
            dead_lettered.clone(),
        );
        registry.register(
            "circuit_transitions",
            "Circuit breaker state changes, by the state entered",
            circuit.clone(),
        );
        registry.register(
            "delivery_attempt_seconds",
            "How long one delivery attempt took",
            attempt_seconds.clone(),
        );
        let replayed = Family::<SourceLabel, Counter>::default();
        let ignored = Family::<SourceLabel, Counter>::default();
        let admin_rejected = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "replayed",
            "Events an operator sent again",
            replayed.clone(),
        );
        registry.register(
            "ignored",
            "Events an operator marked ignored, with a note",
            ignored.clone(),
        );
        registry.register(
            "admin_rejected",
            "Admin API requests refused or failed, by reason",
            admin_rejected.clone(),
        );
        let received_to_delivered: Family<DestinationLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| {
                // 10 ms to ~2 days: from a healthy app to a long outage.
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                    0.01, 4.0, 12,
                ))
            });
        registry.register(
            "received_to_delivered_seconds",
            "From receipt (or replay) to the destination's 2xx",
            received_to_delivered.clone(),
        );
        let commit_batch = Histogram::new(
            prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 11),
        );
        registry.register(
            "commit_batch_size",
            "Jobs (ingests, attempts, changes, sweep steps) per durable commit",
            commit_batch.clone(),
        );
        let commit_seconds = Histogram::new(ack_buckets());
        registry.register(
            "commit_seconds",
            "How long one durable commit took, fsync included",
            commit_seconds.clone(),
        );
        let pending = Family::<SourceLabel, Gauge>::default();
        let retrying = Family::<SourceLabel, Gauge>::default();
        let dlq_size = Family::<SourceLabel, Gauge>::default();
        let oldest_pending_seconds = Family::<SourceLabel, Gauge>::default();
        let circuit_state = Family::<DestinationLabel, Gauge>::default();
        registry.register(
            "pending",
            "Events waiting for delivery (including retrying), at the last scrape",
            pending.clone(),
        );
        registry.register(
            "retrying",
            "Pending events with at least one failed attempt",
            retrying.clone(),
        );
        registry.register(
            "dlq_size",
            "Dead-lettered events in the store",
            dlq_size.clone(),
        );
        registry.register(
            "oldest_pending_age_seconds",
            "Age of the oldest pending event (0 when none)",
            oldest_pending_seconds.clone(),
        );
        registry.register(
            "circuit_state",
            "Circuit breaker per destination: 0 closed, 1 half-open, 2 open",
            circuit_state.clone(),
        );
        let alerts = Family::<AlertLabels, Counter>::default();
        registry.register(
            "alerts",
            "Alerts posted to the alert URL, by kind; sent=\"false\" when the post failed",
            alerts.clone(),
        );
        let swept = Family::<KindLabel, Counter>::default();
        registry.register(
            "swept",
            "Things the sweeper deleted: delivered events, dead or ignored events, dedupe keys",
            swept.clone(),
        );
        let open_connections = Family::<ListenerLabel, Gauge>::default();
        registry.register(
            "open_connections",
            "Connections open now, per listener",
            open_connections.clone(),
        );
        let connection_limit_waits = Family::<ListenerLabel, Counter>::default();
        registry.register(
            "connection_limit_waits",
            "Times the listener had max_connections open, each with a request in progress, and left a new connection waiting",
            connection_limit_waits.clone(),
        );
        let connections_evicted = Family::<ListenerLabel, Counter>::default();
        registry.register(
            "connections_evicted",
            "Connections closed to admit a new one past max_connections: each had waited longest for a request head (a slow client, or idle between requests)",
            connections_evicted.clone(),
        );
        let tls_handshake_failures = Family::<ListenerLabel, Counter>::default();
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that failed or timed out (a client that does not trust the certificate, a scanner)",
            tls_handshake_failures.clone(),
        );
        let held = Family::<SourceLabel, Gauge>::default();
        registry.register(
            "held",
            "Events of a source without a destination, kept for the app to read, at the last scrape",
            held.clone(),
        );
        let filtered = Family::<SourceLabel, Counter>::default();
        registry.register(
            "filtered",
            "Events stored but not delivered: the destination's filter (filter_types, filter_match) did not take them",
            filtered.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        registry.register(
            "build_info",
            "Always 1; the labels say which build is running",
            build_info.clone(),
        );
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: env!("HOOKINBOX_COMMIT"),
            })
            .set(1);
        let store_file_bytes = Family::<StoreFileLabel, Gauge>::default();
        registry.register(
            "store_file_bytes",
            "Size of the store's files (the redb database, the write-ahead log), at the last scrape",
            store_file_bytes.clone(),
        );
        let filesystem_available_bytes = Gauge::default();
        registry.register(
            "store_filesystem_available_bytes",
            "Bytes free for hookinbox on the data directory's filesystem, at the last scrape",
            filesystem_available_bytes.clone(),
        );
        let filesystem_size_bytes = Gauge::default();
        registry.register(
            "store_filesystem_size_bytes",
            "Size of the data directory's filesystem",
            filesystem_size_bytes.clone(),
        );
        let store_writable = Gauge::default();
        registry.register(
            "store_writable",
            "1 while the store takes writes; 0 after a failed commit (a full or failing disk: ingest answers 503) until a probe commit passes",
            store_writable.clone(),
        );
        for listener in [Listener::Ingest, Listener::Admin] {
            let label = ListenerLabel { listener };
            let _ = tls_handshake_failures.get_or_create(&label);
            let _ = open_connections.get_or_create(&label);
            let _ = connection_limit_waits.get_or_create(&label);
            let _ = connections_evicted.get_or_create(&label);
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
                circuit_state,
                alerts,
                held,
                filtered,
                store_file_bytes,
                filesystem_available_bytes,
                filesystem_size_bytes,
                store_writable,
                totals: Totals::default(),
                loud_rejections: Default::default(),
                loud_dead_letters: Default::default(),
                rejected_seen: Mutex::default(),
                recent_acks: Recent::default(),
                by_type: TypeTally::default(),
                recent_deliveries: Recent::default(),
            }),
        }
    }

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
    #[test]
    fn types_past_the_cap_count_together() {
        let tally = super::TypeTally::default();
        for i in 0..super::TypeTally::TYPES {
            tally.count("s", &format!("t{i}"), false);
        }
        tally.count("s", "t0", true);
        tally.count("s", "late.one", false);
        tally.count("s", "late.two", true);
        tally.count("other", "late.one", false);
        let of = |source: &str, t: &str| {
            tally
                .of(source)
                .into_iter()
                .find(|(name, _, _)| name == t)
                .map(|(_, r, d)| (r, d))
        };
        assert_eq!(tally.of("s").len(), super::TypeTally::TYPES + 1);
        assert_eq!(of("s", "t0"), Some((1, 1)));
        assert_eq!(of("s", "late.one"), None);
        assert_eq!(of("s", super::OTHER_TYPES), Some((1, 1)));
        assert_eq!(of("other", "late.one"), Some((1, 0)));
    }

    use super::*;

    #[test]
    fn a_budget_allows_its_lines_per_minute_then_quiets_until_the_next() {
        let budget = Budget::default();
        let start = Instant::now();
        let loud = (0..50).filter(|_| budget.take_at(start)).count();
        assert_eq!(loud, LOUD_PER_MINUTE as usize);
        assert_eq!(budget.quieted(), 50 - u64::from(LOUD_PER_MINUTE));
        assert!(!budget.take_at(start + Duration::from_secs(59)));
        assert!(budget.take_at(start + Duration::from_secs(60)));
    }

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

    #[test]
    fn every_label_value_is_snake_case_and_unique() {
        fn check<T: Copy>(all: &[T], text: fn(T) -> &'static str) {
            let mut seen = std::collections::BTreeSet::new();
            for v in all.iter().map(|&v| text(v)) {
                assert!(
                    !v.is_empty() && v.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                    "{v:?}"
                );
                assert!(seen.insert(v), "{v:?} twice");
            }
        }
        check(RejectReason::ALL, RejectReason::as_str);
        check(AttemptOutcome::ALL, AttemptOutcome::as_str);
        check(Circuit::ALL, Circuit::as_str);
        check(SweptKind::ALL, SweptKind::as_str);
        check(AlertKind::ALL, AlertKind::as_str);
        check(AdminReason::ALL, AdminReason::as_str);
    }
}
