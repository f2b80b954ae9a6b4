//! Payload shapes on the wire: `GET /api/shapes`, what the drift watch
//! learned per (source, event type) and the departures it recorded.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Timestamp;
use crate::words::DriftChange;

/// `GET /api/shapes?source=S`: one source's, or every source's.
#[derive(Debug, Clone, Default, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ShapesQuery {
    pub source: Option<String>,
}

/// What the events of each (source, event type) carried, and where a later
/// event departed from it, newest departure first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Shapes {
    pub shapes: Vec<ShapeView>,
    pub drifts: Vec<DriftView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ShapeView {
    pub source: String,
    /// `(none)` for events without one.
    pub event_type: String,
    /// Events learned (at most 50 a second of each are).
    pub events: u64,
    /// Some event had more fields, or deeper ones, than a shape keeps.
    pub truncated: bool,
    /// Each JSON pointer seen (`*`: an array's items, or the keys of an
    /// object taken for a map keyed by data).
    pub fields: Vec<FieldView>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct FieldView {
    pub pointer: String,
    /// Learned events that carried it.
    pub seen: u64,
    /// The JSON types seen there, `|`-joined (`string|null`).
    pub types: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DriftView {
    pub source: String,
    pub event_type: String,
    pub pointer: String,
    pub change: DriftChange,
    /// The types learned there before (empty for an added field).
    pub was: String,
    /// Its type in the event that departed (empty for a missing field).
    pub now: String,
    /// When that event was received.
    pub at: Timestamp,
    /// That event's id.
    pub event: String,
}
