//! `/healthz` and `/readyz`: whether the process answers and whether it can
//! take events now. Open to all (no token); refuses to say more than ready
//! or not and why.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AdminState;
use crate::api;

#[utoipa::path(get, path = "/healthz", tag = "health", security(()),
    responses((status = 200, description = "The process answers", body = api::Health)))]
pub(super) async fn healthz() -> Json<api::Health> {
    Json(api::Health {
        status: "ok".into(),
    })
}

#[utoipa::path(get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, description = "An event of the largest max_body can be stored and the scheduler runs", body = api::Readiness),
              (status = 503, description = "Not ready: the reason is in the body", body = api::Readiness)))]
pub(super) async fn readyz(State(state): State<AdminState>) -> Response {
    let store = tokio::time::timeout(Duration::from_secs(5), state.store.ready()).await;
    let store_ok = matches!(store, Ok(Ok(())));
    let scheduler_ok = state.delivery.is_alive();
    let status = if store_ok && scheduler_ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let store_text = match store {
        Ok(Ok(())) => "writable".to_owned(),
        Ok(Err(e)) => e.report().to_string(),
        Err(_) => "no commit within 5 s".to_owned(),
    };
    let body = api::Readiness {
        ready: status == StatusCode::OK,
        store: store_text,
        scheduler: if scheduler_ok { "running" } else { "stopped" }.to_owned(),
    };
    (status, Json(body)).into_response()
}
