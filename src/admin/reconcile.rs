//! `GET /api/reconcile` (each source's last reconcile pass) and `POST
//! /api/reconcile/{source}` (one pass now, by hand). Refuses to run a pass
//! itself: the reconciler's task does, through its handle, so a pass by
//! hand never overlaps a timed one.

use axum::Json;
use axum::extract::{Path, Query, State};

use super::AdminState;
use super::error::{AdminError, Unauthorized};
use crate::api;
use crate::reconcile::ByHandError;

/// The longest `since` a pass by hand takes: longer than any provider keeps
/// what it could not deliver.
const LONGEST_SINCE: std::time::Duration = std::time::Duration::from_secs(90 * 86_400);

/// Every source with `[source.reconcile]`: what it reads, how often, and
/// its last pass since hookinbox started.
#[utoipa::path(get, path = "/api/reconcile", tag = "operations",
    responses((status = 200, description = "Each reconciled source and its last pass", body = api::ReconcileSources), Unauthorized))]
pub(super) async fn sources(State(state): State<AdminState>) -> Json<api::ReconcileSources> {
    Json(state.reconcile.sources())
}

/// Runs one pass of `source` now (after a pass under way) and answers what
/// it found: held, asked to resend, fetched. `since` looks back from now
/// and moves no cursor; `dry_run` asks for nothing and stores nothing.
#[utoipa::path(post, path = "/api/reconcile/{source}", tag = "operations",
    params(("source" = String, Path, description = "A source with [source.reconcile]"), api::ReconcileQuery),
    responses((status = 200, description = "The pass's report (its outcome says whether the provider answered)", body = api::ReconcileReport),
              (status = 400, description = "A query parameter that does not parse", body = api::ApiError),
              (status = 404, description = "No such source, or it has no [source.reconcile]", body = api::ApiError),
              (status = 503, description = "Stopping, or a standby (passes run on the primary)", body = api::ApiError),
              Unauthorized))]
pub(super) async fn pass(
    State(state): State<AdminState>,
    Path(source): Path<String>,
    query: Result<Query<api::ReconcileQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<api::ReconcileReport>, AdminError> {
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let since = query
        .since
        .as_deref()
        .map(|text| {
            let d = crate::config::parse_duration(text)
                .map_err(|e| AdminError::BadRequest(format!("since: {e}")))?;
            if d.is_zero() || d > LONGEST_SINCE {
                return Err(AdminError::BadRequest(
                    "since must be longer than 0s and at most 90 days".to_owned(),
                ));
            }
            Ok(d)
        })
        .transpose()?;
    if state.store.is_standby() {
        return Err(AdminError::Unavailable(ByHandError::NotRunning.to_string()));
    }
    match state.reconcile.pass(&source, since, query.dry_run).await {
        Ok(report) => Ok(Json(report)),
        Err(e @ ByHandError::NotReconciled(_)) => Err(AdminError::NotFound(e.to_string())),
        Err(e @ ByHandError::NotRunning) => Err(AdminError::Unavailable(e.to_string())),
    }
}
