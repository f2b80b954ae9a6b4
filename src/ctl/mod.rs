//! The operator's commands (`stats`, `events`, `dlq`, `destinations`,
//! `keys`, `sweep`, `whoami`, `audit`, `backup`, `replication`, `promote`,
//! `listen`): clients of the admin API of a running server.
//!
//! Requests and answers are [`crate::api`]'s types, the ones the server
//! writes. Tables for people by default, the API's JSON with `--json`. Exit codes:
//! 0 done; 1 the server refused or failed (not found, conflict, 5xx); 2
//! usage; 3 the server cannot be reached; 4 the token is missing or wrong.
//!
//! One file per command or command group (`stats`, `events` with `tail`,
//! `dlq`, `destinations`, `keys`, `sweep`, `whoami`, `audit`, `backup`,
//! `replication`, `listen`), each a `run` that makes its
//! requests and prints; `client` is the connection and its exit codes,
//! `follow` the event stream read across reconnections,
//! `output` the JSON-or-table printing, `query` the shared event filters.
//! This file only declares them and dispatches.

mod audit;
mod backup;
mod client;
mod destinations;
mod dlq;
mod events;
mod follow;
mod keys;
mod listen;
mod output;
mod query;
mod reconcile;
mod reload;
mod replication;
mod secrets;
mod stats;
mod sweep;
mod tail;
mod whoami;

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

pub use audit::AuditArgs;
pub use client::Remote;
pub use destinations::DestinationsCommand;
pub use dlq::DlqCommand;
pub use events::EventsCommand;
pub use keys::KeysCommand;
pub use listen::ListenArgs;
pub use query::{Filter, Paging, Selection};

use crate::config;
use crate::exit::Failure;

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
    /// Idempotency keys: show, list, delete.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Sweep expired data now.
    Sweep,
    /// Read the config again and take what may change live.
    Reload,
    /// Each source secret's name, place, age, expiry and last match.
    Secrets,
    /// One reconcile pass of a source now, or each source's last pass.
    Reconcile {
        source: Option<String>,
        #[arg(long)]
        since: Option<String>,
        #[arg(long)]
        dry_run: bool,
    },
    /// Who the token belongs to and its role.
    Whoami,
    /// The audit trail: who changed what, when, and why.
    Audit(AuditArgs),
    /// Save a consistent copy of the database to a file.
    Backup {
        #[arg(long)]
        out: PathBuf,
    },
    /// A replicating node's role, the lease's holder, its log's progress.
    Replication,
    /// Make this standby the primary now.
    Promote,
    /// Forward each new event to a local app.
    Listen(Box<ListenArgs>),
}

pub async fn run(remote: Remote, command: OpsCommand) -> Result<(), Failure> {
    let client = client::Client::new(&remote)?;
    let json = remote.json;
    match command {
        OpsCommand::Stats { watch } => stats::run(&client, watch, json).await,
        OpsCommand::Events(command) => events::run(&client, command, json).await,
        OpsCommand::Dlq(command) => dlq::run(&client, command, json).await,
        OpsCommand::Destinations(command) => destinations::run(&client, command, json).await,
        OpsCommand::Keys(command) => keys::run(&client, command, json).await,
        OpsCommand::Sweep => sweep::run(&client, json).await,
        OpsCommand::Reload => reload::run(&client, json).await,
        OpsCommand::Secrets => secrets::run(&client, json).await,
        OpsCommand::Reconcile {
            source,
            since,
            dry_run,
        } => reconcile::run(&client, source, since, dry_run, json).await,
        OpsCommand::Whoami => whoami::run(&client, json).await,
        OpsCommand::Audit(args) => audit::run(&client, args, json).await,
        OpsCommand::Backup { out } => backup::run(&client, &out, json).await,
        OpsCommand::Replication => replication::status(&client, json).await,
        OpsCommand::Promote => replication::promote(&client, json).await,
        OpsCommand::Listen(args) => {
            listen::run(&client, remote.config.as_deref(), *args, json).await
        }
    }
}
