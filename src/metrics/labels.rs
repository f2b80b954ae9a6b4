//! Label values: every enum a series is labelled with, the label sets of
//! each family, and [`UNKNOWN_SOURCE`].
//!
//! Owns the text each label value prints, in the exposition and in the admin
//! API alike (`label_values!`). Refuses anything a caller makes up: every
//! label but the source is an enum, and a source is a configured name or
//! [`UNKNOWN_SOURCE`]. Modules with their own enum for the same thing map it
//! here beside that enum (`From`), so this file imports nothing of the crate.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

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

label_values! {
    /// What an operator's token may do on the admin API, least first
    /// (`[[admin.user]]`; the `[admin]` token is `admin`): `viewer` reads;
    /// `operator` also replays, ignores, pauses and resumes, and runs bulk
    /// changes (their dry runs too); `admin` also erases payloads, sweeps,
    /// takes backups, promotes a standby and deletes idempotency keys.
    pub enum Role {
        Viewer => "viewer",
        Operator => "operator",
        Admin => "admin",
    }
}

label_values! {
    /// What a person did through the admin API, as the audit trail records
    /// it (`admin::routes` names each changing route's; `GET /api/audit`'s
    /// `action`). `other` is a path this build does not name, or an action
    /// a newer build recorded.
    pub enum AuditAction {
        Replay => "replay",
        Ignore => "ignore",
        Erase => "erase",
        BulkReplay => "bulk_replay",
        BulkIgnore => "bulk_ignore",
        Pause => "pause",
        Resume => "resume",
        Sweep => "sweep",
        Backup => "backup",
        Promote => "promote",
        KeyDelete => "key_delete",
        /// A claim, complete, release or extend of an idempotency key: an
        /// app's, refused to a person.
        KeyChange => "key_change",
        Other => "other",
    }
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
        /// A replication standby: the primary takes webhooks.
        Standby => "standby",
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
    pub(super) fn level(self) -> i64 {
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
        /// An idempotency key past its expiry (`[keys]`).
        IdempotencyKey => "idempotency_key",
        /// An audit record past `audit_ttl`.
        AuditRecord => "audit_record",
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
        Forbidden => "forbidden",
        NotFound => "not_found",
        BadRequest => "bad_request",
        Conflict => "conflict",
        PayloadTooLarge => "payload_too_large",
        StoreUnavailable => "store_unavailable",
        StoreError => "store_error",
        InternalError => "internal_error",
        /// A replication standby: the primary serves the keys API.
        Standby => "standby",
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
        DedupeRuns => "dedupe_runs",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StoreFileLabel {
    pub(super) file: StoreFile,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabels {
    pub(super) version: &'static str,
    /// The git commit the binary was built from (`build.rs`), or `unknown`.
    pub(super) commit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    pub source: String,
}

/// A replication node's configured name (`[replication] node`): the
/// holder of the lease, in `replication_lease_holder`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    pub node: String,
}

label_values! {
    /// What a claim of an idempotency key came to (`key_claims{outcome}`).
    pub enum KeyClaimOutcome {
        /// Granted: the caller holds it now.
        Claimed => "claimed",
        /// Already done: the caller answers without doing it again.
        Done => "done",
        /// Another worker holds it.
        Busy => "busy",
    }
}

/// A key namespace's series: a configured `[[keys.client]]` namespace only.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabel {
    pub namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyClaimLabels {
    pub namespace: String,
    pub outcome: KeyClaimOutcome,
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

#[cfg(test)]
mod tests {
    use super::*;

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
        check(KeyClaimOutcome::ALL, KeyClaimOutcome::as_str);
    }
}
