//! GitLab: a project's or group's webhook. GitLab does not retry a failed
//! webhook by itself (it disables the hook after repeated failures), but it
//! keeps a log of each request for 7 days, lists the failed ones, and sends
//! one again when asked; the resend carries the same `Idempotency-Key` (the
//! event id hookinbox dedupes on), with the source's token, and comes in
//! through ingest.
//!
//! A pass lists the failed requests (`status=client_failure,server_failure`:
//! 4xx, 5xx, and no answer at all) newer than its mark (the highest log id
//! it judged), newest first, page by page (`page`, `X-Next-Page`); per
//! event id it takes the newest, and for each hookinbox does not hold asks
//! for a resend (`POST …/events/{hook_log_id}/resend`), oldest first. GitLab
//! allows five resends a minute per hook and user, so a pass asks five at
//! most, keeps its mark just past the last one it judged, and the next pass
//! goes on from there. The resend is made while GitLab answers: its answer
//! says what hookinbox answered, and a resend hookinbox refused (a 4xx but
//! 408 and 429: a wrong token stays wrong) is not asked again when it is
//! listed as a new failure; one without an answer or with a 5xx is.
//!
//! What a resend cannot mend: GitLab keeps a request's body with e-mail
//! addresses replaced by `[REDACTED]`, and keeps none of a body larger than
//! its limit (such a log is skipped: resending it would store a stand-in
//! under the event's id); a hook GitLab disabled was not called, so nothing
//! of that time is logged. API: "Project webhooks API" and "Group webhooks
//! API", "Get a list of … webhook events" (GitLab 17.3) and "Resend a …
//! webhook event" (17.4), REST API v4.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use reqwest::header::HeaderName;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::client::{ApiError, Client};
use super::{Cursor, Pass, PassError, rfc3339_ms};
use crate::config::{GitlabHook, Secret};
use crate::words::ReconciledHow;

/// 20: the most a page of webhook events holds (the API refuses more).
const PER_PAGE: u32 = 20;
/// GitLab.com allows 2,000 authenticated API calls a minute; a self-managed
/// instance, what its admin set. A tenth of a second stays far below.
const PACE: Duration = Duration::from_millis(100);
/// "This endpoint has a rate limit of five requests per minute for each
/// project webhook and authenticated user" (Resend a project webhook event).
const RESENDS_PER_PASS: u32 = 5;
/// The resends hookinbox refused that a cursor remembers at most (a pass
/// asks five, so this is many passes' worth).
const REFUSED_KEPT: usize = 100;

pub(super) struct Gitlab {
    client: Client,
    hook: GitlabHook,
}

/// One request of the hook's log as `GET …/events` lists it (the fields a
/// pass reads).
#[derive(Debug, Deserialize)]
struct HookLog {
    id: u64,
    #[serde(default)]
    request_headers: serde_json::Map<String, serde_json::Value>,
    /// The body as GitLab kept it; only looked at to spot a stand-in.
    #[serde(default)]
    request_data: Option<Box<RawValue>>,
    /// `"500"`, or `"internal error"` when no answer came.
    #[serde(default)]
    response_status: serde_json::Value,
    /// In the API's entity, though not in the docs' example: read when
    /// there; the list holds only 7 days in any case.
    #[serde(default)]
    created_at: Option<String>,
}

impl HookLog {
    /// The event id hookinbox dedupes on: `Idempotency-Key` (GitLab 17.4),
    /// else `X-Gitlab-Event-UUID`.
    fn event_id(&self) -> Option<&str> {
        let header = |name: &str| {
            self.request_headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        header("idempotency-key").or_else(|| header("x-gitlab-event-uuid"))
    }

    /// GitLab kept `{"oversize": true}` in place of a body over its limit.
    fn oversize(&self) -> bool {
        self.request_data.as_ref().is_some_and(|raw| {
            let compact: String = raw.get().split_whitespace().collect();
            compact == r#"{"oversize":true}"#
        })
    }

    fn status(&self) -> Option<u16> {
        status_code(&self.response_status)
    }
}

/// A status GitLab wrote as a number or as its text; `None` for none.
fn status_code(value: &serde_json::Value) -> Option<u16> {
    match value {
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// hookinbox answered and refused: asking again gets the same answer.
fn refused(status: Option<u16>) -> bool {
    status.is_some_and(|s| (400..500).contains(&s) && s != 408 && s != 429)
}

#[derive(Debug, Deserialize)]
struct Hook {
    #[serde(default)]
    alert_status: Option<String>,
    #[serde(default)]
    disabled_until: Option<String>,
}

/// `POST …/resend`'s answer: what hookinbox answered GitLab.
#[derive(Debug, Deserialize)]
struct Resent {
    #[serde(default)]
    response_status: serde_json::Value,
}

impl Gitlab {
    pub(super) fn new(
        base: reqwest::Url,
        hook: GitlabHook,
        token: &Secret,
    ) -> Result<Gitlab, ApiError> {
        let value = super::client::credential(token.expose())?;
        let client = Client::new(
            base,
            (HeaderName::from_static("private-token"), value),
            vec![("accept", "application/json")],
            PACE,
            PACE,
        )?;
        Ok(Gitlab { client, hook })
    }

    fn hook_path(&self) -> String {
        format!("/{}", self.hook)
    }

    /// Whether GitLab still calls this hook: not disabled after repeated
    /// failures (`alert_status`), nor for a while (`disabled_until`).
    /// A pass begins here.
    pub(super) async fn active(&mut self, now_ms: u64) -> Result<bool, ApiError> {
        self.client.begin();
        let path = self.hook_path();
        let answer = self.client.get(&path).await?;
        let hook: Hook = answer.json(format_args!("GET {path}"))?;
        let disabled = matches!(
            hook.alert_status.as_deref(),
            Some("disabled" | "temporarily_disabled")
        );
        let paused = hook
            .disabled_until
            .as_deref()
            .and_then(rfc3339_ms)
            .is_some_and(|until| until > now_ms);
        Ok(!disabled && !paused)
    }

    pub(super) async fn pass(&mut self, pass: &mut Pass<'_>) -> Result<(), PassError> {
        let (mark, refused_before) = match pass.cursor.clone() {
            // A pass by hand with its own `since` judges everything since.
            Some(Cursor::Gitlab { .. }) if pass.own_since => (None, Vec::new()),
            Some(Cursor::Gitlab { mark, refused }) => (Some(mark), refused),
            _ => (None, Vec::new()),
        };
        let listed = self.list(pass, mark).await?;
        let newest_listed = listed.iter().map(|l| l.id).max();
        // Per event id: its newest failed request.
        let mut newest: HashMap<&str, &HookLog> = HashMap::new();
        let mut unkeyed = 0;
        for log in &listed {
            match log.event_id() {
                Some(id) => {
                    let slot = newest.entry(id).or_insert(log);
                    if log.id > slot.id {
                        *slot = log;
                    }
                }
                None => unkeyed += 1,
            }
        }
        let mut failed: Vec<(&str, &HookLog)> = newest.into_iter().collect();
        failed.sort_by_key(|(_, l)| l.id);
        pass.report.listed += failed.len() as u64 + unkeyed;
        pass.report.skipped += unkeyed;

        let mut refused_now: Vec<String> = Vec::new();
        let mut judged = mark;
        let mut asked = 0;
        let mut result = Ok(());
        let mut finished = true;
        for (event_id, log) in &failed {
            match self
                .judge(pass, event_id, log, &refused_before, &mut asked)
                .await
            {
                Ok(Judged::Done { refused }) => {
                    if refused {
                        refused_now.push((*event_id).to_owned());
                    }
                    judged = judged.max(Some(log.id));
                }
                Ok(Judged::NoMoreThisPass) => {
                    pass.report.complete = false;
                    finished = false;
                    break;
                }
                Err(e) => {
                    result = Err(e);
                    finished = false;
                    break;
                }
            }
        }
        // Everything listed was judged: the mark goes past the older
        // requests of each event too.
        if finished {
            judged = judged.max(newest_listed);
        }
        if let Some(mark) = judged {
            let listed_ids: HashSet<&str> = failed.iter().map(|(id, _)| *id).collect();
            // A refusal is remembered until its resend's request is judged.
            let mut refused: Vec<String> = refused_before
                .into_iter()
                .filter(|id| !listed_ids.contains(id.as_str()) || !finished)
                .chain(refused_now)
                .collect();
            refused.dedup();
            let drop = refused.len().saturating_sub(REFUSED_KEPT);
            refused.drain(..drop);
            pass.keep(Cursor::Gitlab { mark, refused }).await?;
        }
        pass.report.calls = self.client.calls;
        result
    }

    /// Judges one event's newest failed request: held, skipped, or asked
    /// for again (unless this pass has asked its most).
    async fn judge(
        &mut self,
        pass: &mut Pass<'_>,
        event_id: &str,
        log: &HookLog,
        refused_before: &[String],
        asked: &mut u32,
    ) -> Result<Judged, PassError> {
        if pass.held(event_id)? {
            pass.report.held += 1;
            return Ok(Judged::Done { refused: false });
        }
        if log.oversize() || (refused(log.status()) && refused_before.iter().any(|r| r == event_id))
        {
            pass.report.skipped += 1;
            return Ok(Judged::Done { refused: false });
        }
        if *asked >= RESENDS_PER_PASS {
            return Ok(Judged::NoMoreThisPass);
        }
        *asked += 1;
        let mut refused_now = false;
        if !pass.dry_run {
            let path = format!("{}/events/{}/resend", self.hook_path(), log.id);
            match self.client.post(&path, None).await {
                Ok(answer) => {
                    let resent: Resent =
                        answer.json(format_args!("POST {}/events/…/resend", self.hook_path()))?;
                    refused_now = refused(status_code(&resent.response_status));
                }
                // 404: the log is gone; 422: GitLab would not send it (the
                // hook's URL changed since, the hook is disabled, or
                // hookinbox could not be reached; that last is logged anew,
                // and the next pass finds it).
                Err(ApiError::Status {
                    status: 404 | 422, ..
                }) => {
                    pass.report.skipped += 1;
                    return Ok(Judged::Done { refused: false });
                }
                Err(e) => return Err(e.into()),
            }
            pass.counted(ReconciledHow::Resent);
        }
        pass.report.resent += 1;
        Ok(Judged::Done {
            refused: refused_now,
        })
    }

    /// The failed requests newer than `mark` and not older than the pass's
    /// `since`, newest first, page by page.
    async fn list(
        &mut self,
        pass: &mut Pass<'_>,
        mark: Option<u64>,
    ) -> Result<Vec<HookLog>, PassError> {
        let mut out = Vec::new();
        // Pages are counted from the newest, so one that arrives while the
        // pass pages shifts the rest down: a request may be listed twice,
        // never skipped.
        let mut seen = HashSet::new();
        let mut page = 1u32;
        loop {
            if pass.report.pages >= super::MAX_PAGES {
                pass.report.complete = false;
                break;
            }
            let path = format!(
                "{}/events?status=client_failure,server_failure&per_page={PER_PAGE}&page={page}",
                self.hook_path()
            );
            let answer = self.client.get(&path).await?;
            pass.report.pages += 1;
            let logs: Vec<HookLog> =
                answer.json(format_args!("GET {}/events", self.hook_path()))?;
            let mut reached_end = logs.is_empty();
            for log in logs {
                let at = match &log.created_at {
                    Some(text) => Some(rfc3339_ms(text).ok_or_else(|| ApiError::Decode {
                        what: "a webhook event's created_at".to_owned(),
                        cause: format!("{text:?} is not an RFC 3339 time"),
                    })?),
                    None => None,
                };
                if at.is_some_and(|at| at < pass.since_ms) || mark.is_some_and(|m| log.id <= m) {
                    reached_end = true;
                    continue;
                }
                if seen.insert(log.id) {
                    out.push(log);
                }
            }
            let next = answer
                .headers
                .get("x-next-page")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u32>().ok());
            match next {
                Some(n) if !reached_end && n > page => page = n,
                _ => break,
            }
        }
        Ok(out)
    }
}

/// What judging one event came to.
enum Judged {
    /// Held, skipped or asked for; `refused`: the resend was refused.
    Done { refused: bool },
    /// This pass asked its most: the next pass goes on from here.
    NoMoreThisPass,
}
