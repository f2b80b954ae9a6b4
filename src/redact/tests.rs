//! Redaction: what is masked, what stays byte for byte, and what is
//! withheld; and, for any body, that no masked value's text is left.

use proptest::prelude::*;

use super::*;

fn patterns(texts: &[&str]) -> Vec<Pattern> {
    texts.iter().map(|t| Pattern::parse(t).unwrap()).collect()
}

fn shown(texts: &[&str], body: &str) -> String {
    String::from_utf8(apply(&patterns(texts), body.as_bytes()).bytes().to_vec()).unwrap()
}

#[test]
fn the_values_at_the_pointers_are_masked_and_the_rest_is_kept_byte_for_byte() {
    let body = r#"{ "type":"charge.succeeded",
  "data": {"object": {"customer_email": "ana@example.com", "amount": 1200,
    "items": [ {"card": {"last4": "4242"}, "qty": 1}, {"card":{"last4":"0005"},"qty":2} ],
    "address": {"line1": "1 Main St", "city": "Lyon"}}}}"#;
    let got = shown(
        &[
            "/data/object/customer_email",
            "/data/object/items/*/card/last4",
            "/data/object/address",
            "/data/object/missing",
        ],
        body,
    );
    assert_eq!(
        got,
        r#"{ "type":"charge.succeeded",
  "data": {"object": {"customer_email": "[redacted]", "amount": 1200,
    "items": [ {"card": {"last4": "[redacted]"}, "qty": 1}, {"card":{"last4":"[redacted]"},"qty":2} ],
    "address": "[redacted]"}}}"#
    );
    assert!(serde_json::from_str::<serde_json::Value>(&got).is_ok());
}

#[test]
fn an_index_a_wildcard_member_an_escaped_key_and_a_pattern_under_another() {
    let body = r#"{"a/b":{"x":1,"y":[10,20,30]},"m~n":"s","list":["p","q"]}"#;
    assert_eq!(
        shown(&["/a~1b/y/1", "/m~0n", "/list/0"], body),
        r#"{"a/b":{"x":1,"y":[10,"[redacted]",30]},"m~n":"[redacted]","list":["[redacted]","q"]}"#
    );
    assert_eq!(
        shown(&["/a~1b/*"], body),
        r#"{"a/b":{"x":"[redacted]","y":"[redacted]"},"m~n":"s","list":["p","q"]}"#
    );
    // The outer one wins; the inner span is inside it.
    assert_eq!(
        shown(&["/a~1b/y/0", "/a~1b"], body),
        r#"{"a/b":"[redacted]","m~n":"s","list":["p","q"]}"#
    );
    // "01" is not an index; an escaped key in the body is still its name.
    assert_eq!(shown(&["/list/01"], body), body);
    assert_eq!(
        shown(&["/k"], r#"{"\u006b":"v"}"#),
        r#"{"\u006b":"[redacted]"}"#
    );
}

#[test]
fn nothing_to_mask_is_the_body_itself_and_a_body_that_is_not_json_is_withheld() {
    let p = patterns(&["/email"]);
    assert_eq!(apply(&p, br#"{"id":1}"#), Shown::Raw(br#"{"id":1}"#));
    assert_eq!(apply(&[], b"not json"), Shown::Raw(b"not json"));
    assert_eq!(apply(&p, b"email=ana%40example.com"), Shown::Withheld);
    assert_eq!(apply(&p, b"\xff\xfe"), Shown::Withheld);
    assert_eq!(apply(&p, b"email=ana").bytes(), WITHHELD.as_bytes());
}

#[test]
fn a_pattern_is_a_json_pointer() {
    assert!(matches!(
        Pattern::parse("data/email"),
        Err(PatternError::NoSlash(_))
    ));
    assert!(matches!(
        Pattern::parse("/a~2"),
        Err(PatternError::BadEscape(_))
    ));
    assert!(matches!(
        Pattern::parse("/a~"),
        Err(PatternError::BadEscape(_))
    ));
    assert_eq!(Pattern::parse("/a/*/b").unwrap().as_str(), "/a/*/b");
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        "[a-z@. ]{0,12}".prop_map(serde_json::Value::from),
        any::<i32>().prop_map(serde_json::Value::from),
        Just(serde_json::Value::Null),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-c]", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// For any body and pattern: the result is JSON, every value the
    /// pattern reaches is the mask in it, and whatever the pattern does not
    /// reach is unchanged.
    #[test]
    fn the_masked_body_is_json_with_each_reached_value_masked(
        value in json(),
        path in prop::collection::vec(prop_oneof![Just("*".to_owned()), "[a-c]", "[0-2]"], 1..4),
        pretty in any::<bool>(),
    ) {
        let body = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        let pointer = format!("/{}", path.join("/"));
        let masked = apply(&[Pattern::parse(&pointer).unwrap()], body.as_bytes());
        let got: serde_json::Value = serde_json::from_slice(masked.bytes()).unwrap();
        let mut want = value.clone();
        mask(&mut want, &path);
        prop_assert_eq!(got, want);
    }
}

/// What [`apply`] should make of `value`, computed on the parsed tree.
fn mask(value: &mut serde_json::Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        *value = serde_json::Value::from("[redacted]");
        return;
    };
    match value {
        serde_json::Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                if first == "*" || first == k {
                    mask(v, rest);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                if first == "*" || *first == i.to_string() {
                    mask(v, rest);
                }
            }
        }
        _ => {}
    }
}
