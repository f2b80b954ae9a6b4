//! The audit trail on the wire: `GET /api/audit`'s query and page.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{AuditAction, Role, Timestamp, WordError};

/// Which records `GET /api/audit` returns; every field narrows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// A person's name (`admin` for the `[admin]` token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub person: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<AuditAction>,
    /// Asked at or after: RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<Timestamp>,
    /// Asked before: RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<Timestamp>,
    /// A page's `next_cursor`: go on below it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// Records per page, 1–500 (default 50).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// A page of the audit trail, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// Pass as `cursor` for the next page; `None`: nothing more matches.
    /// A page can be short, even empty, and still have one: each call
    /// reads at most 20,000 records.
    pub next_cursor: Option<u64>,
}

/// One thing a person did through the API, the CLI or the dashboard, or
/// tried to and was refused. Never a payload, a header or a token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub id: u64,
    /// When it was asked.
    pub at: Timestamp,
    /// Who: `admin` for the `[admin]` token, else the `[[admin.user]]` name.
    pub person: String,
    /// Their role then.
    pub role: Role,
    pub action: AuditAction,
    /// What the path named: an event's id, a destination, a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The request's other arguments: a bulk change's filter, a replay's
    /// destination, a key's namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub filter: BTreeMap<String, String>,
    /// A bulk change's dry run: counted, nothing changed.
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// How it ended; absent if the server stopped before it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<AuditOutcome>,
}

/// How a recorded request was answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditOutcome {
    /// The HTTP status: 2xx done; 403 refused for the role; …
    pub status: u16,
    pub at: Timestamp,
    /// Why it was refused or failed, as the caller was told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A bulk change: the events matched and changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<u64>,
}

/// `--action`'s text, as the API writes it.
impl std::str::FromStr for AuditAction {
    type Err = WordError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        AuditAction::ALL
            .iter()
            .copied()
            .find(|a| a.as_str() == text)
            .ok_or_else(|| WordError::Action {
                text: text.to_owned(),
            })
    }
}

/// Every action's name, for [`WordError::Action`]'s message.
pub(super) fn action_names() -> String {
    let names: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
    names.join(", ")
}
