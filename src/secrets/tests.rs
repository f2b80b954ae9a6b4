//! The secrets' book: a record follows its value, what is kept merges.

use super::*;
use crate::clock::from_unix_ms;

fn at(ms: u64) -> Clock {
    Clock::fixed(from_unix_ms(ms))
}

fn config(secrets: &str) -> Config {
    let text = format!(
        "[server]\ndata_dir = \"/nonexistent\"\n[admin]\ntoken = \"t-0123456789abcdef0123\"\n\
         [[source]]\nname = \"shop\"\nkind = \"github\"\n{secrets}\n"
    );
    crate::config::Config::from_toml(&text, "t.toml", None, &|_| None)
        .unwrap()
        .resolve()
        .unwrap()
        .0
}

#[test]
fn a_record_follows_its_value_across_a_rename_and_a_new_value_starts_its_own() {
    let book = SecretBook::new(at(1_000));
    let first = book.handles(&config("secret = \"old-value\""));
    book.take(first.clone());
    first[0].used.matched(2_000);
    let renamed = config(
        "[[source.secrets]]\nname = \"old\"\nsecret = \"old-value\"\nexpires = \"2030-01-01\"\n\
         [[source.secrets]]\nname = \"new\"\nsecret = \"new-value\"\n",
    );
    book.take(book.handles(&renamed));
    let list = book.listing();
    let rows: Vec<_> = list
        .secrets
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.first_seen.0,
                s.last_match.map(|t| t.0),
                s.matches,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [("old", 1_000, Some(2_000), 1), ("new", 1_000, None, 0)]
    );
    // The new value is a record of its own; the old one's kept its match.
    assert_ne!(list.secrets[0].name, list.secrets[1].name);
    assert_eq!(list.secrets[0].place, api::SecretPlace::Inline);
    assert!(!list.secrets[0].expired);
}

#[test]
fn what_is_kept_merges_into_what_this_process_counted() {
    let clock = at(10_000);
    let before = SecretBook::new(at(1_000));
    let c = config("secret = \"value\"");
    before.take(before.handles(&c));
    before.current()[0].used.matched(3_000);
    before.current()[0].used.matched(4_000);
    let kept = decode(&before.encode()).unwrap();

    let after = SecretBook::new(clock);
    after.take(after.handles(&c));
    after.current()[0].used.matched(12_000);
    after.merge(kept);
    let s = &after.listing().secrets[0];
    assert_eq!(
        (s.first_seen.0, s.last_match.map(|t| t.0), s.matches),
        (1_000, Some(12_000), 3)
    );
    assert!(decode(b"\x09junk").is_none());
}
