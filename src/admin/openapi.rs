//! The admin API's contract as an OpenAPI 3.1 document, and
//! `/api/openapi.json` that serves it. Owns what the document says of the
//! whole API; refuses to list or describe a path here: the route table
//! ([`super::routes`]) lists them and each handler's `#[utoipa::path]`
//! describes its own.

use axum::Json;

use super::routes::Documented;

/// The admin API's contract as an OpenAPI 3.1 document, for other tools.
#[utoipa::path(get, path = "/api/openapi.json", tag = "health", security(()),
    responses((status = 200, description = "This document", content_type = "application/json", body = Object)))]
pub(super) async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(openapi())
}

/// The admin API's contract as OpenAPI: every documented route of
/// [`ROUTES`](super::ROUTES), with the types of [`crate::api`] as its
/// schemas.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

    #[derive(OpenApi)]
    #[openapi(
        info(title = "hookinbox admin API", description = "The admin listener's API: every path but /healthz, /readyz and /api/openapi.json needs `Authorization: Bearer <token>`. A person's token (the [admin] token, or an [[admin.user]]'s) has a role: viewer reads; operator also replays, ignores, pauses and resumes (and bulk changes); admin may call every path. A path the role may not call answers 403 with role_needed. Every change a person asks (and every one refused them) is recorded at /api/audit."),
        security(("bearer" = []))
    )]
    struct Doc;

    let mut doc = Doc::openapi();
    doc.merge(Documented::openapi());
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    doc
}
