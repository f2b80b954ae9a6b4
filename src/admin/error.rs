//! `AdminError`: why an admin request failed, and the one place that turns it
//! into a status, a public message and a log line; [`count_refusals`] counts
//! each in `hookinbox_admin_rejected{reason}`. Also the shared OpenAPI
//! responses of those errors. Refuses handler logic and never logs a token
//! or a body.

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AdminState;
use crate::api::{self, ErrorCode, Role};
use crate::store::StoreError;

/// Why an admin request failed; its [`IntoResponse`] is the one place that
/// maps it to a status and logs it, and [`count_refusals`] counts it.
#[derive(Debug, thiserror::Error)]
pub(super) enum AdminError {
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// A valid token that may not call this path (least privilege).
    #[error("{0}")]
    Forbidden(String),
    /// A person's token whose role is below the path's.
    #[error("{reason}")]
    RoleNeeded { needed: Role, reason: String },
    /// A person's token past its `expires`.
    #[error("{0}")]
    Expired(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    /// A reload's config does not pass `config check`; the running one
    /// stays.
    #[error("{0}")]
    ConfigInvalid(String),
    #[error("{0}")]
    TooLarge(String),
    /// Not now, for a reason the message gives: retry.
    #[error("{0}")]
    Unavailable(String),
    /// A replication standby: the primary (as last seen) serves this.
    #[error("{}", crate::replicate::standby_refusal(.0.as_ref()))]
    Standby(Option<crate::replicate::Holder>),
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Something that cannot happen did: a bug, said so in the log.
    #[error("{0}")]
    Internal(String),
    /// A blocking task of the handler panicked or was cancelled.
    #[error("the request's work stopped unexpectedly")]
    Task(#[from] tokio::task::JoinError),
    #[error("cannot read the backup file")]
    Backup(#[source] std::io::Error),
}

/// The public code of a refusal, left on its response for
/// [`count_refusals`]: the response is made where `Metrics` is not at hand
/// (an extractor's `?`, the fallback), so the counting happens on the way out.
#[derive(Clone, Copy)]
struct Refused(ErrorCode);

/// What the caller of a refused or failed request was told, left on its
/// response for the audit trail ([`super::audit`]).
#[derive(Clone, Debug)]
pub(super) struct Told(pub String);

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            AdminError::Unauthorized | AdminError::Expired(_) => {
                (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized)
            }
            AdminError::Forbidden(_) | AdminError::RoleNeeded { .. } => {
                (StatusCode::FORBIDDEN, ErrorCode::Forbidden)
            }
            AdminError::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            AdminError::BadRequest(_) => (StatusCode::BAD_REQUEST, ErrorCode::BadRequest),
            AdminError::Conflict(_) => (StatusCode::CONFLICT, ErrorCode::Conflict),
            AdminError::ConfigInvalid(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::ConfigInvalid)
            }
            AdminError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge),
            AdminError::Unavailable(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::StoreUnavailable)
            }
            AdminError::Standby(_) => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Standby),
            AdminError::Store(e) if e.is_transient() => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::StoreUnavailable)
            }
            AdminError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::StoreError),
            AdminError::Task(_) | AdminError::Backup(_) | AdminError::Internal(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::InternalError)
            }
        };
        let reason = self.to_string();
        if status.is_server_error() {
            // The whole chain in the log; the caller gets the top message only.
            let cause = crate::store::Report(&self);
            tracing::error!(status = status.as_u16(), %cause, "admin request failed");
        } else {
            tracing::warn!(status = status.as_u16(), %reason, "admin request refused");
        }
        let role_needed = match &self {
            AdminError::RoleNeeded { needed, .. } => Some(*needed),
            _ => None,
        };
        let primary = match &self {
            AdminError::Standby(Some(holder)) => Some(api::Primary {
                node: holder.node.clone(),
                admin: holder.admin.clone(),
            }),
            _ => None,
        };
        let told = Told(reason.clone());
        let body = api::ApiError {
            error: code,
            reason,
            role_needed,
            primary,
        };
        let mut response = (status, Json(body)).into_response();
        if let AdminError::Standby(_) = &self {
            // As ingest's: a takeover takes a lease and a few seconds.
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response.extensions_mut().insert(Refused(code));
        response.extensions_mut().insert(told);
        response
    }
}

/// Counts every [`AdminError`] the admin listener answers, by its public
/// code: the code is the counter's label, so the two never drift. Layered
/// over the whole admin router, the token check and the fallback included.
pub(super) async fn count_refusals(
    State(state): State<AdminState>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    if let Some(Refused(code)) = response.extensions_mut().remove::<Refused>() {
        state.metrics.admin_rejected(code);
    }
    response
}

/// The 401 of every path behind the token, declared once for OpenAPI.
#[derive(utoipa::IntoResponses)]
#[response(status = 401, description = "No or a wrong bearer token")]
#[allow(dead_code)] // Only its OpenAPI form is used.
pub(super) struct Unauthorized(api::ApiError);

/// The 403 of a path a token of the other kind (admin or keys client) may
/// not call, declared once for OpenAPI.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 403,
    description = "A valid token that may not call this path: keys are claimed, completed, released and extended with a [[keys.client]] token, in its own namespace; deleted and listed with the admin token"
)]
#[allow(dead_code)] // Only its OpenAPI form is used.
pub(super) struct Forbidden(api::ApiError);

/// The 503 of every path that reads or changes the store, declared once for
/// OpenAPI.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 503,
    description = "The store cannot answer now (a full disk, a reopen): retry"
)]
#[allow(dead_code)] // Only its OpenAPI form is used.
pub(super) struct StoreUnavailable(api::ApiError);
