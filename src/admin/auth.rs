//! The bearer token check in front of every admin path but health, the
//! OpenAPI document and the dashboard's assets. Owns how a token is read
//! and compared (in constant time) and who it belongs to: the admin, or one
//! `[[keys.client]]` app. Least privilege both ways: a client's token
//! reaches only `/api/keys/…` (in its namespace, which the key handlers
//! check), and the admin token none of a key's changes but delete. Refuses
//! to log or echo a token.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::AdminState;
use super::error::AdminError;

/// Who presented the request's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Caller {
    Admin,
    /// A `[[keys.client]]` app: its name and its namespace.
    Client {
        name: String,
        namespace: String,
    },
}

/// The owner of the request's bearer token, if any. Every token is compared,
/// each in constant time, so the time taken tells nothing of which one
/// matched or how much of one did.
fn identify(state: &AdminState, headers: &HeaderMap) -> Option<Caller> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .unwrap_or("")
        .as_bytes();
    let mut found = None;
    if bool::from(presented.ct_eq(state.token.expose().as_bytes())) {
        found = Some(Caller::Admin);
    }
    for client in &state.keys.clients {
        if bool::from(presented.ct_eq(client.token.value.expose().as_bytes())) {
            found = Some(Caller::Client {
                name: client.name.clone(),
                namespace: client.namespace.clone(),
            });
        }
    }
    found
}

/// The admin token, for every admin path but the keys'.
pub(super) async fn require_token(
    State(state): State<AdminState>,
    request: Request,
    next: Next,
) -> Response {
    match identify(&state, request.headers()) {
        Some(Caller::Admin) => next.run(request).await,
        Some(Caller::Client { name, .. }) => AdminError::Forbidden(format!(
            "the token of keys client {name:?} reaches only /api/keys/…: this path needs the admin token"
        ))
        .into_response(),
        None => AdminError::Unauthorized.into_response(),
    }
}

/// Either kind of token, for the keys' paths: the [`Caller`] is left in the
/// request's extensions for the handler, which knows what each may do.
pub(super) async fn require_any_token(
    State(state): State<AdminState>,
    mut request: Request,
    next: Next,
) -> Response {
    match identify(&state, request.headers()) {
        Some(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None => AdminError::Unauthorized.into_response(),
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
