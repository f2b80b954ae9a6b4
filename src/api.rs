//! The admin API's contract: every request and answer that crosses between
//! the server (`admin`) and its clients (`ctl`, scripts, the dashboard), as
//! serde types. `admin` serialises these and nothing else; `ctl`
//! deserialises the same types. Store types never go on the wire: `admin`
//! converts. Times are RFC 3339 ([`Timestamp`]); enums are snake_case text.
//! The word lists shared with the metrics (error codes, rejection reasons,
//! attempt outcomes, circuit states) are `crate::words`' enums, so an
//! answer and a counter can never name a thing differently.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, ToSchema};

mod activity;
mod audit;
mod keys;
mod reconcile;
mod secrets;
mod shapes;

pub use crate::words::{
    AdminReason as ErrorCode, AttemptOutcome, AuditAction, Circuit, ConfigChange, EventOrigin,
    ReconcileOutcome, ReconciledHow, RejectReason, Role,
};
pub use activity::{Activity, ActivityQuery, DestinationMinute, MinuteCounts};
pub use audit::{AuditEntry, AuditOutcome, AuditPage, AuditQuery};
pub use keys::{
    ClaimRequest, CompleteRequest, ExtendRequest, KeyDeleteQuery, KeyList, KeyListQuery,
    KeyListState, KeyNamespace, KeyNamespaces, KeyScope, KeyStateName, KeyView, MAX_KEY_LEN,
    MAX_KEY_RESULT, ReleaseRequest,
};
pub use reconcile::{
    ReconcileQuery, ReconcileReport, ReconcileSource, ReconcileSources, Recovered,
};
pub use secrets::{SecretInfo, SecretList, SecretPlace};
pub use shapes::{DriftView, FieldView, ShapeView, Shapes, ShapesQuery};

/// A point in time, as Unix milliseconds inside and RFC 3339 on the wire
/// (`2026-11-22T10:00:00.000Z`; a query may leave out the fraction and give
/// any offset, `2026-11-22T11:00:00+01:00`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub u64);

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some(
                "RFC 3339, e.g. 2026-11-22T10:00:00.000Z; a query may give any offset, \
                 e.g. 2026-11-22T11:00:00+01:00, and leave out the fraction",
            ))
            .into()
    }
}

impl ToSchema for Timestamp {}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let at = crate::clock::from_unix_ms(self.0);
        serializer.collect_str(&humantime::format_rfc3339_millis(at))
    }
}

/// RFC 3339 in UTC, to the second, as people read it in a message.
impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = crate::clock::from_unix_ms(self.0);
        write!(f, "{}", humantime::format_rfc3339_seconds(at))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Where an event is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// Waiting for its first attempt, or for a retry.
    Pending,
    /// Its source has no destination: kept, not delivered.
    Held,
    Delivered,
    /// Failed for good: in the dead-letter queue.
    Dead,
    /// A person marked it ignored, with a note.
    Ignored,
    /// No destination's filter took it: never delivered unless replayed.
    Filtered,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Pending => "pending",
            EventStatus::Held => "held",
            EventStatus::Delivered => "delivered",
            EventStatus::Dead => "dead",
            EventStatus::Ignored => "ignored",
            EventStatus::Filtered => "filtered",
        }
    }
}

/// Which events: `GET /api/events` takes it as its query string, bulk
/// requests as their `filter`. Every field narrows; none means all.
/// `q` and `match` look inside payloads (a search, see [`EventPage::search`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A destination's name (its source's name, or `source.name`): events
    /// routed to it. With `status`, the status of that delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Events with a delivery in this status (held and filtered: the event's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<EventStatus>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// The provider's event id, exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// Received at or after: RFC 3339 with `Z` or any offset, like
    /// `2026-11-22T10:00:00Z` or `2026-11-22T11:00:00+01:00`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<Timestamp>,
    /// Received before: RFC 3339 with `Z` or any offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<Timestamp>,
    /// Text the payload contains (case matters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    /// `/json/pointer=value`: the payload's value at the pointer.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub pointer_match: Option<String>,
    /// A page's `next_cursor`: go on below it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// Events per page, 1–500 (default 50).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// The query of `GET /api/events/stream`: the list's filters, where to
/// start, and whether each event carries its payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A destination's name: events routed to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Events with a delivery in this status when they are read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<EventStatus>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Start after this event (hookinbox's id, as an `id:` line of the
    /// stream gave it); a `Last-Event-ID` header does the same. Without
    /// it or `since`, from the next event stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// Start with the first event received at or after this time (RFC
    /// 3339): history first, then each new event. Not with `after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// Each event with its payload, content type and the provider's
    /// headers: the request as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<bool>,
}

/// One event of `GET /api/events/stream` (the `data:` of an `event`):
/// its summary and, when asked for, the request as received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StreamedEvent {
    #[serde(flatten)]
    pub event: EventSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
    /// The payload is masked at its source's `redact` pointers (see
    /// [`EventDetail::redacted`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    /// With the payload: its content type, when the provider gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// With the payload: the provider's headers hookinbox kept, in order,
    /// as `[name, value]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Vec<String>>>)]
    pub headers: Option<Vec<(String, String)>>,
}

impl EventQuery {
    /// Whether it looks inside payloads.
    pub fn is_search(&self) -> bool {
        self.q.is_some() || self.pointer_match.is_some()
    }
}

/// One event in a list. `status` is the event's as a whole (pending while
/// any destination's delivery is, then dead, held, delivered, ignored,
/// filtered); the fields from `attempts` to `replays` are those of the
/// delivery the query matched (the first, without a destination), and
/// `deliveries` has each destination's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventSummary {
    /// hookinbox's id: the `webhook-id` the app receives.
    pub id: String,
    pub source: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub status: EventStatus,
    /// The destination of the fields below (absent for a held or filtered
    /// event of a source without a destination of its own name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    pub received_at: Timestamp,
    /// Attempts in the current round (a replay starts a new one).
    pub attempts: u32,
    pub next_attempt_at: Option<Timestamp>,
    pub delivered_at: Option<Timestamp>,
    pub dead_letter: Option<DeadLetter>,
    pub note: Option<Note>,
    pub replays: u32,
    /// Its payload and headers were deleted on request; the note says why.
    pub erased: Option<Note>,
    /// One per destination it was routed to (one for a held or filtered
    /// event: the source's own).
    #[serde(default)]
    pub deliveries: Vec<DeliverySummary>,
}

/// One delivery of an event: its state at one destination.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeliverySummary {
    /// The destination's name: its source's name, or `source.name`.
    pub destination: String,
    pub status: EventStatus,
    /// Attempts in the current round (a replay starts a new one).
    pub attempts: u32,
    pub next_attempt_at: Option<Timestamp>,
    pub delivered_at: Option<Timestamp>,
    pub dead_letter: Option<DeadLetter>,
    pub note: Option<Note>,
    pub replays: u32,
}

/// Which delivery of an event a replay or an ignore is for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeliveryQuery {
    /// A destination's name. Absent: every delivery the change applies to
    /// (for a held or filtered event, the source's one destination).
    pub destination: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetter {
    pub reason: String,
    pub at: Timestamp,
    pub last_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Note {
    pub text: String,
    pub at: Timestamp,
}

/// A page of events, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventPage {
    pub events: Vec<EventSummary>,
    /// Pass as `cursor` for the next page; `None`: nothing more matches.
    pub next_cursor: Option<u64>,
    /// For a search: how far this call looked.
    pub search: Option<SearchProgress>,
}

/// A search reads payloads within a budget per call; it says how far back
/// it got, and `next_cursor` continues from there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SearchProgress {
    /// Payloads read by this call.
    pub examined: u64,
    /// Receipt time of the oldest event this call examined.
    pub scanned_back_to: Option<Timestamp>,
}

/// One event, whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventDetail {
    #[serde(flatten)]
    pub summary: EventSummary,
    /// `reconciled`: fetched from the provider's API, not received signed
    /// (its `hookinbox-*` headers say from where).
    #[serde(default = "received")]
    pub origin: EventOrigin,
    pub content_type: Option<String>,
    /// The provider's headers hookinbox kept, in order, as `[name, value]`.
    #[schema(value_type = Vec<Vec<String>>)]
    pub headers: Vec<(String, String)>,
    pub payload: Payload,
    /// The payload is shown with the values at its source's `redact`
    /// pointers replaced by `"[redacted]"` (or withheld whole, when it is
    /// not JSON): the caller's role may not read them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
    pub attempt_history: Vec<AttemptRecord>,
    /// The event's trace (32 hex digits), with `[telemetry]` when the event
    /// is sampled; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// `[telemetry] trace_url` with the trace's id in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_url: Option<String>,
}

/// What an older server's event detail, which says no origin, means.
fn received() -> EventOrigin {
    EventOrigin::Received
}

/// The raw body: as text when it is UTF-8, else base64.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Payload {
    pub encoding: PayloadEncoding,
    pub data: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PayloadEncoding {
    Text,
    Base64,
}

/// One delivery attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AttemptRecord {
    /// The destination it went to.
    #[serde(default)]
    pub destination: String,
    /// 1 for the first attempt ever made for the event at that destination.
    pub n: u32,
    /// The `hookinbox-attempt` it carried, as the app saw it: 1 for the
    /// first attempt of its round (a replay counts from 1 again).
    #[serde(default)]
    pub attempt: u32,
    pub started_at: Timestamp,
    pub latency_ms: u64,
    pub outcome: AttemptOutcome,
    pub status: Option<u16>,
    pub error: Option<String>,
    /// The start of the app's answer.
    pub response_snippet: Option<String>,
    /// The round it belongs to: 0 before any replay, 1 after the first, …
    /// (absent from servers before attempts were kept in full: 0).
    #[serde(default)]
    pub round: u32,
    /// From the start to the answer's status and headers (`latency_ms` is
    /// to the end of the body read); absent without an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<u64>,
    /// The request's headers as sent, as `[name, value]`: a signature or
    /// any credential only as its first 8 characters and `…`. Empty for an
    /// attempt made before they were kept.
    #[serde(default)]
    #[schema(value_type = Vec<Vec<String>>)]
    pub request_headers: Vec<(String, String)>,
    /// The answer's headers (at most 32), cut the same way.
    #[serde(default)]
    #[schema(value_type = Vec<Vec<String>>)]
    pub response_headers: Vec<(String, String)>,
}

/// The body of `POST /api/events/{id}/ignore` and `DELETE /api/events/{id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteRequest {
    /// Why: kept with the event (at most 2000 bytes).
    pub note: String,
}

/// The body of `POST /api/replay` and `POST /api/ignore`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// Which events; at least one field besides `cursor` and `limit` (which
    /// it refuses). `q` and `match` look inside each candidate's payload.
    pub filter: EventQuery,
    /// Count the matches, change nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Required to ignore, refused for a replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a bulk request did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BulkResult {
    pub dry_run: bool,
    pub matched: u64,
    /// Replayed or ignored (0 for a dry run).
    pub changed: u64,
    /// The first 100 that could not be changed, and why.
    pub refused: Vec<Refusal>,
    /// With `q` or `match`: the payloads read to find them (at most
    /// 1,000,000 a request; past that, a 400 asks for a narrower filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examined: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Refusal {
    pub id: String,
    pub reason: String,
}

/// `GET /api/stats`: per source, what the store holds and what this process
/// has seen since it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Stats {
    pub sources: BTreeMap<String, SourceStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SourceStats {
    /// Events stored now, by status.
    pub stored: Counts,
    /// `stored` by event type (`(none)` for events without one).
    pub by_type: BTreeMap<String, Counts>,
    /// delivered / (delivered + dead) of what is stored.
    pub success_rate: Option<f64>,
    /// How long the oldest pending event has waited.
    pub oldest_pending_age_ms: Option<u64>,
    /// When its newest stored event was received (a duplicate is not new).
    #[serde(default)]
    pub newest_received_at: Option<Timestamp>,
    /// Its `expect_within`, when set.
    #[serde(default)]
    pub expect_within_ms: Option<u64>,
    /// It has sent nothing new for longer than `expect_within` (counted
    /// from hookinbox's start when it holds no event).
    #[serde(default)]
    pub quiet: bool,
    pub since_start: SinceStart,
    /// `stored` by destination: each destination's deliveries (held and
    /// filtered events count under the source's own name).
    #[serde(default)]
    pub destinations: BTreeMap<String, DestinationStats>,
}

/// What is stored for one destination.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DestinationStats {
    pub stored: Counts,
    pub oldest_pending_age_ms: Option<u64>,
}

/// Stored events by status. `pending` and `retrying` are apart: an event is
/// in exactly one of the seven. For a source with several destinations these
/// count deliveries: an event routed to two counts once in each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Counts {
    /// Waiting for their first attempt of this round.
    pub pending: u64,
    /// Pending after at least one failed attempt.
    pub retrying: u64,
    pub held: u64,
    pub delivered: u64,
    pub dead: u64,
    pub ignored: u64,
    /// Taken by no destination's filter (`filter_types`, `filter_match`).
    #[serde(default)]
    pub filtered: u64,
}

/// Counted by this process since it started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SinceStart {
    pub received: u64,
    pub duplicates: u64,
    pub rejected: BTreeMap<RejectReason, u64>,
    /// Of the latest acks.
    pub ack_ms: Option<Percentiles>,
    /// Of the latest deliveries: receipt (or replay) to the app's 2xx.
    pub received_to_delivered_ms: Option<Percentiles>,
    /// `received` and `duplicates` by event type (`(none)` for events
    /// without one; past 1000 types, `(other types)`).
    #[serde(default)]
    pub by_type: BTreeMap<String, TypeSinceStart>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TypeSinceStart {
    pub received: u64,
    pub duplicates: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

/// `GET /api/destinations`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Destinations {
    pub destinations: Vec<DestinationState>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DestinationState {
    /// Its source's name, or `source.name`.
    pub name: String,
    #[serde(default)]
    pub source: String,
    /// Without credentials.
    pub url: String,
    pub paused: bool,
    pub circuit: Circuit,
    pub in_flight: usize,
    pub max_concurrency: usize,
    /// The last failed attempt, in words.
    pub last_failure: Option<String>,
}

/// A replicating node's role now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplicationRole {
    /// Takes webhooks and delivers them; its log goes to the stream.
    Primary,
    /// Applies the stream's frames; takes over when the primary's lease
    /// lapses, or when promoted.
    Standby,
}

/// `GET /api/replication` and `POST /api/replication/promote`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplicationStatus {
    /// This node's name in the lease.
    pub node: String,
    /// The JetStream stream of the log.
    pub stream: String,
    pub role: ReplicationRole,
    /// The node holding the lease now (the primary), if any; absent when
    /// the lease bucket does not answer.
    pub holder: Option<String>,
    /// The newest log frame this node's database holds.
    pub last_frame: u64,
    /// The newest frame the stream took from this node (a primary).
    pub shipped_frame: u64,
    /// The stream sequence of the last frame applied (a standby).
    pub applied_sequence: u64,
}

/// `POST /api/reload`: the config and its secret files re-read, and what
/// that changed. Each part is named as the config names it: `server`,
/// `source.stripe`, `destination.stripe.app`, `admin.token`,
/// `admin.user.ana`, `keys.client.billing`, `keys`, `alerts`, …
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Reloaded {
    /// The file read, or `(embedded)`.
    pub origin: String,
    /// What changed and is in force now, for requests from now on
    /// (requests and attempts in flight finish as they started).
    pub applied: Vec<PartChanged>,
    /// What changed but only a restart takes; each is left as it was.
    pub needs_restart: Vec<PartChanged>,
    /// The new config's non-fatal findings (inline secrets, …).
    pub warnings: Vec<String>,
}

/// One part of the config a reload found changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PartChanged {
    pub part: String,
    pub change: ConfigChange,
}

/// `POST /api/sweep`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SweepResult {
    pub delivered: u64,
    pub dead_or_ignored: u64,
    pub dedupe_keys: u64,
    /// Idempotency keys past their `ttl` (done) or expiry (issue 28).
    /// Absent from a server before keys: read as 0.
    #[serde(default)]
    pub keys: u64,
    /// Audit records past `retention.audit_ttl`. Absent from a server
    /// before the audit trail: read as 0.
    #[serde(default)]
    pub audit: u64,
    pub steps: u64,
    pub millis: u64,
}

/// Every error answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApiError {
    pub error: ErrorCode,
    /// What went wrong and what to do, for a person.
    pub reason: String,
    /// With `forbidden` for a person's token: the least role that may call
    /// the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_needed: Option<Role>,
    /// With `standby`: the replication primary as this node last saw it
    /// (absent while no node holds the lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<Primary>,
}

/// The replication primary a standby names in its refusals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Primary {
    /// Its `[replication] node` name.
    pub node: String,
    /// Its admin listener's address, when it listens on one others can
    /// reach (not a wildcard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<String>,
}

/// `GET /api/whoami`: who the request's token belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Whoami {
    /// `admin` for the `[admin]` token, else the `[[admin.user]]` name.
    pub name: String,
    pub role: Role,
    /// When the token stops working, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Timestamp>,
}

/// `/readyz`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Readiness {
    pub ready: bool,
    pub store: String,
    pub scheduler: String,
}

/// How long a search call may read payloads before it answers.
pub const SEARCH_TIME: Duration = Duration::from_millis(500);
/// How many payloads a search call may read before it answers.
pub const SEARCH_EVENTS: u64 = 200_000;

/// `/healthz`: the process answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}

/// `POST /api/destinations/{name}/pause` and `…/resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PauseResult {
    pub name: String,
    pub paused: bool,
}

/// A word of the API's (a time, a status, a key's state, an audit action)
/// as a query or the command line writes it, that is not one; clap shows
/// it after the option it was given to. Keeps the text as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WordError {
    #[error(
        "{text:?} is not an RFC 3339 time like 2026-11-22T10:00:00Z or 2026-11-22T11:00:00+01:00"
    )]
    Time { text: String },
    /// Not one of a closed list's names; `expected` says them.
    #[error("{text:?}: expected {expected}")]
    Unknown {
        text: String,
        expected: &'static str,
    },
    #[error("unknown action {text:?}: one of {}", audit::action_names())]
    Action { text: String },
}

impl std::str::FromStr for Timestamp {
    type Err = WordError;

    /// RFC 3339, as a query or the command line writes it, with `Z`, any
    /// offset (`+01:00`, `-05:30`) or none (UTC). humantime reads the time
    /// but knows no offset but `Z`: the offset is split off here and taken
    /// away from its reading.
    fn from_str(text: &str) -> Result<Timestamp, WordError> {
        let bad = || WordError::Time {
            text: text.to_owned(),
        };
        let (local, offset_ms) = split_offset(text).ok_or_else(bad)?;
        let local = humantime::parse_rfc3339_weak(local).map_err(|_| bad())?;
        let utc = i128::from(crate::clock::unix_ms(local)) - i128::from(offset_ms);
        u64::try_from(utc).map(Timestamp).map_err(|_| bad())
    }
}

/// `text` without its trailing UTC offset (`+HH:MM`, `-HH:MM`), and the
/// offset in milliseconds (east of UTC positive); no offset (or `Z`, which
/// humantime reads) is 0. `None`: an offset out of range.
fn split_offset(text: &str) -> Option<(&str, i64)> {
    let Some(at) = text.len().checked_sub(6) else {
        return Some((text, 0));
    };
    let (local, offset) = text.split_at_checked(at)?;
    let b = offset.as_bytes();
    let sign = match b[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return Some((text, 0)),
    };
    let digits = |s: &[u8]| -> Option<i64> {
        s.iter()
            .all(u8::is_ascii_digit)
            .then(|| s.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    // A date alone (`2026-11-22`) ends in `-11-22`: no colon, no offset.
    if b[3] != b':' || !local.contains('T') && !local.contains(' ') {
        return Some((text, 0));
    }
    let (hours, minutes) = (digits(&b[1..3])?, digits(&b[4..6])?);
    if hours > 23 || minutes > 59 {
        return None;
    }
    Some((local, sign * (hours * 60 + minutes) * 60_000))
}

impl std::str::FromStr for EventStatus {
    type Err = WordError;

    fn from_str(text: &str) -> Result<EventStatus, WordError> {
        [
            EventStatus::Pending,
            EventStatus::Held,
            EventStatus::Delivered,
            EventStatus::Dead,
            EventStatus::Ignored,
            EventStatus::Filtered,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
        .ok_or_else(|| WordError::Unknown {
            text: text.to_owned(),
            expected: "pending, held, delivered, dead, ignored or filtered",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{AuditAction, EventStatus, KeyListState, Timestamp, WordError};

    /// Regression: a time with an offset (`+01:00`) was refused.
    #[test]
    fn a_time_takes_any_rfc3339_offset() {
        let at = |text: &str| text.parse::<Timestamp>();
        let utc = at("2026-11-21T09:00:00Z").unwrap();
        assert_eq!(at("2026-11-21T10:00:00+01:00"), Ok(utc));
        assert_eq!(at("2026-11-21T03:30:00-05:30"), Ok(utc));
        assert_eq!(at("2026-11-21T09:00:00+00:00"), Ok(utc));
        assert_eq!(at("2026-11-21T09:00:00"), Ok(utc));
        assert_eq!(
            at("2026-11-21T10:00:00.250+01:00"),
            Ok(Timestamp(utc.0 + 250))
        );
        for bad in [
            "2026-11-21T10:00:00+24:00",
            "2026-11-21T10:00:00+1:00",
            "yesterday",
            "",
        ] {
            assert_eq!(
                at(bad),
                Err(WordError::Time {
                    text: bad.to_owned()
                }),
                "{bad}"
            );
        }
    }

    /// Each word's error keeps the text as written, and reads as the
    /// message clap and the admin API showed when it was a string.
    #[test]
    fn a_word_that_is_not_one_keeps_its_text_and_its_message() {
        let status = "sent".parse::<EventStatus>().unwrap_err();
        assert_eq!(
            status.to_string(),
            "\"sent\": expected pending, held, delivered, dead, ignored or filtered"
        );
        let state = "open".parse::<KeyListState>().unwrap_err();
        assert!(
            matches!(&state, WordError::Unknown { text, .. } if text == "open"),
            "{state:?}"
        );
        assert_eq!(state.to_string(), "\"open\": expected claimed or done");
        let action = "explode".parse::<AuditAction>().unwrap_err();
        assert_eq!(
            action,
            WordError::Action {
                text: "explode".to_owned()
            }
        );
        assert!(
            action
                .to_string()
                .starts_with("unknown action \"explode\": one of "),
            "{action}"
        );
    }
}
