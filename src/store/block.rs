//! An event is a block of keys: its seq and one delivery key per
//! destination (see [`super::schema`]). The two walks of that shape that
//! readers and the writer's tables share: from an event to its deliveries
//! ([`block`]) and from a delivery key to its event ([`event_of`]).

use redb::ReadableTable;

use super::format::row;
use super::types::Delivery;

/// The deliveries of event `seq`: the `state` rows of its block, from `seq`
/// up to the next event's seq.
pub(super) fn block<E>(
    events: &impl ReadableTable<u64, &'static [u8]>,
    states: &impl ReadableTable<u64, &'static [u8]>,
    seq: u64,
) -> Result<Vec<Delivery>, E>
where
    E: From<redb::StorageError> + From<row::DecodeError>,
{
    let next = seq.saturating_add(1);
    // Most events have one destination: the next event follows at once, and
    // two point lookups answer without building a range.
    if events.get(next)?.is_some() {
        return Ok(match states.get(seq)? {
            Some(raw) => vec![Delivery {
                key: seq,
                state: row::decode_state(raw.value())?,
            }],
            None => Vec::new(),
        });
    }
    let end = match events.range(next..)?.next() {
        Some(row) => row?.0.value(),
        None => u64::MAX,
    };
    let mut out = Vec::new();
    for row in states.range(seq..end)? {
        let (key, raw) = row?;
        out.push(Delivery {
            key: key.value(),
            state: row::decode_state(raw.value())?,
        });
    }
    Ok(out)
}

/// The seq of the event whose block holds delivery `key`.
pub(super) fn event_of<E>(
    events: &impl ReadableTable<u64, &'static [u8]>,
    key: u64,
) -> Result<Option<u64>, E>
where
    E: From<redb::StorageError>,
{
    match events.range(..=key)?.next_back() {
        Some(row) => Ok(Some(row?.0.value())),
        None => Ok(None),
    }
}
