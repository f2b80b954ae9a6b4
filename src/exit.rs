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

/// A failure with the exit code it maps to.
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
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
