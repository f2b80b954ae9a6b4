//! One event to the developer's local app: the POST `hookinbox listen`
//! makes (the delivery contract's headers signed with its key, or the
//! provider's own headers), and the line it prints about the answer.

use std::time::{Duration, Instant};

use anyhow::anyhow;
use base64::Engine;
use serde::Serialize;

use crate::api::{self, EventSummary, PayloadEncoding, Timestamp};
use crate::standard_webhooks::{Message, SigningKeys};

/// How each request is signed.
pub(super) enum Signing {
    /// The delivery contract's headers, signed with these keys.
    Contract(SigningKeys),
    /// The provider's headers as hookinbox received them (so a provider's
    /// SDK verifies the event), with no contract header.
    Original,
}

/// An event with what a forward needs: the request as received.
pub(super) struct Incoming {
    pub summary: EventSummary,
    pub body: Vec<u8>,
    pub content_type: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl Incoming {
    pub(super) fn streamed(e: api::StreamedEvent) -> anyhow::Result<Incoming> {
        let payload = e
            .payload
            .ok_or_else(|| anyhow!("the stream sent event {} without its payload", e.event.id))?;
        Ok(Incoming {
            body: bytes(&payload)?,
            content_type: e.content_type,
            headers: e.headers.unwrap_or_default(),
            summary: e.event,
        })
    }

    pub(super) fn detail(e: api::EventDetail) -> anyhow::Result<Incoming> {
        Ok(Incoming {
            body: bytes(&e.payload)?,
            content_type: e.content_type,
            headers: e.headers,
            summary: e.summary,
        })
    }
}

fn bytes(payload: &api::Payload) -> anyhow::Result<Vec<u8>> {
    match payload.encoding {
        PayloadEncoding::Text => Ok(payload.data.clone().into_bytes()),
        PayloadEncoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(&payload.data)
            .map_err(|e| anyhow!("a payload that is not base64: {e}")),
    }
}

/// What the local app did with one event: the line `listen` prints.
#[derive(Debug, Serialize)]
pub(super) struct Forwarded {
    /// hookinbox's id (the `webhook-id`): `--replay` takes it.
    pub id: String,
    pub source: String,
    pub event_id: String,
    #[serde(rename = "type")]
    pub event_type: Option<String>,
    pub received_at: Timestamp,
    /// The local app's status; absent when it did not answer.
    pub status: Option<u16>,
    pub latency_ms: u64,
    /// Why there is no status (refused, timed out).
    pub error: Option<String>,
}

impl Forwarded {
    pub(super) fn is_success(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// One line for people: time, source, type, id, the answer, latency;
    /// the answer coloured when `colour`.
    pub(super) fn line(&self, colour: bool) -> String {
        let (answer, paint) = match (self.status, &self.error) {
            (Some(status), _) => (
                format!("{status}"),
                match status {
                    200..=299 => "32",
                    300..=499 => "33",
                    _ => "31",
                },
            ),
            (None, Some(error)) => (format!("error: {error}"), "31"),
            (None, None) => ("no answer".to_owned(), "31"),
        };
        let answer = if colour {
            format!("\x1b[{paint}m{answer}\x1b[0m")
        } else {
            answer
        };
        format!(
            "{}  {}  {}  {}  -> {}  {} ms\n",
            super::super::output::time(self.received_at),
            self.source,
            self.event_type.as_deref().unwrap_or("-"),
            self.id,
            answer,
            self.latency_ms
        )
    }
}

/// `--forward-to` as the URL to post to. Without a scheme
/// (`localhost:3000/hooks`, as `stripe listen` takes it) http:// is meant:
/// read as it stands, `localhost` would be the scheme and every event
/// would fail. A scheme other than HTTP's is refused here, at the start,
/// and not at each event.
pub(super) fn app_url(text: &str) -> Result<reqwest::Url, AppUrlError> {
    let text = text.trim();
    let full = match text.contains("://") {
        true => text.to_owned(),
        false => format!("http://{text}"),
    };
    let url = reqwest::Url::parse(&full).map_err(|cause| AppUrlError::NotAUrl {
        text: text.to_owned(),
        cause,
    })?;
    match url.scheme() {
        "http" | "https" if url.host().is_some() => Ok(url),
        "http" | "https" => Err(AppUrlError::NoHost {
            text: text.to_owned(),
        }),
        other => Err(AppUrlError::NotHttp {
            scheme: other.to_owned(),
        }),
    }
}

/// `--forward-to` that is not an app's HTTP URL; clap shows it after the
/// option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum AppUrlError {
    #[error("{text:?} is not a URL: {cause}")]
    NotAUrl {
        text: String,
        #[source]
        cause: <reqwest::Url as std::str::FromStr>::Err,
    },
    #[error("{text:?} names no host: give one, like localhost:3000/webhooks")]
    NoHost { text: String },
    #[error(
        "{scheme}:// is not HTTP: give http://, https:// or no scheme (http:// is meant), \
         like localhost:3000/webhooks"
    )]
    NotHttp { scheme: String },
}

/// Posts events to the local app.
pub(super) struct Forwarder {
    url: reqwest::Url,
    signing: Signing,
    http: reqwest::Client,
}

impl Forwarder {
    pub(super) fn new(
        url: reqwest::Url,
        signing: Signing,
        timeout: Duration,
    ) -> anyhow::Result<Forwarder> {
        // The TLS provider is installed by `cli` before any command runs.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("hookinbox-listen/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| anyhow!("cannot build the HTTP client: {e}"))?;
        Ok(Forwarder { url, signing, http })
    }

    /// Sends `event` once, whatever the answer: a development listener
    /// shows a failure and goes on (it is not a destination, and retries
    /// nothing).
    pub(super) async fn forward(&self, event: &Incoming) -> Forwarded {
        let s = &event.summary;
        let headers = match &self.signing {
            Signing::Contract(key) => Message {
                id: &s.id,
                source: &s.source,
                event_id: &s.event_id,
                event_type: s.event_type.as_deref(),
                content_type: event.content_type.as_deref(),
                origin: crate::standard_webhooks::origin_of(&event.headers),
                body: &event.body,
            }
            .headers(key, 1, crate::clock::unix_ms(std::time::SystemTime::now())),
            Signing::Original => event.headers.clone(),
        };
        let mut req = self.http.post(self.url.clone());
        for (name, value) in &headers {
            req = req.header(name.as_str(), value.as_str());
        }
        let started = Instant::now();
        let answer = async {
            let res = req.body(event.body.clone()).send().await?;
            let status = res.status().as_u16();
            // Read to the end, so the latency is the whole answer's.
            res.bytes().await?;
            Ok::<u16, reqwest::Error>(status)
        }
        .await;
        let (status, error) = match answer {
            Ok(status) => (Some(status), None),
            Err(e) if e.is_timeout() => (None, Some("timed out".to_owned())),
            Err(e) if e.is_connect() => (
                None,
                Some(format!(
                    "cannot connect to {} (is the app running?)",
                    self.url
                )),
            ),
            Err(e) => (None, Some(without_url(&e))),
        };
        Forwarded {
            id: s.id.clone(),
            source: s.source.clone(),
            event_id: s.event_id.clone(),
            event_type: s.event_type.clone(),
            received_at: s.received_at,
            status,
            latency_ms: started.elapsed().as_millis() as u64,
            error,
        }
    }
}

/// reqwest's message without the URL it repeats.
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(&format!(" ({url})"), "");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{AppUrlError, app_url};

    #[test]
    fn an_address_without_a_scheme_is_http_and_another_scheme_is_refused() {
        let url = |text: &str| app_url(text).map(|u| u.to_string());
        assert_eq!(
            url("localhost:3000/hooks").unwrap(),
            "http://localhost:3000/hooks"
        );
        assert_eq!(url("127.0.0.1:8080").unwrap(), "http://127.0.0.1:8080/");
        assert_eq!(
            url("https://app.test/hooks?x=1").unwrap(),
            "https://app.test/hooks?x=1"
        );
        let ftp = url("ftp://localhost/hooks").unwrap_err();
        assert_eq!(
            ftp,
            AppUrlError::NotHttp {
                scheme: "ftp".into()
            }
        );
        assert!(ftp.to_string().starts_with("ftp:// is not HTTP"), "{ftp}");
        // An HTTP URL's empty host is the URL parser's to refuse.
        let empty = url("http://").unwrap_err();
        assert!(matches!(empty, AppUrlError::NotAUrl { .. }), "{empty:?}");
        assert!(empty.to_string().contains("empty host"), "{empty}");
    }
}
