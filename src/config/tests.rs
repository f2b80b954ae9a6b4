//! Unit tests of config loading: the embedded default, the environment
//! over the file, secrets and their redaction, and each error naming its
//! file, key and problem.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::load::packaged_is_there;
use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

/// A bad value a variable gave is not placed at the file's line for
/// the key it overrides.
#[test]
fn a_bad_value_from_a_variable_is_not_placed_in_the_file() {
    let env = |name: &str| (name == "HOOKINBOX_LOG_LEVEL").then(|| "loud".to_owned());
    let err = Config::from_toml("[log]\nlevel = \"info\"\n", "f.toml", None, &env)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("f.toml: log.level: \"loud\""), "{err}");
    let err = Config::from_toml("[log]\nlevel = \"loud\"\n", "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("f.toml:2:9: log.level: \"loud\""), "{err}");
}

/// Regression: a user outside the hookinbox group cannot open the
/// packaged config (`/etc/hookinbox` is 0750), and `exists()` read that
/// as "not installed": the embedded default was used in silence. Tests
/// run as root, which no permission stops, so the error is injected.
#[test]
fn a_packaged_config_that_cannot_be_opened_is_an_error_not_the_default() {
    use std::io::{Error, ErrorKind};
    let path = Path::new(PACKAGED_CONFIG);
    assert!(packaged_is_there(path, Ok(())).unwrap());
    assert!(!packaged_is_there(path, Err(Error::from(ErrorKind::NotFound))).unwrap());
    let denied = packaged_is_there(path, Err(Error::from(ErrorKind::PermissionDenied)))
        .unwrap_err()
        .to_string();
    assert_eq!(
        denied,
        "/etc/hookinbox/hookinbox.toml: cannot read the packaged config: permission denied; \
         use sudo or join the hookinbox group (or pass --config)"
    );
    let other = packaged_is_there(path, Err(Error::from(ErrorKind::NotADirectory)));
    assert!(other.is_err());
}

#[test]
fn embedded_default_is_valid_and_serves_demo() {
    let config = Config::embedded(&no_env).unwrap();
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.server.admin_listen.to_string(), "127.0.0.1:8081");
    assert_eq!(config.server.data_dir, PathBuf::from("./hookinbox-data"));
    assert_eq!(config.sources.len(), 1);
    let demo = &config.sources[0];
    assert_eq!(demo.name.as_str(), "demo");
    assert_eq!(demo.kind, Kind::Standard);
    assert!(matches!(demo.secrets, SecretPlan::Generated));
    assert_eq!(demo.max_body, DEFAULT_MAX_BODY);
}

#[test]
fn a_subject_template_renders_each_event_type_as_tokens_nats_can_hold() {
    let t = SubjectTemplate::parse("webhooks.{source}.{event_type}").unwrap();
    assert_eq!(t.to_string(), "webhooks.{source}.{event_type}");
    assert_eq!(
        t.render("shop", Some("invoice.paid")),
        "webhooks.shop.invoice.paid"
    );
    assert_eq!(t.render("shop", None), "webhooks.shop._");
    assert_eq!(t.render("shop", Some("a b*>")), "webhooks.shop.a_b__");
    assert_eq!(t.render("shop", Some("a..b.")), "webhooks.shop.a._.b._");
    for bad in [
        "a..b",
        ".a",
        "a.",
        "a.{x}",
        "a.b*",
        "a.>",
        "x{source}",
        "a b",
    ] {
        assert!(SubjectTemplate::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn type_patterns_match_whole_types_with_stars_for_any_run() {
    let m = |p: &str, t: &str| TypePattern::parse(p).unwrap().matches(t);
    assert!(m("invoice.paid", "invoice.paid"));
    assert!(!m("invoice.paid", "invoice.paid.x"));
    assert!(!m("invoice", "invoice.paid"));
    assert!(m("invoice.*", "invoice.paid"));
    assert!(m("invoice.*", "invoice.payment_failed.retry"));
    assert!(!m("invoice.*", "invoice"));
    assert!(!m("invoice.*", "charge.invoice.paid"));
    assert!(m("*.created", "customer.created"));
    assert!(!m("*.created", "customer.created.x"));
    assert!(m("*", "anything"));
    assert!(m("a*b*c", "a-b-c"));
    assert!(m("a*b*c", "abc"));
    assert!(!m("a*b*c", "a-c-b"));
    assert!(!m("ab*ba", "aba"), "the start and end may not overlap");
    assert!(TypePattern::parse("").is_err());
}

#[test]
fn filters_need_a_destination_and_say_what_is_wrong() {
    let source =
        |rest: &str| format!("[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n{rest}");
    let load = |rest: &str| Config::from_toml(&source(rest), "f.toml", None, &no_env);
    let ok = load(
        r#"destination = "http://127.0.0.1:9/"
filter_types = ["push", "pull_request*"]
filter_match = "/repository/private = false"
"#,
    )
    .unwrap();
    let filter = ok.sources[0].destinations[0].filter.clone().unwrap();
    assert_eq!(filter.types.unwrap().len(), 2);
    assert_eq!(
        filter.matching,
        Some(("/repository/private".to_owned(), "false".to_owned()))
    );
    for (rest, key, words) in [
        (
            "filter_types = [\"push\"]\n",
            "source[0].filter_types",
            "with a destination",
        ),
        (
            "destination = \"http://127.0.0.1:9/\"\nfilter_types = []\n",
            "source[0].filter_types",
            "every event",
        ),
        (
            "destination = \"http://127.0.0.1:9/\"\nfilter_types = [\"\"]\n",
            "source[0].filter_types",
            "not an event type",
        ),
        (
            "destination = \"http://127.0.0.1:9/\"\nfilter_match = \"livemode=true\"\n",
            "source[0].filter_match",
            "/json/pointer=value",
        ),
        (
            "destination = \"http://127.0.0.1:9/\"\nfilter_match = \"/livemode\"\n",
            "source[0].filter_match",
            "/json/pointer=value",
        ),
    ] {
        let err = load(rest).unwrap_err().to_string();
        assert!(
            err.starts_with("f.toml:")
                && err.contains(&format!(": {key} (source \"s\"): "))
                && err.contains(words),
            "{rest}: {err}"
        );
    }
}

#[test]
fn destination_tables_give_each_destination_its_own_route_and_keys() {
    let source =
        |rest: &str| format!("[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n{rest}");
    let load = |rest: &str| Config::from_toml(&source(rest), "f.toml", None, &no_env);
    let ok = load(
        r#"[[source.destination]]
url = "http://127.0.0.1:9/app"
max_concurrency = 2
[[source.destination]]
name = "billing"
url = "http://127.0.0.1:9/b"
filter_types = ["invoice.*"]
ordering_key = "/customer"
[[source.destination]]
name = "stream"
url = "nats://127.0.0.1:4222"
subject = "gh.{event_type}"
"#,
    )
    .unwrap();
    let d = &ok.sources[0].destinations;
    let routes: Vec<&str> = d.iter().map(|d| d.route.as_str()).collect();
    assert_eq!(routes, ["s", "s.billing", "s.stream"]);
    assert_eq!((d[0].max_concurrency, d[1].max_concurrency), (2, 8));
    assert!(d[0].filter.is_none() && d[1].filter.is_some());
    assert!(d[1].ordering.is_some() && d[0].ordering.is_none());
    assert!(d[2].jetstream.is_some());
    // `config check` writes them back as tables, which load the same.
    let shown = ok.to_redacted_toml();
    assert!(shown.contains("[[source.destination]]"), "{shown}");
    let again = Config::from_toml(&shown, "shown.toml", None, &no_env).unwrap();
    let again: Vec<&str> = again.sources[0]
        .destinations
        .iter()
        .map(|d| d.route.as_str())
        .collect();
    assert_eq!(again, routes);
    // The one-URL form stays one: shown back flat.
    let flat = load("destination = \"http://127.0.0.1:9/\"\ntimeout = \"5s\"\n").unwrap();
    assert_eq!(flat.sources[0].destinations[0].route, "s");
    assert!(!flat.to_redacted_toml().contains("[[source.destination]]"));
}

#[test]
fn a_wrong_destination_table_is_refused_naming_its_key() {
    let source =
        |rest: &str| format!("[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n{rest}");
    let load = |rest: &str| Config::from_toml(&source(rest), "f.toml", None, &no_env);
    let table = |body: &str| format!("[[source.destination]]\n{body}\n");
    for (rest, key, words) in [
        (
            format!(
                "timeout = \"5s\"\n{}",
                table("url = \"http://127.0.0.1:9/\"")
            ),
            "source[0].timeout",
            "set it in each table",
        ),
        (
            table("name = \"a\""),
            "source[0].destination[0].url",
            "is required",
        ),
        (
            table("name = \"Bad.Name\"\nurl = \"http://127.0.0.1:9/\""),
            "source[0].destination[0].name",
            "not a valid destination name",
        ),
        (
            format!(
                "{}{}",
                table("name = \"a\"\nurl = \"http://127.0.0.1:9/\""),
                table("name = \"a\"\nurl = \"http://127.0.0.1:9/x\"")
            ),
            "source[0].destination[1].name",
            "another destination",
        ),
        (
            format!(
                "{}{}",
                table("url = \"http://127.0.0.1:9/\""),
                table("url = \"http://127.0.0.1:9/x\"")
            ),
            "source[0].destination[1].name",
            "at most one destination goes without a name",
        ),
        (
            table("url = \"http://127.0.0.1:9/\"\ndestination_secret = \"x\""),
            "source[0].destination[0].destination_secret",
            "unknown field",
        ),
        (
            table("url = \"http://127.0.0.1:9/\"\nsubject = \"a\""),
            "source[0].destination[0].subject",
            "nats://",
        ),
        (
            "destination = []\n".to_owned(),
            "source[0].destination",
            "holds no table",
        ),
        (
            "destination = 5\n".to_owned(),
            "source[0].destination",
            "a URL, or [[source.destination]] tables",
        ),
        (
            (0..17)
                .map(|i| table(&format!("name = \"d{i}\"\nurl = \"http://127.0.0.1:9/\"")))
                .collect::<String>(),
            "source[0].destination",
            "at most 16",
        ),
    ] {
        let err = load(&rest).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains(words), "{rest}: {err}");
    }
}

#[test]
fn jetstream_keys_fit_only_their_kind_of_destination() {
    let source =
        |rest: &str| format!("[[source]]\nname = \"s\"\nkind = \"github\"\nsecret = \"x\"\n{rest}");
    let load = |rest: &str| Config::from_toml(&source(rest), "f.toml", None, &no_env);
    let nats = load(
        "destination = \"nats://127.0.0.1:4222\"\ndestination_subject = \"gh.{event_type}\"\n",
    )
    .unwrap();
    let dl = &nats.sources[0].destinations[0];
    let js = dl.jetstream.as_ref().unwrap();
    assert_eq!(js.subject.render("s", Some("push")), "gh.push");
    let http = load("destination = \"http://127.0.0.1:9/\"\n").unwrap();
    assert!(http.sources[0].destinations[0].jetstream.is_none());
    for (rest, key, words) in [
        (
            "destination = \"http://127.0.0.1:9/\"\ndestination_subject = \"a\"\n",
            "source[0].destination_subject",
            "nats://",
        ),
        (
            "destination = \"nats://127.0.0.1:4222\"\nretry_statuses = [503]\n",
            "source[0].retry_statuses",
            "http(s)",
        ),
        (
            "destination = \"nats://127.0.0.1:4222\"\ndestination_subject = \"a..b\"\n",
            "source[0].destination_subject",
            "empty token",
        ),
        (
            "destination = \"ftp://127.0.0.1/\"\n",
            "source[0].destination",
            "nats or tls",
        ),
        (
            "destination = \"nats://127.0.0.1:4222\"\ndestination_creds_file = \"/nonexistent/x.creds\"\n",
            "source[0].destination_creds_file",
            "cannot read",
        ),
    ] {
        let err = load(rest).unwrap_err().to_string();
        assert!(
            err.starts_with("f.toml:")
                && err.contains(&format!(": {key} (source \"s\"): "))
                && err.contains(words),
            "{rest}: {err}"
        );
    }
}

#[test]
fn environment_overrides_the_file() {
    let env = |name: &str| match name {
        "HOOKINBOX_LISTEN" => Some("127.0.0.1:9999".to_owned()),
        "HOOKINBOX_DATA_DIR" => Some("/tmp/x".to_owned()),
        _ => None,
    };
    let config = Config::embedded(&env).unwrap();
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:9999");
    assert_eq!(config.server.data_dir, PathBuf::from("/tmp/x"));
}

#[test]
fn bad_environment_value_names_the_variable() {
    let env = |name: &str| (name == "HOOKINBOX_ADMIN_LISTEN").then(|| "nope".to_owned());
    let err = Config::embedded(&env).unwrap_err().to_string();
    assert!(
        err.starts_with("environment: HOOKINBOX_ADMIN_LISTEN: "),
        "{err}"
    );
}

#[test]
fn errors_name_file_key_and_problem() {
    let text =
        "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret = \"x\"\ntolerance = \"5 parsecs\"\n";
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("f.toml:5:13: source[0].tolerance (source \"s\"): "),
        "{err}"
    );

    let text = "[[source]]\nname = \"s\"\nkind = \"paypal\"\nsecret = \"x\"\n";
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("source[0].kind") && err.contains("unknown variant `paypal`"),
        "{err}"
    );

    let text = "[[source]]\nname = \"s\"\nkind = \"github\"\n";
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("source[0]") && err.contains("no secret"),
        "{err}"
    );

    let text = "[server]\nlisten = \"127.0.0.1:1\"\nbogus = 1\n";
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("f.toml:3:1: ") && err.contains("bogus"),
        "{err}"
    );
}

/// What serde finds (a syntax error, a value of the wrong type, a name
/// that is not one of a key's names) is reported at its line and column
/// and, but for syntax, with the key's path; the message names the bad
/// value and what the key takes.
#[test]
fn toml_errors_name_the_line_column_and_key() {
    let error = |text: &str| {
        Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        error("[server]\nlisten = \"127.0.0.1:1\"\nmax_connections = \"many\"\n"),
        "f.toml:3:19: server.max_connections: invalid type: string \"many\", expected u64"
    );
    assert_eq!(
        error(
            r#"[[source]]
name = "a"
kind = "github"
secret = "x"

[[source]]
name = "b"
kind = "paypal"
"#
        ),
        "f.toml:8:8: source[1].kind (source \"b\"): unknown variant `paypal`, expected one of \
         `stripe`, `github`, `shopify`, `slack`, `standard`, `standard-webhooks`, \
         `standardwebhooks`, `svix`, `paddle`, `linear`, `twilio`, `gitlab`, `twitch`, `zoom`, `facebook`, `instagram`, `meta`, `whatsapp`, `hmac`"
    );
    // The column counts characters, not bytes.
    assert_eq!(
        error("[log] # journal → ☃\nformat = \"xml\"\n"),
        "f.toml:2:10: log.format: unknown variant `xml`, expected `text` or `json`"
    );
    // In a list, toml's position is the list's; the path names the item.
    assert_eq!(
        error("[[source]]\nname = \"s\"\nretry_statuses = [429, true]\n"),
        "f.toml:3:18: source[0].retry_statuses[1] (source \"s\"): expected a status code like 429 or a class like \"5xx\""
    );
    assert_eq!(
        error("[server\nlisten = 1\n"),
        "f.toml:1:8: unclosed table, expected `]`"
    );
    // A variable's bad value names the variable, with the same message.
    let env = |name: &str| (name == "HOOKINBOX_LOG_FORMAT").then(|| "xml".to_owned());
    assert_eq!(
        Config::embedded(&env).unwrap_err().to_string(),
        "environment: HOOKINBOX_LOG_FORMAT: unknown variant `xml`, expected `text` or `json`"
    );
}

/// The file names a kind as `Kind::as_str` does (which logs and metric
/// labels use), so serde's names cannot drift from it.
#[test]
fn every_kind_is_named_in_the_file_as_as_str_names_it() {
    for kind in Kind::ALL {
        assert_eq!(Kind::parse(kind.as_str()), Ok(kind));
        assert_eq!(
            toml::Value::try_from(kind).unwrap().as_str(),
            Some(kind.as_str())
        );
    }
    assert_eq!(Kind::parse("svix"), Ok(Kind::Standard));
}

#[test]
fn duplicate_source_names_are_rejected() {
    let text = r#"[[source]]
name = "a"
kind = "github"
secret = "x"
[[source]]
name = "a"
kind = "github"
secret = "y"
"#;
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("source[1].name") && err.contains("already"),
        "{err}"
    );
}

#[test]
fn secrets_come_from_env_file_and_inline_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gh.secret"), "one\n\n two \n").unwrap();
    let text = r#"[[source]]
name = "gh"
kind = "github"
secret_file = "gh.secret"
secret_env = "GH_SECRET"
secrets = ["four"]
"#;
    let env = |name: &str| (name == "GH_SECRET").then(|| "three".to_owned());
    let config = Config::from_toml(text, "f.toml", Some(dir.path()), &env).unwrap();
    let SecretPlan::Given(given) = &config.sources[0].secrets else {
        panic!("{config:?}");
    };
    let secrets: Vec<&str> = given.iter().map(|s| s.value.expose()).collect();
    assert_eq!(secrets, ["one", "two", "three", "four"]);
    assert_eq!(config.warnings.len(), 1, "{:?}", config.warnings);

    let text = "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret_env = \"MISSING\"\n";
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("source[0].secret_env") && err.contains("MISSING"),
        "{err}"
    );
}

/// `[[source.secrets]]` tables name a secret and say when it expires; the
/// others are named after where they are kept. `config check` prints the
/// tables back as tables, and reading that output gives the same names
/// and expiries.
#[test]
fn secrets_are_named_after_their_table_or_their_place_and_may_expire() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gh.secret"), "one\ntwo\n").unwrap();
    std::fs::write(dir.path().join("old.secret"), "old-secret\n").unwrap();
    let text = r#"[[source]]
name = "gh"
kind = "github"
secret_file = "gh.secret"
secret_env = "GH_SECRET"

[[source.secrets]]
name = "2026-11"
secret = "new-secret"

[[source.secrets]]
secret_file = "old.secret"
expires = "2027-01-31"

[[source.secrets]]
name = "was"
secret_env = "WAS"
expires = "2020-01-01T12:00:00+01:00"
"#;
    let env = |name: &str| match name {
        "GH_SECRET" => Some("three".to_owned()),
        "WAS" => Some("was-secret".to_owned()),
        _ => None,
    };
    let config = Config::from_toml(text, "f.toml", Some(dir.path()), &env).unwrap();
    let SecretPlan::Given(given) = &config.sources[0].secrets else {
        panic!("{config:?}");
    };
    let named: Vec<(&str, &str, Option<u64>)> = given
        .iter()
        .map(|s| (s.name.as_str(), s.value.expose(), s.expires.map(|t| t.0)))
        .collect();
    assert_eq!(
        named,
        [
            ("gh.secret", "one", None),
            ("gh.secret:2", "two", None),
            ("$GH_SECRET", "three", None),
            ("2026-11", "new-secret", None),
            ("old.secret", "old-secret", Some(1_801_353_600_000)),
            ("was", "was-secret", Some(1_577_876_400_000)),
        ]
    );
    let expired: Vec<&String> = config
        .warnings
        .iter()
        .filter(|w| w.contains("expired"))
        .collect();
    assert_eq!(expired.len(), 1, "{:?}", config.warnings);
    assert!(expired[0].contains("\"was\" expired at 2020-01-01T11:00:00Z"));

    let shown = config.to_redacted_toml();
    assert!(
        !shown.contains("new-secret") && !shown.contains("was-secret"),
        "{shown}"
    );
    let again = Config::from_toml(
        &shown.replace("\"[redacted]\"", "\"new-secret\""),
        "shown",
        Some(dir.path()),
        &env,
    )
    .unwrap();
    let SecretPlan::Given(again) = &again.sources[0].secrets else {
        panic!("{shown}");
    };
    let again: Vec<(&str, Option<u64>)> = again
        .iter()
        .map(|s| (s.name.as_str(), s.expires.map(|t| t.0)))
        .collect();
    let before: Vec<(&str, Option<u64>)> = named.iter().map(|(n, _, e)| (*n, *e)).collect();
    assert_eq!(again, before, "{shown}");
}

#[test]
fn a_secrets_table_holds_one_secret_under_a_name_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("two.secret"), "a\nb\n").unwrap();
    let head = "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret = \"x\"\n";
    for (table, key, says) in [
        (
            "secret_file = \"two.secret\"",
            "source[0].secrets[0].secret_file",
            "holds 2 secrets",
        ),
        ("name = \"a\"", "source[0].secrets[0]", "has no secret"),
        (
            "secret = \"y\"\nsecret_env = \"Y\"",
            "source[0].secrets[0].secret",
            "set only one",
        ),
        (
            "secret = \"y\"\nname = \"no spaces\"",
            "source[0].secrets[0].name",
            "1 to 64",
        ),
        (
            "secret = \"y\"\nname = \"inline\"",
            "source[0].secrets",
            "two secrets are named \"inline\"",
        ),
        (
            "secret = \"y\"\nexpires = \"soon\"",
            "source[0].secrets[0].expires",
            "RFC 3339",
        ),
        ("secret = \"y\"\nsalt = \"z\"", "salt", "unknown field"),
    ] {
        let text = format!("{head}\n[[source.secrets]]\n{table}\n");
        let err = Config::from_toml(&text, "f.toml", Some(dir.path()), &no_env)
            .unwrap_err()
            .to_string();
        assert!(err.contains(key) && err.contains(says), "{table}: {err}");
        assert!(!err.contains("\"y\""), "{err}");
    }
}

/// A destination's key file may hold two keys (one a line) while the app
/// moves to the new one: both sign. More than `SigningKeys::MAX`, or a line
/// that is not a key, is refused naming the key.
#[test]
fn a_destination_key_file_holds_one_key_or_two_during_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let key = |n: u8| {
        format!(
            "whsec_{}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [n; 24])
        )
    };
    let text = "[[source]]\nname = \"shop\"\nkind = \"github\"\nsecret = \"x\"\n\
                destination = \"http://127.0.0.1:3000/\"\ndestination_secret_file = \"app.keys\"\n";
    let load = |lines: &str| {
        std::fs::write(dir.path().join("app.keys"), lines).unwrap();
        Config::from_toml(text, "f.toml", Some(dir.path()), &no_env)
    };
    let config = load(&format!("{}\n\n{}\n", key(1), key(2))).unwrap();
    let SecretPlan::Given(given) = &config.sources[0].destinations[0].secret else {
        panic!("{config:?}");
    };
    assert_eq!(given.value.keys().len(), 2);
    let many: Vec<String> = (1..=5).map(key).collect();
    let err = load(&many.join("\n")).unwrap_err().to_string();
    assert!(
        err.contains("source[0].destination_secret_file") && err.contains("holds 5 keys"),
        "{err}"
    );
    let err = load(&format!("{}\nnot a key!\n", key(1)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("destination_secret_file") && err.contains("base64"),
        "{err}"
    );
    assert!(!err.contains(&key(1)), "{err}");
}

/// `redact` takes JSON pointers (`*` for every item), `redact_for` needs
/// them, and `config check` prints both back as written.
#[test]
fn redact_takes_json_pointers_and_redact_for_needs_them() {
    let head = "[[source]]\nname = \"shop\"\nkind = \"github\"\nsecret = \"x\"\n";
    let text = format!(
        "{head}redact = [\"/data/object/email\", \"/items/*/card\"]\nredact_for = \"everyone\"\n"
    );
    let config = Config::from_toml(&text, "f.toml", None, &no_env).unwrap();
    let s = &config.sources[0];
    let pointers: Vec<&str> = s.redact.iter().map(|p| p.as_str()).collect();
    assert_eq!(pointers, ["/data/object/email", "/items/*/card"]);
    assert_eq!(s.redact_for, RedactFor::Everyone);
    let shown = config.to_redacted_toml();
    let again = Config::from_toml(&shown, "shown", None, &no_env).unwrap();
    assert_eq!(again.sources[0].redact, s.redact);
    assert_eq!(again.sources[0].redact_for, RedactFor::Everyone);
    let plain = Config::from_toml(head, "f.toml", None, &no_env).unwrap();
    assert!(plain.sources[0].redact.is_empty());
    assert!(!plain.to_redacted_toml().contains("redact_for"));

    for (extra, key, says) in [
        (
            "redact = [\"data/email\"]",
            "source[0].redact[0]",
            "must start with '/'",
        ),
        (
            "redact = [\"/a\", \"/b~2\"]",
            "source[0].redact[1]",
            "~0 is '~'",
        ),
        (
            "redact_for = \"everyone\"",
            "source[0].redact_for",
            "needs redact",
        ),
        (
            "redact = [\"/a\"]\nredact_for = \"nobody\"",
            "redact_for",
            "unknown variant",
        ),
    ] {
        let err = Config::from_toml(&format!("{head}{extra}\n"), "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(err.contains(key) && err.contains(says), "{extra}: {err}");
    }
}

#[test]
fn redacted_output_never_contains_a_secret() {
    let text = "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret = \"s3cr3t-value\"\n";
    let config = Config::from_toml(text, "f.toml", None, &no_env).unwrap();
    let shown = config.to_redacted_toml();
    assert!(!shown.contains("s3cr3t-value"), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
    // The printed config is itself a config file (with secrets replaced).
    assert!(raw::parse(&shown, "shown").is_ok(), "{shown}");
    assert!(format!("{config:?}").contains("[redacted]"));
}

/// Of every secret, `config check` shows where it comes from: the
/// variable, the file, `[redacted]` for one written inline, and a note
/// for one left to the data dir. Never the value.
#[test]
fn redacted_output_shows_where_each_secret_comes_from() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gh.secret"),
        "file-secret-1\nfile-secret-2\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("admin.token"), "file-admin-token-0123").unwrap();
    let text = r#"[admin]
token_file = "admin.token"

[[source]]
name = "gh"
kind = "github"
secret_file = "gh.secret"
secret_env = "GH_SECRET"
secret = "inline-secret"
destination = "http://127.0.0.1:9/app"
destination_secret_env = "DEST_KEY"

[[source]]
name = "demo"
kind = "standard"
generate_secret = true
destination = "http://127.0.0.1:9/demo"
"#;
    let env = |name: &str| match name {
        "GH_SECRET" => Some("env-secret".to_owned()),
        "DEST_KEY" => Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned()),
        _ => None,
    };
    let config = Config::from_toml(text, "f.toml", Some(dir.path()), &env).unwrap();
    let shown = config.to_redacted_toml();
    for secret in [
        "file-secret",
        "file-admin-token",
        "env-secret",
        "inline-secret",
        "MfKQ9r8",
    ] {
        assert!(!shown.contains(secret), "{secret} is shown:\n{shown}");
    }
    let file = |name: &str| dir.path().join(name).display().to_string();
    for line in [
        format!("[admin]\ntoken_file = {:?}\n", file("admin.token")),
        format!(
            "secrets = [\"[redacted]\"]\nsecret_env = \"GH_SECRET\"\nsecret_file = {:?}\n",
            file("gh.secret")
        ),
        "destination_secret_env = \"DEST_KEY\"\n".to_owned(),
        "kind = \"standard\"\ngenerate_secret = true\n".to_owned(),
        "# the secret of source \"demo\": generated on first start into ./hookinbox-data/secrets/demo.secret\n"
            .to_owned(),
        "# the key that signs deliveries to destination \"demo\": generated on first start into ./hookinbox-data/secrets/demo.destination.secret\n"
            .to_owned(),
    ] {
        assert!(shown.contains(&line), "no {line:?} in\n{shown}");
    }
    assert!(!shown.contains("admin token"), "{shown}");
    assert!(raw::parse(&shown, "shown").is_ok(), "{shown}");
}

#[test]
fn meta_needs_a_verify_token_and_no_other_kind_takes_one() {
    let error = |text: &str, env: &dyn Fn(&str) -> Option<String>| {
        Config::from_toml(text, "f.toml", None, env)
            .unwrap_err()
            .to_string()
    };
    let meta = "[[source]]\nname = \"wa\"\nkind = \"whatsapp\"\nsecret_env = \"APP_SECRET\"\n";
    let env = |name: &str| match name {
        "APP_SECRET" => Some("app-secret".to_owned()),
        "VT" => Some("the-verify-token".to_owned()),
        "EMPTY" => Some("  ".to_owned()),
        _ => None,
    };
    let err = error(meta, &env);
    assert!(
        err.contains("source[0].verify_token (source \"wa\"): is required for kind = \"meta\""),
        "{err}"
    );
    let err = error(&format!("{meta}verify_token_env = \"EMPTY\"\n"), &env);
    assert!(
        err.contains("source[0].verify_token_env (source \"wa\"): is empty"),
        "{err}"
    );
    let err = error(
        &format!("{meta}verify_token_env = \"VT\"\nverify_token = \"x\"\n"),
        &env,
    );
    assert!(err.contains("set only one of verify_token"), "{err}");

    let config = Config::from_toml(
        &format!("{meta}verify_token_env = \"VT\"\n"),
        "f.toml",
        None,
        &env,
    )
    .unwrap();
    let source = &config.sources[0];
    assert_eq!(source.kind, Kind::Meta);
    let token = source.verify_token.as_ref().unwrap();
    assert_eq!(token.value.expose(), "the-verify-token");
    assert_eq!(token.origin, SecretOrigin::Env("VT".into()));
    let shown = config.to_redacted_toml();
    assert!(shown.contains("verify_token_env = \"VT\"\n"), "{shown}");
    assert!(!shown.contains("the-verify-token"), "{shown}");

    let err = error(
        "[[source]]\nname = \"gh\"\nkind = \"github\"\nsecret = \"s\"\nverify_token = \"t\"\n",
        &env,
    );
    assert!(
        err.starts_with(
            "f.toml:5:16: source[0].verify_token (source \"gh\"): applies only to kind = \"meta\", not github"
        ),
        "{err}"
    );
}

/// Regression (found by `config::props`): a control character in
/// `data_dir` ended the comment that names a generated secret's file, and
/// `config check` printed something that was no longer TOML.
#[test]
fn a_control_character_in_a_path_stays_inside_its_comment() {
    let env = |name: &str| (name == "HOOKINBOX_DATA_DIR").then(|| "data\ndir\u{7f}".to_owned());
    let shown = Config::embedded(&env).unwrap().to_redacted_toml();
    assert!(raw::parse(&shown, "shown").is_ok(), "{shown}");
    assert!(
        shown.contains("data\\ndir\\u{7f}/secrets/admin.token.secret\n"),
        "{shown}"
    );
}

/// A `standard` source's secret is a Standard Webhooks key: one that is
/// not is refused at load, naming the key it came from.
#[test]
fn a_standard_source_secret_that_is_not_a_key_names_its_key() {
    let text = "[[source]]\nname = \"s\"\nkind = \"standard\"\nsecret_env = \"S\"\n";
    let env = |name: &str| (name == "S").then(|| "whsec_not base64!".to_owned());
    let err = Config::from_toml(text, "f.toml", None, &env).unwrap_err();
    assert_eq!(err.key, "source[0].secret_env");
    assert!(err.message.contains("base64"), "{err}");
}

/// Regression: `header_read_timeout = "500000000000y"` passed `config
/// check`, then every connection panicked adding it to an `Instant`; a
/// huge `breaker_cooldown` killed the scheduler the same way. Every
/// duration key is bounded at load.
#[test]
fn every_duration_key_refuses_an_absurd_value_naming_key_value_and_maximum() {
    let alerts = "[alerts]\nurl = \"http://127.0.0.1:9/alerts\"\n";
    let source = r#"[[source]]
name = "s"
kind = "github"
secret = "x"
destination = "http://127.0.0.1:9/app"
"#;
    // (section, key, the key as errors name it, its maximum)
    let keys = [
        (
            "[server]\n",
            "header_read_timeout",
            "server.header_read_timeout",
            "1h",
        ),
        (
            "[server]\n",
            "body_read_timeout",
            "server.body_read_timeout",
            "1h",
        ),
        (
            "[server]\n",
            "shutdown_timeout",
            "server.shutdown_timeout",
            "1h",
        ),
        (
            "[retention]\n",
            "dedupe_ttl",
            "retention.dedupe_ttl",
            "10years",
        ),
        (
            "[retention]\n",
            "payload_ttl",
            "retention.payload_ttl",
            "10years",
        ),
        ("[retention]\n", "dlq_ttl", "retention.dlq_ttl", "10years"),
        (
            "[retention]\n",
            "sweep_interval",
            "retention.sweep_interval",
            "1day",
        ),
        (alerts, "pending_age", "alerts.pending_age", "10years"),
        (alerts, "min_interval", "alerts.min_interval", "7days"),
        (alerts, "check_interval", "alerts.check_interval", "1day"),
        (source, "tolerance", "source[0].tolerance", "1day"),
        (
            source,
            "expect_within",
            "source[0].expect_within",
            "2months",
        ),
        (source, "connect_timeout", "source[0].connect_timeout", "1h"),
        (source, "timeout", "source[0].timeout", "1h"),
        (
            source,
            "initial_interval",
            "source[0].initial_interval",
            "7days",
        ),
        (source, "max_interval", "source[0].max_interval", "7days"),
        (source, "max_age", "source[0].max_age", "10years"),
        (
            source,
            "breaker_cooldown",
            "source[0].breaker_cooldown",
            "1day",
        ),
    ];
    for (section, key, named, max) in keys {
        for value in ["500000000000y", "1000y"] {
            let text = format!("{section}{key} = \"{value}\"\n");
            let err = match Config::from_toml(&text, "f.toml", None, &no_env) {
                Ok(_) => panic!("{key} = {value:?} was accepted"),
                Err(e) => e,
            };
            assert_eq!(err.key, named, "{err}");
            assert!(
                err.message.contains(value) && err.message.contains(max),
                "{key}: {err}"
            );
        }
        // The maximum itself is allowed (alone: initial_interval must
        // also stay under max_interval).
        if key != "initial_interval" {
            let text = format!("{section}{key} = \"{max}\"\n");
            if let Err(e) = Config::from_toml(&text, "f.toml", None, &no_env) {
                panic!("{key} = {max:?}: {e}");
            }
        }
    }
}

/// An admin listener reachable from other hosts is allowed (behind a
/// firewall or a VPN it is useful) but named: its token is then the only
/// thing between the network and every payload, replay and backup.
#[test]
fn a_non_loopback_admin_listener_is_warned_about() {
    let warned = |addr: &str| {
        let text = format!("[server]\nadmin_listen = \"{addr}\"\n");
        let config = Config::from_toml(&text, "f.toml", None, &no_env).unwrap();
        config
            .warnings
            .iter()
            .any(|w| w.contains("server.admin_listen") && w.contains("admin token"))
    };
    assert!(warned("0.0.0.0:8081"));
    assert!(warned("[::]:8081"));
    assert!(warned("192.0.2.10:8081"));
    assert!(!warned("127.0.0.1:8081"));
    assert!(!warned("[::1]:8081"));
    // The environment's address is judged too.
    let env = |name: &str| (name == "HOOKINBOX_ADMIN_LISTEN").then(|| "0.0.0.0:9".to_owned());
    let config = Config::embedded(&env).unwrap();
    assert!(
        config.warnings.iter().any(|w| w.contains("admin token")),
        "{:?}",
        config.warnings
    );
}

#[test]
fn an_unknown_log_level_is_refused_and_directives_pass() {
    let load = |level: &str| {
        let text = format!("[log]\nlevel = \"{level}\"\n");
        Config::from_toml(&text, "f.toml", None, &no_env).map(|c| c.log.level)
    };
    let err = load("verbose").unwrap_err().to_string();
    assert!(
        err.contains("log.level") && err.contains("\"verbose\" is not a level"),
        "{err}"
    );
    assert!(load("hookinbox=loud,info").is_err());
    for ok in [
        "info",
        "WARN",
        "off",
        "hookinbox=debug,warn",
        "hookinbox::store=trace",
    ] {
        assert_eq!(load(ok).unwrap(), ok);
    }
    // The environment's level is judged too.
    let env = |name: &str| (name == "HOOKINBOX_LOG_LEVEL").then(|| "chatty".to_owned());
    let err = Config::embedded(&env).unwrap_err().to_string();
    assert!(err.contains("\"chatty\" is not a level"), "{err}");
}

#[test]
fn an_empty_secret_variable_or_file_is_named() {
    let text = "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret_env = \"PAY_SECRET\"\n";
    let env = |name: &str| (name == "PAY_SECRET").then(|| "  ".to_owned());
    let err = Config::from_toml(text, "f.toml", None, &env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("source[0].secret_env")
            && err.contains("environment variable PAY_SECRET is set but empty"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.secret");
    std::fs::write(&file, "\n\n").unwrap();
    let text = format!(
        "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret_file = {:?}\n",
        file.display().to_string()
    );
    let err = Config::from_toml(&text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("holds no secret") && err.contains("empty.secret"),
        "{err}"
    );
}

/// Each accepted-but-suspicious setting is named in a warning, and a
/// plain config warns about none of them.
#[test]
fn settings_that_would_surprise_are_warned_about() {
    let warnings = |source: &str, retention: &str| {
        let text = format!("{retention}[[source]]\nname = \"s\"\nsecret_env = \"S\"\n{source}\n");
        let env = |name: &str| (name == "S").then(|| "whsec_abc".to_owned());
        Config::from_toml(&text, "f.toml", None, &env)
            .unwrap()
            .warnings
    };
    let has = |w: &[String], needle: &str| w.iter().any(|x| x.contains(needle));
    let plain = warnings(
        "kind = \"stripe\"\ntolerance = \"5m\"\ndestination = \"http://127.0.0.1:3000/\"",
        "",
    );
    assert!(plain.is_empty(), "{plain:?}");

    let w = warnings("kind = \"github\"\ntolerance = \"5m\"", "");
    assert!(
        has(
            &w,
            "source[0].tolerance has no effect: github signs no timestamp"
        ),
        "{w:?}"
    );

    let w = warnings(
        "kind = \"stripe\"\ndestination = \"http://127.0.0.1:3000/\"\nforward_headers = [\"Stripe-Signature\"]",
        "",
    );
    assert!(has(&w, "forwards stripe-signature"), "{w:?}");

    let w = warnings(
        "kind = \"stripe\"\ndestination = \"http://127.0.0.1:3000/\"\nmax_age = \"3d\"",
        "[retention]\ndedupe_ttl = \"1d\"\n",
    );
    assert!(
        has(
            &w,
            "retention.dedupe_ttl (1day) is shorter than source[0].max_age (3days)"
        ),
        "{w:?}"
    );

    let text = "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret_env = \"S\"\n";
    let env = |name: &str| (name == "S").then(|| "sk_live_51Habc".to_owned());
    let w = Config::from_toml(text, "f.toml", None, &env)
        .unwrap()
        .warnings;
    assert!(
        has(&w, "source[0].secret_env looks like a Stripe API key"),
        "{w:?}"
    );
    assert!(
        !has(&w, "sk_live_51Habc"),
        "a warning never holds the secret: {w:?}"
    );
}

#[test]
fn redact_url_keeps_where_it_goes_and_hides_credentials() {
    let shown = |text: &str| redact_url(&reqwest::Url::parse(text).unwrap());
    // Nothing to hide: exactly the URL as configured.
    for plain in [
        "http://127.0.0.1:9000/hooks",
        "https://app.example.com/",
        "http://[::1]:8080/in",
    ] {
        assert_eq!(shown(plain), plain);
    }
    assert_eq!(
        shown("http://u:pw@host/x?k=token"),
        "http://[redacted]@host/x?[redacted]"
    );
    assert_eq!(
        shown("https://only-user@host:8443/x#frag"),
        "https://[redacted]@host:8443/x#[redacted]"
    );
    assert_eq!(
        shown("https://:pw@host/?"),
        "https://[redacted]@host/?[redacted]"
    );
}

#[test]
fn hmac_kind_needs_its_scheme_and_an_id() {
    let text = "[[source]]\nname = \"h\"\nkind = \"hmac\"\nsecret = \"x\"\n";
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("signature_header"), "{err}");

    let text =
        "[[source]]\nname = \"h\"\nkind = \"hmac\"\nsecret = \"x\"\nsignature_header = \"X-Sig\"\n";
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("event_id"), "{err}");

    let text = r#"[[source]]
name = "h"
kind = "hmac"
secret = "x"
signature_header = "X-Sig"
event_id = ["header:X-Id"]
signed_payload = "{timestamp}.{body}"
"#;
    let err = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("timestamp_header"), "{err}");
}

#[test]
fn sizes_and_durations_parse() {
    assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
    assert_eq!(parse_size("512KiB").unwrap(), 512 << 10);
    assert_eq!(parse_size("100").unwrap(), 100);
    assert!(parse_size("1XB").is_err());
    assert_eq!(
        parse_duration("3d").unwrap(),
        Duration::from_secs(3 * 86400)
    );
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
}

/// A value's typed error keeps the text as written, and its message is the
/// one the file's readers saw before it was typed. A size of more digits
/// than a `usize` holds is too large, not "not a size".
#[test]
fn a_value_that_is_not_of_its_shape_says_which_way() {
    assert!(matches!(
        parse_size("1XB"),
        Err(ValueError::UnknownSizeUnit { unit, .. }) if unit == "XB"
    ));
    assert!(matches!(
        parse_size("MiB"),
        Err(ValueError::NotASize { .. })
    ));
    assert!(matches!(
        parse_size("99999999999999999999999"),
        Err(ValueError::SizeTooLarge { .. })
    ));
    assert!(matches!(
        parse_size("16777216TB"),
        Err(ValueError::UnknownSizeUnit { .. })
    ));
    assert!(matches!(
        parse_size("99999999999GiB"),
        Err(ValueError::SizeTooLarge { .. })
    ));
    let err = parse_duration("soon").unwrap_err();
    assert!(matches!(&err, ValueError::NotADuration { text, .. } if text == "soon"));
    assert!(
        err.to_string().starts_with("\"soon\" is not a duration ("),
        "{err}"
    );
    let err = Kind::parse("stripy").unwrap_err();
    assert!(matches!(&err, ValueError::UnknownName { text, .. } if text == "stripy"));
    assert!(
        err.to_string().contains("unknown variant `stripy`"),
        "{err}"
    );
}

/// Each way a locator can be wrong is its own variant, and a joined
/// locator fails on its first bad part.
#[test]
fn a_locator_that_names_no_place_says_which_way() {
    assert_eq!(
        Locator::parse("header:X Bad"),
        Err(LocatorError::HeaderName {
            name: "X Bad".into()
        })
    );
    assert_eq!(
        Locator::parse("json:data/id"),
        Err(LocatorError::RelativePointer {
            pointer: "data/id".into()
        })
    );
    assert_eq!(
        Locator::parse("header:X-Topic & form:"),
        Err(LocatorError::Unknown {
            text: "form:".into()
        })
    );
    assert_eq!(
        SourceName::parse("Shop").unwrap_err(),
        InvalidName {
            text: "Shop".into()
        }
    );
}

/// The subject and status patterns refuse by variant, naming the token or
/// the text at fault.
#[test]
fn a_destination_pattern_that_is_refused_names_the_part_at_fault() {
    assert_eq!(
        SubjectTemplate::parse("a..b"),
        Err(PatternError::EmptyToken {
            subject: "a..b".into()
        })
    );
    assert_eq!(
        SubjectTemplate::parse("a.x{source}"),
        Err(PatternError::Placeholder {
            token: "x{source}".into()
        })
    );
    assert_eq!(
        SubjectTemplate::parse("a.>"),
        Err(PatternError::Wildcard { token: ">".into() })
    );
    assert_eq!(
        StatusPattern::parse("6xx"),
        Err(PatternError::Status { text: "6xx".into() })
    );
    assert_eq!(
        TypePattern::parse(""),
        Err(PatternError::EventType { text: "".into() })
    );
}

/// `[keys]`: the defaults, a client's namespace defaulting to its name, and
/// its token read like the admin's (inline warned).
#[test]
fn keys_clients_take_their_tokens_and_namespaces() {
    let config = Config::embedded(&no_env).unwrap();
    assert_eq!(config.keys.lease, Duration::from_secs(30));
    assert_eq!(config.keys.ttl, Duration::from_secs(30 * 86_400));
    assert!(config.keys.clients.is_empty());

    let env = |name: &str| (name == "SHOP_KEYS_TOKEN").then(|| "shop-token-0123\n".to_owned());
    let text = "[keys]\nlease = \"10s\"\nttl = \"7d\"\n\
                [[keys.client]]\nname = \"shop\"\ntoken_env = \"SHOP_KEYS_TOKEN\"\n\
                [[keys.client]]\nname = \"mail\"\nnamespace = \"mailer\"\ntoken = \"mail-token-0123\"\n";
    let config = Config::from_toml(text, "f.toml", None, &env).unwrap();
    assert_eq!(config.keys.lease, Duration::from_secs(10));
    assert_eq!(config.keys.ttl, Duration::from_secs(7 * 86_400));
    let [shop, mail] = config.keys.clients.as_slice() else {
        panic!("two clients: {:?}", config.keys.clients);
    };
    assert_eq!(
        (shop.name.as_str(), shop.namespace.as_str()),
        ("shop", "shop")
    );
    assert_eq!(shop.token.value.expose(), "shop-token-0123");
    assert_eq!(mail.namespace, "mailer");
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.contains("keys.client[1].token is inline")),
        "{:?}",
        config.warnings
    );
    let shown = config.to_redacted_toml();
    assert!(!shown.contains("mail-token-0123"), "{shown}");
    assert!(shown.contains("token_env = \"SHOP_KEYS_TOKEN\""), "{shown}");
}

/// Each refusal of `[keys]` names the file, the line and column of the
/// value, the key and what to do.
#[test]
fn keys_refusals_name_the_place_and_the_problem() {
    let error = |text: &str| {
        Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string()
    };
    let client = |extra: &str| format!("[[keys.client]]\nname = \"a\"\ntoken = \"tok-a\"\n{extra}");
    assert_eq!(
        error("[keys]\nlease = \"0s\"\n"),
        "f.toml:2:9: keys.lease: must be at least 1s"
    );
    assert!(
        error("[keys]\nlease = \"2h\"\n")
            .starts_with("f.toml:2:9: keys.lease: \"2h\" is longer than the maximum of 1h"),
        "{}",
        error("[keys]\nlease = \"2h\"\n")
    );
    assert_eq!(
        error("[keys]\nttl = \"500ms\"\n"),
        "f.toml:2:7: keys.ttl: must be at least 1s"
    );
    assert!(
        error("[keys]\nttl = \"366d\"\n").starts_with("f.toml:2:7: keys.ttl: \"366d\" is longer"),
        "{}",
        error("[keys]\nttl = \"366d\"\n")
    );
    assert_eq!(
        error("[[keys.client]]\nname = \"\"\ntoken = \"t\"\n"),
        "f.toml:2:8: keys.client[0].name: is missing or empty: give each client a name"
    );
    assert_eq!(
        error(&client(
            "[[keys.client]]\nname = \"a\"\ntoken = \"tok-b\"\n"
        )),
        "f.toml:5:8: keys.client[1].name: \"a\" is already the name of another client"
    );
    assert_eq!(
        error(&client("namespace = \"\"\n")),
        "f.toml:4:13: keys.client[0].namespace: is empty: leave it out to use the name"
    );
    assert_eq!(
        error(&client(
            "[[keys.client]]\nname = \"b\"\nnamespace = \"a\"\ntoken = \"tok-b\"\n"
        )),
        "f.toml:6:13: keys.client[1].namespace: \"a\" is already another client's namespace: give each app its own"
    );
    assert_eq!(
        error("[[keys.client]]\nname = \"a\"\n"),
        "f.toml:1:1: keys.client[0].token: is missing: set token_file or token_env"
    );
    assert_eq!(
        error("[[keys.client]]\nname = \"a\"\ntoken = \" \"\n"),
        "f.toml:3:9: keys.client[0].token: is empty"
    );
    assert_eq!(
        error(&client(
            "[[keys.client]]\nname = \"b\"\ntoken = \"tok-a\"\n"
        )),
        "f.toml:6:9: keys.client[1].token: is another client's token: give each its own"
    );
    assert_eq!(
        error(
            "[admin]\ntoken = \"admin-token-0123456789\"\n\
             [[keys.client]]\nname = \"a\"\ntoken = \"admin-token-0123456789\"\n"
        ),
        "f.toml:5:9: keys.client[0].token: is the admin token: give each client a token of its own"
    );
    assert!(
        error(&client("token_env = \"X\"\n"))
            .contains("set only one of token, token_env, token_file"),
        "{}",
        error(&client("token_env = \"X\"\n"))
    );
}

/// `[replication]`: the servers, the stream, the role and the lease, with
/// their defaults; the effective config hides a URL's credentials.
#[test]
fn replication_takes_its_servers_role_and_lease() {
    assert!(Config::embedded(&no_env).unwrap().replication.is_none());
    let text = "[admin]\ntoken = \"0123456789abcdef0123\"\n[replication]\nurl = \"nats://u:secret@10.0.0.2:4222, tls://10.0.0.3:4222\"\n\
                role = \"standby\"\nnode = \"vm-b\"\n";
    let config = Config::from_toml(text, "f.toml", None, &no_env).unwrap();
    let r = config.replication.as_ref().unwrap();
    assert_eq!(r.urls.len(), 2);
    assert_eq!(r.urls[1].as_str(), "tls://10.0.0.3:4222");
    assert_eq!(
        (r.stream.as_str(), r.replicas, r.role, r.node.as_str()),
        (
            "hookinbox",
            1,
            crate::words::ReplicationRole::Standby,
            "vm-b"
        )
    );
    assert_eq!(r.lease, Duration::from_secs(10));
    assert_eq!(r.snapshot_interval, Duration::from_secs(3600));
    assert_eq!(r.compression, crate::words::FrameCodec::Zstd);
    let shown = config.to_redacted_toml();
    assert!(shown.contains("compression = \"zstd\""), "{shown}");
    assert!(!shown.contains("u:secret"), "{shown}");
    assert!(shown.contains("nats://[redacted]@10.0.0.2:4222"), "{shown}");
    assert!(shown.contains("role = \"standby\""), "{shown}");
    // Without a node, the host's name.
    let text = "[admin]\ntoken = \"0123456789abcdef0123\"\n\
                [replication]\nurl = \"nats://127.0.0.1:4222\"\nrole = \"primary\"\n\
                stream = \"shop_inbox\"\nreplicas = 3\nlease = \"5s\"\n\
                snapshot_interval = \"10m\"\ncompression = \"none\"\n";
    let r = Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap()
        .replication
        .unwrap();
    assert_eq!(
        (r.replicas, r.lease, r.snapshot_interval, r.compression),
        (
            3,
            Duration::from_secs(5),
            Duration::from_secs(600),
            crate::words::FrameCodec::Plain
        )
    );
    assert!(!r.node.is_empty());
}

/// Each refusal of `[replication]` names its key and what to do.
#[test]
fn replication_refusals_name_the_key_and_the_problem() {
    let base = "[replication]\nurl = \"nats://127.0.0.1:4222\"\nrole = \"primary\"\n";
    let cases = [
        (
            "[replication]\nrole = \"primary\"\n",
            "replication.url",
            "is required",
        ),
        (
            "[replication]\nurl = \"http://127.0.0.1:4222\"\nrole = \"primary\"\n",
            "replication.url",
            "nats://",
        ),
        (
            "[replication]\nurl = \"nats://127.0.0.1:4222\"\n",
            "replication.role",
            "is required",
        ),
        (
            "[replication]\nurl = \"nats://127.0.0.1:4222\"\nrole = \"leader\"\n",
            "replication.role",
            "\"primary\" or \"standby\"",
        ),
        (
            &format!("{base}stream = \"a.b\"\n"),
            "replication.stream",
            "letters, digits",
        ),
        (
            &format!("{base}replicas = 0\n"),
            "replication.replicas",
            "1 to 5",
        ),
        (
            &format!("{base}replicas = 7\n"),
            "replication.replicas",
            "1 to 5",
        ),
        (
            &format!("{base}lease = \"1s\"\n"),
            "replication.lease",
            "at least 2s",
        ),
        (&format!("{base}lease = \"2m\"\n"), "replication.lease", ""),
        (
            &format!("{base}snapshot_interval = \"5s\"\n"),
            "replication.snapshot_interval",
            "at least 10s",
        ),
        (
            &format!("{base}compression = \"lz4\"\n"),
            "replication.compression",
            "\"zstd\" or \"none\"",
        ),
        (
            &format!("{base}node = \" \"\n"),
            "replication.node",
            "is empty",
        ),
        (
            &format!("{base}creds_file = \"/nonexistent/nats.creds\"\n"),
            "replication.creds_file",
            "cannot read",
        ),
    ];
    for (text, key, says) in cases {
        let error = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(key) && error.contains(says),
            "{text}: {error}"
        );
    }
}

/// Regression (an outside drill): primary and standby each generated their
/// own delivery key, and after a takeover the app refused every delivery.
/// With `[replication]`, a secret left to the data dir is refused, naming
/// the key and where to put it; given ones pass.
#[test]
fn replication_refuses_every_secret_left_to_the_data_dir() {
    let admin = "[admin]\ntoken = \"0123456789abcdef0123\"\n";
    let replication = "[replication]\nurl = \"nats://127.0.0.1:4222\"\nrole = \"primary\"\n";
    let source = "[[source]]\nname = \"shop\"\nkind = \"standard\"\n";
    let given = "secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n";
    let to_app = "destination = \"http://127.0.0.1:3000/hooks\"\n";
    let app_key = "destination_secret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n";
    let cases = [
        (
            format!("{admin}{replication}{source}generate_secret = true\n"),
            "source[0].generate_secret",
            "secret_file or secret_env",
        ),
        (
            format!("{admin}{replication}{source}{given}{to_app}"),
            "source[0]",
            "source[0].destination_secret_file",
        ),
        (
            format!(
                "{admin}{replication}{source}{given}[[source.destination]]\nname = \"b\"\n\
                 url = \"http://127.0.0.1:3001/\"\n"
            ),
            "source[0]",
            "source[0].destination[0].secret_file",
        ),
        (
            format!("{replication}{source}{given}{to_app}{app_key}"),
            "admin.token",
            "admin.token_file",
        ),
    ];
    for (text, key, says) in &cases {
        let error = Config::from_toml(text, "f.toml", None, &no_env)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(key) && error.contains(says) && error.contains("every node"),
            "{text}: {error}"
        );
    }
    let whole = format!("{admin}{replication}{source}{given}{to_app}{app_key}");
    Config::from_toml(&whole, "f.toml", None, &no_env).unwrap();
    // Without [replication], each is still generated.
    let alone = format!("{source}generate_secret = true\n{to_app}");
    Config::from_toml(&alone, "f.toml", None, &no_env).unwrap();
}

/// `expect_within`: absent by default (never quiet), a duration above 0
/// when given.
#[test]
fn expect_within_is_off_unless_given_and_never_zero() {
    let base = "[[source]]\nname = \"s\"\nkind = \"stripe\"\nsecret = \"x\"\n";
    let config = Config::from_toml(base, "f.toml", None, &no_env).unwrap();
    assert_eq!(config.sources[0].expect_within, None);
    let config = Config::from_toml(
        &format!("{base}expect_within = \"6h\"\n"),
        "f.toml",
        None,
        &no_env,
    )
    .unwrap();
    assert_eq!(
        config.sources[0].expect_within,
        Some(Duration::from_secs(6 * 3600))
    );
    let err = Config::from_toml(
        &format!("{base}expect_within = \"0s\"\n"),
        "f.toml",
        None,
        &no_env,
    )
    .unwrap_err();
    assert_eq!(err.key, "source[0].expect_within", "{err}");
    assert!(err.message.contains("longer than 0s"), "{err}");
}

/// `server.admin_socket` takes an absolute path, a mode that leaves
/// hookinbox's own user read and write (0660 by default) and a group; its
/// mode and group without the socket are an error; a mode any user may
/// connect through is allowed but named.
#[test]
fn the_admin_socket_needs_an_absolute_path_and_a_mode_of_permission_bits() {
    let load =
        |lines: &str| Config::from_toml(&format!("[server]\n{lines}"), "f.toml", None, &no_env);
    let error = |lines: &str| load(lines).unwrap_err().to_string();
    let socket = load("admin_socket = \"/run/hookinbox/admin.sock\"\n")
        .unwrap()
        .server
        .admin_socket
        .unwrap();
    assert_eq!(
        socket,
        crate::config::AdminSocket {
            path: "/run/hookinbox/admin.sock".into(),
            mode: 0o660,
            group: None,
        }
    );
    let socket = load("admin_socket = \"/run/h.sock\"\nadmin_socket_mode = \"0600\"\nadmin_socket_group = \"shop\"\n")
        .unwrap()
        .server
        .admin_socket
        .unwrap();
    assert_eq!(
        (socket.mode, socket.group.as_deref()),
        (0o600, Some("shop"))
    );
    assert!(load("").unwrap().server.admin_socket.is_none());

    let e = error("admin_socket = \"admin.sock\"\n");
    assert!(
        e.contains("server.admin_socket") && e.contains("not an absolute path"),
        "{e}"
    );
    let e = error(&format!("admin_socket = \"/{}\"\n", "a".repeat(120)));
    assert!(e.contains("107 bytes"), "{e}");
    let e = error("admin_socket = \"/run/h.sock\"\nadmin_socket_mode = \"0999\"\n");
    assert!(
        e.contains("server.admin_socket_mode") && e.contains("octal"),
        "{e}"
    );
    let e = error("admin_socket = \"/run/h.sock\"\nadmin_socket_mode = \"1660\"\n");
    assert!(e.contains("server.admin_socket_mode"), "{e}");
    let e = error("admin_socket = \"/run/h.sock\"\nadmin_socket_mode = \"0060\"\n");
    assert!(e.contains("read and write"), "{e}");
    let e = error("admin_socket = \"/run/h.sock\"\nadmin_socket_group = \"\"\n");
    assert!(
        e.contains("server.admin_socket_group") && e.contains("empty"),
        "{e}"
    );
    let e = error("admin_socket_mode = \"0660\"\n");
    assert!(
        e.contains("server.admin_socket_mode") && e.contains("server.admin_socket is not"),
        "{e}"
    );
    let e = error("admin_socket_group = \"shop\"\n");
    assert!(e.contains("server.admin_socket_group"), "{e}");

    let warned = |mode: &str| {
        load(&format!(
            "admin_socket = \"/run/h.sock\"\nadmin_socket_mode = \"{mode}\"\n"
        ))
        .unwrap()
        .warnings
        .iter()
        .any(|w| w.contains("server.admin_socket_mode") && w.contains("every user"))
    };
    assert!(warned("0666"));
    assert!(!warned("0660"));
}
