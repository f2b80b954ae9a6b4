//! The store's durable operations, one file each, as the writer sees them
//! through [`super::job::Op`]. A file holds its `Store` method (which
//! queues a job and waits for its durable answer), the job: what it does to
//! the tables in the batch's one transaction and the entry it logs, and the
//! replay of that entry, which recovery and a standby apply again without
//! deciding anything.
//!
//! A new durable operation is a file here, a kind of [`Entry`] with its
//! bytes in `format/` (a variant at the end of the newest format), and the
//! `Tables` method its step and its replay call; [`replay`] names the kind.

use super::dedupe::{Fingerprint, Kind};
use super::entry::Entry;
use super::error::WriteError;
use super::tables::{Tables, Ttls};

mod apply;
mod audit;
mod change;
mod claim;
mod finish;
mod ingest;
pub(super) mod interrupted;
mod key;
mod meta;
pub(super) mod ping;
mod probe;
mod promote;
mod sweep;

pub use probe::PROBE_EVERY;

/// Told of each dedupe index entry a step or a replay changes: (kind,
/// fingerprint, the seq it was at, the seq it is at now).
pub(super) type Moved<'m> = dyn FnMut(Kind, Fingerprint, Option<u64>, Option<u64>) + 'm;

/// Applies one logged entry again, telling `moved` of each dedupe index
/// entry it changes, as the writer learns them live (a standby's index
/// follows what it applies so).
pub(super) fn replay(
    t: &mut Tables<'_>,
    entry: Entry<'_>,
    ttls: &Ttls,
    moved: &mut Moved<'_>,
) -> Result<(), WriteError> {
    match entry {
        Entry::Ingest {
            seq,
            initial,
            record,
        } => ingest::replay(t, seq, &initial, &record, ttls, moved),
        Entry::Duplicate {
            received_ms,
            source,
        } => ingest::replay_duplicate(t, received_ms, &source),
        Entry::Claim { seq, started_ms } => claim::replay(t, seq, started_ms),
        Entry::Finish(finish) => finish::replay(t, &finish, ttls),
        Entry::Change {
            seq,
            change,
            now_ms,
        } => change::replay(t, seq, &change, now_ms, ttls),
        Entry::Sweep { now_ms, limit } => sweep::replay(t, now_ms, limit, ttls, moved),
        Entry::SetMeta { key, value } => meta::replay(t, &key, &value),
        Entry::Interrupted => interrupted::replay(t),
        Entry::Audit { id, record } => audit::replay(t, id, &record),
        Entry::KeyWrite(write) => key::replay(t, &write, moved),
        Entry::Key {
            namespace,
            key,
            op,
            now_ms,
        } => key::replay_op(t, &namespace, &key, &op, now_ms),
    }
}
