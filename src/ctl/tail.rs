//! `hookinbox events tail`: the latest events, then each new one as the
//! server stores it, followed on the event stream until interrupted. It
//! changes nothing.

use super::client::Client;
use super::follow::{Follow, Followed};
use super::output::{or_dash, print, time};
use std::collections::HashSet;

use super::query::Filter;
use crate::api::{self, EventQuery};
use crate::exit::Failure;

/// `events tail`: the `last` newest events matching `query`, oldest first,
/// then every new one as it is stored, until interrupted. The stream opens
/// first (at the newest event stored then) and the list is read after, so
/// nothing stored in between is lost and nothing is printed twice, at the
/// cost of no scan of older rows; a break in the connection is resumed
/// from the last event seen.
pub(super) async fn run(
    client: &Client,
    filter: Filter,
    last: usize,
    json: bool,
) -> Result<(), Failure> {
    let mut follow = Follow::new(client, filter.of.clone().stream());
    let query = filter.query();
    // The first thing a stream sends is where it starts.
    follow.next().await?;
    let page: api::EventPage = client
        .get(
            "/api/events",
            Some(&EventQuery {
                limit: Some(last.clamp(1, 500)),
                cursor: None,
                ..query.clone()
            }),
        )
        .await?;
    let mut text = String::new();
    if !json {
        text.push_str("RECEIVED  ID  SOURCE  EVENT ID  TYPE  STATUS\n");
    }
    for e in page.events.iter().take(last).rev() {
        line(&mut text, e, json);
    }
    print(&text)?;
    // What the list printed may come on the stream too: events stored
    // between its opening and the list's read.
    let printed: HashSet<String> = page.events.into_iter().map(|e| e.id).collect();
    loop {
        let Followed::Event(e) = follow.next().await? else {
            continue;
        };
        // What the stream cannot filter by, filtered here.
        let e = &e.event;
        let wanted = !printed.contains(&e.id)
            && query.event_id.as_ref().is_none_or(|id| *id == e.event_id)
            && query.from.is_none_or(|from| e.received_at >= from)
            && query.to.is_none_or(|to| e.received_at < to);
        if wanted {
            let mut text = String::new();
            line(&mut text, e, json);
            print(&text)?;
        }
    }
}

fn line(text: &mut String, e: &api::EventSummary, json: bool) {
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
}
