//! What a search looks for inside payloads, and the test of one payload:
//! the cheapest check first (a substring), then, for a JSON pointer, a walk
//! down the pointer's path that skips every other value without building
//! it. Most payloads fail the substring; those that pass are parsed once,
//! without a DOM: a search's cost per event is the bytes it reads.

use std::fmt;

use memchr::memmem::Finder;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// What a search looks for inside payloads, beside the filter's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayloadMatch {
    /// Bytes the payload contains, as written (case matters).
    pub text: Option<String>,
    /// A JSON pointer and the value there: a JSON string equal to it, or a
    /// number, `true`, `false` or `null` written the same way.
    pub pointer: Option<(String, String)>,
}

impl PayloadMatch {
    pub fn is_empty(&self) -> bool {
        self.text.is_none() && self.pointer.is_none()
    }

    /// The test of one payload, prepared once per search.
    pub fn matcher(&self) -> Matcher<'_> {
        let pointer = self.pointer.as_ref().map(|(pointer, want)| Pointer {
            tokens: tokens(pointer),
            // A number, bool or null is compared as JSON; else as text.
            want_json: serde_json::from_str::<Value>(want)
                .ok()
                .filter(|v| !v.is_string() && !v.is_object() && !v.is_array()),
            want: want.as_str(),
        });
        Matcher {
            text: self.text.as_deref().map(|t| Finder::new(t.as_bytes())),
            // A payload whose pointer holds the value contains its text.
            value: self
                .pointer
                .as_ref()
                .map(|(_, want)| Finder::new(want.as_bytes())),
            pointer,
        }
    }
}

/// [`PayloadMatch`] ready to test payloads.
pub struct Matcher<'a> {
    text: Option<Finder<'a>>,
    value: Option<Finder<'a>>,
    pointer: Option<Pointer<'a>>,
}

struct Pointer<'a> {
    /// The pointer's reference tokens, unescaped (`~1` → `/`, `~0` → `~`).
    tokens: Vec<String>,
    want: &'a str,
    want_json: Option<Value>,
}

impl Matcher<'_> {
    /// Whether `body` contains the text and holds the value at the pointer
    /// (each when asked for). A body that is not JSON has no pointer.
    pub fn matches(&self, body: &[u8]) -> bool {
        for finder in [&self.text, &self.value].into_iter().flatten() {
            if finder.find(body).is_none() {
                return false;
            }
        }
        let Some(pointer) = &self.pointer else {
            return true;
        };
        match value_at(body, &pointer.tokens) {
            Some(Value::String(s)) => s == pointer.want,
            Some(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => {
                pointer.want_json.as_ref() == Some(&v)
            }
            _ => false,
        }
    }
}

/// The reference tokens of a JSON pointer (RFC 6901): `""` is the whole
/// document, `"/a/0"` is `["a", "0"]`.
fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// The value at `tokens` in the JSON document `body`, as
/// `serde_json::Value::pointer` finds it, without building anything else:
/// other members and elements are skipped as they are parsed. `None` when
/// the path is absent or `body` is not one JSON document.
fn value_at(body: &[u8], tokens: &[String]) -> Option<Value> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(body);
    At {
        tokens,
        found: &mut found,
    }
    .deserialize(&mut de)
    .ok()?;
    de.end().ok()?;
    found
}

/// Deserializes one value: keeps it if `tokens` is empty, else walks into
/// the member or element the first token names and skips the rest.
struct At<'p, 'f> {
    tokens: &'p [String],
    found: &'f mut Option<Value>,
}

impl<'de> DeserializeSeed<'de> for At<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.tokens.is_empty() {
            *self.found = Some(serde::Deserialize::deserialize(d)?);
            Ok(())
        } else {
            d.deserialize_any(self)
        }
    }
}

impl<'de> Visitor<'de> for At<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (token, rest) = (&self.tokens[0], &self.tokens[1..]);
        let mut found = None;
        while let Some(is_token) = map.next_key_seed(KeyIs(token))? {
            if is_token {
                // The last of duplicate members wins, as in a parsed Value.
                found = None;
                map.next_value_seed(At {
                    tokens: rest,
                    found: &mut found,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        *self.found = found;
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (token, rest) = (&self.tokens[0], &self.tokens[1..]);
        // serde_json takes an index only in its plain form: no sign, no
        // leading zero.
        let index = (!token.starts_with('+') && (token == "0" || !token.starts_with('0')))
            .then(|| token.parse::<usize>().ok())
            .flatten();
        let mut i = 0;
        loop {
            let more = if Some(i) == index {
                seq.next_element_seed(At {
                    tokens: rest,
                    found: &mut *self.found,
                })?
            } else {
                seq.next_element::<IgnoredAny>()?.map(|_| ())
            };
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    // A scalar has no members: the path is absent.
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// A member name, compared with a token without being copied.
struct KeyIs<'p>(&'p str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-c~/\"é]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-c~/01]{0,2}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn pointer() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                "[a-c01]{0,2}",
                Just("~0".to_owned()),
                Just("~1".to_owned()),
                Just("00".to_owned()),
                Just("+1".to_owned()),
            ],
            0..4,
        )
        .prop_map(|t| t.iter().map(|t| format!("/{t}")).collect())
    }

    proptest! {
        /// The walk finds what the body parsed as a `Value` holds at every
        /// pointer.
        #[test]
        fn value_at_agrees_with_serde_json(doc in json(), pointer in pointer()) {
            let body = serde_json::to_vec(&doc).unwrap();
            let parsed: Value = serde_json::from_slice(&body).unwrap();
            prop_assert_eq!(value_at(&body, &tokens(&pointer)), parsed.pointer(&pointer).cloned());
        }
    }

    fn matches(body: &str, text: Option<&str>, pointer: Option<(&str, &str)>) -> bool {
        let m = PayloadMatch {
            text: text.map(str::to_owned),
            pointer: pointer.map(|(p, v)| (p.to_owned(), v.to_owned())),
        };
        m.matcher().matches(body.as_bytes())
    }

    #[test]
    fn strings_match_as_text_and_scalars_as_json() {
        let body = r#"{"data":{"object":{"customer":"cus_1","amount":1200,"live":false,"gone":null,"n":"12"}},"tags":["a","b"]}"#;
        assert!(matches(
            body,
            None,
            Some(("/data/object/customer", "cus_1"))
        ));
        assert!(!matches(
            body,
            None,
            Some(("/data/object/customer", "cus_"))
        ));
        assert!(matches(body, None, Some(("/data/object/amount", "1200"))));
        assert!(!matches(
            body,
            None,
            Some(("/data/object/amount", "1200.5"))
        ));
        assert!(matches(body, None, Some(("/data/object/live", "false"))));
        assert!(matches(body, None, Some(("/data/object/gone", "null"))));
        // A string holding digits is a string: "12" matches it as text.
        assert!(matches(body, None, Some(("/data/object/n", "12"))));
        assert!(matches(body, None, Some(("/tags/1", "b"))));
        assert!(!matches(body, None, Some(("/tags/2", "b"))));
        assert!(matches(body, Some("cus_"), Some(("/tags/0", "a"))));
        assert!(!matches(body, Some("cus_2"), Some(("/tags/0", "a"))));
        assert!(matches(body, Some("amount"), None));
    }

    #[test]
    fn a_body_that_is_not_one_json_document_has_no_pointer() {
        for body in [
            r#"{"a":"x"} {"a":"x"}"#,
            r#"{"a":"x""#,
            "a=x&b=y",
            r#"{"a":"x",}"#,
        ] {
            assert!(!matches(body, None, Some(("/a", "x"))), "{body}");
        }
        // The text test alone does not need JSON.
        assert!(matches("a=x&b=y", Some("b=y"), None));
    }
}
