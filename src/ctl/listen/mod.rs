//! `hookinbox listen`: the developer's loop. Each new event of a running
//! inbox, forwarded to an app on localhost as a delivery would be (or with
//! the provider's own headers), one line printed per event; the position
//! kept on this machine, so a restart, a sleep or a lost connection
//! resumes with what arrived meanwhile, once each, in order. It only
//! reads from the server: an event's delivery state never changes, and a
//! development listener is not a destination.
//!
//! `state` keeps the position and the development key, `forward` makes
//! the request and its line; this file reads the flags and runs the loop.

mod forward;
mod state;

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;

use super::client::{Client, fail};
use super::follow::{Follow, Followed};
use super::output::print;
use super::query::Selection;
use super::query::ago;
use crate::api::{self, StreamQuery};
use crate::config::{self, Config};
use crate::exit::{EXIT_FAILURE, EXIT_USAGE, Failure};
use forward::{Forwarded, Forwarder, Incoming, Signing};

#[derive(Debug, Args)]
pub struct ListenArgs {
    /// The local app's URL that receives each event, like
    /// http://localhost:3000/webhooks; without a scheme
    /// (localhost:3000/webhooks), http:// is meant.
    #[arg(long, value_name = "URL", value_parser = forward::app_url)]
    pub forward_to: reqwest::Url,
    /// Which events; with --destination, each is signed with that
    /// destination's key (read from the server's config, as the server
    /// reads it) instead of the development key.
    #[command(flatten)]
    pub of: Selection,
    /// Send the provider's own headers (its signature) instead of
    /// hookinbox's signed ones, so the app's provider SDK verifies the event.
    #[arg(long)]
    pub original_headers: bool,
    /// Start with the next event stored, not where the last run stopped.
    #[arg(long, conflicts_with_all = ["since", "replay"])]
    pub from_now: bool,
    /// Send again what was received within this long before now (like 1h
    /// or 30m), then each new event.
    #[arg(long, value_parser = config::parse_duration, conflicts_with = "replay")]
    pub since: Option<Duration>,
    /// Send this one stored event (hbx_…) to the app, then exit.
    #[arg(long, value_name = "ID")]
    pub replay: Option<String>,
    /// How long the app may take to answer.
    #[arg(long, default_value = "30s", value_parser = config::parse_duration)]
    pub timeout: Duration,
}

pub(super) async fn run(
    client: &Client,
    server_config: Option<&Path>,
    args: ListenArgs,
    json: bool,
) -> Result<(), Failure> {
    let usage = |e: anyhow::Error| fail(EXIT_USAGE, e);
    let dir = state::dir().map_err(usage)?;
    let signing = if args.original_headers {
        Signing::Original
    } else if let Some(name) = &args.of.destination {
        let config = Config::load_or_packaged(server_config, &config::process_env)
            .map_err(|e| usage(anyhow!("{e} (--destination signs with that destination's key, read from the server's config: give --config)")))?;
        Signing::Contract(
            config
                .destination_key(name)
                .map_err(|e| usage(anyhow!(e)))?,
        )
    } else {
        let (key, text, path) = state::development_key(&dir).map_err(usage)?;
        if args.replay.is_none() {
            eprintln!(
                "Signed with the development key {text}\n  (kept in {}): verify with any Standard Webhooks library.",
                path.display()
            );
        }
        Signing::Contract(crate::standard_webhooks::SigningKeys::one(key))
    };
    let forwarder =
        Forwarder::new(args.forward_to.clone(), signing, args.timeout).map_err(usage)?;
    let colour = !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if let Some(id) = &args.replay {
        let event: api::EventDetail = client.get(&format!("/api/events/{id}"), None).await?;
        let forwarded = forwarder.forward(&Incoming::detail(event)?).await;
        show(&forwarded, json, colour)?;
        return match forwarded.is_success() {
            true => Ok(()),
            false => Err(fail(EXIT_FAILURE, anyhow!("the app did not answer 2xx"))),
        };
    }
    let mut query = StreamQuery {
        payload: Some(true),
        ..args.of.stream()
    };
    let cursor = state::Cursor::new(&dir, client.base(), &query);
    let saved = match (args.from_now, args.since) {
        (false, None) => cursor.load().map_err(usage)?,
        _ => None,
    };
    let start = match (&saved, args.since) {
        (Some(after), _) => format!(
            "resuming after {after}, where the last run stopped (--from-now skips what arrived meanwhile)"
        ),
        (None, Some(since)) => format!(
            "from what arrived in the last {}",
            humantime::format_duration(since)
        ),
        (None, None) => "from the next event stored".to_owned(),
    };
    query.after = saved.clone();
    query.since = args.since.map(ago);
    eprintln!(
        "Forwarding events from {} to {}, {start}.\n  Position kept in {}.",
        client.base(),
        args.forward_to,
        cursor.path().display()
    );
    let mut follow = Follow::new(client, query);
    let mut started = false;
    loop {
        let next = tokio::select! {
            next = follow.next() => next,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let next = match next {
            Err(e) if !started && saved.is_some() => {
                return Err(fail(
                    e.code,
                    anyhow!(
                        "{:#}\nThe position saved in {} is not usable on this server (was its data dir replaced?): start with --from-now or --since",
                        e.error,
                        cursor.path().display()
                    ),
                ));
            }
            next => next?,
        };
        match next {
            Followed::Ready(after) => {
                if !std::mem::replace(&mut started, true) {
                    eprintln!("Ready: each event is forwarded as it is stored. Ctrl-C to stop.");
                }
                cursor.save(&after)?;
            }
            Followed::Event(event) => {
                let forwarded = forwarder.forward(&Incoming::streamed(*event)?).await;
                // Saved before it is shown: an event printed is never sent
                // again. Only one cut off between the app's answer and this
                // save is (the app sees its `webhook-id` twice).
                cursor.save(&forwarded.id)?;
                show(&forwarded, json, colour)?;
            }
        }
    }
}

fn show(forwarded: &Forwarded, json: bool, colour: bool) -> Result<(), Failure> {
    if json {
        print(&(serde_json::to_string(forwarded).unwrap_or_default() + "\n"))
    } else {
        print(&forwarded.line(colour))
    }
}
