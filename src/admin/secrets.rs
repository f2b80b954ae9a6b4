//! `GET /api/secrets`: each source secret's name, where it is kept, its
//! age, expiry and last match. Never a value; read from `secrets`' book.

use axum::Json;
use axum::extract::State;

use super::AdminState;
use super::error::Unauthorized;
use crate::api;

/// Every source secret in force: its name, where it is kept, when hookinbox
/// first had it, when it expires and when it last verified an event.
#[utoipa::path(get, path = "/api/secrets", tag = "operations",
    responses((status = 200, description = "The source secrets, in the config's order", body = api::SecretList),
              Unauthorized))]
pub(super) async fn secrets(State(state): State<AdminState>) -> Json<api::SecretList> {
    Json(state.secrets.listing())
}
