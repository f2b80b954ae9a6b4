//! `hookinbox events tail`: follows new events by asking for the events
//! list again and again until interrupted. It changes nothing.

use std::time::Duration;

use super::client::Client;
use super::output::{or_dash, print, time};
use crate::api::{self, EventQuery, Timestamp};
use crate::exit::Failure;

/// How many events one look of `events tail` reads.
const TAIL_PAGE: usize = 100;

/// `events tail`: the `last` newest events matching `query`, then every
/// new one as it arrives, oldest first, until interrupted. A look that
/// finds a whole page new says that it may have missed some.
///
/// New means received after what was printed, not merely unseen: each
/// later look asks only from the newest receipt time printed, and takes
/// the list (newest first) down to the first event already printed. (A
/// look of a page of 100 once printed every older event the first look of
/// `--last` had left out, as if new.)
pub(super) async fn run(
    client: &Client,
    query: EventQuery,
    every: Duration,
    last: usize,
    json: bool,
) -> Result<(), Failure> {
    let mut seen: std::collections::HashSet<String> = Default::default();
    let mut order: std::collections::VecDeque<String> = Default::default();
    let mut first = true;
    // The receipt time of the newest event printed.
    let mut newest: Option<Timestamp> = None;
    let mut ticks = tokio::time::interval(every.max(Duration::from_millis(100)));
    loop {
        ticks.tick().await;
        let page: api::EventPage = client
            .get(
                "/api/events",
                Some(&EventQuery {
                    limit: Some(if first { last.clamp(1, 500) } else { TAIL_PAGE }),
                    cursor: None,
                    from: query.from.max(newest),
                    ..query.clone()
                }),
            )
            .await?;
        let fresh: Vec<&api::EventSummary> = page
            .events
            .iter()
            .take_while(|e| !seen.contains(&e.id))
            .collect();
        if let Some(e) = fresh.first() {
            newest = newest.max(Some(e.received_at));
        }
        let mut text = String::new();
        if !first && fresh.len() == TAIL_PAGE {
            text.push_str(&format!(
                "… more than {TAIL_PAGE} events arrived since the last look: some are not shown (lower --every or narrow the filter)\n"
            ));
        }
        if first && !json {
            text.push_str("RECEIVED  ID  SOURCE  EVENT ID  TYPE  STATUS\n");
        }
        for e in fresh.iter().rev() {
            if json {
                text.push_str(&serde_json::to_string(e).unwrap_or_default());
                text.push('\n');
            } else {
                text.push_str(&format!(
                    "{}  {}  {}  {}  {}  {}\n",
                    time(e.received_at),
                    e.id,
                    e.source,
                    e.event_id,
                    or_dash(e.event_type.as_deref()),
                    e.status.as_str()
                ));
            }
            seen.insert(e.id.clone());
            order.push_back(e.id.clone());
        }
        // Remember enough to recognise what a look returns again.
        while order.len() > 4 * TAIL_PAGE {
            if let Some(old) = order.pop_front() {
                seen.remove(&old);
            }
        }
        first = false;
        print(&text)?;
    }
}
