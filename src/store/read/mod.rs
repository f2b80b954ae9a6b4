//! What readers see, each on its own redb snapshot (MVCC: a reader never
//! waits for the writer): one event with its deliveries (`event`), pages of
//! events and searches (`list`), events as they are stored (`tail`), the
//! counts (`stats`), idempotency keys (`keys`) and the audit trail
//! (`audit`). Nothing here writes.

mod audit;
mod event;
mod keys;
mod list;
mod stats;
mod tail;

pub use keys::MAX_KEYS_EXAMINED;
pub use stats::{Counts, NO_TYPE, RouteStats, SourceStats};
