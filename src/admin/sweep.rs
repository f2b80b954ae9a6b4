//! `POST /api/sweep`: run the retention sweep now and say what it removed.
//! Refuses to sweep itself: the sweep task does, through its handle.

use axum::Json;
use axum::extract::State;

use super::AdminState;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use crate::api;

#[utoipa::path(post, path = "/api/sweep", tag = "operations",
    responses((status = 200, description = "What the sweep removed", body = api::SweepResult), Unauthorized, StoreUnavailable))]
pub(super) async fn sweep_now(
    State(state): State<AdminState>,
) -> Result<Json<api::SweepResult>, AdminError> {
    let t = state.sweep.sweep_now().await?;
    Ok(Json(api::SweepResult {
        delivered: t.delivered,
        dead_or_ignored: t.dead_or_ignored,
        dedupe_keys: t.dedupe_keys,
        keys: t.keys,
        audit: t.audit,
        steps: t.steps,
        millis: t.millis,
    }))
}
