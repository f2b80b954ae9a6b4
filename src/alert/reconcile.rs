//! What reconcile passes ([`crate::reconcile`]) found, in hookinbox's own
//! notices, as the Prometheus rules say it:
//!
//! - `missed_events` (`HookinboxMissedEvents`, `increase(hookinbox_reconciled_total[1h]) > 0`):
//!   fires at the first check after a pass got back events the provider
//!   could not deliver and hookinbox never received, and resolves once the
//!   newest such pass is more than [`WINDOW`] old, by the app's clock.
//! - `subscription_disabled` (`HookinboxProviderDisabledEndpoint`): fires
//!   while the last pass that read it found the provider no longer sending
//!   here, and resolves at the pass that finds it sending again.
//!
//! Both read the reconciler's record of each source's passes
//! ([`crate::reconcile::ReconcileHandle::sources`]), one lock per check;
//! a pass never waits for the alerter.

use std::time::Duration;

use crate::api::ReconcileSource;

/// How long events got back keep the source's `missed_events` firing: the
/// Prometheus rule's `[1h]`.
pub const WINDOW: Duration = Duration::from_secs(3600);

/// `missed_events` for one source at `now_ms`: whether it fires, how many
/// events the newest pass got back, and the notice's summary.
pub fn judge_missed(s: &ReconcileSource, now_ms: u64) -> (bool, u64, String) {
    let since = now_ms.saturating_sub(WINDOW.as_millis() as u64);
    match &s.last_recovered {
        Some(r) if r.at.0 > since => {
            let count = r.resent + r.fetched;
            let how = match (r.resent, r.fetched) {
                (0, f) => format!("{f} fetched from its API"),
                (n, 0) => format!("{n} sent again at hookinbox's request"),
                (n, f) => format!("{n} sent again, {f} fetched"),
            };
            (
                true,
                count,
                format!(
                    "the provider of source {} could not deliver {count} events that hookinbox never received; a reconcile pass got them back ({how}): find what kept them away",
                    s.source
                ),
            )
        }
        _ => (
            false,
            0,
            format!(
                "no reconcile pass of source {} got events back in the last {}",
                s.source,
                humantime::format_duration(WINDOW)
            ),
        ),
    }
}

/// `subscription_disabled` for one source: whether it fires, and the
/// summary.
pub fn judge_disabled(s: &ReconcileSource) -> (bool, String) {
    if s.subscription_active == Some(false) {
        (
            true,
            format!(
                "the provider has disabled the webhook subscription of source {} ({}): it sends nothing here until it is enabled again in its settings",
                s.source, s.target
            ),
        )
    } else {
        (
            false,
            format!("the provider sends to source {} again", s.source),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Recovered, Timestamp};

    fn source(recovered: Option<(u64, u64, u64)>, active: Option<bool>) -> ReconcileSource {
        ReconcileSource {
            source: "stripe".into(),
            target: "events".into(),
            interval_ms: 600_000,
            lookback_ms: 0,
            last: None,
            last_success_at: None,
            subscription_active: active,
            last_recovered: recovered.map(|(at, resent, fetched)| Recovered {
                at: Timestamp(at),
                resent,
                fetched,
            }),
        }
    }

    #[test]
    fn events_got_back_fire_for_an_hour() {
        let hour = 3_600_000;
        let now = 10 * hour;
        let (firing, count, summary) = judge_missed(&source(Some((now - 1000, 0, 7)), None), now);
        assert!(firing);
        assert_eq!(count, 7);
        assert!(summary.contains("7 fetched from its API"), "{summary}");
        let (firing, _, _) = judge_missed(&source(Some((now - hour - 1, 3, 0)), None), now);
        assert!(!firing, "an hour on it resolves");
        assert!(!judge_missed(&source(None, None), now).0);
    }

    #[test]
    fn a_disabled_subscription_fires_until_it_is_read_enabled() {
        assert!(judge_disabled(&source(None, Some(false))).0);
        assert!(!judge_disabled(&source(None, Some(true))).0);
        assert!(!judge_disabled(&source(None, None)).0, "not read yet");
    }
}
