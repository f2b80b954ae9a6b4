//! The admin API on the admin listener: JSON for people and scripts. This
//! file declares one module per resource, holds [`AdminState`] and builds
//! [`router`] from the route table ([`ROUTES`]), a gate's check in front of
//! each gate's routes; it refuses handlers, which live in the resource's
//! file.
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
mod routes;
mod scrape;
mod reconcile;
mod redaction;
mod reload;
mod secrets;
mod shapes;
mod stats;
mod stream;
mod sweep;
mod wire;

use axum::Router;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::middleware;

use crate::clock::Clock;
use crate::config::{KeysConfig, Secret};
use crate::metrics::Metrics;
use crate::schedule::DeliveryHandle;
use crate::store::Store;
use crate::sweep::SweepHandle;

use error::AdminError;
pub use reload::log as log_reload;
pub use routes::openapi;
pub use routes::{Gate, ROUTES, Route, Verb};
pub use stream::{HubReader, Streams};

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
    /// The tokens, the keys' clients and the configured sources, swapped
    /// whole by a reload.
    pub access: Arc<ArcSwap<Access>>,
    /// `POST /api/reload`.
    pub reload: Reload,
    /// Stamps changes and judges ages, as every task does.
    pub clock: Clock,
    /// When hookinbox started (unix ms): a source that never sent is quiet
    /// since then.
    pub started_ms: u64,
    /// What the payload drift watch learned (`GET /api/shapes`).
    pub shapes: Arc<std::sync::Mutex<crate::drift::Learned>>,
    /// Which secret verified what (`GET /api/secrets`).
    pub secrets: crate::secrets::SecretBook,
    /// Each source's reconcile passes, and a pass by hand.
    pub reconcile: crate::reconcile::ReconcileHandle,
    /// A replicating node's lease and promotion (`[replication]`).
    pub replication: Option<crate::replicate::Control>,
    /// Cancelled when the app stops: long-lived answers (the event
    /// stream) end, so connections close and shutdown does not wait.
    pub stopping: tokio_util::sync::CancellationToken,
    /// The one reader of new events for every open event stream.
    pub streams: stream::Streams,
    /// Names each event's trace (`[telemetry]`).
    pub telemetry: crate::telemetry::Telemetry,
}

/// What a reload may change of who reaches the admin API and what it
/// lists: read per request, swapped whole.
pub struct Access {
    pub token: Secret,
    /// The people with tokens of their own (`[[admin.user]]`).
    pub users: Vec<crate::config::AdminUser>,
    /// Idempotency keys' defaults and the apps whose tokens reach them.
    pub keys: KeysConfig,
    /// Every configured source, so stats list quiet ones too.
    pub sources: Vec<String>,
    /// The sources that set `expect_within`, and what they set.
    pub expect_within: BTreeMap<String, Duration>,
    /// Each source's `redact` rule: who sees which payload masked.
    pub redactions: Redactions,
}

impl AdminContext {
    /// The access in force now.
    fn access(&self) -> Arc<Access> {
        self.access.load_full()
    }
}

/// Reads the config again and takes what may change live (the app's
/// reloader; blocking).
pub type Reload = Arc<dyn Fn() -> Result<crate::api::Reloaded, ReloadRefused> + Send + Sync>;

/// Why a reload took nothing.
#[derive(Debug)]
pub enum ReloadRefused {
    /// The config does not pass its checks: the running one stays.
    Invalid(String),
    /// Not now (the store could not be read): try again.
    Unavailable(String),
}

pub use redaction::Redactions;

pub fn router(state: AdminState) -> Router {
    let table = auth::Table {
        role_needed: routes::role_needed,
        action_of: routes::action_of,
    };
    let api = routes::served(|gate| matches!(gate, Gate::Person(_))).route_layer(
        middleware::from_fn_with_state((state.clone(), table), auth::require_token),
    );
    // Either token reaches these; each handler knows what each may do.
    let keys = routes::served(|gate| gate == Gate::AnyToken)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            keys::on_primary,
        ))
        .route_layer(middleware::from_fn_with_state(
            (state.clone(), table),
            auth::require_any_token,
        ));
    routes::served(|gate| gate == Gate::Open)
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
