//! Local fakes of the provider APIs a reconcile pass calls, on 127.0.0.1:0,
//! with state the tests set and read. Each follows the provider's published
//! description of the calls it serves (paths, query parameters, answer
//! fields, pagination, errors):
//!
//! - GitHub, "REST API endpoints for repository webhooks" (API version
//!   2022-11-28): `GET /repos/{owner}/{repo}/hooks/{hook_id}` (`active`),
//!   `GET …/deliveries` (newest first, `per_page`, a `cursor` in the
//!   `Link: <…>; rel="next"` header), `POST …/deliveries/{delivery_id}/attempts`
//!   (202; the delivery is sent again, signed, with its `X-GitHub-Delivery`
//!   guid, and listed as a new delivery with `redelivery: true`). A bad
//!   token is 401 `{"message": "Bad credentials"}`. The same for a GitHub
//!   App's webhook ("REST API endpoints for GitHub App webhooks": `GET
//!   /app/hook/config`, `GET /app/hook/deliveries`, `POST
//!   /app/hook/deliveries/{delivery_id}/attempts`), called with the App's
//!   JWT ("Generating a JSON Web Token (JWT) for a GitHub App": RS256, `iss`
//!   the App's ID, `exp` no more than 10 minutes ahead), else 401 `{"message":
//!   "A JSON web token could not be decoded"}`.
//! - Stripe, "List all events" (`GET /v1/events`: `delivery_success`,
//!   `limit`, `starting_after`, `ending_before`, `created[gte]`; a list
//!   object with `data` newest first and `has_more`; a `Request-Id`
//!   header) and "Retrieve a webhook endpoint" (`status`). A bad key is 401
//!   with an `invalid_request_error`; the rate limit is 429.
//! - GitLab, "Project webhooks API" (REST API v4): `GET
//!   /projects/{id}/hooks/{hook_id}` (`alert_status`, `disabled_until`), `GET
//!   …/events` (the past 7 days, newest first; `status` a comma-separated list
//!   of codes and `successful`, `client_failure`, `server_failure`, the last
//!   taking "internal error"; `per_page` 1 to 20, else 400; `page`, with
//!   `X-Page`, `X-Next-Page`, `X-Total-Pages`; `X-Gitlab-Token` shown as
//!   `[REDACTED]`), `POST …/events/{hook_log_id}/resend` (five a minute per
//!   hook and user, else 429; the request is made while GitLab answers, with
//!   the log's headers and its `Idempotency-Key` and the hook's token, and
//!   logged anew; 201 with what the receiver answered, 422 when no answer
//!   came). The project is its ID or URL-encoded path. A bad token is 401
//!   `{"message": "401 Unauthorized"}`.
//! - Paddle Billing (API version 1), "List notifications" (`GET
//!   /notifications`: `status` and `notification_setting_id` comma-separated
//!   lists, `from`/`to` RFC 3339, `order_by=id[ASC|DESC]`, `per_page` 50 by
//!   default and 200 at most, `after`; `meta.pagination.next` a full URL,
//!   `has_more`), "Replay a notification" (`POST
//!   /notifications/{notification_id}/replay`: 202 with the new
//!   `notification_id`; 400 `notification_cannot_replay` unless `delivered`
//!   or `failed`, 400 `notification_replay_invalid_origin_type` for a replay;
//!   the original gets `replayed_at`, and the new notification, of origin
//!   `replay` and the same `event_id`, is sent signed with
//!   `Paddle-Signature`) and "Get a notification setting" (`active`). A bad
//!   key is 403 `invalid_token`.
//! - Svix (API v1), "Get Endpoint" (`GET /api/v1/app/{app_id}/endpoint/
//!   {endpoint_id}`: `disabled`) and "Recover Failed Webhooks" (`POST
//!   …/recover` with `since` and an optional `until`: 202 with a background
//!   task, `{"id": "qtask_…", "status": "running", "task":
//!   "endpoint.recover"}`; 422 for a `since` more than 14 days (and 5
//!   minutes) back; then each message whose delivery to the endpoint failed,
//!   created in the span, is sent again, signed as Standard Webhooks with its
//!   `webhook-id`). A bad token is 401 `authentication_failed`.
//!
//! Stripe's Event and webhook endpoint have the fields of Stripe's own
//! example objects (`tests/providers/stripe-fixtures.json`, from
//! stripe/openapi's fixtures: `reconcile::the_stripe_fake_s_objects_have_the_fields_of_stripe_s_fixtures`).
//! GitHub's answers are also checked against GitHub's OpenAPI description
//! itself (`@octokit/openapi`, `tests/providers/conform.mjs`:
//! `reconcile::the_github_fake_answers_as_github_s_openapi_description_says`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hookinbox::verify::sign::{Signing, sign};
use serde_json::json;

fn serve(router: Router) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    addr
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

// ---------------------------------------------------------------- GitHub

/// One delivery of a GitHub hook.
#[derive(Debug, Clone)]
pub struct GhDelivery {
    pub id: u64,
    pub guid: String,
    pub event: String,
    pub delivered_at: String,
    pub redelivery: bool,
    pub status_code: u16,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct GhState {
    token: String,
    /// For a GitHub App's webhook: the App's ID and its public key (PKCS#1
    /// DER), which every call's JWT must verify against.
    app: Option<(u64, Vec<u8>)>,
    /// Calls refused for their JWT.
    bad_jwts: u32,
    secret: String,
    active: bool,
    /// Newest last.
    deliveries: Vec<GhDelivery>,
    /// The delivery ids asked to be sent again, in order.
    attempts: Vec<u64>,
    /// Where a redelivery goes: hookinbox's `/in/{source}` URL.
    target: Option<String>,
    calls: u32,
}

#[derive(Clone)]
pub struct FakeGithub {
    pub addr: SocketAddr,
    state: Arc<Mutex<GhState>>,
}

impl FakeGithub {
    pub fn start(token: &str, secret: &str) -> FakeGithub {
        let state = Arc::new(Mutex::new(GhState {
            token: token.to_owned(),
            secret: secret.to_owned(),
            active: true,
            ..GhState::default()
        }));
        let router = Router::new()
            .route("/repos/{owner}/{repo}/hooks/{hook}", get(gh_hook))
            .route(
                "/repos/{owner}/{repo}/hooks/{hook}/deliveries",
                get(gh_deliveries),
            )
            .route(
                "/repos/{owner}/{repo}/hooks/{hook}/deliveries/{id}/attempts",
                post(gh_attempt),
            )
            .route("/app/hook/config", get(gh_app_config))
            .route("/app/hook/deliveries", get(gh_app_deliveries))
            .route("/app/hook/deliveries/{id}/attempts", post(gh_app_attempt))
            .with_state(state.clone());
        FakeGithub {
            addr: serve(router),
            state,
        }
    }

    /// A GitHub App's webhook: every call must carry a JWT of App `app_id`
    /// that `public_key` (PKCS#1 DER) verifies.
    pub fn start_app(app_id: u64, public_key: Vec<u8>, secret: &str) -> FakeGithub {
        let github = FakeGithub::start("", secret);
        github.state.lock().unwrap().app = Some((app_id, public_key));
        github
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn send_to(&self, target: String) {
        self.state.lock().unwrap().target = Some(target);
    }

    /// Calls refused for their JWT.
    pub fn bad_jwts(&self) -> u32 {
        self.state.lock().unwrap().bad_jwts
    }

    pub fn set_active(&self, active: bool) {
        self.state.lock().unwrap().active = active;
    }

    /// Adds a delivery of `body` (as event `event`) that got `status_code`,
    /// `ago_s` seconds ago; its id is the next.
    pub fn delivered(&self, guid: &str, event: &str, body: &[u8], status_code: u16, ago_s: u64) {
        let mut s = self.state.lock().unwrap();
        let id = s.deliveries.len() as u64 + 1000;
        s.deliveries.push(GhDelivery {
            id,
            guid: guid.to_owned(),
            event: event.to_owned(),
            delivered_at: rfc3339(ago_s),
            redelivery: false,
            status_code,
            body: body.to_vec(),
        });
    }

    /// The delivery ids asked to be sent again.
    pub fn attempts(&self) -> Vec<u64> {
        self.state.lock().unwrap().attempts.clone()
    }

    pub fn calls(&self) -> u32 {
        self.state.lock().unwrap().calls
    }

    /// GitHub's headers for a delivery of `body`, signed with `secret`.
    pub fn headers(secret: &str, guid: &str, event: &str, body: &[u8]) -> Vec<(String, String)> {
        sign(&Signing {
            kind: hookinbox::config::Kind::Github,
            secret,
            body,
            event_id: guid,
            event_type: Some(event),
            timestamp: 0,
            url: "",
            content_type: "application/json",
            hmac: None,
        })
        .unwrap()
    }
}

fn rfc3339(ago_s: u64) -> String {
    let at = std::time::SystemTime::now() - std::time::Duration::from_secs(ago_s);
    humantime::format_rfc3339_seconds(at).to_string()
}

fn gh_refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})),
    )
        .into_response()
}

async fn gh_hook(
    State(state): State<Arc<Mutex<GhState>>>,
    Path((owner, repo, hook)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let mut s = state.lock().unwrap();
    s.calls += 1;
    if !gh_authorized(&mut s, &headers) {
        return gh_refused();
    }
    let url = format!("https://api.github.com/repos/{owner}/{repo}/hooks/{hook}");
    axum::Json(json!({
        "type": "Repository", "id": hook, "name": "web", "active": s.active,
        "events": ["push", "pull_request"],
        "config": {"content_type": "json", "insecure_ssl": "0", "url": "https://example.com/in/github"},
        "updated_at": "2026-01-01T00:00:00Z", "created_at": "2026-01-01T00:00:00Z",
        "url": url, "test_url": format!("{url}/test"), "ping_url": format!("{url}/pings"),
        "deliveries_url": format!("{url}/deliveries"),
        "last_response": {"code": 502, "status": "failed", "message": "Invalid HTTP Response: 502"}
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct GhPage {
    per_page: Option<usize>,
    cursor: Option<String>,
}

/// Whether a call may go on: the token, or for an App a JWT that verifies.
fn gh_authorized(s: &mut GhState, headers: &HeaderMap) -> bool {
    let Some(given) = bearer(headers) else {
        return false;
    };
    match &s.app {
        None => given == s.token,
        Some((app_id, key)) => {
            let ok = jwt_verifies(given, *app_id, key);
            if !ok {
                s.bad_jwts += 1;
            }
            ok
        }
    }
}

/// A GitHub App's JWT: RS256 that `public_key` verifies, issued by
/// `app_id`, not expired, and expiring within 10 minutes of its issue.
fn jwt_verifies(jwt: &str, app_id: u64, public_key: &[u8]) -> bool {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = parts.as_slice() else {
        return false;
    };
    let (Ok(h), Ok(c), Ok(sig)) = (
        b64.decode(header),
        b64.decode(claims),
        b64.decode(signature),
    ) else {
        return false;
    };
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        public_key,
    );
    if key
        .verify(format!("{header}.{claims}").as_bytes(), &sig)
        .is_err()
    {
        return false;
    }
    let (Ok(h), Ok(c)) = (
        serde_json::from_slice::<serde_json::Value>(&h),
        serde_json::from_slice::<serde_json::Value>(&c),
    ) else {
        return false;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let (Some(iat), Some(exp)) = (c["iat"].as_u64(), c["exp"].as_u64()) else {
        return false;
    };
    h["alg"] == "RS256"
        && c["iss"] == app_id.to_string().as_str()
        && iat <= now
        && exp > now
        && exp - iat <= 600
}

async fn gh_deliveries(
    State(state): State<Arc<Mutex<GhState>>>,
    Path((owner, repo, hook)): Path<(String, String, u64)>,
    Query(page): Query<GhPage>,
    headers: HeaderMap,
) -> Response {
    gh_list(
        &state,
        &format!("/repos/{owner}/{repo}/hooks/{hook}/deliveries"),
        page,
        &headers,
    )
}

async fn gh_app_deliveries(
    State(state): State<Arc<Mutex<GhState>>>,
    Query(page): Query<GhPage>,
    headers: HeaderMap,
) -> Response {
    gh_list(&state, "/app/hook/deliveries", page, &headers)
}

async fn gh_app_config(State(state): State<Arc<Mutex<GhState>>>, headers: HeaderMap) -> Response {
    let mut s = state.lock().unwrap();
    s.calls += 1;
    if !gh_authorized(&mut s, &headers) {
        return gh_refused();
    }
    axum::Json(json!({
        "content_type": "json", "insecure_ssl": "0", "secret": "********",
        "url": "https://example.com/in/github"
    }))
    .into_response()
}

/// The deliveries at `path`, a page of them.
fn gh_list(state: &Arc<Mutex<GhState>>, path: &str, page: GhPage, headers: &HeaderMap) -> Response {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut s = state.lock().unwrap();
    s.calls += 1;
    if !gh_authorized(&mut s, headers) {
        return gh_refused();
    }
    let per_page = page.per_page.unwrap_or(30).min(100);
    // The cursor is the id the page starts below (newest first).
    let below = page
        .cursor
        .as_deref()
        .and_then(|c| c.strip_prefix("v1_"))
        .and_then(|c| c.parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    let listed: Vec<&GhDelivery> = s
        .deliveries
        .iter()
        .rev()
        .filter(|d| d.id < below)
        .take(per_page + 1)
        .collect();
    let more = listed.len() > per_page;
    let page: Vec<serde_json::Value> = listed
        .iter()
        .take(per_page)
        .map(|d| {
            json!({
                "id": d.id, "guid": d.guid, "delivered_at": d.delivered_at,
                "redelivery": d.redelivery, "duration": 0.27,
                "status": if (200..300).contains(&d.status_code) { "OK".to_owned() } else { format!("Invalid HTTP Response: {}", d.status_code) },
                "status_code": d.status_code, "event": d.event, "action": null,
                "installation_id": null, "repository_id": 1
            })
        })
        .collect();
    let mut response = axum::Json(page.clone()).into_response();
    if more {
        let last = page.last().and_then(|d| d["id"].as_u64()).unwrap();
        let link =
            format!("<http://{host}{path}?per_page={per_page}&cursor=v1_{last}>; rel=\"next\"");
        response.headers_mut().insert("link", link.parse().unwrap());
    }
    response
}

async fn gh_attempt(
    State(state): State<Arc<Mutex<GhState>>>,
    Path((_, _, _, id)): Path<(String, String, u64, u64)>,
    headers: HeaderMap,
) -> Response {
    gh_redeliver(state, id, &headers)
}

async fn gh_app_attempt(
    State(state): State<Arc<Mutex<GhState>>>,
    Path(id): Path<u64>,
    headers: HeaderMap,
) -> Response {
    gh_redeliver(state, id, &headers)
}

/// Delivery `id` sent again, after the 202.
fn gh_redeliver(state: Arc<Mutex<GhState>>, id: u64, headers: &HeaderMap) -> Response {
    let (delivery, target, secret) = {
        let mut s = state.lock().unwrap();
        s.calls += 1;
        if !gh_authorized(&mut s, headers) {
            return gh_refused();
        }
        let Some(d) = s.deliveries.iter().find(|d| d.id == id).cloned() else {
            return (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"message": "Not Found"})),
            )
                .into_response();
        };
        s.attempts.push(id);
        (d, s.target.clone(), s.secret.clone())
    };
    // GitHub sends it again on its own time: after the 202.
    tokio::spawn(async move {
        let Some(target) = target else { return };
        let mut request = hookinbox::send::http_client(std::time::Duration::from_secs(30))
            .unwrap()
            .post(target)
            .body(delivery.body.clone());
        for (name, value) in
            FakeGithub::headers(&secret, &delivery.guid, &delivery.event, &delivery.body)
        {
            request = request.header(name, value);
        }
        let status_code = match request.send().await {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        };
        let mut s = state.lock().unwrap();
        let id = s.deliveries.len() as u64 + 1000;
        s.deliveries.push(GhDelivery {
            id,
            redelivery: true,
            status_code,
            delivered_at: rfc3339(0),
            ..delivery
        });
    });
    (StatusCode::ACCEPTED, axum::Json(json!({}))).into_response()
}

// ---------------------------------------------------------------- Stripe

/// One Event of the fake's account.
#[derive(Debug, Clone)]
pub struct StripeEvent {
    pub id: String,
    pub created: u64,
    pub event_type: String,
    /// The Event object's bytes, as the API returns them.
    pub bytes: String,
    pub delivered: bool,
}

#[derive(Default)]
struct StripeState {
    key: String,
    /// Oldest first.
    events: Vec<StripeEvent>,
    /// How often each event was returned in a list.
    listed: HashMap<String, u32>,
    endpoint_status: String,
    /// Answer the next list calls 429 (Retry-After: 1)…
    throttle_at: Vec<u32>,
    /// …or 500, at these list call numbers (from 1).
    fail_at: Vec<u32>,
    list_calls: u32,
    calls: u32,
}

#[derive(Clone)]
pub struct FakeStripe {
    pub addr: SocketAddr,
    state: Arc<Mutex<StripeState>>,
}

impl FakeStripe {
    pub fn start(key: &str) -> FakeStripe {
        let state = Arc::new(Mutex::new(StripeState {
            key: key.to_owned(),
            endpoint_status: "enabled".to_owned(),
            ..StripeState::default()
        }));
        let router = Router::new()
            .route("/v1/events", get(stripe_events))
            .route("/v1/webhook_endpoints/{id}", get(stripe_endpoint))
            .with_state(state.clone());
        FakeStripe {
            addr: serve(router),
            state,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds an Event created at `created` (unix seconds); returns its bytes.
    pub fn event(&self, n: u32, created: u64, delivered: bool) -> StripeEvent {
        let id = format!("evt_1Q{n:08}");
        let bytes = format!(
            "{{\n  \"id\": \"{id}\",\n  \"object\": \"event\",\n  \"api_version\": \"2024-06-20\",\n  \"created\": {created},\n  \"data\": {{\n    \"object\": {{\n      \"id\": \"pi_{n}\",\n      \"object\": \"payment_intent\",\n      \"amount\": {amount}\n    }}\n  }},\n  \"livemode\": false,\n  \"pending_webhooks\": {pending},\n  \"request\": {{\"id\": null, \"idempotency_key\": null}},\n  \"type\": \"payment_intent.succeeded\"\n}}",
            amount = 1000 + n,
            pending = u32::from(!delivered),
        );
        let event = StripeEvent {
            id,
            created,
            event_type: "payment_intent.succeeded".to_owned(),
            bytes,
            delivered,
        };
        self.state.lock().unwrap().events.push(event.clone());
        event
    }

    pub fn set_endpoint_status(&self, status: &str) {
        self.state.lock().unwrap().endpoint_status = status.to_owned();
    }

    /// List call number `n` (from 1, counted from the fake's start)
    /// answers 429 with `Retry-After: 1`.
    pub fn throttle_list_call(&self, n: u32) {
        self.state.lock().unwrap().throttle_at.push(n);
    }

    /// List call number `n` answers 500.
    pub fn fail_list_call(&self, n: u32) {
        self.state.lock().unwrap().fail_at.push(n);
    }

    /// How often each event was returned in a list page.
    pub fn listed(&self) -> HashMap<String, u32> {
        self.state.lock().unwrap().listed.clone()
    }

    pub fn list_calls(&self) -> u32 {
        self.state.lock().unwrap().list_calls
    }
}

fn stripe_refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided: sk_test_****"}})),
    )
        .into_response()
}

async fn stripe_endpoint(
    State(state): State<Arc<Mutex<StripeState>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut s = state.lock().unwrap();
    s.calls += 1;
    if bearer(&headers) != Some(s.key.as_str()) {
        return stripe_refused();
    }
    axum::Json(json!({
        "id": id, "object": "webhook_endpoint", "api_version": null, "application": null,
        "created": 1_700_000_000, "description": "hookinbox", "enabled_events": ["*"],
        "livemode": false, "metadata": {}, "status": s.endpoint_status,
        "url": "https://example.com/in/stripe"
    }))
    .into_response()
}

async fn stripe_events(
    State(state): State<Arc<Mutex<StripeState>>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let mut s = state.lock().unwrap();
    s.calls += 1;
    if bearer(&headers) != Some(s.key.as_str()) {
        return stripe_refused();
    }
    s.list_calls += 1;
    let call = s.list_calls;
    if s.throttle_at.contains(&call) {
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            axum::Json(
                json!({"error": {"type": "rate_limit_error", "message": "Too many requests"}}),
            ),
        )
            .into_response();
    }
    if s.fail_at.contains(&call) {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(
                json!({"error": {"type": "api_error", "message": "An unknown error occurred"}}),
            ),
        )
            .into_response();
    }
    if query.contains_key("starting_after") && query.contains_key("ending_before") {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"type": "invalid_request_error", "message": "You may only specify one of these parameters: ending_before, starting_after."}})),
        )
            .into_response();
    }
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(10)
        .clamp(1, 100);
    let undelivered_only = query.get("delivery_success").map(String::as_str) == Some("false");
    let gte: u64 = query
        .get("created[gte]")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    // Newest first.
    let all: Vec<&StripeEvent> = s
        .events
        .iter()
        .rev()
        .filter(|e| !(undelivered_only && e.delivered) && e.created >= gte)
        .collect();
    let position = |id: &str| all.iter().position(|e| e.id == id);
    let (page, has_more): (Vec<&StripeEvent>, bool) =
        if let Some(before) = query.get("ending_before") {
            // The page just newer than the cursor, still newest first.
            let end = position(before).unwrap_or(0);
            let start = end.saturating_sub(limit);
            (all[start..end].to_vec(), start > 0)
        } else {
            let start = match query.get("starting_after") {
                Some(after) => position(after).map_or(all.len(), |p| p + 1),
                None => 0,
            };
            let end = (start + limit).min(all.len());
            (all[start..end].to_vec(), end < all.len())
        };
    let data: Vec<&str> = page.iter().map(|e| e.bytes.as_str()).collect();
    let ids: Vec<String> = page.iter().map(|e| e.id.clone()).collect();
    let body = format!(
        "{{\n  \"object\": \"list\",\n  \"data\": [\n{}\n  ],\n  \"has_more\": {has_more},\n  \"url\": \"/v1/events\"\n}}",
        data.join(",\n")
    );
    for id in ids {
        *s.listed.entry(id).or_default() += 1;
    }
    (
        StatusCode::OK,
        [
            ("content-type", "application/json".to_owned()),
            ("request-id", format!("req_{call:06}")),
        ],
        body,
    )
        .into_response()
}

// ---------------------------------------------------------------- GitLab

/// One request of a GitLab hook's log.
#[derive(Debug, Clone)]
pub struct GlLog {
    pub id: u64,
    pub idempotency_key: String,
    pub event: String,
    /// The body as GitLab keeps it (`{"oversize": true}` for a large one).
    pub body: Vec<u8>,
    /// `"200"`, `"502"`, or `"internal error"` when no answer came.
    pub status: String,
    pub created_at: String,
}

#[derive(Default)]
struct GlState {
    token: String,
    /// The hook's secret token (`X-Gitlab-Token`).
    secret: String,
    alert_status: String,
    disabled_until: Option<String>,
    /// Oldest first.
    logs: Vec<GlLog>,
    /// The log ids asked to be resent, in order.
    resends: Vec<u64>,
    /// When each resend was asked, for the rate limit.
    resent_at: Vec<std::time::Instant>,
    /// The rate limit's window: GitLab's is a minute.
    window: std::time::Duration,
    /// The project ids the calls named, as the path decodes.
    projects: Vec<String>,
    target: Option<String>,
}

#[derive(Clone)]
pub struct FakeGitlab {
    pub addr: SocketAddr,
    state: Arc<Mutex<GlState>>,
}

impl FakeGitlab {
    pub fn start(token: &str, secret: &str) -> FakeGitlab {
        let state = Arc::new(Mutex::new(GlState {
            token: token.to_owned(),
            secret: secret.to_owned(),
            alert_status: "executable".to_owned(),
            window: std::time::Duration::from_secs(60),
            ..GlState::default()
        }));
        let router = Router::new()
            .route("/api/v4/projects/{id}/hooks/{hook}", get(gl_hook))
            .route("/api/v4/projects/{id}/hooks/{hook}/events", get(gl_events))
            .route(
                "/api/v4/projects/{id}/hooks/{hook}/events/{log}/resend",
                post(gl_resend),
            )
            .with_state(state.clone());
        FakeGitlab {
            addr: serve(router),
            state,
        }
    }

    /// The API root, with GitLab's `/api/v4`.
    pub fn url(&self) -> String {
        format!("http://{}/api/v4", self.addr)
    }

    pub fn send_to(&self, target: String) {
        self.state.lock().unwrap().target = Some(target);
    }

    /// The hook's secret token from now on (a rotation at GitLab).
    pub fn set_secret(&self, secret: &str) {
        self.state.lock().unwrap().secret = secret.to_owned();
    }

    /// Shortens the resend limit's window (GitLab's is a minute).
    pub fn set_rate_window(&self, window: std::time::Duration) {
        self.state.lock().unwrap().window = window;
    }

    /// GitLab disables a failing hook for a while.
    pub fn disable_for(&self, seconds: u64) {
        let mut s = self.state.lock().unwrap();
        s.alert_status = "temporarily_disabled".to_owned();
        let until = std::time::SystemTime::now() + std::time::Duration::from_secs(seconds);
        s.disabled_until = Some(humantime::format_rfc3339_seconds(until).to_string());
    }

    /// Logs a request of `body` for the event `key` that got `status`,
    /// `ago_s` seconds ago; returns its id.
    pub fn logged(&self, key: &str, body: &[u8], status: &str, ago_s: u64) -> u64 {
        let mut s = self.state.lock().unwrap();
        let id = s.logs.len() as u64 + 500;
        s.logs.push(GlLog {
            id,
            idempotency_key: key.to_owned(),
            event: "Push Hook".to_owned(),
            body: body.to_vec(),
            status: status.to_owned(),
            created_at: gl_time(ago_s),
        });
        id
    }

    pub fn resends(&self) -> Vec<u64> {
        self.state.lock().unwrap().resends.clone()
    }

    pub fn projects(&self) -> Vec<String> {
        self.state.lock().unwrap().projects.clone()
    }

    /// The headers GitLab sends with a request of event `key`.
    pub fn headers(secret: &str, key: &str, body: &[u8]) -> Vec<(String, String)> {
        sign(&Signing {
            kind: hookinbox::config::Kind::Gitlab,
            secret,
            body,
            event_id: key,
            event_type: Some("Push Hook"),
            timestamp: 0,
            url: "",
            content_type: "application/json",
            hmac: None,
        })
        .unwrap()
    }
}

/// A time as a GitLab instance in UTC-7 writes it.
fn gl_time(ago_s: u64) -> String {
    let at = std::time::SystemTime::now() - std::time::Duration::from_secs(ago_s + 7 * 3600);
    let utc = humantime::format_rfc3339_millis(at).to_string();
    format!("{}-07:00", utc.trim_end_matches('Z'))
}

fn gl_refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"message": "401 Unauthorized"})),
    )
        .into_response()
}

fn gl_authorized(s: &GlState, headers: &HeaderMap) -> bool {
    headers
        .get("private-token")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t == s.token)
}

async fn gl_hook(
    State(state): State<Arc<Mutex<GlState>>>,
    Path((id, hook)): Path<(String, u64)>,
    headers: HeaderMap,
) -> Response {
    let mut s = state.lock().unwrap();
    s.projects.push(id.clone());
    if !gl_authorized(&s, &headers) {
        return gl_refused();
    }
    axum::Json(json!({
        "id": hook, "url": "https://example.com/in/gitlab", "name": "hookinbox",
        "project_id": 3, "push_events": true, "enable_ssl_verification": true,
        "alert_status": s.alert_status, "disabled_until": s.disabled_until,
        "url_variables": [], "created_at": "2026-01-01T00:00:00Z"
    }))
    .into_response()
}

/// Whether a request that got `status` matches the list's `status` filter.
fn gl_matches(filter: &str, status: &str) -> bool {
    let code: Option<u16> = status.parse().ok();
    filter.split(',').any(|f| match f {
        "successful" => code.is_some_and(|c| (200..300).contains(&c)),
        "client_failure" => code.is_some_and(|c| (400..500).contains(&c)),
        "server_failure" => code.is_none_or(|c| (500..600).contains(&c)),
        other => other == status,
    })
}

async fn gl_events(
    State(state): State<Arc<Mutex<GlState>>>,
    Path((id, _)): Path<(String, u64)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let mut s = state.lock().unwrap();
    s.projects.push(id);
    if !gl_authorized(&s, &headers) {
        return gl_refused();
    }
    let per_page: usize = query
        .get("per_page")
        .map_or(Some(20), |p| p.parse().ok())
        .unwrap_or(0);
    if !(1..=20).contains(&per_page) {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "per_page does not have a valid value"})),
        )
            .into_response();
    }
    let page: usize = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
    // Newest first.
    let all: Vec<&GlLog> = s
        .logs
        .iter()
        .rev()
        .filter(|l| query.get("status").is_none_or(|f| gl_matches(f, &l.status)))
        .collect();
    let pages = all.len().div_ceil(per_page).max(1);
    let listed: Vec<serde_json::Value> = all
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|l| {
            let data: serde_json::Value = serde_json::from_slice(&l.body).unwrap();
            json!({
                "id": l.id, "url": "https://example.com/in/gitlab", "trigger": "push_hooks",
                "request_headers": {
                    "Content-Type": "application/json", "User-Agent": "GitLab/17.4.0",
                    "Idempotency-Key": l.idempotency_key, "X-Gitlab-Event": l.event,
                    "X-Gitlab-Event-UUID": format!("uuid-{}", l.id), "X-Gitlab-Token": "[REDACTED]"
                },
                "request_data": data,
                "response_headers": {}, "response_body": "", "execution_duration": 0.12,
                "response_status": l.status, "created_at": l.created_at
            })
        })
        .collect();
    let mut response = axum::Json(listed).into_response();
    let h = response.headers_mut();
    let next = if page < pages {
        (page + 1).to_string()
    } else {
        String::new()
    };
    h.insert("x-next-page", next.parse().unwrap());
    h.insert("x-page", page.to_string().parse().unwrap());
    h.insert("x-per-page", per_page.to_string().parse().unwrap());
    h.insert("x-total", all.len().to_string().parse().unwrap());
    h.insert("x-total-pages", pages.to_string().parse().unwrap());
    response
}

async fn gl_resend(
    State(state): State<Arc<Mutex<GlState>>>,
    Path((id, _, log_id)): Path<(String, u64, u64)>,
    headers: HeaderMap,
) -> Response {
    let (log, target, secret) = {
        let mut s = state.lock().unwrap();
        s.projects.push(id);
        if !gl_authorized(&s, &headers) {
            return gl_refused();
        }
        let now = std::time::Instant::now();
        let window = s.window;
        s.resent_at.retain(|at| now.duration_since(*at) < window);
        if s.resent_at.len() >= 5 {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                axum::Json(json!({"message": {"error": "This endpoint has been requested too many times. Try again later."}})),
            )
                .into_response();
        }
        let Some(log) = s.logs.iter().find(|l| l.id == log_id).cloned() else {
            return (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"message": "404 Not found"})),
            )
                .into_response();
        };
        s.resent_at.push(now);
        s.resends.push(log_id);
        (log, s.target.clone(), s.secret.clone())
    };
    // GitLab calls the hook while it answers, and logs the call.
    let status = match target {
        None => None,
        Some(target) => {
            let mut request = hookinbox::send::http_client(std::time::Duration::from_secs(10))
                .unwrap()
                .post(target)
                .body(log.body.clone());
            for (name, value) in FakeGitlab::headers(&secret, &log.idempotency_key, &log.body) {
                request = request.header(name, value);
            }
            request
                .header("x-gitlab-event-uuid", format!("uuid-resend-{log_id}"))
                .send()
                .await
                .ok()
                .map(|r| r.status().as_u16())
        }
    };
    let mut s = state.lock().unwrap();
    let new_id = s.logs.len() as u64 + 500;
    s.logs.push(GlLog {
        id: new_id,
        status: status.map_or("internal error".to_owned(), |c| c.to_string()),
        created_at: gl_time(0),
        ..log
    });
    match status {
        Some(code) => (
            StatusCode::CREATED,
            axum::Json(json!({"response_status": code})),
        )
            .into_response(),
        None => (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({"message": "Failed to open TCP connection"})),
        )
            .into_response(),
    }
}

// ---------------------------------------------------------------- Paddle

/// One notification of the fake's Paddle account.
#[derive(Debug, Clone)]
pub struct PdlNotification {
    pub id: String,
    pub setting: String,
    pub event_id: String,
    pub event_type: String,
    /// `delivered`, `failed`, `needs_retry` or `not_attempted`.
    pub status: String,
    /// `event`, or `replay`.
    pub origin: String,
    pub occurred_at: String,
    pub data: serde_json::Value,
    pub replayed_at: Option<String>,
}

#[derive(Default)]
struct PdlState {
    key: String,
    /// The destination's secret key, which signs what it sends.
    secret: String,
    active: HashMap<String, bool>,
    /// Oldest first: ids grow.
    notifications: Vec<PdlNotification>,
    /// The notification ids asked to be replayed, in order.
    replays: Vec<String>,
    target: Option<String>,
}

#[derive(Clone)]
pub struct FakePaddle {
    pub addr: SocketAddr,
    state: Arc<Mutex<PdlState>>,
}

impl FakePaddle {
    pub fn start(key: &str, secret: &str) -> FakePaddle {
        let state = Arc::new(Mutex::new(PdlState {
            key: key.to_owned(),
            secret: secret.to_owned(),
            ..PdlState::default()
        }));
        let router = Router::new()
            .route("/notifications", get(pdl_list))
            .route("/notifications/{id}/replay", post(pdl_replay))
            .route("/notification-settings/{id}", get(pdl_setting))
            .with_state(state.clone());
        FakePaddle {
            addr: serve(router),
            state,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn send_to(&self, target: String) {
        self.state.lock().unwrap().target = Some(target);
    }

    pub fn set_active(&self, setting: &str, active: bool) {
        self.state
            .lock()
            .unwrap()
            .active
            .insert(setting.to_owned(), active);
    }

    /// A notification of event `event_id` to `setting` that occurred
    /// `ago_s` seconds ago, in `status`; returns its id.
    pub fn notify(&self, setting: &str, event_id: &str, status: &str, ago_s: u64) -> String {
        let mut s = self.state.lock().unwrap();
        s.active.entry(setting.to_owned()).or_insert(true);
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(ago_s);
        let n = PdlNotification {
            id: pdl_id(s.notifications.len()),
            setting: setting.to_owned(),
            event_id: event_id.to_owned(),
            event_type: "transaction.completed".to_owned(),
            status: status.to_owned(),
            origin: "event".to_owned(),
            occurred_at: humantime::format_rfc3339_micros(at).to_string(),
            data: json!({"id": format!("txn_{event_id}"), "status": "completed"}),
            replayed_at: None,
        };
        let id = n.id.clone();
        s.notifications.push(n);
        id
    }

    /// Paddle gave up retrying notification `id`, or delivered it.
    pub fn set_status(&self, id: &str, status: &str) {
        let mut s = self.state.lock().unwrap();
        let n = s.notifications.iter_mut().find(|n| n.id == id).unwrap();
        n.status = status.to_owned();
    }

    /// Someone replayed `id` before, and Paddle could not deliver the
    /// replay either.
    pub fn replayed_before(&self, id: &str) {
        let mut s = self.state.lock().unwrap();
        let next = pdl_id(s.notifications.len());
        let n = s.notifications.iter_mut().find(|n| n.id == id).unwrap();
        n.replayed_at =
            Some(humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string());
        let replay = PdlNotification {
            id: next,
            origin: "replay".to_owned(),
            status: "failed".to_owned(),
            replayed_at: None,
            ..n.clone()
        };
        s.notifications.push(replay);
    }

    pub fn replays(&self) -> Vec<String> {
        self.state.lock().unwrap().replays.clone()
    }

    pub fn notification(&self, id: &str) -> PdlNotification {
        let s = self.state.lock().unwrap();
        s.notifications.iter().find(|n| n.id == id).unwrap().clone()
    }

    /// The body Paddle sends for `n`, and its headers signed with `secret`.
    pub fn request(n: &PdlNotification, secret: &str) -> (Vec<u8>, Vec<(String, String)>) {
        let body = serde_json::to_vec(&json!({
            "event_id": n.event_id, "event_type": n.event_type, "occurred_at": n.occurred_at,
            "notification_id": n.id, "data": n.data
        }))
        .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let headers = sign(&Signing {
            kind: hookinbox::config::Kind::Paddle,
            secret,
            body: &body,
            event_id: &n.event_id,
            event_type: Some(&n.event_type),
            timestamp: now,
            url: "",
            content_type: "application/json",
            hmac: None,
        })
        .unwrap();
        (body, headers)
    }
}

/// A notification id: `ntf_` and 26 of Paddle's characters, growing.
fn pdl_id(n: usize) -> String {
    format!("ntf_01hv{n:022}")
}

fn pdl_error(status: StatusCode, code: &str, detail: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "error": {"type": "request_error", "code": code, "detail": detail,
                      "documentation_url": format!("https://developer.paddle.com/errors/{code}")},
            "meta": {"request_id": "00000000-0000-0000-0000-000000000000"}
        })),
    )
        .into_response()
}

fn pdl_refused() -> Response {
    pdl_error(
        StatusCode::FORBIDDEN,
        "invalid_token",
        "Invalid or revoked API key.",
    )
}

fn pdl_json(n: &PdlNotification) -> serde_json::Value {
    json!({
        "id": n.id, "type": n.event_type, "status": n.status,
        "payload": {
            "event_id": n.event_id, "event_type": n.event_type, "occurred_at": n.occurred_at,
            "notification_id": n.id, "data": n.data
        },
        "occurred_at": n.occurred_at, "delivered_at": null, "replayed_at": n.replayed_at,
        "origin": n.origin, "last_attempt_at": n.occurred_at, "retry_at": null,
        "times_attempted": 1, "notification_setting_id": n.setting
    })
}

async fn pdl_list(
    State(state): State<Arc<Mutex<PdlState>>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let s = state.lock().unwrap();
    if bearer(&headers) != Some(s.key.as_str()) {
        return pdl_refused();
    }
    let list = |name: &str| -> Option<Vec<String>> {
        query
            .get(name)
            .map(|v| v.split(',').map(str::to_owned).collect())
    };
    let statuses = list("status");
    let settings = list("notification_setting_id");
    let time = |name: &str| {
        query
            .get(name)
            .map(|t| humantime::parse_rfc3339_weak(t).unwrap())
    };
    let (from, to) = (time("from"), time("to"));
    let per_page: usize = query
        .get("per_page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(50)
        .clamp(1, 200);
    let ascending = match query.get("order_by").map(String::as_str) {
        None | Some("id[DESC]") => false,
        Some("id[ASC]") => true,
        Some(_) => {
            return pdl_error(
                StatusCode::BAD_REQUEST,
                "invalid_field",
                "Invalid request: order_by",
            );
        }
    };
    let mut all: Vec<&PdlNotification> = s
        .notifications
        .iter()
        .filter(|n| statuses.as_ref().is_none_or(|l| l.contains(&n.status)))
        .filter(|n| settings.as_ref().is_none_or(|l| l.contains(&n.setting)))
        .filter(|n| {
            let at = humantime::parse_rfc3339_weak(&n.occurred_at).unwrap();
            from.is_none_or(|f| at >= f) && to.is_none_or(|t| at < t)
        })
        .collect();
    if !ascending {
        all.reverse();
    }
    let start = match query.get("after") {
        Some(after) => all
            .iter()
            .position(|n| &n.id == after)
            .map_or(all.len(), |p| p + 1),
        None => 0,
    };
    let page: Vec<&PdlNotification> = all[start..].iter().take(per_page).copied().collect();
    let has_more = start + page.len() < all.len();
    let next = page.last().map(|last| {
        let host = headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        let mut q: Vec<(String, String)> = query
            .iter()
            .filter(|(k, _)| *k != "after")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        q.push(("after".to_owned(), last.id.clone()));
        q.sort();
        let q: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(q)
            .finish();
        format!("http://{host}/notifications?{q}")
    });
    axum::Json(json!({
        "data": page.iter().map(|n| pdl_json(n)).collect::<Vec<_>>(),
        "meta": {
            "request_id": "b15ec92e-8688-40d4-a04d-f44cbec93355",
            "pagination": {"per_page": per_page, "next": next, "has_more": has_more,
                           "estimated_total": all.len()}
        }
    }))
    .into_response()
}

async fn pdl_setting(
    State(state): State<Arc<Mutex<PdlState>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let s = state.lock().unwrap();
    if bearer(&headers) != Some(s.key.as_str()) {
        return pdl_refused();
    }
    let Some(active) = s.active.get(&id) else {
        return pdl_error(StatusCode::NOT_FOUND, "not_found", "Entity not found");
    };
    axum::Json(json!({
        "data": {"id": id, "description": "hookinbox", "type": "url",
                 "destination": "https://example.com/in/paddle", "active": active,
                 "api_version": 1, "include_sensitive_fields": false,
                 "subscribed_events": [], "traffic_source": "platform"},
        "meta": {"request_id": "b15ec92e-8688-40d4-a04d-f44cbec93355"}
    }))
    .into_response()
}

async fn pdl_replay(
    State(state): State<Arc<Mutex<PdlState>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (replay, target, secret) = {
        let mut s = state.lock().unwrap();
        if bearer(&headers) != Some(s.key.as_str()) {
            return pdl_refused();
        }
        let next = pdl_id(s.notifications.len());
        let Some(original) = s.notifications.iter_mut().find(|n| n.id == id) else {
            return pdl_error(StatusCode::NOT_FOUND, "not_found", "Entity not found");
        };
        if original.origin != "event" {
            return pdl_error(
                StatusCode::BAD_REQUEST,
                "notification_replay_invalid_origin_type",
                "Only notifications with the origin `event` can be replayed.",
            );
        }
        if original.status != "delivered" && original.status != "failed" {
            return pdl_error(
                StatusCode::BAD_REQUEST,
                "notification_cannot_replay",
                "Notification cannot be replayed because it's not `delivered` or `failed`.",
            );
        }
        original.replayed_at =
            Some(humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string());
        let replay = PdlNotification {
            id: next,
            origin: "replay".to_owned(),
            status: "not_attempted".to_owned(),
            replayed_at: None,
            ..original.clone()
        };
        s.notifications.push(replay.clone());
        s.replays.push(id);
        (replay, s.target.clone(), s.secret.clone())
    };
    let answer = json!({
        "data": {"notification_id": replay.id},
        "meta": {"request_id": "cfe92cac-86a1-49fe-ac50-2d12d6d6a7a1"}
    });
    // Paddle sends the replay on its own time: after the 202.
    tokio::spawn(async move {
        let Some(target) = target else { return };
        let (body, headers) = FakePaddle::request(&replay, &secret);
        let mut request = hookinbox::send::http_client(std::time::Duration::from_secs(10))
            .unwrap()
            .post(target)
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let ok = request.send().await.is_ok_and(|r| r.status().is_success());
        let mut s = state.lock().unwrap();
        let n = s
            .notifications
            .iter_mut()
            .find(|n| n.id == replay.id)
            .unwrap();
        n.status = if ok { "delivered" } else { "needs_retry" }.to_owned();
    });
    (StatusCode::ACCEPTED, axum::Json(answer)).into_response()
}

// ---------------------------------------------------------------- Svix

/// One message of the fake's Svix application, as to its one endpoint.
#[derive(Debug, Clone)]
pub struct SvixMessage {
    pub id: String,
    pub body: Vec<u8>,
    pub created: std::time::SystemTime,
    /// `success`, `fail`, or `sending` (still in Svix's retries).
    pub status: String,
}

#[derive(Default)]
struct SvixState {
    token: String,
    secret: String,
    app: String,
    endpoint: String,
    disabled: bool,
    messages: Vec<SvixMessage>,
    /// Each recovery asked: its `since` and `until`.
    recovers: Vec<(std::time::SystemTime, Option<std::time::SystemTime>)>,
    /// The message ids sent again, in order.
    sent: Vec<String>,
    target: Option<String>,
}

#[derive(Clone)]
pub struct FakeSvix {
    pub addr: SocketAddr,
    state: Arc<Mutex<SvixState>>,
}

impl FakeSvix {
    pub fn start(token: &str, secret: &str, app: &str, endpoint: &str) -> FakeSvix {
        let state = Arc::new(Mutex::new(SvixState {
            token: token.to_owned(),
            secret: secret.to_owned(),
            app: app.to_owned(),
            endpoint: endpoint.to_owned(),
            ..SvixState::default()
        }));
        let router = Router::new()
            .route("/api/v1/app/{app}/endpoint/{endpoint}", get(svix_endpoint))
            .route(
                "/api/v1/app/{app}/endpoint/{endpoint}/recover",
                post(svix_recover),
            )
            .with_state(state.clone());
        FakeSvix {
            addr: serve(router),
            state,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn send_to(&self, target: String) {
        self.state.lock().unwrap().target = Some(target);
    }

    pub fn set_disabled(&self, disabled: bool) {
        self.state.lock().unwrap().disabled = disabled;
    }

    /// A message of `body` created `ago_s` seconds ago, its delivery to the
    /// endpoint in `status`; returns its id.
    pub fn message(&self, n: u32, body: &[u8], status: &str, ago_s: u64) -> String {
        let id = format!("msg_2ZWZBpBUvZwXKQmoEYga{n:05}");
        self.state.lock().unwrap().messages.push(SvixMessage {
            id: id.clone(),
            body: body.to_vec(),
            created: std::time::SystemTime::now() - std::time::Duration::from_secs(ago_s),
            status: status.to_owned(),
        });
        id
    }

    pub fn recovers(&self) -> Vec<(std::time::SystemTime, Option<std::time::SystemTime>)> {
        self.state.lock().unwrap().recovers.clone()
    }

    pub fn sent(&self) -> Vec<String> {
        self.state.lock().unwrap().sent.clone()
    }

    /// The Standard Webhooks headers Svix sends with message `id`.
    pub fn headers(secret: &str, id: &str, body: &[u8]) -> Vec<(String, String)> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        sign(&Signing {
            kind: hookinbox::config::Kind::Standard,
            secret,
            body,
            event_id: id,
            event_type: None,
            timestamp: now,
            url: "",
            content_type: "application/json",
            hmac: None,
        })
        .unwrap()
    }
}

fn svix_refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({"code": "authentication_failed", "detail": "Invalid token"})),
    )
        .into_response()
}

fn svix_known(s: &SvixState, app: &str, endpoint: &str) -> Option<Response> {
    (app != s.app || endpoint != s.endpoint).then(|| {
        (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"code": "not_found", "detail": "Entity not found"})),
        )
            .into_response()
    })
}

async fn svix_endpoint(
    State(state): State<Arc<Mutex<SvixState>>>,
    Path((app, endpoint)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let s = state.lock().unwrap();
    if bearer(&headers) != Some(s.token.as_str()) {
        return svix_refused();
    }
    if let Some(missing) = svix_known(&s, &app, &endpoint) {
        return missing;
    }
    axum::Json(json!({
        "id": endpoint, "uid": null, "url": "https://example.com/in/svix", "version": 1,
        "description": "", "rateLimit": null, "disabled": s.disabled, "filterTypes": null,
        "channels": null, "createdAt": "2026-01-01T00:00:00Z",
        "updatedAt": "2026-01-01T00:00:00Z", "metadata": {}
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct RecoverIn {
    since: String,
    until: Option<String>,
}

async fn svix_recover(
    State(state): State<Arc<Mutex<SvixState>>>,
    Path((app, endpoint)): Path<(String, String)>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<RecoverIn>,
) -> Response {
    let (due, target, secret) = {
        let mut s = state.lock().unwrap();
        if bearer(&headers) != Some(s.token.as_str()) {
            return svix_refused();
        }
        if let Some(missing) = svix_known(&s, &app, &endpoint) {
            return missing;
        }
        let since = humantime::parse_rfc3339_weak(&body.since).unwrap();
        let until = body
            .until
            .as_deref()
            .map(|u| humantime::parse_rfc3339_weak(u).unwrap());
        let oldest =
            std::time::SystemTime::now() - std::time::Duration::from_secs(14 * 86_400 + 5 * 60);
        if since < oldest {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                axum::Json(json!({"code": "validation", "detail": [{
                    "loc": ["body", "since"],
                    "msg": "Cannot recover messages more than 14 days old.",
                    "type": "value_error"
                }]})),
            )
                .into_response();
        }
        s.recovers.push((since, until));
        let due: Vec<SvixMessage> = s
            .messages
            .iter()
            .filter(|m| {
                m.status == "fail" && m.created >= since && until.is_none_or(|u| m.created < u)
            })
            .cloned()
            .collect();
        (due, s.target.clone(), s.secret.clone())
    };
    // The recovery runs as a background task, after the 202.
    tokio::spawn(async move {
        let Some(target) = target else { return };
        let http = hookinbox::send::http_client(std::time::Duration::from_secs(10)).unwrap();
        for m in due {
            let mut request = http.post(&target).body(m.body.clone());
            for (name, value) in FakeSvix::headers(&secret, &m.id, &m.body) {
                request = request.header(name, value);
            }
            let ok = request.send().await.is_ok_and(|r| r.status().is_success());
            let mut s = state.lock().unwrap();
            s.sent.push(m.id.clone());
            if ok {
                let stored = s.messages.iter_mut().find(|x| x.id == m.id).unwrap();
                stored.status = "success".to_owned();
            }
        }
    });
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({
            "id": "qtask_33qen93MNuelBAq1T9G7eHLJRsF", "status": "running",
            "task": "endpoint.recover", "updatedAt": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
        })),
    )
        .into_response()
}

/// A GitHub App's private key made with the `openssl` CLI, as GitHub hands
/// it out (PKCS#1 PEM, in `dir/name`), and its public key (PKCS#1 DER).
pub fn app_key(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, Vec<u8>) {
    let pem = dir.join(name);
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("the openssl CLI (.ci/run installs it)");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
        out.stdout
    };
    let pem_path = pem.to_str().unwrap();
    run(&["genrsa", "-traditional", "-out", pem_path, "2048"]);
    let public = run(&[
        "rsa",
        "-in",
        pem_path,
        "-RSAPublicKey_out",
        "-outform",
        "DER",
    ]);
    (pem, public)
}
