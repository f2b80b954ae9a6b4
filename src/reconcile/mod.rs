//! Gap fill: what never reached hookinbox, asked of the provider's API.
//!
//! A source with `[source.reconcile]` gets a pass every `interval` (and one
//! by hand, `POST /api/reconcile/{source}`): the provider lists what it
//! could not deliver, each item is matched to what hookinbox holds by the
//! event id it dedupes on, and for the rest the provider is asked to send
//! again (GitHub, GitLab, Paddle: it comes back signed, through ingest) or the
//! event is fetched and stored marked `origin = "reconciled"` (Stripe,
//! which has no resend). Svix lists nothing: it is asked to resend whatever
//! failed in a span of time, and what comes back dedupes. A pass also reads
//! whether the provider still sends here.
//!
//! Owns the passes, their cursors (kept in the store's `meta`, so a
//! restart resumes and fetches nothing twice) and what they count. Refuses
//! to slow ingest or delivery: one task, one call at a time at the
//! provider's pace, fetched events stored through the same path as
//! received ones. A refused credential is one log line and a metric per
//! change of outcome, and the next try is the next interval.

mod client;
mod github;
mod github_app;
mod gitlab;
mod paddle;
mod stripe;
mod svix;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use client::ApiError;

use crate::api::{self, Timestamp};
use crate::clock::Clock;
use crate::config::{Config, ReconcileConfig, SourceConfig, SourceName, Target};
use crate::ingest::IngestState;
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};
use crate::supervise::TaskError;
use crate::verify::VerifiedEvent;
use crate::words::{ReconcileOutcome, ReconciledHow};

/// Pages one pass lists at most (100 items each): a larger backlog is
/// finished by the next passes, each going on from the cursor.
pub const MAX_PAGES: u32 = 200;
/// The first timed pass comes this long after start (or after `interval`,
/// if shorter): a restart's own requests settle first.
const FIRST_PASS_AFTER: Duration = Duration::from_secs(60);
/// The version byte of a kept cursor.
const CURSOR_VERSION: u8 = 1;
/// Passes asked for by hand, waiting.
const QUEUE: usize = 8;

/// Where a source's passes got to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Cursor {
    /// The highest delivery id judged.
    Github { mark: u64 },
    /// The newest event handled; a first walk back still under way.
    Stripe {
        after: Option<String>,
        walk: Option<StripeWalk>,
    },
    /// The highest hook log id judged, and the events whose resend
    /// hookinbox refused (not asked again when listed as failed anew).
    Gitlab { mark: u64, refused: Vec<String> },
    /// Every notification that occurred before this (Unix ms) was
    /// delivered, or failed and was judged.
    Paddle { from_ms: u64 },
    /// Where the last recovery's span ended (Unix ms).
    Svix { until_ms: u64 },
}

/// A walk back through Stripe's events: its newest, and where it goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StripeWalk {
    pub top: String,
    pub next: String,
}

/// Unix ms of an RFC 3339 time with `Z` or a `±HH:MM` offset (GitLab
/// writes times in its instance's zone; humantime reads only UTC).
fn rfc3339_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let t = text.find(['T', 't', ' '])?;
    let (utc, offset_s) = match text[t..].rfind(['+', '-']) {
        Some(at) => {
            let at = t + at;
            let (h, m) = text[at + 1..].split_once(':')?;
            let secs = h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60;
            let sign = if text[at..].starts_with('-') { -1 } else { 1 };
            (&text[..at], sign * secs)
        }
        None => (text.trim_end_matches(['Z', 'z']), 0),
    };
    let at = humantime::parse_rfc3339_weak(utc).ok()?;
    let ms = i64::try_from(crate::clock::unix_ms(at)).ok()? - offset_s * 1000;
    u64::try_from(ms).ok()
}

fn encode(cursor: &Cursor) -> Vec<u8> {
    let mut out = vec![CURSOR_VERSION];
    out.extend(postcard::to_stdvec(cursor).expect("a cursor is strings and numbers"));
    out
}

/// A kept cursor; `None` for one of another version (the pass starts over
/// from the lookback, and dedupe keeps what it finds stored once).
fn decode(bytes: &[u8]) -> Option<Cursor> {
    match bytes.split_first() {
        Some((&CURSOR_VERSION, rest)) => postcard::from_bytes(rest).ok(),
        _ => None,
    }
}

/// Why a pass stopped short.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("the store did not take what the pass found: {0}")]
    Store(#[from] StoreError),
}

impl PassError {
    fn outcome(&self) -> ReconcileOutcome {
        match self {
            PassError::Api(ApiError::Refused { .. }) => ReconcileOutcome::Refused,
            PassError::Api(ApiError::Throttled { .. }) => ReconcileOutcome::Throttled,
            _ => ReconcileOutcome::Failed,
        }
    }
}

/// What a pass counts as it goes.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub listed: u64,
    pub held: u64,
    pub resent: u64,
    pub fetched: u64,
    pub skipped: u64,
    pub recovers: u64,
    pub pages: u32,
    pub calls: u32,
    pub complete: bool,
}

/// An event a pass fetched: its id, type, exact bytes, and where it came
/// from (`hookinbox-*` headers).
pub(crate) struct Fetched {
    pub event_id: String,
    pub event_type: Option<String>,
    pub body: Bytes,
    pub provenance: Vec<(String, String)>,
}

/// One pass of one source: what the providers' files read and call.
pub(crate) struct Pass<'a> {
    source: &'a SourceName,
    store: &'a Store,
    ingest: &'a IngestState,
    metrics: &'a Metrics,
    clock: &'a Clock,
    /// Where the passes got to (updated as this one goes).
    pub cursor: Option<Cursor>,
    /// Nothing older than this is looked at (Unix ms).
    pub since_ms: u64,
    pub dry_run: bool,
    /// A pass by hand with its own `since`: it moves no cursor.
    own_since: bool,
    pub report: Tally,
}

impl Pass<'_> {
    fn keeps_cursor(&self) -> bool {
        !self.dry_run && !self.own_since
    }

    /// Whether hookinbox holds the event the provider knows as `event_id`.
    fn held(&self, event_id: &str) -> Result<bool, PassError> {
        Ok(self
            .store
            .find_seq(self.source.as_str(), event_id)?
            .is_some())
    }

    /// Moves the cursor (kept durably, unless this pass keeps none).
    async fn keep(&mut self, cursor: Cursor) -> Result<(), PassError> {
        if self.keeps_cursor() && self.cursor.as_ref() != Some(&cursor) {
            self.store
                .set_reconcile_state(self.source.as_str(), encode(&cursor))
                .await?;
        }
        self.cursor = Some(cursor);
        Ok(())
    }

    fn counted(&mut self, how: ReconciledHow) {
        if !self.dry_run {
            self.metrics.reconciled(self.source.as_str(), how);
        }
    }

    /// Stores fetched events at once (they share commits); returns how
    /// many were new. A dry run stores none and counts them all.
    async fn store_fetched(&mut self, events: Vec<Fetched>) -> Result<u64, PassError> {
        if self.dry_run {
            self.report.fetched += events.len() as u64;
            return Ok(0);
        }
        let now = self.clock.now_ms();
        let mut stores = Vec::with_capacity(events.len());
        for f in events {
            match VerifiedEvent::fetched(
                self.source.clone(),
                &f.event_id,
                f.event_type,
                f.body,
                f.provenance,
                now,
            ) {
                Ok(event) => stores.push(self.ingest.store_fetched(event)),
                Err(e) => {
                    // Counted as listed, not stored: the provider's id is
                    // not one hookinbox can key on.
                    tracing::warn!(source = self.source.as_str(), error = %e,
                        "a fetched event's id cannot be stored; skipped");
                    self.report.skipped += 1;
                }
            }
        }
        let mut new = 0;
        for stored in futures_util::future::join_all(stores).await {
            if stored? {
                new += 1;
            }
        }
        self.report.fetched += new;
        Ok(new)
    }
}

/// A provider's API client, kept between passes.
enum Provider {
    Github(github::Github),
    Stripe(stripe::Stripe),
    Gitlab(gitlab::Gitlab),
    Paddle(paddle::Paddle),
    Svix(svix::Svix),
}

impl Provider {
    fn new(config: &ReconcileConfig, clock: &Clock) -> Result<Provider, ApiError> {
        let base = config.api_base.clone();
        Ok(match &config.target {
            Target::GithubHook { hook, token } => {
                Provider::Github(github::Github::new(base, hook.clone(), &token.value)?)
            }
            Target::Stripe { token, endpoint } => {
                Provider::Stripe(stripe::Stripe::new(base, &token.value, endpoint.clone())?)
            }
            Target::GitlabHook { hook, token } => {
                Provider::Gitlab(gitlab::Gitlab::new(base, hook.clone(), &token.value)?)
            }
            Target::Paddle {
                token,
                notification_setting,
            } => Provider::Paddle(paddle::Paddle::new(
                base,
                &token.value,
                notification_setting.clone(),
            )?),
            Target::Svix {
                token,
                app,
                endpoint,
            } => Provider::Svix(svix::Svix::new(base, &token.value, app, endpoint)?),
            Target::GithubApp { app_id, key } => Provider::Github(github::Github::app(
                base,
                *app_id,
                key.clone(),
                clock.clone(),
            )?),
        })
    }

    /// Whether the provider still sends here, read at `now_ms`.
    async fn active(&mut self, now_ms: u64) -> Result<Option<bool>, ApiError> {
        match self {
            Provider::Github(p) => p.active().await,
            Provider::Stripe(p) => p.active().await,
            Provider::Gitlab(p) => p.active(now_ms).await.map(Some),
            Provider::Paddle(p) => p.active().await,
            Provider::Svix(p) => p.active().await.map(Some),
        }
    }

    async fn pass(&mut self, pass: &mut Pass<'_>) -> Result<(), PassError> {
        match self {
            Provider::Github(p) => p.pass(pass).await,
            Provider::Stripe(p) => p.pass(pass).await,
            Provider::Gitlab(p) => p.pass(pass).await,
            Provider::Paddle(p) => p.pass(pass).await,
            Provider::Svix(p) => p.pass(pass).await,
        }
    }
}

/// One source's passes.
struct Plan {
    source: SourceName,
    config: ReconcileConfig,
    provider: Provider,
    next: tokio::time::Instant,
    /// The last pass's outcome: a failure is logged as a warning when the
    /// outcome changes, not on every pass.
    last_outcome: Option<ReconcileOutcome>,
    last_active: Option<bool>,
}

/// A pass asked for by hand.
struct ByHand {
    source: String,
    since: Option<Duration>,
    dry_run: bool,
    reply: oneshot::Sender<api::ReconcileReport>,
}

/// Why a pass by hand was not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ByHandError {
    #[error("source {0:?} has no [source.reconcile]")]
    NotReconciled(String),
    #[error("hookinbox is stopping, or this node is a standby (passes run on the primary)")]
    NotRunning,
}

/// What the admin API reads and asks: each source's last pass, and a pass
/// by hand.
#[derive(Clone)]
pub struct ReconcileHandle {
    requests: mpsc::Sender<ByHand>,
    shown: Arc<Mutex<BTreeMap<String, api::ReconcileSource>>>,
}

impl ReconcileHandle {
    pub fn sources(&self) -> api::ReconcileSources {
        let shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        api::ReconcileSources {
            sources: shown.values().cloned().collect(),
        }
    }

    /// Runs one pass of `source` (after any pass under way) and answers
    /// its report.
    pub async fn pass(
        &self,
        source: &str,
        since: Option<Duration>,
        dry_run: bool,
    ) -> Result<api::ReconcileReport, ByHandError> {
        if !self
            .shown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(source)
        {
            return Err(ByHandError::NotReconciled(source.to_owned()));
        }
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(ByHand {
                source: source.to_owned(),
                since,
                dry_run,
                reply,
            })
            .await
            .map_err(|_| ByHandError::NotRunning)?;
        answer.await.map_err(|_| ByHandError::NotRunning)
    }
}

/// The task that runs every source's passes.
pub struct Reconciler {
    plans: Vec<Plan>,
    store: Store,
    ingest: IngestState,
    metrics: Metrics,
    clock: Clock,
    requests: mpsc::Receiver<ByHand>,
    shown: Arc<Mutex<BTreeMap<String, api::ReconcileSource>>>,
}

impl Reconciler {
    /// Every source with `[source.reconcile]`, its API client built.
    pub fn new(
        config: &Config,
        store: Store,
        ingest: IngestState,
        metrics: Metrics,
        clock: Clock,
    ) -> Result<(Reconciler, ReconcileHandle), ApiError> {
        let start = tokio::time::Instant::now();
        let mut plans = Vec::new();
        let mut shown = BTreeMap::new();
        for source in &config.sources {
            let Some(reconcile) = &source.reconcile else {
                continue;
            };
            plans.push(Plan {
                source: source.name.clone(),
                config: reconcile.clone(),
                provider: Provider::new(reconcile, &clock)?,
                next: start + reconcile.interval.min(FIRST_PASS_AFTER),
                last_outcome: None,
                last_active: None,
            });
            shown.insert(source.name.to_string(), shown_source(source, reconcile));
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let shown = Arc::new(Mutex::new(shown));
        Ok((
            Reconciler {
                plans,
                store,
                ingest,
                metrics,
                clock,
                requests: rx,
                shown: shown.clone(),
            },
            ReconcileHandle {
                requests: tx,
                shown,
            },
        ))
    }

    /// Runs passes when due and when asked, until `stop`. A pass under way
    /// is dropped at `stop`: its cursor was kept page by page.
    pub async fn run(mut self, stop: CancellationToken) -> Result<(), TaskError> {
        loop {
            let next = self.plans.iter().map(|p| p.next).min();
            let due = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                Some(asked) = self.requests.recv() => {
                    let Some(i) = self.plans.iter().position(|p| p.source.as_str() == asked.source) else {
                        continue;
                    };
                    tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        report = self.pass(i, asked.since, asked.dry_run) => {
                            let _ = asked.reply.send(report);
                        }
                    }
                }
                () = due => {
                    let now = tokio::time::Instant::now();
                    for i in 0..self.plans.len() {
                        if self.plans[i].next > now {
                            continue;
                        }
                        tokio::select! {
                            () = stop.cancelled() => return Ok(()),
                            _ = self.pass(i, None, false) => {}
                        }
                        let plan = &mut self.plans[i];
                        plan.next = tokio::time::Instant::now() + plan.config.interval;
                    }
                }
            }
        }
    }

    /// One pass of plan `i`: the subscription's health, then what the
    /// provider lists; counted, logged on a change, shown.
    async fn pass(
        &mut self,
        i: usize,
        since: Option<Duration>,
        dry_run: bool,
    ) -> api::ReconcileReport {
        let started_ms = self.clock.now_ms();
        let timer = std::time::Instant::now();
        let plan = &mut self.plans[i];
        let source = plan.source.clone();
        let mut span = self
            .ingest
            .telemetry()
            .task("reconcile pass", &[("hookinbox.source", source.as_str())]);
        let cursor = match self.store.reconcile_state(source.as_str()) {
            Ok(kept) => kept.as_deref().and_then(decode),
            Err(e) => {
                tracing::warn!(source = source.as_str(), error = %e,
                    "the reconcile cursor could not be read; this pass starts from the lookback");
                None
            }
        };
        let lookback = since.unwrap_or(plan.config.lookback);
        let mut pass = Pass {
            source: &source,
            store: &self.store,
            ingest: &self.ingest,
            metrics: &self.metrics,
            clock: &self.clock,
            cursor,
            since_ms: started_ms.saturating_sub(lookback.as_millis() as u64),
            dry_run,
            own_since: since.is_some(),
            report: Tally {
                complete: true,
                ..Tally::default()
            },
        };
        let active = plan.provider.active(started_ms).await;
        let result = match &active {
            Err(e) => Err(PassError::Api(e.clone())),
            Ok(_) => plan.provider.pass(&mut pass).await,
        };
        let active = active.ok().flatten();
        let outcome = match &result {
            Ok(()) => ReconcileOutcome::Ok,
            Err(e) => e.outcome(),
        };
        let tally = pass.report;
        let report = api::ReconcileReport {
            source: source.to_string(),
            target: plan.config.target.describe(),
            started_at: Timestamp(started_ms),
            took_ms: timer.elapsed().as_millis() as u64,
            outcome,
            error: result.as_ref().err().map(|e| e.to_string()),
            dry_run,
            listed: tally.listed,
            held: tally.held,
            resent: tally.resent,
            fetched: tally.fetched,
            skipped: tally.skipped,
            recovers: tally.recovers,
            pages: tally.pages,
            calls: tally.calls,
            complete: tally.complete,
            subscription_active: active,
        };
        span.count("hookinbox.reconcile.listed", report.listed);
        span.count("hookinbox.reconcile.resent", report.resent);
        span.count("hookinbox.reconcile.fetched", report.fetched);
        span.count("hookinbox.reconcile.calls", u64::from(report.calls));
        span.end(report.error.as_deref());
        self.metrics.reconcile_run(source.as_str(), outcome);
        if let Some(active) = active {
            self.metrics.subscription_active(source.as_str(), active);
        }
        if outcome == ReconcileOutcome::Ok && !dry_run {
            self.metrics
                .reconcile_succeeded(source.as_str(), started_ms / 1000);
        }
        log_pass(plan, &report);
        plan.last_outcome = Some(outcome);
        if active.is_some() {
            plan.last_active = active;
        }
        let mut shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = shown.get_mut(source.as_str()) {
            if outcome == ReconcileOutcome::Ok && !dry_run {
                entry.last_success_at = Some(Timestamp(started_ms));
            }
            if active.is_some() {
                entry.subscription_active = active;
            }
            if !dry_run && report.resent + report.fetched > 0 {
                entry.last_recovered = Some(api::Recovered {
                    at: Timestamp(started_ms),
                    resent: report.resent,
                    fetched: report.fetched,
                });
            }
            entry.last = Some(report.clone());
        }
        report
    }
}

/// A pass's log line: what it found at info (nothing found: debug); a
/// failure at warn when the outcome changes, debug while it stays; a
/// subscription the provider disabled at warn when it changes.
fn log_pass(plan: &Plan, r: &api::ReconcileReport) {
    let source = plan.source.as_str();
    if let Some(false) = r.subscription_active
        && plan.last_active != Some(false)
    {
        tracing::warn!(
            source,
            target = r.target,
            "the provider has disabled this source's webhook subscription: it sends nothing \
             here until it is enabled again"
        );
    }
    match &r.error {
        Some(error) if plan.last_outcome != Some(r.outcome) => {
            tracing::warn!(
                source,
                target = r.target,
                outcome = r.outcome.as_str(),
                error,
                "reconcile pass failed; the next one is in an interval"
            );
        }
        Some(error) => {
            tracing::debug!(
                source,
                outcome = r.outcome.as_str(),
                error,
                "reconcile pass failed again"
            );
        }
        None if r.resent + r.fetched > 0 => {
            tracing::info!(
                source,
                target = r.target,
                listed = r.listed,
                held = r.held,
                resent = r.resent,
                fetched = r.fetched,
                dry_run = r.dry_run,
                "reconcile pass found events hookinbox never received"
            );
        }
        None => {
            if plan.last_outcome.is_some_and(|o| o != ReconcileOutcome::Ok) {
                tracing::info!(source, "reconcile passes succeed again");
            }
            tracing::debug!(
                source,
                listed = r.listed,
                held = r.held,
                recovers = r.recovers,
                pages = r.pages,
                "reconcile pass: nothing missing"
            );
        }
    }
}

fn shown_source(source: &SourceConfig, r: &ReconcileConfig) -> api::ReconcileSource {
    api::ReconcileSource {
        source: source.name.to_string(),
        target: r.target.describe(),
        interval_ms: r.interval.as_millis() as u64,
        lookback_ms: r.lookback.as_millis() as u64,
        last: None,
        last_success_at: None,
        subscription_active: None,
        last_recovered: None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Cursor, StripeWalk, decode, encode, rfc3339_ms};

    #[test]
    fn a_kept_cursor_reads_back_and_an_unknown_version_is_none() {
        for cursor in [
            Cursor::Github { mark: 42 },
            Cursor::Stripe {
                after: Some("evt_1".into()),
                walk: Some(StripeWalk {
                    top: "evt_9".into(),
                    next: "evt_5".into(),
                }),
            },
            Cursor::Gitlab {
                mark: 7,
                refused: vec!["3a427872-00df-429c-9bc9-a9475de2efe4".into()],
            },
            Cursor::Paddle {
                from_ms: 1_716_692_597_000,
            },
            Cursor::Svix {
                until_ms: 1_716_692_597_000,
            },
        ] {
            assert_eq!(decode(&encode(&cursor)), Some(cursor));
        }
        let mut other = encode(&Cursor::Github { mark: 1 });
        other[0] = 2;
        assert_eq!(decode(&other), None);
        assert_eq!(decode(&[]), None);
    }

    /// A cursor kept before variants were appended reads back: postcard
    /// numbers a variant by its place, so a new one goes last.
    #[test]
    fn cursors_kept_before_new_providers_read_back() {
        // Cursor::Github { mark: 42 }, as the first passes kept it.
        assert_eq!(decode(&[1, 0, 42]), Some(Cursor::Github { mark: 42 }));
        // Cursor::Stripe { after: Some("e"), walk: None }.
        assert_eq!(
            decode(&[1, 1, 1, 1, b'e', 0]),
            Some(Cursor::Stripe {
                after: Some("e".into()),
                walk: None
            })
        );
    }

    #[test]
    fn provider_times_read_with_their_offset() {
        let utc = rfc3339_ms("2024-05-26T03:03:17Z").unwrap();
        assert_eq!(utc, 1_716_692_597_000);
        assert_eq!(rfc3339_ms("2024-05-26T03:03:17.250Z"), Some(utc + 250));
        assert_eq!(rfc3339_ms("2024-05-25T20:03:17-07:00"), Some(utc));
        assert_eq!(rfc3339_ms("2024-05-26T05:03:17.000+02:00"), Some(utc));
        assert_eq!(rfc3339_ms("2024-05-26T03:03:17.000+00:00"), Some(utc));
        assert_eq!(rfc3339_ms("yesterday"), None);
        assert_eq!(rfc3339_ms("2024-05-26T03:03:17+0x:00"), None);
    }
}
