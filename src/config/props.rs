//! Property tests of config loading: any text, and any value in any known
//! key, is loaded or refused with a [`ConfigError`], never a panic; a config
//! that loads prints (`config check`) in the file's own form, resolves its
//! secrets and builds its verifiers without a panic, and none of its
//! durations can overflow the clock arithmetic the server does with them.
//!
//! Arbitrary text is mostly refused by the TOML parser, so the deeper cases
//! are made of the real sections and keys, with values shaped like what each
//! key takes (durations, sizes, addresses, URLs, locators, templates) as well
//! as values of the wrong type.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

/// Every key of every section, as `RawConfig` spells them.
const SERVER_KEYS: [&str; 6] = [
    "listen",
    "admin_listen",
    "data_dir",
    "header_read_timeout",
    "body_read_timeout",
    "shutdown_timeout",
];
const RETENTION_KEYS: [&str; 5] = [
    "dedupe_ttl",
    "payload_ttl",
    "dlq_ttl",
    "audit_ttl",
    "sweep_interval",
];
const LOG_KEYS: [&str; 3] = ["level", "format", "summary_interval"];
const REPLICATION_KEYS: [&str; 12] = [
    "url",
    "stream",
    "replicas",
    "role",
    "lease",
    "node",
    "snapshot_interval",
    "creds_file",
    "token",
    "token_env",
    "token_file",
    "ca_file",
];
const ADMIN_KEYS: [&str; 3] = ["token", "token_env", "token_file"];
const ALERT_KEYS: [&str; 8] = [
    "url",
    "dlq_threshold",
    "pending_age",
    "min_interval",
    "check_interval",
    "format",
    "host",
    "dashboard_url",
];
const SOURCE_KEYS: [&str; 43] = [
    "name",
    "kind",
    "secret",
    "secrets",
    "secret_env",
    "secret_file",
    "generate_secret",
    "tolerance",
    "max_body",
    "event_id",
    "event_type",
    "public_url",
    "destination",
    "destination_secret",
    "destination_secret_env",
    "destination_secret_file",
    "forward_headers",
    "destination_ca_file",
    "destination_subject",
    "destination_creds_file",
    "filter_types",
    "filter_match",
    "connect_timeout",
    "timeout",
    "initial_interval",
    "max_interval",
    "max_attempts",
    "max_age",
    "retry_statuses",
    "max_concurrency",
    "max_rate",
    "paused",
    "breaker_failures",
    "breaker_cooldown",
    "ordering_key",
    "ordering_on_dead_letter",
    "signature_header",
    "algorithm",
    "encoding",
    "prefix",
    "signed_payload",
    "timestamp_header",
    "bogus_key",
];

/// Each section header with its keys.
fn sections() -> [(&'static str, &'static [&'static str]); 7] {
    [
        ("[server]", &SERVER_KEYS),
        ("[retention]", &RETENTION_KEYS),
        ("[log]", &LOG_KEYS),
        ("[admin]", &ADMIN_KEYS),
        ("[alerts]", &ALERT_KEYS),
        ("[replication]", &REPLICATION_KEYS),
        ("[[source]]", &SOURCE_KEYS),
    ]
}

fn quoted(s: String) -> String {
    toml::Value::String(s).to_string()
}

/// A TOML value, as text, of the shape `key` takes, or of another shape.
fn value(key: &'static str) -> BoxedStrategy<String> {
    let duration =
        "[0-9]{1,25} ?(ns|us|ms|s|m|h|d|w|y|days|years|parsecs)?( [0-9]{1,3}s)?".prop_map(quoted);
    let size = "[0-9]{1,22} ?(B|KiB|MiB|GiB|KB|MB|GB|XB)?".prop_map(quoted);
    let addr = "(127\\.0\\.0\\.1|0\\.0\\.0\\.0|\\[::1?\\]|[0-9.]{1,15}|[a-z]{1,8}):[0-9]{0,6}"
        .prop_map(quoted);
    let url = "(https?|ftp|file|)://([a-z]{1,5}(:[a-z]{0,5})?@)?[a-z0-9.\\[\\]:%]{0,20}(/[ -~]{0,20})?(\\?[ -~]{0,10})?"
        .prop_map(quoted);
    let locator = "(header:|json:|form:|body-sha256|)[ -~]{0,12}".prop_map(quoted);
    let template =
        "([a-z.:]{0,3}\\{(body|timestamp|header:[ -~]{0,8}|[a-z]{0,5})\\}?){0,3}".prop_map(quoted);
    // Relative names in an empty directory: a load never reads a real file.
    let file = "[a-z]{0,8}(\\.secret|\\.pem)?".prop_map(quoted);
    let text = ".{0,30}".prop_map(quoted);
    let kind = prop_oneof![
        proptest::sample::select(Kind::ALL.to_vec()).prop_map(|k| k.as_str().to_owned()),
        Just("svix".to_owned()),
        "[a-z]{0,8}",
    ]
    .prop_map(quoted);
    let scalar = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| toml::Value::Float(f).to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        text.clone(),
    ];
    let shaped = match key {
        k if k.ends_with("timeout")
            || k.ends_with("ttl")
            || k.ends_with("interval")
            || k.ends_with("age")
            || k.ends_with("cooldown")
            || k == "tolerance"
            || k == "lease" =>
        {
            duration.boxed()
        }
        "max_body" => prop_oneof![size, any::<u64>().prop_map(|n| n.to_string())].boxed(),
        "listen" | "admin_listen" => addr.boxed(),
        "url" | "destination" | "public_url" | "dashboard_url" => {
            prop_oneof![url, "nats://[a-z0-9.:]{0,12}".prop_map(quoted)].boxed()
        }
        "destination_subject" => template.clone().boxed(),
        "event_id" | "event_type" => prop_oneof![
            locator.clone(),
            proptest::collection::vec(locator, 0..3).prop_map(|l| format!("[{}]", l.join(", "))),
        ]
        .boxed(),
        "signed_payload" => template.boxed(),
        "kind" => kind.boxed(),
        "role" => prop_oneof![
            Just(quoted("primary".into())),
            Just(quoted("standby".into())),
            text.clone()
        ]
        .boxed(),
        k if k.ends_with("_file") => file.boxed(),
        "retry_statuses" | "forward_headers" | "secrets" | "filter_types" => {
            proptest::collection::vec(scalar.clone(), 0..4)
                .prop_map(|l| format!("[{}]", l.join(", ")))
                .boxed()
        }
        "format" => prop_oneof![
            Just(quoted("json".into())),
            Just(quoted("slack".into())),
            text.clone()
        ]
        .boxed(),
        "algorithm" => prop_oneof![
            proptest::sample::select(vec!["sha1", "sha256", "sha512", "md5"])
                .prop_map(|s| quoted(s.to_owned())),
            text.clone(),
        ]
        .boxed(),
        "encoding" => prop_oneof![
            proptest::sample::select(vec!["hex", "base64", "base32"])
                .prop_map(|s| quoted(s.to_owned())),
            text.clone(),
        ]
        .boxed(),
        _ => text.clone().boxed(),
    };
    // Mostly the right shape, sometimes any scalar: a type error is a
    // refusal too.
    prop_oneof![3 => shaped, 1 => scalar].boxed()
}

/// One `key = value` line for a key of `keys`.
fn line(keys: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(keys)
        .prop_flat_map(|k| value(k).prop_map(move |v| format!("{k} = {v}")))
}

/// A config made of real sections, each with a few of its keys.
fn toml_ish() -> impl Strategy<Value = String> {
    let section = proptest::sample::select(sections().to_vec()).prop_flat_map(|(header, keys)| {
        proptest::collection::vec(line(keys), 0..6)
            .prop_map(move |lines| format!("{header}\n{}\n", lines.join("\n")))
    });
    proptest::collection::vec(section, 0..5).prop_map(|s| s.concat())
}

/// A config that loads: a source with a destination, alerts, and every
/// section present, so one changed key is judged in context.
const VALID: &str = r#"[server]
listen = "127.0.0.1:0"

[retention]
dedupe_ttl = "1d"

[log]
level = "info"

[admin]
token = "0123456789abcdef0123"

[alerts]
url = "http://127.0.0.1:9/alerts"

[[source]]
name = "shop"
kind = "hmac"
secret = "x"
signature_header = "x-sig"
event_id = ["header:x-id"]
destination = "http://127.0.0.1:9/app"
"#;

/// Every duration of a loaded config, named.
fn durations(c: &Config<Loaded>) -> Vec<(String, Duration)> {
    let mut all = vec![
        ("header_read_timeout".into(), c.server.header_read_timeout),
        ("body_read_timeout".into(), c.server.body_read_timeout),
        ("shutdown_timeout".into(), c.server.shutdown_timeout),
        ("dedupe_ttl".into(), c.retention.dedupe_ttl),
        ("payload_ttl".into(), c.retention.payload_ttl),
        ("dlq_ttl".into(), c.retention.dlq_ttl),
        ("audit_ttl".into(), c.retention.audit_ttl),
        ("sweep_interval".into(), c.retention.sweep_interval),
    ];
    if let Some(a) = &c.alerts {
        all.push(("pending_age".into(), a.pending_age));
        all.push(("min_interval".into(), a.min_interval));
        all.push(("check_interval".into(), a.check_interval));
    }
    for s in &c.sources {
        if let Some(t) = s.tolerance {
            all.push(("tolerance".into(), t));
        }
        for d in &s.destinations {
            all.push(("connect_timeout".into(), d.connect_timeout));
            all.push(("timeout".into(), d.timeout));
            all.push(("initial_interval".into(), d.initial_interval));
            all.push(("max_interval".into(), d.max_interval));
            all.push(("max_age".into(), d.max_age));
            all.push(("breaker_cooldown".into(), d.breaker_cooldown));
        }
    }
    all
}

/// Loads `text`; for a config that loads, prints it, resolves its sources
/// and builds their verifiers, and checks its durations fit the clock
/// arithmetic.
fn load(text: &str) -> Result<(), TestCaseError> {
    let dir = std::env::temp_dir().join("hookinbox-props-no-such-dir");
    let Ok(config) = Config::from_toml(text, "props.toml", Some(&dir), &|_| None) else {
        return Ok(());
    };
    let shown = config.to_redacted_toml();
    // Every key printed is a key of the file, every value of its type.
    if let Err(e) = raw::parse(&shown, "shown") {
        prop_assert!(false, "{e}\n{shown}");
    }
    // Per source, into a scratch dir: the config's own data_dir is any text.
    let data = tempfile::tempdir().unwrap();
    for source in config.sources.clone() {
        let source = source.resolve(data.path(), &mut Vec::new());
        prop_assert!(source.is_ok(), "{source:?}");
        if let Ok(source) = source {
            let _ = crate::verify::Verifier::new(&source);
        }
    }
    let now = Instant::now();
    let now_ms = crate::clock::Clock::system().now_ms();
    for (key, d) in durations(&config) {
        prop_assert!(
            now.checked_add(d).is_some(),
            "{key} = {d:?} overflows an Instant"
        );
        prop_assert!(
            u64::try_from(d.as_millis())
                .ok()
                .and_then(|ms| ms.checked_add(now_ms))
                .is_some(),
            "{key} = {d:?} overflows a millisecond timestamp"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_is_loaded_or_refused_never_a_panic(text in ".{0,200}") {
        load(&text)?;
    }

    #[test]
    fn known_sections_and_keys_with_any_values_are_loaded_or_refused(text in toml_ish()) {
        load(&text)?;
    }

    /// One key of a config that loads set to any value: loaded or refused.
    #[test]
    fn any_value_in_a_known_key_is_loaded_or_refused(
        (section, line) in proptest::sample::select(sections().to_vec())
            .prop_flat_map(|(header, keys)| (Just(header), line(keys))),
    ) {
        // The new line goes first in its section; TOML refuses a repeated
        // key, which is a refusal like any other.
        let text = VALID.replacen(&format!("{section}\n"), &format!("{section}\n{line}\n"), 1);
        load(&text)?;
    }
}
