//! The event filters and paging flags that `events` and `dlq` share,
//! turned into the API's [`EventQuery`]. It sends no request.

use std::time::Duration;

use anyhow::anyhow;
use clap::Args;

use super::client::fail;
use crate::api::{EventQuery, EventStatus, StreamQuery, Timestamp};
use crate::config;
use crate::exit::{EXIT_USAGE, Failure};

/// Which events: the filters a stream takes too (`events tail`, `listen`).
#[derive(Debug, Clone, Args)]
pub struct Selection {
    /// The source's name, as in the config.
    #[arg(long)]
    pub source: Option<String>,
    /// A destination's name (its source's name, or source.name): events
    /// routed to it; with --status, that delivery's status.
    #[arg(long)]
    pub destination: Option<String>,
    /// pending, held, delivered, dead, ignored or filtered.
    #[arg(long)]
    pub status: Option<EventStatus>,
    /// The provider's event type.
    #[arg(long = "type")]
    pub event_type: Option<String>,
}

impl Selection {
    /// The stream's query of these events.
    pub(super) fn stream(self) -> StreamQuery {
        StreamQuery {
            source: self.source,
            destination: self.destination,
            status: self.status,
            event_type: self.event_type,
            ..StreamQuery::default()
        }
    }
}

/// What a payload must hold: `events search`'s, and a bulk change's.
#[derive(Debug, Clone, Default, Args)]
pub struct Inside {
    /// Text the payload contains (case matters).
    #[arg(long)]
    pub q: Option<String>,
    /// /json/pointer=value, like /data/object/customer=cus_123.
    #[arg(long = "match")]
    pub pointer_match: Option<String>,
}

impl Inside {
    pub(super) fn is_empty(&self) -> bool {
        self.q.is_none() && self.pointer_match.is_none()
    }

    /// `query` narrowed to payloads that hold this.
    pub(super) fn narrow(self, query: EventQuery) -> EventQuery {
        EventQuery {
            q: self.q,
            pointer_match: self.pointer_match,
            ..query
        }
    }
}

#[derive(Debug, Args)]
pub struct Filter {
    #[command(flatten)]
    pub of: Selection,
    /// The provider's event id.
    #[arg(long)]
    pub event_id: Option<String>,
    /// Received at or after (RFC 3339, like 2026-11-22T10:00:00Z or
    /// 2026-11-22T11:00:00+01:00).
    #[arg(long)]
    pub from: Option<Timestamp>,
    /// Received before (RFC 3339, with Z or any offset).
    #[arg(long)]
    pub to: Option<Timestamp>,
    /// Received within this long before now, like 1h, 30m or 2days (instead of --from).
    #[arg(long, value_parser = config::parse_duration, conflicts_with = "from")]
    pub since: Option<Duration>,
}

impl Filter {
    pub(super) fn query(self) -> EventQuery {
        let Selection {
            source,
            destination,
            status,
            event_type,
        } = self.of;
        EventQuery {
            source,
            destination,
            status,
            event_type,
            event_id: self.event_id,
            from: self.from.or_else(|| self.since.map(ago)),
            to: self.to,
            ..EventQuery::default()
        }
    }
}

/// The time `since` before now: `--since`'s `from`.
pub(super) fn ago(since: Duration) -> Timestamp {
    let now = crate::clock::unix_ms(std::time::SystemTime::now());
    Timestamp(now.saturating_sub(u64::try_from(since.as_millis()).unwrap_or(u64::MAX)))
}

#[derive(Debug, Args)]
pub struct Paging {
    /// Rows per page (1–500).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Continue from a previous page's cursor.
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<u64>,
    /// Follow the cursor to the last page.
    #[arg(long)]
    pub all: bool,
}

impl Paging {
    /// `--limit`, or a usage error when out of 1–500.
    pub(super) fn limit(&self) -> Result<usize, Failure> {
        if (1..=500).contains(&self.limit) {
            Ok(self.limit)
        } else {
            Err(fail(
                EXIT_USAGE,
                anyhow!("--limit must be between 1 and 500"),
            ))
        }
    }
}

pub(super) fn paged(filter: EventQuery, paging: &Paging) -> Result<EventQuery, Failure> {
    Ok(EventQuery {
        limit: Some(paging.limit()?),
        cursor: paging.cursor,
        ..filter
    })
}
