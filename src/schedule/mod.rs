//! The scheduler: finds due events and hands them to delivery.
//!
//! One task. It sleeps until something can change what is due — a commit
//! (new events, retries, replays: the store signals each one), an attempt
//! finishing (a concurrency slot frees up), the earliest future due time, a
//! circuit's cooldown ending, a rate token, or a pause/resume — then walks
//! each destination's queue from its oldest entry, taking only as many due
//! events as the destination may receive right now. No polling.
//!
//! Each attempt is leased in the store before it goes out and recorded with
//! its outcome after (see `store::tables`), so a crash at any point leaves
//! the event due again with the interrupted attempt on record.
//!
//! What it keeps in memory per destination — attempts in flight, the circuit
//! breaker, the rate bucket, the pause flag — is rebuilt empty at start: in
//! flight is empty after a restart by definition (leases were recovered), a
//! closed circuit re-learns failure in `breaker_failures` attempts.
//!
//! `scheduler.rs` the loop and `dispatch`; `lane.rs` one destination's
//! state and the room it has now; `attempt.rs` one attempt and how it
//! ended; `handle.rs` what the admin surfaces see and do.

mod attempt;
mod handle;
mod lane;
mod scheduler;

pub use handle::{DeliveryHandle, LaneStatus, PauseError, Reconfigure, Wanted};
pub use scheduler::{DRAIN_TIMEOUT, Scheduler};
