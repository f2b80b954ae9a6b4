//! `hookinbox stats`: counts per source and destination, once, or again
//! every `--watch` interval until interrupted. It changes nothing.

use std::time::Duration;

use super::client::Client;
use super::output::{Output, or_dash, print, table, time};
use crate::api::{self, Timestamp};
use crate::exit::Failure;

pub(super) async fn run(
    client: &Client,
    watch: Option<Duration>,
    json: bool,
) -> Result<(), Failure> {
    if let Some(every) = watch {
        return watch_stats(client, every, json).await;
    }
    let stats: api::Stats = client.get("/api/stats", None).await?;
    Output::new(&stats, stats_table(&stats)).print(json)
}

/// `stats --watch`: the table again every `every` (after clearing a
/// terminal; one after the other with a time line into a pipe), or one JSON
/// document a line.
async fn watch_stats(client: &Client, every: Duration, json: bool) -> Result<(), Failure> {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal();
    let mut ticks = tokio::time::interval(every.max(Duration::from_millis(100)));
    loop {
        ticks.tick().await;
        let stats: api::Stats = client.get("/api/stats", None).await?;
        let text = if json {
            format!("{}\n", serde_json::to_string(&stats).unwrap_or_default())
        } else {
            let now = time(Timestamp(crate::clock::unix_ms(
                std::time::SystemTime::now(),
            )));
            let clear = if terminal { "\x1b[2J\x1b[H" } else { "" };
            format!(
                "{clear}every {}, {now}\n\n{}\n",
                humantime::format_duration(every),
                stats_table(&stats)
            )
        };
        print(&text)?;
    }
}

fn stats_table(stats: &api::Stats) -> String {
    if stats.sources.is_empty() {
        return "no sources\n".into();
    }
    let ms = |p: Option<api::Percentiles>| {
        p.map_or_else(|| "-".to_owned(), |p| format!("{:.1}/{:.1}", p.p50, p.p99))
    };
    let age = |ms: Option<u64>| {
        or_dash(ms.map(|ms| humantime::format_duration(Duration::from_secs(ms / 1000))))
    };
    let row = |name: String, c: &api::Counts, success: Option<f64>, oldest: Option<u64>| {
        vec![
            name,
            c.pending.to_string(),
            c.retrying.to_string(),
            c.held.to_string(),
            c.delivered.to_string(),
            c.dead.to_string(),
            c.ignored.to_string(),
            c.filtered.to_string(),
            or_dash(success.map(|r| format!("{:.1}%", r * 100.0))),
            age(oldest),
        ]
    };
    let mut stored = Vec::new();
    for (name, s) in &stats.sources {
        stored.push(row(
            name.clone(),
            &s.stored,
            s.success_rate,
            s.oldest_pending_age_ms,
        ));
        // A source with several destinations: one indented row each.
        if s.destinations.len() > 1 {
            for (destination, d) in &s.destinations {
                let finished = d.stored.delivered + d.stored.dead;
                let success = (finished > 0).then(|| d.stored.delivered as f64 / finished as f64);
                stored.push(row(
                    format!("  → {destination}"),
                    &d.stored,
                    success,
                    d.oldest_pending_age_ms,
                ));
            }
        }
    }
    let since = stats
        .sources
        .iter()
        .map(|(name, s)| {
            let t = &s.since_start;
            vec![
                name.clone(),
                t.received.to_string(),
                t.duplicates.to_string(),
                t.rejected.values().sum::<u64>().to_string(),
                ms(t.ack_ms),
                ms(t.received_to_delivered_ms),
            ]
        })
        .collect();
    let mut out = "stored now:\n".to_owned();
    out.push_str(&table(
        &[
            "SOURCE",
            "PENDING",
            "RETRYING",
            "HELD",
            "DELIVERED",
            "DEAD",
            "IGNORED",
            "FILTERED",
            "SUCCESS",
            "OLDEST PENDING",
        ],
        stored,
    ));
    out.push_str("\nsince the server started:\n");
    out.push_str(&table(
        &[
            "SOURCE",
            "RECEIVED",
            "DUPLICATES",
            "REJECTED",
            "ACK MS P50/P99",
            "DELIVERED MS P50/P99",
        ],
        since,
    ));
    out
}
