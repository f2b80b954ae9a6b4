//! Paddle Billing: a notification per event and destination, kept 90 days.
//! Paddle retries a failed one by itself (live: up to 60 times over 3
//! days; it is `needs_retry` meanwhile) and then marks it `failed`; a
//! `failed` one can be replayed: Paddle makes a new notification (a new
//! `notification_id`) of the same event (the same `event_id`, which
//! hookinbox dedupes on), signed with `Paddle-Signature`, and it comes in
//! through ingest.
//!
//! A pass lists the notifications not delivered (`status=failed,
//! needs_retry,not_attempted`), of `notification_setting` when set, from
//! its cursor on, oldest first (`order_by=id[ASC]`, 200 a page, the next
//! page by `meta.pagination.next`). Per event id, once: held, or Paddle
//! still at it (`needs_retry`: counted skipped, left to Paddle), or
//! replayed before (`replayed_at`: skipped, as a replay hookinbox did not
//! take would not be taken again), or else its failed notification is
//! replayed (`POST /notifications/{id}/replay`). Without
//! `notification_setting`, failed notifications of every destination are
//! listed, and a replay goes to its own destination.
//!
//! The cursor is a time (`from`): every notification that occurred before
//! it was delivered, or failed and was judged. It stays at the oldest one
//! Paddle is still delivering or retrying, and at most a few minutes
//! before the pass began, so the next pass lists again what came after
//! (held, or with its `replayed_at` set: the overlap asks nothing twice).
//! A pass cut short keeps its cursor where it was. API: "List
//! notifications", "Replay a notification", "Get a notification setting",
//! Paddle API version 1.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::AUTHORIZATION;
use serde::Deserialize;

use super::client::{ApiError, Client};
use super::{Cursor, Pass, PassError, rfc3339_ms};
use crate::config::Secret;
use crate::words::ReconciledHow;

/// 200: the most a page of notifications holds.
const PER_PAGE: u32 = 200;
/// "Most operations are limited to 240 requests per minute" (Paddle API,
/// "Rate limiting"), per IP address.
const PACE: Duration = Duration::from_millis(250);
/// A notification is made a moment after its event occurred: the cursor
/// stays this far behind a pass, so one made late is still listed.
const SETTLE: Duration = Duration::from_secs(600);

pub(super) struct Paddle {
    client: Client,
    setting: Option<String>,
}

#[derive(Deserialize)]
struct Page {
    data: Vec<Notification>,
    meta: Meta,
}

#[derive(Deserialize)]
struct Meta {
    pagination: Pagination,
}

#[derive(Deserialize)]
struct Pagination {
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    has_more: bool,
}

/// One notification as `GET /notifications` lists it (the fields a pass
/// reads).
#[derive(Deserialize)]
struct Notification {
    id: String,
    status: String,
    /// `event`, or `replay` for one a replay made (which cannot be
    /// replayed itself).
    #[serde(default)]
    origin: Option<String>,
    occurred_at: String,
    #[serde(default)]
    replayed_at: Option<String>,
    #[serde(default)]
    payload: Option<Payload>,
}

#[derive(Deserialize)]
struct Payload {
    event_id: String,
}

#[derive(Deserialize)]
struct Setting {
    data: SettingData,
}

#[derive(Deserialize)]
struct SettingData {
    active: bool,
}

/// What a pass gathered of one event's listed notifications.
#[derive(Default)]
struct Event<'a> {
    /// When it first occurred (Unix ms), for the order of asking.
    at: u64,
    /// Its failed notification of origin `event`, the one to replay.
    failed: Option<&'a Notification>,
    /// A notification of it Paddle is still delivering or retrying.
    pending_since: Option<u64>,
    retrying: bool,
    replayed: bool,
}

impl Paddle {
    pub(super) fn new(
        base: reqwest::Url,
        token: &Secret,
        setting: Option<String>,
    ) -> Result<Paddle, ApiError> {
        let auth = super::client::credential(&format!("Bearer {}", token.expose()))?;
        let client = Client::new(
            base,
            (AUTHORIZATION, auth),
            vec![("paddle-version", "1")],
            PACE,
            PACE,
        )?;
        Ok(Paddle { client, setting })
    }

    /// Whether the destination is `active`; `None` without one configured.
    /// A pass begins here.
    pub(super) async fn active(&mut self) -> Result<Option<bool>, ApiError> {
        self.client.begin();
        let Some(setting) = &self.setting else {
            return Ok(None);
        };
        let answer = self
            .client
            .get(&format!("/notification-settings/{setting}"))
            .await?;
        let s: Setting = answer.json("GET /notification-settings")?;
        Ok(Some(s.data.active))
    }

    pub(super) async fn pass(&mut self, pass: &mut Pass<'_>) -> Result<(), PassError> {
        let kept = match pass.cursor {
            Some(Cursor::Paddle { from_ms }) if !pass.own_since => Some(from_ms),
            _ => None,
        };
        let from_ms = kept.unwrap_or(pass.since_ms).max(pass.since_ms);
        let listed = self.list(pass, from_ms).await?;

        let mut events: HashMap<&str, Event<'_>> = HashMap::new();
        let mut newest = None;
        for n in &listed {
            // Without an event id there is nothing to match or to replay.
            let Some(payload) = &n.payload else {
                continue;
            };
            let at = rfc3339_ms(&n.occurred_at).ok_or_else(|| ApiError::Decode {
                what: "a notification's occurred_at".to_owned(),
                cause: format!("{:?} is not an RFC 3339 time", n.occurred_at),
            })?;
            newest = newest.max(Some(at));
            let e = events.entry(payload.event_id.as_str()).or_default();
            e.at = if e.at == 0 { at } else { e.at.min(at) };
            match n.status.as_str() {
                "failed" if n.origin.as_deref().unwrap_or("event") == "event" => {
                    e.replayed |= n.replayed_at.is_some();
                    e.failed.get_or_insert(n);
                }
                "failed" => {}
                status => {
                    e.retrying |= status == "needs_retry";
                    e.pending_since = Some(e.pending_since.map_or(at, |p: u64| p.min(at)));
                }
            }
        }
        let mut events: Vec<(&str, Event<'_>)> = events.into_iter().collect();
        events.sort_by_key(|(id, e)| (e.at, *id));

        // The cursor may not pass what Paddle has yet to finish with.
        let mut floor = None;
        for (event_id, e) in &events {
            let held = pass.held(event_id)?;
            if !held && let Some(since) = e.pending_since {
                floor = Some(floor.map_or(since, |f: u64| f.min(since)));
            }
            // One Paddle has not tried yet is not "could not deliver".
            if e.failed.is_none() && !e.retrying {
                continue;
            }
            pass.report.listed += 1;
            if held {
                pass.report.held += 1;
                continue;
            }
            let Some(failed) = e.failed.filter(|_| !e.retrying && !e.replayed) else {
                pass.report.skipped += 1;
                continue;
            };
            if !pass.dry_run {
                let path = format!("/notifications/{}/replay", failed.id);
                match self.client.post(&path, None).await {
                    Ok(_) => pass.counted(ReconciledHow::Resent),
                    // 400: not replayable (any more); 404: no longer kept.
                    Err(ApiError::Status {
                        status: 400 | 404, ..
                    }) => {
                        pass.report.skipped += 1;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            pass.report.resent += 1;
        }

        let settled = pass
            .clock
            .now_ms()
            .saturating_sub(SETTLE.as_millis() as u64);
        let mut to = floor.unwrap_or(settled).min(settled);
        if !pass.report.complete {
            // Cut at the page limit: no further than what was listed.
            to = to.min(newest.unwrap_or(from_ms));
        }
        if to > from_ms || kept.is_none() {
            pass.keep(Cursor::Paddle {
                from_ms: to.max(from_ms),
            })
            .await?;
        }
        pass.report.calls = self.client.calls;
        Ok(())
    }

    /// The notifications not delivered that occurred from `from_ms` on,
    /// oldest first, page by page.
    async fn list(
        &mut self,
        pass: &mut Pass<'_>,
        from_ms: u64,
    ) -> Result<Vec<Notification>, PassError> {
        let from = humantime::format_rfc3339_seconds(crate::clock::from_unix_ms(from_ms));
        let mut path = format!(
            "/notifications?status=failed,needs_retry,not_attempted&order_by=id%5BASC%5D\
             &per_page={PER_PAGE}&from={from}"
        );
        if let Some(setting) = &self.setting {
            path.push_str(&format!("&notification_setting_id={setting}"));
        }
        let mut out = Vec::new();
        loop {
            if pass.report.pages >= super::MAX_PAGES {
                pass.report.complete = false;
                break;
            }
            let answer = self.client.get(&path).await?;
            pass.report.pages += 1;
            let page: Page = answer.json("GET /notifications")?;
            let more = page.meta.pagination.has_more && !page.data.is_empty();
            out.extend(page.data);
            match page.meta.pagination.next.filter(|_| more) {
                Some(next) => path = self.on_base(&next)?,
                None => break,
            }
        }
        Ok(out)
    }

    /// The path and query of `meta.pagination.next`, a full URL, which must
    /// be on the configured root (the key would follow it elsewhere).
    fn on_base(&self, url: &str) -> Result<String, ApiError> {
        let root = self.client.url("");
        match url.strip_prefix(&root) {
            Some(rest) if rest.starts_with('/') => Ok(rest.to_owned()),
            _ => Err(ApiError::Decode {
                what: "a page's meta.pagination.next".to_owned(),
                cause: "its next page is not on the configured api_base".to_owned(),
            }),
        }
    }
}
