//! Secrets on the wire: `GET /api/secrets`, what `hookinbox secrets`
//! lists. Names, places and times only: never a value.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Timestamp;

/// Every source secret in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SecretList {
    /// The server's time: ages and expiries are against it.
    pub now: Timestamp,
    pub secrets: Vec<SecretInfo>,
}

/// One source secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SecretInfo {
    pub source: String,
    /// Its `[[source.secrets]]` name, or where it is kept (`stripe.secret`,
    /// `$STRIPE_SECRET`, `inline`).
    pub name: String,
    pub place: SecretPlace,
    /// When hookinbox first had this value (its age).
    pub first_seen: Timestamp,
    /// From then on it verifies nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<Timestamp>,
    pub expired: bool,
    /// When it last verified an event; none: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_match: Option<Timestamp>,
    /// Events it verified since `first_seen`.
    pub matches: u64,
}

/// Where a secret is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SecretPlace {
    /// A file (one the data dir holds, for a generated secret).
    File { path: String },
    /// An environment variable.
    Env { var: String },
    /// Written in the config file.
    Inline,
}
