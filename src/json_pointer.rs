//! JSON pointers (RFC 6901) read straight off the bytes: the value at one
//! path is built, every other member and element is skipped as it is
//! parsed. Verification finds an event's id and type this way, delivery
//! ordering its key, and search its pointer match: a request never pays
//! for a `serde_json::Value` of the whole body.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The reference tokens of a JSON pointer (RFC 6901): `""` is the whole
/// document, `"/a/0"` is `["a", "0"]`.
pub fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// `body` is not one JSON document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotJson;

/// The value at `tokens` in the JSON document `body`, as
/// `serde_json::Value::pointer` finds it, without building anything else:
/// other members and elements are skipped as they are parsed, but the whole
/// document is read, so a body that is not JSON is an error wherever the
/// path ends. `Ok(None)` when the path is absent.
pub fn value_at(body: &[u8], tokens: &[String]) -> Result<Option<Value>, NotJson> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(body);
    At {
        tokens,
        found: &mut found,
    }
    .deserialize(&mut de)
    .map_err(|_| NotJson)?;
    de.end().map_err(|_| NotJson)?;
    Ok(found)
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
            prop_assert_eq!(value_at(&body, &tokens(&pointer)), Ok(parsed.pointer(&pointer).cloned()));
        }
    }

    #[test]
    fn a_body_that_is_not_one_json_document_is_an_error_wherever_the_path_ends() {
        for body in [
            r#"{"a":"x"} {"a":"x"}"#,
            r#"{"a":"x""#,
            "a=x&b=y",
            r#"{"a":"x",}"#,
            r#"{"b":1,"a":"x",]"#,
        ] {
            assert_eq!(
                value_at(body.as_bytes(), &tokens("/a")),
                Err(NotJson),
                "{body}"
            );
            assert_eq!(
                value_at(body.as_bytes(), &tokens("/zz")),
                Err(NotJson),
                "{body}"
            );
        }
        assert_eq!(value_at(br#"{"a":"x"}"#, &tokens("/zz")), Ok(None));
    }
}
