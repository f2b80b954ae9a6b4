//! Store tests on a real redb file in a temp dir, one file per part of the
//! store they try, and in `support.rs` the helpers other modules' tests
//! use to fill one.

mod support;
mod ingest;
mod delivery;
mod sweep;
mod recover;
mod errors;
mod list;
mod migrate;
mod props;
mod keys;
mod ship;
mod tail;
mod runs;
mod pack;
mod beside;
mod audit;
mod activity;

pub(crate) use support::{close, deliver, new_seq, options};
