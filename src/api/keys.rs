//! Idempotency keys on the wire: the requests and answers of
//! `/api/keys/…` and `/api/key-namespaces`, and the bounds a key and its
//! result keep.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{Timestamp, WordError};

/// The most bytes of JSON a completed key keeps as its result: enough for
/// an id, a status and a receipt; a key is a marker, not a document store.
pub const MAX_KEY_RESULT: usize = 64 * 1024;

/// The most bytes of UTF-8 in a key: a webhook-id, or a business key such
/// as `order:123:confirmation-email`, with room to spare.
pub const MAX_KEY_LEN: usize = 256;

/// `POST /api/keys/{key}/claim`. Both optional (an empty body too): the
/// config's `[keys]` lease and ttl otherwise.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// How long the claim is yours, from 1s to 1h, e.g. "30s".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// How long the key is kept after its last change, from 1s to 365d,
    /// e.g. "7d".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}

/// `POST /api/keys/{key}/complete`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    /// The fencing token the claim gave.
    pub token: u64,
    /// Any JSON value of at most 64 KiB, kept and given to later claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<Box<serde_json::value::RawValue>>,
}

/// `POST /api/keys/{key}/release`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The fencing token the claim gave.
    pub token: u64,
}

/// `POST /api/keys/{key}/extend`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    /// The fencing token the claim gave.
    pub token: u64,
    /// The new lease, from now: from 1s to 1h. Absent: the config's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
}

/// Which namespace a key is in: a client's token may leave it out (its own
/// is meant) and may name no other; the admin token must give it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeyScope {
    pub namespace: Option<String>,
}

/// `DELETE /api/keys/{key}`: the admin token, a namespace and a note.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeyDeleteQuery {
    pub namespace: Option<String>,
    /// Why, for the log: required.
    pub note: Option<String>,
}

/// A key's state as the API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyStateName {
    /// Held under `token` until `lease_until`.
    Claimed,
    /// Done: `result` is what the completer stored.
    Done,
    /// Another worker holds it until `lease_until`: retry after it.
    Busy,
    /// The token is no longer the holder's: nothing changed.
    Stale,
    /// Nobody holds it (released or deleted).
    Free,
}

/// Every answer about a key: `state`, and the fields that state has. A
/// claim gives `token` and `lease_until`; done gives `result` (null when
/// none was stored) and `completed_at`; `GET` adds `claims`, `created_at`
/// and `expires_at`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KeyView {
    /// The key itself: in a list and in `GET`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub state: KeyStateName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<Box<serde_json::value::RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Claims granted in this life of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Timestamp>,
    /// When the sweeper removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
}

impl KeyView {
    /// A view of `state` with no other field set.
    pub fn of(state: KeyStateName) -> KeyView {
        KeyView {
            key: None,
            state,
            token: None,
            lease_until: None,
            result: None,
            completed_at: None,
            claims: None,
            created_at: None,
            expires_at: None,
        }
    }
}

/// The state a key list keeps: `--state` of `hookinbox keys list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyListState {
    Claimed,
    Done,
}

impl std::str::FromStr for KeyListState {
    type Err = WordError;

    fn from_str(text: &str) -> Result<KeyListState, WordError> {
        match text {
            "claimed" => Ok(KeyListState::Claimed),
            "done" => Ok(KeyListState::Done),
            _ => Err(WordError::Unknown {
                text: text.to_owned(),
                expected: "claimed or done",
            }),
        }
    }
}

/// `GET /api/keys`: one namespace's keys, the most recently changed first (admin token).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct KeyListQuery {
    /// Required.
    pub namespace: Option<String>,
    /// Only keys in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(value_type = Option<String>)]
    pub state: Option<KeyListState>,
    /// Where the page starts: the last page's `next_after`, as given (an
    /// opaque cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// At most this many keys (1 to 500; default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `GET /api/key-namespaces`: the configured namespaces, for the dashboard
/// and scripts that list keys (admin token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeyNamespaces {
    /// In name order; one per namespace, however many apps share it.
    pub namespaces: Vec<KeyNamespace>,
}

/// One namespace of `[[keys.client]]` and the apps whose tokens reach it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct KeyNamespace {
    pub namespace: String,
    /// The `[[keys.client]]` names, in name order.
    pub clients: Vec<String>,
}

/// A page of keys.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyView>,
    /// Pass as `after` for the next page; `null`: no more. A page may be
    /// short (a state filter reads a bounded number of keys per call) and
    /// still have a next one. An opaque cursor, not a key.
    pub next_after: Option<String>,
}
