//! The web dashboard: a page, a script, a style sheet and an icon, compiled
//! into the binary and served on the admin listener at `/`.
//!
//! It is a client of the admin API like `ctl`: everything it shows or
//! changes goes through `/api/…` with the admin token, which the page keeps
//! in the tab's session storage. The assets themselves hold no data, so they
//! are served without the token. Nothing is fetched from elsewhere (no CDN,
//! no web font): the policy below forbids it, and it works offline.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX: &str = include_str!("assets/index.html");
/// One script, `app.js`, written as one file per page under `assets/app/`
/// and joined here in order: `core.js` (building blocks, the API client,
/// dialogs, sign-in and routing) first, `start.js` (which routes to the
/// first page) last. They share one scope, as one script.
const SCRIPT: &str = concat!(
    include_str!("assets/app/core.js"),
    "\n",
    include_str!("assets/app/overview.js"),
    "\n",
    include_str!("assets/app/events.js"),
    "\n",
    include_str!("assets/app/detail.js"),
    "\n",
    include_str!("assets/app/dlq.js"),
    "\n",
    include_str!("assets/app/shapes.js"),
    "\n",
    include_str!("assets/app/keys.js"),
    "\n",
    include_str!("assets/app/audit.js"),
    "\n",
    include_str!("assets/app/start.js"),
);
const STYLE: &str = include_str!("assets/app.css");
/// The tab's icon, linked from the page. Browsers that ask for
/// `/favicon.ico` on their own get it too, rather than a 404 in the console.
const ICON: &str = include_str!("assets/favicon.svg");

/// Only this origin's own script, style and API; no frames, no inline code.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'none'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's paths, to merge into the admin router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/ui/app.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
        .route(
            "/ui/favicon.svg",
            get(|| async { asset(ICON, "image/svg+xml") }),
        )
        .route(
            "/favicon.ico",
            get(|| async { asset(ICON, "image/svg+xml") }),
        )
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    // A new binary may bring new assets: always ask.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
