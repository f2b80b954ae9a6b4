//! Format 3: what a key change wrote, instead of the operation.
//!
//! A log entry of format 3 is either one of format 2's, unchanged behind
//! variant 0, or a key write ([`super::super::types::keys::KeyWrite`]): recovery
//! and a standby write it as it is, with no index to look the key up in and
//! nothing to decide. A key's row is version 3: the key, then the fields of
//! version 2. Frozen like `v1`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::super::entry::Entry;
use super::super::types::keys::{KeyRecord, KeyWrite};
use super::v2::{EntryV2, KeyRowV2};

/// A `key_log` row.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct KeyRowV3<'a> {
    pub key: Cow<'a, str>,
    pub rest: KeyRowV2<'a>,
}

/// One entry of a format-3 frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum EntryV3<'a> {
    /// Any kind of entry format 2 has, as format 2 writes it.
    #[serde(borrow)]
    V2(EntryV2<'a>),
    KeyPut {
        namespace: Cow<'a, str>,
        seq: u64,
        replaces: Option<u64>,
        row: KeyRowV3<'a>,
    },
    KeyRemove {
        namespace: Cow<'a, str>,
        seq: u64,
    },
}

impl<'a> KeyRowV3<'a> {
    pub(super) fn of(key: &'a str, record: &'a KeyRecord) -> Self {
        KeyRowV3 {
            key: Cow::Borrowed(key),
            rest: KeyRowV2::from(record),
        }
    }

    pub(super) fn into_parts(self) -> (String, KeyRecord) {
        (self.key.into_owned(), self.rest.into())
    }
}

impl<'a> EntryV3<'a> {
    /// `entry` in format 3, if format 3 has its kind.
    pub(super) fn of(entry: &'a Entry<'_>) -> Option<Self> {
        Some(match entry {
            Entry::KeyWrite(write) => match &**write {
                KeyWrite::Put {
                    namespace,
                    key,
                    seq,
                    replaces,
                    record,
                } => EntryV3::KeyPut {
                    namespace: Cow::Borrowed(namespace),
                    seq: *seq,
                    replaces: *replaces,
                    row: KeyRowV3::of(key, record),
                },
                KeyWrite::Remove { namespace, seq } => EntryV3::KeyRemove {
                    namespace: Cow::Borrowed(namespace),
                    seq: *seq,
                },
            },
            other => EntryV3::V2(EntryV2::of(other)?),
        })
    }
}

impl<'a> From<EntryV3<'a>> for Entry<'a> {
    fn from(entry: EntryV3<'a>) -> Self {
        match entry {
            EntryV3::V2(v2) => v2.into(),
            EntryV3::KeyPut {
                namespace,
                seq,
                replaces,
                row,
            } => {
                let (key, record) = row.into_parts();
                Entry::KeyWrite(Cow::Owned(KeyWrite::Put {
                    namespace: namespace.into_owned(),
                    key,
                    seq,
                    replaces,
                    record,
                }))
            }
            EntryV3::KeyRemove { namespace, seq } => {
                Entry::KeyWrite(Cow::Owned(KeyWrite::Remove {
                    namespace: namespace.into_owned(),
                    seq,
                }))
            }
        }
    }
}
