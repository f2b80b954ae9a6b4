//! The pack on a real redb file: records of every size read back whole,
//! chunks fill their pages, and removing records gives chunks back.

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};

use super::super::schema::PACK;
use super::*;

fn db() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(dir.path().join("pack.redb")).unwrap();
    (dir, db)
}

/// A record of `len` bytes that differs from every other one.
fn record(n: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (n * 31 + i * 7) as u8 | 1).collect()
}

fn append_all(db: &Database, records: &[Vec<u8>]) -> Vec<Place> {
    let txn = db.begin_write().unwrap();
    let mut places = Vec::new();
    {
        let mut pack = txn.open_table(PACK).unwrap();
        let mut packer = Packer::default();
        for r in records {
            places.push(packer.append(&mut pack, r).unwrap());
        }
    }
    txn.commit().unwrap();
    places
}

fn read_back(db: &Database, place: Place) -> Result<Vec<u8>, DecodeError> {
    let txn = db.begin_read().unwrap();
    let pack = txn.open_table(PACK).unwrap();
    let mut buf = Vec::new();
    match read::<Error>(&pack, place, &mut buf) {
        Ok(()) => Ok(buf),
        Err(Error::Decode(e)) => Err(e),
        Err(Error::Storage(e)) => panic!("{e}"),
    }
}

#[derive(Debug)]
enum Error {
    Storage(StorageError),
    Decode(DecodeError),
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        Error::Storage(e)
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        Error::Decode(e)
    }
}

fn chunk_numbers(db: &Database) -> Vec<u64> {
    let txn = db.begin_read().unwrap();
    let pack = txn.open_table(PACK).unwrap();
    pack.iter().unwrap().map(|r| r.unwrap().0.value()).collect()
}

const SIZES: [usize; 9] = [1, 1_000, 1_200, 4_075, 4_076, 4_077, 10_000, 300, 9_000];

#[test]
fn records_of_every_size_read_back_whole_and_end_to_end() {
    let (_dir, db) = db();
    let records: Vec<_> = SIZES
        .iter()
        .enumerate()
        .map(|(n, &l)| record(n, l))
        .collect();
    let places = append_all(&db, &records);
    // A second transaction goes on where the first ended.
    let more: Vec<_> = (0..50).map(|n| record(100 + n, 700 + n * 13)).collect();
    let more_places = append_all(&db, &more);
    let mut at = 0;
    for (r, p) in records
        .iter()
        .zip(&places)
        .chain(more.iter().zip(&more_places))
    {
        assert_eq!(p.at, at, "records are end to end");
        assert_eq!(p.len as usize, r.len());
        assert_eq!(&read_back(&db, *p).unwrap(), r);
        at += r.len() as u64;
    }
    // Every chunk but the last holds exactly a page's worth.
    let txn = db.begin_read().unwrap();
    let pack = txn.open_table(PACK).unwrap();
    let rows: Vec<_> = pack
        .iter()
        .unwrap()
        .map(|r| r.unwrap().1.value().len())
        .collect();
    assert_eq!(rows.len() as u64, at.div_ceil(DATA));
    assert!(rows[..rows.len() - 1].iter().all(|&l| l == CHUNK));
}

#[test]
fn a_full_chunk_fills_its_page() {
    let (_dir, db) = db();
    // 2,000 records of 1,100 bytes and one of 1,040: exactly 540 chunks.
    let mut records: Vec<_> = (0..2_000).map(|n| record(n, 1_100)).collect();
    records.push(record(2_000, 540 * DATA as usize - 2_200_000));
    append_all(&db, &records);
    let txn = db.begin_read().unwrap();
    let pack = txn.open_table(PACK).unwrap();
    let stats = pack.stats().unwrap();
    // A leaf is its pair and 8 bytes of header and offset: not a byte of
    // its page is left, and no chunk needs two.
    let leaves = stats.leaf_pages() as i64;
    let slack = leaves * 4096 - stats.stored_bytes() as i64 - 8 * leaves;
    assert_eq!((stats.leaf_pages(), slack), (540, 0), "{stats:?}");
}

#[test]
fn removed_records_give_their_chunks_back_in_any_order_but_the_last() {
    let (_dir, db) = db();
    let records: Vec<_> = (0..40)
        .map(|n| record(n, 900 + (n * 337) % 3_000))
        .collect();
    let places = append_all(&db, &records);
    let last = *chunk_numbers(&db).last().unwrap();
    // Every other record first: chunks shared with a kept one stay.
    let mut order: Vec<usize> = (0..40).step_by(2).chain((1..40).step_by(2)).collect();
    order.swap(3, 17);
    let mut removed = vec![false; records.len()];
    for (i, &n) in order.iter().enumerate() {
        let txn = db.begin_write().unwrap();
        {
            let mut pack = txn.open_table(PACK).unwrap();
            Packer::default()
                .remove(&mut pack, places[n], false)
                .unwrap();
        }
        txn.commit().unwrap();
        removed[n] = true;
        // Exactly the chunks a kept record has bytes in remain, and the last.
        let mut wanted: Vec<u64> = (0..records.len())
            .filter(|&k| !removed[k])
            .flat_map(|k| chunks(places[k]))
            .chain([last])
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        assert_eq!(chunk_numbers(&db), wanted, "after {} removals", i + 1);
        for k in (0..records.len()).filter(|&k| !removed[k]) {
            assert_eq!(read_back(&db, places[k]).unwrap(), records[k]);
        }
    }
    // Appending after everything went continues the stream.
    let next = append_all(&db, &[record(99, 5_000)]);
    let end = places.last().map(|p| p.at + u64::from(p.len)).unwrap();
    assert_eq!(next[0].at, end);
    assert_eq!(read_back(&db, next[0]).unwrap(), record(99, 5_000));
}

#[test]
fn an_erased_record_leaves_zeros_and_its_neighbours_whole() {
    let (_dir, db) = db();
    let records: Vec<_> = (0..3).map(|n| record(n, 3_000)).collect();
    let places = append_all(&db, &records);
    let txn = db.begin_write().unwrap();
    {
        let mut pack = txn.open_table(PACK).unwrap();
        Packer::default()
            .remove(&mut pack, places[1], true)
            .unwrap();
    }
    txn.commit().unwrap();
    assert_eq!(read_back(&db, places[0]).unwrap(), records[0]);
    assert_eq!(read_back(&db, places[2]).unwrap(), records[2]);
    // Its bytes are zeros now in every chunk that stayed.
    assert_eq!(read_back(&db, places[1]).unwrap(), vec![0; 3_000]);
}

#[test]
fn a_missing_chunk_is_a_corrupt_record_not_a_panic() {
    let (_dir, db) = db();
    let places = append_all(&db, &[record(0, 6_000), record(1, 6_000)]);
    let txn = db.begin_write().unwrap();
    txn.open_table(PACK).unwrap().remove(1).unwrap();
    txn.commit().unwrap();
    assert!(matches!(
        read_back(&db, places[0]),
        Err(DecodeError::Unpacked { at: 4076 })
    ));
    assert!(matches!(
        read_back(&db, places[1]),
        Err(DecodeError::Unpacked { .. })
    ));
    let beyond = Place {
        at: 1 << 40,
        len: 10,
    };
    assert!(read_back(&db, beyond).is_err());
}
