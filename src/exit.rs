//! What a failed command tells its caller: the message and the exit code
//! scripts can trust.
//!
//! 0 success, 1 runtime failure, 2 usage or configuration error; the admin
//! commands add 3 (server unreachable) and 4 (token missing or refused).
//! `cli` and `ctl` return a [`Failure`]; `main` prints it and exits with its
//! code. The codes live here, below both, so neither command module has to
//! reach into the other for them.

pub const EXIT_OK: u8 = 0;
pub const EXIT_FAILURE: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
/// The admin API did not answer (connection refused, timeout, DNS).
pub const EXIT_UNREACHABLE: u8 = 3;
/// No admin token was found, or the server refused it.
pub const EXIT_UNAUTHORIZED: u8 = 4;

/// Standard output's reader went away (`hookinbox … | head`): the command
/// stops there, quietly and with 0, as Unix tools do (but `send`, whose
/// requests are its job: it stops printing and sends them all). Only
/// [`write_stdout`] makes it, so a broken pipe to a server is still a failure.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

/// Writes `bytes` to standard output and flushes them. A closed pipe is
/// [`StdoutClosed`]; `print!` would panic there (exit 101).
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to standard output")),
    }
}

/// A failure with the exit code it maps to.
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    /// Whether the command stopped because its reader went away: nothing
    /// to tell anyone, and success.
    pub fn is_closed_stdout(&self) -> bool {
        self.error.chain().any(|e| e.is::<StdoutClosed>())
    }
}

/// Any error is a runtime failure unless the caller says otherwise, so `?`
/// works in every command.
impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Failure {
        Failure {
            code: EXIT_FAILURE,
            error: error.into(),
        }
    }
}
