//! `hookinbox whoami`: who the token the commands use belongs to, its role
//! and when it expires. It changes nothing.

use super::client::Client;
use super::output::{Output, time};
use crate::api;
use crate::exit::Failure;

pub(super) async fn run(client: &Client, json: bool) -> Result<(), Failure> {
    let me: api::Whoami = client.get("/api/whoami", None).await?;
    let expires = match me.expires {
        Some(at) => format!(", expires {}", time(at)),
        None => String::new(),
    };
    let text = format!("{} ({}{expires})\n", me.name, me.role.as_str());
    Output::new(&me, text).print(json)
}
