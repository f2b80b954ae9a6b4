//! Alerts: tell a person when something needs them, never silently.
//!
//! Every `check_interval` the alerter looks at what the store holds and what
//! the scheduler knows, and posts `{"text": …, "hookinbox": {…}}` to the
//! alert URL (a Slack incoming webhook takes it as is) when:
//! - a source's DLQ holds more than `dlq_threshold` events,
//! - a source's oldest pending event is older than `pending_age`,
//! - a destination's circuit is open (it opened, or it stays open).
//!
//! Each alert names the source or destination, how many, and the first
//! failing reason. The same alert (kind + name) is sent at most once per
//! `min_interval`, so a flapping destination does not spam. A post that
//! fails is logged and counted, and tried again at the next check.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::AlertConfig;
use crate::deliver::breaker::CircuitState;
use crate::metrics::{AlertKind, Metrics};
use crate::schedule::DeliveryHandle;
use crate::store::schema::Status;
use crate::store::{EventFilter, Store};
use crate::supervise::TaskError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    pub kind: AlertKind,
    /// The source or destination.
    pub name: String,
    pub count: u64,
    pub reason: Option<String>,
    pub text: String,
}

pub struct Alerter {
    config: AlertConfig,
    store: Store,
    metrics: Metrics,
    delivery: DeliveryHandle,
    sources: Vec<String>,
    client: reqwest::Client,
    clock: Clock,
    last_sent: HashMap<(AlertKind, String), Instant>,
}

impl Alerter {
    pub fn new(
        config: AlertConfig,
        store: Store,
        metrics: Metrics,
        delivery: DeliveryHandle,
        sources: Vec<String>,
        clock: Clock,
    ) -> Result<Alerter, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("alerts: cannot build the HTTP client: {e}"))?;
        Ok(Alerter {
            config,
            store,
            metrics,
            delivery,
            sources,
            client,
            clock,
            last_sent: HashMap::new(),
        })
    }

    /// Checks every `check_interval` until `shutdown` is cancelled.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), TaskError> {
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(self.config.check_interval) => self.check().await,
            }
        }
    }

    /// What is wrong right now, whether or not it was told recently.
    async fn conditions(&self) -> Vec<Alert> {
        let mut alerts = Vec::new();
        let store = self.store.clone();
        let held = match tokio::task::spawn_blocking(move || store.stats()).await {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::error!(error = %e.report(), "alerts: cannot read the store");
                return alerts;
            }
            Err(_) => return alerts,
        };
        let now = self.clock.now_ms();
        for name in &self.sources {
            let Some(s) = held.get(name) else { continue };
            if s.counts.dead > self.config.dlq_threshold {
                let reason = self.newest_dead_reason(name);
                alerts.push(Alert {
                    kind: AlertKind::Dlq,
                    name: name.clone(),
                    count: s.counts.dead,
                    text: format!(
                        "hookinbox: source {name} has {} dead-lettered events (threshold {}); latest: {}",
                        s.counts.dead,
                        self.config.dlq_threshold,
                        reason.as_deref().unwrap_or("unknown")
                    ),
                    reason,
                });
            }
            if let Some(oldest) = s.oldest_pending_ms {
                let age = Duration::from_millis(now.saturating_sub(oldest));
                if age > self.config.pending_age {
                    alerts.push(Alert {
                        kind: AlertKind::PendingAge,
                        name: name.clone(),
                        count: s.counts.pending,
                        reason: None,
                        text: format!(
                            "hookinbox: source {name} has {} pending events, the oldest waiting {} (limit {})",
                            s.counts.pending,
                            humantime::format_duration(Duration::from_secs(age.as_secs())),
                            humantime::format_duration(self.config.pending_age)
                        ),
                    });
                }
            }
        }
        for d in self.delivery.destinations() {
            if d.circuit == CircuitState::Open {
                let pending = held.get(&d.name).map_or(0, |s| s.counts.pending);
                alerts.push(Alert {
                    kind: AlertKind::CircuitOpen,
                    name: d.name.clone(),
                    count: pending,
                    text: format!(
                        "hookinbox: destination {} is failing and its circuit is open; {pending} events wait; last failure: {}",
                        d.name,
                        d.last_failure.as_deref().unwrap_or("unknown")
                    ),
                    reason: d.last_failure,
                });
            }
        }
        alerts
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

    /// Posts every current alert not sent within `min_interval`.
    pub async fn check(&mut self) {
        for alert in self.conditions().await {
            let key = (alert.kind, alert.name.clone());
            if self
                .last_sent
                .get(&key)
                .is_some_and(|at| at.elapsed() < self.config.min_interval)
            {
                continue;
            }
            let body = json!({
                "text": alert.text,
                "hookinbox": {
                    "alert": alert.kind.as_str(),
                    "name": alert.name,
                    "count": alert.count,
                    "reason": alert.reason,
                },
            });
            let sent = self
                .client
                .post(self.config.url.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string())
                .send()
                .await;
            match sent {
                Ok(res) if res.status().is_success() => {
                    self.last_sent.insert(key, Instant::now());
                    self.metrics.alert(alert.kind, true);
                    tracing::warn!(alert = alert.kind.as_str(), name = %alert.name, count = alert.count, "alert sent");
                }
                Ok(res) => {
                    self.metrics.alert(alert.kind, false);
                    tracing::error!(alert = alert.kind.as_str(), name = %alert.name, status = res.status().as_u16(), "the alert URL refused an alert; retrying at the next check");
                }
                Err(e) => {
                    self.metrics.alert(alert.kind, false);
                    tracing::error!(alert = alert.kind.as_str(), name = %alert.name, error = %e.without_url(), "cannot post an alert; retrying at the next check");
                }
            }
        }
    }
}
