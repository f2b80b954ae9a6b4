//! The `hookinbox` binary: parse the command line, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use hookinbox::cli::{Cli, run};

/// glibc's malloc was among the hottest symbols under load (every request
/// allocates its head, body and answer; the writer its pages): mimalloc's
/// per-thread free lists cost a fraction of that. benches/http.rs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) if failure.is_closed_stdout() => ExitCode::SUCCESS,
        Err(failure) => {
            // Under systemd this is why the service died: `<3>` files it at
            // err, as `logs` files its own lines, so `journalctl -p warning`
            // shows it (the stream's own priority is info).
            let priority = if hookinbox::systemd::stderr_is_the_journal() {
                "<3>"
            } else {
                ""
            };
            eprintln!("{priority}hookinbox: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}
