//! `hookinbox dlq`: lists dead-lettered events and replays or ignores
//! them in bulk, one request filtered on the server. Single events are
//! `events`'.

use anyhow::anyhow;
use clap::Subcommand;

use super::client::{Client, fail};
use super::events::list;
use super::output::{Output, plural};
use super::query::{Filter, Inside, Paging, paged};
use crate::api::{self, EventQuery, EventStatus};
use crate::exit::{EXIT_USAGE, Failure};

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Dead-lettered events, newest first.
    List {
        /// Only this source's dead-lettered events.
        #[arg(long)]
        source: Option<String>,
        /// Only those dead at this destination (its source's name, or source.name).
        #[arg(long)]
        destination: Option<String>,
        #[command(flatten)]
        paging: Paging,
    },
    /// Replay dead-lettered events matching the filter (all of a source by default).
    Replay {
        #[command(flatten)]
        filter: Filter,
        #[command(flatten)]
        inside: Inside,
        /// Only count what would be replayed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Ignore dead-lettered events matching the filter, with a note.
    Ignore {
        #[command(flatten)]
        filter: Filter,
        #[command(flatten)]
        inside: Inside,
        /// Why: kept with each event (at most 2000 bytes).
        #[arg(long)]
        note: String,
        /// Only count what would be ignored.
        #[arg(long)]
        dry_run: bool,
    },
}

pub(super) async fn run(client: &Client, command: DlqCommand, json: bool) -> Result<(), Failure> {
    let out = match command {
        DlqCommand::List {
            source,
            destination,
            paging,
        } => {
            let filter = EventQuery {
                source,
                destination,
                status: Some(EventStatus::Dead),
                ..EventQuery::default()
            };
            list(client, paged(filter, &paging)?, paging.all).await?
        }
        DlqCommand::Replay {
            filter,
            inside,
            dry_run,
        } => {
            let request = api::BulkRequest {
                filter: inside.narrow(dead_letters(filter)?),
                dry_run,
                note: None,
            };
            let result: api::BulkResult = client.post("/api/replay", Some(&request)).await?;
            Output::new(&result, bulk_text(&result, "replayed"))
        }
        DlqCommand::Ignore {
            filter,
            inside,
            note,
            dry_run,
        } => {
            let request = api::BulkRequest {
                filter: inside.narrow(dead_letters(filter)?),
                dry_run,
                note: Some(note),
            };
            let result: api::BulkResult = client.post("/api/ignore", Some(&request)).await?;
            Output::new(&result, bulk_text(&result, "ignored"))
        }
    };
    out.print(json)
}

/// A bulk change of dead-lettered events: the filter's status is `dead`;
/// asking for another is a usage error, never silently replaced.
fn dead_letters(filter: Filter) -> Result<EventQuery, Failure> {
    match filter.of.status {
        None | Some(EventStatus::Dead) => Ok(EventQuery {
            status: Some(EventStatus::Dead),
            ..filter.query()
        }),
        Some(other) => Err(fail(
            EXIT_USAGE,
            anyhow!(
                "the dlq commands work on dead events; --status {} is not one (replay or ignore single events with `hookinbox events`)",
                other.as_str()
            ),
        )),
    }
}

fn bulk_text(result: &api::BulkResult, action: &str) -> String {
    let looked = match result.examined {
        Some(n) => format!(" ({} read)", plural(n, "payload", "payloads")),
        None => String::new(),
    };
    if result.dry_run {
        return format!(
            "dry run: {} match{looked}\n",
            plural(result.matched, "event", "events")
        );
    }
    let mut out = format!(
        "{} matched, {} {action}\n",
        plural(result.matched, "event", "events"),
        result.changed
    );
    for r in &result.refused {
        out.push_str(&format!("  refused {}: {}\n", r.id, r.reason));
    }
    out
}
