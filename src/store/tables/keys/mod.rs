//! Keys' rows: [`KEY_LOG`] (namespace, seq) → (fingerprint, row), with
//! [`KEY_DUE`] for the sweeper and [`KEY_CLAIMED`] for lists of claimed keys.
//! The live path decides ([`Tables::key`]); recovery only writes
//! ([`Tables::write_key`]).

mod decide;

use redb::{ReadableTable, Table};

use super::super::dedupe::Fingerprint;
use super::super::error::WriteError;
use super::super::format::row;
use super::super::schema::{KEY_CLAIMED, KEY_DUE, KEY_LOG};
use super::super::tables::Tables;
use super::super::types::keys::{KeyAnswer, KeyOp, KeyRecord, KeyState, KeyWrite, fingerprint};
use decide::decide;

/// The `meta` row holding the last key seq handed out (and so the last
/// fencing token: a claim's token is its row's seq).
pub const META_KEY_SEQ: &str = "key_seq";
/// The `meta` row of schema 6's token counter: only the replay of a
/// format-2 log ([`Tables::key_by_op`]) draws from it.
pub const META_KEY_TOKEN: &str = "key_token";

/// The key tables, opened once per transaction when a key is first touched.
pub(crate) struct KeyTables<'t> {
    log: Table<'t, (&'static str, u64), (u128, &'static [u8])>,
    due: Table<'t, (u64, &'static str, u64), ()>,
    claimed: Table<'t, (&'static str, u64), ()>,
}

impl<'t> KeyTables<'t> {
    pub(crate) fn open(txn: &'t redb::WriteTransaction) -> Result<Self, WriteError> {
        Ok(KeyTables {
            log: txn.open_table(KEY_LOG)?,
            due: txn.open_table(KEY_DUE)?,
            claimed: txn.open_table(KEY_CLAIMED)?,
        })
    }
}

/// Which counter a claim's token comes from.
#[derive(Clone, Copy)]
enum Tokens {
    /// The new row's seq (this build's claims).
    Seq,
    /// [`META_KEY_TOKEN`], as a schema-6 build drew them.
    Legacy,
}

impl<'t> Tables<'t> {
    fn key_tables(&mut self) -> Result<&mut KeyTables<'t>, WriteError> {
        if self.keys.is_none() {
            self.keys = Some(KeyTables::open(self.txn)?);
        }
        Ok(self.keys.as_mut().expect("just opened"))
    }

    /// Applies `op` to key `key` of `namespace` at `now_ms`, whose record
    /// the dedupe index says is under `at`. Returns the answer and what it
    /// wrote, for the log (`None`: nothing changed).
    pub fn key(
        &mut self,
        namespace: &str,
        key: &str,
        at: Option<u64>,
        op: &KeyOp,
        now_ms: u64,
    ) -> Result<(KeyAnswer, Option<KeyWrite>), WriteError> {
        let found = match at {
            Some(seq) => Some((seq, self.key_row(namespace, seq, key)?)),
            None => None,
        };
        self.change_key(namespace, key, found, op, now_ms, Tokens::Seq)
    }

    /// A format-2 log's key change, replayed as the build that logged it
    /// decided it: the key found by a walk of its namespace (no index
    /// during recovery; only logs of that one build's crashes come here),
    /// its token drawn from that build's counter.
    pub fn key_by_op(
        &mut self,
        namespace: &str,
        key: &str,
        op: &KeyOp,
        now_ms: u64,
    ) -> Result<(), WriteError> {
        let mut found = None;
        let tables = self.key_tables()?;
        for row in tables.log.range((namespace, 0)..=(namespace, u64::MAX))? {
            let (at, value) = row?;
            let (stored, record) = row::decode_key(value.value().1)?;
            if stored == key {
                found = Some((at.value().1, record));
            }
        }
        self.change_key(namespace, key, found, op, now_ms, Tokens::Legacy)
            .map(drop)
    }

    fn change_key(
        &mut self,
        namespace: &str,
        key: &str,
        found: Option<(u64, KeyRecord)>,
        op: &KeyOp,
        now_ms: u64,
        tokens: Tokens,
    ) -> Result<(KeyAnswer, Option<KeyWrite>), WriteError> {
        let (at, live) = match found {
            Some((seq, record)) => (Some(seq), Some(record).filter(|r| r.is_live(now_ms))),
            None => (None, None),
        };
        let mut drawn = None;
        let (answer, next) = decide(live.clone(), op, now_ms, || {
            let token = match tokens {
                Tokens::Seq => self.next_key_seq()?,
                Tokens::Legacy => self.next_legacy_token()?,
            };
            drawn = Some(token);
            Ok(token)
        })?;
        if next == live {
            return Ok((answer, None));
        }
        let write = match (next, at) {
            (Some(record), _) => {
                let seq = match (tokens, drawn) {
                    (Tokens::Seq, Some(seq)) => seq,
                    _ => self.next_key_seq()?,
                };
                KeyWrite::Put {
                    namespace: namespace.to_owned(),
                    key: key.to_owned(),
                    seq,
                    replaces: at,
                    record,
                }
            }
            (None, Some(seq)) => KeyWrite::Remove {
                namespace: namespace.to_owned(),
                seq,
            },
            (None, None) => return Ok((answer, None)),
        };
        self.write_key(&write)?;
        Ok((answer, Some(write)))
    }

    /// Writes what a change decided, live or replayed: the new row (and
    /// its place in the sweeper's and the claimed keys' tables) in place
    /// of the old one, or the old one removed. Keeps [`META_KEY_SEQ`] at
    /// least the newest seq, so a replayed log leaves the counter as the
    /// live writer did. Returns the key's fingerprint (0 for the removal
    /// of a row that was not there).
    pub fn write_key(&mut self, write: &KeyWrite) -> Result<Fingerprint, WriteError> {
        match write {
            KeyWrite::Put {
                namespace,
                key,
                seq,
                replaces,
                record,
            } => {
                if let Some(old) = replaces {
                    self.remove_key_row(namespace, *old)?;
                }
                if self.key_seq()? < *seq {
                    self.set_key_seq(*seq)?;
                }
                row::encode_key(key, record, &mut self.buf);
                let fp = fingerprint(namespace, key);
                let buf = std::mem::take(&mut self.buf);
                let tables = self.key_tables()?;
                tables
                    .log
                    .insert((namespace.as_str(), *seq), (fp, buf.as_slice()))?;
                tables
                    .due
                    .insert((record.expires_ms, namespace.as_str(), *seq), ())?;
                if matches!(record.state, KeyState::Claimed { .. }) {
                    tables.claimed.insert((namespace.as_str(), *seq), ())?;
                }
                self.buf = buf;
                Ok(fp)
            }
            KeyWrite::Remove { namespace, seq } => {
                Ok(self.remove_key_row(namespace, *seq)?.unwrap_or(0))
            }
        }
    }

    /// Removes the row under `seq` and its entries; returns its
    /// fingerprint, if it was there.
    fn remove_key_row(
        &mut self,
        namespace: &str,
        seq: u64,
    ) -> Result<Option<Fingerprint>, WriteError> {
        let tables = self.key_tables()?;
        let Some(removed) = tables.log.remove((namespace, seq))? else {
            return Ok(None);
        };
        let (fp, raw) = removed.value();
        let (_, record) = row::decode_key(raw)?;
        drop(removed);
        tables.due.remove((record.expires_ms, namespace, seq))?;
        tables.claimed.remove((namespace, seq))?;
        Ok(Some(fp))
    }

    /// The record under `seq`, which the index found for `key`.
    fn key_row(&mut self, namespace: &str, seq: u64, key: &str) -> Result<KeyRecord, WriteError> {
        let tables = self.key_tables()?;
        let raw = tables.log.get((namespace, seq))?.ok_or_else(|| {
            WriteError::Corrupt(row::DecodeError::Codec(format!(
                "the index holds key seq {seq}, which is not stored"
            )))
        })?;
        let (stored, record) = row::decode_key(raw.value().1)?;
        if stored != key {
            // Two keys sharing 106 bits of fingerprint: see `dedupe`.
            return Err(WriteError::Corrupt(row::DecodeError::Codec(
                "two idempotency keys share a fingerprint".into(),
            )));
        }
        Ok(record)
    }

    /// The next key seq: one more than the last handed out.
    fn next_key_seq(&mut self) -> Result<u64, WriteError> {
        let seq = self.key_seq()? + 1;
        self.set_key_seq(seq)?;
        Ok(seq)
    }

    /// [`META_KEY_SEQ`], read once a transaction: every write of it goes
    /// through [`Self::set_key_seq`], which keeps the copy.
    fn key_seq(&mut self) -> Result<u64, WriteError> {
        if let Some(seq) = self.key_seq {
            return Ok(seq);
        }
        let seq = self.meta_u64(META_KEY_SEQ)?;
        self.key_seq = Some(seq);
        Ok(seq)
    }

    fn set_key_seq(&mut self, seq: u64) -> Result<(), WriteError> {
        self.set_meta_u64(META_KEY_SEQ, seq)?;
        self.key_seq = Some(seq);
        Ok(())
    }

    /// The next token of schema 6's counter; the seqs stay above it, so a
    /// claim of this build still gets a larger token than any before.
    fn next_legacy_token(&mut self) -> Result<u64, WriteError> {
        let token = self.meta_u64(META_KEY_TOKEN)? + 1;
        self.set_meta_u64(META_KEY_TOKEN, token)?;
        if self.key_seq()? < token {
            self.set_key_seq(token)?;
        }
        Ok(token)
    }

    pub(in super::super) fn meta_u64(&self, name: &str) -> Result<u64, WriteError> {
        Ok(match self.meta.get(name)? {
            Some(v) => u64::from_le_bytes(v.value().try_into().unwrap_or([0; 8])),
            None => 0,
        })
    }

    fn set_meta_u64(&mut self, name: &str, value: u64) -> Result<(), WriteError> {
        self.meta.insert(name, value.to_le_bytes().as_slice())?;
        Ok(())
    }

    /// Removes up to `limit` keys expired at `now_ms`. Returns how many,
    /// whether more are due, and the (fingerprint, seq) of each for the
    /// index to forget.
    pub fn sweep_keys(
        &mut self,
        now_ms: u64,
        limit: usize,
    ) -> Result<(Vec<(Fingerprint, u64)>, bool), WriteError> {
        let tables = self.key_tables()?;
        let mut due = Vec::new();
        let mut more = false;
        for entry in tables.due.range((0, "", 0)..)? {
            let (entry, _) = entry?;
            let (at, namespace, seq) = entry.value();
            if at > now_ms {
                break;
            }
            if due.len() == limit {
                more = true;
                break;
            }
            due.push((namespace.to_owned(), seq));
        }
        let mut forgotten = Vec::with_capacity(due.len());
        for (namespace, seq) in &due {
            if let Some(fp) = self.remove_key_row(namespace, *seq)? {
                forgotten.push((fp, *seq));
            }
        }
        Ok((forgotten, more))
    }
}
