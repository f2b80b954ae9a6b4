//! Idempotency keys: what an app claims before a side effect and completes
//! after it, so that each side effect happens once however often its event
//! is delivered. Served from the same file and the same writer as events:
//! every change is one job of the writer's group commit, logged and durable
//! before it is answered.
//!
//! A key lives in a namespace (one per app). Its record is either
//! **claimed** (a worker holds it until `lease_until_ms`, under a fencing
//! token) or **done** (a result kept until the key expires). A claim of a
//! key whose lease ran out goes to the next claimant under a larger token,
//! and the late worker's complete, release or extend is refused (`Stale`):
//! its token is no longer the holder's, so a result is never overwritten.
//! A claim's token is the seq of the row it writes, from one store-wide
//! counter in `meta`, so a token is never handed out twice, even for a key
//! swept and claimed anew.
//!
//! Stored append-only ([`super::super::schema::KEY_LOG`]): each change writes the
//! key's row under the next seq and removes the one before, so a commit
//! writes the table's last pages whatever it holds; the dedupe index maps
//! the key's fingerprint ([`fingerprint`]) to its seq. The log records what
//! a change wrote ([`KeyWrite`]), and recovery writes it again without
//! deciding anything. A key expires `ttl` after its last change (a claimed
//! one no earlier than its lease's end), and is then swept whatever its
//! state.
//!
//! This file holds the domain types; `tables/keys/` what a transaction
//! does to the rows (with `decide.rs`, what an operation makes of a key's
//! record), `read/keys.rs` one key, a namespace's list and the count, and
//! `ops/key.rs` the change through the writer.

use sha2::{Digest, Sha256};

use super::super::dedupe::Fingerprint;

/// The fingerprint of key `key` of `namespace` in the dedupe index, beside
/// the events' ([`super::super::dedupe::fingerprint`]). Its input starts with a
/// byte no source name starts with, so the two kinds never share one.
pub fn fingerprint(namespace: &str, key: &str) -> Fingerprint {
    let mut hash = Sha256::new();
    hash.update(b"\x01key\0");
    hash.update(namespace.as_bytes());
    hash.update([0]);
    hash.update(key.as_bytes());
    let digest = hash.finalize();
    u128::from_be_bytes(digest[..16].try_into().expect("16 bytes"))
}

/// One key's stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub state: KeyState,
    /// When it was first claimed (this life of the key).
    pub created_ms: u64,
    /// How long it is kept after its last change.
    pub ttl_ms: u64,
    /// When the sweeper removes it: its entry in `key_expiry`.
    pub expires_ms: u64,
    /// Claims granted in this life of the key (1 for the first).
    pub claims: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// A worker holds it under `token` until `lease_until_ms`.
    Claimed { token: u64, lease_until_ms: u64 },
    /// Done by the holder of `token`: `result` is the JSON it stored.
    Done {
        token: u64,
        completed_ms: u64,
        result: Option<String>,
    },
}

/// Which of the two states a key is in, without its fields: what a list
/// of keys filters by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyStateKind {
    Claimed,
    Done,
}

impl KeyRecord {
    /// Whether it still counts at `now_ms`: one past its expiry that the
    /// sweeper has not reached yet is gone all the same.
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_ms > now_ms
    }
}

impl KeyState {
    pub fn kind(&self) -> KeyStateKind {
        match self {
            KeyState::Claimed { .. } => KeyStateKind::Claimed,
            KeyState::Done { .. } => KeyStateKind::Done,
        }
    }
}

/// A page of one namespace's keys, the most recently changed first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPage {
    pub keys: Vec<(String, KeyRecord)>,
    /// Where the next page starts (below this seq); `None`: no more.
    pub next_before: Option<u64>,
}

/// A change asked of one key. Logged in the write-ahead log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOp {
    /// Claim it for `lease_ms`, to be kept `ttl_ms` after its last change.
    Claim { lease_ms: u64, ttl_ms: u64 },
    /// The holder of `token` did the work: keep `result`.
    Complete { token: u64, result: Option<String> },
    /// The holder of `token` gives it up: the key is free again.
    Release { token: u64 },
    /// The holder of `token` needs it `lease_ms` longer, from now.
    Extend { token: u64, lease_ms: u64 },
    /// Removed by hand (an operator, with a note kept in the log line).
    Delete,
}

/// What a key change came to. Nothing but `Claimed`, `Completed`,
/// `Released`, `Extended` and `Deleted` changed anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyAnswer {
    /// Yours until `lease_until_ms`; `token` fences your later calls.
    Claimed {
        token: u64,
        lease_until_ms: u64,
        /// Taken over from a holder whose lease had run out (the
        /// `key_leases_expired` metric), not a free key.
        took_over: bool,
    },
    /// Already done (or just now, by this complete).
    Done {
        completed_ms: u64,
        result: Option<String>,
    },
    /// Another worker holds it until `lease_until_ms`.
    Busy {
        lease_until_ms: u64,
    },
    /// Completed by this call.
    Completed {
        completed_ms: u64,
    },
    Released,
    Extended {
        lease_until_ms: u64,
    },
    Deleted,
    /// The token is not the holder's: another claimed it since, or it was
    /// released, completed or deleted. Nothing changed.
    Stale,
    /// No such key.
    NotFound,
}

/// What a change wrote: logged in the write-ahead log as it is, and written
/// again as it is by recovery (or a standby).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyWrite {
    /// `record` of `key` stored under `seq`, in place of the row under
    /// `replaces` (the key's record before, if it had one).
    Put {
        namespace: String,
        key: String,
        seq: u64,
        replaces: Option<u64>,
        record: KeyRecord,
    },
    /// The row under `seq` removed: the key is free.
    Remove { namespace: String, seq: u64 },
}
