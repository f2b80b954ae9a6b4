//! hookinbox: a single-binary webhook inbox.
//!
//! Modules are listed in the order an event meets them: config decides what
//! is accepted, `ingest` receives the request, `verify` proves it authentic,
//! `store` makes it durable and deduplicated; `schedule` finds what is due
//! and `deliver` sends it to the app; `admin` lets people see and fix what
//! happened. `app` wires them together; `cli` and
//! `send` are the command line's.

pub mod admin;
pub mod alert;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod ctl;
pub mod deliver;
pub mod exit;
pub mod ingest;
pub mod listener;
pub mod metrics;
pub mod schedule;
pub mod send;
pub mod standard_webhooks;
pub mod store;
pub mod supervise;
pub mod sweep;
pub mod systemd;
pub mod tls;
pub mod verify;
