//! The format is pinned byte for byte: every row and every kind of log
//! entry encodes to exactly the bytes the build before versioned records
//! wrote (captured from commit 9cb7a00 by encoding these same values with
//! its serde-derived domain types), and decodes back to the same value.
//! A change that moves a byte fails here before it reaches a disk.

use std::borrow::Cow;

use super::log::{self, FrameError, LOG_FORMAT};
use super::row::{self, DecodeError, EventRecordRef};
use crate::store::entry::Entry;
use crate::store::schema::{
    Attempt, AttemptClass, DeadLetter, EventRecord, EventState, Note, Status,
};
use crate::store::{Change, Finish, Initial, KeyOp, KeyRecord, KeyState, KeyWrite, Next, Route};

fn bytes(hex_text: &str) -> Vec<u8> {
    hex::decode(hex_text).expect("hex")
}

fn attempt() -> Attempt {
    Attempt {
        started_ms: 1_700_000_000_123,
        latency_ms: 42,
        class: AttemptClass::RetryableStatus,
        status: Some(503),
        error: Some("HTTP 503".into()),
        response_snippet: Some("busy".into()),
        round: 0,
        first_byte_ms: None,
        request_headers: Vec::new(),
        response_headers: Vec::new(),
    }
}

fn state() -> EventState {
    EventState {
        status: Status::Dead,
        source: "shop.audit".into(),
        event_type: Some("order.created".into()),
        attempts: 3,
        total_attempts: 7,
        round_started_ms: 1_700_000_000_000,
        due_ms: Some(1_700_000_100_000),
        ordering_key: Some("cus_1".into()),
        delivered_ms: Some(1_700_000_000_500),
        dead: Some(DeadLetter {
            reason: "max attempts".into(),
            at_ms: 1_700_000_000_900,
            last_status: Some(500),
        }),
        note: Some(Note {
            text: "why".into(),
            at_ms: 1_700_000_001_000,
        }),
        replays: 2,
        expires_ms: Some(1_800_000_000_000),
    }
}

#[test]
fn rows_are_the_bytes_the_build_before_wrote() {
    let mut out = Vec::new();
    row::encode_state(&state(), &mut out);
    let want = bytes(
        "01030a73686f702e6175646974010d6f726465722e63726561746564030780d095ffbc3101a0dd9bffbc3101\
         056375735f3101f4d395ffbc31010c6d617820617474656d70747384d795ffbc3101f4030103776879e8d795\
         ffbc31020180a0f1c2b134",
    );
    assert_eq!(out, want);
    assert_eq!(row::decode_state(&want).unwrap(), state());

    let want = bytes("01fbd095ffbc312a0101f70301084854545020353033010462757379");
    row::encode_attempt_v1(&attempt(), &mut out);
    assert_eq!(out, want);
    assert_eq!(row::decode_attempt(&want).unwrap(), attempt());

    let note = Note {
        text: "GDPR request".into(),
        at_ms: 1_700_000_002_000,
    };
    let want = bytes("010c474450522072657175657374d0df95ffbc31");
    row::encode_note(&note, &mut out);
    assert_eq!(out, want);
    assert_eq!(row::decode_note(&want).unwrap(), note);
}

#[test]
fn every_status_and_attempt_class_keeps_its_byte() {
    let mut out = Vec::new();
    for (status, byte) in Status::ALL.into_iter().zip(0u8..) {
        let s = EventState { status, ..state() };
        row::encode_state(&s, &mut out);
        assert_eq!(out[..2], [1, byte], "{status:?}");
        assert_eq!(row::decode_state(&out).unwrap(), s);
    }
    let classes = [
        AttemptClass::Delivered,
        AttemptClass::RetryableStatus,
        AttemptClass::RejectedStatus,
        AttemptClass::Timeout,
        AttemptClass::Connect,
        AttemptClass::Transport,
        AttemptClass::Interrupted,
    ];
    for (class, byte) in classes.into_iter().zip(0u8..) {
        let a = Attempt { class, ..attempt() };
        row::encode_attempt(&a, &mut out);
        // The version, started_ms (a 6-byte varint) and latency_ms (1) first.
        assert_eq!(out[8], byte, "{class:?}");
        assert_eq!(row::decode_attempt(&out).unwrap(), a);
    }
}

/// Every kind of entry, with the bytes format 0 gave it.
fn entries() -> Vec<(Entry<'static>, &'static str)> {
    let finish = |seq, attempt, next| Entry::Finish(Cow::Owned(Finish { seq, attempt, next }));
    let change = |change, now_ms| Entry::Change {
        seq: 300,
        change: Cow::Owned(change),
        now_ms,
    };
    let ingest = |seq, initial, record: &[u8]| Entry::Ingest {
        seq,
        initial: Cow::Owned(initial),
        record: Cow::Owned(record.to_vec()),
    };
    let routes = Initial::Routes(vec![
        Route {
            destination: "shop".into(),
            ordering_key: None,
        },
        Route {
            destination: "shop.audit".into(),
            ordering_key: Some("cus_1".into()),
        },
    ]);
    let interrupted = Attempt {
        class: AttemptClass::Interrupted,
        status: None,
        error: None,
        response_snippet: None,
        ..attempt()
    };
    vec![
        (
            ingest(300, routes, &[1, 0, 9, 9]),
            "00ac0204020473686f70000a73686f702e617564697401056375735f310401000909",
        ),
        (ingest(301, Initial::Deliver, &[1]), "00ad02000101"),
        (
            ingest(302, Initial::Ordered("k".into()), &[]),
            "00ae0201016b00",
        ),
        (ingest(303, Initial::Hold, &[]), "00af020200"),
        (ingest(304, Initial::Filtered, &[]), "00b0020300"),
        (
            Entry::Duplicate {
                received_ms: 1_700_000_000_777,
                source: "shop".into(),
            },
            "0189d695ffbc310473686f70",
        ),
        (
            Entry::Claim {
                seq: 300,
                started_ms: 1_700_000_000_888,
            },
            "02ac02f8d695ffbc31",
        ),
        (
            finish(300, attempt(), Next::Delivered { at_ms: 5 }),
            "03ac02fbd095ffbc312a0101f703010848545450203530330104627573790005",
        ),
        (
            finish(301, attempt(), Next::RetryAt { due_ms: 6 }),
            "03ad02fbd095ffbc312a0101f703010848545450203530330104627573790106",
        ),
        (
            finish(
                302,
                interrupted,
                Next::Dead {
                    reason: "gone".into(),
                    at_ms: 7,
                    release_key: true,
                },
            ),
            "03ae02fbd095ffbc312a060000000204676f6e650701",
        ),
        (change(Change::Replay, 8), "04ac020008"),
        (
            change(Change::Ignore { note: "n".into() }, 9),
            "04ac0201016e09",
        ),
        (
            change(Change::Erase { note: "e".into() }, 10),
            "04ac020201650a",
        ),
        (
            change(
                Change::ReplayTo {
                    destination: "shop.audit".into(),
                },
                11,
            ),
            "04ac02030a73686f702e61756469740b",
        ),
        (
            Entry::Sweep {
                now_ms: 12,
                limit: 1000,
            },
            "050ce807",
        ),
        (
            Entry::SetMeta {
                key: "paused:shop".into(),
                value: Cow::Owned(vec![1]),
            },
            "060b7061757365643a73686f700101",
        ),
    ]
}

fn payload(format_byte: Option<u8>, entries: &[(Entry<'_>, &str)]) -> Vec<u8> {
    let mut out: Vec<u8> = format_byte.into_iter().collect();
    for (_, hex_text) in entries {
        out.extend(bytes(hex_text));
    }
    out
}

fn debug(entries: &[Entry<'_>]) -> Vec<String> {
    entries.iter().map(|e| format!("{e:?}")).collect()
}

/// Format 7 (release 0.2.0) writes each entry format 1 has but a finish as
/// exactly format 0's bytes, and a finish as format 0's bytes followed by
/// what format 6 added to its attempt (here round 0, no first byte, no
/// headers). Format 6 (release 0.1.0) wrote each but a finish as variant 0
/// (format 5's) of variant 0 (format 4's) of variant 0 (format 3's) of
/// variant 0 (format 2's) of variant 0 (format 1's) followed by format 0's
/// bytes, and a finish as variant 1 with the same additions: such a log
/// reads the same. These goldens pin all of them.
#[test]
fn every_entry_is_written_as_format_7_with_the_bytes_format_0_gave_it() {
    let all = entries();
    let mut written = Vec::new();
    log::begin(&mut written);
    for (entry, _) in &all {
        log::push(&mut written, entry);
    }
    let mut want_bytes = vec![log::FORMAT_BYTE];
    let mut format_6 = vec![0x46];
    for (entry, hex_text) in &all {
        let old = bytes(hex_text);
        want_bytes.extend(&old);
        if matches!(entry, Entry::Finish(_)) {
            want_bytes.extend([0, 0, 0, 0]);
            format_6.push(1);
            format_6.extend(&old[1..]);
            format_6.extend([0, 0, 0, 0]);
        } else {
            format_6.extend([0, 0, 0, 0, 0]);
            format_6.extend(old);
        }
    }
    assert_eq!(written[0], 0x47);
    assert_eq!(written, want_bytes);
    let want: Vec<String> = all.iter().map(|(e, _)| format!("{e:?}")).collect();
    assert_eq!(debug(&log::entries(7, &written).unwrap()), want);
    assert_eq!(debug(&log::entries(7, &format_6).unwrap()), want);
    let read = log::entries(7, &format_6).unwrap();
    assert_eq!(log::older_payload(6, &read).unwrap(), format_6);
    // A build of format 0 reads the format byte as an entry kind it has not.
    assert!(postcard::take_from_bytes::<super::v1::EntryV1<'_>>(&written).is_err());
}

#[test]
fn payloads_of_format_0_1_and_2_read_as_the_same_entries() {
    let all = entries();
    let want: Vec<String> = all.iter().map(|(e, _)| format!("{e:?}")).collect();
    let mut format_2 = vec![0x42];
    for (_, hex_text) in &all {
        format_2.push(0);
        format_2.extend(bytes(hex_text));
    }
    assert_eq!(debug(&log::entries(7, &format_2).unwrap()), want);
    let entries = log::entries(7, &format_2).unwrap();
    assert_eq!(log::older_payload(2, &entries).unwrap(), format_2);
    for format_byte in [None, Some(0x41)] {
        let old = payload(format_byte, &all);
        assert_eq!(
            debug(&log::entries(7, &old).unwrap()),
            want,
            "{format_byte:?}"
        );
        let entries = log::entries(7, &old).unwrap();
        let format = format_byte.map_or(0, |_| 1);
        assert_eq!(log::older_payload(format, &entries).unwrap(), old);
    }
}

/// Key changes as format 2 logged them, pinned from the build that
/// introduced them; format 1 has no such entry. This build only reads them.
#[test]
fn key_entries_keep_their_bytes() {
    let key = |op, now_ms| Entry::Key {
        namespace: "app".into(),
        key: "order:1:email".into(),
        op: Cow::Owned(op),
        now_ms,
    };
    let cases = [
        (
            key(
                KeyOp::Claim {
                    lease_ms: 30_000,
                    ttl_ms: 2_592_000_000,
                },
                1,
            ),
            "01036170700d6f726465723a313a656d61696c00b0ea018090fbd30901",
        ),
        (
            key(
                KeyOp::Complete {
                    token: 7,
                    result: Some(r#"{"sent":true}"#.into()),
                },
                2,
            ),
            "01036170700d6f726465723a313a656d61696c0107010d7b2273656e74223a747275657d02",
        ),
        (
            key(
                KeyOp::Complete {
                    token: 7,
                    result: None,
                },
                3,
            ),
            "01036170700d6f726465723a313a656d61696c01070003",
        ),
        (
            key(KeyOp::Release { token: 7 }, 4),
            "01036170700d6f726465723a313a656d61696c020704",
        ),
        (
            key(
                KeyOp::Extend {
                    token: 7,
                    lease_ms: 60_000,
                },
                5,
            ),
            "01036170700d6f726465723a313a656d61696c0307e0d40305",
        ),
        (
            key(KeyOp::Delete, 6),
            "01036170700d6f726465723a313a656d61696c0406",
        ),
    ];
    for (entry, hex_text) in &cases {
        let written = log::older_payload(2, std::slice::from_ref(entry)).unwrap();
        assert_eq!(written[0], 0x42);
        assert_eq!(hex::encode(&written[1..]), *hex_text);
        let read = log::entries(1, &written).unwrap();
        assert_eq!(debug(&read), vec![format!("{entry:?}")]);
        assert!(log::older_payload(1, &read).is_none());
    }
}

/// What a key change wrote, new in format 3: a put (the row's key and
/// record, where, in place of what) and a removal.
#[test]
fn key_writes_keep_their_bytes() {
    let put = |replaces, record| {
        Entry::KeyWrite(Cow::Owned(KeyWrite::Put {
            namespace: "app".into(),
            key: "order:1:email".into(),
            seq: 9,
            replaces,
            record,
        }))
    };
    let cases = [
        (put(None, claimed_row()), "01036170700900"),
        (put(Some(8), done_row()), "0103617070090108"),
        (
            Entry::KeyWrite(Cow::Owned(KeyWrite::Remove {
                namespace: "app".into(),
                seq: 9,
            })),
            "020361707009",
        ),
    ];
    for (entry, hex_text) in &cases {
        let written = log::older_payload(3, std::slice::from_ref(entry)).unwrap();
        assert_eq!(written[0], 0x43);
        let text = hex::encode(&written[1..]);
        assert!(text.starts_with(hex_text), "{text}");
        if let Entry::KeyWrite(write) = entry
            && let KeyWrite::Put { record, .. } = &**write
        {
            // Then the row: the key and the record as row version 2 has it.
            let mut row_v2 = Vec::new();
            row::encode_key_v2(record, &mut row_v2);
            let want = format!(
                "{hex_text}0d{}{}",
                hex::encode("order:1:email"),
                hex::encode(&row_v2[1..])
            );
            assert_eq!(text, want);
        }
        let read = log::entries(1, &written).unwrap();
        assert_eq!(debug(&read), vec![format!("{entry:?}")]);
        assert!(log::older_payload(2, &read).is_none());
        // This build writes them as format 7's variants 9 and 10, with
        // the same fields.
        let mut current = Vec::new();
        log::begin(&mut current);
        log::push(&mut current, entry);
        assert_eq!(current[0], 0x47);
        let variant = if text.starts_with("01") { "09" } else { "0a" };
        assert_eq!(
            hex::encode(&current[1..]),
            format!("{variant}{}", &text[2..])
        );
        assert_eq!(debug(&log::entries(1, &current).unwrap()), debug(&read));
        // As format 6 (release 0.1.0) wrote them: behind variant 0 three times.
        let format_6 = log::older_payload(6, std::slice::from_ref(entry)).unwrap();
        assert_eq!(hex::encode(&format_6), format!("46000000{text}"));
        assert_eq!(debug(&log::entries(1, &format_6).unwrap()), debug(&read));
        let format_5 = log::older_payload(5, std::slice::from_ref(entry)).unwrap();
        assert_eq!(hex::encode(&format_5), format!("450000{text}"));
        assert_eq!(debug(&log::entries(1, &format_5).unwrap()), debug(&read));
        // As format 4 wrote them, they read the same.
        let format_4 = log::older_payload(4, std::slice::from_ref(entry)).unwrap();
        assert_eq!(hex::encode(&format_4), format!("4400{text}"));
        assert_eq!(debug(&log::entries(1, &format_4).unwrap()), debug(&read));
    }
}

/// The attempts a stop interrupted, new in format 4: variant 1, nothing
/// more; no older format has it.
#[test]
fn the_interrupted_attempts_entry_keeps_its_bytes() {
    let mut written = Vec::new();
    log::begin(&mut written);
    log::push(&mut written, &Entry::Interrupted);
    assert_eq!(written, [0x47, 0x07]);
    let read = log::entries(1, &written).unwrap();
    assert_eq!(debug(&read), ["Interrupted"]);
    let format_6 = [0x46, 0x00, 0x00, 0x01];
    assert_eq!(debug(&log::entries(1, &format_6).unwrap()), ["Interrupted"]);
    assert_eq!(log::older_payload(6, &read).unwrap(), format_6);
    let format_5 = [0x45, 0x00, 0x01];
    assert_eq!(debug(&log::entries(1, &format_5).unwrap()), ["Interrupted"]);
    assert_eq!(log::older_payload(5, &read).unwrap(), format_5);
    let format_4 = [0x44, 0x01];
    assert_eq!(debug(&log::entries(1, &format_4).unwrap()), ["Interrupted"]);
    assert_eq!(log::older_payload(4, &read).unwrap(), format_4);
    for format in 0..4 {
        assert!(log::older_payload(format, &read).is_none(), "{format}");
    }
}

/// An audit record, new in format 5: variant 1, its id, then the row's
/// fields; no older format has it. Its `audit` row (version 5) is the same
/// fields behind the version byte, and an action a newer build names reads
/// as `other`.
#[test]
fn the_audit_entry_and_row_keep_their_bytes() {
    use crate::store::{AuditOutcome, AuditRecord};
    use crate::words::{AuditAction, Role};
    let record = AuditRecord {
        at_ms: 1,
        person: "otto".into(),
        role: Role::Operator,
        action: AuditAction::BulkIgnore,
        target: None,
        filter: vec![("source".into(), "shop".into())],
        dry_run: true,
        note: Some("outage".into()),
        outcome: Some(AuditOutcome {
            status: 200,
            at_ms: 2,
            error: None,
            matched: Some(3),
            changed: Some(0),
        }),
    };
    let fields = concat!(
        "01",                         // at_ms
        "046f74746f",                 // "otto"
        "086f70657261746f72",         // "operator"
        "0b62756c6b5f69676e6f7265",   // "bulk_ignore"
        "00",                         // no target
        "0106736f757263650473686f70", // [("source", "shop")]
        "01",                         // dry run
        "01066f7574616765",           // Some("outage")
        "01c8010200010301",           // outcome: 200, at 2, no error, 3, 0
        "00",
    );
    let mut written = Vec::new();
    log::begin(&mut written);
    log::push(
        &mut written,
        &Entry::Audit {
            id: 7,
            record: Cow::Borrowed(&record),
        },
    );
    assert_eq!(hex::encode(&written), format!("470807{fields}"));
    let read = log::entries(1, &written).unwrap();
    match read.as_slice() {
        [Entry::Audit { id: 7, record: r }] => assert_eq!(**r, record),
        other => panic!("{other:?}"),
    }
    let format_6 = log::older_payload(6, &read).unwrap();
    assert_eq!(hex::encode(&format_6), format!("46000107{fields}"));
    assert_eq!(debug(&log::entries(1, &format_6).unwrap()), debug(&read));
    let format_5 = log::older_payload(5, &read).unwrap();
    assert_eq!(hex::encode(&format_5), format!("450107{fields}"));
    for format in 0..5 {
        assert!(log::older_payload(format, &read).is_none(), "{format}");
    }
    let mut row_bytes = Vec::new();
    row::encode_audit(&record, &mut row_bytes);
    assert_eq!(hex::encode(&row_bytes), format!("05{fields}"));
    assert_eq!(row::decode_audit(&row_bytes).unwrap(), record);
    let newer =
        hex::decode(format!("05{fields}").replace("0b62756c6b5f69676e6f7265", "036e6577")).unwrap();
    assert_eq!(
        row::decode_audit(&newer).unwrap().action,
        AuditAction::Other
    );
}

fn claimed_row() -> KeyRecord {
    KeyRecord {
        state: KeyState::Claimed {
            token: 3,
            lease_until_ms: 31_000,
        },
        created_ms: 1_000,
        ttl_ms: 60_000,
        expires_ms: 61_000,
        claims: 1,
    }
}

fn done_row() -> KeyRecord {
    KeyRecord {
        state: KeyState::Done {
            token: 4,
            completed_ms: 2_000,
            result: Some(r#"{"sent":true}"#.into()),
        },
        created_ms: 1_000,
        ttl_ms: 60_000,
        expires_ms: 62_000,
        claims: 2,
    }
}

/// Rows of schema 6's `keys` (version 2), which the migration reads, and
/// of `key_log` (version 3): the key, then version 2's fields.
#[test]
fn key_rows_keep_their_bytes() {
    let rows = [claimed_row(), done_row()];
    let want = [
        "02000398f201e807e0d403c8dc0301",
        "020104d00f010d7b2273656e74223a747275657de807e0d403b0e40302",
    ];
    for (record, hex_text) in rows.iter().zip(want) {
        let mut out = Vec::new();
        row::encode_key_v2(record, &mut out);
        assert_eq!(hex::encode(&out), hex_text);
        assert_eq!(&row::decode_key_v2(&out).unwrap(), record);
        row::encode_key("k1", record, &mut out);
        assert_eq!(
            hex::encode(&out),
            format!("0302{}{}", hex::encode("k1"), &hex_text[2..])
        );
        assert_eq!(
            row::decode_key(&out).unwrap(),
            ("k1".to_owned(), record.clone())
        );
    }
    assert!(matches!(
        row::decode_key(&[2, 0]),
        Err(DecodeError::UnknownVersion(2))
    ));
    assert!(matches!(
        row::decode_key_v2(&[1, 0]),
        Err(DecodeError::UnknownVersion(1))
    ));
}

#[test]
fn a_newer_format_is_refused_not_misread() {
    let all = entries();
    let newer = payload(Some(log::FORMAT_BYTE + 1), &all);
    match log::entries(9, &newer) {
        Err(e @ FrameError::NewerFormat { lsn: 9, found }) => {
            assert_eq!(found, LOG_FORMAT + 1);
            let text = e.to_string();
            assert!(text.contains("upgrade hookinbox"), "{text}");
            assert!(text.contains(&format!("format {found}")), "{text}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        log::entries(9, &payload(Some(0x40), &all)),
        Err(FrameError::Corrupt { lsn: 9, .. })
    ));
    let mut torn = Vec::new();
    log::begin(&mut torn);
    for (entry, _) in &all {
        log::push(&mut torn, entry);
    }
    torn.pop();
    assert!(matches!(
        log::entries(9, &torn),
        Err(FrameError::Corrupt { lsn: 9, .. })
    ));
}

fn record(body: Vec<u8>) -> EventRecord {
    EventRecord {
        source: "stripe".into(),
        event_id: "evt_1".into(),
        event_type: Some("charge.succeeded".into()),
        received_at_ms: 1_700_000_000_000,
        content_type: Some("application/json".into()),
        headers: vec![("stripe-signature".into(), "t=1,v1=ab".into())],
        body,
    }
}

fn encoded(rec: &EventRecord) -> Vec<u8> {
    let mut out = Vec::new();
    row::encode_event(
        &EventRecordRef {
            source: &rec.source,
            event_id: &rec.event_id,
            event_type: rec.event_type.as_deref(),
            received_at_ms: rec.received_at_ms,
            content_type: rec.content_type.as_deref(),
            headers: &rec.headers,
            body: &rec.body,
        },
        &mut Vec::new(),
        &mut out,
    );
    out
}

#[test]
fn small_records_are_stored_plain_and_round_trip() {
    let rec = record("{\"café\":1}".as_bytes().to_vec());
    let bytes = encoded(&rec);
    assert_eq!(bytes[..2], [1, 0], "version 1, plain");
    assert_eq!(row::decode_event(&bytes).unwrap(), rec);
}

#[test]
fn compressible_records_are_compressed_and_round_trip() {
    let rec = record(b"{\"amount\":100,\"currency\":\"eur\"}".repeat(40));
    let bytes = encoded(&rec);
    assert_eq!(bytes[..2], [1, 1], "version 1, LZ4");
    assert!(bytes.len() < rec.body.len() / 4, "{} bytes", bytes.len());
    assert_eq!(row::decode_event(&bytes).unwrap(), rec);
}

#[test]
fn incompressible_records_are_stored_plain() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let noise: Vec<u8> = (0..2000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let rec = record(noise);
    let bytes = encoded(&rec);
    assert_eq!(bytes[..2], [1, 0], "version 1, plain");
    assert_eq!(row::decode_event(&bytes).unwrap(), rec);
}

#[test]
fn corrupt_compressed_records_are_errors_not_panics() {
    let rec = record(b"abcdefgh".repeat(100));
    let mut bytes = encoded(&rec);
    bytes.truncate(bytes.len() - 5);
    assert!(row::decode_event(&bytes).is_err());
    let mut huge = encoded(&rec);
    huge[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        row::decode_event(&huge),
        Err(DecodeError::Codec(_))
    ));
    assert!(matches!(
        row::decode_event(&[1, 7, 0]),
        Err(DecodeError::Codec(_))
    ));
}

#[test]
fn unknown_row_versions_are_refused_not_misread() {
    assert!(matches!(
        row::decode_state(&[9, 0]),
        Err(DecodeError::UnknownVersion(9))
    ));
    assert!(matches!(
        row::decode_event(&[2, 0]),
        Err(DecodeError::UnknownVersion(2))
    ));
    assert!(matches!(row::decode_state(&[]), Err(DecodeError::Empty)));
    let text = row::decode_attempt(&[3]).unwrap_err().to_string();
    assert!(text.contains("upgrade hookinbox"), "{text}");
}

/// An attempt in full, new in format 6: its `attempts` row is version 6,
/// the version-1 row's fields then the round, the time to the answer's
/// head and both header lists; its finish entry is variant 1 with the same
/// after format 1's finish. A finish of format 5 and a version-1 row read
/// as round 0 without headers.
#[test]
fn an_attempt_in_full_keeps_its_bytes_and_older_ones_read_without_its_additions() {
    let full = Attempt {
        round: 2,
        first_byte_ms: Some(7),
        request_headers: vec![("webhook-id".into(), "hbx_1".into())],
        response_headers: vec![("server".into(), "app".into())],
        ..attempt()
    };
    let v1_fields = "fbd095ffbc312a0101f70301084854545020353033010462757379";
    let want_more = concat!(
        "02",                                   // round 2
        "0107",                                 // the head after 7 ms
        "010a776562686f6f6b2d6964056862785f31", // [("webhook-id", "hbx_1")]
        "010673657276657203617070",             // [("server", "app")]
    );
    let mut out = Vec::new();
    row::encode_attempt(&full, &mut out);
    assert_eq!(hex::encode(&out), format!("06{v1_fields}{want_more}"));
    assert_eq!(row::decode_attempt(&out).unwrap(), full);

    let finish = Entry::Finish(Cow::Owned(Finish {
        seq: 300,
        attempt: full.clone(),
        next: Next::RetryAt { due_ms: 5 },
    }));
    let mut written = Vec::new();
    log::begin(&mut written);
    log::push(&mut written, &finish);
    assert_eq!(
        hex::encode(&written),
        format!("4703ac02{v1_fields}0105{want_more}")
    );
    let read = log::entries(1, &written).unwrap();
    assert_eq!(debug(&read), debug(std::slice::from_ref(&finish)));
    // As format 6 (release 0.1.0) wrote it: variant 1, the same fields.
    let format_6 = log::older_payload(6, &read).unwrap();
    assert_eq!(
        hex::encode(&format_6),
        format!("4601ac02{v1_fields}0105{want_more}")
    );
    assert_eq!(debug(&log::entries(1, &format_6).unwrap()), debug(&read));
    // As format 5 wrote it: the additions are not there, and read as none.
    let format_5 = log::older_payload(5, &read).unwrap();
    assert_eq!(
        hex::encode(&format_5),
        format!("450000000003ac02{v1_fields}0105")
    );
    match log::entries(1, &format_5).unwrap().as_slice() {
        [Entry::Finish(f)] => assert_eq!(f.attempt, attempt()),
        other => panic!("{other:?}"),
    }
}
