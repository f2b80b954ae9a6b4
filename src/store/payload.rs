//! What a search looks for inside payloads, and the test of one payload:
//! the cheapest check first (a substring), then, for a JSON pointer, a walk
//! down the pointer's path that skips every other value without building
//! it. Most payloads fail the substring; those that pass are parsed once,
//! without a DOM: a search's cost per event is the bytes it reads. The
//! substring only rejects what the walk would: a body with an escape (a
//! backslash) may write the value otherwise, and is always walked.

use std::borrow::Cow;
use std::sync::Arc;

use memchr::memmem::Finder;
use serde_json::Value;

use crate::json_pointer::{tokens, value_at};

/// What a search looks for inside payloads, beside the filter's fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayloadMatch {
    /// Bytes the payload contains, as written (case matters).
    pub text: Option<String>,
    /// A JSON pointer and the value there: a JSON string equal to it, or a
    /// number, `true`, `false` or `null` written the same way.
    pub pointer: Option<(String, String)>,
    /// The payload as the searcher may read it (values they may not read
    /// masked); `None`: as stored.
    pub seen_as: Option<SeenAs>,
}

/// How one searcher sees a payload: the bytes a match is tested on.
pub trait PayloadView: Send + Sync {
    /// `body`, of an event of `source`, as this searcher may read it.
    fn view<'b>(&self, source: &str, body: &'b [u8]) -> Cow<'b, [u8]>;
}

/// A shared [`PayloadView`]; equal only to itself.
#[derive(Clone)]
pub struct SeenAs(pub Arc<dyn PayloadView>);

impl std::fmt::Debug for SeenAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeenAs(..)")
    }
}

impl PartialEq for SeenAs {
    fn eq(&self, other: &SeenAs) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SeenAs {}

impl PayloadMatch {
    pub fn is_empty(&self) -> bool {
        self.text.is_none() && self.pointer.is_none()
    }

    /// The test of one payload, prepared once per search.
    pub fn matcher(&self) -> Matcher<'_> {
        let pointer = self.pointer.as_ref().map(|(pointer, want)| {
            // A number, bool or null is compared as JSON; else as text.
            let want_json = serde_json::from_str::<Value>(want)
                .ok()
                .filter(|v| !v.is_string() && !v.is_object() && !v.is_array());
            Pointer {
                tokens: tokens(pointer),
                written: written_only_as(want, want_json.as_ref()).map(Finder::new),
                want_json,
                want: want.as_str(),
            }
        });
        Matcher {
            text: self.text.as_deref().map(|t| Finder::new(t.as_bytes())),
            pointer,
            seen_as: self.seen_as.as_ref().map(|s| &*s.0),
        }
    }
}

/// The bytes a body holding `want` at the pointer contains unless it
/// writes the value with escapes, or `None` when the value has other
/// spellings (a float: `1200.0` is also `1.2e3`; a number written with
/// spaces or a `+`). A string or an integer, `true`, `false` or `null`
/// written as serde_json writes it has one spelling without escapes.
fn written_only_as<'a>(want: &'a str, want_json: Option<&Value>) -> Option<&'a [u8]> {
    match want_json {
        None => Some(want.as_bytes()),
        Some(Value::Number(n)) if n.is_f64() => None,
        Some(v) => {
            // Its JSON text, not `Value == str` (which compares a string).
            let canonical = v.to_string();
            (canonical == want).then_some(want.as_bytes())
        }
    }
}

/// [`PayloadMatch`] ready to test payloads.
pub struct Matcher<'a> {
    text: Option<Finder<'a>>,
    pointer: Option<Pointer<'a>>,
    seen_as: Option<&'a dyn PayloadView>,
}

struct Pointer<'a> {
    /// The pointer's reference tokens, unescaped (`~1` → `/`, `~0` → `~`).
    tokens: Vec<String>,
    want: &'a str,
    want_json: Option<Value>,
    /// [`written_only_as`]: the fast path's substring, when there is one.
    written: Option<Finder<'a>>,
}

impl Matcher<'_> {
    /// [`Matcher::matches`] on `body` as the searcher sees it (an event of
    /// `source`).
    pub fn matches_in(&self, source: &str, body: &[u8]) -> bool {
        match self.seen_as {
            Some(view) => self.matches(&view.view(source, body)),
            None => self.matches(body),
        }
    }

    /// Whether `body` contains the text and holds the value at the pointer
    /// (each when asked for). A body that is not JSON has no pointer.
    pub fn matches(&self, body: &[u8]) -> bool {
        if self.text.as_ref().is_some_and(|t| t.find(body).is_none()) {
            return false;
        }
        let Some(pointer) = &self.pointer else {
            return true;
        };
        !pointer.surely_absent(body) && pointer.holds(body)
    }
}

impl Pointer<'_> {
    /// The fast path: whether `body` cannot hold the value, seen without
    /// parsing it. Only ever true where [`Pointer::holds`] is false: any
    /// character of a JSON string may be written as an escape (`caf\u00e9`,
    /// `a\/b`, `\ud83d\ude00`), so a body with a backslash may hold the
    /// value without containing its bytes, and is left to the exact test.
    fn surely_absent(&self, body: &[u8]) -> bool {
        let Some(written) = &self.written else {
            return false;
        };
        written.find(body).is_none() && memchr::memchr(b'\\', body).is_none()
    }

    /// The exact test: the value at the pointer, as parsed, equals the one
    /// wanted.
    fn holds(&self, body: &[u8]) -> bool {
        match value_at(body, &self.tokens).ok().flatten() {
            Some(Value::String(s)) => s == self.want,
            Some(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => {
                self.want_json.as_ref() == Some(&v)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn matches(body: &str, text: Option<&str>, pointer: Option<(&str, &str)>) -> bool {
        let m = PayloadMatch {
            text: text.map(str::to_owned),
            pointer: pointer.map(|(p, v)| (p.to_owned(), v.to_owned())),
            seen_as: None,
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
        // json_pointer's tests cover the ways a body fails to be JSON.
        assert!(!matches("a=x&b=y", None, Some(("/a", "x"))));
        // The text test alone does not need JSON.
        assert!(matches("a=x&b=y", Some("b=y"), None));
    }

    /// Regression: `filter_match = "/data/tier=café"` filtered an event
    /// whose body wrote `"caf\u00e9"` (Python's `json.dumps` default): the
    /// substring test gave up before reading the value.
    #[test]
    fn a_value_written_with_escapes_matches_as_its_raw_form_does() {
        for (body, pointer, want) in [
            (r#"{"data":{"tier":"café"}}"#, "/data/tier", "café"),
            (r#"{"data":{"tier":"caf\u00e9"}}"#, "/data/tier", "café"),
            (r#"{"data":{"tier":"caf\u00E9"}}"#, "/data/tier", "café"),
            (
                r#"{"url":"https:\/\/x.test\/a"}"#,
                "/url",
                "https://x.test/a",
            ),
            (r#"{"mood":"\ud83d\ude00!"}"#, "/mood", "😀!"),
            (r#"{"mood":"😀!"}"#, "/mood", "😀!"),
            (r#"{"q":"say \"hi\""}"#, "/q", r#"say "hi""#),
            (r#"{"n":"\u0031\u0032"}"#, "/n", "12"),
            (r#"{"d\u0061ta":{"tier":"café"}}"#, "/data/tier", "café"),
        ] {
            assert!(matches(body, None, Some((pointer, want))), "{body}");
        }
        for (body, pointer, want) in [
            (r#"{"data":{"tier":"caf\u00e8"}}"#, "/data/tier", "café"),
            (r#"{"data":{"tier":"cafe"}}"#, "/data/tier", "café"),
            (r#"{"mood":"\ud83d\ude01!"}"#, "/mood", "😀!"),
            (
                r#"{"other":"café","data":{"tier":"caf\u00e8"}}"#,
                "/data/tier",
                "café",
            ),
        ] {
            assert!(!matches(body, None, Some((pointer, want))), "{body}");
        }
    }

    #[test]
    fn a_number_with_other_spellings_is_compared_as_parsed() {
        // A float has many spellings: the substring cannot decide.
        assert!(matches(r#"{"a":1.2e3}"#, None, Some(("/a", "1200.0"))));
        assert!(matches(r#"{"a":1200.00}"#, None, Some(("/a", "1200.0"))));
        // serde_json parses the value asked for, spaces and all.
        assert!(matches(r#"{"a":1200}"#, None, Some(("/a", " 1200"))));
        // An integer is an integer: 1200 is not 1.2e3.
        assert!(!matches(r#"{"a":1.2e3}"#, None, Some(("/a", "1200"))));
    }

    /// A body written with escapes chosen at random, as other encoders
    /// write JSON: each character of every string (keys too) as itself or
    /// as an escape (`\uXXXX`, a surrogate pair past U+FFFF, `\/`, `\n`…).
    fn write_escaped(v: &Value, escapes: &mut impl Iterator<Item = u8>, out: &mut String) {
        match v {
            Value::String(s) => write_str(s, escapes, out),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_escaped(item, escapes, out);
                }
                out.push(']');
            }
            Value::Object(members) => {
                out.push('{');
                for (i, (key, item)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(key, escapes, out);
                    out.push(':');
                    write_escaped(item, escapes, out);
                }
                out.push('}');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }

    fn write_str(s: &str, escapes: &mut impl Iterator<Item = u8>, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            let must = c == '"' || c == '\\' || c < ' ';
            match escapes.next().unwrap_or(0) % 4 {
                0 if !must => out.push(c),
                1 if c == '/' => out.push_str("\\/"),
                1 if c == '\n' => out.push_str("\\n"),
                2 => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04X}"));
                    }
                }
                _ => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
            }
        }
        out.push('"');
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            "[a-c/\"\\\\\n é😀]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-c/é]{0,2}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Every pointer to a value in `v`, with that value.
    fn leaves(v: &Value, at: String, out: &mut Vec<(String, Value)>) {
        match v {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    leaves(item, format!("{at}/{i}"), out);
                }
            }
            Value::Object(members) => {
                for (key, item) in members {
                    let token = key.replace('~', "~0").replace('/', "~1");
                    leaves(item, format!("{at}/{token}"), out);
                }
            }
            leaf => out.push((at, leaf.clone())),
        }
    }

    proptest! {
        /// The fast path only rejects what the exact comparison rejects,
        /// for any body, however escaped, and any pointer and value: the
        /// value at one of the body's own pointers (as text, or a number
        /// spelled otherwise) or any other.
        #[test]
        fn the_fast_path_rejects_only_what_the_exact_comparison_rejects(
            doc in json(),
            escapes in prop::collection::vec(any::<u8>(), 0..64),
            pick in any::<prop::sample::Index>(),
            how in 0..4u8,
            other in "[a-c/é😀0-9. ]{0,4}",
        ) {
            let mut body = String::new();
            write_escaped(&doc, &mut escapes.into_iter().cycle(), &mut body);
            let mut found = Vec::new();
            leaves(&doc, String::new(), &mut found);
            let (pointer, want) = if found.is_empty() || how == 3 {
                ("/a".to_owned(), other)
            } else {
                let (pointer, value) = pick.get(&found).clone();
                let want = match (how, value) {
                    (_, Value::String(s)) => s,
                    (1, Value::Number(n)) => format!("{:e}", n.as_f64().unwrap()),
                    (2, v) => format!(" {v}"),
                    (_, v) => v.to_string(),
                };
                (pointer, want)
            };
            let m = PayloadMatch { text: None, pointer: Some((pointer, want)), seen_as: None };
            let matcher = m.matcher();
            let p = matcher.pointer.as_ref().unwrap();
            let exact = p.holds(body.as_bytes());
            prop_assert!(!(p.surely_absent(body.as_bytes()) && exact), "{body} {m:?}");
            prop_assert_eq!(matcher.matches(body.as_bytes()), exact);
        }
    }
}
