//! The notion of "now", injectable so that tests of timestamp tolerance can
//! freeze it at a vector's signing time. Production uses the system clock.

use std::sync::Arc;
use std::time::SystemTime;

#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl Clock {
    pub fn system() -> Clock {
        Clock(Arc::new(SystemTime::now))
    }

    /// A clock that always answers `at`.
    pub fn fixed(at: SystemTime) -> Clock {
        Clock(Arc::new(move || at))
    }

    pub fn now(&self) -> SystemTime {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}
