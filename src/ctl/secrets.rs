//! `hookinbox secrets`: each source secret's name, where it is kept, its
//! age, expiry and last match, as `GET /api/secrets` gives them. Never a
//! value: the server sends none.

use std::time::Duration;

use super::client::Client;
use super::output::{Output, table};
use crate::api;
use crate::exit::Failure;

pub(super) async fn run(client: &Client, json: bool) -> Result<(), Failure> {
    let list: api::SecretList = client.get("/api/secrets", None).await?;
    Output::new(&list, text(&list)).print(json)
}

/// `3d`, `5h`, `12m`, `40s`: the largest unit, whole.
fn span(ms: u64) -> String {
    let d = Duration::from_millis(ms);
    let secs = d.as_secs();
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

fn text(list: &api::SecretList) -> String {
    if list.secrets.is_empty() {
        return "no source secrets\n".to_owned();
    }
    let now = list.now.0;
    let rows = list
        .secrets
        .iter()
        .map(|s| {
            let place = match &s.place {
                api::SecretPlace::File { path } => format!("file {path}"),
                api::SecretPlace::Env { var } => format!("env {var}"),
                api::SecretPlace::Inline => "inline".to_owned(),
            };
            let expires = match s.expires {
                None => "-".to_owned(),
                Some(at) if s.expired => format!("expired {} ago", span(now.saturating_sub(at.0))),
                Some(at) => format!("in {}", span(at.0.saturating_sub(now))),
            };
            let last = s.last_match.map_or_else(
                || "never".to_owned(),
                |at| format!("{} ago", span(now.saturating_sub(at.0))),
            );
            vec![
                s.source.clone(),
                s.name.clone(),
                place,
                span(now.saturating_sub(s.first_seen.0)),
                expires,
                last,
                s.matches.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "SOURCE",
            "NAME",
            "KEPT IN",
            "AGE",
            "EXPIRES",
            "LAST MATCH",
            "MATCHES",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Timestamp;

    #[test]
    fn each_secret_is_a_row_of_names_places_and_times_never_a_value() {
        const DAY: u64 = 86_400_000;
        let now = 100 * DAY;
        let list = api::SecretList {
            now: Timestamp(now),
            secrets: vec![
                api::SecretInfo {
                    source: "stripe".into(),
                    name: "2026-11".into(),
                    place: api::SecretPlace::File {
                        path: "/etc/hookinbox/stripe-new.secret".into(),
                    },
                    first_seen: Timestamp(now - 2 * DAY),
                    expires: None,
                    expired: false,
                    last_match: Some(Timestamp(now - 90_000)),
                    matches: 1204,
                },
                api::SecretInfo {
                    source: "stripe".into(),
                    name: "old".into(),
                    place: api::SecretPlace::Env {
                        var: "STRIPE_OLD".into(),
                    },
                    first_seen: Timestamp(now - 400 * 3_600_000),
                    expires: Some(Timestamp(now + 5 * 3_600_000)),
                    expired: false,
                    last_match: None,
                    matches: 0,
                },
                api::SecretInfo {
                    source: "gh".into(),
                    name: "inline".into(),
                    place: api::SecretPlace::Inline,
                    first_seen: Timestamp(now - 30_000),
                    expires: Some(Timestamp(now - 2 * DAY)),
                    expired: true,
                    last_match: Some(Timestamp(now - 3 * DAY)),
                    matches: 7,
                },
            ],
        };
        assert_eq!(
            text(&list),
            "SOURCE  NAME     KEPT IN                                AGE  EXPIRES         LAST MATCH  MATCHES\n\
             stripe  2026-11  file /etc/hookinbox/stripe-new.secret  2d   -               1m ago      1204\n\
             stripe  old      env STRIPE_OLD                         16d  in 5h           never       0\n\
             gh      inline   inline                                 30s  expired 2d ago  3d ago      7\n"
        );
    }
}
