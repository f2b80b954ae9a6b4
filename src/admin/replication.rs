//! `GET /api/replication` and `POST /api/replication/promote`: a
//! replicating node's role, who holds the lease, how far its log is; and a
//! standby made the primary by hand (`hookinbox promote`). Refuses both on
//! a node without `[replication]`.

use std::time::Duration;

use axum::Json;
use axum::extract::State;

use super::AdminState;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use crate::api;

/// How long a promotion may take before the answer says it goes on: the
/// stream applied to its end, the lease taken, the first frame shipped.
const PROMOTE_WAIT: Duration = Duration::from_secs(60);

#[utoipa::path(get, path = "/api/replication", tag = "operations",
    responses((status = 200, description = "This node's role, the lease's holder and the log's progress", body = api::ReplicationStatus),
              (status = 409, description = "This node does not replicate (no [replication])", body = api::ApiError),
              Unauthorized, StoreUnavailable))]
pub(super) async fn status(
    State(state): State<AdminState>,
) -> Result<Json<api::ReplicationStatus>, AdminError> {
    Ok(Json(replication_status(&state).await?))
}

#[utoipa::path(post, path = "/api/replication/promote", tag = "operations",
    responses((status = 200, description = "This standby is the primary now: it took the lease (from whoever held it: that node steps down at its next renewal), applied the stream to its end and takes webhooks", body = api::ReplicationStatus),
              (status = 409, description = "This node is already the primary, or does not replicate", body = api::ApiError),
              (status = 503, description = "The promotion goes on (the lease cannot be taken yet, or the stream is still being applied): ask again", body = api::ApiError),
              Unauthorized))]
pub(super) async fn promote(
    State(state): State<AdminState>,
) -> Result<Json<api::ReplicationStatus>, AdminError> {
    let control = control(&state)?;
    if !state.store.is_standby() {
        return Err(AdminError::Conflict(
            "this node is the primary already".to_owned(),
        ));
    }
    tracing::warn!(
        node = control.lease.node(),
        "promote asked for through the admin API"
    );
    control.promote();
    if tokio::time::timeout(PROMOTE_WAIT, state.store.promoted())
        .await
        .is_err()
    {
        return Err(AdminError::Unavailable(format!(
            "not promoted within {} s: the lease cannot be taken or the stream is still being applied (see the log); ask again",
            PROMOTE_WAIT.as_secs()
        )));
    }
    Ok(Json(replication_status(&state).await?))
}

fn control(state: &AdminState) -> Result<&crate::replicate::Control, AdminError> {
    state.replication.as_ref().ok_or_else(|| {
        AdminError::Conflict(
            "this node does not replicate: it has no [replication] section".to_owned(),
        )
    })
}

async fn replication_status(state: &AdminState) -> Result<api::ReplicationStatus, AdminError> {
    let control = control(state)?;
    let store = state.store.clone();
    let (last_frame, applied_sequence) =
        tokio::task::spawn_blocking(move || store.last_frame()).await??;
    Ok(api::ReplicationStatus {
        node: control.lease.node().to_owned(),
        stream: control.stream.clone(),
        role: if state.store.is_standby() {
            api::ReplicationRole::Standby
        } else {
            api::ReplicationRole::Primary
        },
        holder: control.lease.holder().await.ok().flatten(),
        last_frame,
        shipped_frame: state.store.shipped(),
        applied_sequence,
    })
}
