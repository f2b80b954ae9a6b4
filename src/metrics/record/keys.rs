//! What idempotency keys record: each claim's outcome, each lease taken
//! over after it ran out, and the keys stored (set just before a scrape).
//! A namespace label is a configured `[[keys.client]]` namespace: callers
//! pass only the namespace of the client that called.

use super::Metrics;
use crate::metrics::labels::{KeyClaimLabels, NamespaceLabel};
use crate::words::KeyClaimOutcome;

impl Metrics {
    /// Each configured namespace's series at 0, so a dashboard shows them
    /// before the first claim.
    pub fn declare_key_namespaces<'a>(&self, namespaces: impl IntoIterator<Item = &'a str>) {
        for namespace in namespaces {
            for &outcome in KeyClaimOutcome::ALL {
                let _ = self.inner.key_claims.get_or_create(&KeyClaimLabels {
                    namespace: namespace.to_owned(),
                    outcome,
                });
            }
            let _ = self
                .inner
                .key_leases_expired
                .get_or_create(&NamespaceLabel {
                    namespace: namespace.to_owned(),
                });
        }
    }

    pub fn key_claim(&self, namespace: &str, outcome: KeyClaimOutcome) {
        self.inner
            .key_claims
            .get_or_create(&KeyClaimLabels {
                namespace: namespace.to_owned(),
                outcome,
            })
            .inc();
    }

    pub fn key_claim_count(&self, namespace: &str, outcome: KeyClaimOutcome) -> u64 {
        self.inner
            .key_claims
            .get_or_create(&KeyClaimLabels {
                namespace: namespace.to_owned(),
                outcome,
            })
            .get()
    }

    /// A claim granted over a lease that had run out.
    pub fn key_lease_expired(&self, namespace: &str) {
        self.inner
            .key_leases_expired
            .get_or_create(&NamespaceLabel {
                namespace: namespace.to_owned(),
            })
            .inc();
    }

    /// The keys stored, set just before a scrape.
    pub fn set_keys_stored(&self, n: u64) {
        self.inner
            .keys_stored
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}
