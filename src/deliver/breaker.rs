//! A circuit breaker per destination.
//!
//! Closed: attempts go out; `threshold` consecutive failures open it. Open:
//! nothing goes out until `cooldown` has passed, so due events wait without
//! spending attempts. Then half-open: exactly one probe goes out; its success
//! closes the circuit, its failure opens it for another cooldown. A
//! "failure" is the destination being unwell (5xx-class retryable status,
//! timeout, connection or transport error); an app that answers 4xx is up.

use std::time::Duration;

use tokio::time::Instant;

use crate::words::Circuit;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    Closed,
    Open,
    HalfOpen,
}

impl CircuitState {
    pub fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
        }
    }
}

/// The word for a state (the metrics' label); the one place the two meet.
impl From<CircuitState> for Circuit {
    fn from(state: CircuitState) -> Circuit {
        match state {
            CircuitState::Closed => Circuit::Closed,
            CircuitState::Open => Circuit::Open,
            CircuitState::HalfOpen => Circuit::HalfOpen,
        }
    }
}

/// What the breaker allows now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allow {
    /// Up to the concurrency limit.
    All,
    /// One probe, no more.
    Probe,
    /// Nothing until this instant.
    Until(Instant),
    /// Nothing until the probe in flight answers.
    Wait,
}

#[derive(Debug)]
pub struct Breaker {
    threshold: u32,
    cooldown: Duration,
    consecutive_failures: u32,
    state: CircuitState,
    open_until: Option<Instant>,
    probe_in_flight: bool,
}

impl Breaker {
    pub fn new(threshold: u32, cooldown: Duration) -> Breaker {
        Breaker {
            threshold: threshold.max(1),
            cooldown,
            consecutive_failures: 0,
            state: CircuitState::Closed,
            open_until: None,
            probe_in_flight: false,
        }
    }

    pub fn state(&self) -> CircuitState {
        self.state
    }

    /// What may go out at `now`; moves Open to HalfOpen once the cooldown is over.
    pub fn allow(&mut self, now: Instant) -> (Allow, Option<CircuitState>) {
        match self.state {
            CircuitState::Closed => (Allow::All, None),
            CircuitState::Open => match self.open_until {
                Some(until) if now < until => (Allow::Until(until), None),
                _ => {
                    self.state = CircuitState::HalfOpen;
                    self.open_until = None;
                    (Allow::Probe, Some(CircuitState::HalfOpen))
                }
            },
            CircuitState::HalfOpen if self.probe_in_flight => (Allow::Wait, None),
            CircuitState::HalfOpen => (Allow::Probe, None),
        }
    }

    /// An attempt went out while half-open: it is the probe.
    pub fn dispatched(&mut self) {
        if self.state == CircuitState::HalfOpen {
            self.probe_in_flight = true;
        }
    }

    /// Records an attempt's result; returns the new state if it changed.
    pub fn record(&mut self, healthy: bool, now: Instant) -> Option<CircuitState> {
        if healthy {
            self.consecutive_failures = 0;
            self.probe_in_flight = false;
            if self.state != CircuitState::Closed {
                self.state = CircuitState::Closed;
                self.open_until = None;
                return Some(CircuitState::Closed);
            }
            return None;
        }
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        let trips = match self.state {
            CircuitState::Closed => self.consecutive_failures >= self.threshold,
            CircuitState::HalfOpen => true,
            // Attempts sent before it opened, answering late: already open.
            CircuitState::Open => false,
        };
        if trips {
            self.probe_in_flight = false;
            self.state = CircuitState::Open;
            self.open_until = Some(now + self.cooldown);
            return Some(CircuitState::Open);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The admin API shows `as_str`, the metrics their label: one word each.
    #[test]
    fn the_metric_label_says_what_the_admin_api_says() {
        for state in [
            CircuitState::Closed,
            CircuitState::Open,
            CircuitState::HalfOpen,
        ] {
            assert_eq!(Circuit::from(state).as_str(), state.as_str());
        }
    }

    #[test]
    fn opens_after_threshold_failures_probes_after_cooldown_and_closes_on_success() {
        let t0 = Instant::now();
        let mut b = Breaker::new(3, Duration::from_secs(10));
        assert_eq!(b.record(false, t0), None);
        assert_eq!(b.record(false, t0), None);
        assert_eq!(b.allow(t0).0, Allow::All);
        assert_eq!(b.record(false, t0), Some(CircuitState::Open));
        assert_eq!(
            b.allow(t0 + Duration::from_secs(9)).0,
            Allow::Until(t0 + Duration::from_secs(10))
        );
        assert_eq!(
            b.allow(t0 + Duration::from_secs(10)),
            (Allow::Probe, Some(CircuitState::HalfOpen))
        );
        b.dispatched();
        assert_eq!(b.allow(t0 + Duration::from_secs(10)).0, Allow::Wait);
        assert_eq!(
            b.record(true, t0 + Duration::from_secs(11)),
            Some(CircuitState::Closed)
        );
        assert_eq!(b.allow(t0 + Duration::from_secs(11)).0, Allow::All);
    }

    #[test]
    fn a_failed_probe_opens_it_again_for_a_full_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::new(1, Duration::from_secs(10));
        b.record(false, t0);
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(b.allow(t1).0, Allow::Probe);
        b.dispatched();
        assert_eq!(b.record(false, t1), Some(CircuitState::Open));
        assert_eq!(b.allow(t1).0, Allow::Until(t1 + Duration::from_secs(10)));
    }

    #[test]
    fn a_success_resets_the_failure_count() {
        let t0 = Instant::now();
        let mut b = Breaker::new(2, Duration::from_secs(10));
        b.record(false, t0);
        b.record(true, t0);
        assert_eq!(b.record(false, t0), None);
        assert_eq!(b.state(), CircuitState::Closed);
    }
}
