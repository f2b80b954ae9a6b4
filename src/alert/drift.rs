//! A source whose payloads drift: the drift watch ([`crate::drift`])
//! recorded a departure of one of its events from the learned shape (a
//! field missing, added or retyped) within the last [`WINDOW`].
//!
//! The rule is Prometheus's `HookinboxPayloadDrift`
//! (`increase(hookinbox_payload_drift_total[1h]) > 0`) in hookinbox's own
//! terms: it fires at the first check after a departure is recorded, and
//! resolves at the first check at which the source's newest departure is
//! more than an hour old, counted from the receipt of the event that showed
//! it (by the app's clock, as every stored time). Departures recorded while
//! it fires are named by its repeat (at most once per `min_interval`) and
//! push the resolution back. Nothing to configure: each departure is
//! recorded once, so one is already news, and an hour is the Prometheus
//! rule's window, so both say the same.
//!
//! The departures are read from what the drift watch keeps (its newest
//! 1,000, what `GET /api/shapes` lists), once per check, under their lock:
//! the learner holds it per learned event, and ingest never takes it.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::drift::{Drift, Learned};
use crate::words::DriftChange;

use super::quiet::human;

/// How long a departure keeps its source's alert firing: the Prometheus
/// rule's `[1h]`.
pub const WINDOW: Duration = Duration::from_secs(3600);

/// Departures a notice names, newest first; the rest it counts. Five keep
/// a Slack line readable; `GET /api/shapes` and the dashboard list all.
pub const NAMED: usize = 5;

/// One source's departures at one check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recent {
    /// Departures within [`WINDOW`].
    pub count: u64,
    /// The newest of them, at most [`NAMED`], newest first.
    pub named: Vec<Drift>,
    /// When the event that showed the source's newest departure (of any
    /// age) was received.
    pub newest_ms: Option<u64>,
}

/// Per source, its departures within [`WINDOW`] before `now_ms`.
pub fn recent(learned: &Learned, now_ms: u64) -> BTreeMap<String, Recent> {
    let since = now_ms.saturating_sub(WINDOW.as_millis() as u64);
    let mut out: BTreeMap<String, Recent> = BTreeMap::new();
    // Kept in the order learned, newest last.
    for d in learned.drifts.iter().rev() {
        let r = out.entry(d.source.clone()).or_default();
        r.newest_ms = Some(r.newest_ms.map_or(d.at_ms, |n| n.max(d.at_ms)));
        if d.at_ms > since {
            r.count += 1;
            if r.named.len() < NAMED {
                r.named.push(d.clone());
            }
        }
    }
    out
}

/// One departure as a notice names it: the event type, the pointer, the
/// change and the types (field names and types only, never a value).
fn describe(d: &Drift) -> String {
    let (kind, pointer, change) = (&d.event_type, &d.pointer, d.change.as_str());
    match d.change {
        DriftChange::Missing => format!("{kind} {pointer} {change} (was {})", d.was),
        DriftChange::Added => format!("{kind} {pointer} {change} ({})", d.now),
        DriftChange::TypeChanged => {
            format!("{kind} {pointer} {change} from {} to {}", d.was, d.now)
        }
    }
}

/// Whether `source` drifts at `now_ms`, how many departures it had within
/// the window, and the sentence that names them or says they stopped.
pub fn judge(source: &str, recent: Option<&Recent>, now_ms: u64) -> (bool, u64, String) {
    let none = Recent::default();
    let r = recent.unwrap_or(&none);
    if r.count == 0 {
        let summary = match r.newest_ms {
            Some(at) => format!(
                "no new payload departure of source {source} for {} (the window is {})",
                human(Duration::from_millis(now_ms.saturating_sub(at))),
                human(WINDOW)
            ),
            None => format!("no payload departure of source {source} is kept"),
        };
        return (false, 0, summary);
    }
    let times = if r.count == 1 { "time" } else { "times" };
    let mut summary = format!(
        "events of source {source} departed from their learned payload shape {} {times} in the last {}: {}",
        r.count,
        human(WINDOW),
        r.named.iter().map(describe).collect::<Vec<_>>().join("; ")
    );
    let more = r.count.saturating_sub(r.named.len() as u64);
    if more > 0 {
        summary.push_str(&format!("; and {more} more"));
    }
    (true, r.count, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    fn drift(source: &str, pointer: &str, change: DriftChange, at_ms: u64) -> Drift {
        let (was, now) = match change {
            DriftChange::Missing => ("string", ""),
            DriftChange::Added => ("", "number"),
            DriftChange::TypeChanged => ("number", "string"),
        };
        Drift {
            source: source.into(),
            event_type: "order.paid".into(),
            pointer: pointer.into(),
            change,
            was: was.into(),
            now: now.into(),
            at_ms,
            event: "01J0".into(),
        }
    }

    #[test]
    fn a_departure_within_the_hour_fires_naming_it_and_one_older_does_not() {
        let mut learned = Learned::default();
        learned
            .drifts
            .push_back(drift("shop", "/old", DriftChange::Added, 0));
        learned
            .drifts
            .push_back(drift("shop", "/email", DriftChange::Missing, 50 * MIN));
        learned
            .drifts
            .push_back(drift("shop", "/amount", DriftChange::TypeChanged, 70 * MIN));
        learned
            .drifts
            .push_back(drift("api", "/gone", DriftChange::Missing, 5 * MIN));
        let now = 80 * MIN;
        let found = recent(&learned, now);
        let (firing, count, text) = judge("shop", found.get("shop"), now);
        assert!(firing);
        assert_eq!(count, 2, "/old is 80 minutes old");
        assert_eq!(
            text,
            "events of source shop departed from their learned payload shape 2 times in the last 1h: \
             order.paid /amount type_changed from number to string; order.paid /email missing (was string)"
        );
        let (firing, count, text) = judge("api", found.get("api"), now);
        assert!(!firing && count == 0);
        assert_eq!(
            text,
            "no new payload departure of source api for 1h 15m (the window is 1h)"
        );
        let (firing, _, text) = judge("github", found.get("github"), now);
        assert!(!firing);
        assert_eq!(text, "no payload departure of source github is kept");
        // Exactly an hour old is out of the window, as `[1h]` is.
        let (firing, ..) = judge("shop", recent(&learned, 130 * MIN).get("shop"), 130 * MIN);
        assert!(!firing);
    }

    #[test]
    fn a_notice_names_the_newest_few_and_counts_the_rest() {
        let mut learned = Learned::default();
        for i in 0..NAMED as u64 + 3 {
            learned.drifts.push_back(drift(
                "shop",
                &format!("/f{i}"),
                DriftChange::Added,
                MIN + i * 1000,
            ));
        }
        let found = recent(&learned, 10 * MIN);
        let (firing, count, text) = judge("shop", found.get("shop"), 10 * MIN);
        assert!(firing);
        assert_eq!(count, NAMED as u64 + 3);
        assert!(
            text.contains(": order.paid /f7 added (number); order.paid /f6"),
            "{text}"
        );
        assert!(!text.contains("/f2 "), "{text}");
        assert!(text.ends_with("; and 3 more"), "{text}");
    }
}
