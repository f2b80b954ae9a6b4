//! The pack in a real store: records read back through every path, a swept
//! event's chunks are given back, an erased payload leaves only zeros.

use std::time::{Duration, SystemTime};

use redb::{ReadableDatabase, ReadableTable};

use super::super::*;
use super::support::*;

/// A body of `len` hex digits that differs for each `n` and that LZ4 does
/// not shrink, so its bytes are in the pack as they were sent.
fn body(n: u64, len: usize) -> String {
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect()
}

/// Event `n`'s body length: 300 B to 5 KB, so records sit inside a chunk,
/// across two, across three.
fn size(n: u64) -> usize {
    300 + (n as usize * 613) % 4_700
}

/// The pack's stream, end to end, and how many chunks hold it.
fn pack_bytes(store: &Store) -> (Vec<u8>, usize) {
    let db = store.db().unwrap();
    let txn = db.begin_read().unwrap();
    let pack = txn.open_table(schema::PACK).unwrap();
    let mut all = Vec::new();
    let mut chunks = 0;
    for row in pack.iter().unwrap() {
        // Past each chunk's count of records: the stream itself.
        all.extend_from_slice(&row.unwrap().1.value()[4..]);
        chunks += 1;
    }
    (all, chunks)
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn swept_events_give_their_chunks_back_and_an_erased_payload_is_only_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        payload_ttl: Duration::from_millis(DAY),
        dlq_ttl: Duration::from_millis(DAY),
        ..options(dir.path())
    };
    let (store, writer) = Store::open(options.clone()).unwrap();
    let mut seqs = Vec::new();
    for n in 0..40u64 {
        let body = body(n, size(n));
        let e = event_with_body("s", &format!("e{n}"), body);
        let Ingested::New { id } = store.ingest(e, Initial::Deliver).await.unwrap() else {
            panic!("a duplicate")
        };
        seqs.push(store.parse_public_id(&id).unwrap());
    }
    let (bytes, chunks) = pack_bytes(&store);
    assert!(chunks > 20, "{chunks} chunks");
    for n in 0..40u64 {
        let e = store.get(seqs[n as usize]).unwrap().unwrap();
        assert_eq!(e.record.body, body(n, e.record.body.len()).as_bytes());
        assert!(holds(&bytes, &body(n, 200)), "event {n}'s body is packed");
    }

    let now = crate::clock::unix_ms(SystemTime::now());
    let note = "customer asked".to_owned();
    store
        .change(seqs[7], Change::Erase { note }, now)
        .await
        .unwrap()
        .unwrap();
    let (bytes, _) = pack_bytes(&store);
    // Its chunks shared with events 6 and 8 stay: no 32 bytes of it in them.
    let erased = body(7, size(7));
    for at in (0..erased.len() - 32).step_by(16) {
        assert!(!holds(&bytes, &erased[at..at + 32]), "erased bytes at {at}");
    }
    for n in [6u64, 8] {
        assert!(holds(&bytes, &body(n, 200)));
        let e = store.get(seqs[n as usize]).unwrap().unwrap();
        assert_eq!(e.record.body, body(n, e.record.body.len()).as_bytes());
    }
    assert!(store.get(seqs[7]).unwrap().unwrap().record.body.is_empty());
    let listed = store.scan(0, 100).unwrap();
    assert_eq!(listed.len(), 40);

    for (n, &seq) in seqs.iter().enumerate() {
        if n != 7 {
            deliver(&store, seq, now).await;
        }
    }
    while store.sweep(now + 3 * DAY, 7).await.unwrap().more {}
    assert_eq!(store.count().unwrap(), 0);
    let (_, chunks) = pack_bytes(&store);
    assert_eq!(chunks, 1, "only the last chunk stays");
    close(store, writer).await;

    // The stream goes on after a reopen.
    let (store, writer) = Store::open(options).unwrap();
    let seq = new_seq(&store, "s", "later", Initial::Deliver).await;
    assert_eq!(store.get(seq).unwrap().unwrap().record.event_id, "later");
    assert_eq!(pack_bytes(&store).1, 1);
    {
        let db = store.db().unwrap();
        index::check(&db.begin_read().unwrap()).unwrap();
    }
    close(store, writer).await;
}
