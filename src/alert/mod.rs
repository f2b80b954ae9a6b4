//! Alerts: tell a person when something needs them, and when it no longer
//! does.
//!
//! Every `check_interval` the alerter looks at what the store holds, what
//! the scheduler knows and what the drift watch recorded. A condition is
//! firing when:
//! - a source's DLQ holds more than `dlq_threshold` events,
//! - a source's oldest pending event is older than `pending_age`,
//! - a destination's circuit is not closed (open, or half-open waiting for
//!   its probe to pass),
//! - a source with `expect_within` has sent nothing new for longer than that
//!   (see [`quiet`]),
//! - a source's events departed from their learned payload shape within the
//!   last hour (see [`drift`]),
//! - a source secret the provider still signs with, or the last one left,
//!   expires within `secret_notice` (see [`secrets`]).
//!
//! A condition that starts firing is posted at once, repeated at most once
//! per `min_interval` while it lasts, and followed by one "resolved" post
//! when it clears. Each post names the host, the source or destination, how
//! many, the latest failure, and links to the dashboard page and the API
//! call that show it ([`Notice`]). The body is that object, alone
//! (`format = "json"`) or under `"hookinbox"` beside the `"text"` a Slack
//! incoming webhook shows (`format = "slack"`). A post that fails is logged
//! and counted, and tried again at the next check.
//!
//! What fires is kept in memory: after a restart a condition still true
//! fires again, and one that cleared while hookinbox was down gets no
//! "resolved". Prometheus's rules (`packaging/monitoring`) cover that gap
//! for teams that run it.

pub mod drift;
pub mod quiet;
pub mod reconcile;
pub mod secrets;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::Timestamp;
use crate::clock::Clock;
use crate::config::{AlertConfig, AlertFormat};
use crate::deliver::breaker::CircuitState;
use crate::drift::Learned;
use crate::metrics::Metrics;
use crate::schedule::{DeliveryHandle, LaneStatus};
use crate::store::schema::Status;
use crate::store::{EventFilter, SourceStats, Store};
use crate::supervise::TaskError;
use crate::words::{AlertKind, AlertStatus};

/// What an alert receiver gets: the body with `format = "json"`, and the
/// `"hookinbox"` member of the Slack body. Field names are a contract with
/// the receivers people write; add, never rename.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    pub status: AlertStatus,
    /// What fired: `dlq`, `pending_age`, `circuit_open`, `quiet`, `drift`,
    /// `missed_events`, `subscription_disabled` or `secret_expiring`.
    pub alert: AlertKind,
    /// The source, or the destination (named after its source).
    pub name: String,
    /// The machine hookinbox runs on (`alerts.host`, else its host name).
    pub host: String,
    /// Dead-lettered events (`dlq`) or pending events (`pending_age`,
    /// `circuit_open`), now; for `quiet`, the events the source sent in the
    /// week before it went quiet; for `drift`, the payload departures
    /// recorded in the last hour; for `secret_expiring`, the secrets.
    pub count: u64,
    /// The latest failure, when there is one.
    pub reason: Option<String>,
    /// One sentence for a person.
    pub summary: String,
    /// When this condition was first posted as firing.
    pub started_at: Timestamp,
    /// When it cleared; only on a resolved notice.
    pub resolved_at: Option<Timestamp>,
    /// The dashboard page that shows it.
    pub link: String,
    /// The admin API call that lists it (with the bearer token).
    pub api: String,
}

/// One condition, as found at one check.
#[derive(Debug, Clone)]
struct Finding {
    kind: AlertKind,
    name: String,
    count: u64,
    reason: Option<String>,
    summary: String,
}

/// A condition that has been posted as firing.
struct Firing {
    started_ms: u64,
    last_sent: Instant,
}

/// Where alerts point people to.
struct Links {
    /// The dashboard's root, ending in `/`.
    dashboard: reqwest::Url,
}

impl Links {
    fn page(&self, kind: AlertKind, name: &str) -> String {
        let name = urlencoding(name);
        let fragment = match kind {
            AlertKind::Dlq => format!("/dlq?source={name}"),
            AlertKind::PendingAge => format!("/events?source={name}&status=pending"),
            AlertKind::CircuitOpen => "/".to_owned(),
            AlertKind::Quiet => format!("/events?source={name}"),
            AlertKind::Drift => format!("/shapes?source={name}"),
            // The overview's Gap fill table.
            AlertKind::MissedEvents | AlertKind::SubscriptionDisabled => "/".to_owned(),
            AlertKind::SecretExpiring => "/".to_owned(),
        };
        let mut url = self.dashboard.clone();
        url.set_fragment(Some(&fragment));
        url.to_string()
    }

    fn api(&self, kind: AlertKind, name: &str) -> String {
        let path = match kind {
            AlertKind::Dlq => format!("api/events?source={}&status=dead", urlencoding(name)),
            AlertKind::PendingAge => {
                format!("api/events?source={}&status=pending", urlencoding(name))
            }
            AlertKind::CircuitOpen => "api/destinations".to_owned(),
            AlertKind::Quiet => format!("api/events?source={}", urlencoding(name)),
            AlertKind::Drift => format!("api/shapes?source={}", urlencoding(name)),
            AlertKind::MissedEvents | AlertKind::SubscriptionDisabled => "api/reconcile".to_owned(),
            AlertKind::SecretExpiring => "api/secrets".to_owned(),
        };
        self.dashboard
            .join(&path)
            .map_or_else(|_| path.clone(), |u| u.to_string())
    }
}

/// A source name in a query string or fragment.
fn urlencoding(name: &str) -> String {
    form_urlencoded::byte_serialize(name.as_bytes()).collect()
}

/// The machine's host name, for alerts that must say where they come from.
fn host_name() -> String {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy().into_owned();
    if name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

/// `http://` the admin listener, as people on the host reach it: a wildcard
/// address becomes the host name.
fn default_dashboard(admin: SocketAddr, host: &str) -> reqwest::Url {
    let authority = if admin.ip().is_unspecified() {
        format!("{host}:{}", admin.port())
    } else {
        admin.to_string()
    };
    reqwest::Url::parse(&format!("http://{authority}/"))
        .or_else(|_| reqwest::Url::parse(&format!("http://127.0.0.1:{}/", admin.port())))
        .expect("a loopback URL parses")
}

/// Since when a source counts as quiet if it never sent: the start, or the
/// reload that added it (`added_ms`).
fn watched_since(added_ms: &HashMap<String, u64>, started_ms: u64, name: &str) -> u64 {
    added_ms.get(name).copied().unwrap_or(started_ms)
}

/// The host alerts name and where their links point, as `alerts` sets them.
fn links_of(alerts: Option<&AlertConfig>, admin: SocketAddr) -> (String, Links) {
    let host = alerts
        .and_then(|a| a.host.clone())
        .unwrap_or_else(host_name);
    let mut dashboard = alerts
        .and_then(|a| a.dashboard_url.clone())
        .unwrap_or_else(|| default_dashboard(admin, &host));
    if !dashboard.path().ends_with('/') {
        let path = format!("{}/", dashboard.path());
        dashboard.set_path(&path);
    }
    (host, Links { dashboard })
}

pub struct Alerter {
    /// `None` while `[alerts]` is absent: the task then only waits for a
    /// reload that sets it.
    config: Option<AlertConfig>,
    store: Store,
    metrics: Metrics,
    delivery: DeliveryHandle,
    sources: Vec<String>,
    /// The sources that set `expect_within`, and what they set.
    expect_within: BTreeMap<String, Duration>,
    /// When hookinbox started: a source that never sent is quiet since then.
    started_ms: u64,
    /// When a reload added each source that was not there at start: it is
    /// quiet since then.
    added_ms: HashMap<String, u64>,
    /// What the drift watch learned: its departures, per source.
    drift: Arc<Mutex<Learned>>,
    /// Each reconciled source's passes.
    reconcile: crate::reconcile::ReconcileHandle,
    /// Each source secret's expiry and last match.
    secrets: crate::secrets::SecretBook,
    client: reqwest::Client,
    clock: Clock,
    admin: SocketAddr,
    host: String,
    links: Links,
    firing: HashMap<(AlertKind, String), Firing>,
    /// The week before each quiet spell, read once when it began.
    histories: HashMap<String, quiet::History>,
    /// What a reload changes; closed once its sender is gone.
    settings: watch::Receiver<Settings>,
    settings_open: bool,
}

/// What the alerter watches.
pub struct Watched {
    pub store: Store,
    pub metrics: Metrics,
    pub delivery: DeliveryHandle,
    /// When hookinbox started (unix ms, by the app's clock).
    pub started_ms: u64,
    /// The admin listener's address, for links when no `dashboard_url` is set.
    pub admin: SocketAddr,
    /// What the drift watch learned (`drift::watch`'s shared half).
    pub drift: Arc<Mutex<Learned>>,
    /// What each reconciled source's passes found.
    pub reconcile: crate::reconcile::ReconcileHandle,
    /// Each source secret's expiry and last match.
    pub secrets: crate::secrets::SecretBook,
}

/// What the config says of alerts, which a reload changes in place: the
/// `[alerts]` section, the sources and their `expect_within`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub alerts: Option<AlertConfig>,
    pub sources: Vec<String>,
    pub expect_within: BTreeMap<String, Duration>,
}

/// The alerter's HTTP client (its TLS backend) cannot be built.
#[derive(Debug, thiserror::Error)]
#[error("alerts: cannot build the HTTP client: {0}")]
pub struct ClientError(#[source] reqwest::Error);

impl Alerter {
    pub fn new(
        watched: Watched,
        settings: watch::Receiver<Settings>,
        clock: Clock,
    ) -> Result<Alerter, ClientError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(ClientError)?;
        let first = settings.borrow().clone();
        let (host, links) = links_of(first.alerts.as_ref(), watched.admin);
        Ok(Alerter {
            config: first.alerts,
            store: watched.store,
            metrics: watched.metrics,
            delivery: watched.delivery,
            sources: first.sources,
            expect_within: first.expect_within,
            started_ms: watched.started_ms,
            added_ms: HashMap::new(),
            drift: watched.drift,
            reconcile: watched.reconcile,
            secrets: watched.secrets,
            client,
            clock,
            admin: watched.admin,
            host,
            links,
            firing: HashMap::new(),
            histories: HashMap::new(),
            settings,
            settings_open: true,
        })
    }

    /// Checks every `check_interval` until `shutdown` is cancelled, taking
    /// each reload's settings as it comes; with no `[alerts]`, only waits
    /// for one.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), TaskError> {
        let mut next = self
            .config
            .as_ref()
            .map(|c| Instant::now() + c.check_interval);
        loop {
            let due = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                changed = self.settings.changed(), if self.settings_open => match changed {
                    Ok(()) => {
                        let interval = self.config.as_ref().map(|c| c.check_interval);
                        self.take_settings();
                        let now = self.config.as_ref().map(|c| c.check_interval);
                        if now != interval {
                            next = now.map(|every| Instant::now() + every);
                        }
                    }
                    Err(_) => self.settings_open = false,
                },
                () = due => {
                    self.check().await;
                    next = self.config.as_ref().map(|c| Instant::now() + c.check_interval);
                }
            }
        }
    }

    /// A reload's settings: the alert URL, thresholds and format, and the
    /// sources watched. Conditions already firing stay firing (their
    /// repeats and "resolved" go to the new URL); with `[alerts]` gone,
    /// they are forgotten unposted.
    fn take_settings(&mut self) {
        let Settings {
            alerts,
            sources,
            expect_within,
        } = self.settings.borrow_and_update().clone();
        let now_ms = self.clock.now_ms();
        for name in &sources {
            if !self.sources.contains(name) {
                self.added_ms.insert(name.clone(), now_ms);
            }
        }
        self.added_ms.retain(|name, _| sources.contains(name));
        (self.host, self.links) = links_of(alerts.as_ref(), self.admin);
        if alerts.is_none() {
            self.firing.clear();
            self.histories.clear();
        }
        self.config = alerts;
        self.sources = sources;
        self.expect_within = expect_within;
    }

    /// Since when `name` counts as quiet if it never sent.
    fn watched_since(&self, name: &str) -> u64 {
        watched_since(&self.added_ms, self.started_ms, name)
    }

    /// What the store holds per source, or `None` when it cannot be read
    /// (then nothing is judged: an unreadable store is not "all clear").
    async fn snapshot(&self) -> Option<BTreeMap<String, SourceStats>> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || store.stats()).await {
            Ok(Ok(held)) => Some(held.into_iter().collect()),
            Ok(Err(e)) => {
                tracing::error!(error = %e.report(), "alerts: cannot read the store");
                None
            }
            Err(_) => None,
        }
    }

    /// Every condition, firing or not, with what it measures now.
    fn findings(
        &self,
        config: &AlertConfig,
        held: &BTreeMap<String, SourceStats>,
        lanes: &[LaneStatus],
    ) -> Vec<(bool, Finding)> {
        let mut out = Vec::new();
        let now = self.clock.now_ms();
        for name in &self.sources {
            let s = held.get(name).cloned().unwrap_or_default();
            let dead = s.counts.dead;
            let over = dead > config.dlq_threshold;
            let reason = if over {
                self.newest_dead_reason(name)
            } else {
                None
            };
            let summary = if over {
                format!(
                    "source {name} has {dead} dead-lettered events (threshold {}); latest: {}",
                    config.dlq_threshold,
                    reason.as_deref().unwrap_or("unknown")
                )
            } else {
                format!(
                    "source {name} has {dead} dead-lettered events, within the threshold ({})",
                    config.dlq_threshold
                )
            };
            out.push((
                over,
                Finding {
                    kind: AlertKind::Dlq,
                    name: name.clone(),
                    count: dead,
                    reason,
                    summary,
                },
            ));
            let age = s
                .oldest_pending_ms
                .map(|t| Duration::from_millis(now.saturating_sub(t)));
            let late = age.is_some_and(|age| age > config.pending_age);
            let limit = humantime::format_duration(config.pending_age);
            let summary = match age {
                Some(age) if late => format!(
                    "source {name} has {} pending events, the oldest waiting {} (limit {limit})",
                    s.counts.pending,
                    humantime::format_duration(Duration::from_secs(age.as_secs())),
                ),
                _ => format!(
                    "source {name} has {} pending events, none waiting longer than {limit}",
                    s.counts.pending
                ),
            };
            out.push((
                late,
                Finding {
                    kind: AlertKind::PendingAge,
                    name: name.clone(),
                    count: s.counts.pending,
                    reason: None,
                    summary,
                },
            ));
        }
        for d in lanes {
            // Half-open is still failing: it waits for one probe to pass.
            // Resolving there would flap resolved/firing at every failed
            // probe of a destination that stays down.
            let open = d.circuit != CircuitState::Closed;
            let pending = held.get(&d.name).map_or(0, |s| s.counts.pending);
            let summary = if open {
                format!(
                    "destination {} is failing and its circuit is {}; {pending} events wait; last failure: {}",
                    d.name,
                    d.circuit.as_str().replace('_', "-"),
                    d.last_failure.as_deref().unwrap_or("unknown")
                )
            } else {
                format!(
                    "destination {} takes deliveries again (circuit closed); {pending} events wait",
                    d.name
                )
            };
            out.push((
                open,
                Finding {
                    kind: AlertKind::CircuitOpen,
                    name: d.name.clone(),
                    count: pending,
                    reason: open.then(|| d.last_failure.clone()).flatten(),
                    summary,
                },
            ));
        }
        for (name, &within) in &self.expect_within {
            let s = held.get(name).cloned().unwrap_or_default();
            let quiet = quiet::quiet_for(s.newest_received_ms, self.watched_since(name), now);
            let history = self.histories.get(name).copied();
            let since = match self.added_ms.contains_key(name) {
                true => quiet::Since::Reload,
                false => quiet::Since::Start,
            };
            let (firing, summary) = quiet::judge(name, &s, within, (quiet, since), history);
            out.push((
                firing,
                Finding {
                    kind: AlertKind::Quiet,
                    name: name.clone(),
                    count: history.map_or(0, |h| h.received),
                    reason: None,
                    summary,
                },
            ));
        }
        let drifts = drift::recent(&self.drift.lock().unwrap_or_else(|p| p.into_inner()), now);
        for name in &self.sources {
            let (firing, count, summary) = drift::judge(name, drifts.get(name), now);
            out.push((
                firing,
                Finding {
                    kind: AlertKind::Drift,
                    name: name.clone(),
                    count,
                    reason: None,
                    summary,
                },
            ));
        }
        let secrets = self.secrets.current();
        for name in &self.sources {
            let of: Vec<&crate::secrets::Entry> =
                secrets.iter().filter(|e| &e.source == name).collect();
            let (firing, count, summary) = secrets::judge(name, &of, now, config.secret_notice);
            out.push((
                firing,
                Finding {
                    kind: AlertKind::SecretExpiring,
                    name: name.clone(),
                    count,
                    reason: None,
                    summary,
                },
            ));
        }
        for s in self.reconcile.sources().sources {
            let (firing, count, summary) = reconcile::judge_missed(&s, now);
            out.push((
                firing,
                Finding {
                    kind: AlertKind::MissedEvents,
                    name: s.source.clone(),
                    count,
                    reason: None,
                    summary,
                },
            ));
            let (firing, summary) = reconcile::judge_disabled(&s);
            out.push((
                firing,
                Finding {
                    kind: AlertKind::SubscriptionDisabled,
                    name: s.source.clone(),
                    count: 0,
                    reason: None,
                    summary,
                },
            ));
        }
        out
    }

    /// Reads the week before each quiet spell once, when it begins (one
    /// read of the per-minute counts for all the sources that turned quiet
    /// together), and forgets it once the source sends and is not alerted
    /// on any more.
    async fn remember_histories(&mut self, held: &BTreeMap<String, SourceStats>, now_ms: u64) {
        let mut begun = Vec::new();
        for (name, &within) in &self.expect_within {
            let newest = held.get(name).and_then(|s| s.newest_received_ms);
            let quiet = quiet::quiet_for(newest, self.watched_since(name), now_ms) > within;
            if quiet && !self.histories.contains_key(name) {
                begun.push((name.clone(), newest));
            }
        }
        let firing = &self.firing;
        let expect_within = &self.expect_within;
        let (added_ms, started_ms) = (&self.added_ms, self.started_ms);
        self.histories.retain(|name, _| {
            let newest = held.get(name).and_then(|s| s.newest_received_ms);
            let since = watched_since(added_ms, started_ms, name);
            let quiet = expect_within
                .get(name)
                .is_some_and(|&w| quiet::quiet_for(newest, since, now_ms) > w);
            quiet || firing.contains_key(&(AlertKind::Quiet, name.clone()))
        });
        if begun.is_empty() {
            return;
        }
        let store = self.store.clone();
        let since = quiet::History::since_ms(now_ms);
        match tokio::task::spawn_blocking(move || store.activity(since)).await {
            Ok(Ok(rows)) => {
                for (name, newest) in begun {
                    let history = quiet::History::of(&rows, &name, newest);
                    self.histories.insert(name, history);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e.report(), "alerts: cannot read a quiet source's last week");
            }
            Err(_) => {}
        }
    }

    fn newest_dead_reason(&self, source: &str) -> Option<String> {
        let filter = EventFilter {
            source: Some(source.to_owned()),
            status: Some(Status::Dead),
            ..EventFilter::default()
        };
        let (events, _) = self.store.list(&filter, None, 1).ok()?;
        events
            .first()?
            .state
            .dead
            .as_ref()
            .map(|d| d.reason.clone())
    }

    /// Posts each condition that started firing, repeats those still firing
    /// after `min_interval`, and resolves those that cleared.
    pub async fn check(&mut self) {
        let Some(config) = self.config.clone() else {
            return;
        };
        let Some(held) = self.snapshot().await else {
            return;
        };
        let lanes = self.delivery.destinations();
        let now_ms = self.clock.now_ms();
        self.remember_histories(&held, now_ms).await;
        for (firing, finding) in self.findings(&config, &held, &lanes) {
            let key = (finding.kind, finding.name.clone());
            // What to post, and since when the condition fires.
            let post = match (firing, self.firing.get(&key)) {
                (true, None) => Some((AlertStatus::Firing, now_ms, None)),
                (true, Some(f)) if f.last_sent.elapsed() >= config.min_interval => {
                    Some((AlertStatus::Firing, f.started_ms, None))
                }
                (false, Some(f)) => Some((AlertStatus::Resolved, f.started_ms, Some(now_ms))),
                _ => None,
            };
            let Some((status, started_ms, resolved_ms)) = post else {
                continue;
            };
            if !self
                .post(&config, status, &finding, started_ms, resolved_ms)
                .await
            {
                continue;
            }
            match status {
                AlertStatus::Firing => {
                    let last_sent = Instant::now();
                    self.firing.insert(
                        key,
                        Firing {
                            started_ms,
                            last_sent,
                        },
                    );
                }
                AlertStatus::Resolved => {
                    if key.0 == AlertKind::Quiet {
                        self.histories.remove(&key.1);
                    }
                    self.firing.remove(&key);
                }
            }
        }
    }

    /// The notice for `finding` in `status`.
    fn notice(
        &self,
        status: AlertStatus,
        finding: &Finding,
        started_ms: u64,
        resolved_ms: Option<u64>,
    ) -> Notice {
        Notice {
            status,
            alert: finding.kind,
            name: finding.name.clone(),
            host: self.host.clone(),
            count: finding.count,
            reason: finding.reason.clone(),
            summary: finding.summary.clone(),
            started_at: Timestamp(started_ms),
            resolved_at: resolved_ms.map(Timestamp),
            link: self.links.page(finding.kind, &finding.name),
            api: self.links.api(finding.kind, &finding.name),
        }
    }

    /// Posts one notice; whether the receiver took it.
    async fn post(
        &self,
        config: &AlertConfig,
        status: AlertStatus,
        finding: &Finding,
        started_ms: u64,
        resolved_ms: Option<u64>,
    ) -> bool {
        let notice = self.notice(status, finding, started_ms, resolved_ms);
        let body = match config.format {
            AlertFormat::Json => serde_json::to_value(&notice),
            AlertFormat::Slack => serde_json::to_value(&notice).map(
                |object| serde_json::json!({"text": slack_text(&notice), "hookinbox": object}),
            ),
        }
        .expect("a notice serialises");
        let sent = self
            .client
            .post(config.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await;
        let (kind, name) = (finding.kind.as_str(), &finding.name);
        let status_text = status.as_str();
        match sent {
            Ok(res) if res.status().is_success() => {
                self.metrics.alert(finding.kind, status, true);
                tracing::warn!(alert = kind, status = status_text, name = %name, count = finding.count, "alert sent");
                true
            }
            Ok(res) => {
                self.metrics.alert(finding.kind, status, false);
                tracing::error!(alert = kind, status = status_text, name = %name, answer = res.status().as_u16(), "the alert URL refused an alert; retrying at the next check");
                false
            }
            Err(e) => {
                self.metrics.alert(finding.kind, status, false);
                tracing::error!(alert = kind, status = status_text, name = %name, error = %e.without_url(), "cannot post an alert; retrying at the next check");
                false
            }
        }
    }
}

/// The line a chat shows: what, where, and the link to look at.
fn slack_text(n: &Notice) -> String {
    match n.status {
        AlertStatus::Firing => format!(
            "[FIRING] hookinbox on {}: {}. Look: {}",
            n.host, n.summary, n.link
        ),
        AlertStatus::Resolved => format!(
            "[RESOLVED] hookinbox on {}: {}. Look: {}",
            n.host, n.summary, n.link
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_point_at_the_page_and_the_api_call_that_show_the_condition() {
        let links = Links {
            dashboard: reqwest::Url::parse("https://inbox.example.com/hookinbox/").unwrap(),
        };
        assert_eq!(
            links.page(AlertKind::Dlq, "my shop"),
            "https://inbox.example.com/hookinbox/#/dlq?source=my+shop"
        );
        assert_eq!(
            links.api(AlertKind::PendingAge, "shop"),
            "https://inbox.example.com/hookinbox/api/events?source=shop&status=pending"
        );
        assert_eq!(
            links.page(AlertKind::CircuitOpen, "shop"),
            "https://inbox.example.com/hookinbox/#/"
        );
        assert_eq!(
            links.page(AlertKind::Drift, "my shop"),
            "https://inbox.example.com/hookinbox/#/shapes?source=my+shop"
        );
        assert_eq!(
            links.api(AlertKind::Drift, "shop"),
            "https://inbox.example.com/hookinbox/api/shapes?source=shop"
        );
    }

    #[test]
    fn a_wildcard_admin_address_is_reached_by_the_host_name() {
        let url = default_dashboard("0.0.0.0:8081".parse().unwrap(), "web-1");
        assert_eq!(url.as_str(), "http://web-1:8081/");
        let url = default_dashboard("127.0.0.1:8081".parse().unwrap(), "web-1");
        assert_eq!(url.as_str(), "http://127.0.0.1:8081/");
    }
}
