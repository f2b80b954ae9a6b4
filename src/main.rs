//! The `hookinbox` binary: parse the command line, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use hookinbox::cli::{Cli, run};

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("hookinbox: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}
