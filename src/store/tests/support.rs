//! What the store's tests (and other modules' tests) fill a store with:
//! real verified events, options on a temp dir, and the steps of an
//! event's life (deliver, kill) as one call each.

use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::super::*;
use crate::config::{Config, Kind};
use crate::verify::VerifiedEvent;
use crate::verify::sign::{Signing, sign};
use crate::verify::{Request, Verified, Verifier};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A real VerifiedEvent: signed as Standard Webhooks and verified.
pub(crate) fn event(source: &str, id: &str) -> VerifiedEvent {
    event_of_type(source, id, "t")
}

/// [`event`] with the given event type.
pub(crate) fn event_of_type(source: &str, id: &str, event_type: &str) -> VerifiedEvent {
    let body = format!("{{\"type\":\"{event_type}\",\"n\":\"{id}\"}}");
    event_with_body(source, id, body)
}

/// [`event`] with the given body.
pub(crate) fn event_with_body(source: &str, id: &str, body: String) -> VerifiedEvent {
    let text =
        format!("[[source]]\nname = \"{source}\"\nkind = \"standard\"\nsecret_env = \"S\"\n");
    let mut config = Config::from_toml(&text, "t", None, &|name| {
        (name == "S").then(|| SECRET.to_owned())
    })
    .unwrap();
    let verifier = Verifier::new(&config.sources.remove(0).resolved()).unwrap();
    let now = SystemTime::now();
    let ts = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let body = Bytes::from(body);
    let headers = sign(&Signing {
        kind: Kind::Standard,
        secret: SECRET,
        body: &body,
        event_id: id,
        event_type: None,
        timestamp: ts,
        url: "",
        content_type: "application/json",
        hmac: None,
    })
    .unwrap();
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        map.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    match verifier.verify(
        &Request {
            headers: &map,
            body: &body,
            path_rest: "",
            query: None,
        },
        now,
    ) {
        Ok(Verified::Event(e)) => e,
        other => panic!("{other:?}"),
    }
}

pub(crate) fn options(dir: &std::path::Path) -> StoreOptions {
    StoreOptions {
        cache_bytes: 16 << 20,
        ..StoreOptions::new(dir, Duration::from_secs(3600))
    }
}

pub(crate) async fn close(store: Store, writer: WriterHandle) {
    drop(store);
    tokio::task::spawn_blocking(move || writer.shutdown())
        .await
        .unwrap();
}

pub(crate) async fn new_seq(store: &Store, source: &str, id: &str, initial: Initial) -> u64 {
    let Ingested::New { id } = store.ingest(event(source, id), initial).await.unwrap() else {
        panic!("{id} was a duplicate")
    };
    store.parse_public_id(&id).unwrap()
}

pub(super) fn attempt(class: schema::AttemptClass, status: Option<u16>) -> schema::Attempt {
    schema::Attempt {
        started_ms: 0,
        latency_ms: 1,
        class,
        status,
        error: None,
        response_snippet: None,
        round: 0,
        first_byte_ms: None,
        request_headers: Vec::new(),
        response_headers: Vec::new(),
    }
}

pub(crate) async fn deliver(store: &Store, seq: u64, at_ms: u64) {
    store.claim(seq, at_ms).await.unwrap().unwrap();
    store
        .finish(Finish {
            seq,
            attempt: attempt(schema::AttemptClass::Delivered, Some(200)),
            next: Next::Delivered { at_ms },
        })
        .await
        .unwrap();
}

pub(super) async fn kill(store: &Store, seq: u64, at_ms: u64) {
    store.claim(seq, at_ms).await.unwrap().unwrap();
    store
        .finish(Finish {
            seq,
            attempt: attempt(schema::AttemptClass::RejectedStatus, Some(400)),
            next: Next::Dead {
                reason: "400".into(),
                at_ms,
                release_key: true,
            },
        })
        .await
        .unwrap();
}

pub(super) const DAY: u64 = 86_400_000;

pub(super) fn routes(names: &[&str]) -> Initial {
    Initial::Routes(
        names
            .iter()
            .map(|n| Route {
                destination: (*n).to_owned(),
                ordering_key: None,
            })
            .collect(),
    )
}
