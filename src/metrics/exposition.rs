//! The two text formats of `/metrics`: which one a scrape asked for, and
//! Prometheus text 0.0.4 made from the OpenMetrics the registry writes.
//!
//! Owns content negotiation (`Exposition::negotiate`) and the rewrite of
//! family names and comment lines between the formats; refuses to touch a
//! sample line, so both formats carry the same numbers. What is in the
//! registry is `registry`'s; `Metrics::encode` (in `record`) joins the two.

/// The text format a scraper gets from [`Metrics::encode`](super::Metrics::encode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus text format 0.0.4: what every scraper and parser reads.
    Prometheus,
    /// OpenMetrics 1.0.0, for a scraper that asks for it.
    OpenMetrics,
}

impl Exposition {
    /// The format an `Accept` header prefers: OpenMetrics only when it is
    /// acceptable with a higher quality than the classic text (Prometheus
    /// itself asks for both, OpenMetrics first); 0.0.4 otherwise, and
    /// without a header.
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let Some(accept) = accept else {
            return Exposition::Prometheus;
        };
        let (mut openmetrics, mut text) = (0.0f32, 0.0f32);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics > text {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// OpenMetrics text → Prometheus text 0.0.4, for what this registry writes:
/// a counter family `x` (samples `x_total`) is declared as `x_total`, as the
/// classic format names a family by its samples; `# UNIT` and `# EOF` have no
/// classic form and are left out; samples stay as they are.
pub(super) fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ');
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (suffix, kind) = match kind {
                "counter" => ("_total", "counter"),
                "info" => ("_info", "gauge"),
                "gauge" | "histogram" | "summary" => ("", kind),
                _ => ("", "untyped"),
            };
            if let Some((help_name, text)) = help.take().filter(|(n, _)| *n == name) {
                out.push_str(&format!("# HELP {help_name}{suffix} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name}{suffix} {kind}\n"));
            continue;
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
