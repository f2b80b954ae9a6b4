//! A job's reply: the channel its caller waits on, and its answer held
//! until the batch is durable ([`Ready`]). A job can only be answered with
//! its own kind of result; a failed batch fails every one with its cause.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::error::{StoreError, WriteError};

/// Where a job of answer `T` is answered.
pub(super) type ReplyTo<T> = oneshot::Sender<Result<T, StoreError>>;

/// A job's answer, held until its batch is durable: sent then, or failed
/// with the batch's cause.
pub(super) struct Ready(Box<dyn Answer>);

trait Answer: Send {
    fn send(self: Box<Self>);
    fn fail(self: Box<Self>, cause: &Arc<WriteError>);
}

struct Reply<T> {
    to: ReplyTo<T>,
    answer: T,
}

// A dropped receiver is a caller that went away: what was committed stands.
impl<T: Send> Answer for Reply<T> {
    fn send(self: Box<Self>) {
        let _ = self.to.send(Ok(self.answer));
    }

    fn fail(self: Box<Self>, cause: &Arc<WriteError>) {
        fail(self.to, cause);
    }
}

impl Ready {
    /// `answer` for `to`, once durable.
    pub(super) fn new<T: Send + 'static>(to: ReplyTo<T>, answer: T) -> Ready {
        Ready(Box::new(Reply { to, answer }))
    }

    pub(super) fn send(self) {
        self.0.send()
    }

    pub(super) fn fail(self, cause: &Arc<WriteError>) {
        self.0.fail(cause)
    }
}

/// Answers `to` with the batch's cause.
pub(super) fn fail<T>(to: ReplyTo<T>, cause: &Arc<WriteError>) {
    let _ = to.send(Err(StoreError::Write(cause.clone())));
}
