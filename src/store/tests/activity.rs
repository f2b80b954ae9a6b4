//! Each destination's minutes: every attempt recorded counts in its
//! route's minute as attempted, failed unless it delivered, and in its
//! latency bucket unless interrupted; delivered and dead-lettered stay
//! counted by source.

use std::collections::HashMap;

use super::super::index::{LATENCY_BOUNDS_MS, MinuteKind};
use super::super::*;
use super::support::*;

#[tokio::test]
async fn each_attempt_counts_in_its_destinations_minute_with_its_latency_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let minute = 1_000 * 60_000;
    let seq = new_seq(&store, "shop", "e1", routes(&["shop.app", "shop.crm"])).await;
    // To shop.app: a 503 after 30 ms, then delivered after 300 ms.
    store.claim(seq, minute).await.unwrap().unwrap();
    let retry = schema::Attempt {
        started_ms: minute + 1,
        latency_ms: 30,
        ..attempt(schema::AttemptClass::RetryableStatus, Some(503))
    };
    let next = Next::RetryAt { due_ms: minute + 2 };
    store
        .finish(Finish {
            seq,
            attempt: retry,
            next,
        })
        .await
        .unwrap();
    store.claim(seq, minute + 3).await.unwrap().unwrap();
    let delivered = schema::Attempt {
        started_ms: minute + 3,
        latency_ms: 300,
        ..attempt(schema::AttemptClass::Delivered, Some(200))
    };
    let next = Next::Delivered { at_ms: minute + 4 };
    store
        .finish(Finish {
            seq,
            attempt: delivered,
            next,
        })
        .await
        .unwrap();
    // To shop.crm: 45 s without an answer, in the next minute.
    store
        .claim(seq + 1, minute + 60_000)
        .await
        .unwrap()
        .unwrap();
    let timeout = schema::Attempt {
        started_ms: minute + 60_000,
        latency_ms: 45_000,
        ..attempt(schema::AttemptClass::Timeout, None)
    };
    let next = Next::RetryAt {
        due_ms: minute + 120_000,
    };
    store
        .finish(Finish {
            seq: seq + 1,
            attempt: timeout,
            next,
        })
        .await
        .unwrap();

    let rows: HashMap<(u64, String, MinuteKind), u64> = store
        .activity(0)
        .unwrap()
        .into_iter()
        .map(|(m, route, kind, n)| ((m, route, kind), n))
        .collect();
    let m = minute / 60_000;
    let app = |kind| rows.get(&(m, "shop.app".to_owned(), kind)).copied();
    assert_eq!(app(MinuteKind::Attempted), Some(2));
    assert_eq!(app(MinuteKind::Failed), Some(1));
    // 30 ms: at most 50; 300 ms: at most 500.
    assert_eq!(LATENCY_BOUNDS_MS[2], 50);
    assert_eq!(app(MinuteKind::Latency(2)), Some(1));
    assert_eq!(LATENCY_BOUNDS_MS[5], 500);
    assert_eq!(app(MinuteKind::Latency(5)), Some(1));
    // Delivered is by source, as before.
    assert_eq!(
        rows.get(&(m, "shop".to_owned(), MinuteKind::Delivered)),
        Some(&1)
    );
    let crm = |kind| rows.get(&(m + 1, "shop.crm".to_owned(), kind)).copied();
    assert_eq!(crm(MinuteKind::Attempted), Some(1));
    assert_eq!(crm(MinuteKind::Failed), Some(1));
    // Above the last bound: the last bucket.
    assert_eq!(
        crm(MinuteKind::Latency(LATENCY_BOUNDS_MS.len() as u8)),
        Some(1)
    );
    close(store, writer).await;
}

#[test]
fn a_latency_falls_in_the_first_bucket_whose_bound_it_does_not_pass() {
    let bucket = |ms| match MinuteKind::latency(ms) {
        MinuteKind::Latency(b) => usize::from(b),
        other => panic!("{other:?}"),
    };
    assert_eq!(bucket(0), 0);
    assert_eq!(bucket(10), 0);
    assert_eq!(bucket(11), 1);
    assert_eq!(bucket(30_000), LATENCY_BOUNDS_MS.len() - 1);
    assert_eq!(bucket(30_001), LATENCY_BOUNDS_MS.len());
    for b in 0..=LATENCY_BOUNDS_MS.len() as u8 {
        let kind = MinuteKind::Latency(b);
        assert_eq!(MinuteKind::from_code(kind.code()), Some(kind));
    }
    for kind in MinuteKind::ALL {
        assert_eq!(MinuteKind::from_code(kind.code()), Some(kind));
    }
    assert_eq!(
        MinuteKind::from_code(16 + LATENCY_BOUNDS_MS.len() as u8 + 1),
        None
    );
}
