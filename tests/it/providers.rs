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
//!   token is 401 `{"message": "Bad credentials"}`.
//! - Stripe, "List all events" (`GET /v1/events`: `delivery_success`,
//!   `limit`, `starting_after`, `ending_before`, `created[gte]`; a list
//!   object with `data` newest first and `has_more`; a `Request-Id`
//!   header) and "Retrieve a webhook endpoint" (`status`). A bad key is 401
//!   with an `invalid_request_error`; the rate limit is 429.

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
            .with_state(state.clone());
        FakeGithub {
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
    Path((_, _, hook)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let mut s = state.lock().unwrap();
    s.calls += 1;
    if bearer(&headers) != Some(s.token.as_str()) {
        return gh_refused();
    }
    axum::Json(json!({
        "type": "Repository", "id": hook, "name": "web", "active": s.active,
        "events": ["push", "pull_request"],
        "config": {"content_type": "json", "insecure_ssl": "0", "url": "https://example.com/in/github"},
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct GhPage {
    per_page: Option<usize>,
    cursor: Option<String>,
}

async fn gh_deliveries(
    State(state): State<Arc<Mutex<GhState>>>,
    Path((owner, repo, hook)): Path<(String, String, u64)>,
    Query(page): Query<GhPage>,
    headers: HeaderMap,
) -> Response {
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut s = state.lock().unwrap();
    s.calls += 1;
    if bearer(&headers) != Some(s.token.as_str()) {
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
        let link = format!(
            "<http://{}/repos/{owner}/{repo}/hooks/{hook}/deliveries?per_page={per_page}&cursor=v1_{last}>; rel=\"next\"",
            host
        );
        response.headers_mut().insert("link", link.parse().unwrap());
    }
    response
}

async fn gh_attempt(
    State(state): State<Arc<Mutex<GhState>>>,
    Path((_, _, _, id)): Path<(String, String, u64, u64)>,
    headers: HeaderMap,
) -> Response {
    let (delivery, target, secret) = {
        let mut s = state.lock().unwrap();
        s.calls += 1;
        if bearer(&headers) != Some(s.token.as_str()) {
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
    axum::Json(json!({"id": id, "object": "webhook_endpoint", "status": s.endpoint_status, "url": "https://example.com/in/stripe", "enabled_events": ["*"]}))
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
