//! The bearer token check in front of every admin path but health, the
//! OpenAPI document and the dashboard's assets. Owns how the token is read
//! and compared (in constant time); refuses to log or echo it.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::AdminState;
use super::error::AdminError;

pub(super) async fn require_token(
    State(state): State<AdminState>,
    request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .unwrap_or("");
    let expected = state.token.expose().as_bytes();
    if presented.as_bytes().ct_eq(expected).into() {
        next.run(request).await
    } else {
        AdminError::Unauthorized.into_response()
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is
/// case-insensitive (RFC 9110 §11.1), and clients send `bearer` and `BEARER`
/// too; spaces after it are skipped. The token itself is compared exactly.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}
