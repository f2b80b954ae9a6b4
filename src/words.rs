//! The words modules use to say what happened: roles, audit actions,
//! reasons, outcomes, states and kinds, each an enum with the one text it
//! prints in the exposition, the admin API, the audit trail and the logs.
//!
//! Owns that text (`words!`), so a counter, an answer and a log line can
//! never name a thing differently. Refuses any meaning beyond the name: how
//! a word is counted is `metrics`', how it goes on the wire `api`'s, who
//! may do what `admin`'s. Imports nothing of the crate, so `config`,
//! `verify`, `store`, `deliver`, `api` and `metrics` all import it without
//! importing each other. Modules with their own enum for the same thing map
//! it here beside that enum (`From`).

/// Declares an enum whose text is given beside each variant: its `as_str`,
/// every value in `ALL`, serde as that text, and an OpenAPI string schema
/// listing the values.
///
/// Not `#[derive(Serialize)]` with `rename_all`: the text is written out
/// beside each variant, so a rename is a visible change of a published word.
macro_rules! words {
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

            /// The word as the exposition, the admin API and the logs print it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The variant whose text is `text`, if any.
            pub fn parse(text: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.as_str() == text)
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

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                $name::parse(&text).ok_or_else(|| {
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

words! {
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

words! {
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
        /// A reconcile pass run by hand (`hookinbox reconcile`).
        Reconcile => "reconcile",
        /// The config re-read (`POST /api/reload`).
        Reload => "reload",
        /// A payload read whole that viewers see with values masked (the
        /// source's `redact`): an event's detail, or an event stream with
        /// payloads.
        ReadUnredacted => "read_unredacted",
        Other => "other",
    }
}

/// The source label of a request to no configured source. Never the name
/// the request sent: that is caller-chosen, an unbounded label.
pub const UNKNOWN_SOURCE: &str = "(unknown)";

words! {
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
        ExpiredSecret => "expired_secret",
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

words! {
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

words! {
    /// A circuit breaker's state (`circuit_transitions{state}`, and the
    /// `circuit_state` gauge's value); `deliver::breaker` maps its
    /// `CircuitState` here.
    pub enum Circuit {
        Closed => "closed",
        HalfOpen => "half_open",
        Open => "open",
    }
}

words! {
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

words! {
    /// Why an alert was posted (`alerts{kind}`); also the alert's name in
    /// its JSON body and log line.
    pub enum AlertKind {
        /// A source's DLQ holds more than `dlq_threshold` events.
        Dlq => "dlq",
        /// A source's oldest pending event is older than `pending_age`.
        PendingAge => "pending_age",
        /// A destination's circuit is open.
        CircuitOpen => "circuit_open",
        /// A source sent nothing new for longer than its `expect_within`.
        Quiet => "quiet",
        /// A source's events departed from their learned payload shape
        /// within the last hour (a field missing, added or retyped).
        Drift => "drift",
        /// A reconcile pass within the last hour got back events the
        /// provider could not deliver and hookinbox never received.
        MissedEvents => "missed_events",
        /// The provider says it no longer sends to the source (its hook
        /// inactive, its endpoint disabled), as the last pass read it.
        SubscriptionDisabled => "subscription_disabled",
        /// A source secret the provider still signs with (or the last one
        /// left) expires within `secret_notice`, or has expired.
        SecretExpiring => "secret_expiring",
    }
}

words! {
    /// How an event's payload departed from what its source sent before
    /// (`payload_drift_total{change}`, `GET /api/shapes`).
    pub enum DriftChange {
        /// A field every earlier event had is absent.
        Missing => "missing",
        /// A field no earlier event had.
        Added => "added",
        /// A field with a type it never had (null aside).
        TypeChanged => "type_changed",
    }
}

words! {
    /// How a stored event came in (`GET /api/events/{id}`'s `origin`).
    pub enum EventOrigin {
        /// A request to `/in/{source}` whose signature verified.
        Received => "received",
        /// Fetched from the provider's API by a reconcile pass: no signature
        /// covers it; its headers say where it came from.
        Reconciled => "reconciled",
    }
}

words! {
    /// How a reconcile pass ended (`reconcile_runs_total{outcome}`).
    pub enum ReconcileOutcome {
        /// The provider answered every call the pass made.
        Ok => "ok",
        /// The provider refused the credential (401, 403): nothing is asked
        /// again until the next pass.
        Refused => "refused",
        /// The provider asked to wait longer than a pass waits (429 and
        /// `Retry-After`, or its rate limit spent).
        Throttled => "throttled",
        /// The provider unreachable, an answer not understood, or the store
        /// not taking what was fetched.
        Failed => "failed",
    }
}

words! {
    /// How an event hookinbox never received came back (`reconciled_total{how}`).
    pub enum ReconciledHow {
        /// The provider was asked to send it again: it arrives signed, through
        /// ingest, and dedupes on its id.
        Resent => "resent",
        /// Fetched from the provider's API (no resend exists) and stored marked
        /// `origin = "reconciled"`.
        Fetched => "fetched",
    }
}

words! {
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
        /// A reload's config does not pass `config check`: nothing of it
        /// was taken.
        ConfigInvalid => "config_invalid",
    }
}

words! {
    /// What a reload found changed in one part of the config.
    pub enum ConfigChange {
        Added => "added",
        Removed => "removed",
        Changed => "changed",
    }
}

words! {
    /// Whether an alert post says a condition fires or has cleared
    /// (`alerts{status}`, and the alert body's `status`).
    pub enum AlertStatus {
        Firing => "firing",
        Resolved => "resolved",
    }
}

words! {
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

words! {
    /// Which listener a connection came to (`open_connections{listener}`,
    /// and the logs' `listener`).
    pub enum Listener {
        Ingest => "ingest",
        Admin => "admin",
        /// The admin API on `server.admin_socket`.
        AdminSocket => "admin_socket",
    }
}

words! {
    /// What a node of a replicated inbox does (`[replication] role`, and
    /// `replication_role`'s value).
    pub enum ReplicationRole {
        /// Takes webhooks and delivers them, its log shipped to the stream.
        Primary => "primary",
        /// Follows the stream, serves reads, and takes over when the primary's
        /// lease lapses.
        Standby => "standby",
    }
}

words! {
    /// How a primary's log frames are compressed in the replication stream
    /// (`[replication] compression`, and a message's `Hookinbox-Codec`).
    pub enum FrameCodec {
        /// zstd at level 1, whole frames: similar events shrink several
        /// times over, for a few µs per event.
        Zstd => "zstd",
        /// As the log holds them: for standbys of builds before 0.3.0's
        /// compression, until they are upgraded.
        Plain => "none",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_snake_case_and_unique() {
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
        check(Role::ALL, Role::as_str);
        check(AuditAction::ALL, AuditAction::as_str);
        check(RejectReason::ALL, RejectReason::as_str);
        check(AttemptOutcome::ALL, AttemptOutcome::as_str);
        check(Circuit::ALL, Circuit::as_str);
        check(SweptKind::ALL, SweptKind::as_str);
        check(AlertKind::ALL, AlertKind::as_str);
        check(DriftChange::ALL, DriftChange::as_str);
        check(AdminReason::ALL, AdminReason::as_str);
        check(AlertStatus::ALL, AlertStatus::as_str);
        check(KeyClaimOutcome::ALL, KeyClaimOutcome::as_str);
        check(Listener::ALL, Listener::as_str);
        check(ReplicationRole::ALL, ReplicationRole::as_str);
        check(FrameCodec::ALL, FrameCodec::as_str);
    }
}
