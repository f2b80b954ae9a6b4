//! Stripe: no resend exists, but its events API lists the events it has
//! not delivered to every endpoint (`delivery_success=false`) for 30 days.
//! A pass fetches those hookinbox does not hold and stores each as
//! received from the API: the Event object's exact bytes, marked
//! `origin = "reconciled"` with where they came from; no signature covers
//! them, and they are never presented as signed.
//!
//! The list is newest first. The first pass walks back from the newest to
//! its lookback (`starting_after`), keeping its place after each page, and
//! then keeps the newest id it saw; each later pass asks for what is newer
//! than that (`ending_before`, page after page towards the newest). A pass
//! cut short (a restart, a wait too long) resumes where it kept its place,
//! so nothing is fetched twice. API: "List all events", "Retrieve a webhook
//! endpoint".

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::client::{Answer, ApiError, Client};
use super::{Cursor, Fetched, Pass, PassError, StripeWalk};
use crate::config::Secret;
use crate::words::ReconciledHow;

/// 100: the most a page of a Stripe list holds.
const LIMIT: u32 = 100;
/// Stripe allows 25 reads a second in test mode (100 in live mode).
const PACE: Duration = Duration::from_millis(40);

pub(super) struct Stripe {
    client: Client,
    endpoint: Option<String>,
}

#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    has_more: bool,
}

/// The fields of an Event a pass reads; its bytes are stored as they came.
#[derive(Deserialize)]
struct EventHead {
    id: String,
    #[serde(rename = "type")]
    event_type: Option<String>,
    api_version: Option<String>,
}

#[derive(Deserialize)]
struct Endpoint {
    status: String,
}

impl Stripe {
    pub(super) fn new(
        base: reqwest::Url,
        token: &Secret,
        endpoint: Option<String>,
    ) -> Result<Stripe, ApiError> {
        let auth = super::client::credential(&format!("Bearer {}", token.expose()))?;
        let client = Client::new(base, (AUTHORIZATION, auth), Vec::new(), PACE, PACE)?;
        Ok(Stripe { client, endpoint })
    }

    /// Whether the endpoint is `enabled`; `None` without one configured.
    /// A pass begins here.
    pub(super) async fn active(&mut self) -> Result<Option<bool>, ApiError> {
        self.client.begin();
        let Some(endpoint) = &self.endpoint else {
            return Ok(None);
        };
        let path = format!("/v1/webhook_endpoints/{endpoint}");
        let answer = self.client.get(&path).await?;
        let e: Endpoint = answer.json("GET /v1/webhook_endpoints")?;
        Ok(Some(e.status == "enabled"))
    }

    pub(super) async fn pass(&mut self, pass: &mut Pass<'_>) -> Result<(), PassError> {
        let (after, walk) = match pass.cursor.clone() {
            Some(Cursor::Stripe { after, walk }) => (after, walk),
            _ => (None, None),
        };
        match (after, walk) {
            (Some(after), None) if pass.keeps_cursor() => self.forward(pass, after).await,
            (after, walk) => self.back(pass, after, walk).await,
        }?;
        pass.report.calls = self.client.calls;
        Ok(())
    }

    /// Pages of events newer than `after`, oldest page first.
    async fn forward(&mut self, pass: &mut Pass<'_>, mut after: String) -> Result<(), PassError> {
        loop {
            if pass.report.pages >= super::MAX_PAGES {
                pass.report.complete = false;
                return Ok(());
            }
            let answer = self
                .client
                .get(&format!(
                    "/v1/events?delivery_success=false&limit={LIMIT}&ending_before={after}"
                ))
                .await?;
            let (events, has_more) = self.take_page(pass, &answer).await?;
            // The page's first is its newest: everything up to it is done.
            if let Some(newest) = events.first() {
                after = newest.clone();
                pass.keep(Cursor::Stripe {
                    after: Some(after.clone()),
                    walk: None,
                })
                .await?;
            }
            if !has_more || events.is_empty() {
                return Ok(());
            }
        }
    }

    /// The walk from the newest event back to the lookback (or to `after`,
    /// for a pass by hand with `--since`), resumed from `walk`.
    async fn back(
        &mut self,
        pass: &mut Pass<'_>,
        after: Option<String>,
        mut walk: Option<StripeWalk>,
    ) -> Result<(), PassError> {
        let since_s = pass.since_ms / 1000;
        loop {
            if pass.report.pages >= super::MAX_PAGES {
                pass.report.complete = false;
                return Ok(());
            }
            let mut path = format!(
                "/v1/events?delivery_success=false&limit={LIMIT}&created%5Bgte%5D={since_s}"
            );
            if let Some(w) = &walk {
                path.push_str(&format!("&starting_after={}", w.next));
            }
            let answer = self.client.get(&path).await?;
            let (events, has_more) = self.take_page(pass, &answer).await?;
            let (Some(newest), Some(oldest)) = (events.first(), events.last()) else {
                break;
            };
            let top = walk.as_ref().map_or(newest, |w| &w.top).clone();
            // A pass by hand with its own `since` walks all the way back
            // too: it checks again what the cursor had passed.
            let done = !has_more;
            walk = (!done).then(|| StripeWalk {
                top: top.clone(),
                next: oldest.clone(),
            });
            pass.keep(Cursor::Stripe {
                after: if done { Some(top) } else { after.clone() },
                walk: walk.clone(),
            })
            .await?;
            if done {
                return Ok(());
            }
        }
        // An empty page: nothing further back. A walk that began keeps its top.
        if let Some(w) = walk {
            pass.keep(Cursor::Stripe {
                after: Some(w.top),
                walk: None,
            })
            .await?;
        }
        Ok(())
    }

    /// Stores a page's events hookinbox does not hold; returns every id
    /// the page listed (newest first) and whether more follow.
    async fn take_page(
        &mut self,
        pass: &mut Pass<'_>,
        answer: &Answer,
    ) -> Result<(Vec<String>, bool), PassError> {
        pass.report.pages += 1;
        let decode = |cause: String| ApiError::Decode {
            what: "GET /v1/events".to_owned(),
            cause,
        };
        let page: Page<'_> = answer.json("GET /v1/events")?;
        let request_id = answer
            .headers
            .get("request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut ids = Vec::with_capacity(page.data.len());
        let mut fetched = Vec::new();
        for raw in &page.data {
            let head: EventHead =
                serde_json::from_str(raw.get()).map_err(|e| decode(e.to_string()))?;
            ids.push(head.id.clone());
            pass.report.listed += 1;
            if pass.held(&head.id)? {
                pass.report.held += 1;
                continue;
            }
            let mut provenance = vec![(
                "hookinbox-fetched-from".to_owned(),
                self.client.url(&format!("/v1/events/{}", head.id)),
            )];
            if let Some(id) = &request_id {
                provenance.push(("hookinbox-request-id".to_owned(), id.clone()));
            }
            if let Some(v) = &head.api_version {
                provenance.push(("hookinbox-api-version".to_owned(), v.clone()));
            }
            fetched.push(Fetched {
                event_id: head.id,
                event_type: head.event_type,
                body: Bytes::copy_from_slice(raw.get().as_bytes()),
                provenance,
            });
        }
        let stored = pass.store_fetched(fetched).await?;
        for _ in 0..stored {
            pass.counted(ReconciledHow::Fetched);
        }
        Ok((ids, page.has_more))
    }
}
