//! The text forms of values shared by the file, the environment and what
//! is shown: enum names, durations, sizes, and a URL with its credentials
//! redacted.

use std::time::Duration;

/// A value's text that is not of its shape. Each variant keeps the text as
/// written; the message says what would be accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// Not one of an enum's names; serde's message lists them.
    #[error("{cause}")]
    UnknownName {
        text: String,
        cause: serde::de::value::Error,
    },
    #[error("{text:?} is not a duration ({cause}); use e.g. \"500ms\", \"30s\", \"5m\", \"3d\"")]
    NotADuration {
        text: String,
        cause: humantime::DurationError,
    },
    #[error("unknown size unit {unit:?} in {text:?}; use B, KiB, MiB or GiB")]
    UnknownSizeUnit { text: String, unit: String },
    #[error("{text:?} is not a size; use e.g. \"512KiB\" or \"1MiB\"")]
    NotASize { text: String },
    /// More bytes than a `usize` holds.
    #[error("{text:?} is too large")]
    SizeTooLarge { text: String },
}

/// One of the names a serde enum of the file takes (`"json"`, `"stripe"`),
/// with the same error as in the file: "unknown variant `x`, expected …".
pub(super) fn parse_name<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ValueError> {
    use serde::de::IntoDeserializer;
    let deserializer: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
        text.into_deserializer();
    T::deserialize(deserializer).map_err(|cause| ValueError::UnknownName {
        text: text.to_owned(),
        cause,
    })
}

/// A URL as it may be shown in `config check`, a log line or the admin API:
/// scheme, host, port and path stay readable; the user info, the query and
/// the fragment, any of which may carry a credential (a password, an API
/// key), are replaced by `[redacted]`. This is the one function that decides
/// what of a configured URL is shown.
pub fn redact_url(url: &reqwest::Url) -> String {
    let mut shown = format!("{}://", url.scheme());
    if !url.username().is_empty() || url.password().is_some() {
        shown.push_str("[redacted]@");
    }
    shown.push_str(url.host_str().unwrap_or_default());
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(url.path());
    if url.query().is_some() {
        shown.push_str("?[redacted]");
    }
    if url.fragment().is_some() {
        shown.push_str("#[redacted]");
    }
    shown
}

/// Parses "30s", "5m", "3d", "250ms".
pub fn parse_duration(text: &str) -> Result<Duration, ValueError> {
    humantime::parse_duration(text.trim()).map_err(|cause| ValueError::NotADuration {
        text: text.to_owned(),
        cause,
    })
}

/// Parses "1048576", "512KiB", "1MiB", "64KB".
pub fn parse_size(text: &str) -> Result<usize, ValueError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let unit_bytes: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(ValueError::UnknownSizeUnit {
                text: text.to_owned(),
                unit: other.to_owned(),
            });
        }
    };
    let n: usize = digits
        .parse()
        .map_err(|e: std::num::ParseIntError| match e.kind() {
            // All digits, but more than a `usize` holds.
            std::num::IntErrorKind::PosOverflow => ValueError::SizeTooLarge {
                text: text.to_owned(),
            },
            _ => ValueError::NotASize {
                text: text.to_owned(),
            },
        })?;
    n.checked_mul(unit_bytes)
        .ok_or_else(|| ValueError::SizeTooLarge {
            text: text.to_owned(),
        })
}
