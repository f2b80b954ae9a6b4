//! GitHub: a repository's or organisation's webhook, or a GitHub App's.
//! GitHub never retries a failed delivery by itself, but it lists each
//! hook's deliveries of the past 3 days and redelivers one when asked; a
//! redelivery carries the same `X-GitHub-Delivery` (the event id hookinbox
//! dedupes on), signed as before, and comes in through ingest.
//!
//! A pass lists the deliveries newer than its mark (the highest delivery
//! id it judged), and for each delivery guid with no 2xx attempt that
//! hookinbox does not hold, asks for its newest attempt again
//! (`POST …/deliveries/{id}/attempts`). A repository's or organisation's
//! hook is read with a token, and its `active` is the subscription's
//! health; an App's (`/app/hook/…`) as the App, with a JWT
//! (`github_app.rs`), and its webhook has no `active` to read: a pass reads
//! its config (`GET /app/hook/config`), which proves the JWT, and reports
//! the health unknown. API: "REST API endpoints for repository webhooks",
//! "… organization webhooks" and "… for GitHub App webhooks", version
//! 2022-11-28.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde::Deserialize;

use super::client::{ApiError, Client};
use super::github_app::AppJwt;
use super::{Cursor, Pass, PassError};
use crate::clock::Clock;
use crate::config::{AppKey, GithubHook, Secret};
use crate::words::ReconciledHow;

/// 100: the most a page of deliveries holds.
const PER_PAGE: u32 = 100;
/// GitHub's primary limit is 5,000 calls an hour for a token.
const PACE: Duration = Duration::from_millis(100);
/// Redelivery is a call that makes something: GitHub's secondary limit
/// allows 80 of those a minute.
const WRITE_PACE: Duration = Duration::from_millis(800);

pub(super) struct Github {
    client: Client,
    /// `/repos/OWNER/REPO/hooks/ID`, `/orgs/ORG/hooks/ID` or `/app/hook`.
    hook_path: String,
    /// An App's JWT, made anew before it expires; `None` with a token.
    app: Option<AppJwt>,
}

/// One delivery as `GET …/hooks/{id}/deliveries` lists it (the fields a
/// pass reads).
#[derive(Debug, Deserialize)]
struct Delivery {
    id: u64,
    guid: String,
    delivered_at: String,
    #[serde(default)]
    redelivery: bool,
    /// 0 when no answer came (a connection refused, a timeout).
    #[serde(default)]
    status_code: u16,
}

impl Delivery {
    fn succeeded(&self) -> bool {
        (200..300).contains(&self.status_code)
    }

    /// Asking again can help: the first attempt failed however it failed
    /// (hookinbox down, a secret it did not know yet), a redelivery only if
    /// its failure can pass (no answer, a timeout, 429, 5xx); a redelivery
    /// hookinbox refused (a bad signature) would be refused again.
    fn worth_asking_again(&self) -> bool {
        !self.redelivery || matches!(self.status_code, 0 | 408 | 429) || self.status_code >= 500
    }
}

#[derive(Debug, Deserialize)]
struct Hook {
    active: bool,
}

impl Github {
    /// A repository's or organisation's hook, read with a token.
    pub(super) fn new(
        base: reqwest::Url,
        hook: GithubHook,
        token: &Secret,
    ) -> Result<Github, ApiError> {
        let auth = super::client::credential(&format!("Bearer {}", token.expose()))?;
        Ok(Github {
            client: client(base, auth)?,
            hook_path: format!("/{hook}"),
            app: None,
        })
    }

    /// A GitHub App's webhook, read as the App.
    pub(super) fn app(
        base: reqwest::Url,
        app_id: u64,
        key: AppKey,
        clock: Clock,
    ) -> Result<Github, ApiError> {
        let mut app = AppJwt::new(app_id, key, clock);
        let auth = app.renew(true)?.ok_or(ApiError::Refused { status: 0 })?;
        Ok(Github {
            client: client(base, auth)?,
            hook_path: "/app/hook".to_owned(),
            app: Some(app),
        })
    }

    fn hook_path(&self) -> String {
        self.hook_path.clone()
    }

    /// An App's JWT made anew when `fresh` is asked or it is about to
    /// expire; nothing for a token.
    fn authorize(&mut self, fresh: bool) -> Result<(), ApiError> {
        if let Some(app) = &mut self.app
            && let Some(value) = app.renew(fresh)?
        {
            self.client.set_auth(value);
        }
        Ok(())
    }

    /// Whether GitHub still sends to this hook (`active`); `None` for an
    /// App's, which has no such flag. A pass begins here, with a fresh JWT.
    pub(super) async fn active(&mut self) -> Result<Option<bool>, ApiError> {
        self.client.begin();
        self.authorize(true)?;
        if self.app.is_some() {
            self.client.get("/app/hook/config").await?;
            return Ok(None);
        }
        let path = self.hook_path();
        let answer = self.client.get(&path).await?;
        let hook: Hook = answer.json(format_args!("GET {path}"))?;
        Ok(Some(hook.active))
    }

    pub(super) async fn pass(&mut self, pass: &mut Pass<'_>) -> Result<(), PassError> {
        let mark = match pass.cursor {
            Some(Cursor::Github { mark }) => Some(mark),
            _ => None,
        };
        let listed = self.list(pass.since_ms, mark, pass).await?;
        let newest = listed.iter().map(|d| d.id).max();
        // Per guid: its newest attempt, unless one of them succeeded.
        let mut failed: HashMap<&str, &Delivery> = HashMap::new();
        let mut succeeded: std::collections::HashSet<&str> = Default::default();
        for d in &listed {
            if d.succeeded() {
                succeeded.insert(&d.guid);
            } else {
                let newest = failed.entry(&d.guid).or_insert(d);
                if d.id > newest.id {
                    *newest = d;
                }
            }
        }
        failed.retain(|guid, _| !succeeded.contains(guid));
        let mut failed: Vec<&Delivery> = failed.into_values().collect();
        failed.sort_by_key(|d| d.id);
        pass.report.listed += failed.len() as u64;
        for d in failed {
            if pass.held(&d.guid)? {
                pass.report.held += 1;
                continue;
            }
            if !d.worth_asking_again() {
                pass.report.skipped += 1;
                continue;
            }
            if !pass.dry_run {
                let path = format!("{}/deliveries/{}/attempts", self.hook_path(), d.id);
                self.authorize(false)?;
                self.client.post(&path, None).await?;
                pass.counted(ReconciledHow::Resent);
            }
            pass.report.resent += 1;
        }
        if let Some(newest) = newest {
            pass.keep(Cursor::Github {
                mark: newest.max(mark.unwrap_or(0)),
            })
            .await?;
        }
        pass.report.calls = self.client.calls;
        Ok(())
    }

    /// The deliveries newer than `mark` and not older than `since_ms`,
    /// newest first, page by page.
    async fn list(
        &mut self,
        since_ms: u64,
        mark: Option<u64>,
        pass: &mut Pass<'_>,
    ) -> Result<Vec<Delivery>, PassError> {
        let mut out = Vec::new();
        let mut next = Some(format!(
            "{}/deliveries?per_page={PER_PAGE}",
            self.hook_path()
        ));
        while let Some(path) = next.take() {
            if pass.report.pages >= super::MAX_PAGES {
                pass.report.complete = false;
                break;
            }
            self.authorize(false)?;
            let answer = self.client.get(&path).await?;
            pass.report.pages += 1;
            let page: Vec<Delivery> =
                answer.json(format_args!("GET {}/deliveries", self.hook_path()))?;
            let mut reached_end = page.is_empty();
            for d in page {
                let at = humantime::parse_rfc3339_weak(&d.delivered_at)
                    .map(crate::clock::unix_ms)
                    .map_err(|e| ApiError::Decode {
                        what: "a delivery's delivered_at".to_owned(),
                        cause: e.to_string(),
                    })?;
                if at < since_ms || mark.is_some_and(|m| d.id <= m) {
                    reached_end = true;
                    continue;
                }
                out.push(d);
            }
            if !reached_end {
                next = next_link(&answer.headers, &self.client)?;
            }
        }
        Ok(out)
    }
}

fn client(base: reqwest::Url, auth: HeaderValue) -> Result<Client, ApiError> {
    Client::new(
        base,
        (AUTHORIZATION, auth),
        vec![
            ("accept", "application/vnd.github+json"),
            ("x-github-api-version", "2022-11-28"),
        ],
        PACE,
        WRITE_PACE,
    )
}

/// The path and query of a `Link: <…>; rel="next"` on the API's own root
/// (a link elsewhere is refused: the token would follow it).
fn next_link(
    headers: &reqwest::header::HeaderMap,
    client: &Client,
) -> Result<Option<String>, ApiError> {
    let Some(link) = headers.get("link").and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    for part in link.split(',') {
        let Some((url, params)) = part.split_once(';') else {
            continue;
        };
        if !params.split(';').any(|p| p.trim() == "rel=\"next\"") {
            continue;
        }
        let url = url.trim().trim_start_matches('<').trim_end_matches('>');
        let root = client.url("");
        return match url.strip_prefix(&root) {
            Some(rest) if rest.starts_with('/') => Ok(Some(rest.to_owned())),
            _ => Err(ApiError::Decode {
                what: "a page's Link header".to_owned(),
                cause: "its next page is not on the configured api_base".to_owned(),
            }),
        };
    }
    Ok(None)
}
