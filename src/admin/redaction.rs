//! Who reads which payload whole: each source's `redact` pointers are
//! masked for viewers (and for everyone with `redact_for = "everyone"`) in
//! every answer that carries a payload (an event's detail, an event
//! stream) and in what a search tests, so a search never matches inside a
//! value its caller may not read. An operator's or admin's read of a
//! payload their role unmasks is put in the audit trail
//! (`read_unredacted`). Deliveries are not this module's: the app always
//! gets the bytes as received, whose signature covers them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::api::Role;
use crate::config::{Config, RedactFor};
use crate::redact::{Pattern, Shown, apply};
use crate::store::PayloadView;

/// Each redacting source's rule, as the config in force says.
#[derive(Debug, Default)]
pub struct Redactions(HashMap<String, Rule>);

#[derive(Debug)]
struct Rule {
    patterns: Vec<Pattern>,
    everyone: bool,
}

/// How one reader may see one source's payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sight<'a> {
    /// The source redacts nothing.
    Whole,
    /// Their role reads it whole, and that read is recorded.
    Unmasked,
    /// Masked at these pointers.
    Masked(&'a [Pattern]),
}

impl Sight<'_> {
    /// `body` as this sight shows it.
    pub(super) fn show(self, body: &[u8]) -> Shown<'_> {
        match self {
            Sight::Masked(patterns) => apply(patterns, body),
            Sight::Whole | Sight::Unmasked => Shown::Raw(body),
        }
    }
}

impl Redactions {
    pub fn of(config: &Config) -> Redactions {
        Redactions(
            config
                .sources
                .iter()
                .filter(|s| !s.redact.is_empty())
                .map(|s| {
                    let rule = Rule {
                        patterns: s.redact.clone(),
                        everyone: s.redact_for == RedactFor::Everyone,
                    };
                    (s.name.to_string(), rule)
                })
                .collect(),
        )
    }

    pub(super) fn sight(&self, source: &str, role: Role) -> Sight<'_> {
        match self.0.get(source) {
            None => Sight::Whole,
            Some(rule) if rule.everyone || role == Role::Viewer => Sight::Masked(&rule.patterns),
            Some(_) => Sight::Unmasked,
        }
    }

    /// Whether `role` reads some source's payloads whole that others see
    /// masked: of `source` only, when one is named.
    pub(super) fn unmasks_any(&self, source: Option<&str>, role: Role) -> bool {
        self.0
            .keys()
            .filter(|name| source.is_none_or(|s| s == name.as_str()))
            .any(|name| self.sight(name, role) == Sight::Unmasked)
    }

    /// Whether any source masks anything for `role`.
    pub(super) fn masks_for(&self, role: Role) -> bool {
        self.0
            .keys()
            .any(|name| matches!(self.sight(name, role), Sight::Masked(_)))
    }
}

/// What a search by `role` tests each payload on.
pub(super) struct SearchView {
    pub access: Arc<super::Access>,
    pub role: Role,
}

impl PayloadView for SearchView {
    fn view<'b>(&self, source: &str, body: &'b [u8]) -> Cow<'b, [u8]> {
        match self.access.redactions.sight(source, self.role).show(body) {
            Shown::Raw(b) => Cow::Borrowed(b),
            Shown::Masked(b) => Cow::Owned(b),
            // Nothing of it may be read: nothing of it matches.
            Shown::Withheld => Cow::Borrowed(&[]),
        }
    }
}
