//! What the config makes of each part at start (and, for some, on a
//! reload): the declared metrics, the destinations, the quiet-source
//! deadlines, the alerter's settings and the listeners' options.

use std::collections::BTreeMap;
use std::time::Duration;

use super::AppError;
use crate::admin::AdminState;
use crate::config::Config;
use crate::deliver::Destination;
use crate::listener::ServeOptions;
use crate::metrics::{Declared, Metrics};

/// The admin listener's connection cap: a handful of operators, scrapers
/// and the dashboard; an ingest flood never takes these slots.
const ADMIN_MAX_CONNECTIONS: usize = 64;

/// Creates the metrics with every source and destination declared, so each
/// series exists from the start. Owns nothing else: the app and its tasks
/// share clones of it.
pub(super) fn declared_metrics(config: &Config) -> Metrics {
    let metrics = Metrics::new();
    declare(&metrics, config);
    metrics
}

/// Declares every series `config` names (at zero until counted): at start
/// and on each reload, for what it added.
pub(super) fn declare(metrics: &Metrics, config: &Config) {
    let declared: Vec<Declared<'_>> = config
        .sources
        .iter()
        .map(|s| Declared {
            name: s.name.as_str(),
            destinations: s.destinations.iter().map(|d| d.route.as_str()).collect(),
            expect_within: s.expect_within,
            reconciled: s.reconcile.is_some(),
        })
        .collect();
    metrics.declare(&declared);
    metrics.declare_key_namespaces(config.keys.clients.iter().map(|c| c.namespace.as_str()));
}

/// Every source's destinations, ready to attempt deliveries; the scheduler
/// will own them.
pub(super) fn destinations(config: &Config) -> Result<Vec<Destination>, AppError> {
    config
        .sources
        .iter()
        .flat_map(|s| {
            s.destinations
                .iter()
                .map(|dl| Destination::new(s.name.clone(), dl.clone()).map_err(AppError::from))
        })
        .collect::<Result<Vec<_>, _>>()
}

/// The sources that set `expect_within`, and what they set.
pub(super) fn expected_within(config: &Config) -> BTreeMap<String, Duration> {
    config
        .sources
        .iter()
        .filter_map(|s| Some((s.name.to_string(), s.expect_within?)))
        .collect()
}

/// What the alerter takes from `config`, at start and on each reload.
pub(super) fn alert_settings(config: &Config) -> crate::alert::Settings {
    crate::alert::Settings {
        alerts: config.alerts.clone(),
        sources: config.sources.iter().map(|s| s.name.to_string()).collect(),
        expect_within: expected_within(config),
    }
}

/// The admin listener's connection cap: [`ADMIN_MAX_CONNECTIONS`], or, once
/// apps claim idempotency keys there (one connection per busy worker), the
/// ingest listener's cap, which `server.max_connections` sets.
pub(super) fn admin_max_connections(admin: &AdminState, ingest: &ServeOptions) -> usize {
    if admin.access.load().keys.clients.is_empty() {
        ADMIN_MAX_CONNECTIONS
    } else {
        ingest.max_connections.max(ADMIN_MAX_CONNECTIONS)
    }
}

/// The ingest listener's options; the admin listener takes the same with
/// its own connection cap.
pub(super) fn serve_options(config: &Config) -> ServeOptions {
    ServeOptions {
        header_read_timeout: config.server.header_read_timeout,
        shutdown_timeout: config.server.shutdown_timeout,
        max_connections: config.server.max_connections,
    }
}
