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
    format!(
        "{} undelivered by the provider, {} held, {} asked to resend, {} fetched",
        r.listed, r.held, r.resent, r.fetched
    )
}
