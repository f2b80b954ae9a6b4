//! `hookinbox audit`: the audit trail, newest first: who changed what,
//! when, with which note, and how it ended; refusals too. It changes
//! nothing.

use std::time::Duration;

use clap::Args;

use super::client::Client;
use super::output::{listing, or_dash, table, time};
use super::query::{Paging, ago};
use crate::api::{self, AuditAction, Timestamp};
use crate::config;
use crate::exit::Failure;

/// Which records, and how many.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A person's name (`admin` for the [admin] token).
    #[arg(long)]
    pub person: Option<String>,
    /// replay, ignore, erase, bulk_replay, bulk_ignore, pause, resume,
    /// sweep, backup, promote, key_delete, key_change, reconcile, reload,
    /// read_unredacted or other.
    #[arg(long)]
    pub action: Option<AuditAction>,
    /// Asked at or after (RFC 3339).
    #[arg(long)]
    pub from: Option<Timestamp>,
    /// Asked before (RFC 3339).
    #[arg(long)]
    pub to: Option<Timestamp>,
    /// Asked within this long before now, like 1h or 7days (instead of --from).
    #[arg(long, value_parser = config::parse_duration, conflicts_with = "from")]
    pub since: Option<Duration>,
    #[command(flatten)]
    pub paging: Paging,
}

pub(super) async fn run(client: &Client, args: AuditArgs, json: bool) -> Result<(), Failure> {
    let mut query = api::AuditQuery {
        limit: Some(args.paging.limit()?),
        person: args.person,
        action: args.action,
        from: args.from.or_else(|| args.since.map(ago)),
        to: args.to,
        cursor: args.paging.cursor,
    };
    let all = args.paging.all;
    let mut pages: Vec<api::AuditPage> = Vec::new();
    loop {
        let page: api::AuditPage = client.get_with("/api/audit", &query).await?;
        query.cursor = page.next_cursor;
        pages.push(page);
        if !all || query.cursor.is_none() {
            break;
        }
    }
    let text = audit_table(&pages);
    listing(pages, all, |p| p.entries, text).print(json)
}

fn audit_table(pages: &[api::AuditPage]) -> String {
    let rows: Vec<Vec<String>> = pages
        .iter()
        .flat_map(|p| &p.entries)
        .map(|e| {
            let args: Vec<String> = e
                .filter
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .chain(e.dry_run.then(|| "dry run".to_owned()))
                .collect();
            let outcome = match &e.outcome {
                None => "no answer".to_owned(),
                Some(o) => match (o.matched, o.changed) {
                    (Some(m), Some(c)) => format!("{} ({m} matched, {c} changed)", o.status),
                    _ => o.status.to_string(),
                },
            };
            let why = e
                .outcome
                .as_ref()
                .and_then(|o| o.error.clone())
                .or_else(|| e.note.clone());
            vec![
                e.id.to_string(),
                time(e.at),
                format!("{} ({})", e.person, e.role.as_str()),
                e.action.as_str().to_owned(),
                or_dash(e.target.as_deref()),
                if args.is_empty() {
                    "-".to_owned()
                } else {
                    args.join(" ")
                },
                outcome,
                why.map(|w| w.chars().take(80).collect())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let mut out = if rows.is_empty() {
        "no audit records\n".to_owned()
    } else {
        table(
            &[
                "ID",
                "AT",
                "WHO",
                "ACTION",
                "TARGET",
                "ARGUMENTS",
                "OUTCOME",
                "NOTE OR ERROR",
            ],
            rows,
        )
    };
    if let Some(next) = pages.last().and_then(|p| p.next_cursor) {
        out.push_str(&format!("more: --cursor {next}\n"));
    }
    out
}
