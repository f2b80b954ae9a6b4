//! The audit trail in the store: records and outcomes through the writer,
//! read newest first by filter and cursor, replayed from the log after a
//! crash, kept through a backup, and swept after `audit_ttl` in bounded
//! steps, the oldest first.

use std::time::Duration;

use super::super::*;
use super::recover::crash_image;
use super::support::*;
use crate::words::{AuditAction, Role};

const DAY: u64 = 86_400_000;

fn record(at_ms: u64, person: &str, action: AuditAction, note: &str) -> AuditRecord {
    AuditRecord {
        at_ms,
        person: person.into(),
        role: Role::Operator,
        action,
        target: Some(format!("evt_{at_ms}")),
        filter: vec![("destination".into(), "app".into())],
        dry_run: false,
        note: Some(note.into()),
        outcome: None,
    }
}

fn answered(status: u16, at_ms: u64) -> AuditOutcome {
    AuditOutcome {
        status,
        at_ms,
        error: (status >= 400).then(|| "refused".to_owned()),
        matched: None,
        changed: None,
    }
}

fn ids(page: &AuditPage) -> Vec<u64> {
    page.entries.iter().map(|e| e.id).collect()
}

/// Ten records by two people, every other with its outcome: each read
/// returns them newest first, filtered and paged, and a crash image (the
/// database file as of its last checkpoint and the log) holds the same.
#[tokio::test]
async fn records_read_newest_first_by_filter_and_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let never = StoreOptions {
        checkpoint_every: Duration::from_secs(3600),
        ..options(&live)
    };
    let (store, writer) = Store::open(never).unwrap();
    assert_eq!(
        store.audit_page(&AuditFilter::default(), None, 50).unwrap(),
        AuditPage::default(),
        "a store nothing was recorded in"
    );
    for i in 1..=10u64 {
        let (person, action) = if i % 2 == 0 {
            ("otto", AuditAction::Ignore)
        } else {
            ("ada", AuditAction::Pause)
        };
        let id = store
            .audit(record(i * 1000, person, action, &format!("n{i}")))
            .await
            .unwrap();
        assert_eq!(id, i, "ids count up from 1");
        if i % 2 == 0 {
            store
                .audit_outcome(id, answered(200, i * 1000 + 5))
                .await
                .unwrap();
        }
    }
    let all = store.audit_page(&AuditFilter::default(), None, 50).unwrap();
    assert_eq!(ids(&all), (1..=10).rev().collect::<Vec<_>>());
    assert_eq!(all.next, None);
    assert_eq!(all.entries[0].record.outcome, Some(answered(200, 10_005)));
    assert_eq!(all.entries[1].record.outcome, None, "never answered");
    assert_eq!(all.entries[0].record.note.as_deref(), Some("n10"));

    let page = store.audit_page(&AuditFilter::default(), None, 4).unwrap();
    assert_eq!((ids(&page), page.next), (vec![10, 9, 8, 7], Some(7)));
    let rest = store
        .audit_page(&AuditFilter::default(), page.next, 4)
        .unwrap();
    assert_eq!(ids(&rest), vec![6, 5, 4, 3]);

    let otto = AuditFilter {
        person: Some("otto".into()),
        ..AuditFilter::default()
    };
    assert_eq!(
        ids(&store.audit_page(&otto, None, 50).unwrap()),
        vec![10, 8, 6, 4, 2]
    );
    let pauses = AuditFilter {
        action: Some(AuditAction::Pause),
        from_ms: Some(3000),
        to_ms: Some(9000),
        ..AuditFilter::default()
    };
    assert_eq!(
        ids(&store.audit_page(&pauses, None, 50).unwrap()),
        vec![7, 5, 3]
    );

    let image = dir.path().join("image");
    crash_image(&live, &image, true);
    close(store, writer).await;
    let (crashed, writer) = Store::open(options(&image)).unwrap();
    let replayed = crashed
        .audit_page(&AuditFilter::default(), None, 50)
        .unwrap();
    assert_eq!(replayed, all, "the log replays every record and outcome");
    // Numbering goes on after the replayed records.
    let next = crashed
        .audit(record(11_000, "ada", AuditAction::Sweep, "n11"))
        .await
        .unwrap();
    assert_eq!(next, 11);
    let copy = dir.path().join("backup.redb");
    let copied = crashed.clone();
    let path = copy.clone();
    tokio::task::spawn_blocking(move || copied.backup_to(&path))
        .await
        .unwrap()
        .unwrap();
    close(crashed, writer).await;
    let restored = dir.path().join("restored");
    std::fs::create_dir_all(&restored).unwrap();
    std::fs::copy(&copy, restored.join(DB_FILE)).unwrap();
    let (store, writer) = Store::open(options(&restored)).unwrap();
    let page = store.audit_page(&AuditFilter::default(), None, 50).unwrap();
    assert_eq!(
        ids(&page),
        (1..=11).rev().collect::<Vec<_>>(),
        "a backup holds the trail"
    );
    close(store, writer).await;
}

/// Records past `audit_ttl` go in bounded steps, the oldest first, and
/// nothing younger; an outcome for a swept record writes nothing.
#[tokio::test]
async fn the_sweep_takes_records_past_their_retention_in_bounded_steps() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        audit_ttl: Duration::from_millis(30 * DAY),
        ..options(dir.path())
    };
    let (store, writer) = Store::open(options).unwrap();
    for day in 1..=6u64 {
        store
            .audit(record(day * DAY, "ada", AuditAction::Replay, "old"))
            .await
            .unwrap();
    }
    // Day 34.5: the records of days 1–4 are past 30 days.
    let now = 34 * DAY + DAY / 2;
    let first = store.sweep(now, 3).await.unwrap();
    assert_eq!((first.audit, first.more), (3, true));
    let second = store.sweep(now, 3).await.unwrap();
    assert_eq!((second.audit, second.more), (1, false));
    let left = store.audit_page(&AuditFilter::default(), None, 50).unwrap();
    assert_eq!(ids(&left), vec![6, 5]);
    store.audit_outcome(1, answered(200, now)).await.unwrap();
    let after = store.audit_page(&AuditFilter::default(), None, 50).unwrap();
    assert_eq!(after, left, "an outcome for a swept record writes nothing");
    close(store, writer).await;
}
