//! The `[telemetry]` section: where traces go, what they are called, how
//! many events are traced, and the link to one. The `OTEL_*` variables the
//! exporter and the SDK read are theirs; this file checks the file's keys.

use super::Ctx;
use crate::config::raw::RawTelemetry;
use crate::config::{ConfigError, TelemetryConfig};

/// What `trace_url` must hold, replaced by a trace's id.
pub const TRACE_ID_FIELD: &str = "{trace_id}";

pub(super) fn validate_telemetry(
    cx: &Ctx<'_>,
    rt: RawTelemetry,
) -> Result<TelemetryConfig, ConfigError> {
    let endpoint = rt
        .endpoint
        .map(|text| {
            reqwest::Url::parse(&text)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
                .ok_or_else(|| {
                    cx.err(
                        "telemetry.endpoint",
                        "must be an http(s) URL: the OTLP/HTTP receiver, as http://127.0.0.1:4318",
                    )
                })
        })
        .transpose()?;
    let sample_ratio = rt.sample_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sample_ratio) {
        return Err(cx.err(
            "telemetry.sample_ratio",
            "must be from 0 (no event traced) to 1 (every event)",
        ));
    }
    if let Some(name) = &rt.service_name
        && (name.trim().is_empty() || name.chars().any(char::is_control))
    {
        return Err(cx.err(
            "telemetry.service_name",
            "must be a name without control characters",
        ));
    }
    if let Some(template) = &rt.trace_url {
        let example = template.replace(TRACE_ID_FIELD, "0af7651916cd43dd8448eb211c80319c");
        let valid = reqwest::Url::parse(&example)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
        if !template.contains(TRACE_ID_FIELD) || !valid {
            return Err(cx.err(
                "telemetry.trace_url",
                format!("must be an http(s) URL with {TRACE_ID_FIELD} where the trace's id goes"),
            ));
        }
    }
    if let Some(key) = rt
        .resource
        .keys()
        .find(|k| k.is_empty() || k.chars().any(|c| c.is_control() || c == ' '))
    {
        return Err(cx.err(
            format!("telemetry.resource.{key}"),
            "an attribute's name has no spaces or control characters",
        ));
    }
    Ok(TelemetryConfig {
        endpoint,
        service_name: rt.service_name,
        sample_ratio,
        trace_url: rt.trace_url,
        resource: rt.resource,
    })
}
