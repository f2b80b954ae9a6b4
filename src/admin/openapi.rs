//! The frame of the admin API's OpenAPI 3.1 document: what it says of the
//! whole API (its title, its description, the bearer scheme, the version).
//! Refuses to list or describe a path here: the route table
//! (`routes.rs`) lists them, each handler's `#[utoipa::path]` describes its
//! own, and the table puts them in this frame (`routes::openapi`).

/// The document around `paths`: the documented routes, with the types of
/// [`crate::api`] as their schemas.
pub(super) fn frame(paths: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

    #[derive(OpenApi)]
    #[openapi(
        info(title = "hookinbox admin API", description = "The admin listener's API: every path but /healthz, /readyz and /api/openapi.json needs `Authorization: Bearer <token>`. A person's token (the [admin] token, or an [[admin.user]]'s) has a role: viewer reads; operator also replays, ignores, pauses and resumes (and bulk changes); admin may call every path. A path the role may not call answers 403 with role_needed. Every change a person asks (and every one refused them) is recorded at /api/audit."),
        security(("bearer" = []))
    )]
    struct Doc;

    let mut doc = Doc::openapi();
    doc.merge(paths);
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    doc
}
