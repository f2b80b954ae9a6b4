//! `POST /api/reload`: the config and its secret files read again, and
//! what may change live taken (the app's reloader does it). A config that
//! does not pass `config check` is refused whole (422) and the running one
//! stays.

use axum::Json;
use axum::extract::State;

use super::error::{AdminError, Unauthorized};
use super::{AdminState, ReloadRefused};
use crate::api;

#[utoipa::path(post, path = "/api/reload", tag = "operations",
    responses((status = 200, description = "What the reload changed in place, and what it changed that only a restart takes", body = api::Reloaded),
              (status = 422, description = "The config does not pass its checks; nothing of it was taken", body = api::ApiError),
              Unauthorized))]
pub(super) async fn reload(
    State(state): State<AdminState>,
) -> Result<Json<api::Reloaded>, AdminError> {
    let reload = state.reload.clone();
    match tokio::task::spawn_blocking(move || reload()).await? {
        Ok(reloaded) => {
            log(&reloaded);
            Ok(Json(reloaded))
        }
        Err(ReloadRefused::Invalid(why)) => {
            tracing::warn!(error = %why, "reload refused; the running config stays");
            Err(AdminError::ConfigInvalid(why))
        }
        Err(ReloadRefused::Unavailable(why)) => Err(AdminError::Unavailable(why)),
    }
}

/// The one line a reload leaves in the log, however it was asked for.
pub fn log(reloaded: &api::Reloaded) {
    let names = |parts: &[api::PartChanged]| {
        if parts.is_empty() {
            return "nothing".to_owned();
        }
        parts
            .iter()
            .map(|p| format!("{} {}", p.part, p.change.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if reloaded.needs_restart.is_empty() {
        tracing::info!(
            origin = reloaded.origin,
            applied = names(&reloaded.applied),
            "config reloaded"
        );
    } else {
        tracing::warn!(
            origin = reloaded.origin,
            applied = names(&reloaded.applied),
            needs_restart = names(&reloaded.needs_restart),
            "config reloaded; some changes take effect only after a restart"
        );
    }
}
