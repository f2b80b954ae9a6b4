//! Label sets: the labels of each family, and how each of `words`' enums
//! prints as a label value.
//!
//! Owns the label sets (`EncodeLabelSet`) and the one rule that a word's
//! label value is its `as_str`, the same text the admin API and the logs
//! print. Refuses anything a caller makes up: every label but the source,
//! destination and node is a word, and a source is a configured name or
//! [`UNKNOWN_SOURCE`](crate::words::UNKNOWN_SOURCE).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

use crate::words::{
    AdminReason, AlertKind, AlertStatus, AttemptOutcome, Circuit, DriftChange, KeyClaimOutcome,
    Listener, ReconcileOutcome, ReconciledHow, RejectReason, SweptKind,
};

/// Each word's label value is its `as_str`. Not
/// `#[derive(EncodeLabelValue)]`: the derive prints the variant's name
/// (`RetryableStatus`), and the published series say `retryable_status`.
macro_rules! label_values {
    ($($name:ty),+ $(,)?) => {
        $(impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        })+
    };
}

label_values!(
    AdminReason,
    AlertKind,
    DriftChange,
    AlertStatus,
    AttemptOutcome,
    Circuit,
    KeyClaimOutcome,
    Listener,
    ReconcileOutcome,
    ReconciledHow,
    RejectReason,
    StoreFile,
    SweptKind,
);

/// The `circuit_state` gauge's value, as its help text says.
pub(super) fn circuit_level(state: Circuit) -> i64 {
    match state {
        Circuit::Closed => 0,
        Circuit::HalfOpen => 1,
        Circuit::Open => 2,
    }
}

/// One of the store's files (`store_file_bytes{file}`): a label only the
/// metrics print.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(super) enum StoreFile {
    Database,
    Wal,
    DedupeRuns,
}

impl StoreFile {
    pub(super) const ALL: &'static [StoreFile] =
        &[StoreFile::Database, StoreFile::Wal, StoreFile::DedupeRuns];

    fn as_str(self) -> &'static str {
        match self {
            StoreFile::Database => "database",
            StoreFile::Wal => "wal",
            StoreFile::DedupeRuns => "dedupe_runs",
        }
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

/// A source and how its reconcile pass ended.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileRunLabels {
    pub source: String,
    pub outcome: ReconcileOutcome,
}

/// A source and how an event it never received came back.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconciledLabels {
    pub source: String,
    pub how: ReconciledHow,
}

/// A source and how one of its payloads departed from its shape.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriftLabels {
    pub source: String,
    pub change: DriftChange,
}

/// A source secret, by its name (never its value): in
/// `signature_matches`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SecretLabels {
    pub source: String,
    pub secret: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: SweptKind,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: AdminReason,
}
