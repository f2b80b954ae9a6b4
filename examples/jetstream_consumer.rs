//! A consumer service for events hookinbox publishes to NATS JetStream.
//!
//! It creates the stream `WEBHOOKS` (subjects `webhooks.>`) if it does not
//! exist yet, and a durable pull consumer `billing` that takes Stripe's
//! events (`webhooks.stripe.>`) with explicit acks. Then it fetches batches,
//! processes each event once (keyed by its `webhook-id`) and acks it.
//!
//! Run a `nats-server -js`, point a source's `destination` at it
//! (`destination = "nats://127.0.0.1:4222"`), then:
//!
//! ```sh
//! NATS_URL=nats://127.0.0.1:4222 cargo run --example jetstream_consumer
//! ```
//!
//! Start several copies to share the work: processes that pull from the same
//! durable consumer get disjoint batches, and a message one copy fetched but
//! did not ack within `ack_wait` goes to another. So the record of what was
//! processed must be shared too (your database, not this process's memory).
//!
//! The message carries the provider's raw body and `webhook-signature`
//! (Standard Webhooks, the source's destination key): verify it with any
//! Standard Webhooks library if the stream's publishers are not all trusted.

use std::collections::HashSet;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer, stream};
use futures_util::StreamExt;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let client = async_nats::connect(url.as_str()).await?;
    let js = jetstream::new(client);

    let stream = js
        .get_or_create_stream(stream::Config {
            name: "WEBHOOKS".to_owned(),
            subjects: vec!["webhooks.>".to_owned()],
            // The window in which the stream drops a second message with the
            // same Nats-Msg-Id. hookinbox re-publishes under the same id only
            // when it crashed between a publish and recording the ack, so the
            // window must cover how long it may take to restart (2 minutes is
            // plenty for systemd). A provider's retries are not its business:
            // hookinbox dedupes those itself, for `dedupe_ttl` (30 days).
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await?;

    let consumer = stream
        .get_or_create_consumer(
            "billing",
            consumer::pull::Config {
                durable_name: Some("billing".to_owned()),
                filter_subject: "webhooks.stripe.>".to_owned(),
                ack_policy: consumer::AckPolicy::Explicit,
                // Unacked for this long: delivered again (perhaps to another copy).
                ack_wait: Duration::from_secs(30),
                // Then JetStream stops trying; the message stays in the stream.
                max_deliver: 10,
                ..Default::default()
            },
        )
        .await?;
    println!("consuming webhooks.stripe.> from {url} as durable consumer \"billing\"");

    // Stands in for a table with a unique key on webhook-id, written in the
    // same transaction as the event's effects.
    let mut processed: HashSet<String> = HashSet::new();
    loop {
        let mut batch = consumer
            .fetch()
            .max_messages(100)
            .expires(Duration::from_secs(5))
            .messages()
            .await?;
        while let Some(message) = batch.next().await {
            let message = message?;
            let header = |name: &str| {
                message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(name))
                    .map(|v| v.as_str().to_owned())
            };
            let Some(id) = header("webhook-id") else {
                // Not from hookinbox: never deliver it to this consumer again.
                eprintln!("{}: no webhook-id header, dropped", message.subject);
                message.ack_with(AckKind::Term).await?;
                continue;
            };
            let event_type = header("hookinbox-event-type").unwrap_or_else(|| "-".to_owned());
            // Dedupe on webhook-id: JetStream redelivers a message whose ack
            // was lost (a crash, a timeout, a dropped connection), and an
            // operator's replay in hookinbox publishes it again.
            if processed.contains(&id) {
                println!("{id} {event_type}: already processed, acking again");
            } else {
                let body: Option<serde_json::Value> = serde_json::from_slice(&message.payload).ok();
                let object = body
                    .as_ref()
                    .and_then(|b| b.pointer("/data/object/id"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("-");
                println!("{id} {event_type}: processing (object {object})");
                processed.insert(id.clone());
            }
            // double_ack waits for the server to confirm the ack. If it is
            // lost anyway, the message comes back after ack_wait and the
            // check above skips it.
            if let Err(e) = message.double_ack().await {
                eprintln!("{id}: ack not confirmed ({e}); it will be redelivered");
            }
        }
    }
}
