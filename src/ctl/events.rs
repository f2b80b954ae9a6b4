//! `hookinbox events`: list, search, show, replay, ignore and delete
//! single events, one request each (`tail` is `tail.rs`'s). Bulk changes
//! are `dlq`'s.

use std::time::Duration;

use anyhow::anyhow;
use clap::Subcommand;

use super::client::{Client, NO_BODY, fail};
use super::output::{Output, listing, or_dash, plural, table, time};
use super::query::{Filter, Inside, Paging, paged};
use crate::api::{self, EventQuery};
use crate::config;
use crate::exit::{EXIT_USAGE, Failure};

#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// List events, newest first.
    List {
        #[command(flatten)]
        filter: Filter,
        #[command(flatten)]
        paging: Paging,
    },
    /// Search inside payloads (with the list's filters), newest first. Each
    /// call reads payloads for up to half a second and says how far back it got.
    Search {
        #[command(flatten)]
        filter: Filter,
        #[command(flatten)]
        inside: Inside,
        #[command(flatten)]
        paging: Paging,
    },
    /// One event: payload, headers and every attempt.
    Show {
        /// hookinbox's id of the event (hbx_…: the webhook-id the app received).
        id: String,
    },
    /// Deliver one event again (same webhook-id): to one destination, or to
    /// each that is done with it.
    Replay {
        /// hookinbox's id of the event (hbx_…: the webhook-id the app received).
        id: String,
        /// Only to this destination (its source's name, or source.name); for
        /// a held or filtered event, the destination to send it to.
        #[arg(long)]
        destination: Option<String>,
    },
    /// Stop delivering one event (to one destination, or to each); the note
    /// is required.
    Ignore {
        /// hookinbox's id of the event (hbx_…: the webhook-id the app received).
        id: String,
        /// Only at this destination (its source's name, or source.name).
        #[arg(long)]
        destination: Option<String>,
        /// Why: kept with the event for whoever looks at it later (at most 2000 bytes).
        #[arg(long)]
        note: String,
    },
    /// Follow new events as they arrive (the last few first), until interrupted.
    Tail {
        #[command(flatten)]
        filter: Filter,
        /// Ignored: new events come on the server's event stream as they
        /// are stored (this once set how often the tail asked).
        #[arg(long, hide = true, value_parser = config::parse_duration)]
        every: Option<Duration>,
        /// How many of the latest events to show first.
        #[arg(long, default_value_t = 10)]
        last: usize,
    },
    /// Delete one event's payload and headers for good (a privacy request);
    /// its id, times, history and the note stay, and a resend stays a duplicate.
    Delete {
        /// hookinbox's id of the event (hbx_…: the webhook-id the app received).
        id: String,
        /// Why the payload goes: kept with the event (at most 2000 bytes).
        #[arg(long)]
        note: String,
    },
}

pub(super) async fn run(
    client: &Client,
    command: EventsCommand,
    json: bool,
) -> Result<(), Failure> {
    let out = match command {
        EventsCommand::Tail { filter, last, .. } => {
            return super::tail::run(client, filter, last, json).await;
        }
        EventsCommand::List { filter, paging } => {
            let query = paged(filter.query(), &paging)?;
            list(client, query, paging.all).await?
        }
        EventsCommand::Search {
            filter,
            inside,
            paging,
        } => {
            if inside.is_empty() {
                return Err(fail(
                    EXIT_USAGE,
                    anyhow!("give --q TEXT or --match /json/pointer=value (or use `events list`)"),
                ));
            }
            let query = inside.narrow(paged(filter.query(), &paging)?);
            list(client, query, paging.all).await?
        }
        EventsCommand::Show { id } => {
            let event: api::EventDetail = client.get(&format!("/api/events/{id}"), None).await?;
            Output::new(&event, event_detail(&event))
        }
        EventsCommand::Replay { id, destination } => {
            let event: api::EventSummary = client
                .change(&format!("/api/events/{id}/replay"), destination, NO_BODY)
                .await?;
            let text = format!("{id}: replayed, now {}\n", event.status.as_str());
            Output::new(&event, text)
        }
        EventsCommand::Ignore {
            id,
            destination,
            note,
        } => {
            let event: api::EventSummary = client
                .change(
                    &format!("/api/events/{id}/ignore"),
                    destination,
                    Some(&api::NoteRequest { note }),
                )
                .await?;
            Output::new(&event, format!("{id}: ignored\n"))
        }
        EventsCommand::Delete { id, note } => {
            let event: api::EventSummary = client
                .delete(&format!("/api/events/{id}"), &api::NoteRequest { note })
                .await?;
            let text = format!(
                "{id}: payload and headers deleted; status {}\n",
                event.status.as_str()
            );
            Output::new(&event, text)
        }
    };
    out.print(json)
}

/// A list or search: one page, or every page with `all` (`--json` prints
/// every event as one array then: [`listing`]).
pub(super) async fn list(client: &Client, query: EventQuery, all: bool) -> Result<Output, Failure> {
    let pages = client.pages(query, all).await?;
    let text = events_table(&pages);
    Ok(listing(pages, all, |p| p.events, text))
}

fn events_table(pages: &[api::EventPage]) -> String {
    let rows: Vec<Vec<String>> = pages
        .iter()
        .flat_map(|p| &p.events)
        .map(|e| {
            vec![
                e.id.clone(),
                e.source.clone(),
                e.event_id.clone(),
                or_dash(e.event_type.as_deref()),
                e.status.as_str().to_owned(),
                time(e.received_at),
                e.attempts.to_string(),
                e.dead_letter
                    .as_ref()
                    .map(|d| d.reason.chars().take(60).collect())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    let mut out = if rows.is_empty() {
        "no events\n".to_owned()
    } else {
        table(
            &[
                "ID", "SOURCE", "EVENT ID", "TYPE", "STATUS", "RECEIVED", "ATTEMPTS", "WHY DEAD",
            ],
            rows,
        )
    };
    let Some(last) = pages.last() else {
        return out;
    };
    if let Some(search) = &last.search {
        let examined: u64 = pages
            .iter()
            .filter_map(|p| p.search.as_ref())
            .map(|s| s.examined)
            .sum();
        out.push_str(&format!(
            "searched {} back to {}\n",
            plural(examined, "payload", "payloads"),
            or_dash(search.scanned_back_to.map(time))
        ));
    }
    if let Some(cursor) = last.next_cursor {
        out.push_str(&format!("more: --cursor {cursor}\n"));
    }
    out
}

fn event_detail(e: &api::EventDetail) -> String {
    let s = &e.summary;
    let mut out = String::new();
    for (key, value) in [
        ("id", s.id.clone()),
        ("source", s.source.clone()),
        ("event_id", s.event_id.clone()),
        ("event_type", or_dash(s.event_type.as_deref())),
        ("status", s.status.as_str().to_owned()),
        ("received_at", time(s.received_at)),
        ("attempts", s.attempts.to_string()),
        ("replays", s.replays.to_string()),
        ("next_attempt_at", or_dash(s.next_attempt_at.map(time))),
        ("delivered_at", or_dash(s.delivered_at.map(time))),
    ] {
        out.push_str(&format!("{key:<16}{value}\n"));
    }
    if let Some(dead) = &s.dead_letter {
        out.push_str(&format!("{:<16}{}\n", "dead_letter", dead.reason));
    }
    if let Some(trace) = &e.trace_id {
        out.push_str(&format!("{:<16}{trace}\n", "trace_id"));
    }
    if let Some(url) = &e.trace_url {
        out.push_str(&format!("{:<16}{url}\n", "trace_url"));
    }
    if let Some(note) = &s.note {
        out.push_str(&format!("{:<16}{}\n", "note", note.text));
    }
    if let Some(erased) = &s.erased {
        out.push_str(&format!(
            "{:<16}payload deleted at {}: {}\n",
            "erased",
            time(erased.at),
            erased.text
        ));
    }
    if s.deliveries.len() > 1 {
        out.push_str("\ndeliveries:\n");
        let rows = s
            .deliveries
            .iter()
            .map(|d| {
                vec![
                    d.destination.clone(),
                    d.status.as_str().to_owned(),
                    d.attempts.to_string(),
                    or_dash(d.next_attempt_at.map(time)),
                    or_dash(d.delivered_at.map(time)),
                    or_dash(d.dead_letter.as_ref().map(|x| x.reason.as_str()))
                        .chars()
                        .take(60)
                        .collect(),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "DESTINATION",
                "STATUS",
                "ATTEMPTS",
                "NEXT ATTEMPT",
                "DELIVERED",
                "WHY DEAD",
            ],
            rows,
        ));
    }
    out.push_str("\nattempts:\n");
    let rows = e
        .attempt_history
        .iter()
        .map(|a| {
            vec![
                a.destination.clone(),
                a.round.to_string(),
                // As the app saw it (`hookinbox-attempt`): each round
                // counts from 1, as the dashboard's rounds do.
                a.attempt.to_string(),
                time(a.started_at),
                a.outcome.as_str().to_owned(),
                or_dash(a.status),
                a.latency_ms.to_string(),
                or_dash(a.error.as_ref().or(a.response_snippet.as_ref()))
                    .chars()
                    .take(80)
                    .collect(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "DESTINATION",
            "ROUND",
            "#",
            "STARTED",
            "OUTCOME",
            "STATUS",
            "MS",
            "DETAIL",
        ],
        rows,
    ));
    // The headers stored with it, as deliveries forward them (credentials
    // and hop-by-hop headers are never stored); none once erased.
    if e.headers.is_empty() {
        out.push_str("\nheaders: none\n");
    } else {
        out.push_str("\nheaders:\n");
        for (name, value) in &e.headers {
            out.push_str(&format!("{name}: {value}\n"));
        }
    }
    let encoding = match e.payload.encoding {
        api::PayloadEncoding::Text => "text",
        api::PayloadEncoding::Base64 => "base64",
    };
    out.push_str(&format!("\npayload ({encoding}):\n{}\n", e.payload.data));
    out
}
