//! One provider API as a pass calls it: its root, its credential, a pace
//! between calls, and the provider's "wait" (429 and `Retry-After`, or a
//! spent rate limit) honoured within a bound.
//!
//! Owns the HTTP exchange and how an answer is classified ([`ApiError`]);
//! what a path means is each provider's file.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};

/// How long a pass waits on one call's answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest `Retry-After` a pass waits out; a longer one ends the pass
/// (`throttled`), and the next pass tries again.
pub const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// Waits out at most this many 429s in one pass.
const MAX_WAITS: u32 = 5;
/// No answer body read is larger: a page of 100 events of Stripe's is a
/// few MiB at most.
const MAX_ANSWER: usize = 32 << 20;

/// Why a call to a provider API gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 401 or 403 (not a rate limit): the credential is wrong, revoked, or
    /// lacks the permission.
    #[error("the provider refused the credential ({status}): check the token and its permissions")]
    Refused { status: u16 },
    /// 429 (or GitHub's 403 with its limit spent) asking for a longer wait
    /// than a pass gives, or too many of them.
    #[error("the provider asked to wait {wait:?} before calling again")]
    Throttled { wait: Duration },
    /// Any other answer but 2xx.
    #[error("the provider answered {status} to {what}")]
    Status { status: u16, what: String },
    #[error("the provider's API could not be reached: {0}")]
    Transport(String),
    #[error("the provider's answer to {what} was not understood: {cause}")]
    Decode { what: String, cause: String },
}

/// A 2xx answer: its body and the headers a pass reads (pagination, request
/// ids).
pub struct Answer {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// The body as `T` (borrowing from it where `T` does); `what` names the
    /// call in the error, formatted only then.
    pub fn json<'a, T: serde::Deserialize<'a>>(
        &'a self,
        what: impl std::fmt::Display,
    ) -> Result<T, ApiError> {
        serde_json::from_slice(&self.body).map_err(|e| ApiError::Decode {
            what: what.to_string(),
            cause: e.to_string(),
        })
    }
}

/// A credential as a header value, marked sensitive: never shown by a
/// debug print of the request.
pub fn credential(text: &str) -> Result<HeaderValue, ApiError> {
    let mut value = HeaderValue::from_str(text).map_err(|_| ApiError::Refused { status: 0 })?;
    value.set_sensitive(true);
    Ok(value)
}

/// A provider API with its credential: every call of a pass goes through
/// one, so the pace and the waits are the pass's.
pub struct Client {
    http: reqwest::Client,
    base: reqwest::Url,
    /// What goes in `Authorization` (or the provider's header).
    auth: (reqwest::header::HeaderName, HeaderValue),
    /// Headers every call carries (an API version, an accept type).
    fixed: Vec<(&'static str, &'static str)>,
    /// The shortest time between two calls (a provider's rate limit), and
    /// before a call that makes something (GitHub limits those apart).
    pace: Duration,
    write_pace: Duration,
    last: Option<tokio::time::Instant>,
    waits: u32,
    /// Calls made, for the pass's report.
    pub calls: u32,
}

impl Client {
    pub fn new(
        base: reqwest::Url,
        auth: (reqwest::header::HeaderName, HeaderValue),
        fixed: Vec<(&'static str, &'static str)>,
        pace: Duration,
        write_pace: Duration,
    ) -> Result<Client, ApiError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            // A redirect would carry the credential to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("hookinbox/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Transport(e.to_string()))?;
        Ok(Client {
            http,
            base,
            auth,
            fixed,
            pace,
            write_pace,
            last: None,
            waits: 0,
            calls: 0,
        })
    }

    /// A credential that changes (a GitHub App's JWT, made anew before it
    /// expires): what the next calls carry in the same header.
    pub fn set_auth(&mut self, value: HeaderValue) {
        self.auth.1 = value;
    }

    /// A new pass: its calls and waits counted from 0.
    pub fn begin(&mut self) {
        self.calls = 0;
        self.waits = 0;
    }

    /// The URL of `path` (with its query) under the API's root; a root with
    /// a path (GitLab's `/api/v4`) keeps it.
    pub fn url(&self, path_and_query: &str) -> String {
        format!(
            "{}{}",
            self.base.as_str().trim_end_matches('/'),
            path_and_query
        )
    }

    /// `GET path`: its answer, waiting out a 429 within the bounds.
    pub async fn get(&mut self, path_and_query: &str) -> Result<Answer, ApiError> {
        self.call(reqwest::Method::GET, path_and_query, None).await
    }

    /// `POST path` with a JSON body (or none).
    pub async fn post(
        &mut self,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, ApiError> {
        self.call(reqwest::Method::POST, path_and_query, body).await
    }

    async fn call(
        &mut self,
        method: reqwest::Method,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Answer, ApiError> {
        let what = format!("{method} {}", path_only(path_and_query));
        loop {
            if let Some(last) = self.last {
                let pace = if method == reqwest::Method::GET {
                    self.pace
                } else {
                    self.write_pace
                };
                tokio::time::sleep_until(last + pace).await;
            }
            self.last = Some(tokio::time::Instant::now());
            self.calls += 1;
            let mut request = self
                .http
                .request(method.clone(), self.url(path_and_query))
                .header(self.auth.0.clone(), self.auth.1.clone());
            for (name, value) in &self.fixed {
                request = request.header(*name, *value);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request
                .send()
                .await
                .map_err(|e| ApiError::Transport(without_url(e)))?;
            let status = response.status();
            if let Some(wait) = asked_to_wait(status, response.headers()) {
                if wait > LONGEST_WAIT || self.waits >= MAX_WAITS {
                    return Err(ApiError::Throttled { wait });
                }
                self.waits += 1;
                tracing::info!(
                    call = what,
                    wait_ms = wait.as_millis() as u64,
                    "the provider's API asked to wait; waiting"
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            if status == reqwest::StatusCode::UNAUTHORIZED
                || status == reqwest::StatusCode::FORBIDDEN
            {
                return Err(ApiError::Refused {
                    status: status.as_u16(),
                });
            }
            if !status.is_success() {
                return Err(ApiError::Status {
                    status: status.as_u16(),
                    what,
                });
            }
            let headers = response.headers().clone();
            let body = read_capped(response)
                .await
                .map_err(|cause| ApiError::Decode {
                    what: what.clone(),
                    cause,
                })?;
            return Ok(Answer { headers, body });
        }
    }
}

/// The wait a provider asks for: 429 with `Retry-After` (seconds; 1 s when
/// absent or unreadable), or GitHub's 403 with `x-ratelimit-remaining: 0`
/// until `x-ratelimit-reset`.
fn asked_to_wait(status: reqwest::StatusCode, headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        return Some(Duration::from_secs(number("retry-after").unwrap_or(1)));
    }
    if status == reqwest::StatusCode::FORBIDDEN && number("x-ratelimit-remaining") == Some(0) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let reset = number("x-ratelimit-reset").unwrap_or(now + 60);
        return Some(Duration::from_secs(reset.saturating_sub(now).max(1)));
    }
    None
}

async fn read_capped(mut response: reqwest::Response) -> Result<Bytes, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(without_url)? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("the answer is larger than {MAX_ANSWER} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

/// A path without its query, for messages: a query may hold a cursor, and
/// a message stays short.
fn path_only(path_and_query: &str) -> &str {
    path_and_query.split('?').next().unwrap_or(path_and_query)
}

/// A transport error's text without the URL reqwest puts in it.
fn without_url(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_what_the_provider_asks_for() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            asked_to_wait(reqwest::StatusCode::TOO_MANY_REQUESTS, &headers),
            Some(Duration::from_secs(1))
        );
        headers.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(
            asked_to_wait(reqwest::StatusCode::TOO_MANY_REQUESTS, &headers),
            Some(Duration::from_secs(7))
        );
        // A 403 is a refusal unless the rate limit is spent.
        assert_eq!(
            asked_to_wait(reqwest::StatusCode::FORBIDDEN, &headers),
            None
        );
        headers.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
        assert!(asked_to_wait(reqwest::StatusCode::FORBIDDEN, &headers).is_some());
        assert_eq!(asked_to_wait(reqwest::StatusCode::OK, &headers), None);
    }
}
