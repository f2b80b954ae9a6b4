//! hookinbox's integration tests: one binary, read as scenarios. Each test
//! starts the real server (in-process on 127.0.0.1:0, or the real binary as a
//! child) with a temp data dir and talks real HTTP to it. `tidy` checks what
//! the compiler does not: that the code says what each part owns.

mod admin;
mod admin_socket;
mod alerts;
mod attempts;
mod audit;
mod bulk_match;
mod cli;
mod crash;
mod dashboard;
mod delivery;
mod destination;
mod drift;
mod drills;
mod fanout;
mod filters;
mod first_use;
mod hostile;
mod ingest;
mod jetstream;
mod key_clients;
mod keys;
mod listen;
mod log0;
mod logs;
mod migration;
mod monitoring;
mod nats;
mod privacy;
mod providers;
mod reconcile;
mod reload;
mod replicate;
mod replicate_drills;
mod replicate_nodes;
mod roles;
mod runbook;
mod scale;
mod secrets;
mod snapshots;
mod stream;
mod support;
mod systemd;
mod telemetry;
mod tidy;
mod tls;
mod upgrade;
mod vectors;
