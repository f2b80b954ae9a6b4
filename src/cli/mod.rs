//! The command line: what each subcommand takes, and running it.
//!
//! `main` parses with [`Cli`] and calls [`run`]; this module maps every
//! failure to a [`Failure`]: a message and an exit code scripts can trust
//! (the codes are listed in [`crate::exit`]). The first start's banner
//! (generated secrets, a `send` command, the dashboard) is `banner`'s.

mod banner;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::app::App;
use crate::clock::Clock;
use crate::config::{self, Config, Loaded};
use crate::ctl::{
    AuditArgs, DestinationsCommand, DlqCommand, EventsCommand, KeysCommand, ListenArgs, OpsCommand,
    Remote,
};
use crate::exit::{EXIT_FAILURE, EXIT_USAGE, Failure};
use crate::send::{self, SendArgs};
use banner::FirstStart;

#[derive(Debug, Parser)]
#[command(
    name = "hookinbox",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("HOOKINBOX_COMMIT"), ")"),
    about = "A single-binary webhook inbox: verify, dedupe, durably store, deliver."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Receive webhooks and deliver them to their destinations (with no --config: the embedded default config).
    Serve(ConfigArg),
    /// Validate or print configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Sign and send a webhook exactly as a provider would, printing each answer.
    Send(Box<SendArgs>),
    /// Forward each new event of a running inbox to an app on this machine.
    ///
    /// For development: each event is posted to --forward-to as a delivery
    /// would be (signed with a development key it prints; with
    /// --destination NAME, that destination's key, read from the server's
    /// config; with --original-headers, the provider's own headers), and
    /// one line per event shows the app's answer. The position is kept on this machine per
    /// server and filter: after a restart, a sleep or a lost connection it
    /// forwards what arrived meanwhile, once each, in order. It changes
    /// nothing on the server.
    Listen {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: Box<ListenArgs>,
    },
    /// Counts per source and event type, latencies, DLQ size (from a running server).
    Stats {
        #[command(flatten)]
        remote: Remote,
        /// Print them again at this interval (e.g. 5s) until interrupted.
        #[arg(long, value_parser = config::parse_duration)]
        watch: Option<std::time::Duration>,
    },
    /// Search, show, replay and ignore events.
    Events {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// The dead-letter queue: list, replay, ignore.
    Dlq {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: DlqCommand,
    },
    /// Destinations: list, pause, resume.
    Destinations {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: DestinationsCommand,
    },
    /// Idempotency keys: show, list, delete.
    Keys {
        #[command(flatten)]
        remote: Remote,
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Sweep expired data now.
    Sweep(Remote),
    /// Make the server read its config and secrets again, as `systemctl reload` does
    ///
    /// Sources, destinations, tokens and keys' clients change in place;
    /// what only a restart takes is listed and left as it was. A config
    /// that fails `config check` is refused whole (exit 1, the reason
    /// printed) and the running one stays.
    Reload(Remote),
    /// List each source secret: its name, where it is kept, age, expiry and last match
    ///
    /// Never a value. After a rotation, the old secret's last match says
    /// when the provider last signed with it: once that is past, remove it.
    Secrets(Remote),
    /// Ask a source's provider API for the events that never arrived, now.
    ///
    /// Runs one pass of the source's [source.reconcile] and prints what it
    /// found: held, asked to resend, fetched. Without a source, prints each
    /// source's last pass.
    Reconcile {
        #[command(flatten)]
        remote: Remote,
        /// The source (one with [source.reconcile]).
        source: Option<String>,
        /// Look back this far from now (e.g. 2h) instead of from where the
        /// passes got to; such a pass moves no cursor.
        #[arg(long)]
        since: Option<String>,
        /// List and compare only: ask for nothing, store nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Whose token the commands use (the admin token or an [[admin.user]]), its role and expiry.
    Whoami(Remote),
    /// The audit trail, newest first: who changed what, when and why (refusals too)
    Audit {
        #[command(flatten)]
        remote: Remote,
        #[command(flatten)]
        args: AuditArgs,
    },
    /// Save a consistent copy of the running server's database to a file.
    Backup {
        #[command(flatten)]
        remote: Remote,
        /// Where to write it.
        #[arg(long)]
        out: PathBuf,
    },
    /// A replicating node's role, who holds the lease (the primary), and
    /// how far its log is.
    Replication(Remote),
    /// Make a standby the primary now.
    ///
    /// Without waiting for the primary's lease to lapse: the standby takes
    /// the lease (the old primary, if alive, steps down at its next
    /// renewal), applies the stream to its end and takes webhooks. Run it
    /// against the standby's admin listener.
    Promote(Remote),
    /// Print a shell's completions (the Debian package installs them).
    ///
    /// E.g. `hookinbox completions bash > /etc/bash_completion.d/hookinbox`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page, or write one page per command into a directory.
    Man {
        /// Write hookinbox.1 and a hookinbox-<command>.1 per command here.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct ConfigArg {
    /// The config file (TOML). Without it, the embedded default is used.
    #[arg(long, short = 'c', env = "HOOKINBOX_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CheckArg {
    /// The config file (TOML). Without it: /etc/hookinbox/hookinbox.toml when
    /// it exists (a packaged install), else the embedded default.
    #[arg(long, short = 'c', env = "HOOKINBOX_CONFIG")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config and print the effective config, secrets redacted.
    Check(CheckArg),
    /// Print the embedded default config, commented, to start a file from.
    Default,
}

fn usage(error: impl Into<anyhow::Error>) -> Failure {
    Failure {
        code: EXIT_USAGE,
        error: error.into(),
    }
}

fn load_config(arg: &ConfigArg) -> Result<Config<Loaded>, Failure> {
    let config = match &arg.config {
        Some(path) => Config::load(path, &config::process_env),
        None => Config::embedded(&config::process_env),
    };
    config.map_err(usage)
}

pub fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Serve(arg) => {
            let config = load_config(&arg)?;
            crate::logs::init(&config.log)
                .map_err(|e| usage(anyhow::anyhow!("{}: {e}", config.origin)))?;
            runtime()?.block_on(serve(config, arg.config.as_deref()))
        }
        Command::Config(ConfigCommand::Check(arg)) => {
            let config = Config::load_or_packaged(arg.config.as_deref(), &config::process_env)
                .map_err(usage)?;
            for warning in &config.warnings {
                eprintln!("warning: {warning}");
            }
            crate::exit::write_stdout(config.to_redacted_toml().as_bytes())?;
            eprintln!("{}: ok", config.origin);
            Ok(())
        }
        Command::Config(ConfigCommand::Default) => {
            Ok(crate::exit::write_stdout(config::DEFAULT_TOML.as_bytes())?)
        }
        Command::Stats { remote, watch } => ops(remote, OpsCommand::Stats { watch }),
        Command::Events { remote, command } => ops(remote, OpsCommand::Events(command)),
        Command::Dlq { remote, command } => ops(remote, OpsCommand::Dlq(command)),
        Command::Destinations { remote, command } => ops(remote, OpsCommand::Destinations(command)),
        Command::Keys { remote, command } => ops(remote, OpsCommand::Keys(command)),
        Command::Sweep(remote) => ops(remote, OpsCommand::Sweep),
        Command::Reload(remote) => ops(remote, OpsCommand::Reload),
        Command::Secrets(remote) => ops(remote, OpsCommand::Secrets),
        Command::Reconcile {
            remote,
            source,
            since,
            dry_run,
        } => ops(
            remote,
            OpsCommand::Reconcile {
                source,
                since,
                dry_run,
            },
        ),
        Command::Whoami(remote) => ops(remote, OpsCommand::Whoami),
        Command::Audit { remote, args } => ops(remote, OpsCommand::Audit(args)),
        Command::Backup { remote, out } => ops(remote, OpsCommand::Backup { out }),
        Command::Replication(remote) => ops(remote, OpsCommand::Replication),
        Command::Promote(remote) => ops(remote, OpsCommand::Promote),
        Command::Listen { remote, args } => ops(remote, OpsCommand::Listen(args)),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            // Into memory first: `generate` panics on a closed stdout.
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "hookinbox", &mut out);
            Ok(crate::exit::write_stdout(&out)?)
        }
        Command::Man { dir } => {
            use clap::CommandFactory;
            let cmd = Cli::command();
            let written = match dir {
                Some(dir) => clap_mangen::generate_to(cmd, &dir)
                    .with_context(|| format!("cannot write the man pages into {}", dir.display())),
                None => {
                    let mut out = Vec::new();
                    clap_mangen::Man::new(cmd)
                        .render(&mut out)
                        .context("cannot write the man page")
                        .and_then(|()| crate::exit::write_stdout(&out))
                }
            };
            written.map_err(|error| Failure {
                code: EXIT_FAILURE,
                error,
            })
        }
        Command::Send(args) => {
            init_plain_logging();
            let ok = runtime()?.block_on(send::run(*args)).map_err(usage)?;
            if ok {
                Ok(())
            } else {
                Err(Failure {
                    code: EXIT_FAILURE,
                    error: anyhow::anyhow!("some requests got no 2xx"),
                })
            }
        }
    }
}

fn ops(remote: Remote, command: OpsCommand) -> Result<(), Failure> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    runtime()?.block_on(crate::ctl::run(remote, command))
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?)
}

/// Connections the kernel completes and queues for `accept` at most (Linux
/// caps it at `net.core.somaxconn`, 4096 by default). A burst of new
/// connections past it is dropped, and each client retries its SYN only
/// after a second: a deep queue lets a provider's connection that arrives
/// during a flood wait milliseconds for the accept loop instead.
const LISTEN_BACKLOG: u32 = 4096;

/// A listening socket on `addr` with [`LISTEN_BACKLOG`] (tokio's `bind`
/// gives 1024).
fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    // As std and tokio do: a restart can bind while old connections linger
    // in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

async fn serve(config: Config<Loaded>, file: Option<&std::path::Path>) -> Result<(), Failure> {
    let stop = shutdown_signal()?;
    // Registered before listening: SIGHUP's default action ends the process.
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot handle SIGHUP")?;
    let listen = config.server.listen;
    let ingest = bind(listen)
        .with_context(|| format!("cannot listen on {listen} (server.listen / HOOKINBOX_LISTEN)"))?;
    let admin_listen = config.server.admin_listen;
    let admin = bind(admin_listen).with_context(|| {
        format!("cannot listen on {admin_listen} (server.admin_listen / HOOKINBOX_ADMIN_LISTEN)")
    })?;
    let stopping = tokio_util::sync::CancellationToken::new();
    let signalled = {
        let stopping = stopping.clone();
        tokio::spawn(async move {
            stop.await;
            crate::systemd::stopping();
            stopping.cancel();
        })
    };
    // Only once the listeners are bound: a secret generated by a start that
    // then fails is never announced (the next start finds it, not new).
    let first_start = FirstStart::new(&config, file);
    let (mut config, generated) = config.resolve()?;
    let mut hangups = hangups;
    let mut listeners = crate::app::Listeners { ingest, admin };
    let mut first = Some((first_start, generated));
    loop {
        let app = App::start(config.clone(), listeners, Clock::system(), stopping.clone())
            .await
            .map_err(|e| Failure {
                code: if e.needs_operator() {
                    EXIT_USAGE
                } else {
                    EXIT_FAILURE
                },
                error: e.into(),
            })?;
        if let Some((first_start, generated)) = first.take() {
            // The store is open and both listeners are bound.
            crate::systemd::ready();
            first_start.announce(&generated, &app);
        }
        // Where it listened: a node that goes on as a standby listens there again.
        let bound = (app.ingest_addr(), app.admin_addr());
        let shipping = app.shipping();
        let result = run_app(app, hangups, &stopping).await;
        // tokio keeps the handler installed: SIGHUP never ends the process.
        hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("cannot handle SIGHUP")?;
        match result {
            Err(e) if !stopping.is_cancelled() && e.replaced_by().is_some() => {
                // Another node took over. Data that holds only frames the
                // stream took is a prefix of it: this node follows the new
                // primary with it. Data with a frame the stream refused or
                // never took (a batch answered 503) is set aside, and the
                // node follows from the stream and its newest snapshot.
                let holder = e.replaced_by().unwrap_or_default().to_owned();
                let data_dir = &config.server.data_dir;
                if shipping.holds_unshipped() {
                    let aside =
                        crate::store::standby_dir::set_aside(data_dir).with_context(|| {
                            format!("cannot set aside the data in {}", data_dir.display())
                        })?;
                    tracing::warn!(
                        new_primary = %holder,
                        set_aside = %aside.display(),
                        "this node was replaced as the primary: it goes on as a standby, its data set aside (it holds frames the stream never took, each answered 503)"
                    );
                } else {
                    tracing::warn!(
                        new_primary = %holder,
                        "this node was replaced as the primary: it goes on as a standby with its data (every frame it holds is in the stream)"
                    );
                }
                if let Some(r) = config.replication.as_mut() {
                    r.role = crate::words::ReplicationRole::Standby;
                }
                let again =
                    |addr| bind(addr).with_context(|| format!("cannot listen on {addr} again"));
                listeners = crate::app::Listeners {
                    ingest: again(bound.0)?,
                    admin: again(bound.1)?,
                };
            }
            result => {
                signalled.abort();
                result?;
                return Ok(());
            }
        }
    }
}

/// Runs one app until it ends: its config (and TLS) reloaded on SIGHUP,
/// the systemd watchdog fed while it is alive.
async fn run_app(
    app: App,
    mut hangups: tokio::signal::unix::Signal,
    stopping: &tokio_util::sync::CancellationToken,
) -> Result<(), crate::app::AppError> {
    let reloader = app.reloader();
    let reloads = tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            crate::systemd::reloading();
            let reloader = reloader.clone();
            match tokio::task::spawn_blocking(move || reloader.reload()).await {
                Ok(Ok(reloaded)) => crate::admin::log_reload(&reloaded),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "SIGHUP: reload refused; the running config stays")
                }
                Err(e) => tracing::error!(error = %e, "SIGHUP: the reload stopped unexpectedly"),
            }
            crate::systemd::ready();
        }
    });
    let watchdog = tokio::spawn(crate::systemd::watchdog(
        crate::systemd::Liveness {
            store: app.store().clone(),
            delivery: app.delivery().clone(),
        },
        stopping.clone(),
    ));
    let result = app.wait().await;
    watchdog.abort();
    reloads.abort();
    result
}

/// Registers SIGTERM (systemd stop) and ctrl-c handlers now, before the
/// listener opens, so a stop that arrives right after start is not the
/// default action (death without a clean close); resolves on either.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

fn init_plain_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every flag and argument of every subcommand says what it is for in
    /// `--help` (three had nothing beside their name).
    #[test]
    fn every_argument_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, silent: &mut Vec<String>) {
            let path = format!("{path} {}", cmd.get_name());
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && arg.get_help().is_none() && arg.get_long_help().is_none() {
                    silent.push(format!("{path}: {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_name() != "help" {
                    silent.push(format!("{path} {}: no about", sub.get_name()));
                }
                walk(sub, &path, silent);
            }
        }
        let mut silent = Vec::new();
        walk(&super::Cli::command(), "", &mut silent);
        assert!(silent.is_empty(), "no help text: {silent:#?}");
    }
}
