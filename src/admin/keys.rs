//! `/api/keys/{key}`, the list `/api/keys` and `/api/key-namespaces`: idempotency keys for the apps behind hookinbox —
//! claim before a side effect, complete after it, release on failure,
//! extend for long work; read one, and delete one by hand. Owns checking
//! each request (the key, the lease and ttl, the result's size, who may
//! call what in which namespace) and turning the store's [`KeyAnswer`]
//! into a status and a [`api::KeyView`]. Refuses to decide a key's fate:
//! `store::keys` does, in one durable write per change.
//!
//! Least privilege both ways: a `[[keys.client]]` token claims, completes,
//! releases, extends and reads keys of its own namespace only; the admin
//! token reads and deletes keys of any namespace (named by `?namespace=`)
//! and changes none otherwise. A refusal changes nothing and logs no result.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::AdminState;
use super::auth::Caller;
use super::error::{AdminError, Forbidden, StoreUnavailable, Unauthorized};
use crate::api::Role;
use crate::api::{self, KeyStateName, KeyView, MAX_KEY_LEN, MAX_KEY_RESULT, Timestamp};
use crate::config::{LONGEST_LEASE, LONGEST_TTL, parse_duration};
use crate::store::{KeyAnswer, KeyOp, KeyRecord, KeyState, KeyStateKind};
use crate::words::KeyClaimOutcome;

/// What a key handler extracts: each extractor's refusal becomes a 400
/// here, so it is counted and logged like every other.
type KeyPath = Result<Path<String>, PathRejection>;
type Scope = Result<Query<api::KeyScope>, QueryRejection>;
type Body = Result<Bytes, BytesRejection>;

/// The key of the path, checked: 1 to [`MAX_KEY_LEN`] bytes of UTF-8
/// (axum has percent-decoded it and refused what is not UTF-8).
fn key_of(path: KeyPath) -> Result<String, AdminError> {
    let Path(key) =
        path.map_err(|e| AdminError::BadRequest(format!("the key: {}", e.body_text())))?;
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(AdminError::BadRequest(format!(
            "a key is 1 to {MAX_KEY_LEN} bytes of UTF-8; this one is {} bytes",
            key.len()
        )));
    }
    Ok(key)
}

/// The namespace a client's change or read is in: its own; naming another
/// is refused. The admin token changes no key but by delete.
fn client_namespace(caller: &Caller, scope: Scope, what: &str) -> Result<String, AdminError> {
    let Query(scope) = scope.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    match caller {
        Caller::Person(_) => Err(AdminError::Forbidden(format!(
            "{what} needs a [[keys.client]] token, not the admin token or a person's: each app claims with its own"
        ))),
        Caller::Client { name, namespace } => match scope.namespace {
            Some(asked) if asked != *namespace => Err(AdminError::Forbidden(format!(
                "the token of keys client {name:?} reaches only namespace {namespace:?}"
            ))),
            _ => Ok(namespace.clone()),
        },
    }
}

/// The namespace a person's token names with `?namespace=`: one of the
/// configured `[[keys.client]]` namespaces. Another is refused (404) with
/// the names there are: a typo listed as an empty namespace reads as "no
/// key is claimed".
fn admin_namespace(state: &AdminState, asked: Option<String>) -> Result<String, AdminError> {
    let asked = asked.filter(|n| !n.is_empty()).ok_or_else(|| {
        AdminError::BadRequest("give ?namespace=…: the admin token reaches every namespace".into())
    })?;
    let access = state.access();
    let clients = &access.keys.clients;
    if clients.iter().any(|c| c.namespace == asked) {
        return Ok(asked);
    }
    let mut known: Vec<&str> = clients.iter().map(|c| c.namespace.as_str()).collect();
    known.sort_unstable();
    known.dedup();
    let there = match known.is_empty() {
        true => "no [[keys.client]] is configured".to_owned(),
        false => format!(
            "the [[keys.client]] namespaces are {}",
            known
                .iter()
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(AdminError::NotFound(format!(
        "unknown namespace {asked:?}: {there}"
    )))
}

/// The body as `T`: empty means `T::default()` where `empty` is given.
/// Its errors never quote a result (serde takes that as raw JSON, unread).
fn body_of<T: DeserializeOwned>(body: Body, empty: Option<T>) -> Result<T, AdminError> {
    let bytes = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(_) => AdminError::TooLarge(format!(
            "the body is too large: a result is at most {MAX_KEY_RESULT} bytes of JSON"
        )),
        e => AdminError::BadRequest(e.body_text()),
    })?;
    if let Some(empty) = empty
        && bytes.iter().all(u8::is_ascii_whitespace)
    {
        return Ok(empty);
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| AdminError::BadRequest(format!("the body is not what this path takes: {e}")))
}

/// A lease or ttl given as text: from 1s to `longest`; `None`: `default`.
fn duration_ms(
    name: &str,
    text: Option<&str>,
    default: std::time::Duration,
    longest: std::time::Duration,
) -> Result<u64, AdminError> {
    let d = match text {
        None => default,
        Some(text) => {
            parse_duration(text).map_err(|m| AdminError::BadRequest(format!("{name}: {m}")))?
        }
    };
    if d < std::time::Duration::from_secs(1) || d > longest {
        // "365d", not humantime's "11months 30days 3h 50m 24s".
        let secs = longest.as_secs();
        let most = if secs % 86_400 == 0 {
            format!("{}d", secs / 86_400)
        } else {
            humantime::format_duration(longest).to_string()
        };
        return Err(AdminError::BadRequest(format!(
            "{name}: must be from 1s to {most}"
        )));
    }
    Ok(d.as_millis() as u64)
}

/// `result` kept as the compact JSON text the client sent, if it fits.
fn result_of(result: Option<Box<RawValue>>) -> Result<Option<String>, AdminError> {
    let Some(raw) = result else { return Ok(None) };
    if raw.get().len() > MAX_KEY_RESULT {
        return Err(AdminError::TooLarge(format!(
            "the result is {} bytes; at most {MAX_KEY_RESULT} bytes of JSON are kept",
            raw.get().len()
        )));
    }
    Ok(Some(raw.get().to_owned()).filter(|text| text != "null"))
}

/// A stored result on the wire: `null` when none was stored.
fn result_on_wire(result: Option<&str>) -> Option<Box<RawValue>> {
    RawValue::from_string(result.unwrap_or("null").to_owned()).ok()
}

fn done(completed_ms: u64, result: Option<&str>) -> KeyView {
    KeyView {
        result: result_on_wire(result),
        completed_at: Some(Timestamp(completed_ms)),
        ..KeyView::of(KeyStateName::Done)
    }
}

fn claimed(token: u64, lease_until_ms: u64) -> KeyView {
    KeyView {
        token: Some(token),
        lease_until: Some(Timestamp(lease_until_ms)),
        ..KeyView::of(KeyStateName::Claimed)
    }
}

/// On a replication standby, every path an app's worker calls is the
/// primary's: refused with where it is (503, `standby`, `Retry-After`).
/// The admin's list of a namespace's keys stays readable (the replica).
pub(super) async fn on_primary(
    State(state): State<AdminState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let list = request.method() == axum::http::Method::GET && request.uri().path() == "/api/keys";
    if state.store.is_standby() && !list {
        let primary = state
            .replication
            .as_ref()
            .and_then(|r| r.lease.primary().get());
        return AdminError::Standby(primary).into_response();
    }
    next.run(request).await
}

fn answer(status: StatusCode, view: KeyView) -> Response {
    (status, Json(view)).into_response()
}

fn stale() -> Response {
    answer(StatusCode::CONFLICT, KeyView::of(KeyStateName::Stale))
}

/// The store answered what this change cannot come to: a bug, said so.
fn unexpected(op: &str, got: &KeyAnswer) -> AdminError {
    AdminError::Internal(format!("the store answered a {op} with {got:?}"))
}

#[utoipa::path(post, path = "/api/keys/{key}/claim", tag = "keys", params(("key" = String, Path, description = "1 to 256 bytes of UTF-8, percent-encoded"), api::KeyScope),
    request_body(content = Option<api::ClaimRequest>, description = "Optional; the config's lease and ttl otherwise"),
    responses((status = 201, description = "Yours until lease_until; token fences your later calls", body = api::KeyView),
              (status = 200, description = "Already done: result is what the completer stored", body = api::KeyView),
              (status = 409, description = "Busy: another worker holds it until lease_until (see Retry-After)", body = api::KeyView, headers(("Retry-After" = u64, description = "Whole seconds until the lease ends"))),
              (status = 400, description = "A bad key, lease or ttl", body = api::ApiError), Unauthorized, Forbidden, StoreUnavailable))]
pub(super) async fn claim(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    path: KeyPath,
    scope: Scope,
    body: Body,
) -> Result<Response, AdminError> {
    let namespace = client_namespace(&caller, scope, "a claim")?;
    let key = key_of(path)?;
    let request: api::ClaimRequest = body_of(body, Some(Default::default()))?;
    let keys = &state.access().keys;
    let lease_ms = duration_ms("lease", request.lease.as_deref(), keys.lease, LONGEST_LEASE)?;
    let ttl_ms = duration_ms("ttl", request.ttl.as_deref(), keys.ttl, LONGEST_TTL)?;
    let now_ms = state.clock.now_ms();
    let got = state
        .store
        .key(&namespace, &key, KeyOp::Claim { lease_ms, ttl_ms }, now_ms)
        .await?;
    Ok(match got {
        KeyAnswer::Claimed {
            token,
            lease_until_ms,
            took_over,
        } => {
            state
                .metrics
                .key_claim(&namespace, KeyClaimOutcome::Claimed);
            if took_over {
                state.metrics.key_lease_expired(&namespace);
            }
            answer(StatusCode::CREATED, claimed(token, lease_until_ms))
        }
        KeyAnswer::Done {
            completed_ms,
            result,
        } => {
            state.metrics.key_claim(&namespace, KeyClaimOutcome::Done);
            answer(StatusCode::OK, done(completed_ms, result.as_deref()))
        }
        KeyAnswer::Busy { lease_until_ms } => {
            state.metrics.key_claim(&namespace, KeyClaimOutcome::Busy);
            let view = KeyView {
                lease_until: Some(Timestamp(lease_until_ms)),
                ..KeyView::of(KeyStateName::Busy)
            };
            let mut response = answer(StatusCode::CONFLICT, view);
            // Whole seconds, rounded up, and at least 1: a client that
            // retries at once would find it busy still.
            let seconds = lease_until_ms.saturating_sub(now_ms).div_ceil(1000).max(1);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            response
        }
        other => return Err(unexpected("claim", &other)),
    })
}

#[utoipa::path(post, path = "/api/keys/{key}/complete", tag = "keys", params(("key" = String, Path, description = "1 to 256 bytes of UTF-8, percent-encoded"), api::KeyScope),
    request_body = api::CompleteRequest,
    responses((status = 200, description = "Done: the result is kept until the key expires", body = api::KeyView),
              (status = 409, description = "Stale: the token is no longer the holder's; nothing changed", body = api::KeyView),
              (status = 404, description = "No such key", body = api::ApiError),
              (status = 400, description = "A bad key or body", body = api::ApiError),
              (status = 413, description = "The result is over 64 KiB", body = api::ApiError), Unauthorized, Forbidden, StoreUnavailable))]
pub(super) async fn complete(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    path: KeyPath,
    scope: Scope,
    body: Body,
) -> Result<Response, AdminError> {
    let namespace = client_namespace(&caller, scope, "a complete")?;
    let key = key_of(path)?;
    let request: api::CompleteRequest = body_of(body, None)?;
    let result = result_of(request.result)?;
    let op = KeyOp::Complete {
        token: request.token,
        result: result.clone(),
    };
    let got = state
        .store
        .key(&namespace, &key, op, state.clock.now_ms())
        .await?;
    Ok(match got {
        KeyAnswer::Completed { completed_ms } => {
            answer(StatusCode::OK, done(completed_ms, result.as_deref()))
        }
        KeyAnswer::Done {
            completed_ms,
            result,
        } => answer(StatusCode::OK, done(completed_ms, result.as_deref())),
        KeyAnswer::Stale => stale(),
        KeyAnswer::NotFound => return Err(no_such_key(&namespace, &key)),
        other => return Err(unexpected("complete", &other)),
    })
}

#[utoipa::path(post, path = "/api/keys/{key}/release", tag = "keys", params(("key" = String, Path, description = "1 to 256 bytes of UTF-8, percent-encoded"), api::KeyScope),
    request_body = api::ReleaseRequest,
    responses((status = 200, description = "Free: the next claim gets it", body = api::KeyView),
              (status = 409, description = "Stale: the token is no longer the holder's; nothing changed", body = api::KeyView),
              (status = 404, description = "No such key", body = api::ApiError),
              (status = 400, description = "A bad key or body", body = api::ApiError), Unauthorized, Forbidden, StoreUnavailable))]
pub(super) async fn release(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    path: KeyPath,
    scope: Scope,
    body: Body,
) -> Result<Response, AdminError> {
    let namespace = client_namespace(&caller, scope, "a release")?;
    let key = key_of(path)?;
    let request: api::ReleaseRequest = body_of(body, None)?;
    let op = KeyOp::Release {
        token: request.token,
    };
    let got = state
        .store
        .key(&namespace, &key, op, state.clock.now_ms())
        .await?;
    Ok(match got {
        KeyAnswer::Released => answer(StatusCode::OK, KeyView::of(KeyStateName::Free)),
        KeyAnswer::Stale => stale(),
        KeyAnswer::NotFound => return Err(no_such_key(&namespace, &key)),
        other => return Err(unexpected("release", &other)),
    })
}

#[utoipa::path(post, path = "/api/keys/{key}/extend", tag = "keys", params(("key" = String, Path, description = "1 to 256 bytes of UTF-8, percent-encoded"), api::KeyScope),
    request_body = api::ExtendRequest,
    responses((status = 200, description = "Still yours, until the new lease_until", body = api::KeyView),
              (status = 409, description = "Stale: the token is no longer the holder's; nothing changed", body = api::KeyView),
              (status = 404, description = "No such key", body = api::ApiError),
              (status = 400, description = "A bad key, body or lease", body = api::ApiError), Unauthorized, Forbidden, StoreUnavailable))]
pub(super) async fn extend(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    path: KeyPath,
    scope: Scope,
    body: Body,
) -> Result<Response, AdminError> {
    let namespace = client_namespace(&caller, scope, "an extend")?;
    let key = key_of(path)?;
    let request: api::ExtendRequest = body_of(body, None)?;
    let lease_ms = duration_ms(
        "lease",
        request.lease.as_deref(),
        state.access().keys.lease,
        LONGEST_LEASE,
    )?;
    let op = KeyOp::Extend {
        token: request.token,
        lease_ms,
    };
    let got = state
        .store
        .key(&namespace, &key, op, state.clock.now_ms())
        .await?;
    Ok(match got {
        KeyAnswer::Extended { lease_until_ms } => {
            answer(StatusCode::OK, claimed(request.token, lease_until_ms))
        }
        KeyAnswer::Stale => stale(),
        KeyAnswer::NotFound => return Err(no_such_key(&namespace, &key)),
        other => return Err(unexpected("extend", &other)),
    })
}

/// Any path of an empty key, which no `{key}` matches: the 400 every other
/// key out of bounds gets.
pub(super) async fn empty_key() -> AdminError {
    AdminError::BadRequest(format!(
        "a key is 1 to {MAX_KEY_LEN} bytes of UTF-8; this one is 0 bytes"
    ))
}

fn no_such_key(namespace: &str, key: &str) -> AdminError {
    AdminError::NotFound(format!("no key {key:?} in namespace {namespace:?}"))
}

/// A stored record on the wire, every field it has.
fn view_of(record: &KeyRecord) -> KeyView {
    let base = match &record.state {
        KeyState::Claimed {
            token,
            lease_until_ms,
        } => claimed(*token, *lease_until_ms),
        KeyState::Done {
            completed_ms,
            result,
            ..
        } => done(*completed_ms, result.as_deref()),
    };
    KeyView {
        claims: Some(record.claims),
        created_at: Some(Timestamp(record.created_ms)),
        expires_at: Some(Timestamp(record.expires_ms)),
        ..base
    }
}

#[utoipa::path(get, path = "/api/key-namespaces", tag = "keys",
    responses((status = 200, description = "The configured [[keys.client]] namespaces and their apps, in name order", body = api::KeyNamespaces),
              Unauthorized, Forbidden))]
pub(super) async fn namespaces(State(state): State<AdminState>) -> Json<api::KeyNamespaces> {
    let mut by_namespace = std::collections::BTreeMap::<String, Vec<String>>::new();
    for client in &state.access().keys.clients {
        by_namespace
            .entry(client.namespace.clone())
            .or_default()
            .push(client.name.clone());
    }
    let namespaces = by_namespace
        .into_iter()
        .map(|(namespace, mut clients)| {
            clients.sort();
            api::KeyNamespace { namespace, clients }
        })
        .collect();
    Json(api::KeyNamespaces { namespaces })
}

/// Most keys one list call returns.
const MAX_KEY_PAGE: usize = 500;

#[utoipa::path(get, path = "/api/keys", tag = "keys", params(api::KeyListQuery),
    responses((status = 200, description = "A page of the namespace's keys, the most recently changed first", body = api::KeyList),
              (status = 404, description = "No [[keys.client]] has this namespace", body = api::ApiError),
              (status = 400, description = "No namespace, or a bad state or limit", body = api::ApiError), Unauthorized, Forbidden, StoreUnavailable))]
pub(super) async fn list(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<api::KeyListQuery>, QueryRejection>,
) -> Result<Json<api::KeyList>, AdminError> {
    if let Caller::Client { name, .. } = caller {
        return Err(AdminError::Forbidden(format!(
            "the token of keys client {name:?} cannot list keys: that needs the admin token or a person's"
        )));
    }
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let namespace = admin_namespace(&state, query.namespace)?;
    let limit = query.limit.unwrap_or(50);
    if !(1..=MAX_KEY_PAGE).contains(&limit) {
        return Err(AdminError::BadRequest(format!(
            "limit must be between 1 and {MAX_KEY_PAGE}"
        )));
    }
    let kind = query.state.map(|s| match s {
        api::KeyListState::Claimed => KeyStateKind::Claimed,
        api::KeyListState::Done => KeyStateKind::Done,
    });
    let before = match query.after.as_deref() {
        None => None,
        Some(cursor) => Some(cursor.parse::<u64>().map_err(|_| {
            AdminError::BadRequest("after must be a page's next_after, as it was given".to_owned())
        })?),
    };
    let store = state.store.clone();
    let now_ms = state.clock.now_ms();
    let page = tokio::task::spawn_blocking(move || {
        store.list_keys(&namespace, kind, before, limit, now_ms)
    })
    .await??;
    let keys = page
        .keys
        .iter()
        .map(|(key, record)| KeyView {
            key: Some(key.clone()),
            ..view_of(record)
        })
        .collect();
    Ok(Json(api::KeyList {
        keys,
        next_after: page.next_before.map(|seq| seq.to_string()),
    }))
}

#[utoipa::path(get, path = "/api/keys/{key}", tag = "keys", params(("key" = String, Path, description = "1 to 256 bytes of UTF-8, percent-encoded"), api::KeyScope),
    responses((status = 200, description = "The key's state (claimed with a lease that ran out is claimable)", body = api::KeyView),
              (status = 404, description = "No such key, or (a person's token) no [[keys.client]] has this namespace", body = api::ApiError),
              (status = 400, description = "A bad key, or the admin token without ?namespace=", body = api::ApiError), Unauthorized, Forbidden, StoreUnavailable))]
pub(super) async fn show(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    path: KeyPath,
    scope: Scope,
) -> Result<Json<KeyView>, AdminError> {
    let namespace = match caller {
        Caller::Person(_) => {
            let Query(scope) = scope.map_err(|e| AdminError::BadRequest(e.body_text()))?;
            admin_namespace(&state, scope.namespace)?
        }
        client => client_namespace(&client, scope, "a read")?,
    };
    let key = key_of(path)?;
    let store = state.store.clone();
    let now_ms = state.clock.now_ms();
    let (ns, k) = (namespace.clone(), key.clone());
    let found = tokio::task::spawn_blocking(move || store.key_record(&ns, &k, now_ms)).await??;
    let record = found.ok_or_else(|| no_such_key(&namespace, &key))?;
    Ok(Json(KeyView {
        key: Some(key),
        ..view_of(&record)
    }))
}

#[utoipa::path(delete, path = "/api/keys/{key}", tag = "keys", params(("key" = String, Path, description = "1 to 256 bytes of UTF-8, percent-encoded"), api::KeyDeleteQuery),
    responses((status = 200, description = "Deleted: the key is free", body = api::KeyView),
              (status = 404, description = "No such key, or no [[keys.client]] has this namespace", body = api::ApiError),
              (status = 400, description = "No namespace or no note", body = api::ApiError), Unauthorized, Forbidden, StoreUnavailable))]
pub(super) async fn delete(
    State(state): State<AdminState>,
    Extension(caller): Extension<Caller>,
    path: KeyPath,
    query: Result<Query<api::KeyDeleteQuery>, QueryRejection>,
) -> Result<Json<KeyView>, AdminError> {
    match caller {
        Caller::Client { name, .. } => {
            return Err(AdminError::Forbidden(format!(
                "the token of keys client {name:?} cannot delete a key: that needs the admin token, or a person's with the admin role"
            )));
        }
        Caller::Person(p) if p.role < Role::Admin => {
            return Err(AdminError::RoleNeeded {
                needed: Role::Admin,
                reason: format!(
                    "DELETE /api/keys/{{key}} needs the admin role; {} is {}",
                    p.name,
                    p.role.as_str()
                ),
            });
        }
        Caller::Person(_) => {}
    }
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let namespace = admin_namespace(&state, query.namespace)?;
    let key = key_of(path)?;
    let note = query
        .note
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| AdminError::BadRequest("give ?note=…: say why the key is deleted".into()))?;
    let got = state
        .store
        .key(&namespace, &key, KeyOp::Delete, state.clock.now_ms())
        .await?;
    match got {
        KeyAnswer::Deleted => {
            tracing::info!(%namespace, %key, %note, "key deleted by hand");
            Ok(Json(KeyView::of(KeyStateName::Free)))
        }
        KeyAnswer::NotFound => Err(no_such_key(&namespace, &key)),
        other => Err(unexpected("delete", &other)),
    }
}
