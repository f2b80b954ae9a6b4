//! `hookinbox reload`: asks the server to read its config again, and says
//! what changed in place and what only a restart takes. What may change
//! live is the server's (`app::reload`); a config it refuses comes back as
//! the error, with the reason.

use super::client::{Client, NO_BODY};
use super::output::Output;
use crate::api;
use crate::exit::Failure;

pub(super) async fn run(client: &Client, json: bool) -> Result<(), Failure> {
    let r: api::Reloaded = client.post("/api/reload", NO_BODY).await?;
    Output::new(&r, text(&r)).print(json)
}

fn text(r: &api::Reloaded) -> String {
    let list = |parts: &[api::PartChanged]| {
        parts
            .iter()
            .map(|p| format!("  {} {}\n", p.part, p.change.as_str()))
            .collect::<String>()
    };
    let mut out = format!("reloaded {}\n", r.origin);
    if r.applied.is_empty() && r.needs_restart.is_empty() {
        out.push_str("nothing changed\n");
    }
    if !r.applied.is_empty() {
        out.push_str("in force now:\n");
        out.push_str(&list(&r.applied));
    }
    if !r.needs_restart.is_empty() {
        out.push_str("changed, but only a restart takes it (left as it was):\n");
        out.push_str(&list(&r.needs_restart));
    }
    for warning in &r.warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ConfigChange, PartChanged};

    #[test]
    fn the_text_says_what_is_in_force_and_what_waits_for_a_restart() {
        let part = |part: &str, change| PartChanged {
            part: part.to_owned(),
            change,
        };
        let r = api::Reloaded {
            origin: "/etc/hookinbox/hookinbox.toml".into(),
            applied: vec![part("source.stripe", ConfigChange::Changed)],
            needs_restart: vec![part("server", ConfigChange::Changed)],
            warnings: vec![],
        };
        assert_eq!(
            text(&r),
            "reloaded /etc/hookinbox/hookinbox.toml\nin force now:\n  source.stripe changed\n\
             changed, but only a restart takes it (left as it was):\n  server changed\n"
        );
        let none = api::Reloaded {
            applied: vec![],
            needs_restart: vec![],
            ..r
        };
        assert!(text(&none).ends_with("nothing changed\n"));
    }
}
