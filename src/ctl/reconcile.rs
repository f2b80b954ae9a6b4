//! `hookinbox reconcile [SOURCE] [--since 2h] [--dry-run]`: runs one pass
//! of a source's reconcile now and prints what it found (held, asked to
//! resend, fetched); without a source, each source's last pass. What a
//! pass does is `crate::reconcile`'s.

use anyhow::anyhow;

use super::client::{Client, fail};
use super::output::{Output, plural, time};
use crate::api;
use crate::exit::{EXIT_FAILURE, Failure};

pub(super) async fn run(
    client: &Client,
    source: Option<String>,
    since: Option<String>,
    dry_run: bool,
    json: bool,
) -> Result<(), Failure> {
    let Some(source) = source else {
        let all: api::ReconcileSources = client.get_with("/api/reconcile", &()).await?;
        let mut text = String::new();
        if all.sources.is_empty() {
            text.push_str("no source has [source.reconcile]\n");
        }
        for s in &all.sources {
            let last = match &s.last {
                Some(r) => format!(
                    "last pass {} {}: {}",
                    time(r.started_at),
                    r.outcome.as_str(),
                    counts(r)
                ),
                None => "no pass yet".to_owned(),
            };
            text.push_str(&format!("{:<16} {:<32} {last}\n", s.source, s.target));
        }
        return Output::new(&all, text).print(json);
    };
    let query = api::ReconcileQuery { since, dry_run };
    let path = format!("/api/reconcile/{source}");
    let report: api::ReconcileReport = client
        .with_query(reqwest::Method::POST, &path, &query)
        .await?;
    let mut text = format!(
        "{} ({}){}: {} in {} ms, {}\n",
        report.source,
        report.target,
        if report.dry_run { ", dry run" } else { "" },
        counts(&report),
        report.took_ms,
        plural(u64::from(report.pages), "page", "pages"),
    );
    if let Some(active) = report.subscription_active {
        text.push_str(if active {
            "the provider still sends to this source\n"
        } else {
            "the provider has DISABLED this source's subscription: it sends nothing here\n"
        });
    }
    if !report.complete {
        text.push_str("stopped at its page limit: the next pass goes on from here\n");
    }
    let failed = report.error.clone();
    Output::new(&report, text).print(json)?;
    match failed {
        Some(error) => Err(fail(
            EXIT_FAILURE,
            anyhow!("the pass ended {}: {error}", report.outcome.as_str()),
        )),
        None => Ok(()),
    }
}

fn counts(r: &api::ReconcileReport) -> String {
    // A provider that lists nothing (Svix) is asked to resend what failed
    // in a span of time, and does not say how many.
    if r.recovers > 0 && r.listed == 0 {
        return format!(
            "asked {} time{} to resend what failed (the provider does not say how many)",
            r.recovers,
            if r.recovers == 1 { "" } else { "s" }
        );
    }
    let mut text = format!(
        "{} undelivered by the provider, {} held, {} asked to resend, {} fetched",
        r.listed, r.held, r.resent, r.fetched
    );
    if r.skipped > 0 {
        text.push_str(&format!(", {} not asked again", r.skipped));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::counts;
    use crate::api::{self, ReconcileOutcome, Timestamp};

    fn report(listed: u64, skipped: u64, recovers: u64) -> api::ReconcileReport {
        api::ReconcileReport {
            source: "s".into(),
            target: "t".into(),
            started_at: Timestamp(0),
            took_ms: 1,
            outcome: ReconcileOutcome::Ok,
            error: None,
            dry_run: false,
            listed,
            held: 1,
            resent: 2,
            fetched: 0,
            recovers,
            skipped,
            pages: 1,
            calls: 2,
            complete: true,
            subscription_active: None,
        }
    }

    #[test]
    fn a_pass_says_what_it_asked_in_the_provider_s_terms() {
        assert_eq!(
            counts(&report(4, 1, 0)),
            "4 undelivered by the provider, 1 held, 2 asked to resend, 0 fetched, \
             1 not asked again"
        );
        assert_eq!(
            counts(&report(0, 0, 1)),
            "asked 1 time to resend what failed (the provider does not say how many)"
        );
    }
}
