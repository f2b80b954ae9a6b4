//! The primary's side: each log frame published to the stream before its
//! batch is answered.
//!
//! A frame is one message on `hookinbox.log.<stream>`: its payload as the
//! store wrote it, `Nats-Msg-Id` `<tag>-<lsn>-<writer>` (the database's tag
//! in hex, the frame's number, this publisher's random id) and a
//! `Hookinbox-Lsn` header. Every publish carries
//! `Nats-Expected-Last-Sequence`: the stream's last sequence as this
//! primary left it. So a second writer's message makes this one's next
//! publish fail, and this primary learns it was replaced. A frame published
//! again after a lost ack is in the stream's duplicate window: the server
//! checks the message id first and acks it as a duplicate, with its
//! sequence, which is not a refusal. The writer's id keeps that to this
//! publisher's own frames: a promoted standby numbers its frames on from
//! the same place, and the server would take an old primary's frame of
//! that number for a duplicate of the new one's, before it looks at the
//! expected sequence.
//!
//! A frame goes compressed with zstd (`[replication] compression`, level
//! 1, the whole frame) when that makes it smaller; its messages then carry
//! `Hookinbox-Codec: zstd`, and a standby decompresses the joined parts
//! ([`decode`]). A message without the header holds the frame as the log
//! does, as every build before compression wrote it. A standby of such a
//! build cannot read a compressed frame: it stops on it as on any frame it
//! cannot apply, so standbys are upgraded first (or `compression = "none"`
//! kept until they are).
//!
//! A group of frames is published at once, each message chained on the one
//! before, and its acks awaited in order. A frame that fails is published again, with every later one, until the
//! budget runs out ([`StreamSettings::budget`]: an election of a new stream
//! leader takes several seconds); then the store answers 503 and ships
//! them first with the next group.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, stream};
use async_nats::{Client, ConnectOptions};
use bytes::Bytes;

use crate::store::{ShipError, ShippedFrame, Shipper};
use crate::words::FrameCodec;

/// The header that carries a frame's number.
pub const LSN_HEADER: &str = "Hookinbox-Lsn";
/// On a frame sent in several messages (larger than a message may be):
/// which part this is, `i/n`, from 1. A frame in one message has none.
pub const PART_HEADER: &str = "Hookinbox-Part";
/// On a compressed frame's messages: its codec ([`FrameCodec`]'s name). A
/// message without it holds the frame as the log does.
pub const CODEC_HEADER: &str = "Hookinbox-Codec";
/// zstd's level for frames: its fastest regular one. On the bench's frames
/// (≈ 44 Stripe-like events, 50 KB) levels 1 to 3 give 6.6–6.7× at 790–940
/// MB/s (`zstd -b1 -e3 -B50000 hookinbox.wal`), so more buys nothing.
const ZSTD_LEVEL: i32 = 1;
/// No frame decompresses to more than this: the log's frames are a batch
/// of requests, each capped far below it.
const LARGEST_FRAME: u64 = 1 << 30;
/// After a group was not taken: how long later groups are refused at once.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Room left in a message for its headers.
const HEADER_ROOM: usize = 8 << 10;

/// Where and how frames are published.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// One or more `nats://host:port`, comma-separated.
    pub urls: String,
    /// The stream's name (one per inbox).
    pub stream: String,
    /// Its replicas when this primary creates it (1 or 3).
    pub replicas: usize,
    pub creds_file: Option<PathBuf>,
    /// A server's `authorization { token }`.
    pub token: Option<crate::config::Secret>,
    pub ca: Option<PathBuf>,
    /// How long one publish may wait for its ack.
    pub ack_timeout: Duration,
    /// How long a group of frames may take, retries included, before its
    /// batches are answered 503.
    pub budget: Duration,
    /// Payload bytes a message carries at most; a larger frame goes in
    /// parts. `None`: the server's `max_payload` less room for headers.
    pub max_part: Option<usize>,
    /// How the primary compresses frames (a standby reads either).
    pub compression: FrameCodec,
}

/// Why a primary cannot start publishing.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot connect to NATS at {urls}: {detail}")]
    Connect { urls: String, detail: String },
    #[error("cannot find or create the replication stream {stream}: {detail}")]
    Stream { stream: String, detail: String },
}

/// The stream's end could not be read: its servers did not answer (an
/// election, an outage). It tells nothing of who writes the stream, so it
/// is never taken for another writer's frame or another inbox's stream.
#[derive(Debug, thiserror::Error)]
enum TailError {
    #[error(transparent)]
    Info(#[from] stream::InfoError),
    #[error(transparent)]
    LastMessage(#[from] stream::LastRawMessageError),
}

/// One message's share of a frame.
struct Part<'a> {
    lsn: u64,
    /// How the frame's bytes are encoded: `None`, as the log holds them.
    codec: Option<FrameCodec>,
    /// From 1 to `count`.
    index: usize,
    count: usize,
    bytes: &'a [u8],
}

/// Publishes frames for one primary.
pub struct Publisher {
    runtime: tokio::runtime::Handle,
    context: jetstream::Context,
    stream: stream::Stream,
    subject: String,
    /// The database's, once attached.
    tag: std::sync::atomic::AtomicU32,
    ack_timeout: Duration,
    budget: Duration,
    max_part: usize,
    /// The stream's last sequence as this primary left it.
    last: Mutex<u64>,
    /// This publisher's id in its message ids, random.
    writer: u64,
    /// After a group ran out of its budget: when the next try may be.
    /// Until then groups are refused at once; after, each gets one ack's
    /// wait until one is taken. So requests queued during an outage are
    /// answered 503 within a second or two, not a budget each.
    outage: Mutex<Option<Instant>>,
    /// Where a group the stream did not take is counted, if anywhere.
    metrics: Option<crate::metrics::Metrics>,
    /// Compresses frames, its context kept from one to the next; `None`
    /// with `compression = "none"`. Only the log thread ships.
    compressor: Option<Mutex<zstd::bulk::Compressor<'static>>>,
    _client: Client,
}

impl Publisher {
    /// Connects, finds the stream (creating it if it does not exist) and
    /// reads where it ends. The store then [attaches](Shipper::attach) to
    /// it, with its tag. Call it from a multi-threaded runtime: the store's
    /// threads wait on it.
    pub async fn connect(settings: &StreamSettings) -> Result<Publisher, ConnectError> {
        let (client, context) = connect(settings, "primary").await?;
        let subject = subject_of(&settings.stream);
        let stream_err = |detail: String| ConnectError::Stream {
            stream: settings.stream.clone(),
            detail,
        };
        let stream = context
            .get_or_create_stream(stream::Config {
                name: settings.stream.clone(),
                subjects: vec![subject.clone()],
                num_replicas: settings.replicas,
                storage: stream::StorageType::File,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
            .await
            .map_err(|e| stream_err(e.to_string()))?;
        let last = stream.cached_info().state.last_sequence;
        let max_part = settings.max_part.unwrap_or_else(|| {
            client
                .server_info()
                .max_payload
                .saturating_sub(HEADER_ROOM)
                .max(HEADER_ROOM)
        });
        Ok(Publisher {
            runtime: tokio::runtime::Handle::current(),
            context,
            stream,
            subject,
            tag: std::sync::atomic::AtomicU32::new(0),
            ack_timeout: settings.ack_timeout,
            budget: settings.budget,
            max_part: max_part.max(1),
            last: Mutex::new(last),
            writer: rand::random(),
            outage: Mutex::new(None),
            metrics: None,
            compressor: match settings.compression {
                FrameCodec::Plain => None,
                FrameCodec::Zstd => Some(Mutex::new(
                    zstd::bulk::Compressor::new(ZSTD_LEVEL)
                        .map_err(|e| stream_err(format!("cannot set up zstd: {e}")))?,
                )),
            },
            _client: client,
        })
    }

    /// Counts each group the stream does not take in
    /// `replication_publish_failures`.
    pub fn counted(mut self, metrics: crate::metrics::Metrics) -> Publisher {
        self.metrics = Some(metrics);
        self
    }

    /// The stream's last sequence as this primary left it.
    pub fn last_sequence(&self) -> u64 {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `<tag>-<lsn>-<writer>`, and `.<part>` for a frame in parts.
    fn message_id(&self, part: &Part<'_>) -> String {
        let tag = self.tag.load(std::sync::atomic::Ordering::Relaxed);
        let id = format!("{tag:08x}-{}{}", part.lsn, self.writer_id());
        if part.count == 1 {
            id
        } else {
            format!("{id}.{}", part.index)
        }
    }

    /// The part of a message id that names this publisher.
    fn writer_id(&self) -> String {
        format!("-{:016x}", self.writer)
    }

    /// The stream's last message: its sequence and message id.
    async fn tail(&self) -> Result<Option<(u64, String)>, TailError> {
        let mut stream = self.stream.clone();
        if stream.info().await?.state.messages == 0 {
            return Ok(None);
        }
        let message = self
            .stream
            .get_last_raw_message_by_subject(&self.subject)
            .await?;
        Ok(Some((
            message.sequence,
            header(&message.headers, "Nats-Msg-Id"),
        )))
    }

    fn message(&self, part: &Part<'_>, expected_last: u64) -> PublishMessage {
        let message = PublishMessage::build()
            .payload(Bytes::copy_from_slice(part.bytes))
            .header(LSN_HEADER, part.lsn.to_string().as_str())
            .expected_last_sequence(expected_last);
        let mut message = message.message_id(self.message_id(part));
        if let Some(codec) = part.codec {
            message = message.header(CODEC_HEADER, codec.as_str());
        }
        if part.count == 1 {
            return message;
        }
        message.header(
            PART_HEADER,
            format!("{}/{}", part.index, part.count).as_str(),
        )
    }

    /// A frame's bytes as they go to the stream: compressed when that is
    /// smaller, else as the log holds them.
    fn encode<'a>(&self, frame: &ShippedFrame<'a>) -> (Option<FrameCodec>, Cow<'a, [u8]>) {
        let Some(compressor) = &self.compressor else {
            return (None, Cow::Borrowed(frame.payload));
        };
        let mut compressor = compressor.lock().unwrap_or_else(|p| p.into_inner());
        // Room for the plain frame less one byte: a frame that does not
        // shrink fails to fit, and goes plain.
        let mut out = Vec::with_capacity(frame.payload.len().saturating_sub(1));
        match compressor.compress_to_buffer(frame.payload, &mut out) {
            Ok(_) if out.len() < frame.payload.len() => (Some(FrameCodec::Zstd), Cow::Owned(out)),
            _ => (None, Cow::Borrowed(frame.payload)),
        }
    }

    async fn publish(&self, frames: &[ShippedFrame<'_>]) -> Result<(), ShipError> {
        let encoded: Vec<(u64, Option<FrameCodec>, Cow<'_, [u8]>)> = frames
            .iter()
            .map(|frame| {
                let (codec, bytes) = self.encode(frame);
                (frame.lsn, codec, bytes)
            })
            .collect();
        if let Some(metrics) = &self.metrics {
            metrics.frames_shipped(
                frames.iter().map(|f| f.payload.len() as u64).sum(),
                encoded.iter().map(|(_, _, b)| b.len() as u64).sum(),
            );
        }
        let parts: Vec<Part<'_>> = encoded
            .iter()
            .flat_map(|(lsn, codec, bytes)| {
                let count = bytes.len().div_ceil(self.max_part).max(1);
                (0..count).map(move |i| Part {
                    lsn: *lsn,
                    codec: *codec,
                    index: i + 1,
                    count,
                    bytes: bytes
                        .get(i * self.max_part..((i + 1) * self.max_part).min(bytes.len()))
                        .unwrap_or_default(),
                })
            })
            .collect();
        let outage = *self.outage.lock().unwrap_or_else(|p| p.into_inner());
        let budget = match outage {
            Some(next_try) if Instant::now() < next_try => {
                return Err(ShipError::Unavailable {
                    lsn: frames.first().map_or(0, |f| f.lsn),
                    detail: "the stream did not take the last frames; trying again within a second"
                        .to_owned(),
                });
            }
            Some(_) => self.ack_timeout.min(self.budget),
            None => self.budget,
        };
        let deadline = Instant::now() + budget;
        let mut last = self.last_sequence();
        let mut done = 0;
        let mut why = String::new();
        while done < parts.len() {
            if Instant::now() >= deadline {
                *self.last.lock().unwrap_or_else(|p| p.into_inner()) = last;
                *self.outage.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Instant::now() + RETRY_AFTER);
                return Err(ShipError::Unavailable {
                    lsn: parts[done].lsn,
                    detail: why,
                });
            }
            // Every message not yet acked, each expecting the one before:
            // its sequence, and after the first its id too. So a message
            // is stored only right after its predecessor: once one is
            // refused, every later one is too, and none lands behind
            // another writer's message in the gap. (The first expects the
            // sequence alone: after an election, a server forgets the last
            // id of a stream idle past its duplicate window.)
            let mut pending = Vec::new();
            for (k, part) in parts[done..].iter().enumerate() {
                let mut message = self.message(part, last + k as u64);
                if k > 0 {
                    message =
                        message.expected_last_message_id(self.message_id(&parts[done + k - 1]));
                }
                match self
                    .context
                    .send_publish(self.subject.clone(), message)
                    .await
                {
                    Ok(ack) => pending.push(ack),
                    Err(e) => {
                        why = e.to_string();
                        break;
                    }
                }
            }
            for ack in pending {
                let part = &parts[done];
                match tokio::time::timeout(self.ack_timeout, ack).await {
                    Ok(Ok(ack)) => {
                        last = ack.sequence;
                        done += 1;
                    }
                    // The first message not acked expected the stream to
                    // end where this primary left it, and it did not. The
                    // stream's last message says why: another writer's
                    // (replaced), or one of this publisher's own whose ack
                    // was lost (a retry after an election can be refused
                    // instead of acked as a duplicate): go on after it.
                    Ok(Err(e))
                        if matches!(
                            e.kind(),
                            PublishErrorKind::WrongLastSequence
                                | PublishErrorKind::WrongLastMessageId
                        ) =>
                    {
                        match self.tail().await {
                            Ok(Some((seq, id))) if id.contains(&self.writer_id()) => {
                                if let Some(k) =
                                    parts[done..].iter().position(|p| self.message_id(p) == id)
                                {
                                    done += k + 1;
                                }
                                last = seq;
                                why = format!(
                                    "the stream ends at sequence {seq}, a message of this primary's: {e}"
                                );
                                break;
                            }
                            Ok(Some((seq, id))) => {
                                *self.last.lock().unwrap_or_else(|p| p.into_inner()) = last;
                                return Err(ShipError::Replaced {
                                    lsn: part.lsn,
                                    detail: format!(
                                        "the stream no longer ends at sequence {last}: its last message, {seq}, is {id:?}, another writer's: {e}"
                                    ),
                                });
                            }
                            // No message where this primary's should be: a
                            // server that has not caught up answered (an
                            // election). Not evidence of another writer.
                            Ok(None) => {
                                why = format!("{e}; the stream answered that it holds no message");
                                break;
                            }
                            Err(read) => {
                                why = format!("{e}; reading the stream's last message: {read}");
                                break;
                            }
                        }
                    }
                    Ok(Err(e)) => {
                        why = e.to_string();
                        break;
                    }
                    Err(_) => {
                        why = format!("no ack within {:?}", self.ack_timeout);
                        break;
                    }
                }
            }
            if done < parts.len() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = last;
        *self.outage.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }
}

impl Publisher {
    /// Runs `work` on the runtime and waits for it: from the store's log
    /// thread directly; from a thread of the runtime (the store opening),
    /// on a thread of its own.
    fn wait<T: Send>(&self, work: impl std::future::Future<Output = T> + Send) -> T {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.runtime.block_on(work);
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| self.runtime.block_on(work))
                .join()
                .expect("a replication call panicked")
        })
    }

    /// The stream's last frame (its message id and number), if any; where
    /// the stream ends is read again, as another writer may have appended
    /// since this publisher connected.
    async fn last_frame(&self) -> Result<Option<(String, u64)>, TailError> {
        let mut stream = self.stream.clone();
        let last = stream.info().await?.state.last_sequence;
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = last;
        if last == 0 {
            return Ok(None);
        }
        let message = self
            .stream
            .get_last_raw_message_by_subject(&self.subject)
            .await?;
        let header = |name: &str| header(&message.headers, name);
        let lsn: u64 = header(LSN_HEADER).parse().unwrap_or(0);
        // The last message may be a part of a frame whose other parts
        // never came (its primary stopped): the frame before is complete.
        let complete = match header(PART_HEADER).split_once('/') {
            Some((i, n)) if i != n => lsn.saturating_sub(1),
            _ => lsn,
        };
        Ok(Some((header("Nats-Msg-Id"), complete)))
    }
}

impl Shipper for Publisher {
    fn attach(&self, tag: u32) -> Result<u64, ShipError> {
        self.tag.store(tag, std::sync::atomic::Ordering::Relaxed);
        let found = self
            .wait(self.last_frame())
            .map_err(|e| ShipError::Unreadable {
                detail: e.to_string(),
            })?;
        match found {
            None => Ok(0),
            Some((id, _)) if !id.starts_with(&format!("{tag:08x}-")) => Err(ShipError::Mismatch {
                detail: format!(
                    "its last frame {id:?} is another inbox's (this database's tag is {tag:08x}): give each inbox its own stream"
                ),
            }),
            Some((_, last)) => Ok(last),
        }
    }

    fn ship(&self, frames: &[ShippedFrame<'_>]) -> Result<(), ShipError> {
        let shipped = self.wait(self.publish(frames));
        if shipped.is_err()
            && let Some(metrics) = &self.metrics
        {
            metrics.publish_failed();
        }
        shipped
    }
}

/// Why a frame's bytes in the stream cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error(
        "its codec {0:?} is unknown to this build (a newer primary wrote it: upgrade this standby)"
    )]
    Unknown(String),
    #[error("it is not a whole zstd frame of a known size")]
    NoSize,
    #[error("it declares {0} bytes, more than any frame")]
    TooLarge(u64),
    #[error("it does not decompress: {0}")]
    Corrupt(std::io::Error),
}

/// A frame as the log holds it, from its bytes in the stream and its
/// messages' `Hookinbox-Codec` (empty: none, the bytes as they are).
pub fn decode(codec: &str, bytes: Vec<u8>) -> Result<Vec<u8>, DecodeError> {
    if codec.is_empty() {
        return Ok(bytes);
    }
    if codec != FrameCodec::Zstd.as_str() {
        return Err(DecodeError::Unknown(codec.to_owned()));
    }
    let size = match zstd::zstd_safe::get_frame_content_size(&bytes) {
        Ok(Some(size)) => size,
        _ => return Err(DecodeError::NoSize),
    };
    if size > LARGEST_FRAME {
        return Err(DecodeError::TooLarge(size));
    }
    let plain = zstd::bulk::decompress(&bytes, size as usize).map_err(DecodeError::Corrupt)?;
    if plain.len() as u64 != size {
        return Err(DecodeError::NoSize);
    }
    Ok(plain)
}

/// A header's value as text (empty when the message has none).
pub(super) fn header(headers: &async_nats::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .map(|v| v.as_str().to_owned())
        .unwrap_or_default()
}

/// A client of `settings`' servers, named for `role`, and its JetStream
/// context (acks waited for up to `ack_timeout`).
pub(super) async fn connect(
    settings: &StreamSettings,
    role: &str,
) -> Result<(Client, jetstream::Context), ConnectError> {
    let connect_err = |detail: String| ConnectError::Connect {
        urls: settings.urls.clone(),
        detail,
    };
    let mut options = match &settings.creds_file {
        Some(path) => ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| connect_err(format!("cannot read the credentials file: {e}")))?,
        None => ConnectOptions::new(),
    };
    options = options
        .name(format!("hookinbox-{role}/{}", env!("CARGO_PKG_VERSION")))
        .connection_timeout(settings.ack_timeout)
        // A node that stops answering is left within a few seconds.
        .ping_interval(Duration::from_secs(1))
        .max_reconnects(None);
    if let Some(ca) = &settings.ca {
        options = options.add_root_certificates(ca.clone());
    }
    if let Some(token) = &settings.token {
        options = options.token(token.expose().to_owned());
    }
    let servers: Vec<&str> = settings.urls.split(',').map(str::trim).collect();
    let client = options
        .connect(servers)
        .await
        .map_err(|e| connect_err(e.to_string()))?;
    let mut context = jetstream::new(client.clone());
    context.set_timeout(settings.ack_timeout);
    Ok((client, context))
}

/// The subject a stream's frames are published on.
pub fn subject_of(stream: &str) -> String {
    format!("hookinbox.log.{stream}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_frame_decodes_to_its_bytes_and_a_plain_one_is_as_it_came() {
        let frame: Vec<u8> = (0..40)
            .flat_map(|i| {
                format!("{{\"id\":\"evt_{i}\",\"type\":\"payment_intent.succeeded\"}}").into_bytes()
            })
            .collect();
        let packed = zstd::bulk::compress(&frame, ZSTD_LEVEL).unwrap();
        assert!(
            packed.len() * 4 < frame.len(),
            "{} of {}",
            packed.len(),
            frame.len()
        );
        assert_eq!(decode("zstd", packed).unwrap(), frame);
        assert_eq!(decode("", frame.clone()).unwrap(), frame);
    }

    #[test]
    fn an_unknown_codec_a_corrupt_frame_or_an_oversized_one_is_an_error() {
        assert!(matches!(
            decode("brotli", b"x".to_vec()),
            Err(DecodeError::Unknown(c)) if c == "brotli"
        ));
        assert!(matches!(
            decode("zstd", b"not zstd at all".to_vec()),
            Err(DecodeError::NoSize)
        ));
        let mut packed = zstd::bulk::compress(&[7u8; 4096], ZSTD_LEVEL).unwrap();
        let end = packed.len() - 1;
        packed.truncate(end);
        assert!(decode("zstd", packed).is_err());
        // A frame whose header declares 2 GiB: after the magic number,
        // the descriptor (its top bits: a 4-byte content size) and the
        // window byte, the size rewritten.
        let mut lying = zstd::bulk::compress(&vec![0u8; 4 << 20], ZSTD_LEVEL).unwrap();
        assert_eq!(lying[4] >> 6, 2, "a 4-byte size field at this size");
        assert_eq!(lying[4] & 0x20, 0, "a window byte before the size");
        lying[6..10].copy_from_slice(&(2u32 << 30).to_le_bytes());
        assert!(matches!(
            decode("zstd", lying),
            Err(DecodeError::TooLarge(size)) if size == 2 << 30
        ));
    }
}
