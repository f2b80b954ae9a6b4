//! The `[alerts]` section: its webhook, thresholds and intervals. Nothing
//! else; the sections it watches are checked in their own files.

use std::time::Duration;

use super::{Ctx, longest};
use crate::config::raw::{RawAlerts, default};
use crate::config::{AlertConfig, ConfigError};

pub(super) fn validate_alerts(cx: &Ctx<'_>, ra: RawAlerts) -> Result<AlertConfig, ConfigError> {
    let text = ra
        .url
        .as_deref()
        .ok_or_else(|| cx.err("alerts.url", "is required in [alerts]"))?;
    let url = reqwest::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| cx.err("alerts.url", "must be an http(s) URL"))?;
    let positive = |key: &str, value: Option<String>, default: &str, longest: Duration| {
        cx.positive_duration(key, value.as_deref(), default, longest)
    };
    Ok(AlertConfig {
        url,
        dlq_threshold: ra.dlq_threshold.unwrap_or(default::DLQ_THRESHOLD),
        pending_age: positive(
            "alerts.pending_age",
            ra.pending_age,
            default::PENDING_AGE,
            longest::AGE,
        )?,
        min_interval: positive(
            "alerts.min_interval",
            ra.min_interval,
            default::MIN_INTERVAL,
            longest::RETRY_INTERVAL,
        )?,
        check_interval: positive(
            "alerts.check_interval",
            ra.check_interval,
            default::CHECK_INTERVAL,
            longest::INTERVAL,
        )?,
        secret_notice: positive(
            "alerts.secret_notice",
            ra.secret_notice,
            default::SECRET_NOTICE,
            longest::AGE,
        )?,
        format: ra.format.unwrap_or(default::ALERT_FORMAT),
        host: match ra.host {
            Some(host) if host.trim().is_empty() || host.chars().any(char::is_control) => {
                return Err(cx.err("alerts.host", "must be a name without control characters"));
            }
            host => host,
        },
        dashboard_url: ra
            .dashboard_url
            .map(|text| {
                reqwest::Url::parse(&text)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
                    .ok_or_else(|| cx.err("alerts.dashboard_url", "must be an http(s) URL"))
            })
            .transpose()?,
    })
}
