//! Index invariants after random transitions: every index agrees with
//! `state` and every count with a recount (`index::check`), after each step.

use proptest::prelude::*;

use std::time::{Duration, SystemTime};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::super::schema::{EVENTS, STATE};
use super::super::*;
use super::support::*;

#[derive(Debug, Clone)]
enum Op {
    Ingest {
        source: u8,
        id: u8,
        event_type: u8,
        hold: bool,
        key: Option<u8>,
        /// Destinations it goes to: 0 is schema 5's one (`Deliver`,
        /// `Ordered`), 1–3 a block of that many routes.
        fan: u8,
    },
    Deliver(usize),
    Retry(usize),
    Kill(usize, bool),
    Replay(usize),
    Ignore(usize),
    Erase(usize),
    /// Claim without an outcome, then reopen: an interrupted attempt.
    Interrupt(usize),
    Sweep(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2u8, 0..10u8, 0..3u8, any::<bool>(), proptest::option::of(0..2u8), 0..4u8).prop_map(
            |(source, id, event_type, hold, key, fan)| Op::Ingest { source, id, event_type, hold, key, fan }
        ),
        2 => any::<usize>().prop_map(Op::Deliver),
        2 => any::<usize>().prop_map(Op::Retry),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, r)| Op::Kill(i, r)),
        1 => any::<usize>().prop_map(Op::Replay),
        1 => any::<usize>().prop_map(Op::Ignore),
        1 => any::<usize>().prop_map(Op::Erase),
        1 => any::<usize>().prop_map(Op::Interrupt),
        1 => (0..40u64).prop_map(Op::Sweep),
    ]
}

fn check(store: &Store) -> Result<(), String> {
    let db = store.db().map_err(|e| e.to_string())?;
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    index::check(&txn)?;
    blocks_are_whole(&txn)?;
    lists_agree_with_a_recount(store)
}

/// Every delivery belongs to a stored event, and every event has one.
fn blocks_are_whole(txn: &redb::ReadTransaction) -> Result<(), String> {
    let events = txn.open_table(EVENTS).map_err(|e| e.to_string())?;
    let states = txn.open_table(STATE).map_err(|e| e.to_string())?;
    let mut in_blocks = 0;
    for row in events.iter().map_err(|e| e.to_string())? {
        let seq = row.map_err(|e| e.to_string())?.0.value();
        let block: Vec<Delivery> = super::super::block::block::<StoreError>(&events, &states, seq)
            .map_err(|e| e.to_string())?;
        if block.is_empty() || block[0].key != seq {
            return Err(format!("event {seq} has deliveries {block:?}"));
        }
        in_blocks += block.len() as u64;
    }
    let all = states.len().map_err(|e| e.to_string())?;
    if in_blocks != all {
        return Err(format!("{all} state rows, {in_blocks} in events' blocks"));
    }
    Ok(())
}

/// Every list, walked by cursor three at a time, returns what filtering
/// a full scan returns, newest first: the merged index ranges, the
/// cursor and the row walk over holes left by sweeps.
fn lists_agree_with_a_recount(store: &Store) -> Result<(), String> {
    let all = store.scan(0, usize::MAX).map_err(|e| e.to_string())?;
    let sources = [None, Some("s0"), Some("s1")];
    let destinations = [None, Some("s0"), Some("s1.b")];
    let types = [None, Some("t0"), Some("t2")];
    let statuses = [
        None,
        Some(schema::Status::Pending),
        Some(schema::Status::Dead),
        Some(schema::Status::Delivered),
    ];
    for (source, destination) in sources
        .into_iter()
        .flat_map(|s| destinations.map(|d| (s, d)))
    {
        for event_type in types {
            for status in statuses {
                let filter = EventFilter {
                    source: source.map(str::to_owned),
                    destination: destination.map(str::to_owned),
                    event_type: event_type.map(str::to_owned),
                    status,
                    ..EventFilter::default()
                };
                let want: Vec<(u64, String)> = all
                    .iter()
                    .rev()
                    .filter(|e| {
                        e.deliveries
                            .iter()
                            .any(|d| filter.matches(&e.record, &d.state))
                    })
                    .map(|e| (e.seq, e.record.event_id.clone()))
                    .collect();
                let mut got = Vec::new();
                let mut cursor = None;
                loop {
                    let (page, next) = store.list(&filter, cursor, 3).map_err(|e| e.to_string())?;
                    got.extend(page.iter().map(|e| (e.seq, e.record.event_id.clone())));
                    match next {
                        Some(next) => cursor = Some(next),
                        None => break,
                    }
                }
                if got != want {
                    return Err(format!("{filter:?}: listed {got:?}, stored {want:?}"));
                }
            }
        }
    }
    Ok(())
}

async fn run(ops: Vec<Op>) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        Store::open(StoreOptions {
            payload_ttl: Duration::from_millis(7 * DAY),
            dlq_ttl: Duration::from_millis(30 * DAY),
            ..options(dir.path())
        })
        .unwrap()
    };
    let (mut store, mut writer) = open();
    let mut seqs: Vec<u64> = Vec::new();
    let mut now = crate::clock::unix_ms(SystemTime::now());
    let pick = |seqs: &[u64], i: usize| (!seqs.is_empty()).then(|| seqs[i % seqs.len()]);
    for (step, op) in ops.into_iter().enumerate() {
        match op.clone() {
            Op::Ingest {
                source,
                id,
                event_type,
                hold,
                key,
                fan,
            } => {
                let source = format!("s{source}");
                let initial = match (hold, key, fan) {
                    (true, _, _) => Initial::Hold,
                    (false, Some(k), 0) => Initial::Ordered(format!("k{k}")),
                    (false, None, 0) => Initial::Deliver,
                    (false, key, fan) => Initial::Routes(
                        [source.clone(), format!("{source}.b"), format!("{source}.c")]
                            [..fan as usize]
                            .iter()
                            .map(|route| Route {
                                destination: route.clone(),
                                ordering_key: key.map(|k| format!("k{k}")),
                            })
                            .collect(),
                    ),
                };
                let event = event_of_type(&source, &format!("e{id}"), &format!("t{event_type}"));
                if let Ingested::New { id } = store.ingest(event, initial).await.unwrap() {
                    let seq = store.parse_public_id(&id).unwrap();
                    let stored = store.get(seq).unwrap().unwrap();
                    seqs.extend(stored.deliveries.iter().map(|d| d.key));
                }
            }
            Op::Deliver(i) | Op::Retry(i) | Op::Kill(i, _) => {
                let Some(seq) = pick(&seqs, i) else { continue };
                if store.claim(seq, now).await.unwrap().is_none() {
                    continue;
                }
                let (class, status, next) = match op {
                    Op::Deliver(_) => (
                        schema::AttemptClass::Delivered,
                        200,
                        Next::Delivered { at_ms: now },
                    ),
                    Op::Retry(_) => (
                        schema::AttemptClass::RetryableStatus,
                        503,
                        Next::RetryAt {
                            due_ms: now + 1_000,
                        },
                    ),
                    _ => (
                        schema::AttemptClass::RejectedStatus,
                        400,
                        Next::Dead {
                            reason: "400".into(),
                            at_ms: now,
                            release_key: matches!(op, Op::Kill(_, true)),
                        },
                    ),
                };
                store
                    .finish(Finish {
                        seq,
                        attempt: attempt(class, Some(status)),
                        next,
                    })
                    .await
                    .unwrap();
            }
            Op::Replay(i) | Op::Ignore(i) | Op::Erase(i) => {
                let Some(seq) = pick(&seqs, i) else { continue };
                let change = match op {
                    Op::Replay(_) => Change::Replay,
                    Op::Ignore(_) => Change::Ignore {
                        note: "not ours".into(),
                    },
                    _ => Change::Erase {
                        note: "privacy request".into(),
                    },
                };
                // A refusal (already pending, delivered…) changes nothing.
                let _ = store.change(seq, change, now).await.unwrap();
            }
            Op::Interrupt(i) => {
                let Some(seq) = pick(&seqs, i) else { continue };
                let _ = store.claim(seq, now).await.unwrap();
                close(store, writer).await;
                (store, writer) = open();
            }
            Op::Sweep(days) => {
                now += days * DAY;
                while store.sweep(now, 50).await.unwrap().more {}
            }
        }
        check(&store).map_err(|e| format!("after step {step} ({op:?}): {e}"))?;
    }
    close(store, writer).await;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn indexes_counts_and_lists_follow_state_through_any_transitions(
        ops in proptest::collection::vec(op(), 1..40)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        if let Err(e) = runtime.block_on(run(ops)) {
            return Err(TestCaseError::fail(e));
        }
    }
}
