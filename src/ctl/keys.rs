//! `hookinbox keys`: an operator's view of the apps' idempotency keys —
//! show one, list a namespace's, delete one by hand with a note. Refuses
//! to claim or complete: that is each app's, under its own token.

use clap::Subcommand;

use super::client::Client;
use super::output::{Output, listing, or_dash, table, time};
use crate::api::{self, KeyListState, KeyView};
use crate::exit::Failure;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// One key: its state, token, lease, result and times.
    Show {
        /// The key, as the app claims it (any UTF-8; encoded for the URL here).
        key: String,
        /// The app's namespace (its [[keys.client]] namespace, or name).
        #[arg(long)]
        namespace: String,
    },
    /// A namespace's keys, the most recently changed first.
    List {
        /// The app's namespace (its [[keys.client]] namespace, or name).
        #[arg(long)]
        namespace: String,
        /// claimed or done.
        #[arg(long)]
        state: Option<KeyListState>,
        /// Continue from a previous page's cursor (as printed). Its old
        /// name, --after, is still taken.
        #[arg(long, alias = "after")]
        cursor: Option<String>,
        /// At most this many keys a page (1 to 500).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Every page, not only the first.
        #[arg(long)]
        all: bool,
    },
    /// Delete one key by hand (a stuck claim, a result to forget): it is
    /// free again. The note is logged with the key and namespace.
    Delete {
        /// The key, as the app claims it (any UTF-8; encoded for the URL here).
        key: String,
        /// The app's namespace (its [[keys.client]] namespace, or name).
        #[arg(long)]
        namespace: String,
        /// Why, for the log: required.
        #[arg(long)]
        note: String,
    },
}

pub(super) async fn run(client: &Client, command: KeysCommand, json: bool) -> Result<(), Failure> {
    let out = match command {
        KeysCommand::Show { key, namespace } => {
            let scope = api::KeyScope {
                namespace: Some(namespace),
            };
            let view: KeyView = client
                .with_query(reqwest::Method::GET, &key_path(&key), &scope)
                .await?;
            Output::new(&view, key_text(&view, now_ms()))
        }
        KeysCommand::List {
            namespace,
            state,
            cursor,
            limit,
            all,
        } => {
            let mut query = api::KeyListQuery {
                namespace: Some(namespace),
                state,
                after: cursor,
                limit: Some(limit),
            };
            let mut pages: Vec<api::KeyList> = Vec::new();
            loop {
                let page: api::KeyList = client
                    .with_query(reqwest::Method::GET, "/api/keys", &query)
                    .await?;
                query.after = page.next_after.clone();
                pages.push(page);
                if !all || query.after.is_none() {
                    break;
                }
            }
            let text = list_table(&pages, now_ms());
            listing(pages, all, |p| p.keys, text)
        }
        KeysCommand::Delete {
            key,
            namespace,
            note,
        } => {
            let query = api::KeyDeleteQuery {
                namespace: Some(namespace.clone()),
                note: Some(note),
            };
            let view: KeyView = client
                .with_query(reqwest::Method::DELETE, &key_path(&key), &query)
                .await?;
            Output::new(&view, format!("{key} ({namespace}): deleted, free again\n"))
        }
    };
    out.print(json)
}

/// `/api/keys/<key>` with the key percent-encoded: a key may hold `/`, `?`,
/// `%` or any UTF-8.
fn key_path(key: &str) -> String {
    let mut path = String::from("/api/keys/");
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:".contains(&b) {
            path.push(b as char);
        } else {
            path.push_str(&format!("%{b:02X}"));
        }
    }
    path
}

/// This machine's clock, in the API's milliseconds: what a lease is
/// judged by here, as the dashboard judges it by the browser's.
fn now_ms() -> u64 {
    crate::clock::Clock::system().now_ms()
}

/// A key's state for people. A claimed key is busy while its lease runs
/// and claimable once it ran out (the next claim takes it over), as the
/// dashboard's Keys page says; `--json` keeps the API's `claimed` and its
/// `lease_until`.
fn state_of(view: &KeyView, now_ms: u64) -> &'static str {
    match view.state {
        api::KeyStateName::Claimed => match view.lease_until {
            Some(until) if until.0 <= now_ms => "claimable",
            _ => "busy",
        },
        api::KeyStateName::Done => "done",
        api::KeyStateName::Busy => "busy",
        api::KeyStateName::Stale => "stale",
        api::KeyStateName::Free => "free",
    }
}

fn key_text(v: &KeyView, now_ms: u64) -> String {
    let mut out = String::new();
    let mut line = |name: &str, value: String| out.push_str(&format!("{name:<14}{value}\n"));
    line("key", or_dash(v.key.as_deref()));
    line("state", state_of(v, now_ms).to_owned());
    line("token", or_dash(v.token));
    line("lease until", or_dash(v.lease_until.map(time)));
    line("completed at", or_dash(v.completed_at.map(time)));
    line("result", or_dash(v.result.as_ref().map(|r| r.get())));
    line("claims", or_dash(v.claims));
    line("created at", or_dash(v.created_at.map(time)));
    line("expires at", or_dash(v.expires_at.map(time)));
    out
}

fn list_table(pages: &[api::KeyList], now_ms: u64) -> String {
    let keys: Vec<&KeyView> = pages.iter().flat_map(|p| &p.keys).collect();
    let rows = keys
        .iter()
        .map(|v| {
            vec![
                or_dash(v.key.as_deref()),
                state_of(v, now_ms).to_owned(),
                or_dash(v.token),
                or_dash(v.lease_until.map(time)),
                or_dash(v.completed_at.map(time)),
                or_dash(v.claims),
                or_dash(v.expires_at.map(time)),
            ]
        })
        .collect();
    let mut out = if keys.is_empty() {
        "no keys\n".to_owned()
    } else {
        table(
            &[
                "KEY",
                "STATE",
                "TOKEN",
                "LEASE UNTIL",
                "COMPLETED",
                "CLAIMS",
                "EXPIRES",
            ],
            rows,
        )
    };
    if let Some(next) = pages.last().and_then(|p| p.next_after.as_ref()) {
        out.push_str(&format!("more: --cursor {next:?} (or --all)\n"));
    }
    out
}
