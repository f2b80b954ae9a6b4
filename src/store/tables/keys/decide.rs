//! What an operation makes of a key's record: pure, so the live path and
//! its tests share it.

use super::super::super::error::WriteError;
use super::super::super::types::keys::{KeyAnswer, KeyOp, KeyRecord, KeyState};

/// What `op` makes of a key found as `found` (`None`: absent or expired):
/// the answer and the record to keep (`None`: none). Pure but for the
/// token it may draw.
pub(super) fn decide(
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
