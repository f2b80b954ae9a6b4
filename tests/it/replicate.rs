//! Replication's primary side against a real `nats-server -js`: each
//! batch's frame is a message of the stream before the batch is answered,
//! numbered without gaps; a second writer on the stream, or a stream of
//! another inbox, stops the primary; without the stream an answer is 503
//! and its frame is shipped when the stream returns.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use hookinbox::replicate::{Publisher, StreamSettings, publish::subject_of};
use hookinbox::store::{KeyAnswer, KeyOp, Store, StoreError, StoreOptions, WriterHandle};
use hookinbox::words::FrameCodec;

use crate::nats::NatsServer;
use crate::support::REPLICATION_ADMIN;

const STREAM: &str = "INBOX";

fn settings(url: &str) -> StreamSettings {
    StreamSettings {
        urls: url.to_owned(),
        stream: STREAM.to_owned(),
        replicas: 1,
        creds_file: None,
        token: None,
        ca: None,
        ack_timeout: Duration::from_secs(1),
        budget: Duration::from_secs(3),
        max_part: None,
        compression: FrameCodec::Zstd,
    }
}

async fn primary(dir: &Path, url: &str) -> Result<(Store, WriterHandle), StoreError> {
    let publisher = Publisher::connect(&settings(url)).await.unwrap();
    let options = StoreOptions {
        shipper: Some(Arc::new(publisher)),
        ..StoreOptions::new(dir, Duration::from_secs(3600))
    };
    Store::open(options)
}

async fn claim(store: &Store, key: &str) -> Result<KeyAnswer, StoreError> {
    let op = KeyOp::Claim {
        lease_ms: 30_000,
        ttl_ms: 3_600_000,
    };
    store.key("app", key, op, 1_000).await
}

async fn close(store: Store, writer: WriterHandle) {
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

/// (message id, Hookinbox-Lsn) of every message of the stream, in order.
pub(crate) async fn frames(url: &str) -> Vec<(String, u64)> {
    headers_of_each(url, ["Nats-Msg-Id", "Hookinbox-Lsn"])
        .await
        .into_iter()
        .map(|[id, lsn]| (id.unwrap(), lsn.unwrap().parse().unwrap()))
        .collect()
}

/// The headers `names` of every message of the stream, in order.
async fn headers_of_each<const N: usize>(url: &str, names: [&str; N]) -> Vec<[Option<String>; N]> {
    let client = async_nats::connect(url).await.unwrap();
    let stream = jetstream::new(client).get_stream(STREAM).await.unwrap();
    let mut out = Vec::new();
    let mut seq = 1;
    while let Ok(message) = stream.get_raw_message(seq).await {
        out.push(names.map(|name| message.headers.get(name).map(|v| v.as_str().to_owned())));
        seq += 1;
    }
    out
}

/// Every answered change has its frame in the stream, the frames numbered
/// 1, 2, 3, … under the database's tag; a reopened primary goes on after
/// them.
/// Waits until `node` holds `n` events or more: a standby has followed the
/// stream that far.
async fn holds(node: &crate::support::TestServer, n: usize) {
    crate::support::eventually(
        &format!("the standby follows to {n} events"),
        Duration::from_secs(15),
        Duration::from_millis(50),
        async || match node.events().len() {
            have if have >= n => Ok(()),
            have => Err(format!("{have} of {n} events")),
        },
    )
    .await;
}

/// Waits up to `within` until `node` answers `/readyz` with 200: it has
/// taken over (a standby answers 503).
async fn takes_over(node: &crate::support::TestServer, what: &str, within: Duration) {
    crate::support::eventually(what, within, Duration::from_millis(100), async || {
        let ready = node.admin("GET", "/readyz", None, None).await;
        match ready.status {
            200 => Ok(()),
            status => Err(format!("readyz {status}: {:?}", ready.json)),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_answered_change_is_a_frame_of_the_stream_numbered_without_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let data = dir.path().join("data");
    let (store, writer) = primary(&data, &nats.url()).await.unwrap();
    for i in 0..20 {
        assert!(matches!(
            claim(&store, &format!("k{i}")).await.unwrap(),
            KeyAnswer::Claimed { .. }
        ));
        let shipped = frames(&nats.url()).await;
        assert!(
            shipped.len() > i,
            "answered before its frame was in the stream"
        );
    }
    let tag = store.public_id(0)[4..12].to_owned();
    close(store, writer).await;
    let (store, writer) = primary(&data, &nats.url()).await.unwrap();
    claim(&store, "after-reopen").await.unwrap();
    close(store, writer).await;
    let shipped = frames(&nats.url()).await;
    let lsns: Vec<u64> = shipped.iter().map(|(_, lsn)| *lsn).collect();
    assert_eq!(lsns, (1..=lsns.len() as u64).collect::<Vec<_>>());
    // `<tag>-<lsn>-<writer>`: a writer of its own for each open.
    let mut writers = std::collections::BTreeSet::new();
    for (id, lsn) in &shipped {
        let (frame, writer) = id.rsplit_once('-').unwrap();
        assert_eq!(frame, format!("{tag}-{lsn}"));
        assert_eq!(writer.len(), 16, "{id}");
        writers.insert(writer.to_owned());
    }
    assert_eq!(writers.len(), 2);
}

/// Another writer appends to the stream: the primary's next answer is 503,
/// and so is every one after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_on_the_stream_stops_the_primary_for_good() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let (store, writer) = primary(&dir.path().join("data"), &nats.url())
        .await
        .unwrap();
    claim(&store, "a").await.unwrap();
    let client = async_nats::connect(nats.url()).await.unwrap();
    jetstream::new(client)
        .publish(subject_of(STREAM), "not a frame".into())
        .await
        .unwrap()
        .await
        .unwrap();
    for key in ["b", "c"] {
        let answer = claim(&store, key).await;
        let text = format!("{:?}", answer);
        assert!(
            answer.is_err() && text.contains("Replaced"),
            "{key}: {text}"
        );
    }
    close(store, writer).await;
}

/// Another writer's message lands between this primary's last one and a
/// group of two frames: the first frame is refused (the stream does not
/// end where it expected), and so is the second, although the stream's
/// length is what it expected, because it also expects the first frame's
/// id. Without that, the second would be stored behind the other writer's
/// message, the stream's end would look like this primary's own, and both
/// frames would be answered as taken while the first is in no stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_is_never_stored_behind_another_writer_s_message_in_the_gap_of_one_refused() {
    use hookinbox::store::{ShipError, ShippedFrame, Shipper};
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let publisher = Arc::new(Publisher::connect(&settings(&nats.url())).await.unwrap());
    let frame = |lsn: u64| (lsn, vec![lsn as u8; 100]);
    let ship = |frames: Vec<(u64, Vec<u8>)>| {
        let publisher = publisher.clone();
        tokio::task::spawn_blocking(move || {
            let frames: Vec<ShippedFrame<'_>> = frames
                .iter()
                .map(|(lsn, payload)| ShippedFrame { lsn: *lsn, payload })
                .collect();
            publisher.ship(&frames)
        })
    };
    let attached = publisher.clone();
    let held = tokio::task::spawn_blocking(move || attached.attach(0xab))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(held, 0);
    ship(vec![frame(1)]).await.unwrap().unwrap();
    let client = async_nats::connect(nats.url()).await.unwrap();
    jetstream::new(client)
        .publish(subject_of(STREAM), "another writer's".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let answer = ship(vec![frame(2), frame(3)]).await.unwrap();
    assert!(
        matches!(answer, Err(ShipError::Replaced { lsn: 2, .. })),
        "{answer:?}"
    );
    let client = async_nats::connect(nats.url()).await.unwrap();
    let stream = jetstream::new(client).get_stream(STREAM).await.unwrap();
    let mut stream = stream;
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        2,
        "frame 1 and the other writer's message, nothing after them"
    );
}

/// A data dir whose database is not the one the stream continues is
/// refused when it opens, with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_another_inbox_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let (store, writer) = primary(&dir.path().join("one"), &nats.url()).await.unwrap();
    claim(&store, "a").await.unwrap();
    close(store, writer).await;
    match primary(&dir.path().join("two"), &nats.url()).await {
        Err(e) => {
            let text = hookinbox::store::Report(&e).to_string();
            assert!(text.contains("another inbox"), "{text}");
        }
        Ok(_) => panic!("a second inbox on the same stream was accepted"),
    }
}

/// The stream's server is down: the answer is 503 once the budget runs
/// out, and the change is kept; when the server is back, the held frame is
/// shipped before the next one, and the retried claim finds the key taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_stream_an_answer_is_503_and_its_frame_ships_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let mut nats = NatsServer::start(&dir.path().join("nats"));
    let (store, writer) = primary(&dir.path().join("data"), &nats.url())
        .await
        .unwrap();
    claim(&store, "a").await.unwrap();
    nats.stop();
    let answer = claim(&store, "b").await;
    assert!(format!("{answer:?}").contains("Unavailable"), "{answer:?}");
    nats.restart();
    // Refused at once for a second after the failure, then shipped.
    let again = crate::support::eventually(
        "a claim is shipped again",
        Duration::from_secs(10),
        Duration::from_millis(200),
        async || claim(&store, "b").await.map_err(|e| format!("{e:?}")),
    )
    .await;
    assert!(matches!(again, KeyAnswer::Busy { .. }), "{again:?}");
    close(store, writer).await;
    let lsns: Vec<u64> = frames(&nats.url()).await.iter().map(|(_, l)| *l).collect();
    assert_eq!(lsns, (1..=lsns.len() as u64).collect::<Vec<_>>());
}

/// A primary upgraded in place: frames as the log holds them, then
/// compressed ones, in one stream. A new standby applies both; a frame in
/// a codec it does not know stops it, naming the frame, with nothing of
/// it applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_compressed_frames_in_one_stream_are_followed_and_an_unknown_codec_stops() {
    use hookinbox::replicate::publish::DecodeError;
    use hookinbox::replicate::{FollowError, Follower};

    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let primary_dir = dir.path().join("primary");
    let mut records = Vec::new();
    for (phase, compression) in [FrameCodec::Plain, FrameCodec::Zstd]
        .into_iter()
        .enumerate()
    {
        let publisher = Publisher::connect(&StreamSettings {
            compression,
            ..settings(&nats.url())
        })
        .await
        .unwrap();
        let (store, writer) = Store::open(StoreOptions {
            shipper: Some(Arc::new(publisher)),
            ..StoreOptions::new(&primary_dir, Duration::from_secs(3600))
        })
        .unwrap();
        for i in phase * 10..phase * 10 + 10 {
            claim(&store, &long_key(i)).await.unwrap();
            records.push(store.key_record("app", &long_key(i), 1_000).unwrap());
        }
        close(store, writer).await;
    }
    let codecs = codecs(&nats.url()).await;
    let first_compressed = codecs
        .iter()
        .position(|c| c.is_some())
        .expect("compressed frames");
    assert!(first_compressed >= 10, "{codecs:?}");
    assert!(
        codecs[first_compressed..]
            .iter()
            .filter(|c| c.is_some())
            .count()
            >= 10
    );

    // A frame after them in a codec no build knows.
    let ids = frames(&nats.url()).await;
    let (last_id, last_lsn) = ids.last().unwrap().clone();
    let tag = last_id.split('-').next().unwrap().to_owned();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", format!("{tag}-{}-0", last_lsn + 1).as_str());
    headers.insert("Hookinbox-Lsn", (last_lsn + 1).to_string().as_str());
    headers.insert("Hookinbox-Codec", "brotli");
    jetstream::new(client)
        .publish_with_headers(subject_of(STREAM), headers, "?".into())
        .await
        .unwrap()
        .await
        .unwrap();

    let follower = Follower::connect(&settings(&nats.url())).await.unwrap();
    let tag = follower.tag().await.unwrap().unwrap();
    let (standby, standby_writer) = Store::open(StoreOptions {
        standby: true,
        tag: Some(tag),
        ..StoreOptions::new(dir.path().join("standby"), Duration::from_secs(3600))
    })
    .unwrap();
    let end = follower.end().await.unwrap();
    let stopped = follower
        .follow(&standby, tag, Some(end), std::future::pending())
        .await;
    match stopped {
        Err(FollowError::Undecodable {
            frame,
            why: DecodeError::Unknown(codec),
            ..
        }) => {
            assert_eq!((frame, codec.as_str()), (last_lsn + 1, "brotli"));
        }
        other => panic!("{other:?}"),
    }
    for (i, record) in records.iter().enumerate() {
        assert_eq!(
            &standby.key_record("app", &long_key(i), 1_000).unwrap(),
            record,
            "k{i}"
        );
    }
    assert_eq!(standby.last_frame().unwrap().0, last_lsn);
    close(standby, standby_writer).await;
}

/// A standby follows the stream as the primary answers; the primary's
/// machine is lost (its data dir deleted); the standby applies the rest,
/// is promoted, and goes on: every answered key is there, a resent claim
/// finds its key, and its new frames continue the stream. Once with each
/// frame one message, once with frames cut in parts of 16 bytes (as a
/// frame larger than the server's `max_payload` is), both compressed; and
/// once with frames as the log holds them (`compression = "none"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_follows_and_takes_over_with_every_answered_change() {
    for (max_part, compression) in [
        (None, FrameCodec::Zstd),
        (Some(16), FrameCodec::Zstd),
        (None, FrameCodec::Plain),
    ] {
        follows_and_takes_over(max_part, compression).await;
    }
}

/// A key long and repetitive enough that its frame compresses.
fn long_key(i: usize) -> String {
    format!("k{i}-{}", "order-reference-".repeat(8))
}

/// The `Hookinbox-Codec` of every message of the stream, in order.
async fn codecs(url: &str) -> Vec<Option<String>> {
    let each = headers_of_each(url, ["Hookinbox-Codec"]).await;
    each.into_iter().map(|[codec]| codec).collect()
}

async fn follows_and_takes_over(max_part: Option<usize>, compression: FrameCodec) {
    use hookinbox::replicate::Follower;

    let settings = |url: &str| StreamSettings {
        max_part,
        compression,
        ..settings(url)
    };
    let primary = async |dir: &Path, url: &str| {
        let publisher = Publisher::connect(&settings(url)).await.unwrap();
        Store::open(StoreOptions {
            shipper: Some(Arc::new(publisher)),
            ..StoreOptions::new(dir, Duration::from_secs(3600))
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let primary_dir = dir.path().join("primary");
    let (store, writer) = primary(&primary_dir, &nats.url()).await.unwrap();
    claim(&store, "first").await.unwrap();

    let follower = Follower::connect(&settings(&nats.url())).await.unwrap();
    let tag = follower
        .tag()
        .await
        .unwrap()
        .expect("the stream has frames");
    let standby_options = StoreOptions {
        standby: true,
        tag: Some(tag),
        shipper: Some(Arc::new(
            Publisher::connect(&settings(&nats.url())).await.unwrap(),
        )),
        ..StoreOptions::new(dir.path().join("standby"), Duration::from_secs(3600))
    };
    let (standby, standby_writer) = Store::open(standby_options).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let following = {
        let standby = standby.clone();
        tokio::spawn(async move {
            let follower = follower;
            let applied = follower
                .follow(&standby, tag, None, async {
                    let _ = stopped.await;
                })
                .await;
            (follower, applied)
        })
    };
    let mut tokens = Vec::new();
    for i in 0..30 {
        match claim(&store, &long_key(i)).await.unwrap() {
            KeyAnswer::Claimed { token, .. } => tokens.push(token),
            other => panic!("{other:?}"),
        }
    }
    let answered: Vec<_> = (0..30)
        .map(|i| store.key_record("app", &long_key(i), 1_000).unwrap())
        .collect();
    // The primary's machine is lost.
    close(store, writer).await;
    std::fs::remove_dir_all(&primary_dir).unwrap();

    stop.send(()).unwrap();
    let (follower, applied) = following.await.unwrap();
    applied.unwrap();
    let end = follower.end().await.unwrap();
    follower
        .follow(&standby, tag, Some(end), std::future::pending())
        .await
        .unwrap();
    standby.promote().await.unwrap();
    for (i, record) in answered.iter().enumerate() {
        assert_eq!(
            &standby.key_record("app", &long_key(i), 1_000).unwrap(),
            record,
            "k{i}"
        );
    }
    assert!(matches!(
        claim(&standby, &long_key(7)).await.unwrap(),
        KeyAnswer::Busy { .. }
    ));
    match claim(&standby, "after").await.unwrap() {
        KeyAnswer::Claimed { token, .. } => assert!(token > *tokens.last().unwrap()),
        other => panic!("{other:?}"),
    }
    close(standby, standby_writer).await;
    let mut lsns: Vec<u64> = frames(&nats.url()).await.iter().map(|(_, l)| *l).collect();
    if max_part.is_some() {
        assert!(
            lsns.windows(2).any(|w| w[0] == w[1]),
            "frames went in parts"
        );
        lsns.dedup();
    }
    assert_eq!(lsns, (1..=lsns.len() as u64).collect::<Vec<_>>());
    let codecs = codecs(&nats.url()).await;
    let compressed = codecs
        .iter()
        .filter(|c| c.as_deref() == Some("zstd"))
        .count();
    match compression {
        FrameCodec::Zstd => assert!(compressed >= 30, "{codecs:?}"),
        FrameCodec::Plain => assert_eq!(codecs, vec![None; codecs.len()]),
    }
}

/// The lease: one holder at a time; renewals keep it; without them it
/// lapses a lease later and another node takes it; the old holder's next
/// renewal says who has it; a release frees it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_has_one_holder_and_lapses_a_lease_after_the_last_renewal() {
    use hookinbox::replicate::{Lease, LeaseError};
    use std::time::Instant;

    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let lease = Duration::from_secs(2);
    let a = Lease::connect(&settings(&nats.url()), "a", lease, None)
        .await
        .unwrap();
    let b = Lease::connect(&settings(&nats.url()), "b", lease, None)
        .await
        .unwrap();
    a.acquire().await.unwrap();
    assert!(matches!(b.acquire().await, Err(LeaseError::Held { holder }) if holder.node == "a"));
    // Renewed every half second for three seconds: longer than a lease.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        a.renew().await.unwrap();
        assert!(b.acquire().await.is_err(), "taken while renewed");
    }
    let last_renewal = Instant::now();
    crate::support::eventually(
        "the lease lapses",
        Duration::from_secs(10),
        Duration::from_millis(50),
        async || b.acquire().await.map_err(|e| format!("{e:?}")),
    )
    .await;
    let taken = last_renewal.elapsed();
    assert!(
        taken >= Duration::from_millis(1_900) && taken < Duration::from_secs(5),
        "taken {taken:?} after the last renewal"
    );
    assert!(matches!(a.renew().await, Err(LeaseError::Held { holder }) if holder.node == "b"));
    b.release().await.unwrap();
    a.acquire().await.unwrap();
    assert_eq!(b.holder().await.unwrap().as_deref(), Some("a"));
}

/// The app as a replicating primary: it takes the lease, each verified
/// webhook's frame is in the stream before its 2xx, and a second node
/// configured as primary while the lease is held is refused at start,
/// naming the holder. A clean stop gives the lease up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_as_primary_holds_the_lease_and_ships_before_each_2xx() {
    use crate::support::{TestServer, server_section, standard_headers, standard_source};
    use hookinbox::clock::Clock;
    use hookinbox::config::Config;

    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let config = |data: &str, node: &str| {
        format!(
            "{}{REPLICATION_ADMIN}[replication]\nurl = \"{}\"\nstream = \"{STREAM}\"\nrole = \"primary\"\nnode = \"{node}\"\nlease = \"2s\"\n\n{}",
            server_section(&dir.path().join(data)),
            nats.url(),
            standard_source("shop")
        )
    };
    let server = TestServer::start(&config("a", "vm-a"), Clock::system()).await;
    for i in 0..5 {
        let body = format!("{{\"type\":\"t\",\"n\":{i}}}").into_bytes();
        let a = server
            .post(
                "/in/shop",
                &standard_headers(&format!("evt_{i}"), &body),
                body,
            )
            .await;
        assert_eq!(a.status, 200, "{:?}", a.json);
        let shipped = frames(&nats.url()).await;
        assert!(
            shipped.len() > i,
            "answered before its frame was in the stream"
        );
    }
    // A second primary while vm-a holds the lease: refused, naming it.
    let (second, _) = Config::from_toml(&config("b", "vm-b"), "test", None, &|_| None)
        .unwrap()
        .resolve()
        .unwrap();
    let listeners = hookinbox::app::Listeners {
        ingest: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        admin: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    };
    let refused = hookinbox::app::App::start(
        second,
        listeners,
        Clock::system(),
        tokio_util::sync::CancellationToken::new(),
    )
    .await;
    match refused {
        Err(e) => assert!(e.to_string().contains("vm-a"), "{e}"),
        Ok(_) => panic!("a second primary started while the lease was held"),
    }
    server.stop().await;
    let lease = hookinbox::replicate::Lease::connect(
        &settings(&nats.url()),
        "probe",
        Duration::from_secs(2),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        lease.holder().await.unwrap(),
        None,
        "given up at a clean stop"
    );
}

/// Two nodes: a primary and a standby that follows it. The standby is not
/// ready and answers webhooks 503; when the primary stops, the standby
/// takes the lease, applies the rest, is promoted and takes webhooks: every
/// event the primary answered is there under its id, a resend is a
/// duplicate, a new event is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_app_follows_and_takes_over_when_the_primary_stops() {
    use crate::support::{TestServer, server_section, standard_headers, standard_source};
    use hookinbox::clock::Clock;

    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let config = |data: &str, node: &str, role: &str| {
        format!(
            "{}{REPLICATION_ADMIN}[replication]\nurl = \"{}\"\nstream = \"{STREAM}\"\nrole = \"{role}\"\nnode = \"{node}\"\nlease = \"2s\"\n\n{}",
            server_section(&dir.path().join(data)),
            nats.url(),
            standard_source("shop")
        )
    };
    let primary = TestServer::start(&config("a", "vm-a", "primary"), Clock::system()).await;
    let send = async |server: &TestServer, id: &str| {
        let body = format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
        server
            .post("/in/shop", &standard_headers(id, &body), body)
            .await
    };
    let mut ids = Vec::new();
    for i in 0..5 {
        let a = send(&primary, &format!("evt_{i}")).await;
        assert_eq!(a.status, 200, "{:?}", a.json);
        ids.push(a.json["id"].as_str().unwrap().to_owned());
    }
    let standby = TestServer::start(&config("b", "vm-b", "standby"), Clock::system()).await;
    holds(&standby, 5).await;
    let ready = standby.admin("GET", "/readyz", None, None).await;
    assert_eq!(ready.status, 503, "{:?}", ready.json);
    assert!(
        ready.json["store"].as_str().unwrap().contains("standby"),
        "{:?}",
        ready.json
    );
    assert_eq!(send(&standby, "evt_x").await.status, 503);

    primary.stop().await;
    takes_over(&standby, "the standby takes over", Duration::from_secs(15)).await;
    let stored: Vec<String> = standby.events().iter().map(|e| e.id.clone()).collect();
    assert_eq!(stored, ids);
    let again = send(&standby, "evt_0").await;
    assert_eq!(
        (again.status, again.json["id"].as_str()),
        (200, Some(ids[0].as_str()))
    );
    let new = send(&standby, "evt_5").await;
    assert_eq!(new.status, 200, "{:?}", new.json);
    assert_eq!(standby.events().len(), 6);
    standby.stop().await;
}

/// The primary's machine is lost under load: its process killed with
/// SIGKILL and its data dir deleted. The standby takes over within a
/// lease and a few seconds, and every event any sender got a 2xx for is
/// there, under the id it was answered with; a resend of each is a
/// duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_has_every_answered_event_after_the_primary_is_lost_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    lost_under_load(dir.path(), &nats.url(), 1).await;
}

/// The same on three NATS nodes, the stream and the lease replicated
/// three times (R3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_nats_nodes_the_standby_has_every_answered_event_after_the_primary_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = crate::nats::NatsCluster::start(dir.path()).await;
    lost_under_load(dir.path(), &cluster.urls(), 3).await;
}

async fn lost_under_load(dir: &Path, urls: &str, replicas: usize) {
    use crate::support::{
        BinaryServer, STANDARD_SECRET, TestServer, client, server_section, standard_headers,
        standard_source, write_config,
    };
    let request_body = |id: &str| format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
    use crate::destination::{Destination, Mode};
    use hookinbox::clock::Clock;
    use std::time::Instant;

    // The app behind both nodes: slow enough that deliveries are in flight
    // at the kill, fast enough to take every answered event within the
    // wait below (4 at a time: 400 a second; compressed frames let a
    // primary answer ≈ 4,000 events a second here, ≈ 8,000 before the kill).
    let app = Destination::start(Mode::Slow(Duration::from_millis(10))).await;
    let section = |data: &str, node: &str, role: &str| {
        format!(
            "{}{REPLICATION_ADMIN}[replication]\nurl = \"{urls}\"\nstream = \"{STREAM}\"\nreplicas = {replicas}\nrole = \"{role}\"\nnode = \"{node}\"\nlease = \"3s\"\n\n{}destination = \"{}\"\ndestination_secret = \"{STANDARD_SECRET}\"\nmax_concurrency = 4\ninitial_interval = \"50ms\"\n",
            server_section(&dir.join(data)),
            standard_source("shop"),
            app.url()
        )
    };
    let primary_dir = dir.join("a");
    let config = write_config(dir, &section("a", "vm-a", "primary"));
    let mut primary = BinaryServer::start(&config, &[], None);
    let standby = TestServer::start(&section("b", "vm-b", "standby"), Clock::system()).await;

    // Four senders, each recording what it got a 2xx for, until the kill.
    let answered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut senders = Vec::new();
    for s in 0..4 {
        let (answered, stop, url) = (answered.clone(), stop.clone(), primary.url("/in/shop"));
        senders.push(tokio::spawn(async move {
            let http = client();
            for i in 0..10_000 {
                if stop.is_cancelled() {
                    break;
                }
                let id = format!("evt_{s}_{i}");
                let body = request_body(&id);
                let mut request = http.post(&url).body(body);
                for (name, value) in standard_headers(&id, &request_body(&id)) {
                    request = request.header(name, value);
                }
                // The connection breaks at the kill: that sender is done.
                let Ok(response) = request.send().await else {
                    break;
                };
                if response.status() == 200 {
                    let json: serde_json::Value = response.json().await.unwrap_or_default();
                    let stored = json["id"].as_str().unwrap_or_default().to_owned();
                    answered.lock().unwrap().push((id, stored));
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    primary.kill9();
    let killed = Instant::now();
    stop.cancel();
    for s in senders {
        s.await.unwrap();
    }
    std::fs::remove_dir_all(&primary_dir).unwrap();
    let answered = answered.lock().unwrap().clone();
    assert!(answered.len() > 50, "load ran: {}", answered.len());

    let within = Duration::from_secs(20).saturating_sub(killed.elapsed());
    takes_over(&standby, "the standby takes over", within).await;
    let took = killed.elapsed();
    println!(
        "R{replicas}: takeover {took:?} after the kill (lease 3 s), {} events answered",
        answered.len()
    );
    for (event_id, id) in &answered {
        let found = standby.store().find("shop", event_id).unwrap();
        assert_eq!(found.map(|e| e.id), Some(id.clone()), "{event_id}");
    }
    // Deliveries resume on the new primary: every answered event reaches
    // the app (those in flight at the kill again, as interrupted).
    let answered_ids: std::collections::BTreeSet<&str> =
        answered.iter().map(|(_, id)| id.as_str()).collect();
    crate::support::eventually(
        "every answered event reaches the app",
        Duration::from_secs(90),
        Duration::from_millis(100),
        async || {
            let received = app.received();
            let seen: std::collections::BTreeSet<&str> =
                received.iter().map(|r| r.header("webhook-id")).collect();
            match answered_ids.difference(&seen).count() {
                0 => Ok(()),
                missing => Err(format!("{missing} answered events not received")),
            }
        },
    )
    .await;
    // Regression (an outside drill): each node had generated its own
    // delivery key, and the app refused every delivery after the takeover.
    // Every delivery, before the kill and after it, verifies with the key
    // the app was given.
    let key = hookinbox::standard_webhooks::StandardKey::parse(STANDARD_SECRET).unwrap();
    let received = app.received();
    let unsigned = received
        .iter()
        .filter(|r| {
            let ts = r.header("webhook-timestamp").parse().unwrap();
            r.header("webhook-signature") != key.sign(r.header("webhook-id"), ts, &r.body)
        })
        .count();
    assert_eq!(unsigned, 0, "deliveries not signed with the app's key");
    let interrupted = standby
        .events()
        .iter()
        .filter(|e| {
            standby
                .store()
                .attempts(e.seq)
                .unwrap()
                .iter()
                .any(|a| a.class == hookinbox::store::schema::AttemptClass::Interrupted)
        })
        .count();
    println!(
        "R{replicas}: every answered event delivered; {interrupted} after an interrupted attempt"
    );
    for (event_id, id) in answered.iter().take(20) {
        let body = request_body(event_id);
        let again = standby
            .post("/in/shop", &standard_headers(event_id, &body), body)
            .await;
        assert_eq!(
            (again.status, again.json["id"].as_str()),
            (200, Some(id.as_str()))
        );
    }
    standby.stop().await;
}

/// Refused at start with the reason: NATS servers that do not answer, a
/// standby whose stream holds no frame yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_cannot_replicate_is_refused_at_start_with_the_reason() {
    use crate::support::{server_section, standard_source};
    use hookinbox::app::{App, Listeners};
    use hookinbox::clock::Clock;
    use hookinbox::config::Config;

    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let start = async |url: &str, role: &str| {
        let text = format!(
            "{}{REPLICATION_ADMIN}[replication]\nurl = \"{url}\"\nrole = \"{role}\"\n\n{}",
            server_section(&dir.path().join(role)),
            standard_source("shop")
        );
        let (config, _) = Config::from_toml(&text, "test", None, &|_| None)
            .unwrap()
            .resolve()
            .unwrap();
        let listeners = Listeners {
            ingest: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
            admin: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        };
        match App::start(
            config,
            listeners,
            Clock::system(),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{role} at {url} started"),
        }
    };
    let unreachable = start(&format!("nats://{closed}"), "primary").await;
    assert!(
        unreachable.contains("cannot connect to NATS"),
        "{unreachable}"
    );
    let empty = start(&nats.url(), "standby").await;
    assert!(empty.contains("start the primary first"), "{empty}");
}

/// The primary snapshots its database into the stream's object store, and
/// the stream forgets the frames the snapshot holds; a standby started
/// afterwards with an empty data dir restores the snapshot, applies the
/// frames after it, and has every event. A standby whose data ends before
/// the stream begins starts over from the snapshot (its data set aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_standby_starts_from_the_newest_snapshot_and_the_frames_after_it() {
    use crate::support::{TestServer, server_section, standard_headers, standard_source};
    use hookinbox::clock::Clock;
    use hookinbox::replicate::Snapshots;

    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let config = |data: &str, node: &str, role: &str| {
        format!(
            "{}{REPLICATION_ADMIN}[replication]\nurl = \"{}\"\nstream = \"{STREAM}\"\nrole = \"{role}\"\nnode = \"{node}\"\n\
             lease = \"2s\"\nsnapshot_interval = \"10s\"\n\n{}",
            server_section(&dir.path().join(data)),
            nats.url(),
            standard_source("shop")
        )
    };
    let primary = TestServer::start(&config("a", "vm-a", "primary"), Clock::system()).await;
    let send = async |server: &TestServer, id: &str| {
        let body = format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
        let answer = server
            .post("/in/shop", &standard_headers(id, &body), body)
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        answer.json["id"].as_str().unwrap().to_owned()
    };
    // A standby that follows from the start, then stops for a while.
    let mut ids = Vec::new();
    for i in 0..30 {
        ids.push(send(&primary, &format!("evt_{i}")).await);
    }
    let early = TestServer::start(&config("b", "vm-b", "standby"), Clock::system()).await;
    holds(&early, 30).await;
    early.stop().await;
    for i in 30..60 {
        ids.push(send(&primary, &format!("evt_{i}")).await);
    }

    let snapshots = Snapshots::connect(&settings(&nats.url())).await.unwrap();
    let snapshot = crate::support::eventually(
        "a snapshot is taken",
        Duration::from_secs(30),
        Duration::from_millis(200),
        async || {
            snapshots
                .list()
                .await
                .unwrap()
                .pop()
                .ok_or_else(|| "no snapshot".to_owned())
        },
    )
    .await;
    println!("snapshot {snapshot:?}");
    assert!(snapshot.lsn > 0 && snapshot.stream_seq > 0, "{snapshot:?}");
    // The stream forgot the frames before the snapshot's last one (which
    // it keeps: it says where the stream ends even when nothing follows).
    let client = crate::nats::connect(&nats.url()).await;
    let mut stream = jetstream::new(client).get_stream(STREAM).await.unwrap();
    crate::support::eventually(
        "the stream forgets the frames before the snapshot",
        Duration::from_secs(10),
        Duration::from_millis(100),
        async || match stream.info().await.unwrap().state.first_sequence {
            first if first == snapshot.stream_seq => Ok(()),
            first => Err(format!("its first frame is {first}")),
        },
    )
    .await;
    // A primary restarted on the forgetful stream goes on from it.
    primary.stop().await;
    let primary = TestServer::start(&config("a", "vm-a", "primary"), Clock::system()).await;
    for i in 60..80 {
        ids.push(send(&primary, &format!("evt_{i}")).await);
    }

    // A new standby, empty data dir: the snapshot, then the frames after it.
    let fresh = TestServer::start(&config("c", "vm-c", "standby"), Clock::system()).await;
    // The one that stopped before the snapshot: its data ends before the
    // stream begins now.
    let behind = TestServer::start(&config("b", "vm-b", "standby"), Clock::system()).await;
    for standby in [&fresh, &behind] {
        crate::support::eventually(
            "the standby has every event",
            Duration::from_secs(15),
            Duration::from_millis(50),
            async || {
                let stored: Vec<String> = standby.events().iter().map(|e| e.id.clone()).collect();
                match stored == ids {
                    true => Ok(()),
                    false => Err(format!("{} of {} events", stored.len(), ids.len())),
                }
            },
        )
        .await;
    }
    let set_aside = std::fs::read_dir(dir.path().join("b"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("set-aside-"))
        .count();
    assert_eq!(set_aside, 1, "the behind standby's data was set aside");
    behind.stop().await;
    primary.stop().await;
    // The restored standby takes over with every event and goes on.
    takes_over(
        &fresh,
        "the restored standby takes over",
        Duration::from_secs(15),
    )
    .await;
    send(&fresh, "evt_after").await;
    assert_eq!(fresh.events().len(), 81);
    fresh.stop().await;
}

/// A primary frozen past its lease (SIGSTOP) is replaced; woken up
/// (SIGCONT), it finds another node holds the lease, answers no 2xx, and
/// goes on as a standby in the same process, on the same ports: its data
/// set aside, it follows the new primary from the stream, and takes over
/// with every event when that one stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_primary_goes_on_as_a_standby_of_the_new_one() {
    use crate::support::{
        BinaryServer, TestServer, client, server_section, standard_headers, standard_source,
        write_config,
    };
    use hookinbox::clock::Clock;

    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let section = |data: &str, node: &str, role: &str| {
        format!(
            "{}{REPLICATION_ADMIN}[replication]\nurl = \"{}\"\nstream = \"{STREAM}\"\nrole = \"{role}\"\nnode = \"{node}\"\nlease = \"2s\"\n\n{}",
            server_section(&dir.path().join(data)),
            nats.url(),
            standard_source("shop")
        )
    };
    let config = write_config(dir.path(), &section("a", "vm-a", "primary"));
    let old = BinaryServer::start(&config, &[], None);
    let http = client();
    let send = async |url: &str, id: &str| -> (u16, String) {
        let body = format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
        let mut request = http.post(url).body(body.clone());
        for (name, value) in standard_headers(id, &body) {
            request = request.header(name, value);
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let json: serde_json::Value = response.json().await.unwrap_or_default();
                (status, json["id"].as_str().unwrap_or_default().to_owned())
            }
            Err(_) => (0, String::new()),
        }
    };
    let ready = async |admin: &str| {
        let response = http.get(format!("{admin}/readyz")).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let mut stored = Vec::new();
    for i in 0..10 {
        let id = format!("evt_{i}");
        let (status, public) = send(&old.url("/in/shop"), &id).await;
        assert_eq!(status, 200);
        stored.push((id, public));
    }
    let new = TestServer::start(&section("b", "vm-b", "standby"), Clock::system()).await;

    old.signal(libc::SIGSTOP);
    takes_over(&new, "the standby takes over", Duration::from_secs(15)).await;
    for i in 10..15 {
        let id = format!("evt_{i}");
        let body = format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
        let answer = new
            .post("/in/shop", &standard_headers(&id, &body), body)
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        stored.push((id, answer.json["id"].as_str().unwrap().to_owned()));
    }

    old.signal(libc::SIGCONT);
    // Probes of the stepping-down process get 3 s each: one that waits out
    // its restart must not use up the window (a CI run once spent it all).
    let probe = hookinbox::send::http_client(Duration::from_secs(3)).unwrap();
    let poke = async |url: &str| -> u16 {
        let body = b"{\"type\":\"t\",\"id\":\"evt_old\"}".to_vec();
        let mut request = probe.post(url).body(body.clone());
        for (name, value) in standard_headers("evt_old", &body) {
            request = request.header(name, value);
        }
        request.send().await.map_or(0, |r| r.status().as_u16())
    };
    crate::support::eventually(
        "the old primary steps down",
        Duration::from_secs(30),
        Duration::from_millis(100),
        async || {
            if old.log_text().contains("goes on as a standby") {
                return Ok(());
            }
            // Whatever it answers meanwhile, it is never a 2xx.
            let status = poke(&old.url("/in/shop")).await;
            assert!(
                !(200..300).contains(&status),
                "the old primary answered {status}"
            );
            Err(old.log_text())
        },
    )
    .await;
    crate::support::eventually(
        "the old primary is not ready: a standby",
        Duration::from_secs(15),
        Duration::from_millis(100),
        async || match ready(&old.admin).await {
            (503, body) if body.contains("standby") => Ok(()),
            (status, body) => Err(format!("{status} {body}")),
        },
    )
    .await;
    assert_eq!(send(&old.url("/in/shop"), "evt_old").await.0, 503);

    // The new primary stops; the old one, a standby now, takes over with
    // every event: each resend is a duplicate answered with its first id.
    new.stop().await;
    crate::support::eventually(
        "the old node takes over",
        Duration::from_secs(15),
        Duration::from_millis(100),
        async || match ready(&old.admin).await.0 {
            200 => Ok(()),
            status => Err(format!("readyz {status}")),
        },
    )
    .await;
    for (id, public) in &stored {
        assert_eq!(
            send(&old.url("/in/shop"), id).await,
            (200, public.clone()),
            "{id}"
        );
    }
    // Its data was set aside exactly when it held a frame the stream never
    // took (a webhook it stored after it woke, answered 503); either way it
    // took over above with every event.
    let aside = std::fs::read_dir(dir.path().join("a"))
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("set-aside-"));
    let log = old.log_text();
    assert_eq!(
        aside,
        log.contains("its data set aside (it holds frames the stream never took"),
        "{log}"
    );
    assert!(
        aside || log.contains("goes on as a standby with its data"),
        "{log}"
    );
}

/// `hookinbox promote` against a standby while the primary still runs: the
/// standby takes the lease and the primary steps down (a standby of the new
/// one). `hookinbox replication` says who is what; promoting a primary, or
/// a node that does not replicate, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_makes_a_standby_the_primary_and_the_old_one_steps_down() {
    use crate::cli::ops;
    use crate::support::{
        BinaryServer, TestServer, client, server_section, standard_headers, standard_source,
        write_config,
    };
    use hookinbox::clock::Clock;
    use std::time::Instant;

    const TOKEN: &str = "test-admin-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(&dir.path().join("nats"));
    let section = |data: &str, node: &str, role: &str| {
        format!(
            "{}[admin]\ntoken = \"{TOKEN}\"\n\n[replication]\nurl = \"{}\"\nstream = \"{STREAM}\"\nrole = \"{role}\"\nnode = \"{node}\"\nlease = \"10s\"\n\n{}",
            server_section(&dir.path().join(data)),
            nats.url(),
            standard_source("shop")
        )
    };
    let config = write_config(dir.path(), &section("a", "vm-a", "primary"));
    let old = BinaryServer::start(&config, &[], None);
    let http = client();
    let send = async |url: String, id: &str| -> u16 {
        let body = format!("{{\"type\":\"t\",\"id\":\"{id}\"}}").into_bytes();
        let mut request = http.post(url).body(body.clone());
        for (name, value) in standard_headers(id, &body) {
            request = request.header(name, value);
        }
        request.send().await.map_or(0, |r| r.status().as_u16())
    };
    for i in 0..5 {
        assert_eq!(send(old.url("/in/shop"), &format!("evt_{i}")).await, 200);
    }
    let new = TestServer::start(&section("b", "vm-b", "standby"), Clock::system()).await;
    let cli = async |admin: String, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || ops(&admin, TOKEN, &args))
            .await
            .unwrap()
    };
    let (code, out, err) = cli(new.admin_url(""), &["replication", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (status["role"].as_str(), status["holder"].as_str()),
        (Some("standby"), Some("vm-a")),
        "{out}"
    );
    // A primary is not promoted.
    let (code, _, err) = cli(old.admin.clone(), &["promote"]).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("the primary already"), "{err}");

    // Long before the 10 s lease could lapse.
    let asked = Instant::now();
    let (code, out, err) = cli(new.admin_url(""), &["promote"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("vm-b is the primary now"), "{out}");
    println!("promoted in {:?}", asked.elapsed());
    assert!(asked.elapsed() < Duration::from_secs(8));
    assert_eq!(new.admin("GET", "/readyz", None, None).await.status, 200);
    let body = b"{\"type\":\"t\",\"id\":\"evt_new\"}".to_vec();
    let answer = new
        .post("/in/shop", &standard_headers("evt_new", &body), body)
        .await;
    assert_eq!(answer.status, 200);

    // The old primary steps down at its next renewal: never a 2xx again.
    crate::support::eventually(
        "the old primary steps down",
        Duration::from_secs(15),
        Duration::from_millis(100),
        async || {
            if old.log_text().contains("goes on as a standby") {
                return Ok(());
            }
            assert_ne!(send(old.url("/in/shop"), "evt_old").await, 200);
            Err(old.log_text())
        },
    )
    .await;
    crate::support::eventually(
        "the old primary follows the new one from the stream",
        Duration::from_secs(15),
        Duration::from_millis(200),
        async || {
            let (code, out, _) = cli(old.admin.clone(), &["replication", "--json"]).await;
            if code == 0 {
                let status: serde_json::Value = serde_json::from_str(&out).unwrap();
                if status["role"] == "standby"
                    && status["holder"] == "vm-b"
                    && status["last_frame"].as_u64() > Some(0)
                {
                    return Ok(());
                }
            }
            Err(out)
        },
    )
    .await;
    assert_eq!(send(old.url("/in/shop"), "evt_old").await, 503);
    // Regression (issue 44): a planned promote set the old primary's whole
    // database aside (7 GiB at 5M events) and restored a snapshot. The new
    // primary waits for the old one to step down before it writes, so the
    // old one's data is a prefix of the stream: it follows with it.
    let aside = std::fs::read_dir(dir.path().join("a"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("set-aside-"))
        .count();
    let log = old.log_text();
    assert_eq!(aside, 0, "{log}");
    assert!(log.contains("goes on as a standby with its data"), "{log}");
    assert!(!log.contains("restor"), "restored a snapshot: {log}");
    new.stop().await;
}
