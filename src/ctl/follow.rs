//! Following `GET /api/events/stream` from the command line: the
//! Server-Sent Events read off the wire, and a [`Follow`] that hands out
//! each event once, in order, reconnecting after a break (a server
//! restart, a laptop's sleep, a tunnel that dropped) with the last id it
//! saw, so nothing stored meanwhile is missed. `events tail` and `listen`
//! use it. It changes nothing on the server.

use std::time::Duration;

use anyhow::anyhow;

use super::client::{Client, Opened, fail};
use crate::api::{self, StreamQuery};
use crate::exit::{EXIT_FAILURE, EXIT_UNREACHABLE, Failure};

/// The server sends a comment every 5 s: this long without a byte means
/// the connection is gone (a peer asleep or a NAT that forgot it).
const SILENCE: Duration = Duration::from_secs(30);
/// The first wait before reconnecting, doubled up to [`MOST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(250);
const MOST_WAIT: Duration = Duration::from_secs(5);

/// One Server-Sent Event: its type (`event:`, "message" when absent), its
/// `id:` and its `data:` lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SseEvent {
    pub kind: String,
    pub id: Option<String>,
    pub data: String,
}

/// The Server-Sent Events parser (the WHATWG rules a client needs: lines
/// ending in LF, CRLF or CR; comments; `field: value` with one optional
/// space; a blank line dispatches an event that has data).
#[derive(Debug, Default)]
pub(super) struct SseParser {
    line: Vec<u8>,
    /// The previous byte was a CR: an LF right after it ends nothing.
    after_cr: bool,
    kind: Option<String>,
    id: Option<String>,
    data: Option<String>,
}

impl SseParser {
    /// Feeds bytes as they arrive; returns the events they complete.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_ended(&String::from_utf8_lossy(&line), &mut out);
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
        out
    }

    fn line_ended(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            let (kind, id) = (self.kind.take(), self.id.take());
            if let Some(data) = self.data.take() {
                out.push(SseEvent {
                    kind: kind.unwrap_or_else(|| "message".to_owned()),
                    id,
                    data,
                });
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.kind = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
}

/// What a [`Follow`] hands out.
#[derive(Debug)]
pub(super) enum Followed {
    /// The stream (re)started after this id: the position to keep.
    Ready(String),
    Event(Box<api::StreamedEvent>),
}

/// The events of one query, in order, across reconnections.
pub(super) struct Follow<'a> {
    client: &'a Client,
    /// The query of the first connection; later ones resume by id.
    query: StreamQuery,
    /// The id of the last event (or `ready`) handed out.
    last_id: Option<String>,
    open: Option<reqwest::Response>,
    parser: SseParser,
    pending: std::collections::VecDeque<SseEvent>,
    /// Whether a break was announced and not yet its end.
    broken: bool,
    /// Whether a stream was ever open: until then, no answer is a failure
    /// (the wrong address, a server not started), not a break.
    opened: bool,
}

impl<'a> Follow<'a> {
    pub(super) fn new(client: &'a Client, query: StreamQuery) -> Follow<'a> {
        Follow {
            client,
            query,
            last_id: None,
            open: None,
            parser: SseParser::default(),
            pending: Default::default(),
            broken: false,
            opened: false,
        }
    }

    /// The next event (or a new start), waiting as long as it takes and
    /// reconnecting after a break; a break and its end are told on stderr.
    /// Fails when the first connection finds no server, and when the
    /// server refuses for good: a wrong token, a bad filter or a cursor
    /// that is not this inbox's.
    pub(super) async fn next(&mut self) -> Result<Followed, Failure> {
        let mut wait = FIRST_WAIT;
        loop {
            while let Some(sse) = self.pending.pop_front() {
                if let Some(followed) = self.take(sse)? {
                    return Ok(followed);
                }
            }
            let Some(res) = &mut self.open else {
                match self.connect().await? {
                    Opened::Stream(res) => {
                        self.opened = true;
                        self.open = Some(res);
                        self.parser = SseParser::default();
                        wait = FIRST_WAIT;
                    }
                    Opened::Retry(why) if !self.opened => {
                        return Err(fail(
                            EXIT_UNREACHABLE,
                            anyhow!("{why}: is the server running?"),
                        ));
                    }
                    Opened::Retry(why) => {
                        self.broke(&why);
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(MOST_WAIT);
                    }
                }
                continue;
            };
            match tokio::time::timeout(SILENCE, res.chunk()).await {
                Ok(Ok(Some(bytes))) => {
                    let events = self.parser.feed(&bytes);
                    self.pending.extend(events);
                }
                Ok(Ok(None)) => self.lost("the server closed the stream"),
                Ok(Err(e)) => self.lost(&format!("the stream broke off: {e}")),
                Err(_) => self.lost(&format!(
                    "nothing from the server for {}s",
                    SILENCE.as_secs()
                )),
            }
        }
    }

    async fn connect(&mut self) -> Result<Opened, Failure> {
        match &self.last_id {
            None => self.client.open_stream(&self.query, None).await,
            Some(id) => {
                let query = StreamQuery {
                    after: None,
                    since: None,
                    ..self.query.clone()
                };
                self.client.open_stream(&query, Some(id)).await
            }
        }
    }

    /// One SSE event: what it hands out, if anything.
    fn take(&mut self, sse: SseEvent) -> Result<Option<Followed>, Failure> {
        if let Some(id) = &sse.id {
            self.last_id = Some(id.clone());
        }
        match sse.kind.as_str() {
            "ready" => {
                if std::mem::take(&mut self.broken) {
                    eprintln!("reconnected to {}", self.client.base());
                }
                Ok(sse.id.map(Followed::Ready))
            }
            "event" => {
                let event: api::StreamedEvent = serde_json::from_str(&sse.data).map_err(|e| {
                    fail(
                        EXIT_FAILURE,
                        anyhow!("an unreadable event in the stream: {e}"),
                    )
                })?;
                Ok(Some(Followed::Event(Box::new(event))))
            }
            _ => Ok(None),
        }
    }

    fn lost(&mut self, why: &str) {
        self.open = None;
        self.broke(why);
    }

    /// Says a break once, until the stream is back.
    fn broke(&mut self, why: &str) {
        if !std::mem::replace(&mut self.broken, true) {
            eprintln!("{why}; reconnecting (nothing stored meanwhile is missed)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, id: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            kind: kind.to_owned(),
            id: id.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    #[test]
    fn events_are_parsed_whatever_the_chunks_and_line_ends() {
        let wire = "event: ready\nid: hbx_1\ndata: {}\n\n: keep-alive\n\nevent: event\r\nid: hbx_2\r\ndata: {\"a\":\r\ndata:1}\r\n\r\ndata: plain\r\rid\ndata\n\n";
        let want = vec![
            event("ready", Some("hbx_1"), "{}"),
            event("event", Some("hbx_2"), "{\"a\":\n1}"),
            event("message", None, "plain"),
            event("message", Some(""), ""),
        ];
        // Whole, and byte by byte: a chunk may end anywhere, even between
        // a CR and its LF.
        assert_eq!(SseParser::default().feed(wire.as_bytes()), want);
        let mut parser = SseParser::default();
        let split: Vec<SseEvent> = wire
            .as_bytes()
            .iter()
            .flat_map(|b| parser.feed(&[*b]))
            .collect();
        assert_eq!(split, want);
    }

    #[test]
    fn a_comment_or_a_blank_line_alone_is_no_event() {
        let mut parser = SseParser::default();
        assert!(parser.feed(b": hello\n\n\n\nevent: x\n\n").is_empty());
        // The type without data was dropped with its blank line.
        assert_eq!(
            parser.feed(b"data: y\n\n"),
            vec![event("message", None, "y")]
        );
    }
}
