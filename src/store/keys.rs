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
//! Tokens come from one store-wide counter in `meta`, so a token is never
//! handed out twice, even for a key swept and claimed anew.
//!
//! `keys` (namespace, key) → the record ([`super::format::row`]);
//! `key_expiry` (expires_ms, namespace, key) → (): the sweeper's index.
//! A key expires `ttl` after its last change (a claimed one no earlier than
//! its lease's end), and is then swept whatever its state.

use redb::ReadableTable;

use super::error::WriteError;
use super::format::row;
use super::schema::{KEY_EXPIRY, KEYS};
use super::tables::Tables;

/// The `meta` row holding the last fencing token handed out.
pub const META_KEY_TOKEN: &str = "key_token";

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

impl KeyState {
    pub fn kind(&self) -> KeyStateKind {
        match self {
            KeyState::Claimed { .. } => KeyStateKind::Claimed,
            KeyState::Done { .. } => KeyStateKind::Done,
        }
    }
}

/// A page of one namespace's keys, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPage {
    pub keys: Vec<(String, KeyRecord)>,
    /// Where the next page starts (after this key); `None`: no more.
    pub next_after: Option<String>,
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

impl Tables<'_> {
    /// Applies `op` to key `key` of `namespace` at `now_ms`.
    pub fn key(
        &mut self,
        namespace: &str,
        key: &str,
        op: &KeyOp,
        now_ms: u64,
    ) -> Result<KeyAnswer, WriteError> {
        let mut keys = self.txn.open_table(KEYS)?;
        let mut expiry = self.txn.open_table(KEY_EXPIRY)?;
        let stored = match keys.get((namespace, key))? {
            Some(raw) => Some(row::decode_key(raw.value())?),
            None => None,
        };
        // A record past its expiry that the sweeper has not reached yet is
        // gone all the same.
        let live = stored.clone().filter(|r| r.expires_ms > now_ms);
        let (answer, next) = decide(live.clone(), op, now_ms, || self.next_token())?;
        if next != live {
            if let Some(old) = &stored {
                expiry.remove((old.expires_ms, namespace, key))?;
            }
            match &next {
                Some(record) => {
                    row::encode_key(record, &mut self.buf);
                    keys.insert((namespace, key), self.buf.as_slice())?;
                    expiry.insert((record.expires_ms, namespace, key), ())?;
                }
                None => {
                    keys.remove((namespace, key))?;
                }
            }
        }
        Ok(answer)
    }

    /// The next fencing token: one more than the last handed out.
    fn next_token(&mut self) -> Result<u64, WriteError> {
        let last = match self.meta.get(META_KEY_TOKEN)? {
            Some(v) => u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8])),
            None => 0,
        };
        let token = last + 1;
        self.meta
            .insert(META_KEY_TOKEN, token.to_le_bytes().as_slice())?;
        Ok(token)
    }

    /// Removes up to `limit` keys expired at `now_ms`; returns how many,
    /// and whether more are due.
    pub fn sweep_keys(&mut self, now_ms: u64, limit: usize) -> Result<(u64, bool), WriteError> {
        let mut keys = self.txn.open_table(KEYS)?;
        let mut expiry = self.txn.open_table(KEY_EXPIRY)?;
        let mut due = Vec::new();
        let mut more = false;
        for entry in expiry.range((0, "", "")..)? {
            let (entry, _) = entry?;
            let (at, namespace, key) = entry.value();
            if at > now_ms {
                break;
            }
            if due.len() == limit {
                more = true;
                break;
            }
            due.push((at, namespace.to_owned(), key.to_owned()));
        }
        for (at, namespace, key) in &due {
            expiry.remove((*at, namespace.as_str(), key.as_str()))?;
            keys.remove((namespace.as_str(), key.as_str()))?;
        }
        Ok((due.len() as u64, more))
    }
}

/// What `op` makes of a key found as `found` (`None`: absent or expired):
/// the answer and the record to keep (`None`: none). Pure but for the
/// token it may draw.
fn decide(
    found: Option<KeyRecord>,
    op: &KeyOp,
    now_ms: u64,
    mut token: impl FnMut() -> Result<u64, WriteError>,
) -> Result<(KeyAnswer, Option<KeyRecord>), WriteError> {
    let held_by = |record: &KeyRecord, t: u64| matches!(record.state, KeyState::Claimed { token, .. } if token == t);
    Ok(match (op, found) {
        (KeyOp::Claim { lease_ms, ttl_ms }, found) => match &found {
            Some(KeyRecord {
                state:
                    KeyState::Done {
                        completed_ms,
                        result,
                        ..
                    },
                ..
            }) => (
                KeyAnswer::Done {
                    completed_ms: *completed_ms,
                    result: result.clone(),
                },
                found,
            ),
            Some(KeyRecord {
                state: KeyState::Claimed { lease_until_ms, .. },
                ..
            }) if *lease_until_ms > now_ms => (
                KeyAnswer::Busy {
                    lease_until_ms: *lease_until_ms,
                },
                found,
            ),
            _ => {
                let token = token()?;
                let lease_until_ms = now_ms.saturating_add(*lease_ms);
                let record = KeyRecord {
                    state: KeyState::Claimed {
                        token,
                        lease_until_ms,
                    },
                    created_ms: found.as_ref().map_or(now_ms, |r| r.created_ms),
                    ttl_ms: *ttl_ms,
                    expires_ms: now_ms.saturating_add(*ttl_ms).max(lease_until_ms),
                    claims: found.as_ref().map_or(0, |r| r.claims) + 1,
                };
                let took_over = matches!(
                    found,
                    Some(KeyRecord {
                        state: KeyState::Claimed { .. },
                        ..
                    })
                );
                (
                    KeyAnswer::Claimed {
                        token,
                        lease_until_ms,
                        took_over,
                    },
                    Some(record),
                )
            }
        },
        (_, None) => (KeyAnswer::NotFound, None),
        (KeyOp::Delete, Some(_)) => (KeyAnswer::Deleted, None),
        (KeyOp::Complete { token, result }, Some(record)) => match &record.state {
            KeyState::Claimed { token: holder, .. } if holder == token => {
                let done = KeyRecord {
                    state: KeyState::Done {
                        token: *token,
                        completed_ms: now_ms,
                        result: result.clone(),
                    },
                    expires_ms: now_ms.saturating_add(record.ttl_ms),
                    ..record
                };
                (
                    KeyAnswer::Completed {
                        completed_ms: now_ms,
                    },
                    Some(done),
                )
            }
            // A retried complete by the worker that completed it.
            KeyState::Done {
                token: by,
                completed_ms,
                result,
            } if by == token => (
                KeyAnswer::Done {
                    completed_ms: *completed_ms,
                    result: result.clone(),
                },
                Some(record),
            ),
            _ => (KeyAnswer::Stale, Some(record)),
        },
        (KeyOp::Release { token }, Some(record)) if held_by(&record, *token) => {
            (KeyAnswer::Released, None)
        }
        (KeyOp::Extend { token, lease_ms }, Some(record)) if held_by(&record, *token) => {
            let lease_until_ms = now_ms.saturating_add(*lease_ms);
            let extended = KeyRecord {
                state: KeyState::Claimed {
                    token: *token,
                    lease_until_ms,
                },
                expires_ms: now_ms.saturating_add(record.ttl_ms).max(lease_until_ms),
                ..record
            };
            (KeyAnswer::Extended { lease_until_ms }, Some(extended))
        }
        (KeyOp::Release { .. } | KeyOp::Extend { .. }, Some(record)) => {
            (KeyAnswer::Stale, Some(record))
        }
    })
}
