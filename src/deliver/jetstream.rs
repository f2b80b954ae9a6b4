//! A NATS JetStream destination: each event is published to a subject made
//! from the source and its type, and "delivered" means the stream's ack.
//!
//! The message carries the raw body and the same contract headers as an
//! HTTP delivery, plus `Nats-Msg-Id` = the event's public id: a publish
//! repeated after a crash (an attempt recorded as interrupted) or a retry
//! after a lost ack falls in the stream's duplicate window and is dropped
//! there, so the stream holds each event once. A replay is meant to reach
//! the stream again: it carries `<id>.r<n>`, the replay's round, instead.
//!
//! Owns the connection (one client per destination, made at the first
//! attempt, then kept and reconnected by the client) and the classification
//! of a publish's outcome. Refuses to create streams: which subjects a
//! stream takes, its retention and replicas are the operator's choice.

use std::time::Duration;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::{Client, ConnectOptions, HeaderMap};
use tokio::sync::OnceCell;

use crate::config::{DeliveryConfig, JetStreamTarget};
use crate::store::schema::AttemptClass;

/// A JetStream destination's connection and subject.
pub struct Link {
    target: JetStreamTarget,
    /// As configured; only [`crate::config::redact_url`] of it is shown.
    url: reqwest::Url,
    ca: Option<std::path::PathBuf>,
    connect_timeout: Duration,
    timeout: Duration,
    connection: OnceCell<(Client, async_nats::jetstream::Context)>,
}

/// Why a JetStream destination has no connection yet; the attempt is a
/// connect failure either way, and the message goes to its history.
#[derive(Debug, thiserror::Error)]
enum LinkError {
    #[error("cannot read the NATS credentials file {}: {cause}", path.display())]
    Credentials {
        path: std::path::PathBuf,
        #[source]
        cause: std::io::Error,
    },
    /// `url` as [`crate::config::redact_url`] shows it.
    #[error("cannot connect to NATS at {url}: {cause}")]
    Connect {
        url: String,
        #[source]
        cause: async_nats::ConnectError,
    },
}

/// What one publish came to.
pub struct Published {
    pub class: AttemptClass,
    /// The ack, in words (stream and sequence), for people reading history.
    pub answer: Option<String>,
    pub error: Option<String>,
}

impl Link {
    pub fn new(config: &DeliveryConfig, target: JetStreamTarget) -> Link {
        Link {
            target,
            url: config.url.clone(),
            ca: config.ca.as_ref().map(|ca| ca.path.clone()),
            connect_timeout: config.connect_timeout,
            timeout: config.timeout,
            connection: OnceCell::new(),
        }
    }

    /// The subject an event of `source` and `event_type` is published to.
    pub fn subject(&self, source: &str, event_type: Option<&str>) -> String {
        self.target.subject.render(source, event_type)
    }

    /// The client, connected at the first call that succeeds; the client
    /// then reconnects by itself for as long as the process runs.
    async fn connection(&self) -> Result<&(Client, async_nats::jetstream::Context), LinkError> {
        self.connection
            .get_or_try_init(|| async {
                let mut options = match &self.target.creds_file {
                    Some(path) => {
                        ConnectOptions::with_credentials_file(path)
                            .await
                            .map_err(|cause| LinkError::Credentials {
                                path: path.clone(),
                                cause,
                            })?
                    }
                    None => ConnectOptions::new(),
                };
                options = options
                    .name(concat!("hookinbox/", env!("CARGO_PKG_VERSION")))
                    .connection_timeout(self.connect_timeout)
                    // Reconnect for ever: the scheduler's breaker decides
                    // when to try, the client only keeps the link.
                    .max_reconnects(None);
                if let Some(ca) = &self.ca {
                    options = options.add_root_certificates(ca.clone());
                }
                if self.url.scheme() == "tls" {
                    options = options.require_tls(true);
                }
                let client = options.connect(self.url.as_str()).await.map_err(|cause| {
                    LinkError::Connect {
                        url: crate::config::redact_url(&self.url),
                        cause,
                    }
                })?;
                let mut context = async_nats::jetstream::new(client.clone());
                context.set_timeout(self.timeout);
                Ok((client, context))
            })
            .await
    }

    /// Publishes `body` with `headers` under `msg_id`; waits for the ack up to
    /// the destination's `timeout`.
    pub async fn publish(
        &self,
        subject: String,
        msg_id: &str,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Published {
        let failed = |class, error: String| Published {
            class,
            answer: None,
            error: Some(error),
        };
        let (client, context) = match self.connection().await {
            Ok(c) => c,
            Err(e) => return failed(AttemptClass::Connect, e.to_string()),
        };
        // While the client reconnects, a publish would wait in its buffer
        // until the ack times out: say what is wrong at once instead.
        if client.connection_state() != async_nats::connection::State::Connected {
            return failed(
                AttemptClass::Connect,
                format!(
                    "not connected to NATS at {} (reconnecting)",
                    crate::config::redact_url(&self.url)
                ),
            );
        }
        let publish = PublishMessage::build()
            .payload(body.into())
            .headers(headers)
            .message_id(msg_id);
        let acked = tokio::time::timeout(self.timeout, async {
            context.send_publish(subject.clone(), publish).await?.await
        })
        .await;
        match acked {
            Ok(Ok(ack)) => Published {
                class: AttemptClass::Delivered,
                answer: Some(format!(
                    "stream {} sequence {}{}",
                    ack.stream,
                    ack.sequence,
                    if ack.duplicate {
                        " (a duplicate the stream already held)"
                    } else {
                        ""
                    }
                )),
                error: None,
            },
            Ok(Err(e)) => {
                let class = match e.kind() {
                    PublishErrorKind::TimedOut => AttemptClass::Timeout,
                    // No stream takes the subject (yet): an operator's fix,
                    // like an app answering 503 while it deploys.
                    PublishErrorKind::StreamNotFound | PublishErrorKind::MaxAckPending => {
                        AttemptClass::RetryableStatus
                    }
                    // Too large for the server: no retry will fit.
                    PublishErrorKind::MaxPayloadExceeded => AttemptClass::RejectedStatus,
                    PublishErrorKind::BrokenPipe => AttemptClass::Connect,
                    _ => AttemptClass::Transport,
                };
                let error = match e.kind() {
                    PublishErrorKind::StreamNotFound => format!(
                        "no JetStream stream takes subject {subject}: create one whose subjects include it"
                    ),
                    _ => format!("publish to {subject}: {e}"),
                };
                failed(class, error)
            }
            Err(_) => failed(
                AttemptClass::Timeout,
                format!(
                    "no ack from the stream within {}",
                    humantime::format_duration(self.timeout)
                ),
            ),
        }
    }
}
