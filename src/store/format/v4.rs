//! Format 4: the attempts a stop interrupted, recorded through the log.
//!
//! A log entry of format 4 is either one of format 3's, unchanged behind
//! variant 0, or [`Entry::Interrupted`]: every attempt still leased when
//! the store last stopped recorded as interrupted (`Tables::recover_leases`,
//! which depends on nothing but the tables). A primary that ships its
//! frames records them so, and its standby with it. Frozen like `v1`.

use serde::{Deserialize, Serialize};

use super::super::entry::Entry;
use super::v3::EntryV3;

/// One entry of a format-4 frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum EntryV4<'a> {
    /// Any kind of entry format 3 has, as format 3 writes it.
    #[serde(borrow)]
    V3(EntryV3<'a>),
    Interrupted,
}

/// Only the tests write format 4 now.
#[cfg(test)]
impl<'a> From<&'a Entry<'_>> for EntryV4<'a> {
    fn from(entry: &'a Entry<'_>) -> Self {
        match entry {
            Entry::Interrupted => EntryV4::Interrupted,
            other => EntryV4::V3(EntryV3::of(other).expect(
                "every entry but the interrupted attempts and audit records is in format 3",
            )),
        }
    }
}

impl<'a> From<EntryV4<'a>> for Entry<'a> {
    fn from(entry: EntryV4<'a>) -> Self {
        match entry {
            EntryV4::V3(v3) => v3.into(),
            EntryV4::Interrupted => Entry::Interrupted,
        }
    }
}
