//! The bearer token check in front of every admin path but health, the
//! OpenAPI document and the dashboard's assets. Owns how a token is read
//! and compared (in constant time), who it belongs to (a person: the
//! `[admin]` token or an `[[admin.user]]`, with a role; or one
//! `[[keys.client]]` app); the role each path needs is its route's, in
//! [`super::routes`]. Least privilege every way: a client's token reaches
//! only `/api/keys/…` (in its namespace, which the key handlers check), a
//! person's none of a key's changes but delete, and a role only its paths.
//! Refuses to log or echo a token.

use axum::Json;
use axum::extract::{Extension, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AdminState;
use super::audit;
use super::error::{AdminError, Unauthorized};
use crate::api::{self, Role};
use crate::config::ADMIN_NAME;

/// Who presented the request's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Caller {
    /// A person: the `[admin]` token, or an `[[admin.user]]`.
    Person(Person),
    /// A `[[keys.client]]` app: its name and its namespace.
    Client { name: String, namespace: String },
}

/// A person signed in with their token; left in the request's extensions
/// for the handlers, which name them in what they log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Person {
    pub name: String,
    pub role: Role,
    /// Unix milliseconds from which the token is refused.
    pub expires_ms: Option<u64>,
}

impl Person {
    /// Who the audit trail names.
    pub(super) fn who(&self) -> audit::Who<'_> {
        audit::Who {
            name: &self.name,
            role: self.role,
        }
    }
}

/// What a request's token turned out to be.
enum Found {
    Caller(Caller),
    /// A person's token past its `expires`.
    Expired(Person),
    Nobody,
}

/// The owner of the request's bearer token, if any. Every token is compared,
/// each in constant time (the people's as SHA-256 hashes, the only form
/// they are kept in), so the time taken tells nothing of which one matched
/// or how much of one did.
fn identify(state: &AdminState, headers: &HeaderMap) -> Found {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .unwrap_or("")
        .as_bytes();
    let access = state.access();
    let mut found = None;
    if bool::from(presented.ct_eq(access.token.expose().as_bytes())) {
        found = Some(Caller::Person(Person {
            name: ADMIN_NAME.to_owned(),
            role: Role::Admin,
            expires_ms: None,
        }));
    }
    let hash: [u8; 32] = Sha256::digest(presented).into();
    for user in &access.users {
        if bool::from(hash.ct_eq(&user.token_sha256)) {
            found = Some(Caller::Person(Person {
                name: user.name.clone(),
                role: user.role,
                expires_ms: user.expires_ms,
            }));
        }
    }
    for client in &access.keys.clients {
        if bool::from(presented.ct_eq(client.token.value.expose().as_bytes())) {
            found = Some(Caller::Client {
                name: client.name.clone(),
                namespace: client.namespace.clone(),
            });
        }
    }
    match found {
        None => Found::Nobody,
        Some(Caller::Person(p)) if p.expires_ms.is_some_and(|at| state.clock.now_ms() >= at) => {
            Found::Expired(p)
        }
        Some(caller) => Found::Caller(caller),
    }
}

/// What the route table says of a request, handed to the token checks by
/// the router (so this file looks nothing up in the table itself): the
/// least role a person needs, and what the audit trail records of it.
#[derive(Clone, Copy)]
pub(super) struct Table {
    pub role_needed: fn(&Method, &str) -> Role,
    pub action_of: fn(&Method, &str) -> Option<api::AuditAction>,
}

/// A person's token whose role may call the path, for every admin path but
/// the keys'. The [`Person`] is left in the request's extensions. A change,
/// or a refusal of one, goes into the audit trail ([`audit`]).
pub(super) async fn require_token(
    State((state, table)): State<(AdminState, Table)>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = audit::route_of(&request);
    let action = (table.action_of)(request.method(), &path);
    match identify(&state, request.headers()) {
        Found::Caller(Caller::Person(person)) => {
            let needed = (table.role_needed)(request.method(), &path);
            if person.role < needed {
                let refusal = AdminError::RoleNeeded {
                    needed,
                    reason: format!(
                        "{} {path} needs the {} role; {} is {}",
                        request.method(),
                        needed.as_str(),
                        person.name,
                        with_article(person.role)
                    ),
                };
                return match action {
                    Some(action) => {
                        audit::refused(&state, person.who(), action, request, refusal).await
                    }
                    None => refusal.into_response(),
                };
            }
            request.extensions_mut().insert(person.clone());
            match action {
                Some(action) => audit::run(&state, person.who(), action, request, next).await,
                None => next.run(request).await,
            }
        }
        Found::Caller(Caller::Client { name, .. }) => AdminError::Forbidden(format!(
            "the token of keys client {name:?} reaches only /api/keys/…: this path needs a person's token"
        ))
        .into_response(),
        Found::Expired(person) => refuse_expired(&state, person, action, request).await,
        Found::Nobody => AdminError::Unauthorized.into_response(),
    }
}

/// The 401 of an expired token, recorded when it asked for a change.
async fn refuse_expired(
    state: &AdminState,
    person: Person,
    action: Option<api::AuditAction>,
    request: Request,
) -> Response {
    let refusal = expired(&person.name, person.expires_ms.unwrap_or_default());
    match action {
        Some(action) => audit::refused(state, person.who(), action, request, refusal).await,
        None => refusal.into_response(),
    }
}

/// Any token, for the keys' paths: the [`Caller`] is left in the request's
/// extensions for the handler, which knows what each may do.
pub(super) async fn require_any_token(
    State((state, table)): State<(AdminState, Table)>,
    mut request: Request,
    next: Next,
) -> Response {
    // An app's calls (the hot path of keys) are not recorded: only a
    // person's request is looked up in the route table.
    let action = |request: &Request| (table.action_of)(request.method(), &audit::route_of(request));
    match identify(&state, request.headers()) {
        // A person's change of a key (a delete; the others are refused
        // them) goes into the audit trail; an app's do not.
        Found::Caller(Caller::Person(person)) => {
            request
                .extensions_mut()
                .insert(Caller::Person(person.clone()));
            match action(&request) {
                Some(action) => audit::run(&state, person.who(), action, request, next).await,
                None => next.run(request).await,
            }
        }
        Found::Caller(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Found::Expired(person) => {
            let action = action(&request);
            refuse_expired(&state, person, action, request).await
        }
        Found::Nobody => AdminError::Unauthorized.into_response(),
    }
}

#[utoipa::path(get, path = "/api/whoami", tag = "health",
    responses((status = 200, description = "Who the token belongs to and what it may do", body = api::Whoami), Unauthorized))]
pub(super) async fn whoami(Extension(person): Extension<Person>) -> Json<api::Whoami> {
    Json(api::Whoami {
        name: person.name,
        role: person.role,
        expires: person.expires_ms.map(api::Timestamp),
    })
}

fn expired(name: &str, at_ms: u64) -> AdminError {
    let at = humantime::format_rfc3339_seconds(crate::clock::from_unix_ms(at_ms));
    AdminError::Expired(format!(
        "the token of {name} expired at {at}: ask an admin for a new one"
    ))
}

fn with_article(role: Role) -> String {
    match role {
        Role::Admin | Role::Operator => format!("an {}", role.as_str()),
        Role::Viewer => format!("a {}", role.as_str()),
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
