//! The admin API's contract as an OpenAPI 3.1 document, and
//! `/api/openapi.json` that serves it. Owns the list of documented paths;
//! refuses to describe a path here: each handler's `#[utoipa::path]` does.

use axum::Json;

use super::{
    audit, auth, backup, bulk, destinations, events, health, keys, replication, scrape, stats,
    stream, sweep,
};

/// The admin API's contract as an OpenAPI 3.1 document, for other tools.
#[utoipa::path(get, path = "/api/openapi.json", tag = "health", security(()),
    responses((status = 200, description = "This document", content_type = "application/json", body = Object)))]
pub(super) async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(openapi())
}

/// The admin API's contract as OpenAPI: every path of [`router`](super::router), with the
/// types of [`crate::api`] as its schemas.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

    #[derive(OpenApi)]
    #[openapi(
        info(title = "hookinbox admin API", description = "The admin listener's API: every path but /healthz, /readyz and /api/openapi.json needs `Authorization: Bearer <token>`. A person's token (the [admin] token, or an [[admin.user]]'s) has a role: viewer reads; operator also replays, ignores, pauses and resumes (and bulk changes); admin may call every path. A path the role may not call answers 403 with role_needed. Every change a person asks (and every one refused them) is recorded at /api/audit."),
        security(("bearer" = [])),
        paths(
            health::healthz, health::readyz, openapi_json, scrape::metrics,
            events::list_events, stream::stream_events, events::show_event, events::replay_event,
            events::ignore_event, events::erase_event, bulk::bulk_replay, bulk::bulk_ignore,
            stats::stats, stats::activity, sweep::sweep_now, backup::backup,
            destinations::destinations, destinations::pause, destinations::resume,
            keys::claim, keys::complete, keys::release, keys::extend, keys::show, keys::delete, keys::list,
            keys::namespaces, replication::status, replication::promote, auth::whoami, audit::audit_trail
        )
    )]
    struct Doc;

    let mut doc = Doc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    doc
}
