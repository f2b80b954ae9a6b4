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
            eprintln!("hookinbox: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}
