//! `hookinbox destinations`: lists each destination's state, and pauses
//! or resumes one. What happens to events is `events`' and `dlq`'s.

use clap::Subcommand;

use super::client::{Client, NO_BODY};
use super::output::{Output, or_dash, table};
use crate::api;
use crate::exit::Failure;

#[derive(Debug, Subcommand)]
pub enum DestinationsCommand {
    /// Each destination: paused, circuit, in flight.
    List,
    /// Stop delivering to it; events accumulate.
    Pause {
        /// The destination's name: its source's name, or source.name.
        name: String,
    },
    /// Deliver again; what accumulated goes out oldest first.
    Resume {
        /// The destination's name: its source's name, or source.name.
        name: String,
    },
}

pub(super) async fn run(
    client: &Client,
    command: DestinationsCommand,
    json: bool,
) -> Result<(), Failure> {
    let out = match command {
        DestinationsCommand::List => {
            let list: api::Destinations = client.get("/api/destinations", None).await?;
            Output::new(&list, destinations_table(&list))
        }
        DestinationsCommand::Pause { name } => {
            let done: api::PauseResult = client
                .post(&format!("/api/destinations/{name}/pause"), NO_BODY)
                .await?;
            Output::new(&done, format!("{name}: paused\n"))
        }
        DestinationsCommand::Resume { name } => {
            let done: api::PauseResult = client
                .post(&format!("/api/destinations/{name}/resume"), NO_BODY)
                .await?;
            Output::new(&done, format!("{name}: resumed\n"))
        }
    };
    out.print(json)
}

fn destinations_table(list: &api::Destinations) -> String {
    if list.destinations.is_empty() {
        return "no destinations: every source holds its events\n".into();
    }
    let rows = list
        .destinations
        .iter()
        .map(|d| {
            vec![
                d.name.clone(),
                d.url.clone(),
                d.paused.to_string(),
                d.circuit.as_str().to_owned(),
                format!("{}/{}", d.in_flight, d.max_concurrency),
                or_dash(d.last_failure.as_deref()),
            ]
        })
        .collect();
    table(
        &[
            "NAME",
            "URL",
            "PAUSED",
            "CIRCUIT",
            "IN FLIGHT",
            "LAST FAILURE",
        ],
        rows,
    )
}
