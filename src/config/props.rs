//! Property tests of config loading: any text, and any value in any known
//! key, is loaded or refused with a [`ConfigError`], never a panic; a config
//! that loads prints (`config check`) in the file's own form, resolves its
//! secrets and builds its verifiers without a panic, and none of its
//! durations can overflow the clock arithmetic the server does with them.
//!
//! Arbitrary text is mostly refused by the TOML parser, so the deeper cases
//! are made of the real sections and keys (learnt from the raw config's
//! serde types, so a new key is tried without a word here), with values
//! shaped like what each key takes (durations, sizes, addresses, URLs, locators, templates) as well
//! as values of the wrong type.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

/// A key no section has: an unknown key is a refusal like any other.
const UNKNOWN_KEY: &str = "bogus_key";

/// Each table of the file with its keys, as `RawConfig` spells them
/// ([`raw_tables`]), and one unknown key each. Made once: proptest wants
/// `'static` lists.
fn sections() -> &'static [(&'static str, &'static [&'static str])] {
    static SECTIONS: std::sync::OnceLock<Vec<(&'static str, &'static [&'static str])>> =
        std::sync::OnceLock::new();
    SECTIONS.get_or_init(|| {
        raw_tables()
            .into_iter()
            .map(|(header, mut keys)| {
                keys.push(UNKNOWN_KEY);
                (
                    &*Box::leak(header.into_boxed_str()),
                    &*Box::leak(keys.into_boxed_slice()),
                )
            })
            .collect()
    })
}

/// Every table `RawConfig` reads (`[server]`, `[[source]]`,
/// `[[admin.user]]`, …) and every key of each, found by asking serde:
/// a key added to a raw struct, or a section, is here without a word.
fn raw_tables() -> Vec<(String, Vec<&'static str>)> {
    fn walk(
        path: &mut Vec<&'static str>,
        keys: &[&'static str],
        out: &mut Vec<(String, Vec<&'static str>)>,
    ) {
        for key in keys {
            path.push(key);
            if let Some((fields, array)) = trace::table_at(path) {
                let name = path.join(".");
                let header = match array {
                    true => format!("[[{name}]]"),
                    false => format!("[{name}]"),
                };
                // A table's own keys stay keys of its parent too: a value
                // of another type there is a refusal worth trying, and
                // `destination` is both a URL and `[[source.destination]]`.
                out.push((header, fields.to_vec()));
                walk(path, fields, out);
            }
            path.pop();
        }
    }
    let (root, _) = trace::table_at(&[]).expect("RawConfig is a table");
    let mut out = Vec::new();
    walk(&mut Vec::new(), root, &mut out);
    out
}

/// A serde deserializer that reads no input: it walks `RawConfig`'s
/// derived `Deserialize` down one path of keys and reports the fields of
/// the struct it finds there, so the tests learn every key from the types.
mod trace {
    use std::cell::Cell;

    use serde::Deserialize;
    use serde::de::value::{BorrowedStrDeserializer, Error};
    use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

    use super::raw::RawConfig;

    /// The fields of the table at `path` from `RawConfig`, and whether it
    /// is an array of tables; `None`: a value there, not a table.
    pub(super) fn table_at(path: &[&'static str]) -> Option<(&'static [&'static str], bool)> {
        let found = Cell::new(None);
        let array = Cell::new(false);
        let tracer = Tracer {
            path,
            found: &found,
            array: &array,
            in_any: false,
        };
        // Always an error: the walk stops where the path ends.
        let _ = RawConfig::deserialize(tracer);
        found.get().map(|fields| (fields, array.get()))
    }

    #[derive(Clone, Copy)]
    struct Tracer<'a> {
        /// The keys still to go down.
        path: &'a [&'static str],
        found: &'a Cell<Option<&'static [&'static str]>>,
        array: &'a Cell<bool>,
        /// Within `deserialize_any`'s probe: do not probe again (an
        /// untagged enum would ask forever).
        in_any: bool,
    }

    fn stop() -> Error {
        de::Error::custom("traced")
    }

    impl<'de> de::Deserializer<'de> for Tracer<'_> {
        type Error = Error;

        /// A value of a type that decides by what it is given (the
        /// `destination` URL or list of tables, an untagged enum): offered
        /// a list of one, to see whether a table is inside.
        fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.in_any {
                true => Err(stop()),
                false => self.deserialize_seq_of(visitor, true),
            }
        }

        fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            visitor.visit_some(self)
        }

        fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.deserialize_seq_of(visitor, false)
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            visitor: V,
        ) -> Result<V::Value, Error> {
            match self.path.split_first() {
                None => {
                    self.found.set(Some(fields));
                    Err(stop())
                }
                Some((key, rest)) => visitor.visit_map(OneKey {
                    key: Some(key),
                    value: Tracer {
                        path: rest,
                        in_any: false,
                        ..self
                    },
                }),
            }
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf unit unit_struct newtype_struct tuple tuple_struct map
            enum identifier ignored_any
        }
    }

    impl<'a> Tracer<'a> {
        fn deserialize_seq_of<'de, V: Visitor<'de>>(
            self,
            visitor: V,
            in_any: bool,
        ) -> Result<V::Value, Error> {
            if self.path.is_empty() {
                self.array.set(true);
            }
            visitor.visit_seq(OneElement(Some(Tracer { in_any, ..self })))
        }
    }

    /// A table of one key: the next of the path.
    struct OneKey<'a> {
        key: Option<&'static str>,
        value: Tracer<'a>,
    }

    impl<'de> MapAccess<'de> for OneKey<'_> {
        type Error = Error;

        fn next_key_seed<K: DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, Error> {
            match self.key.take() {
                Some(key) => seed
                    .deserialize(BorrowedStrDeserializer::new(key))
                    .map(Some),
                None => Ok(None),
            }
        }

        fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Error> {
            seed.deserialize(self.value)
        }
    }

    /// A list of one element, for an array of tables.
    struct OneElement<'a>(Option<Tracer<'a>>);

    impl<'de> SeqAccess<'de> for OneElement<'_> {
        type Error = Error;

        fn next_element_seed<S: DeserializeSeed<'de>>(
            &mut self,
            seed: S,
        ) -> Result<Option<S::Value>, Error> {
            self.0
                .take()
                .map(|tracer| seed.deserialize(tracer))
                .transpose()
        }
    }
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
            || k == "expect_within"
            || k == "lease" =>
        {
            duration.boxed()
        }
        "max_body" | "max_buffered_body" => {
            prop_oneof![size, any::<u64>().prop_map(|n| n.to_string())].boxed()
        }
        "listen" | "admin_listen" => addr.boxed(),
        "url" | "destination" | "public_url" | "dashboard_url" => {
            prop_oneof![url, "nats://[a-z0-9.:]{0,12}".prop_map(quoted)].boxed()
        }
        "destination_subject" | "subject" => template.clone().boxed(),
        "event_id" | "event_type" => prop_oneof![
            locator.clone(),
            proptest::collection::vec(locator, 0..3).prop_map(|l| format!("[{}]", l.join(", "))),
        ]
        .boxed(),
        "signed_payload" => template.boxed(),
        "kind" => kind.boxed(),
        // A replication node's, or a person's.
        "role" => prop_oneof![
            proptest::sample::select(vec!["primary", "standby", "viewer", "operator", "admin"])
                .prop_map(|s| quoted(s.to_owned())),
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
    let section = proptest::sample::select(sections()).prop_flat_map(|(header, keys)| {
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
        if let Some(t) = s.expect_within {
            all.push(("expect_within".into(), t));
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
        (section, line) in proptest::sample::select(sections())
            .prop_flat_map(|(header, keys)| (Just(header), line(keys))),
    ) {
        // The new line goes first in its section (TOML refuses a repeated
        // key, which is a refusal like any other); a section VALID has not
        // comes last, with the line.
        let text = match VALID.contains(&format!("{section}\n")) {
            true => VALID.replacen(&format!("{section}\n"), &format!("{section}\n{line}\n"), 1),
            false => format!("{VALID}\n{section}\n{line}\n"),
        };
        load(&text)?;
    }
}

/// The tables and keys the walk of the raw config finds (printed with
/// `--nocapture`), among them those the hand-written lists had missed.
#[test]
fn every_table_and_key_of_the_raw_config_is_found() {
    let tables = raw_tables();
    for (header, keys) in &tables {
        println!("{header} {keys:?}");
    }
    let keys_of = |header: &str| {
        let (_, keys) = tables.iter().find(|(h, _)| h == header).unwrap();
        keys.clone()
    };
    let headers: Vec<&str> = tables.iter().map(|(h, _)| h.as_str()).collect();
    for header in [
        "[server]",
        "[keys]",
        "[[keys.client]]",
        "[[admin.user]]",
        "[[source]]",
        "[[source.destination]]",
    ] {
        assert!(
            headers.contains(&header),
            "{header} not found in {headers:?}"
        );
    }
    for key in [
        "max_connections",
        "max_buffered_body",
        "tls_cert_file",
        "tls_key_file",
    ] {
        assert!(keys_of("[server]").contains(&key), "{key}");
    }
    assert!(keys_of("[[source]]").contains(&"verify_token"));
}
