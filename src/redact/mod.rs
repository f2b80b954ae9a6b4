//! Redaction: the values at a source's `redact` pointers replaced by
//! `"[redacted]"` in a payload shown to someone who may not read them.
//!
//! A pattern is a JSON pointer (RFC 6901) whose `*` token stands for every
//! item of an array (and every member of an object). The rest of the body
//! stays byte for byte as received: each masked value's span is found in
//! the raw text (`serde_json`'s `RawValue` borrows it) and only that span
//! is replaced, so key order, spacing and the other values are the ones the
//! provider sent. A body that is not JSON cannot be searched for the
//! pointers and is withheld whole. Imports nothing of the crate: `config`
//! validates the patterns with it, `admin` and the store's search apply it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// What replaces a masked value: a JSON string, so the body stays JSON.
pub const MASK: &str = "\"[redacted]\"";
/// What a viewer sees of a body that is not JSON, of a source that
/// redacts: nothing of it.
pub const WITHHELD: &str = "[withheld: this source redacts its payloads, and this one is not JSON]";

/// One `redact` pointer, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    tokens: Vec<Token>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// `*`: every item (or member).
    Any,
    /// A member's name, or an array's index written as one.
    Key(String),
}

/// Why a `redact` entry is not a pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("{0:?} is not a JSON pointer: it must start with '/', like /data/object/email")]
    NoSlash(String),
    #[error("{0:?} is not a JSON pointer: '~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')")]
    BadEscape(String),
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let Some(rest) = text.strip_prefix('/') else {
            return Err(PatternError::NoSlash(text.to_owned()));
        };
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            if raw == "*" {
                tokens.push(Token::Any);
                continue;
            }
            let mut key = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                match (c, c == '~') {
                    (_, false) => key.push(c),
                    (_, true) => match chars.next() {
                        Some('0') => key.push('~'),
                        Some('1') => key.push('/'),
                        _ => return Err(PatternError::BadEscape(text.to_owned())),
                    },
                }
            }
            tokens.push(Token::Key(key));
        }
        Ok(Pattern {
            text: text.to_owned(),
            tokens,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// A payload as someone may see it.
#[derive(Debug, PartialEq, Eq)]
pub enum Shown<'b> {
    /// Nothing to mask: the body as received.
    Raw(&'b [u8]),
    /// The body with each masked value's span replaced by [`MASK`].
    Masked(Vec<u8>),
    /// Not JSON: nothing of it may be shown ([`WITHHELD`]).
    Withheld,
}

impl Shown<'_> {
    /// The bytes to show (or to search).
    pub fn bytes(&self) -> &[u8] {
        match self {
            Shown::Raw(b) => b,
            Shown::Masked(b) => b,
            Shown::Withheld => WITHHELD.as_bytes(),
        }
    }

    pub fn is_raw(&self) -> bool {
        matches!(self, Shown::Raw(_))
    }
}

/// `body` with every value at `patterns` masked.
pub fn apply<'b>(patterns: &[Pattern], body: &'b [u8]) -> Shown<'b> {
    if patterns.is_empty() {
        return Shown::Raw(body);
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Shown::Withheld;
    };
    let Ok(root) = serde_json::from_str::<&RawValue>(text) else {
        return Shown::Withheld;
    };
    let base = text.as_ptr() as usize;
    let mut spans = Vec::new();
    let paths: Vec<&[Token]> = patterns.iter().map(|p| p.tokens.as_slice()).collect();
    find(root, &paths, base, &mut spans);
    if spans.is_empty() {
        return Shown::Raw(body);
    }
    spans.sort_unstable();
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    for (start, end) in spans {
        // A span inside one already masked (a pattern under another).
        if start < at {
            continue;
        }
        out.extend_from_slice(&body[at..start]);
        out.extend_from_slice(MASK.as_bytes());
        at = end;
    }
    out.extend_from_slice(&body[at..]);
    Shown::Masked(out)
}

/// Adds the byte span (in the text at `base`) of each value the `paths`
/// reach from `value`: one walk for every pattern, each object or array
/// on the way parsed once.
fn find(value: &RawValue, paths: &[&[Token]], base: usize, spans: &mut Vec<(usize, usize)>) {
    let text = value.get();
    // A path that ends here masks the whole value, and what is under it.
    if paths.iter().any(|p| p.is_empty()) {
        let start = text.as_ptr() as usize - base;
        spans.push((start, start + text.len()));
        return;
    }
    let under = |step: &dyn Fn(&Token) -> bool| -> Vec<&[Token]> {
        paths
            .iter()
            .filter(|p| step(&p[0]))
            .map(|p| &p[1..])
            .collect()
    };
    match text.as_bytes().first() {
        Some(b'{') => {
            let Ok(members) = serde_json::from_str::<BTreeMap<Cow<'_, str>, &RawValue>>(text)
            else {
                return;
            };
            for (name, v) in &members {
                let next = under(&|t| match t {
                    Token::Any => true,
                    Token::Key(k) => k == name,
                });
                if !next.is_empty() {
                    find(v, &next, base, spans);
                }
            }
        }
        Some(b'[') => {
            let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(text) else {
                return;
            };
            for (i, v) in items.iter().enumerate() {
                let next = under(&|t| match t {
                    Token::Any => true,
                    Token::Key(k) => index(k) == Some(i),
                });
                if !next.is_empty() {
                    find(v, &next, base, spans);
                }
            }
        }
        _ => {}
    }
}

/// An array index as RFC 6901 writes one: digits, no leading zero.
fn index(token: &str) -> Option<usize> {
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    ok.then(|| token.parse().ok()).flatten()
}

#[cfg(test)]
mod tests;
