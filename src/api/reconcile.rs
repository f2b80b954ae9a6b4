//! Reconcile passes on the wire: `GET /api/reconcile` (each source's last
//! pass) and `POST /api/reconcile/{source}` (one pass, by hand).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Timestamp;
use crate::words::ReconcileOutcome;

/// `POST /api/reconcile/{source}?since=2h&dry_run=true`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReconcileQuery {
    /// Look back this far (`2h`, `3d`), from now, instead of from where the
    /// source's passes got to; such a pass moves no cursor.
    pub since: Option<String>,
    /// List and compare only: ask for nothing, store nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// What one pass found and did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReconcileReport {
    pub source: String,
    /// What the pass read: `repos/acme/shop/hooks/12`, `events`,
    /// `projects/42/hooks/7`, `notifications to ntfset_…`.
    pub target: String,
    pub started_at: Timestamp,
    pub took_ms: u64,
    pub outcome: ReconcileOutcome,
    /// Why it was not `ok`, in a sentence without secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub dry_run: bool,
    /// Events the provider says it could not deliver (one per event id).
    pub listed: u64,
    /// Of those, already held by hookinbox.
    pub held: u64,
    /// Asked to send again (would have been, on a dry run).
    pub resent: u64,
    /// Fetched and stored (would have been, on a dry run).
    pub fetched: u64,
    /// Requests to resend whatever failed in a span of time, for a provider
    /// that lists nothing and does not say how many it resends (Svix):
    /// what comes back is stored once, what hookinbox holds is a duplicate.
    #[serde(default)]
    pub recovers: u64,
    /// Not asked again: a resend hookinbox had refused (a bad signature
    /// stays bad), one the provider is still retrying by itself or has
    /// replayed before, or one it cannot send again (it kept no body, or
    /// refuses the resend).
    pub skipped: u64,
    /// Pages listed and calls made.
    pub pages: u32,
    pub calls: u32,
    /// `false`: it stopped at its page limit; the next pass goes on.
    pub complete: bool,
    /// Whether the provider still sends here (GitHub's hook `active`,
    /// Stripe's endpoint `enabled`, GitLab's hook not disabled, Paddle's
    /// notification destination `active`); absent when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_active: Option<bool>,
}

/// `GET /api/reconcile`: every source with `[source.reconcile]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReconcileSources {
    pub sources: Vec<ReconcileSource>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReconcileSource {
    pub source: String,
    pub target: String,
    pub interval_ms: u64,
    pub lookback_ms: u64,
    /// The last pass since hookinbox started, by timer or by hand.
    pub last: Option<ReconcileReport>,
    pub last_success_at: Option<Timestamp>,
    /// Whether the provider still sends here, as the last pass that read
    /// it said (a pass that failed keeps what the one before read).
    #[serde(default)]
    pub subscription_active: Option<bool>,
    /// The newest pass (not a dry run) that got events back.
    #[serde(default)]
    pub last_recovered: Option<Recovered>,
}

/// What a pass got back, and when it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Recovered {
    pub at: Timestamp,
    pub resent: u64,
    pub fetched: u64,
}
