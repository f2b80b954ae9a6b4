//! The connection to a running server's admin API: where it is (flags,
//! else the server's config), the token, the HTTP client, and how each
//! failure becomes an exit code. It knows no command and prints nothing.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, anyhow};
use clap::Args;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::{self, EventQuery};
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
    /// A file holding your token: an [[admin.user]]'s, or the admin token
    /// (default: HOOKINBOX_ADMIN_TOKEN, else the config's admin token, else
    /// the one the server generated in its data dir).
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

pub(super) struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
    /// For event streams: no time limit on the whole exchange (the
    /// stream's heartbeats show it is alive).
    streaming: reqwest::Client,
}

pub(super) fn fail(code: u8, error: anyhow::Error) -> Failure {
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
pub(super) const NO_BODY: Option<&()> = None;

impl Client {
    pub(super) fn new(remote: &Remote) -> Result<Client, Failure> {
        let http =
            crate::send::http_client(Duration::from_secs(600)).map_err(|e| fail(EXIT_USAGE, e))?;
        let mut view = None;
        let base = match &remote.admin {
            Some(url) => url.clone(),
            None => view.insert(remote.view()?).admin_url(),
        };
        let streaming = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| fail(EXIT_USAGE, anyhow!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            base: base.trim_end_matches('/').to_owned(),
            token: token(remote, &mut view)?,
            http,
            streaming,
        })
    }

    /// The admin API's URL, as given or found.
    pub(super) fn base(&self) -> &str {
        &self.base
    }

    /// Opens `GET /api/events/stream` with `query`, resuming after
    /// `last_event_id` when given. A refusal that asking again may cure (no
    /// answer, a 5xx: a server restarting) is [`Opened::Retry`].
    pub(super) async fn open_stream(
        &self,
        query: &api::StreamQuery,
        last_event_id: Option<&str>,
    ) -> Result<Opened, Failure> {
        let path = "/api/events/stream";
        let mut req = self
            .streaming
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .query(query);
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        match req.send().await {
            Err(e) => Ok(Opened::Retry(format!("cannot reach {}: {e}", self.base))),
            Ok(res) if res.status().is_server_error() => {
                Ok(Opened::Retry(format!("{path}: {}", res.status())))
            }
            Ok(res) => Ok(Opened::Stream(self.checked(path, res).await?)),
        }
    }

    pub(super) async fn call(
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
        self.checked(path, res).await
    }

    /// `res` when it is a success, else the failure it says.
    async fn checked(
        &self,
        path: &str,
        res: reqwest::Response,
    ) -> Result<reqwest::Response, Failure> {
        let status = res.status();
        if status.is_success() {
            return Ok(res);
        }
        let text = res.text().await.unwrap_or_default();
        let reason = serde_json::from_str::<api::ApiError>(&text)
            .map(|e| e.reason)
            .unwrap_or(text);
        if status == reqwest::StatusCode::UNAUTHORIZED {
            // The server says why (an expired token names whose and when).
            return Err(fail(
                EXIT_UNAUTHORIZED,
                anyhow!(
                    "the admin API refused the token (401: {reason}): check HOOKINBOX_ADMIN_TOKEN or --token-file"
                ),
            ));
        }
        Err(fail(
            EXIT_FAILURE,
            anyhow!("admin API {path}: {status}: {reason}"),
        ))
    }

    pub(super) async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: Option<&EventQuery>,
    ) -> Result<T, Failure> {
        let res = self
            .call(reqwest::Method::GET, path, query, NO_BODY)
            .await?;
        answer(res).await
    }

    /// `GET path` with any query type (`get` takes the events').
    pub(super) async fn get_with<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &impl Serialize,
    ) -> Result<T, Failure> {
        let res = self
            .call(reqwest::Method::GET, path, Some(query), NO_BODY)
            .await?;
        answer(res).await
    }

    pub(super) async fn post<T: DeserializeOwned>(
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
    pub(super) async fn change<T: DeserializeOwned>(
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

    pub(super) async fn delete<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, Failure> {
        let res = self
            .call(reqwest::Method::DELETE, path, NO_BODY, Some(body))
            .await?;
        answer(res).await
    }

    /// `method` on `path` with any query and no body: the keys' paths.
    pub(super) async fn with_query<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &impl Serialize,
    ) -> Result<T, Failure> {
        let res = self.call(method, path, Some(query), NO_BODY).await?;
        answer(res).await
    }

    /// Pages of `query` from its cursor: one, or with `all` every one.
    pub(super) async fn pages(
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

/// What opening a stream gave: the stream, or a reason to try again.
pub(super) enum Opened {
    Stream(reqwest::Response),
    Retry(String),
}

async fn answer<T: DeserializeOwned>(res: reqwest::Response) -> Result<T, Failure> {
    let bytes = res
        .bytes()
        .await
        .map_err(|e| fail(EXIT_FAILURE, anyhow!("the answer broke off: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| fail(EXIT_FAILURE, anyhow!("unreadable answer: {e}")))
}
