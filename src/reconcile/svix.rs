//! Svix, for a `standard` source whose sender runs its webhooks on Svix:
//! Svix retries a failed message by itself (immediately, then after 5 s,
//! 5 min, 30 min, 2 h, 5 h, 10 h and 10 h: 27 h 35 min in all, "Retry
//! Schedule") and then marks it failed for the endpoint; it resends every
//! failed message of an endpoint created in a span of time when asked
//! ("Recover Failed Webhooks", `POST
//! /api/v1/app/{app_id}/endpoint/{endpoint_id}/recover` with `since` and
//! `until`; 202 and a background task). Each comes back signed, with the
//! same `webhook-id` (the event id hookinbox dedupes on), through ingest.
//!
//! Svix lists nothing a pass could match: Svix itself resends only what
//! failed, and hookinbox stores what it already holds once. A pass asks
//! for the span from its cursor (where the last recovery ended) to 28
//! hours before now, as a message younger than that may still be in Svix's
//! own retries (it is not `failed` yet and would not be recovered), and
//! keeps the span's end; so each message is asked for once, after Svix gave
//! up. A pass by hand with its own `since` asks for everything from then to
//! now. Svix refuses a `since` more than 14 days back ("Cannot recover
//! messages more than 14 days old"), hence the window. The answer says
//! nothing of how many messages it resends: the report counts recover
//! calls (`recovers`), not messages. API: Svix API v1.

use std::time::Duration;

use reqwest::header::AUTHORIZATION;
use serde::Deserialize;

use super::client::{ApiError, Client};
use super::{Cursor, Pass, PassError};
use crate::clock::from_unix_ms;
use crate::config::Secret;

/// Two calls a pass: far below any of Svix's limits.
const PACE: Duration = Duration::from_millis(100);
/// Svix's retry schedule, 27 h 35 min 5 s, rounded up: a message created
/// longer ago than this has either been delivered or failed for good.
const SETTLE: Duration = Duration::from_secs(28 * 3600);
/// Svix refuses a `since` older than 14 days (and 5 minutes' grace).
const OLDEST: Duration = Duration::from_secs(14 * 86_400);

pub(super) struct Svix {
    client: Client,
    /// `/api/v1/app/{app}/endpoint/{endpoint}`.
    endpoint_path: String,
}

#[derive(Deserialize)]
struct Endpoint {
    #[serde(default)]
    disabled: bool,
}

impl Svix {
    pub(super) fn new(
        base: reqwest::Url,
        token: &Secret,
        app: &str,
        endpoint: &str,
    ) -> Result<Svix, ApiError> {
        let auth = super::client::credential(&format!("Bearer {}", token.expose()))?;
        let client = Client::new(
            base,
            (AUTHORIZATION, auth),
            vec![("accept", "application/json")],
            PACE,
            PACE,
        )?;
        Ok(Svix {
            client,
            endpoint_path: format!("/api/v1/app/{app}/endpoint/{endpoint}"),
        })
    }

    /// Whether Svix still sends to the endpoint (not `disabled`: Svix
    /// disables one after 5 days of failures). A pass begins here.
    pub(super) async fn active(&mut self) -> Result<bool, ApiError> {
        self.client.begin();
        let answer = self.client.get(&self.endpoint_path).await?;
        let e: Endpoint = answer.json("GET /api/v1/app/…/endpoint/…")?;
        Ok(!e.disabled)
    }

    pub(super) async fn pass(&mut self, pass: &mut Pass<'_>) -> Result<(), PassError> {
        let now = pass.clock.now_ms();
        let oldest = now.saturating_sub(OLDEST.as_millis() as u64);
        let (since, until) = match pass.cursor {
            _ if pass.own_since => (pass.since_ms, now),
            Some(Cursor::Svix { until_ms }) => (until_ms, settled(now)),
            _ => (pass.since_ms, settled(now)),
        };
        let since = since.max(oldest);
        if until > since {
            if !pass.dry_run {
                let body = serde_json::json!({
                    "since": rfc3339(since),
                    "until": rfc3339(until),
                });
                let path = format!("{}/recover", self.endpoint_path);
                self.client.post(&path, Some(&body)).await?;
            }
            pass.report.recovers += 1;
            pass.keep(Cursor::Svix { until_ms: until }).await?;
        }
        pass.report.calls = self.client.calls;
        Ok(())
    }
}

/// Where a timed pass's span ends: what Svix is done retrying.
fn settled(now_ms: u64) -> u64 {
    now_ms.saturating_sub(SETTLE.as_millis() as u64)
}

fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_millis(from_unix_ms(ms)).to_string()
}
