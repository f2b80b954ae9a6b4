//! `/api/destinations`: each destination's state, and pause / resume
//! through the scheduler's handle. Refuses to change a destination's
//! config: that is the config file's.

use axum::Json;
use axum::extract::{Path, State};

use super::AdminState;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use crate::api;
use crate::schedule::PauseError;

#[utoipa::path(get, path = "/api/destinations", tag = "destinations",
    responses((status = 200, description = "Each destination's state", body = api::Destinations), Unauthorized))]
pub(super) async fn destinations(State(state): State<AdminState>) -> Json<api::Destinations> {
    let destinations = state
        .delivery
        .destinations()
        .into_iter()
        .map(|d| api::DestinationState {
            source: d.source.clone(),
            name: d.name,
            url: d.url,
            paused: d.paused,
            circuit: d.circuit.into(),
            in_flight: d.in_flight,
            max_concurrency: d.max_concurrency,
            last_failure: d.last_failure,
        })
        .collect();
    Json(api::Destinations { destinations })
}

async fn set_paused(
    state: &AdminState,
    name: &str,
    paused: bool,
) -> Result<Json<api::PauseResult>, AdminError> {
    let result = if paused {
        state.delivery.pause(name).await
    } else {
        state.delivery.resume(name).await
    };
    match result {
        Ok(()) => Ok(Json(api::PauseResult {
            name: name.to_owned(),
            paused,
        })),
        Err(PauseError::UnknownDestination(_)) => Err(AdminError::NotFound(format!(
            "no destination named {name:?}"
        ))),
        Err(PauseError::Store(e)) => Err(AdminError::Store(e)),
    }
}

#[utoipa::path(post, path = "/api/destinations/{name}/pause", tag = "destinations",
    params(("name" = String, Path, description = "The source's name")),
    responses((status = 200, description = "Paused: events accumulate", body = api::PauseResult),
              (status = 404, description = "No such destination", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn pause(
    State(state): State<AdminState>,
    Path(name): Path<String>,
) -> Result<Json<api::PauseResult>, AdminError> {
    set_paused(&state, &name, true).await
}

#[utoipa::path(post, path = "/api/destinations/{name}/resume", tag = "destinations",
    params(("name" = String, Path, description = "The source's name")),
    responses((status = 200, description = "Delivering again, oldest first", body = api::PauseResult),
              (status = 404, description = "No such destination", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn resume(
    State(state): State<AdminState>,
    Path(name): Path<String>,
) -> Result<Json<api::PauseResult>, AdminError> {
    set_paused(&state, &name, false).await
}
