//! Counters and histograms, kept in a Prometheus registry.
//!
//! Owns metric names, label sets and help texts; refuses event ids or any
//! other unbounded value as a label. Modules record through the typed
//! methods of [`Metrics`] so a metric's name lives in one place. Every
//! label but the source, destination and node is one of `crate::words`'
//! enums, so the compiler refuses a label value a caller made up; a source
//! label is a configured name, or `words::UNKNOWN_SOURCE`. It imports
//! nothing of the crate but those words. It also owns the per-minute
//! [`Budget`] of loud log lines: a refusal or dead letter is counted and
//! budgeted in one call, and the summary line reads what the budgets quieted
//! from the same [`Tally`].
//!
//! This file declares the rooms and re-exports what the crate uses, so the
//! paths stay `crate::metrics::X`; no room imports anything back from it:
//! - `labels`: the label sets, and each word's label value;
//! - `registry`: [`Metrics::new`], every family's name and help text;
//! - `record`: the [`Metrics`] handle and its typed methods, one file per
//!   area (listener, ingest, delivery, store, operations, keys);
//! - `exposition`: [`Exposition`], OpenMetrics or Prometheus text 0.0.4;
//! - `process`: the `process_*` families, read from `/proc` at a scrape;
//! - `tally`: what stats and the summary read beside the registry;
//! - `budget`: the [`Budget`] of loud log lines.

mod budget;
mod exposition;
mod labels;
mod process;
mod record;
mod registry;
mod tally;

pub use budget::{Budget, LOUD_PER_MINUTE};
pub use exposition::Exposition;
pub use labels::DestinationLabel;
pub use record::{Declared, Metrics, SourceGauges, StandbyLag, StoreDisk, StreamOpen};
pub use tally::{OTHER_TYPES, Tally};
