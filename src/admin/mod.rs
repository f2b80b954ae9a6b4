//! The admin API on the admin listener: JSON for people and scripts. This
//! file declares one module per resource, holds [`AdminState`] and builds
//! [`router`]; it refuses handlers, which live in the resource's file.
//!
//! Every path but `/healthz`, `/readyz`, `/api/openapi.json` and the
//! dashboard's assets (`/`, `/ui/…`, see [`crate::dashboard`]) needs
//! `Authorization: Bearer <token>`, compared in constant time. Requests and answers are the types
//! of [`crate::api`], converted here from the store's; errors are
//! [`api::ApiError`](crate::api::ApiError) with a status, counted in
//! `hookinbox_admin_rejected{reason}` and logged without the token or any
//! body. Reads go to the store's snapshots; changes (replay, ignore) go
//! through the writer like everything else, and pause / resume through the
//! scheduler's handle.

mod audit;
mod auth;
mod backup;
mod bulk;
mod destinations;
mod error;
mod events;
mod health;
mod keys;
mod openapi;
mod replication;
mod scrape;
mod stats;
mod stream;
mod sweep;
mod wire;

use axum::Router;
use std::sync::Arc;

use axum::middleware;
use axum::routing::{any, get, post};

use crate::clock::Clock;
use crate::config::{KeysConfig, Secret};
use crate::metrics::Metrics;
use crate::schedule::DeliveryHandle;
use crate::store::Store;
use crate::sweep::SweepHandle;

use error::AdminError;
pub use openapi::openapi;
pub use stream::Streams;

/// What every admin handler reads. Cloned for each extractor and layer of
/// each request, so it is one `Arc`: its fields (the secrets, the keys'
/// clients, the source names) would otherwise be copied several times a
/// request (≈ 6% of the server's CPU under a claim load).
#[derive(Clone)]
pub struct AdminState(Arc<AdminContext>);

impl AdminState {
    pub fn new(context: AdminContext) -> AdminState {
        AdminState(Arc::new(context))
    }
}

impl std::ops::Deref for AdminState {
    type Target = AdminContext;

    fn deref(&self) -> &AdminContext {
        &self.0
    }
}

pub struct AdminContext {
    pub store: Store,
    pub metrics: Metrics,
    pub delivery: DeliveryHandle,
    pub sweep: SweepHandle,
    pub token: Secret,
    /// The people with tokens of their own (`[[admin.user]]`).
    pub users: Vec<crate::config::AdminUser>,
    /// Idempotency keys' defaults and the apps whose tokens reach them.
    pub keys: KeysConfig,
    /// Stamps changes and judges ages, as every task does.
    pub clock: Clock,
    /// Every configured source, so stats list quiet ones too.
    pub sources: Vec<String>,
    /// A replicating node's lease and promotion (`[replication]`).
    pub replication: Option<crate::replicate::Control>,
    /// Cancelled when the app stops: long-lived answers (the event
    /// stream) end, so connections close and shutdown does not wait.
    pub stopping: tokio_util::sync::CancellationToken,
    /// The one reader of new events for every open event stream.
    pub streams: stream::Streams,
}

pub fn router(state: AdminState) -> Router {
    let api = Router::new()
        .route("/metrics", get(scrape::metrics))
        .route("/api/events", get(events::list_events))
        .route("/api/events/stream", get(stream::stream_events))
        .route(
            "/api/events/{id}",
            get(events::show_event).delete(events::erase_event),
        )
        .route("/api/events/{id}/replay", post(events::replay_event))
        .route("/api/events/{id}/ignore", post(events::ignore_event))
        .route("/api/replay", post(bulk::bulk_replay))
        .route("/api/ignore", post(bulk::bulk_ignore))
        .route("/api/whoami", get(auth::whoami))
        .route("/api/audit", get(audit::audit_trail))
        .route("/api/stats", get(stats::stats))
        .route("/api/activity", get(stats::activity))
        .route("/api/sweep", post(sweep::sweep_now))
        .route("/api/replication", get(replication::status))
        .route("/api/replication/promote", post(replication::promote))
        .route("/api/backup", get(backup::backup))
        .route("/api/destinations", get(destinations::destinations))
        .route("/api/destinations/{name}/pause", post(destinations::pause))
        .route(
            "/api/destinations/{name}/resume",
            post(destinations::resume),
        )
        // Under /api/keys/ it would shadow a key named so.
        .route("/api/key-namespaces", get(keys::namespaces))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    // Either token reaches these; each handler knows what each may do.
    let keys = Router::new()
        .route("/api/keys", get(keys::list))
        .route("/api/keys/{key}", get(keys::show).delete(keys::delete))
        .route("/api/keys/{key}/claim", post(keys::claim))
        .route("/api/keys/{key}/complete", post(keys::complete))
        .route("/api/keys/{key}/release", post(keys::release))
        .route("/api/keys/{key}/extend", post(keys::extend))
        // An empty key matches no `{key}`: say what a key is, not 404.
        .route("/api/keys/", any(keys::empty_key))
        .route("/api/keys//{action}", any(keys::empty_key))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            keys::on_primary,
        ))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_any_token,
        ));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/api/openapi.json", get(openapi::openapi_json))
        .route("/readyz", get(health::readyz))
        .merge(crate::dashboard::router())
        .merge(api)
        .merge(keys)
        .fallback(|| async { AdminError::NotFound("no such admin path".into()) })
        // Last, so it wraps every route, the token check and the fallback.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            error::count_refusals,
        ))
        .with_state(state)
}
