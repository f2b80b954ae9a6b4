//! Activity on the wire: `GET /api/activity`'s query and answer, per
//! source and per destination, minute by minute (or step by step).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Timestamp;

/// `GET /api/activity?hours=N` (1–168, default 6): per source and minute,
/// oldest first; minutes with nothing are left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Activity {
    pub minutes: Vec<MinuteCounts>,
    /// Per destination and minute: attempts, how many failed, and how long
    /// they took (absent from servers before it: empty).
    #[serde(default)]
    pub destinations: Vec<DestinationMinute>,
    /// The upper bounds, ms, of the `latency` buckets of
    /// [`DestinationMinute`]; its last bucket is above the last bound.
    #[serde(default)]
    pub latency_bounds_ms: Vec<u64>,
    /// Minutes each row adds up (the query's `step`; absent from servers
    /// before it: 1). A row's `minute` is its first.
    #[serde(default = "one_minute")]
    pub step_minutes: u64,
}

fn one_minute() -> u64 {
    1
}

/// One destination's attempts in one minute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DestinationMinute {
    /// The minute's start.
    pub minute: Timestamp,
    /// Its name: the source's, or `source.name`.
    pub destination: String,
    /// Attempts started in the minute.
    pub attempts: u64,
    /// Those that did not deliver (refused, to retry, timed out, no
    /// connection, interrupted).
    pub failed: u64,
    /// Attempts per latency bucket (`latency_bounds_ms`), an interrupted
    /// one not counted.
    pub latency: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MinuteCounts {
    /// The minute's start.
    pub minute: Timestamp,
    pub source: String,
    pub received: u64,
    pub duplicates: u64,
    pub delivered: u64,
    pub dead_lettered: u64,
}

/// The query of `GET /api/activity`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ActivityQuery {
    /// How far back, 1–168 (default 6).
    pub hours: Option<u64>,
    /// Minutes a row adds up, 1–60 (default 1): a week at 14 is 720 rows
    /// a source, not 10,080.
    pub step: Option<u64>,
}
