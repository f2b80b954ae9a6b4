//! `/api/stats` and `/api/activity`: what the store holds per source,
//! destination and type, what this process has seen since it started, and
//! the last hours per minute. Read-only; refuses to count anything itself
//! (the store's maintained counts and `Metrics` do).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Query, State};

use super::AdminState;
use super::error::{AdminError, StoreUnavailable, Unauthorized};
use crate::alert::quiet::quiet_for;
use crate::api::{self, Timestamp};
use crate::store::index::{LATENCY_BOUNDS_MS, MinuteKind};

/// Per source and event type: what the store holds (from its maintained
/// counts) and what this process has seen since it started.
#[utoipa::path(get, path = "/api/stats", tag = "operations",
    responses((status = 200, description = "Per source: stored now, and since the process started", body = api::Stats), Unauthorized, StoreUnavailable))]
pub(super) async fn stats(State(state): State<AdminState>) -> Result<Json<api::Stats>, AdminError> {
    let store = state.store.clone();
    let held = tokio::task::spawn_blocking(move || store.stats()).await??;
    let now = state.clock.now_ms();
    let mut names: Vec<String> = state.access().sources.clone();
    for name in held.keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let counts = |c: &crate::store::Counts| api::Counts {
        pending: c.pending - c.retrying,
        retrying: c.retrying,
        held: c.held,
        delivered: c.delivered,
        dead: c.dead,
        ignored: c.ignored,
        filtered: c.filtered,
    };
    let percentiles = |p: Option<(f64, f64)>| p.map(|(p50, p99)| api::Percentiles { p50, p99 });
    let lanes = state.delivery.destinations();
    let mut sources = std::collections::BTreeMap::new();
    for name in names {
        let s = held.get(&name).cloned().unwrap_or_default();
        let expect_within = state.access().expect_within.get(&name).copied();
        let finished = s.counts.delivered + s.counts.dead;
        // Every destination of the source, quiet ones too, and any route
        // the store still holds deliveries of.
        let mut destinations: std::collections::BTreeMap<String, api::DestinationStats> = lanes
            .iter()
            .filter(|l| l.source == name)
            .map(|l| {
                let empty = api::DestinationStats {
                    stored: api::Counts::default(),
                    oldest_pending_age_ms: None,
                };
                (l.name.clone(), empty)
            })
            .collect();
        for (route, r) in &s.routes {
            destinations.insert(
                route.clone(),
                api::DestinationStats {
                    stored: counts(&r.counts),
                    oldest_pending_age_ms: r.oldest_pending_ms.map(|t| now.saturating_sub(t)),
                },
            );
        }
        sources.insert(
            name.clone(),
            api::SourceStats {
                stored: counts(&s.counts),
                by_type: s
                    .by_type
                    .iter()
                    .map(|(t, c)| (t.clone(), counts(c)))
                    .collect(),
                success_rate: (finished > 0).then(|| s.counts.delivered as f64 / finished as f64),
                oldest_pending_age_ms: s.oldest_pending_ms.map(|t| now.saturating_sub(t)),
                newest_received_at: s.newest_received_ms.map(Timestamp),
                expect_within_ms: expect_within.map(|d| d.as_millis() as u64),
                quiet: expect_within.is_some_and(|within| {
                    quiet_for(s.newest_received_ms, state.started_ms, now) > within
                }),
                destinations,
                since_start: api::SinceStart {
                    received: state.metrics.received_count(&name),
                    duplicates: state.metrics.duplicate_count(&name),
                    rejected: state
                        .metrics
                        .rejected_by_reason(&name)
                        .into_iter()
                        .collect(),
                    ack_ms: percentiles(state.metrics.recent_ack_ms(&name)),
                    received_to_delivered_ms: percentiles(state.metrics.recent_delivery_ms(&name)),
                    by_type: state
                        .metrics
                        .by_type(&name)
                        .into_iter()
                        .map(|(t, received, duplicates)| {
                            (
                                t,
                                api::TypeSinceStart {
                                    received,
                                    duplicates,
                                },
                            )
                        })
                        .collect(),
                },
            },
        );
    }
    Ok(Json(api::Stats { sources }))
}

/// The last hours per minute (or per `step` minutes), from the buckets
/// kept with every change.
#[utoipa::path(get, path = "/api/activity", tag = "operations", params(api::ActivityQuery),
    responses((status = 200, description = "Per source and minute (or step), oldest first; per destination likewise", body = api::Activity),
              (status = 400, description = "hours outside 1–168, or step outside 1–60", body = api::ApiError), Unauthorized, StoreUnavailable))]
pub(super) async fn activity(
    State(state): State<AdminState>,
    query: Result<Query<api::ActivityQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<api::Activity>, AdminError> {
    let Query(query) = query.map_err(|e| AdminError::BadRequest(e.body_text()))?;
    let hours = query.hours.unwrap_or(6);
    if !(1..=168).contains(&hours) {
        return Err(AdminError::BadRequest(
            "hours must be between 1 and 168 (the buckets keep a week)".into(),
        ));
    }
    let step = query.step.unwrap_or(1);
    if !(1..=60).contains(&step) {
        return Err(AdminError::BadRequest(
            "step must be between 1 and 60 minutes".into(),
        ));
    }
    let from = state.clock.now_ms().saturating_sub(hours * 3_600_000);
    let store = state.store.clone();
    let rows = tokio::task::spawn_blocking(move || store.activity(from)).await??;
    // Each row into its step's bucket: one per (step, source) and one per
    // (step, destination); rows come by minute, so the maps come out
    // oldest first.
    let mut by_source: BTreeMap<(u64, String), api::MinuteCounts> = BTreeMap::new();
    let mut by_destination: BTreeMap<(u64, String), api::DestinationMinute> = BTreeMap::new();
    let buckets = LATENCY_BOUNDS_MS.len() + 1;
    for (minute, name, kind, n) in rows {
        let minute = minute / step * step;
        let at = Timestamp(minute * 60_000);
        if let MinuteKind::Attempted | MinuteKind::Failed | MinuteKind::Latency(_) = kind {
            let row = by_destination
                .entry((minute, name.clone()))
                .or_insert_with(|| api::DestinationMinute {
                    minute: at,
                    destination: name,
                    attempts: 0,
                    failed: 0,
                    latency: vec![0; buckets],
                });
            match kind {
                MinuteKind::Attempted => row.attempts += n,
                MinuteKind::Failed => row.failed += n,
                MinuteKind::Latency(bucket) => {
                    if let Some(count) = row.latency.get_mut(usize::from(bucket)) {
                        *count += n;
                    }
                }
                _ => {}
            }
            continue;
        }
        let row = by_source
            .entry((minute, name.clone()))
            .or_insert_with(|| api::MinuteCounts {
                minute: at,
                source: name,
                received: 0,
                duplicates: 0,
                delivered: 0,
                dead_lettered: 0,
            });
        match kind {
            MinuteKind::Received => row.received += n,
            MinuteKind::Duplicate => row.duplicates += n,
            MinuteKind::Delivered => row.delivered += n,
            MinuteKind::DeadLettered => row.dead_lettered += n,
            MinuteKind::Attempted | MinuteKind::Failed | MinuteKind::Latency(_) => {}
        }
    }
    Ok(Json(api::Activity {
        minutes: by_source.into_values().collect(),
        destinations: by_destination.into_values().collect(),
        latency_bounds_ms: LATENCY_BOUNDS_MS.to_vec(),
        step_minutes: step,
    }))
}
