//! `GET /api/shapes`: what the payload drift watch learned and the
//! departures it recorded. Read-only; it learns nothing itself (`drift`
//! does).

use axum::Json;
use axum::extract::{Query, State};

use super::AdminState;
use super::error::{AdminError, Unauthorized};
use crate::api::{self, Timestamp};

/// Per (source, event type): the JSON pointers its events carried, with
/// how many carried each and the types seen; and each departure of a later
/// event (a field missing, added or retyped), newest first.
#[utoipa::path(get, path = "/api/shapes", tag = "operations", params(api::ShapesQuery),
    responses((status = 200, description = "Shapes learned, and departures from them, newest first", body = api::Shapes),
              (status = 400, description = "A query parameter that does not parse", body = api::ApiError), Unauthorized))]
pub(super) async fn shapes(
    State(state): State<AdminState>,
    query: Result<Query<api::ShapesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<api::Shapes>, AdminError> {
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let wanted = |source: &str| query.source.as_deref().is_none_or(|s| s == source);
    let learned = state.shapes.lock().unwrap_or_else(|p| p.into_inner());
    let shapes = learned
        .shapes
        .iter()
        .filter(|((source, _), _)| wanted(source))
        .map(|((source, event_type), shape)| api::ShapeView {
            source: source.clone(),
            event_type: event_type.clone(),
            events: shape.events,
            truncated: shape.truncated,
            fields: shape
                .fields
                .iter()
                .map(|(pointer, field)| api::FieldView {
                    pointer: pointer.clone(),
                    seen: field.seen,
                    types: field.types.names(),
                })
                .collect(),
        })
        .collect();
    let drifts = learned
        .drifts
        .iter()
        .rev()
        .filter(|d| wanted(&d.source))
        .map(|d| api::DriftView {
            source: d.source.clone(),
            event_type: d.event_type.clone(),
            pointer: d.pointer.clone(),
            change: d.change,
            was: d.was.clone(),
            now: d.now.clone(),
            at: Timestamp(d.at_ms),
            event: d.event.clone(),
        })
        .collect();
    Ok(Json(api::Shapes { shapes, drifts }))
}
