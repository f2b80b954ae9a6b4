//! Whether a source's secrets are about to leave it without one: a secret
//! that expires within `secret_notice` (or has expired) fires when the
//! provider still signs with it (it verified the source's latest event)
//! or when no other secret of the source outlives it. A planned rotation,
//! where the provider already signs with the new secret, stays quiet.

use std::time::Duration;

use super::quiet::human;
use crate::secrets::Entry;

/// Whether `source` fires, how many of its secrets do, and the sentence.
pub fn judge(
    source: &str,
    entries: &[&Entry],
    now_ms: u64,
    notice: Duration,
) -> (bool, u64, String) {
    let latest = entries.iter().filter_map(|e| e.last_match_ms()).max();
    let mut why = Vec::new();
    for e in entries {
        let Some(at) = e.expires_ms else { continue };
        if at > now_ms.saturating_add(notice.as_millis() as u64) {
            continue;
        }
        let in_use = e.last_match_ms().is_some() && e.last_match_ms() == latest;
        let outlived = entries
            .iter()
            .any(|o| o.name != e.name && o.expires_ms.is_none_or(|x| x > at));
        if !in_use && outlived {
            continue;
        }
        let when = match at.checked_sub(now_ms) {
            Some(left) if left > 0 => format!("expires in {}", human(Duration::from_millis(left))),
            _ => format!("expired {} ago", human(Duration::from_millis(now_ms - at))),
        };
        why.push(match (in_use, outlived) {
            (true, _) => format!(
                "secret {:?} {when} and still verifies {source}'s events (last match {} ago): switch the provider to the new secret",
                e.name,
                human(Duration::from_millis(now_ms.saturating_sub(latest.unwrap_or(now_ms))))
            ),
            (false, _) => format!(
                "secret {:?} {when} and no other secret of {source} outlives it: add the next one",
                e.name
            ),
        });
    }
    if why.is_empty() {
        return (
            false,
            0,
            format!(
                "source {source}: no secret in use expires within {}",
                human(notice)
            ),
        );
    }
    (true, why.len() as u64, why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::SecretBook;

    const DAY: u64 = 86_400_000;

    fn entries(secrets: &str) -> Vec<Entry> {
        let text = format!(
            "[server]\ndata_dir = \"/nonexistent\"\n[admin]\ntoken = \"t-0123456789abcdef0123\"\n\
             [[source]]\nname = \"shop\"\nkind = \"github\"\n{secrets}"
        );
        let config = crate::config::Config::from_toml(&text, "t.toml", None, &|_| None)
            .unwrap()
            .resolve()
            .unwrap()
            .0;
        SecretBook::new(crate::clock::Clock::system()).handles(&config)
    }

    fn table(name: &str, expires: Option<&str>) -> String {
        let expires = expires
            .map(|at| format!("expires = \"{at}\"\n"))
            .unwrap_or_default();
        format!("[[source.secrets]]\nname = \"{name}\"\nsecret = \"{name}-value\"\n{expires}")
    }

    fn judged(list: &[Entry], now_ms: u64) -> (bool, u64, String) {
        let refs: Vec<&Entry> = list.iter().collect();
        judge("shop", &refs, now_ms, Duration::from_millis(7 * DAY))
    }

    #[test]
    fn an_expiring_secret_fires_while_the_provider_signs_with_it_and_not_once_it_switched() {
        // 2030-01-10; the old secret expires 2030-01-13, 3 days on.
        let now = 1_894_233_600_000;
        let list = entries(&format!(
            "{}{}",
            table("new", None),
            table("old", Some("2030-01-13"))
        ));
        list[1].used().matched(now - 60_000);
        let (firing, count, text) = judged(&list, now);
        assert!(firing);
        assert_eq!(count, 1);
        assert_eq!(
            text,
            "secret \"old\" expires in 3days and still verifies shop's events (last match 1m ago): switch the provider to the new secret"
        );
        // The provider switched: the new secret verified the latest event.
        list[0].used().matched(now - 1_000);
        assert!(!judged(&list, now).0);
        // Past its expiry it is still quiet: the new one carries on.
        assert!(!judged(&list, now + 4 * DAY).0);
    }

    #[test]
    fn the_last_secret_left_fires_before_and_after_it_expires_and_a_distant_expiry_does_not() {
        let now = 1_894_233_600_000;
        let alone = entries(&table("only", Some("2030-01-13")));
        let (firing, _, text) = judged(&alone, now);
        assert!(firing);
        assert!(
            text.contains("no other secret of shop outlives it"),
            "{text}"
        );
        let (firing, _, text) = judged(&alone, now + 4 * DAY);
        assert!(firing);
        assert!(
            text.starts_with("secret \"only\" expired 1day ago"),
            "{text}"
        );
        let later = entries(&table("only", Some("2030-03-01")));
        assert!(!judged(&later, now).0);
        // One that expires earlier does not outlive it: only the later one
        // is the last left.
        let both = entries(&format!(
            "{}{}",
            table("a", Some("2030-01-12")),
            table("b", Some("2030-01-13"))
        ));
        let (firing, count, text) = judged(&both, now);
        assert_eq!((firing, count), (true, 1));
        assert!(text.starts_with("secret \"b\""), "{text}");
    }
}
