//! The store's errors: the one 503-or-500 rule and the chain a log line
//! shows.

use std::sync::Arc;

use super::super::*;

/// One rule decides 503 or 500 for every caller: what the disk did passes by
/// itself; damaged data or a foreign schema needs a person.
#[test]
fn transient_errors_are_the_disks_and_the_rest_need_a_person() {
    let io = || redb::Error::Io(std::io::Error::from_raw_os_error(27));
    let write = |e: WriteError| StoreError::Write(Arc::new(e));
    assert!(write(WriteError::Redb(io())).is_transient());
    assert!(write(WriteError::Redb(redb::Error::PreviousIo)).is_transient());
    assert!(StoreError::Reopening.is_transient());
    assert!(StoreError::Closed.is_transient());
    assert!(StoreError::Read(redb::Error::PreviousIo).is_transient());

    let decode = super::super::format::row::decode_state(&[]).unwrap_err();
    assert!(!write(WriteError::Corrupt(decode)).is_transient());
    let decode = super::super::format::row::decode_state(&[1, 0xff]).unwrap_err();
    assert!(!StoreError::Corrupt(decode).is_transient());
    assert!(!StoreError::MissingState { seq: 7 }.is_transient());
    assert!(!StoreError::Read(redb::Error::Corrupted("bad page".into())).is_transient());
    assert!(
        !StoreError::NewerSchema {
            path: "x".into(),
            found: 9
        }
        .is_transient()
    );
}

/// A log line shows what failed and why, down to the operating system.
#[test]
fn a_report_shows_the_whole_chain_of_causes() {
    let e = StoreError::Write(Arc::new(WriteError::Redb(redb::Error::Io(
        std::io::Error::from_raw_os_error(27),
    ))));
    let text = e.report().to_string();
    assert!(
        text.starts_with("the store cannot commit right now: "),
        "{text}"
    );
    assert!(text.contains("File too large"), "{text}");
    assert_eq!(e.to_string(), "the store cannot commit right now");

    let decode = super::super::format::row::decode_state(&[1, 0xff]).unwrap_err();
    let text = StoreError::Corrupt(decode).report().to_string();
    assert!(
        text.starts_with("the database holds a record this build cannot read: corrupt record: "),
        "{text}"
    );
}
