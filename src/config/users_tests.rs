//! Unit tests of `[[admin.user]]`: people's tokens kept as hashes, their
//! roles and expiry, each refusal naming its place, and `config check`
//! showing where each token is kept, never the token.

use sha2::{Digest, Sha256};

use super::*;
use crate::words::Role;

fn no_env(_: &str) -> Option<String> {
    None
}

fn error(text: &str) -> String {
    Config::from_toml(text, "f.toml", None, &no_env)
        .unwrap_err()
        .to_string()
}

const ADMIN: &str = "[admin]\ntoken = \"the-admin-token-0123\"\n";

#[test]
fn users_take_a_role_a_hashed_token_and_an_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bob.token");
    std::fs::write(&file, "bob-token-0123456789\n").unwrap();
    let hash = hex::encode(Sha256::digest(b"carol-token-0123456789"));
    let text = format!(
        "{ADMIN}[[admin.user]]\nname = \"alice\"\nrole = \"viewer\"\ntoken = \"alice-token-0123456789\"\n\
         [[admin.user]]\nname = \"bob\"\nrole = \"operator\"\ntoken_file = {:?}\nexpires = \"2027-01-01T01:00:00+01:00\"\n\
         [[admin.user]]\nname = \"carol\"\nrole = \"admin\"\ntoken_sha256 = \"{hash}\"\n",
        file.display().to_string()
    );
    let config = Config::from_toml(&text, "f.toml", None, &no_env).unwrap();
    let users = &config.admin.users;
    let names: Vec<(&str, Role)> = users.iter().map(|u| (u.name.as_str(), u.role)).collect();
    assert_eq!(
        names,
        [
            ("alice", Role::Viewer),
            ("bob", Role::Operator),
            ("carol", Role::Admin)
        ]
    );
    let sha = |t: &str| -> [u8; 32] { Sha256::digest(t.as_bytes()).into() };
    assert_eq!(users[0].token_sha256, sha("alice-token-0123456789"));
    assert_eq!(users[1].token_sha256, sha("bob-token-0123456789"));
    assert_eq!(users[2].token_sha256, sha("carol-token-0123456789"));
    assert_eq!(users[1].expires_ms, Some(1_798_761_600_000));
    assert_eq!(users[0].expires_ms, None);
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.contains("admin.user[0].token is inline"))
    );
    // config check: where each is kept, never a token or its hash.
    let shown = config.to_redacted_toml();
    for secret in ["alice-token", "bob-token", &hash] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(
        shown.contains("bob.token") && shown.contains("role = \"operator\""),
        "{shown}"
    );
    assert!(raw::parse(&shown, "shown").is_ok(), "{shown}");
    assert!(!format!("{config:?}").contains(&hex::encode(sha("alice-token-0123456789"))));
}

/// A user whose `expires` had passed loaded without a word: the first to
/// learn of it was the person, refused. `config check` and `serve` warn.
#[test]
fn a_user_whose_expiry_has_passed_is_warned_of_at_load() {
    let text = format!(
        "{ADMIN}[[admin.user]]\nname = \"old\"\nrole = \"viewer\"\ntoken_sha256 = \"{}\"\nexpires = \"2020-01-01T00:00:00Z\"\n\
         [[admin.user]]\nname = \"new\"\nrole = \"viewer\"\ntoken_sha256 = \"{}\"\nexpires = \"2999-01-01T00:00:00Z\"\n",
        hex::encode(Sha256::digest(b"old-token-0123456789")),
        hex::encode(Sha256::digest(b"new-token-0123456789")),
    );
    let config = Config::from_toml(&text, "f.toml", None, &no_env).unwrap();
    assert_eq!(config.admin.users.len(), 2, "both are loaded");
    let expired: Vec<&String> = config
        .warnings
        .iter()
        .filter(|w| w.contains("already past"))
        .collect();
    assert_eq!(expired.len(), 1, "{:?}", config.warnings);
    assert!(
        expired[0].starts_with("f.toml: admin.user[0].expires (\"old\") is 2020-01-01T00:00:00Z"),
        "{}",
        expired[0]
    );
}

#[test]
fn user_refusals_name_the_place_and_the_problem() {
    let user = |body: &str| format!("{ADMIN}[[admin.user]]\n{body}");
    let cases = [
        (
            user("role = \"viewer\"\ntoken = \"a-token-0123456789\"\n"),
            "admin.user[0].name: is missing or empty",
        ),
        (
            user("name = \"admin\"\nrole = \"viewer\"\ntoken = \"a-token-0123456789\"\n"),
            "admin.user[0].name: \"admin\" is the name of the [admin] token",
        ),
        (
            user("name = \"a\"\ntoken = \"a-token-0123456789\"\n"),
            "admin.user[0].role: is missing: viewer, operator or admin",
        ),
        (
            user("name = \"a\"\nrole = \"root\"\ntoken = \"a-token-0123456789\"\n"),
            "admin.user[0].role: \"root\" is not a role",
        ),
        (
            user("name = \"a\"\nrole = \"viewer\"\n"),
            "admin.user[0].token: is missing: set token_file, token_env or token_sha256",
        ),
        (
            user("name = \"a\"\nrole = \"viewer\"\ntoken = \"short\"\n"),
            "admin.user[0].token: must be at least 16 characters",
        ),
        (
            user("name = \"a\"\nrole = \"viewer\"\ntoken = \"the-admin-token-0123\"\n"),
            "admin.user[0].token: is the [admin] token",
        ),
        (
            user("name = \"a\"\nrole = \"viewer\"\ntoken_sha256 = \"abc\"\n"),
            "admin.user[0].token_sha256: must be 64 hex digits",
        ),
        (
            user(
                "name = \"a\"\nrole = \"viewer\"\ntoken = \"a-token-0123456789\"\ntoken_sha256 = \"00\"\n",
            ),
            "admin.user[0].token_sha256: set only one of",
        ),
        (
            user(
                "name = \"a\"\nrole = \"viewer\"\ntoken = \"a-token-0123456789\"\nexpires = \"soon\"\n",
            ),
            "admin.user[0].expires: \"soon\" is not an RFC 3339 time",
        ),
        (
            user(
                "name = \"a\"\nrole = \"viewer\"\ntoken = \"a-token-0123456789\"\n\
                 [[admin.user]]\nname = \"a\"\nrole = \"admin\"\ntoken = \"b-token-0123456789\"\n",
            ),
            "admin.user[1].name: \"a\" is already another user's name",
        ),
        (
            user(
                "name = \"a\"\nrole = \"viewer\"\ntoken = \"a-token-0123456789\"\n\
                 [[admin.user]]\nname = \"b\"\nrole = \"admin\"\ntoken = \"a-token-0123456789\"\n",
            ),
            "admin.user[1].token: is another user's token",
        ),
        (
            user(
                "name = \"a\"\nrole = \"viewer\"\ntoken = \"a-token-0123456789\"\n\
                 [[keys.client]]\nname = \"shop\"\ntoken = \"a-token-0123456789\"\n",
            ),
            "keys.client[0].token: is an [[admin.user]] token",
        ),
    ];
    for (text, expected) in cases {
        let got = error(&text);
        assert!(got.contains(expected), "{text}\n→ {got}\nnot {expected}");
        assert!(!got.contains("a-token-0123456789"), "{got}");
    }
}

/// The operator commands read only the `[admin]` token: a person's token
/// file they cannot read does not stop them.
#[test]
fn the_operator_view_skips_the_users() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hookinbox.toml");
    std::fs::write(
        &path,
        format!(
            "{ADMIN}[[admin.user]]\nname = \"a\"\nrole = \"viewer\"\ntoken_file = \"/nonexistent/a.token\"\n"
        ),
    )
    .unwrap();
    let view = OperatorView::load(Some(&path), &no_env).unwrap();
    assert_eq!(view.token().unwrap(), "the-admin-token-0123");
    assert!(Config::load(&path, &no_env).is_err());
}
