//! `hookinbox sweep`: asks the server to sweep expired data now, and says
//! what went. What expires, and when, is `crate::sweep`'s.

use super::client::{Client, NO_BODY};
use super::output::Output;
use crate::api;
use crate::exit::Failure;

pub(super) async fn run(client: &Client, json: bool) -> Result<(), Failure> {
    let s: api::SweepResult = client.post("/api/sweep", NO_BODY).await?;
    let text = format!(
        "swept {} delivered, {} dead or ignored, {} dedupe keys, {} idempotency keys, {} audit records in {} ms\n",
        s.delivered, s.dead_or_ignored, s.dedupe_keys, s.keys, s.audit, s.millis
    );
    Output::new(&s, text).print(json)
}
