//! One learned shape: the JSON pointers the events of one (source, event
//! type) carry, how many carried each, and the types seen there; and how a
//! new event departs from it.
//!
//! A shape judges nothing until it has learned [`WARM`] events. Then a new
//! event can:
//! - lack a field every earlier event had ([`Change::Missing`]); fields
//!   inside arrays (`/items/*/…`) are not judged missing, since an array may
//!   be empty, nor a field whose parent is missing too (the parent is);
//! - carry a field never seen ([`Change::Added`]);
//! - carry a field with a type never seen there ([`Change::TypeChanged`]);
//!   `null` is no type change (optional fields are null at times).
//!
//! Each departure is reported once: the shape learns the event after
//! judging it, so the field is no longer "always there", or is known, or
//! has both types. An object that keeps getting new keys is a map keyed by
//! data (Stripe's `metadata`): after [`OPEN_AFTER`] added keys its keys are
//! one wildcard (`/metadata/*`), and no more are reported.
//!
//! Bounded: at most [`MAX_FIELDS`] pointers a shape, [`MAX_DEPTH`] levels
//! deep; an event's fields past the bound are not learned (and the shape
//! says it is `truncated`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

pub use crate::words::DriftChange as Change;

/// Events a shape learns before it judges.
pub const WARM: u64 = 20;
/// Pointers kept per shape.
pub const MAX_FIELDS: usize = 256;
/// Levels of nesting walked.
pub const MAX_DEPTH: usize = 8;
/// New keys under one object before it counts as a map keyed by data.
pub const OPEN_AFTER: u32 = 3;

/// JSON types as bits of a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Types(u8);

impl Types {
    const NAMES: [&'static str; 6] = ["null", "boolean", "number", "string", "array", "object"];

    fn of(value: &serde_json::Value) -> Types {
        use serde_json::Value;
        Types(match value {
            Value::Null => 1,
            Value::Bool(_) => 2,
            Value::Number(_) => 4,
            Value::String(_) => 8,
            Value::Array(_) => 16,
            Value::Object(_) => 32,
        })
    }

    fn union(self, other: Types) -> Types {
        Types(self.0 | other.0)
    }

    /// Without `null`.
    fn proper(self) -> Types {
        Types(self.0 & !1)
    }

    fn covers(self, other: Types) -> bool {
        self.0 & other.0 == other.0
    }

    /// The names of the types in the set, `|`-joined ("string|null").
    pub fn names(self) -> String {
        let names: Vec<&str> = (0..6)
            .filter(|i| self.0 & (1 << i) != 0)
            .map(|i| Types::NAMES[i])
            .collect();
        names.join("|")
    }
}

/// What the events carried at one pointer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// Events that carried it.
    pub seen: u64,
    pub types: Types,
}

/// One departure: where, and the types before and in this event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure {
    pub pointer: String,
    pub change: Change,
    /// The types learned there (empty for an added field).
    pub was: Types,
    /// The type in this event (empty for a missing field).
    pub now: Types,
}

/// What the events of one (source, event type) looked like.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// Events learned.
    pub events: u64,
    pub fields: BTreeMap<String, Field>,
    /// Objects taken for maps keyed by data: their keys are one `*`.
    pub open: BTreeSet<String>,
    /// Keys added under each object so far (towards [`OPEN_AFTER`]).
    added_under: BTreeMap<String, u32>,
    /// Some event had more fields than [`MAX_FIELDS`] or deeper than
    /// [`MAX_DEPTH`]: those were not learned.
    pub truncated: bool,
}

impl Shape {
    /// Judges `value` against what was learned (once warm), then learns it.
    pub fn learn(&mut self, value: &serde_json::Value) -> Vec<Departure> {
        let mut carried = self.carried(value);
        let mut out = Vec::new();
        if self.events >= WARM {
            let opened;
            (out, opened) = self.judge(&carried);
            if opened {
                // Its keys are `*` now, in what is learned too.
                carried = self.carried(value);
            }
        }
        self.events += 1;
        for (pointer, types) in carried {
            if let Some(field) = self.fields.get_mut(&pointer) {
                field.seen += 1;
                field.types = field.types.union(types);
            } else if self.fields.len() < MAX_FIELDS {
                self.fields.insert(pointer, Field { seen: 1, types });
            } else {
                self.truncated = true;
            }
        }
        out
    }

    /// Every pointer of `value`, with its type.
    fn carried(&mut self, value: &serde_json::Value) -> BTreeMap<String, Types> {
        let mut carried = BTreeMap::new();
        let mut truncated = false;
        self.walk(value, String::new(), 0, &mut carried, &mut truncated);
        self.truncated |= truncated;
        carried
    }

    /// Every pointer of `value` under `at`, with its type; an open object's
    /// keys and an array's items as `*`.
    fn walk(
        &self,
        value: &serde_json::Value,
        at: String,
        depth: usize,
        out: &mut BTreeMap<String, Types>,
        truncated: &mut bool,
    ) {
        if depth >= MAX_DEPTH {
            let more = match value {
                serde_json::Value::Object(map) => !map.is_empty(),
                serde_json::Value::Array(items) => !items.is_empty(),
                _ => false,
            };
            *truncated |= more;
            return;
        }
        let mut child = |key: &str, v: &serde_json::Value, out: &mut BTreeMap<String, Types>| {
            if out.len() >= MAX_FIELDS {
                *truncated = true;
                return;
            }
            let pointer = format!("{at}/{}", escape(key));
            let types = out
                .get(&pointer)
                .copied()
                .unwrap_or_default()
                .union(Types::of(v));
            out.insert(pointer.clone(), types);
            self.walk(v, pointer, depth + 1, out, truncated);
        };
        match value {
            serde_json::Value::Object(map) if self.open.contains(&at) => {
                for v in map.values() {
                    child("*", v, out);
                }
            }
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    child(k, v, out);
                }
            }
            serde_json::Value::Array(items) => {
                for v in items {
                    child("*", v, out);
                }
            }
            _ => {}
        }
    }

    /// The departures of an event that carried `carried`, and whether an
    /// object was opened (taken for a map) on the way.
    fn judge(&mut self, carried: &BTreeMap<String, Types>) -> (Vec<Departure>, bool) {
        let mut out = Vec::new();
        for (pointer, field) in &self.fields {
            let inside_items = pointer.split('/').any(|part| part == "*");
            let parent_missing =
                parent(pointer).is_some_and(|p| !p.is_empty() && !carried.contains_key(p));
            if field.seen == self.events
                && !carried.contains_key(pointer)
                && !inside_items
                && !parent_missing
            {
                out.push(Departure {
                    pointer: pointer.clone(),
                    change: Change::Missing,
                    was: field.types,
                    now: Types::default(),
                });
            }
        }
        let mut opened = Vec::new();
        for (pointer, &now) in carried {
            match self.fields.get(pointer) {
                None => {
                    let under = parent(pointer).unwrap_or("").to_owned();
                    let count = self.added_under.entry(under.clone()).or_default();
                    *count += 1;
                    if *count > OPEN_AFTER {
                        // A map keyed by data: this and later keys are `*`.
                        opened.push(under);
                        continue;
                    }
                    out.push(Departure {
                        pointer: pointer.clone(),
                        change: Change::Added,
                        was: Types::default(),
                        now,
                    });
                }
                Some(field) => {
                    let (was, proper) = (field.types.proper(), now.proper());
                    if !was.0.eq(&0) && !proper.0.eq(&0) && !was.covers(proper) {
                        out.push(Departure {
                            pointer: pointer.clone(),
                            change: Change::TypeChanged,
                            was: field.types,
                            now,
                        });
                    }
                }
            }
        }
        let any = !opened.is_empty();
        for under in opened {
            self.open_object(&under);
        }
        (out, any)
    }

    /// Folds the keys of the object at `at` into one `*`.
    fn open_object(&mut self, at: &str) {
        if !self.open.insert(at.to_owned()) {
            return;
        }
        let prefix = format!("{at}/");
        let keys: Vec<String> = self
            .fields
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        for key in keys {
            let field = self.fields.remove(&key).expect("listed");
            let rest = &key[prefix.len()..];
            let folded = match rest.split_once('/') {
                Some((_, tail)) => format!("{prefix}*/{tail}"),
                None => format!("{prefix}*"),
            };
            let into = self.fields.entry(folded).or_default();
            into.seen = into.seen.max(field.seen);
            into.types = into.types.union(field.types);
        }
    }
}

/// The pointer one level up (`""` for a top-level field).
fn parent(pointer: &str) -> Option<&str> {
    pointer.rfind('/').map(|i| &pointer[..i])
}

/// A key as an RFC 6901 reference token.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn warm(shape: &mut Shape, value: serde_json::Value) {
        for _ in 0..WARM {
            assert!(shape.learn(&value).is_empty());
        }
    }

    fn changes(departures: &[Departure]) -> Vec<(String, Change)> {
        departures
            .iter()
            .map(|d| (d.pointer.clone(), d.change))
            .collect()
    }

    #[test]
    fn a_removed_field_an_added_one_and_a_type_change_are_each_said_once() {
        let mut shape = Shape::default();
        warm(
            &mut shape,
            json!({"id": "evt_1", "amount": 100, "customer": {"email": "a@b"}}),
        );
        let odd = json!({"id": "evt_2", "amount": "100", "customer": {}, "currency": "eur"});
        let got = shape.learn(&odd);
        assert_eq!(
            changes(&got),
            vec![
                ("/customer/email".to_owned(), Change::Missing),
                ("/amount".to_owned(), Change::TypeChanged),
                ("/currency".to_owned(), Change::Added),
            ]
        );
        let changed = got
            .iter()
            .find(|d| d.change == Change::TypeChanged)
            .unwrap();
        assert_eq!(
            (changed.was.names(), changed.now.names()),
            ("number".into(), "string".into())
        );
        assert!(shape.learn(&odd).is_empty(), "each is said once");
    }

    #[test]
    fn nothing_is_judged_before_the_shape_is_warm() {
        let mut shape = Shape::default();
        for i in 0..WARM {
            let v = if i % 2 == 0 {
                json!({"a": 1})
            } else {
                json!({"b": "x"})
            };
            assert!(shape.learn(&v).is_empty());
        }
    }

    #[test]
    fn null_empty_arrays_and_a_missing_parent_are_not_departures_of_their_own() {
        let mut shape = Shape::default();
        warm(
            &mut shape,
            json!({"note": "x", "items": [{"sku": "a"}], "billing": {"city": "Oslo"}}),
        );
        let got = shape.learn(&json!({"note": null, "items": []}));
        // `billing` is missing; `/billing/city` with it is not said again,
        // and `/items/*/sku` is inside an array that may be empty.
        assert_eq!(
            changes(&got),
            vec![("/billing".to_owned(), Change::Missing)]
        );
    }

    #[test]
    fn an_object_that_keeps_getting_new_keys_becomes_a_map_and_goes_quiet() {
        let mut shape = Shape::default();
        warm(&mut shape, json!({"id": 1, "metadata": {}}));
        let mut said = 0;
        for i in 0..10 {
            let mut meta = serde_json::Map::new();
            meta.insert(format!("order_{i}"), json!("x"));
            said += shape.learn(&json!({"id": 1, "metadata": meta})).len();
        }
        assert_eq!(said, OPEN_AFTER as usize);
        assert!(shape.open.contains("/metadata"));
        assert!(shape.fields.contains_key("/metadata/*"));
        assert!(
            !shape
                .fields
                .keys()
                .any(|k| k.starts_with("/metadata/order_"))
        );
    }

    #[test]
    fn fields_past_the_bound_are_not_learned_and_the_shape_says_so() {
        let mut shape = Shape::default();
        let wide: serde_json::Map<String, serde_json::Value> = (0..MAX_FIELDS + 50)
            .map(|i| (format!("f{i}"), json!(i)))
            .collect();
        shape.learn(&serde_json::Value::Object(wide));
        assert_eq!(shape.fields.len(), MAX_FIELDS);
        assert!(shape.truncated);
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH + 3 {
            deep = json!({"x": deep});
        }
        let mut other = Shape::default();
        other.learn(&deep);
        assert!(other.truncated && other.fields.len() == MAX_DEPTH);
        assert_eq!(escape("a/b~c"), "a~1b~0c");
    }
}
