//! The operator's commands (`stats`, `events`, `dlq`, `destinations`,
//! `sweep`, `backup`): clients of the admin API of a running server.
//!
//! Requests and answers are [`crate::api`]'s types, the ones the server
//! writes. Tables for people by default, the API's JSON with `--json`. Exit codes:
//! 0 done; 1 the server refused or failed (not found, conflict, 5xx); 2
//! usage; 3 the server cannot be reached; 4 the token is missing or wrong.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{self, EventQuery, EventStatus, Timestamp};
use crate::config::{self, OperatorView};
use crate::exit::{EXIT_FAILURE, EXIT_UNAUTHORIZED, EXIT_UNREACHABLE, EXIT_USAGE, Failure};

/// Where the admin API is and how to authenticate. Explicit flags and
/// variables win; what they leave out comes from the server's config.
#[derive(Debug, Args)]
pub struct Remote {
    /// The admin listener's URL (default: the config's server.admin_listen).
    #[arg(long, global = true, env = "HOOKINBOX_ADMIN_URL")]
    pub admin: Option<String>,
    /// The server's config, for the admin address and token (default:
    /// /etc/hookinbox/hookinbox.toml when it exists, else the embedded default).
    #[arg(long, global = true, env = "HOOKINBOX_CONFIG")]
    pub config: Option<PathBuf>,
    /// A file holding the admin token (default: HOOKINBOX_ADMIN_TOKEN, else
    /// the config's admin token, else the one the server generated in its data dir).
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

impl Remote {
    /// The server's config, read once, only when a flag or variable leaves
    /// something to it.
    fn view(&self) -> Result<OperatorView, Failure> {
        OperatorView::load(self.config.as_deref(), &config::process_env).map_err(|e| {
            fail(
                EXIT_USAGE,
                anyhow!(
                    "{e} (the operator commands read the server's config for its admin address and token; \
                     give --config, or --admin with HOOKINBOX_ADMIN_TOKEN)"
                ),
            )
        })
    }
}

#[derive(Debug, Args)]
pub struct Filter {
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
    fn query(self) -> EventQuery {
        EventQuery {
            source: self.source,
            destination: self.destination,
            status: self.status,
            event_type: self.event_type,
            event_id: self.event_id,
            from: self.from.or_else(|| self.since.map(ago)),
            to: self.to,
            ..EventQuery::default()
        }
    }
}

/// The time `since` before now: `--since`'s `from`.
fn ago(since: Duration) -> Timestamp {
    let now = crate::clock::unix_ms(std::time::SystemTime::now());
    Timestamp(now.saturating_sub(u64::try_from(since.as_millis()).unwrap_or(u64::MAX)))
}

#[derive(Debug, Args)]
pub struct Paging {
    /// Events per page (1–500).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Continue from a previous page's cursor.
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<u64>,
    /// Follow the cursor to the last page.
    #[arg(long)]
    pub all: bool,
}

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
        /// Text the payload contains (case matters).
        #[arg(long)]
        q: Option<String>,
        /// /json/pointer=value, like /data/object/customer=cus_123.
        #[arg(long = "match")]
        pointer_match: Option<String>,
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
        /// How often to look for new events.
        #[arg(long, default_value = "2s", value_parser = config::parse_duration)]
        every: Duration,
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
        /// Only count what would be replayed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Ignore dead-lettered events matching the filter, with a note.
    Ignore {
        #[command(flatten)]
        filter: Filter,
        /// Why: kept with each event (at most 2000 bytes).
        #[arg(long)]
        note: String,
        /// Only count what would be ignored.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum DestinationsCommand {
    /// Each destination: paused, circuit, in flight.
    List,
    /// Stop delivering to it; events accumulate.
    Pause {
        /// The destination's name: its source's name, or source.name.
        name: String,
    },
    /// Deliver again; what accumulated goes out oldest first.
    Resume {
        /// The destination's name: its source's name, or source.name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// Counts per source: stored now by status, and seen since the server
    /// started; again every `watch` when given.
    Stats {
        /// Print them again at this interval (e.g. 5s) until interrupted.
        #[arg(long, value_parser = config::parse_duration)]
        watch: Option<Duration>,
    },
    /// List, search, show, replay and ignore events.
    #[command(subcommand)]
    Events(EventsCommand),
    /// The dead-letter queue: list, replay, ignore.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Destinations: list, pause, resume.
    #[command(subcommand)]
    Destinations(DestinationsCommand),
    /// Sweep expired data now.
    Sweep,
    /// Save a consistent copy of the database to a file.
    Backup {
        #[arg(long)]
        out: PathBuf,
    },
}

struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

fn fail(code: u8, error: anyhow::Error) -> Failure {
    Failure { code, error }
}

fn token(remote: &Remote, view: &mut Option<OperatorView>) -> Result<String, Failure> {
    if let Some(path) = &remote.token_file {
        return std::fs::read_to_string(path)
            .map(|t| t.trim().to_owned())
            .with_context(|| format!("cannot read the admin token from {}", path.display()))
            .map_err(|e| fail(EXIT_UNAUTHORIZED, e));
    }
    if let Ok(t) = std::env::var("HOOKINBOX_ADMIN_TOKEN")
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_owned());
    }
    let view = match view {
        Some(view) => view,
        None => view.insert(remote.view()?),
    };
    view.token()
        .map_err(|e| fail(EXIT_UNAUTHORIZED, anyhow!(e)))
}

/// A request without a body.
const NO_BODY: Option<&()> = None;

impl Client {
    fn new(remote: &Remote) -> Result<Client, Failure> {
        let http =
            crate::send::http_client(Duration::from_secs(600)).map_err(|e| fail(EXIT_USAGE, e))?;
        let mut view = None;
        let base = match &remote.admin {
            Some(url) => url.clone(),
            None => view.insert(remote.view()?).admin_url(),
        };
        Ok(Client {
            base: base.trim_end_matches('/').to_owned(),
            token: token(remote, &mut view)?,
            http,
        })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        query: Option<&impl Serialize>,
        body: Option<&impl Serialize>,
    ) -> Result<reqwest::Response, Failure> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(query) = query {
            req = req.query(query);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let res = req.send().await.map_err(|e| {
            fail(
                EXIT_UNREACHABLE,
                anyhow!(
                    "cannot reach the hookinbox admin API at {}: is the server running? ({e})",
                    self.base
                ),
            )
        })?;
        let status = res.status();
        if status.is_success() {
            return Ok(res);
        }
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(fail(
                EXIT_UNAUTHORIZED,
                anyhow!(
                    "the admin API refused the token (401): check HOOKINBOX_ADMIN_TOKEN or --token-file"
                ),
            ));
        }
        let text = res.text().await.unwrap_or_default();
        let reason = serde_json::from_str::<api::ApiError>(&text)
            .map(|e| e.reason)
            .unwrap_or(text);
        Err(fail(
            EXIT_FAILURE,
            anyhow!("admin API {path}: {status}: {reason}"),
        ))
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: Option<&EventQuery>,
    ) -> Result<T, Failure> {
        let res = self
            .call(reqwest::Method::GET, path, query, NO_BODY)
            .await?;
        answer(res).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Option<&impl Serialize>,
    ) -> Result<T, Failure> {
        let res = self
            .call(reqwest::Method::POST, path, NO_BODY, body)
            .await?;
        answer(res).await
    }

    /// A replay or an ignore of one event, at one destination or at each.
    async fn change<T: DeserializeOwned>(
        &self,
        path: &str,
        destination: Option<String>,
        body: Option<&impl Serialize>,
    ) -> Result<T, Failure> {
        let query = api::DeliveryQuery { destination };
        let res = self
            .call(reqwest::Method::POST, path, Some(&query), body)
            .await?;
        answer(res).await
    }

    async fn delete<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, Failure> {
        let res = self
            .call(reqwest::Method::DELETE, path, NO_BODY, Some(body))
            .await?;
        answer(res).await
    }

    /// Pages of `query` from its cursor: one, or with `all` every one.
    async fn pages(
        &self,
        mut query: EventQuery,
        all: bool,
    ) -> Result<Vec<api::EventPage>, Failure> {
        let mut pages = Vec::new();
        loop {
            let page: api::EventPage = self.get("/api/events", Some(&query)).await?;
            let next = page.next_cursor;
            pages.push(page);
            match next {
                Some(cursor) if all => query.cursor = Some(cursor),
                _ => return Ok(pages),
            }
        }
    }
}

async fn answer<T: DeserializeOwned>(res: reqwest::Response) -> Result<T, Failure> {
    let bytes = res
        .bytes()
        .await
        .map_err(|e| fail(EXIT_FAILURE, anyhow!("the answer broke off: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| fail(EXIT_FAILURE, anyhow!("unreadable answer: {e}")))
}

/// What a command prints: the API's JSON with `--json`, else `text`.
struct Output {
    json: serde_json::Value,
    text: String,
}

impl Output {
    fn new(value: &impl Serialize, text: String) -> Output {
        Output {
            json: serde_json::to_value(value).unwrap_or_default(),
            text,
        }
    }
}

fn paged(filter: EventQuery, paging: &Paging) -> Result<EventQuery, Failure> {
    if !(1..=500).contains(&paging.limit) {
        return Err(fail(
            EXIT_USAGE,
            anyhow!("--limit must be between 1 and 500"),
        ));
    }
    Ok(EventQuery {
        limit: Some(paging.limit),
        cursor: paging.cursor,
        ..filter
    })
}

/// A bulk change of dead-lettered events: the filter's status is `dead`;
/// asking for another is a usage error, never silently replaced.
fn dead_letters(filter: Filter) -> Result<EventQuery, Failure> {
    match filter.status {
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

pub async fn run(remote: Remote, command: OpsCommand) -> Result<(), Failure> {
    let client = Client::new(&remote)?;
    let out = match command {
        OpsCommand::Stats { watch: Some(every) } => {
            return watch_stats(&client, every, remote.json).await;
        }
        OpsCommand::Events(EventsCommand::Tail {
            filter,
            every,
            last,
        }) => {
            return tail(&client, filter.query(), every, last, remote.json).await;
        }
        OpsCommand::Stats { watch: None } => {
            let stats: api::Stats = client.get("/api/stats", None).await?;
            Output::new(&stats, stats_table(&stats))
        }
        OpsCommand::Events(EventsCommand::List { filter, paging }) => {
            let query = paged(filter.query(), &paging)?;
            list(&client, query, paging.all).await?
        }
        OpsCommand::Events(EventsCommand::Search {
            filter,
            q,
            pointer_match,
            paging,
        }) => {
            if q.is_none() && pointer_match.is_none() {
                return Err(fail(
                    EXIT_USAGE,
                    anyhow!("give --q TEXT or --match /json/pointer=value (or use `events list`)"),
                ));
            }
            let query = EventQuery {
                q,
                pointer_match,
                ..paged(filter.query(), &paging)?
            };
            list(&client, query, paging.all).await?
        }
        OpsCommand::Events(EventsCommand::Show { id }) => {
            let event: api::EventDetail = client.get(&format!("/api/events/{id}"), None).await?;
            Output::new(&event, event_detail(&event))
        }
        OpsCommand::Events(EventsCommand::Replay { id, destination }) => {
            let event: api::EventSummary = client
                .change(&format!("/api/events/{id}/replay"), destination, NO_BODY)
                .await?;
            let text = format!("{id}: replayed, now {}\n", event.status.as_str());
            Output::new(&event, text)
        }
        OpsCommand::Events(EventsCommand::Ignore {
            id,
            destination,
            note,
        }) => {
            let event: api::EventSummary = client
                .change(
                    &format!("/api/events/{id}/ignore"),
                    destination,
                    Some(&api::NoteRequest { note }),
                )
                .await?;
            Output::new(&event, format!("{id}: ignored\n"))
        }
        OpsCommand::Events(EventsCommand::Delete { id, note }) => {
            let event: api::EventSummary = client
                .delete(&format!("/api/events/{id}"), &api::NoteRequest { note })
                .await?;
            let text = format!(
                "{id}: payload and headers deleted; status {}\n",
                event.status.as_str()
            );
            Output::new(&event, text)
        }
        OpsCommand::Dlq(DlqCommand::List {
            source,
            destination,
            paging,
        }) => {
            let filter = EventQuery {
                source,
                destination,
                status: Some(EventStatus::Dead),
                ..EventQuery::default()
            };
            list(&client, paged(filter, &paging)?, paging.all).await?
        }
        OpsCommand::Dlq(DlqCommand::Replay { filter, dry_run }) => {
            let request = api::BulkRequest {
                filter: dead_letters(filter)?,
                dry_run,
                note: None,
            };
            let result: api::BulkResult = client.post("/api/replay", Some(&request)).await?;
            Output::new(&result, bulk_text(&result, "replayed"))
        }
        OpsCommand::Dlq(DlqCommand::Ignore {
            filter,
            note,
            dry_run,
        }) => {
            let request = api::BulkRequest {
                filter: dead_letters(filter)?,
                dry_run,
                note: Some(note),
            };
            let result: api::BulkResult = client.post("/api/ignore", Some(&request)).await?;
            Output::new(&result, bulk_text(&result, "ignored"))
        }
        OpsCommand::Destinations(DestinationsCommand::List) => {
            let list: api::Destinations = client.get("/api/destinations", None).await?;
            Output::new(&list, destinations_table(&list))
        }
        OpsCommand::Destinations(DestinationsCommand::Pause { name }) => {
            let done: api::PauseResult = client
                .post(&format!("/api/destinations/{name}/pause"), NO_BODY)
                .await?;
            Output::new(&done, format!("{name}: paused\n"))
        }
        OpsCommand::Destinations(DestinationsCommand::Resume { name }) => {
            let done: api::PauseResult = client
                .post(&format!("/api/destinations/{name}/resume"), NO_BODY)
                .await?;
            Output::new(&done, format!("{name}: resumed\n"))
        }
        OpsCommand::Sweep => {
            let s: api::SweepResult = client.post("/api/sweep", NO_BODY).await?;
            let text = format!(
                "swept {} delivered, {} dead or ignored, {} dedupe keys in {} ms\n",
                s.delivered, s.dead_or_ignored, s.dedupe_keys, s.millis
            );
            Output::new(&s, text)
        }
        OpsCommand::Backup { out } => {
            let bytes = backup(&client, &out).await?;
            let written = serde_json::json!({"out": out.display().to_string(), "bytes": bytes});
            let text = format!("backup written to {} ({bytes} bytes)\n", out.display());
            Output::new(&written, text)
        }
    };
    if remote.json {
        let mut json = serde_json::to_string_pretty(&out.json).unwrap_or_default();
        json.push('\n');
        print(&json)
    } else {
        print(&out.text)
    }
}

fn print(text: &str) -> Result<(), Failure> {
    Ok(crate::exit::write_stdout(text.as_bytes())?)
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
async fn tail(
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

/// A list or search: one page, or every page with `all` (`--json` prints
/// the pages as a list then).
async fn list(client: &Client, query: EventQuery, all: bool) -> Result<Output, Failure> {
    let pages = client.pages(query, all).await?;
    let text = events_table(&pages);
    Ok(if all {
        Output::new(&pages, text)
    } else {
        Output::new(&pages[0], text)
    })
}

/// Streams the backup into `out` through a temp file, renamed when whole.
async fn backup(client: &Client, out: &std::path::Path) -> Result<u64, Failure> {
    let mut res = client
        .call(reqwest::Method::GET, "/api/backup", NO_BODY, NO_BODY)
        .await?;
    let partial = out.with_extension("partial");
    let io = |e: std::io::Error| fail(EXIT_FAILURE, anyhow!("{}: {e}", out.display()));
    let mut file = create_private(&partial).map_err(io)?;
    let mut bytes = 0u64;
    while let Some(chunk) = res
        .chunk()
        .await
        .map_err(|e| fail(EXIT_FAILURE, anyhow!("the backup download broke off: {e}")))?
    {
        file.write_all(&chunk).map_err(io)?;
        bytes += chunk.len() as u64;
    }
    file.sync_all().map_err(io)?;
    std::fs::rename(&partial, out).map_err(io)?;
    Ok(bytes)
}

/// Creates (or truncates) `path` readable by its owner only: a backup holds
/// every stored payload, which the usual umask 022 would make world-readable.
fn create_private(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // The mode applies only to a file this call creates; a partial file left
    // by an earlier broken download keeps its own. Tighten it before a byte
    // is written.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

fn or_dash<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn time(at: Timestamp) -> String {
    serde_json::to_value(at)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Left-aligned columns, two spaces apart.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  "));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
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
                a.n.to_string(),
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

fn destinations_table(list: &api::Destinations) -> String {
    if list.destinations.is_empty() {
        return "no destinations: every source holds its events\n".into();
    }
    let rows = list
        .destinations
        .iter()
        .map(|d| {
            vec![
                d.name.clone(),
                d.url.clone(),
                d.paused.to_string(),
                d.circuit.as_str().to_owned(),
                format!("{}/{}", d.in_flight, d.max_concurrency),
                or_dash(d.last_failure.as_deref()),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "URL",
            "PAUSED",
            "CIRCUIT",
            "IN FLIGHT",
            "LAST FAILURE",
        ],
        rows,
    )
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

fn bulk_text(result: &api::BulkResult, action: &str) -> String {
    if result.dry_run {
        return format!(
            "dry run: {} match\n",
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
