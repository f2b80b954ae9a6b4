//! `/metrics`: the Prometheus scrape. Owns refreshing the gauges read at
//! scrape time (what the store holds, the keys stored, its disk, each circuit) and picking
//! the exposition format; refuses to define a metric (see `crate::metrics`).

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use super::AdminState;
use super::error::Unauthorized;
use crate::alert::quiet::quiet_for;
use crate::metrics::{Exposition, SourceGauges, StoreDisk};

#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format 0.0.4, or OpenMetrics 1.0.0 when the Accept header prefers it", content_type = "text/plain", body = String), Unauthorized))]
pub(super) async fn metrics(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    // Gauges of what the store holds are read at scrape time, from counts
    // kept with every change and three `stat`s: the same cost at any size.
    state.metrics.set_store_writable(state.store.is_writable());
    let store = state.store.clone();
    let read = tokio::task::spawn_blocking(move || {
        (store.stats(), store.disk_usage(), store.keys_stored())
    })
    .await;
    if let Ok((stats, disk, keys)) = read {
        match keys {
            Ok(n) => state.metrics.set_keys_stored(n),
            Err(e) => tracing::warn!(error = %e, "metrics: cannot count the stored keys"),
        }
        if let Ok(held) = stats {
            let now = state.clock.now_ms();
            for name in &state.access().sources {
                let s = held.get(name).cloned().unwrap_or_default();
                let oldest = s.oldest_pending_ms.map_or(0, |t| now.saturating_sub(t));
                let gauges = SourceGauges {
                    pending: s.counts.pending,
                    retrying: s.counts.retrying,
                    held: s.counts.held,
                    dead: s.counts.dead,
                    oldest_pending: Duration::from_millis(oldest),
                    quiet: quiet_for(s.newest_received_ms, state.started_ms, now),
                };
                state.metrics.set_source_gauges(name, gauges);
            }
        }
        match disk {
            Ok(d) => state.metrics.set_store_disk(StoreDisk {
                database_bytes: d.database_bytes,
                database_disk_bytes: d.database_disk_bytes,
                wal_bytes: d.wal_bytes,
                wal_disk_bytes: d.wal_disk_bytes,
                dedupe_runs_bytes: d.dedupe_runs_bytes,
                dedupe_memory_bytes: d.dedupe_memory_bytes,
                filesystem_available_bytes: d.filesystem_available_bytes,
                filesystem_size_bytes: d.filesystem_size_bytes,
            }),
            Err(e) => tracing::warn!(error = %e, "metrics: cannot read the store's file sizes"),
        }
    }
    for d in state.delivery.destinations() {
        let to = crate::metrics::DestinationLabel::new(&d.source, &d.name);
        state.metrics.set_circuit_state(&to, d.circuit.into());
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Exposition::negotiate(accept);
    (
        [(header::CONTENT_TYPE, format.content_type())],
        state.metrics.encode(format),
    )
        .into_response()
}
