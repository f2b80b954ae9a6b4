//! Format 7, release 0.2.0's log: every kind of entry in one flat enum.
//!
//! Formats 2 to 6 each wrapped the one before behind variant 0, so that an
//! entry of a kind format 1 had was written as
//! `V6(V5(V4(V3(V2(x)))))`. Format 7 lists every kind once, in the order
//! the kinds appeared: the seven of format 1 keep their index and their
//! bytes (an entry of those kinds but a finish is byte for byte what format
//! 0 wrote), a finish carries what format 6 added to its attempt, and the
//! kinds added since follow. Append-only: a new kind is a new variant at
//! the end, and within a release a variant's fields do not change (see
//! "Formats and releases" in docs/design.md). The sub-records are the
//! frozen types of the formats that introduced them. Frozen like `v1` once
//! released.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::super::entry::Entry;
use super::v1::{ChangeV1, EntryV1, FinishV1, InitialV1};
use super::v3::{EntryV3, KeyRowV3};
use super::v5::AuditRowV5;
use super::v6::AttemptMoreV6;

/// One entry of a format-7 frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum EntryV7<'a> {
    Ingest {
        seq: u64,
        #[serde(borrow)]
        initial: InitialV1<'a>,
        #[serde(borrow, with = "serde_bytes")]
        record: Cow<'a, [u8]>,
    },
    Duplicate {
        received_ms: u64,
        #[serde(borrow)]
        source: Cow<'a, str>,
    },
    Claim {
        seq: u64,
        started_ms: u64,
    },
    Finish(#[serde(borrow)] FinishV1<'a>, AttemptMoreV6<'a>),
    Change {
        seq: u64,
        #[serde(borrow)]
        change: ChangeV1<'a>,
        now_ms: u64,
    },
    Sweep {
        now_ms: u64,
        limit: u64,
    },
    SetMeta {
        #[serde(borrow)]
        key: Cow<'a, str>,
        #[serde(borrow, with = "serde_bytes")]
        value: Cow<'a, [u8]>,
    },
    /// Every attempt still leased when the store last stopped, recorded as
    /// interrupted (new in format 4).
    Interrupted,
    /// An audit record as written, whole, under its id (new in format 5).
    Audit {
        id: u64,
        #[serde(borrow)]
        row: AuditRowV5<'a>,
    },
    /// What a change of an idempotency key wrote: a put (new in format 3).
    KeyPut {
        #[serde(borrow)]
        namespace: Cow<'a, str>,
        seq: u64,
        replaces: Option<u64>,
        row: KeyRowV3<'a>,
    },
    /// What a change of an idempotency key wrote: a removal (format 3).
    KeyRemove {
        #[serde(borrow)]
        namespace: Cow<'a, str>,
        seq: u64,
    },
}

impl<'a> From<&'a Entry<'_>> for EntryV7<'a> {
    fn from(entry: &'a Entry<'_>) -> Self {
        match entry {
            Entry::Interrupted => EntryV7::Interrupted,
            Entry::Audit { id, record } => EntryV7::Audit {
                id: *id,
                row: AuditRowV5::from(&**record),
            },
            Entry::KeyWrite(_) => match EntryV3::of(entry) {
                Some(EntryV3::KeyPut {
                    namespace,
                    seq,
                    replaces,
                    row,
                }) => EntryV7::KeyPut {
                    namespace,
                    seq,
                    replaces,
                    row,
                },
                Some(EntryV3::KeyRemove { namespace, seq }) => {
                    EntryV7::KeyRemove { namespace, seq }
                }
                _ => unreachable!("format 3 writes a key write as a key write"),
            },
            Entry::Key { .. } => {
                unreachable!("a key operation (format 2) is read, never written")
            }
            Entry::Finish(finish) => match EntryV1::of(entry) {
                Some(EntryV1::Finish(v1)) => {
                    EntryV7::Finish(v1, AttemptMoreV6::from(&finish.attempt))
                }
                _ => unreachable!("format 1 writes a finish as a finish"),
            },
            _ => match EntryV1::of(entry) {
                Some(v1) => EntryV7::from_v1(v1),
                None => unreachable!("every other kind of entry is in format 1"),
            },
        }
    }
}

impl<'a> EntryV7<'a> {
    /// A format-1 entry but a finish as format 7 has it: the same variant,
    /// the same fields.
    fn from_v1(v1: EntryV1<'a>) -> Self {
        match v1 {
            EntryV1::Ingest {
                seq,
                initial,
                record,
            } => EntryV7::Ingest {
                seq,
                initial,
                record,
            },
            EntryV1::Duplicate {
                received_ms,
                source,
            } => EntryV7::Duplicate {
                received_ms,
                source,
            },
            EntryV1::Claim { seq, started_ms } => EntryV7::Claim { seq, started_ms },
            EntryV1::Finish(_) => unreachable!("a finish carries format 6's additions"),
            EntryV1::Change {
                seq,
                change,
                now_ms,
            } => EntryV7::Change {
                seq,
                change,
                now_ms,
            },
            EntryV1::Sweep { now_ms, limit } => EntryV7::Sweep { now_ms, limit },
            EntryV1::SetMeta { key, value } => EntryV7::SetMeta { key, value },
        }
    }
}

impl<'a> From<EntryV7<'a>> for Entry<'a> {
    fn from(entry: EntryV7<'a>) -> Self {
        let v1 = match entry {
            EntryV7::Interrupted => return Entry::Interrupted,
            EntryV7::Audit { id, row } => {
                return Entry::Audit {
                    id,
                    record: Cow::Owned(row.into()),
                };
            }
            EntryV7::KeyPut {
                namespace,
                seq,
                replaces,
                row,
            } => {
                return EntryV3::KeyPut {
                    namespace,
                    seq,
                    replaces,
                    row,
                }
                .into();
            }
            EntryV7::KeyRemove { namespace, seq } => {
                return EntryV3::KeyRemove { namespace, seq }.into();
            }
            EntryV7::Finish(v1, more) => {
                return match Entry::from(EntryV1::Finish(v1)) {
                    Entry::Finish(finish) => {
                        let mut finish = finish.into_owned();
                        more.fill(&mut finish.attempt);
                        Entry::Finish(Cow::Owned(finish))
                    }
                    _ => unreachable!("format 1 reads a finish as a finish"),
                };
            }
            EntryV7::Ingest {
                seq,
                initial,
                record,
            } => EntryV1::Ingest {
                seq,
                initial,
                record,
            },
            EntryV7::Duplicate {
                received_ms,
                source,
            } => EntryV1::Duplicate {
                received_ms,
                source,
            },
            EntryV7::Claim { seq, started_ms } => EntryV1::Claim { seq, started_ms },
            EntryV7::Change {
                seq,
                change,
                now_ms,
            } => EntryV1::Change {
                seq,
                change,
                now_ms,
            },
            EntryV7::Sweep { now_ms, limit } => EntryV1::Sweep { now_ms, limit },
            EntryV7::SetMeta { key, value } => EntryV1::SetMeta { key, value },
        };
        v1.into()
    }
}
