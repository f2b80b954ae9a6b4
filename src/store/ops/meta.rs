//! Meta: one row of the `meta` table set durably: a destination's pause
//! state, what the payload drift watch learned, the source secrets' use,
//! and where each source's reconcile passes got to, all of which outlive
//! a restart.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use redb::{ReadableDatabase, ReadableTable};

use super::super::entry::Entry;
use super::super::error::{StoreError, WriteError};
use super::super::handle::Store;
use super::super::job::{Op, Step};
use super::super::reply::{ReplyTo, fail};
use super::super::schema::META;
use super::super::tables::Tables;

/// `meta` keys of destinations' pause states.
const PAUSED_PREFIX: &str = "paused:";
/// The `meta` key of what the payload drift watch learned.
const DRIFT: &str = "drift";
/// The `meta` key of the source secrets' use (`secrets::Keeper`).
const SECRETS: &str = "secrets";
/// `meta` keys of sources' reconcile cursors.
const RECONCILE_PREFIX: &str = "reconcile:";

impl Store {
    /// Keeps a destination's pause state across restarts.
    pub async fn set_paused(&self, destination: &str, paused: bool) -> Result<(), StoreError> {
        let key = format!("{PAUSED_PREFIX}{destination}");
        self.call(|reply| {
            Box::new(SetMeta {
                key,
                value: vec![u8::from(paused)],
                reply,
            })
        })
        .await
    }

    /// Keeps what the payload drift watch learned (in its own encoding)
    /// across restarts, replacing what was kept.
    pub async fn set_drift_state(&self, value: Vec<u8>) -> Result<(), StoreError> {
        self.call(|reply| {
            Box::new(SetMeta {
                key: DRIFT.to_owned(),
                value,
                reply,
            })
        })
        .await
    }

    /// Keeps the source secrets' use (in `secrets`' own encoding),
    /// replacing what was kept.
    pub async fn set_secrets_state(&self, value: Vec<u8>) -> Result<(), StoreError> {
        self.call(|reply| {
            Box::new(SetMeta {
                key: SECRETS.to_owned(),
                value,
                reply,
            })
        })
        .await
    }

    /// What [`Store::set_secrets_state`] kept last, if anything.
    pub fn secrets_state(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let meta = txn.open_table(META)?;
        Ok(meta.get(SECRETS)?.map(|v| v.value().to_vec()))
    }

    /// What [`Store::set_drift_state`] kept last, if anything.
    pub fn drift_state(&self) -> Result<Option<Vec<u8>>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let meta = txn.open_table(META)?;
        Ok(meta.get(DRIFT)?.map(|v| v.value().to_vec()))
    }

    /// Keeps where `source`'s reconcile passes got to (in the reconciler's
    /// own encoding), replacing what was kept.
    pub async fn set_reconcile_state(
        &self,
        source: &str,
        value: Vec<u8>,
    ) -> Result<(), StoreError> {
        self.call(|reply| {
            Box::new(SetMeta {
                key: format!("{RECONCILE_PREFIX}{source}"),
                value,
                reply,
            })
        })
        .await
    }

    /// What [`Store::set_reconcile_state`] kept last for `source`.
    pub fn reconcile_state(&self, source: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let meta = txn.open_table(META)?;
        let key = format!("{RECONCILE_PREFIX}{source}");
        Ok(meta.get(key.as_str())?.map(|v| v.value().to_vec()))
    }

    /// Pause states set through [`Store::set_paused`], by destination.
    pub fn paused_states(&self) -> Result<HashMap<String, bool>, StoreError> {
        let db = self.db()?;
        let txn = db.begin_read()?;
        let meta = txn.open_table(META)?;
        let mut out = HashMap::new();
        for row in meta.iter()? {
            let (k, v) = row?;
            if let Some(name) = k.value().strip_prefix(PAUSED_PREFIX) {
                out.insert(name.to_owned(), v.value().first() == Some(&1));
            }
        }
        Ok(out)
    }
}

struct SetMeta {
    key: String,
    value: Vec<u8>,
    reply: ReplyTo<()>,
}

impl Op for SetMeta {
    fn apply(self: Box<Self>, step: &mut Step<'_, '_>) -> Result<(), Arc<WriteError>> {
        step.log(&Entry::SetMeta {
            key: Cow::Borrowed(&self.key),
            value: Cow::Borrowed(&self.value),
        });
        let result = replay(step.t, &self.key, &self.value);
        step.settle(self.reply, result)
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.reply, cause)
    }
}

pub(super) fn replay(t: &mut Tables<'_>, key: &str, value: &[u8]) -> Result<(), WriteError> {
    t.meta.insert(key, value)?;
    Ok(())
}
