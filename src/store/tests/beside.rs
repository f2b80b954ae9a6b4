//! Checkpoints beside the writer: under load, the events answered while a
//! checkpoint holds the database are logged first and applied after it.
//! Each keeps its seq and its dedupe key, a reader finds it by id once
//! answered, a crash at any moment loses none, and the jobs that need the
//! database wait for it in order.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redb::ReadableDatabase;

use super::super::*;
use super::recover::crash_image;
use super::support::*;

/// A checkpoint is due with every batch, so every busy batch starts one
/// beside the writer; keys are sealed every 64, so freezing and sealing
/// go on meanwhile.
fn beside_options(dir: &Path) -> StoreOptions {
    StoreOptions {
        checkpoint_every: Duration::ZERO,
        dedupe_seal_keys: 64,
        ..options(dir)
    }
}

/// Sends `wave` events at once (busy batches), `waves` times: new ids
/// `w{n}-{i}`, and from the second wave on every fourth one a copy of a new
/// event of the wave before. Returns each event id with what it was
/// answered.
async fn waves(store: &Store, waves: usize, wave: usize) -> Vec<(String, Ingested)> {
    let mut answers = Vec::new();
    for w in 0..waves {
        let mut tasks = Vec::new();
        for i in 0..wave {
            let id = match (w, i % 4) {
                (1.., 3) => format!("w{}-{}", w - 1, i - 1),
                _ => format!("w{w}-{i}"),
            };
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let answer = store.ingest(event("s", &id), Initial::Deliver).await;
                (id, answer.unwrap())
            }));
        }
        for task in tasks {
            answers.push(task.await.unwrap());
        }
    }
    answers
}

/// Each event id's one stored id: every answer for it names the same.
fn ids_by_event(answers: &[(String, Ingested)]) -> HashMap<String, String> {
    let mut ids: HashMap<String, String> = HashMap::new();
    for (event_id, answer) in answers {
        let id = match answer {
            Ingested::New { id } | Ingested::Duplicate { id } => id.clone(),
        };
        let first = ids.entry(event_id.clone()).or_insert_with(|| id.clone());
        assert_eq!(*first, id, "{event_id} answered with two ids");
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_answered_during_a_checkpoint_are_stored_once_and_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(beside_options(dir.path())).unwrap();
    let before = store.shared.decided.load(Ordering::Acquire);
    let answers = waves(&store, 30, 64).await;
    // Some events were decided while a checkpoint ran (the path under test).
    assert!(store.shared.decided.load(Ordering::Acquire) > before);
    let news = answers
        .iter()
        .filter(|(_, a)| matches!(a, Ingested::New { .. }))
        .count();
    let ids = ids_by_event(&answers);
    assert_eq!(news, ids.len(), "one new answer per event id");
    // Every copy (of an event answered in the wave before) is a duplicate.
    let copies = answers
        .iter()
        .skip(64)
        .enumerate()
        .filter(|(n, _)| n % 4 == 3)
        .map(|(_, (_, a))| a);
    assert!(copies.clone().count() > 400);
    assert!(
        copies
            .clone()
            .all(|a| matches!(a, Ingested::Duplicate { .. }))
    );
    // Found by id as soon as answered, with its own record.
    for (event_id, id) in &ids {
        let seq = store.parse_public_id(id).unwrap();
        let found = store.get_acked(seq).await.unwrap().expect(id);
        assert_eq!(found.record.event_id, *event_id);
    }
    // Jobs that need the database waited for it: a claim right after a
    // wave finds its event.
    let (_, last) = answers.last().unwrap();
    let (Ingested::New { id } | Ingested::Duplicate { id }) = last;
    let seq = store.parse_public_id(id).unwrap();
    assert!(store.claim(seq, 1).await.unwrap().is_some());
    assert_eq!(store.count().unwrap(), ids.len() as u64);
    index::check(&store.db().unwrap().begin_read().unwrap()).unwrap();
    close(store, writer).await;
    let (store, writer) = Store::open(beside_options(dir.path())).unwrap();
    assert_eq!(store.count().unwrap(), ids.len() as u64);
    for (event_id, id) in &ids {
        let found = store.find("s", event_id).unwrap().expect(event_id);
        assert_eq!(found.id, *id);
    }
    close(store, writer).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_during_checkpoints_beside_loses_no_answered_event() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let (store, writer) = Store::open(beside_options(&live)).unwrap();
    let mut answered = Vec::new();
    for round in 0..6 {
        answered.extend(waves(&store, 4, 48).await.into_iter().map(|(id, a)| {
            // Unique ids per round: `w{n}` repeats.
            (format!("{round}/{id}"), a)
        }));
        // kill -9 now: the file as redb last made it durable, and the log.
        let image = dir.path().join(format!("image{round}"));
        crash_image(&live, &image, true);
        let (crashed, crashed_writer) = Store::open(beside_options(&image)).unwrap();
        for (key, answer) in &answered {
            let id = match answer {
                Ingested::New { id } | Ingested::Duplicate { id } => id,
            };
            let seq = crashed.parse_public_id(id).unwrap();
            let event_id = key.split_once('/').unwrap().1;
            let found = crashed
                .get(seq)
                .unwrap()
                .unwrap_or_else(|| panic!("{key} lost"));
            assert_eq!(found.record.event_id, event_id, "{key}");
        }
        index::check(&crashed.db().unwrap().begin_read().unwrap()).unwrap();
        close(crashed, crashed_writer).await;
    }
    close(store, writer).await;
}
