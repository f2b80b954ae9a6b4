//! Format 6: attempts in full.
//!
//! An attempt now keeps its round (how often its delivery had been
//! replayed), the time to the answer's head, and the request's and the
//! answer's headers. A log entry of format 6 is either one of format 5's,
//! unchanged behind variant 0, or a finish as format 1 writes it followed
//! by those fields ([`AttemptMoreV6`]). The `attempts` row is version 6:
//! the version-1 row's fields, then the same. An attempt of format 5 or
//! row version 1 reads with round 0 and no headers. Frozen like `v1`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::super::entry::Entry;
use super::super::schema::Attempt;
use super::v1::{AttemptV1, EntryV1, FinishV1};
use super::v5::EntryV5;

/// What format 6 adds to an attempt.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AttemptMoreV6<'a> {
    round: u32,
    first_byte_ms: Option<u64>,
    #[serde(borrow)]
    request_headers: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    #[serde(borrow)]
    response_headers: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

/// An `attempts` row of version 6.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct AttemptRowV6<'a>(
    #[serde(borrow)] AttemptV1<'a>,
    #[serde(borrow)] AttemptMoreV6<'a>,
);

/// One entry of a format-6 frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum EntryV6<'a> {
    /// Any kind of entry format 5 has, as format 5 writes it, but a finish.
    #[serde(borrow)]
    V5(EntryV5<'a>),
    Finish(#[serde(borrow)] FinishV1<'a>, AttemptMoreV6<'a>),
}

fn pairs(headers: &[(String, String)]) -> Vec<(Cow<'_, str>, Cow<'_, str>)> {
    headers
        .iter()
        .map(|(k, v)| (Cow::Borrowed(k.as_str()), Cow::Borrowed(v.as_str())))
        .collect()
}

fn owned(headers: Vec<(Cow<'_, str>, Cow<'_, str>)>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

impl<'a> From<&'a Attempt> for AttemptMoreV6<'a> {
    fn from(a: &'a Attempt) -> Self {
        AttemptMoreV6 {
            round: a.round,
            first_byte_ms: a.first_byte_ms,
            request_headers: pairs(&a.request_headers),
            response_headers: pairs(&a.response_headers),
        }
    }
}

impl AttemptMoreV6<'_> {
    /// Puts what format 6 adds into `attempt`.
    pub(super) fn fill(self, attempt: &mut Attempt) {
        attempt.round = self.round;
        attempt.first_byte_ms = self.first_byte_ms;
        attempt.request_headers = owned(self.request_headers);
        attempt.response_headers = owned(self.response_headers);
    }
}

impl<'a> From<&'a Attempt> for AttemptRowV6<'a> {
    fn from(a: &'a Attempt) -> Self {
        AttemptRowV6(AttemptV1::from(a), AttemptMoreV6::from(a))
    }
}

impl From<AttemptRowV6<'_>> for Attempt {
    fn from(row: AttemptRowV6<'_>) -> Self {
        let mut attempt = Attempt::from(row.0);
        row.1.fill(&mut attempt);
        attempt
    }
}

/// Format 6 as the 0.1.0 build wrote it: only the tests write it now.
#[cfg(test)]
impl<'a> From<&'a Entry<'_>> for EntryV6<'a> {
    fn from(entry: &'a Entry<'_>) -> Self {
        match entry {
            Entry::Finish(finish) => match EntryV1::of(entry) {
                Some(EntryV1::Finish(v1)) => {
                    EntryV6::Finish(v1, AttemptMoreV6::from(&finish.attempt))
                }
                _ => unreachable!("format 1 writes a finish as a finish"),
            },
            other => EntryV6::V5(EntryV5::from(other)),
        }
    }
}

impl<'a> From<EntryV6<'a>> for Entry<'a> {
    fn from(entry: EntryV6<'a>) -> Self {
        match entry {
            EntryV6::V5(v5) => v5.into(),
            EntryV6::Finish(v1, more) => match Entry::from(EntryV1::Finish(v1)) {
                Entry::Finish(finish) => {
                    let mut finish = finish.into_owned();
                    more.fill(&mut finish.attempt);
                    Entry::Finish(Cow::Owned(finish))
                }
                _ => unreachable!("format 1 reads a finish as a finish"),
            },
        }
    }
}
