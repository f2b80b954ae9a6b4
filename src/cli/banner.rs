//! The first start's banner: each secret the start generated (its file,
//! the value only to a terminal), a `hookinbox send` command signed as its
//! source, and the dashboard's address; one log line each instead under
//! `log.format = "json"`. It generates nothing and binds nothing.

use crate::app::App;
use crate::config::{
    Config, GeneratedSecret, Kind, Loaded, LogFormat, SecretPurpose, SourceConfig,
};

/// What the banner needs from the config before `resolve` consumes it:
/// the log format, and how `send` signs as each source.
pub(super) struct FirstStart {
    log_format: LogFormat,
    signers: Vec<(String, Signer)>,
}

impl FirstStart {
    pub(super) fn new(config: &Config<Loaded>, file: Option<&std::path::Path>) -> FirstStart {
        FirstStart {
            log_format: config.log.format,
            signers: config
                .sources
                .iter()
                .map(|s| (s.name.as_str().to_owned(), Signer::of(s, file)))
                .collect(),
        }
    }

    /// Announces each secret `generated` on this start and, when there is
    /// one, where the dashboard is.
    pub(super) fn announce(&self, generated: &[GeneratedSecret], app: &App) {
        let FirstStart {
            log_format,
            signers,
        } = self;
        let to_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
        let scheme = if app.tls().is_some() { "https" } else { "http" };
        let ingest = format!("{scheme}://{}", dialable(app.ingest_addr()));
        for generated in generated {
            let signer = match &generated.purpose {
                SecretPurpose::Ingest(name) => signers
                    .iter()
                    .find(|(n, _)| n == name.as_str())
                    .map(|(_, signer)| signer),
                _ => None,
            };
            match *log_format {
                LogFormat::Text => print_generated_secret(generated, signer, &ingest, to_terminal),
                LogFormat::Json => log_generated_secret(generated, signer, &ingest),
            }
        }
        // A first start (it generated something) also says where to look.
        if !generated.is_empty() {
            let dashboard = format!("http://{}/", dialable(app.admin_addr()));
            match *log_format {
                LogFormat::Text => banner(&format!(
                    "The dashboard (with the admin token): {dashboard}\n\n"
                )),
                LogFormat::Json => tracing::info!(dashboard, "the dashboard, with the admin token"),
            }
        }
    }
}

/// Announces a secret generated on this start. The file that keeps it is
/// always named; the value itself is printed only to a terminal. Under the
/// packaged systemd unit stdout goes to the journal, which keeps it for weeks
/// and shows it to everyone in the `adm` and `systemd-journal` groups.
fn print_generated_secret(
    generated: &GeneratedSecret,
    signer: Option<&Signer>,
    ingest: &str,
    to_terminal: bool,
) {
    let path = generated.path.display();
    let secret = generated.secret.expose();
    let value = if to_terminal {
        format!(":\n\n    {secret}\n")
    } else {
        ".\nIt is not printed because stdout is not a terminal: read it from the file.\n".to_owned()
    };
    match &generated.purpose {
        SecretPurpose::Admin => banner(&format!(
            "\nhookinbox generated the admin API token, kept in {path} (mode 0600){value}\n\
             Use it as: Authorization: Bearer <token> on the admin listener.\n\n"
        )),
        SecretPurpose::Destination(name) => banner(&format!(
            "\nhookinbox generated the key that signs deliveries to destination {name:?}, kept in {path} (mode 0600){value}\n\
             Verify deliveries in your app with any Standard Webhooks library and this key.\n\n",
        )),
        SecretPurpose::Ingest(name) => {
            let argument = if to_terminal {
                format!("'{secret}'")
            } else {
                format!("\"$(cat '{path}')\"")
            };
            banner(&format!(
                "\nhookinbox generated the secret of source {name:?}, kept in {path} (mode 0600){value}\n\
                 Send it a signed test event:\n\n    {}\n\n",
                send_command(signer, name.as_str(), &argument, ingest),
                name = name.as_str(),
            ));
        }
    }
}

/// Writes a banner to stdout. A server goes on without its stdout: a
/// reader that went away is no reason to stop receiving webhooks.
fn banner(text: &str) {
    let _ = crate::exit::write_stdout(text.as_bytes());
}

/// The address a client on this host dials for a listener bound to `addr`:
/// loopback in place of "every address".
fn dialable(mut addr: std::net::SocketAddr) -> std::net::SocketAddr {
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    addr
}

/// How `hookinbox send` signs as a source does, for the banner's command.
#[derive(Debug, Clone, PartialEq)]
enum Signer {
    /// `--provider <kind>` (and `--signed-url` where the source signs a
    /// public URL): the secret and URL on the command line are all it
    /// needs, whatever the operator's shell holds.
    Provider {
        kind: Kind,
        signed_url: Option<String>,
    },
    /// `--source` with the config file: only the config knows how to sign
    /// (an `hmac` scheme, a custom event id). It reads the whole config,
    /// so it needs every source's secret variables in the shell.
    Config(std::path::PathBuf),
}

impl Signer {
    fn of(source: &SourceConfig<Loaded>, file: Option<&std::path::Path>) -> Signer {
        let own_scheme = source.kind == Kind::Hmac || source.event_id.is_some();
        match file {
            Some(file) if own_scheme => {
                Signer::Config(std::path::absolute(file).unwrap_or_else(|_| file.to_owned()))
            }
            _ => Signer::Provider {
                kind: source.kind,
                signed_url: source.public_url.clone(),
            },
        }
    }
}

/// The `hookinbox send` command that sends source `name` a signed test
/// event: `secret` is the `--secret` argument as the shell should read it.
fn send_command(signer: Option<&Signer>, name: &str, secret: &str, ingest: &str) -> String {
    let url = format!("{ingest}/in/{name}");
    match signer {
        Some(Signer::Config(file)) => format!(
            "hookinbox send --config '{}' --source {name} --url {url}",
            file.display()
        ),
        Some(Signer::Provider { kind, signed_url }) => {
            let signed = signed_url
                .as_ref()
                .map(|u| format!(" --signed-url '{u}'"))
                .unwrap_or_default();
            format!("hookinbox send --provider {kind} --secret {secret} --url {url}{signed}")
        }
        // Not reached: every generated source secret is a configured
        // source's. The standard kind is the embedded default's.
        None => format!("hookinbox send --provider standard --secret {secret} --url {url}"),
    }
}

/// [`print_generated_secret`] for `log.format = "json"`: one structured
/// line in the log stream (a banner there would be the one line a shipper
/// cannot parse), never with the value, terminal or not.
fn log_generated_secret(generated: &GeneratedSecret, signer: Option<&Signer>, ingest: &str) {
    let path = generated.path.display().to_string();
    match &generated.purpose {
        SecretPurpose::Admin => tracing::info!(
            secret = "admin_token",
            path,
            "generated the admin API token: use it as Authorization: Bearer <token> on the admin listener"
        ),
        SecretPurpose::Destination(name) => tracing::info!(
            secret = "destination_key",
            destination = name.as_str(),
            path,
            "generated the key that signs deliveries: verify them in the app with any Standard Webhooks library and this key"
        ),
        SecretPurpose::Ingest(name) => tracing::info!(
            secret = "source_secret",
            source = name.as_str(),
            path,
            try_it = send_command(
                signer,
                name.as_str(),
                &format!("\"$(cat '{path}')\""),
                ingest
            ),
            "generated the secret of a source"
        ),
    }
}
