//! Format 2: format 1 and idempotency keys ([`super::super::types::keys`]).
//!
//! A log entry of format 2 is either one of format 1's, unchanged behind
//! variant 0, or a key change (the operation, decided again on replay);
//! the `keys` row of schema 6 is new in this format (row version 2).
//! Frozen like `v1`; this build writes neither (format 3 logs what a key
//! change wrote, [`super::v3`]) but reads both.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::super::entry::Entry;
use super::super::types::keys::{KeyOp, KeyRecord, KeyState};
use super::v1::EntryV1;

/// A `keys` row.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct KeyRowV2<'a> {
    state: KeyStateV2<'a>,
    created_ms: u64,
    ttl_ms: u64,
    expires_ms: u64,
    claims: u32,
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) enum KeyStateV2<'a> {
    Claimed {
        token: u64,
        lease_until_ms: u64,
    },
    Done {
        token: u64,
        completed_ms: u64,
        result: Option<Cow<'a, str>>,
    },
}

/// One entry of a format-2 frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum EntryV2<'a> {
    /// Any kind of entry format 1 has, as format 1 writes it.
    #[serde(borrow)]
    V1(EntryV1<'a>),
    Key {
        namespace: Cow<'a, str>,
        key: Cow<'a, str>,
        op: KeyOpV2<'a>,
        now_ms: u64,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) enum KeyOpV2<'a> {
    Claim {
        lease_ms: u64,
        ttl_ms: u64,
    },
    Complete {
        token: u64,
        result: Option<Cow<'a, str>>,
    },
    Release {
        token: u64,
    },
    Extend {
        token: u64,
        lease_ms: u64,
    },
    Delete,
}

impl<'a> From<&'a KeyRecord> for KeyRowV2<'a> {
    fn from(r: &'a KeyRecord) -> Self {
        KeyRowV2 {
            state: match &r.state {
                KeyState::Claimed {
                    token,
                    lease_until_ms,
                } => KeyStateV2::Claimed {
                    token: *token,
                    lease_until_ms: *lease_until_ms,
                },
                KeyState::Done {
                    token,
                    completed_ms,
                    result,
                } => KeyStateV2::Done {
                    token: *token,
                    completed_ms: *completed_ms,
                    result: result.as_deref().map(Cow::Borrowed),
                },
            },
            created_ms: r.created_ms,
            ttl_ms: r.ttl_ms,
            expires_ms: r.expires_ms,
            claims: r.claims,
        }
    }
}

impl From<KeyRowV2<'_>> for KeyRecord {
    fn from(r: KeyRowV2<'_>) -> Self {
        KeyRecord {
            state: match r.state {
                KeyStateV2::Claimed {
                    token,
                    lease_until_ms,
                } => KeyState::Claimed {
                    token,
                    lease_until_ms,
                },
                KeyStateV2::Done {
                    token,
                    completed_ms,
                    result,
                } => KeyState::Done {
                    token,
                    completed_ms,
                    result: result.map(Cow::into_owned),
                },
            },
            created_ms: r.created_ms,
            ttl_ms: r.ttl_ms,
            expires_ms: r.expires_ms,
            claims: r.claims,
        }
    }
}

impl<'a> EntryV2<'a> {
    /// `entry` in format 2, if format 2 has its kind (it has no key writes).
    pub(super) fn of(entry: &'a Entry<'_>) -> Option<Self> {
        Some(match entry {
            Entry::Key {
                namespace,
                key,
                op,
                now_ms,
            } => EntryV2::Key {
                namespace: Cow::Borrowed(namespace),
                key: Cow::Borrowed(key),
                op: match &**op {
                    KeyOp::Claim { lease_ms, ttl_ms } => KeyOpV2::Claim {
                        lease_ms: *lease_ms,
                        ttl_ms: *ttl_ms,
                    },
                    KeyOp::Complete { token, result } => KeyOpV2::Complete {
                        token: *token,
                        result: result.as_deref().map(Cow::Borrowed),
                    },
                    KeyOp::Release { token } => KeyOpV2::Release { token: *token },
                    KeyOp::Extend { token, lease_ms } => KeyOpV2::Extend {
                        token: *token,
                        lease_ms: *lease_ms,
                    },
                    KeyOp::Delete => KeyOpV2::Delete,
                },
                now_ms: *now_ms,
            },
            other => EntryV2::V1(EntryV1::of(other)?),
        })
    }
}

impl<'a> From<EntryV2<'a>> for Entry<'a> {
    fn from(entry: EntryV2<'a>) -> Self {
        match entry {
            EntryV2::V1(v1) => v1.into(),
            EntryV2::Key {
                namespace,
                key,
                op,
                now_ms,
            } => Entry::Key {
                namespace,
                key,
                op: Cow::Owned(match op {
                    KeyOpV2::Claim { lease_ms, ttl_ms } => KeyOp::Claim { lease_ms, ttl_ms },
                    KeyOpV2::Complete { token, result } => KeyOp::Complete {
                        token,
                        result: result.map(Cow::into_owned),
                    },
                    KeyOpV2::Release { token } => KeyOp::Release { token },
                    KeyOpV2::Extend { token, lease_ms } => KeyOp::Extend { token, lease_ms },
                    KeyOpV2::Delete => KeyOp::Delete,
                }),
                now_ms,
            },
        }
    }
}
