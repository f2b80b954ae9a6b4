//! The bytes the store writes, and nothing else: every database row and
//! every write-ahead log entry has its own serialized type here, with a
//! version, converted at this boundary from and to the domain types the
//! rest of the store works with (as the admin API's wire types are).
//!
//! So a domain type ([`super::Initial`], [`super::Next`],
//! [`super::schema::EventState`], …) can change without changing a byte on
//! disk, and a change to what is written is a new version here whose
//! decoder keeps reading every older one: a log left by a crash of the
//! build before, or rows it wrote, read the same after an upgrade
//! (`tests/fixtures/log0/`). Something written by a newer build is refused
//! with an error that says so, never misread.
//!
//! - [`row`]: database rows (a version byte, then postcard).
//! - [`log`]: a log frame's payload (a format byte, then entries), also the
//!   unit replication sends.
//! - `v1`: format 1's types, frozen.
//! - `v2`: format 2's additions (idempotency keys), frozen.
//! - `v3`: format 3's (what a key change wrote), frozen.
//! - `v4`: format 4's (the attempts a stop interrupted), frozen.
//! - `v5`: format 5's (the audit trail), frozen.
//! - `v6`: format 6's (attempts in full; release 0.1.0's log), frozen.
//! - `v7`: format 7, release 0.2.0's log: every kind in one flat enum.
//!
//! The writer writes only the newest format; the older ones are read, and
//! written only by the tests that pin their bytes. Which formats a release
//! writes and reads: "Formats and releases" in docs/design.md.

pub mod log;
pub mod row;
mod v1;
mod v2;
mod v3;
mod v4;
mod v5;
mod v6;
mod v7;

#[cfg(test)]
mod tests;
