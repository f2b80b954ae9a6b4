//! What a search looks for inside payloads, and the test of one payload:
//! the cheapest check first (a substring), then, for a JSON pointer, a walk
//! down the pointer's path that skips every other value without building
//! it. Most payloads fail the substring; those that pass are parsed once,
//! without a DOM: a search's cost per event is the bytes it reads.

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
        match value_at(body, &pointer.tokens).ok().flatten() {
            Some(Value::String(s)) => s == pointer.want,
            Some(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => {
                pointer.want_json.as_ref() == Some(&v)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // json_pointer's tests cover the ways a body fails to be JSON.
        assert!(!matches("a=x&b=y", None, Some(("/a", "x"))));
        // The text test alone does not need JSON.
        assert!(matches("a=x&b=y", Some("b=y"), None));
    }
}
