//! Lists and searches: every filter combination pages through exactly its
//! events; a search within a budget resumes from its cursor.

use std::time::Duration;

use super::super::*;
use super::support::*;

/// Pages of every filter combination, walked with a small page, return
/// exactly the matching events, newest first, each once.
#[tokio::test]
async fn every_filter_combination_pages_through_exactly_the_matching_events() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    let mut received = Vec::new();
    for n in 0..240u64 {
        let source = format!("s{}", n % 2);
        let event = event_of_type(&source, &format!("e{n}"), &format!("t{}", n % 3));
        received.push(event.received_at_ms());
        let initial = if n % 5 == 0 {
            Initial::Hold
        } else {
            Initial::Deliver
        };
        let Ingested::New { id } = store.ingest(event, initial).await.unwrap() else {
            panic!("e{n} was a duplicate")
        };
        let seq = store.parse_public_id(&id).unwrap();
        let held = n % 5 == 0;
        match n % 7 {
            1 | 2 if !held => deliver(&store, seq, n).await,
            3 if !held => kill(&store, seq, n).await,
            4 => {
                let note = "test".to_owned();
                let _ = store.change(seq, Change::Ignore { note }, n).await.unwrap();
            }
            _ => {}
        }
    }
    let all = store.scan(0, usize::MAX).unwrap();
    let middle = received[120];
    let sources = [None, Some("s0"), Some("s1"), Some("nope")];
    let types = [None, Some("t0"), Some("t2"), Some("t9")];
    let times = [
        (None, None),
        (Some(middle), None),
        (None, Some(middle)),
        (Some(received[40]), Some(middle)),
    ];
    let mut statuses = vec![None];
    statuses.extend(schema::Status::ALL.map(Some));
    let mut checked = 0;
    for source in sources {
        for status in &statuses {
            for event_type in types {
                for (from_ms, to_ms) in times {
                    let filter = EventFilter {
                        source: source.map(str::to_owned),
                        destination: None,
                        status: *status,
                        event_type: event_type.map(str::to_owned),
                        event_id: None,
                        from_ms,
                        to_ms,
                    };
                    let mut want: Vec<u64> = all
                        .iter()
                        .filter(|e| filter.matches(&e.record, &e.state))
                        .map(|e| e.seq)
                        .collect();
                    want.reverse();
                    let mut got = Vec::new();
                    let mut cursor = None;
                    loop {
                        let (page, next) = store.list(&filter, cursor, 7).unwrap();
                        assert!(page.len() <= 7);
                        got.extend(page.iter().map(|e| e.seq));
                        match next {
                            Some(next) => cursor = Some(next),
                            None => break,
                        }
                    }
                    assert_eq!(got, want, "{filter:?}");
                    checked += want.len();
                }
            }
        }
    }
    assert!(
        checked > 1_000,
        "the combinations matched too little: {checked}"
    );
    // By provider event id: with and without the source, and not found.
    for (source, event_id, found) in [
        (Some("s1"), "e7", true),
        (None, "e8", true),
        (Some("s1"), "e8", false),
        (None, "e999", false),
    ] {
        let filter = EventFilter {
            source: source.map(str::to_owned),
            event_id: Some(event_id.to_owned()),
            ..EventFilter::default()
        };
        let (page, next) = store.list(&filter, None, 10).unwrap();
        assert_eq!(next, None);
        assert_eq!(page.len(), usize::from(found), "{filter:?}");
        assert!(page.iter().all(|e| e.record.event_id == event_id));
    }
    close(store, writer).await;
}

/// Search finds exactly the payload matches within the filter, newest
/// first; a small budget stops early with a cursor and how far back it got,
/// and following the cursors finds the rest.
#[tokio::test]
async fn search_matches_payloads_within_a_budget_and_resumes_from_its_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(options(dir.path())).unwrap();
    for n in 0..60u64 {
        let source = format!("s{}", n % 2);
        let event = event_of_type(&source, &format!("e{n}"), &format!("t{}", n % 3));
        store.ingest(event, Initial::Hold).await.unwrap();
    }
    let all = store.scan(0, usize::MAX).unwrap();
    let cases = [
        (
            EventFilter::default(),
            PayloadMatch {
                text: Some("\"e1".into()),
                pointer: None,
                seen_as: None,
            },
        ),
        (
            EventFilter {
                source: Some("s1".into()),
                ..EventFilter::default()
            },
            PayloadMatch {
                text: Some("\"e1".into()),
                pointer: None,
                seen_as: None,
            },
        ),
        (
            EventFilter::default(),
            PayloadMatch {
                text: None,
                pointer: Some(("/n".into(), "e42".into())),
                seen_as: None,
            },
        ),
        (
            EventFilter {
                event_type: Some("t0".into()),
                ..EventFilter::default()
            },
            PayloadMatch {
                text: Some("e".into()),
                pointer: Some(("/type".into(), "t0".into())),
                seen_as: None,
            },
        ),
        (
            EventFilter::default(),
            PayloadMatch {
                text: None,
                pointer: Some(("/n".into(), "e".into())),
                seen_as: None,
            },
        ),
    ];
    // Written out, so that the matching itself is pinned, not only the walk.
    let expected = [11, 6, 1, 20, 0];
    for ((filter, payload), count) in cases.into_iter().zip(expected) {
        let mut want: Vec<u64> = all
            .iter()
            .filter(|e| filter.matches(&e.record, &e.state))
            .filter(|e| payload.matcher().matches(&e.record.body))
            .map(|e| e.seq)
            .collect();
        want.reverse();
        assert_eq!(want.len(), count, "{filter:?} {payload:?}");
        // Everything in one call.
        let budget = Budget {
            events: 1_000,
            time: Duration::from_secs(60),
        };
        let page = store.search(&filter, &payload, None, 100, budget).unwrap();
        assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            want,
            "{payload:?}"
        );
        assert_eq!(page.cursor, None);
        // Seven payloads per call: resumed until done, nothing skipped or repeated.
        let budget = Budget {
            events: 7,
            time: Duration::from_secs(60),
        };
        let (mut got, mut cursor, mut calls) = (Vec::new(), None, 0);
        loop {
            let page = store
                .search(&filter, &payload, cursor, 100, budget)
                .unwrap();
            assert!(page.examined <= 7);
            if let (Some(back), Some(last)) = (page.scanned_back_to_ms, page.events.last()) {
                assert!(back <= last.record.received_at_ms);
            }
            got.extend(page.events.iter().map(|e| e.seq));
            calls += 1;
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(got, want, "{payload:?} in {calls} calls");
        assert!(calls > 1);
    }
    close(store, writer).await;
}
