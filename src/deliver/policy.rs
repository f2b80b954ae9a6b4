//! Outcome rules: what an attempt's result means and when to try again.
//! Pure functions of the config, the attempt and a random draw, so every
//! rule is unit-tested without a clock or a network.

use std::time::{Duration, SystemTime};

use crate::config::{DeliveryConfig, OnDeadLetter};
use crate::store::schema::{Attempt, AttemptClass};
use crate::store::{Claimed, Next};

/// Jitter spreads retries by ±20 %, so a burst that failed together does
/// not come back together.
const JITTER: f64 = 0.2;

/// The wait before retry number `attempt + 1`, after `attempt` failures:
/// `initial_interval` doubling per attempt up to `max_interval`, then
/// ±20 % jitter. `draw` is uniform in [0, 1).
pub fn backoff(config: &DeliveryConfig, attempt: u32, draw: f64) -> Duration {
    let doublings = attempt.saturating_sub(1).min(40);
    let base = config
        .initial_interval
        .saturating_mul(1u32 << doublings.min(31))
        .min(config.max_interval);
    base.mul_f64(1.0 - JITTER + 2.0 * JITTER * draw.clamp(0.0, 1.0))
}

/// `Retry-After` as seconds or an HTTP date, relative to `now`. A date in the
/// past means "now"; anything unparseable is ignored.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Whether the destination answered 2xx (delivered), a status the rules
/// retry, or one they do not.
pub fn classify_status(config: &DeliveryConfig, status: u16) -> AttemptClass {
    if (200..300).contains(&status) {
        AttemptClass::Delivered
    } else if config.retry_statuses.iter().any(|p| p.matches(status)) {
        AttemptClass::RetryableStatus
    } else {
        AttemptClass::RejectedStatus
    }
}

/// What happens after `attempt`: delivered, another try at a time, or the
/// dead-letter queue with a reason a person can act on.
pub fn decide(
    config: &DeliveryConfig,
    claimed: Claimed,
    attempt: &Attempt,
    retry_after: Option<Duration>,
    now_ms: u64,
    draw: f64,
) -> Next {
    let last = describe(attempt);
    let release_key = !matches!(
        &config.ordering,
        Some(o) if o.on_dead_letter == OnDeadLetter::Block
    );
    match attempt.class {
        AttemptClass::Delivered => Next::Delivered { at_ms: now_ms },
        AttemptClass::RejectedStatus => Next::Dead {
            reason: format!("{last}, which is not retried"),
            at_ms: now_ms,
            release_key,
        },
        _ if claimed.attempt >= config.max_attempts => Next::Dead {
            reason: format!(
                "gave up after {} attempts (max_attempts); last: {last}",
                claimed.attempt
            ),
            at_ms: now_ms,
            release_key,
        },
        _ => {
            let wait = match retry_after {
                // Honoured, but never past max_interval: a destination asking
                // for a day would otherwise park the event silently.
                Some(asked) => asked.min(config.max_interval),
                None => backoff(config, claimed.attempt, draw),
            };
            let due_ms = now_ms.saturating_add(wait.as_millis() as u64);
            let deadline = claimed
                .round_started_ms
                .saturating_add(config.max_age.as_millis() as u64);
            if due_ms > deadline {
                Next::Dead {
                    reason: format!(
                        "gave up after {} attempts: the next one would pass max_age ({}); last: {last}",
                        claimed.attempt,
                        humantime::format_duration(config.max_age)
                    ),
                    at_ms: now_ms,
                    release_key,
                }
            } else {
                Next::RetryAt { due_ms }
            }
        }
    }
}

/// One attempt in words: "destination answered 503" or "timeout: …".
pub fn describe(attempt: &Attempt) -> String {
    match (attempt.status, &attempt.error) {
        (Some(status), _) => format!("destination answered {status}"),
        (None, Some(error)) => format!("{}: {error}", attempt.class.as_str()),
        (None, None) => attempt.class.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StatusPattern;
    use crate::standard_webhooks::StandardKey;

    fn config() -> DeliveryConfig {
        DeliveryConfig {
            name: None,
            route: "s".into(),
            url: "http://127.0.0.1:9/".parse().unwrap(),
            secret: crate::standard_webhooks::SigningKeys::one(
                StandardKey::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap(),
            ),
            ca: None,
            jetstream: None,
            filter: None,
            forward_headers: vec![],
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(30),
            initial_interval: Duration::from_secs(5),
            max_interval: Duration::from_secs(3600),
            max_attempts: 12,
            max_age: Duration::from_secs(3 * 86400),
            retry_statuses: vec![
                StatusPattern::Code(408),
                StatusPattern::Code(425),
                StatusPattern::Code(429),
                StatusPattern::Class(5),
            ],
            max_concurrency: 8,
            max_rate: None,
            paused: false,
            ordering: None,
            breaker_failures: 5,
            breaker_cooldown: Duration::from_secs(30),
        }
    }

    fn failed(status: Option<u16>, class: AttemptClass) -> Attempt {
        Attempt {
            started_ms: 0,
            latency_ms: 1,
            class,
            status,
            error: status.is_none().then(|| "connection refused".to_owned()),
            response_snippet: None,
            round: 0,
            first_byte_ms: None,
            request_headers: Vec::new(),
            response_headers: Vec::new(),
        }
    }

    fn claimed(attempt: u32) -> Claimed {
        Claimed {
            attempt,
            round_started_ms: 1_000_000,
        }
    }

    #[test]
    fn backoff_doubles_from_the_initial_interval_up_to_the_cap() {
        let c = config();
        let mid = |n| backoff(&c, n, 0.5);
        assert_eq!(mid(1), Duration::from_secs(5));
        assert_eq!(mid(2), Duration::from_secs(10));
        assert_eq!(mid(3), Duration::from_secs(20));
        assert_eq!(mid(10), Duration::from_secs(2560));
        assert_eq!(mid(11), Duration::from_secs(3600));
        assert_eq!(mid(40), Duration::from_secs(3600));
        assert_eq!(mid(u32::MAX), Duration::from_secs(3600));
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let c = config();
        assert_eq!(backoff(&c, 2, 0.0), Duration::from_secs(8));
        assert!(backoff(&c, 2, 0.999_999) <= Duration::from_secs(12));
        assert!(backoff(&c, 2, 0.999_999) > Duration::from_millis(11_999));
    }

    #[test]
    fn statuses_follow_the_default_rules() {
        let c = config();
        for s in [200, 201, 204, 299] {
            assert_eq!(classify_status(&c, s), AttemptClass::Delivered, "{s}");
        }
        for s in [408, 425, 429, 500, 502, 503, 599] {
            assert_eq!(classify_status(&c, s), AttemptClass::RetryableStatus, "{s}");
        }
        for s in [301, 400, 401, 403, 404, 409, 410, 422] {
            assert_eq!(classify_status(&c, s), AttemptClass::RejectedStatus, "{s}");
        }
    }

    #[test]
    fn a_rejected_status_is_dead_at_once_with_the_status_in_the_reason() {
        let next = decide(
            &config(),
            claimed(1),
            &failed(Some(400), AttemptClass::RejectedStatus),
            None,
            2_000_000,
            0.5,
        );
        let Next::Dead { reason, .. } = next else {
            panic!("{next:?}")
        };
        assert!(reason.contains("400"), "{reason}");
    }

    #[test]
    fn retries_until_max_attempts_then_dead() {
        let c = config();
        let fail = failed(Some(503), AttemptClass::RetryableStatus);
        assert_eq!(
            decide(&c, claimed(11), &fail, None, 2_000_000, 0.5),
            Next::RetryAt {
                due_ms: 2_000_000 + 3_600_000
            }
        );
        let Next::Dead { reason, .. } = decide(&c, claimed(12), &fail, None, 2_000_000, 0.5) else {
            panic!()
        };
        assert!(
            reason.contains("12 attempts") && reason.contains("503"),
            "{reason}"
        );
    }

    #[test]
    fn retries_end_when_the_next_would_pass_max_age() {
        let c = config();
        let fail = failed(None, AttemptClass::Connect);
        let started = 1_000_000;
        let almost = started + c.max_age.as_millis() as u64 - 1_000;
        let Next::Dead { reason, .. } = decide(&c, claimed(3), &fail, None, almost, 0.5) else {
            panic!()
        };
        assert!(
            reason.contains("max_age") && reason.contains("connection refused"),
            "{reason}"
        );
    }

    #[test]
    fn retry_after_is_honoured_and_clamped_to_max_interval() {
        let c = config();
        let fail = failed(Some(429), AttemptClass::RetryableStatus);
        let at = |after| decide(&c, claimed(1), &fail, Some(after), 2_000_000, 0.5);
        assert_eq!(
            at(Duration::from_secs(42)),
            Next::RetryAt { due_ms: 2_042_000 }
        );
        assert_eq!(
            at(Duration::from_secs(86_400)),
            Next::RetryAt {
                due_ms: 2_000_000 + 3_600_000
            }
        );
    }

    #[test]
    fn retry_after_parses_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480);
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now),
            Some(Duration::from_secs(1_445_412_600 - 1_445_412_480))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }
}
