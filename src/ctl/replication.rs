//! `hookinbox replication` and `hookinbox promote`: a replicating node's
//! role and the lease's holder, and a standby made the primary by hand.

use super::client::{Client, NO_BODY};
use super::output::Output;
use crate::api;
use crate::exit::Failure;

pub(super) async fn status(client: &Client, json: bool) -> Result<(), Failure> {
    let s: api::ReplicationStatus = client.get("/api/replication", None).await?;
    Output::new(&s, describe(&s)).print(json)
}

pub(super) async fn promote(client: &Client, json: bool) -> Result<(), Failure> {
    let s: api::ReplicationStatus = client.post("/api/replication/promote", NO_BODY).await?;
    let text = format!("promoted: {} is the primary now\n{}", s.node, describe(&s));
    Output::new(&s, text).print(json)
}

fn describe(s: &api::ReplicationStatus) -> String {
    let role = match s.role {
        api::ReplicationRole::Primary => "primary",
        api::ReplicationRole::Standby => "standby",
    };
    let progress = match s.role {
        api::ReplicationRole::Primary => format!(
            "frames: {} in the database, {} shipped",
            s.last_frame, s.shipped_frame
        ),
        api::ReplicationRole::Standby => format!(
            "frames: {} applied (stream sequence {})",
            s.last_frame, s.applied_sequence
        ),
    };
    format!(
        "node {} ({role}), stream {}, lease held by {}\n{progress}\n",
        s.node,
        s.stream,
        s.holder.as_deref().unwrap_or("no one")
    )
}
