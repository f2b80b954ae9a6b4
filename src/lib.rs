//! hookinbox: a single-binary webhook inbox.
//!
//! Modules are listed in the order an event meets them, as in
//! ARCHITECTURE.md's codemap (a test keeps the two in step), after `words`,
//! the names of what happens that every module speaks: `config`
//! decides what is accepted; `listener` takes the connection, `ingest` the
//! request, `verify` proves it authentic, `store` makes it durable and
//! deduplicated; `schedule` finds what is due and `deliver` sends it to the
//! app; `sweep` and `alert` run beside them; `admin` lets people see and fix
//! what happened. `supervise` and `app` wire and run the tasks; `cli`, `ctl`
//! and `send` are the command line's.

pub mod words;
pub mod config;
pub mod clock;
pub mod listener;
pub mod tls;
pub mod ingest;
pub mod json_pointer;
pub mod redact;
pub mod drift;
pub mod secrets;
pub mod verify;
pub mod standard_webhooks;
pub mod store;
pub mod schedule;
pub mod deliver;
pub mod sweep;
pub mod alert;
pub mod api;
pub mod admin;
pub mod dashboard;
pub mod metrics;
pub mod telemetry;
pub mod logs;
pub mod supervise;
pub mod systemd;
pub mod app;
pub mod exit;
pub mod cli;
pub mod ctl;
pub mod send;
pub mod replicate;
pub mod reconcile;
