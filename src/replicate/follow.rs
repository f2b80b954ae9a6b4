//! A standby's side: the stream's frames applied to its store as they
//! come, in order, from where its file left off.
//!
//! An ordered consumer (the client recreates it from the last sequence
//! seen when a message goes missing or the connection drops) delivers the
//! frames; those already buffered are applied together, one writer job a
//! group. A frame with another database's message id stops the standby:
//! the stream is not its primary's.

use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::stream;
use futures_util::StreamExt;

use super::publish::{
    CODEC_HEADER, ConnectError, DecodeError, LSN_HEADER, PART_HEADER, StreamSettings, connect,
    decode, header, subject_of,
};
use crate::store::{Store, StoreError};

/// Frames applied in one writer job at most.
const GROUP: usize = 256;

/// Why following stopped.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("reading the replication stream {stream} failed: {detail}")]
    Stream { stream: String, detail: String },
    #[error(
        "message {sequence} of the replication stream is not a frame of database {tag:08x} (message id {id:?})"
    )]
    Foreign { sequence: u64, id: String, tag: u32 },
    #[error("frame {frame} (message {sequence}) of the replication stream cannot be read: {why}")]
    Undecodable {
        frame: u64,
        sequence: u64,
        why: DecodeError,
    },
    #[error("applying the replication stream's frames failed")]
    Apply(#[from] StoreError),
}

/// Follows one stream.
pub struct Follower {
    stream: stream::Stream,
    name: String,
    subject: String,
    _client: async_nats::Client,
}

impl Follower {
    /// Connects and finds the stream (it must exist: its primary makes it).
    pub async fn connect(settings: &StreamSettings) -> Result<Follower, FollowError> {
        let (client, context) = connect(settings, "standby").await?;
        let stream =
            context
                .get_stream(&settings.stream)
                .await
                .map_err(|e| FollowError::Stream {
                    stream: settings.stream.clone(),
                    detail: format!(
                        "cannot find it (its primary makes it: start the primary first): {e}"
                    ),
                })?;
        Ok(Follower {
            stream,
            name: settings.stream.clone(),
            subject: subject_of(&settings.stream),
            _client: client,
        })
    }

    fn failed(&self, detail: impl ToString) -> FollowError {
        FollowError::Stream {
            stream: self.name.clone(),
            detail: detail.to_string(),
        }
    }

    /// The tag of the database whose frames the stream holds (from its
    /// first message's id), for a standby's new database; `None` if empty.
    pub async fn tag(&self) -> Result<Option<u32>, FollowError> {
        Ok(self.first().await?.map(|(tag, _)| tag))
    }

    /// The stream's first message: its database's tag and its frame number
    /// (1 until a snapshot lets the stream forget the frames before it).
    pub async fn first(&self) -> Result<Option<(u32, u64)>, FollowError> {
        let state = self.state().await?;
        if state.messages == 0 {
            return Ok(None);
        }
        let message = self
            .stream
            .get_raw_message(state.first_sequence)
            .await
            .map_err(|e| self.failed(format!("reading its first message: {e}")))?;
        let id = header(&message.headers, "Nats-Msg-Id");
        let tag = id
            .split_once('-')
            .and_then(|(tag, _)| u32::from_str_radix(tag, 16).ok());
        let lsn = header(&message.headers, LSN_HEADER).parse().unwrap_or(0);
        Ok(tag.map(|tag| (tag, lsn)))
    }

    /// How far a store that applied the stream up to `applied` is behind
    /// it now: the messages after it, and the age of the first of them.
    pub async fn lag(&self, applied: u64) -> Result<crate::metrics::StandbyLag, FollowError> {
        let state = self.state().await?;
        if state.last_sequence <= applied {
            return Ok(crate::metrics::StandbyLag::default());
        }
        // The oldest message not applied that the stream still holds.
        let next = (applied + 1).max(state.first_sequence);
        let first = self
            .stream
            .get_raw_message(next)
            .await
            .map_err(|e| self.failed(format!("reading message {next}: {e}")))?;
        let written: std::time::SystemTime = first.time.into();
        Ok(crate::metrics::StandbyLag {
            frames: state.last_sequence - applied,
            age: written.elapsed().unwrap_or_default(),
        })
    }

    /// Where the stream ends now (its last sequence).
    pub async fn end(&self) -> Result<u64, FollowError> {
        Ok(self.state().await?.last_sequence)
    }

    /// The stream's state now (its first and last sequence, its length).
    async fn state(&self) -> Result<stream::State, FollowError> {
        let mut stream = self.stream.clone();
        Ok(stream
            .info()
            .await
            .map_err(|e| self.failed(e))?
            .state
            .clone())
    }

    /// Applies the stream's frames after the store's last, as they come,
    /// until the stream has been applied up to `until` (if given) or
    /// `stop` resolves. Returns the stream sequence applied up to.
    pub async fn follow(
        &self,
        store: &Store,
        tag: u32,
        until: Option<u64>,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<u64, FollowError> {
        let (mut lsn, mut applied_seq) = store.last_frame()?;
        if until.is_some_and(|until| applied_seq >= until) {
            return Ok(applied_seq);
        }
        let deliver_policy = match applied_seq {
            0 => DeliverPolicy::All,
            seq => DeliverPolicy::ByStartSequence {
                start_sequence: seq + 1,
            },
        };
        let consumer = self
            .stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: self.subject.clone(),
                deliver_policy,
                max_expires: Duration::from_secs(1),
                ..Default::default()
            })
            .await
            .map_err(|e| self.failed(e))?;
        let mut messages = consumer.messages().await.map_err(|e| self.failed(e))?;
        tokio::pin!(stop);
        let prefix = format!("{tag:08x}-");
        // The frame being put together from its parts, if any.
        let mut partial: Option<Partial> = None;
        let mut seen;
        loop {
            let first = tokio::select! {
                next = messages.next() => next,
                () = &mut stop => return Ok(applied_seq),
            };
            let mut group = Vec::new();
            let mut next = first;
            loop {
                let message = match next {
                    Some(Ok(message)) => message,
                    Some(Err(e)) => return Err(self.failed(e)),
                    None => return Err(self.failed("the consumer ended")),
                };
                let sequence = message.info().map_err(|e| self.failed(e))?.stream_sequence;
                seen = sequence;
                let headers = message.headers.clone().unwrap_or_default();
                let id = header(&headers, "Nats-Msg-Id");
                if !id.starts_with(&prefix) {
                    return Err(FollowError::Foreign { sequence, id, tag });
                }
                let frame: u64 = header(&headers, LSN_HEADER)
                    .parse()
                    .map_err(|_| self.failed(format!("message {sequence} has no frame number")))?;
                let (index, count) = part_of(&header(&headers, PART_HEADER));
                // Frames the store already holds (a snapshot's) are skipped.
                if frame <= lsn {
                    if partial.is_none() {
                        applied_seq = sequence;
                    }
                } else {
                    // A first part starts the frame over (a primary that
                    // sent it again, or a new primary's frame of that number
                    // after one that never finished).
                    if index == 1 {
                        partial = Some(Partial {
                            lsn: frame,
                            next: 1,
                            bytes: Vec::new(),
                        });
                    }
                    match &mut partial {
                        Some(p) if p.lsn == frame && p.next == index => {
                            p.bytes.extend_from_slice(&message.payload);
                            p.next += 1;
                        }
                        // A part without the ones before it: a frame that
                        // never finished, replaced by what comes next.
                        _ => partial = None,
                    }
                    if index == count
                        && let Some(done) = partial.take_if(|p| p.lsn == frame && p.next > count)
                    {
                        let bytes = match decode(&header(&headers, CODEC_HEADER), done.bytes) {
                            Ok(bytes) => bytes,
                            Err(why) => {
                                // The frames before it are applied; none after.
                                if !group.is_empty() {
                                    store.apply_frames(group, applied_seq).await?;
                                }
                                return Err(FollowError::Undecodable {
                                    frame,
                                    sequence,
                                    why,
                                });
                            }
                        };
                        group.push((frame, bytes));
                        lsn = frame;
                        applied_seq = sequence;
                    }
                }
                if group.len() == GROUP || until.is_some_and(|until| sequence >= until) {
                    break;
                }
                match futures_util::FutureExt::now_or_never(messages.next()) {
                    Some(more) => next = more,
                    None => break,
                }
            }
            if !group.is_empty() {
                store.apply_frames(group, applied_seq).await?;
            }
            if until.is_some_and(|until| seen >= until) {
                return Ok(applied_seq);
            }
        }
    }
}

/// A frame being put together from its parts.
struct Partial {
    lsn: u64,
    /// The part expected next, from 1.
    next: usize,
    bytes: Vec<u8>,
}

/// `i/n` of a part header; a frame in one message has none: `1/1`.
fn part_of(header: &str) -> (usize, usize) {
    header
        .split_once('/')
        .and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)))
        .unwrap_or((1, 1))
}
