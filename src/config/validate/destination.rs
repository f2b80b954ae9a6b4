//! A source's destinations: the one-URL form or `[[source.destination]]`
//! tables, and each one's URL and transport (http(s) or NATS JetStream),
//! signing key, CA, forwarded headers, retry policy, breaker, ordering and
//! filter. The source's own keys are checked in `source.rs`.

use std::time::Duration;

use super::{Ctx, SecretSetting, longest};
use crate::config::raw::{self, CodeOrText, RawDestination, RawDestinations, RawSource, default};
use crate::config::{
    CaFile, ConfigError, DeliveryConfig, DeliveryFilter, GivenSecret, JetStreamTarget, Loaded,
    OrderingConfig, SecretPlan, SourceName, StatusPattern, SubjectTemplate, TypePattern,
};
use crate::standard_webhooks::{SigningKeys, StandardKey};

/// At most this many destinations per source: a delivery key per
/// destination is written with each event.
pub const MAX_DESTINATIONS: usize = 16;

/// The destinations of `source[i]`: the one-URL form (`destination = "…"`
/// with the delivery keys beside it, which all need it), or
/// `[[source.destination]]` tables (and then none of those keys beside).
pub(super) fn validate_destinations(
    cx: &mut Ctx<'_>,
    i: usize,
    source: &SourceName,
    rs: &mut RawSource,
) -> Result<Vec<DeliveryConfig<Loaded>>, ConfigError> {
    let (flat, set) = rs.take_flat_destination();
    let tables = match rs.destination.take() {
        None => {
            if let Some(k) = set.first() {
                return Err(cx.err(
                    format!("source[{i}].{k}"),
                    "applies only to a source with a destination",
                ));
            }
            return Ok(Vec::new());
        }
        Some(RawDestinations::Url(url)) => {
            let table = RawDestination {
                url: Some(url),
                ..flat
            };
            let key = |k: &str| format!("source[{i}].{}", raw::flat_key(k));
            return Ok(vec![validate_destination(cx, &key, source, table)?]);
        }
        Some(RawDestinations::Tables(tables)) => tables,
    };
    if let Some(k) = set.first() {
        return Err(cx.err(
            format!("source[{i}].{k}"),
            "cannot stand beside [[source.destination]] tables: set it in each table",
        ));
    }
    if tables.is_empty() {
        return Err(cx.err(
            format!("source[{i}].destination"),
            "holds no table: leave it out to hold events, or add a [[source.destination]] with a url",
        ));
    }
    if tables.len() > MAX_DESTINATIONS {
        return Err(cx.err(
            format!("source[{i}].destination"),
            format!("has {} tables: at most {MAX_DESTINATIONS}", tables.len()),
        ));
    }
    let mut out: Vec<DeliveryConfig<Loaded>> = Vec::new();
    for (j, table) in tables.into_iter().enumerate() {
        let key = |k: &str| format!("source[{i}].destination[{j}].{k}");
        let d = validate_destination(cx, &key, source, table)?;
        if out.iter().any(|o| o.route == d.route) {
            let message = match &d.name {
                Some(name) => format!("{name:?} names another destination of this source too"),
                None => "is left out in another table too: at most one destination goes \
                         without a name (it is named after its source)"
                    .to_owned(),
            };
            return Err(cx.err(key("name"), message));
        }
        out.push(d);
    }
    Ok(out)
}

/// One destination, from a table (or the one-URL form moved into one);
/// `key` names a table key the way the file wrote it.
fn validate_destination(
    cx: &mut Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    source: &SourceName,
    mut rs: RawDestination,
) -> Result<DeliveryConfig<Loaded>, ConfigError> {
    let name = match rs.name.take() {
        None => None,
        Some(name) => Some(SourceName::parse(&name).map_err(|_| {
            cx.err(
                key("name"),
                format!("{name:?} is not a valid destination name: use 1 to 64 characters of a-z, 0-9, '_' and '-'"),
            )
        })?),
    };
    let route = match &name {
        None => source.to_string(),
        Some(name) => format!("{source}.{name}"),
    };
    let name = name.map(|n| n.to_string());
    let (url, jetstream) = destination_transport(cx, key, &mut rs)?;

    let secret = destination_secret(cx, key, &mut rs)?;

    let ca = destination_ca(cx, key, &mut rs)?;
    let forward_headers = destination_forward_headers(cx, key, &mut rs)?;
    let duration = durations(cx, key);
    let (initial_interval, max_interval, retry_statuses, max_attempts) =
        destination_retry(cx, key, &mut rs)?;
    let max_concurrency = rs.max_concurrency.unwrap_or(default::MAX_CONCURRENCY);
    if !(1..=1024).contains(&max_concurrency) {
        return Err(cx.err(key("max_concurrency"), "must be between 1 and 1024"));
    }
    if let Some(rate) = rs.max_rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(cx.err(
            key("max_rate"),
            "must be a positive number of events per second",
        ));
    }
    let breaker_failures = rs.breaker_failures.unwrap_or(default::BREAKER_FAILURES);
    if breaker_failures == 0 {
        return Err(cx.err(key("breaker_failures"), "must be at least 1"));
    }
    let ordering = destination_ordering(cx, key, &mut rs)?;
    let filter = destination_filter(cx, key, &mut rs)?;
    Ok(DeliveryConfig {
        name,
        route,
        url,
        secret,
        ca,
        jetstream,
        filter,
        forward_headers,
        connect_timeout: duration(
            "connect_timeout",
            &rs.connect_timeout,
            default::CONNECT_TIMEOUT,
            longest::TIMEOUT,
        )?,
        timeout: duration("timeout", &rs.timeout, default::TIMEOUT, longest::TIMEOUT)?,
        initial_interval,
        max_interval,
        max_attempts,
        max_age: duration("max_age", &rs.max_age, default::MAX_AGE, longest::AGE)?,
        retry_statuses,
        max_concurrency,
        max_rate: rs.max_rate,
        paused: rs.paused.unwrap_or(default::PAUSED),
        ordering,
        breaker_failures,
        breaker_cooldown: duration(
            "breaker_cooldown",
            &rs.breaker_cooldown,
            default::BREAKER_COOLDOWN,
            longest::INTERVAL,
        )?,
    })
}

/// Reads a destination's duration setting: `duration(key, value, default,
/// longest)`, positive, `default` when left out, at most `longest`.
fn durations<'a>(
    cx: &'a Ctx<'_>,
    key: &'a dyn Fn(&str) -> String,
) -> impl Fn(&str, &Option<String>, &str, Duration) -> Result<Duration, ConfigError> + 'a {
    move |k, v, default, longest| cx.positive_duration(&key(k), v.as_deref(), default, longest)
}

/// Its `url` and what it names: an app over http(s), or NATS JetStream
/// (`nats://`, `tls://`) with its `subject` and `creds_file`.
fn destination_transport(
    cx: &Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    rs: &mut RawDestination,
) -> Result<(reqwest::Url, Option<JetStreamTarget>), ConfigError> {
    let Some(url) = rs.url.take() else {
        return Err(cx.err(key("url"), "is required: where this destination is"));
    };
    // The error names the key, not the text: a URL can hold a credential.
    let url =
        reqwest::Url::parse(&url).map_err(|e| cx.err(key("url"), format!("is not a URL: {e}")))?;
    let nats = match url.scheme() {
        "http" | "https" => false,
        "nats" | "tls" => true,
        other => {
            return Err(cx.err(
                key("url"),
                format!(
                    "scheme {other:?}: use http or https (an app), or nats or tls (NATS JetStream)"
                ),
            ));
        }
    };
    let jetstream = if nats {
        if url.host_str().is_none_or(str::is_empty) {
            return Err(cx.err(key("url"), "names no NATS server host"));
        }
        if rs.retry_statuses.is_some() {
            return Err(cx.err(
                key("retry_statuses"),
                "applies only to an http(s) destination: JetStream answers with an ack, not a status",
            ));
        }
        let template = rs
            .subject
            .take()
            .unwrap_or_else(|| default::DESTINATION_SUBJECT.to_owned());
        let subject = SubjectTemplate::parse(&template).map_err(|m| cx.err(key("subject"), m))?;
        let creds_file = match rs.creds_file.take() {
            None => None,
            Some(path) => {
                let path = cx.path(&path);
                std::fs::metadata(&path).map_err(|e| {
                    cx.err(
                        key("creds_file"),
                        format!("cannot read {}: {e}", path.display()),
                    )
                })?;
                Some(path)
            }
        };
        Some(JetStreamTarget {
            subject,
            creds_file,
        })
    } else {
        for (k, set) in [
            ("subject", rs.subject.is_some()),
            ("creds_file", rs.creds_file.is_some()),
        ] {
            if set {
                return Err(cx.err(key(k), "applies only to a nats:// (JetStream) destination"));
            }
        }
        None
    };
    Ok((url, jetstream))
}

/// The Standard Webhooks keys that sign its deliveries: given (a file one
/// a line, a variable whitespace-separated: two during a rotation, and
/// each delivery carries a signature by each), or left to the data dir.
fn destination_secret(
    cx: &mut Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    rs: &mut RawDestination,
) -> Result<SecretPlan<GivenSecret<SigningKeys>>, ConfigError> {
    let found = cx.read_secret(SecretSetting {
        key: key("secret"),
        inline: rs.secret.take().into_iter().collect(),
        env: rs.secret_env.take(),
        file: rs.secret_file.take(),
    })?;
    let Some(found) = found else {
        return Ok(SecretPlan::Generated);
    };
    // An inline key is taken trimmed, as the other places' are.
    let texts: Vec<&str> = found.pieces().into_iter().map(str::trim).collect();
    let keys = texts
        .iter()
        .map(|t| StandardKey::parse(t).map_err(|e| cx.err(&found.key, e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let count = keys.len();
    let value = SigningKeys::new(keys).ok_or_else(|| {
        cx.err(
            &found.key,
            format!(
                "holds {count} keys: give 1, or 2 while the app moves to a new one (at most {})",
                SigningKeys::MAX
            ),
        )
    })?;
    Ok(SecretPlan::Given(GivenSecret {
        value,
        origin: found.origin,
    }))
}

/// `ca_file`: extra trusted roots, read and checked to hold a certificate.
fn destination_ca(
    cx: &Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    rs: &mut RawDestination,
) -> Result<Option<CaFile>, ConfigError> {
    let ca = match rs.ca_file.take() {
        None => None,
        Some(path) => {
            let path = cx.path(&path);
            let pem = std::fs::read(&path).map_err(|e| {
                cx.err(
                    key("ca_file"),
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            match reqwest::Certificate::from_pem_bundle(&pem) {
                Ok(certs) if !certs.is_empty() => {}
                _ => {
                    return Err(cx.err(
                        key("ca_file"),
                        format!("{} holds no PEM certificate", path.display()),
                    ));
                }
            }
            Some(CaFile { path, pem })
        }
    };
    Ok(ca)
}

/// `forward_headers`: header names, warned about when one carries a
/// provider's signature, refused when hookinbox sets it itself.
fn destination_forward_headers(
    cx: &mut Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    rs: &mut RawDestination,
) -> Result<Vec<http::HeaderName>, ConfigError> {
    let forward_headers = match rs.forward_headers.take() {
        None => default::FORWARD_HEADERS.map(String::from).to_vec(),
        Some(names) => names,
    };
    let forward_headers = forward_headers
        .iter()
        .map(|h| {
            http::HeaderName::from_bytes(h.as_bytes()).map_err(|_| {
                cx.err(
                    key("forward_headers"),
                    format!("{h:?} is not a header name"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    for h in &forward_headers {
        if SIGNATURE_HEADERS.contains(&h.as_str()) {
            cx.warnings.push(format!(
                "{}: {} forwards {h}, a provider's signature: a retry, a delivery after a pause \
                 or a replay arrives later than the provider signed it, and SDKs refuse old \
                 signatures (Stripe's after 300 s), so the app would dead-letter them; have the \
                 app verify hookinbox's webhook-signature with a Standard Webhooks library instead \
                 (docs/verify/ in the source tree)",
                cx.origin,
                key("forward_headers")
            ));
        }
    }
    if let Some(h) = forward_headers.iter().find(|h| {
        let h = h.as_str();
        h.starts_with("webhook-") || h.starts_with("hookinbox-") || h == "content-type"
    }) {
        return Err(cx.err(
            key("forward_headers"),
            format!("{h:?} is one of the headers hookinbox sets itself on deliveries"),
        ));
    }
    Ok(forward_headers)
}

/// The retry policy: the intervals between attempts, the statuses that
/// are retried and the number of attempts.
fn destination_retry(
    cx: &Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    rs: &mut RawDestination,
) -> Result<(Duration, Duration, Vec<StatusPattern>, u32), ConfigError> {
    let duration = durations(cx, key);
    let initial_interval = duration(
        "initial_interval",
        &rs.initial_interval,
        default::INITIAL_INTERVAL,
        longest::RETRY_INTERVAL,
    )?;
    let max_interval = duration(
        "max_interval",
        &rs.max_interval,
        default::MAX_INTERVAL,
        longest::RETRY_INTERVAL,
    )?;
    if max_interval < initial_interval {
        return Err(cx.err(key("max_interval"), "must be at least initial_interval"));
    }
    let retry_statuses = match rs.retry_statuses.take() {
        None => default::RETRY_STATUSES.to_vec(),
        Some(list) => list
            .into_iter()
            .map(|c| match c {
                CodeOrText::Code(n) => StatusPattern::parse(&n.to_string()),
                CodeOrText::Text(t) => StatusPattern::parse(&t),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|m| cx.err(key("retry_statuses"), m))?,
    };
    if retry_statuses.iter().any(|p| p.matches(200)) {
        return Err(cx.err(
            key("retry_statuses"),
            "cannot include 2xx: those are deliveries",
        ));
    }
    let max_attempts = rs.max_attempts.unwrap_or(default::MAX_ATTEMPTS);
    if max_attempts == 0 {
        return Err(cx.err(key("max_attempts"), "must be at least 1"));
    }
    Ok((initial_interval, max_interval, retry_statuses, max_attempts))
}

/// `ordering_key` and `ordering_on_dead_letter`: one event at a time per key.
fn destination_ordering(
    cx: &Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    rs: &mut RawDestination,
) -> Result<Option<OrderingConfig>, ConfigError> {
    let ordering = match rs.ordering_key.take() {
        Some(pointer) if pointer.starts_with('/') => Some(OrderingConfig {
            pointer,
            on_dead_letter: rs
                .ordering_on_dead_letter
                .unwrap_or(default::ORDERING_ON_DEAD_LETTER),
        }),
        Some(pointer) => {
            return Err(cx.err(
                key("ordering_key"),
                format!("{pointer:?} is not a JSON pointer: it starts with \"/\", like \"/data/object/id\""),
            ));
        }
        None if rs.ordering_on_dead_letter.is_some() => {
            return Err(cx.err(key("ordering_on_dead_letter"), "needs ordering_key"));
        }
        None => None,
    };
    Ok(ordering)
}

/// `filter_types` and `filter_match`: which events it takes.
fn destination_filter(
    cx: &Ctx<'_>,
    key: &dyn Fn(&str) -> String,
    rs: &mut RawDestination,
) -> Result<Option<DeliveryFilter>, ConfigError> {
    let types = match rs.filter_types.take() {
        None => None,
        Some(list) if list.is_empty() => {
            return Err(cx.err(
                key("filter_types"),
                "is empty: it would filter out every event (leave it out to take every type)",
            ));
        }
        Some(list) => Some(
            list.iter()
                .map(|t| TypePattern::parse(t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| cx.err(key("filter_types"), m))?,
        ),
    };
    let matching = match rs.filter_match.take() {
        None => None,
        Some(text) => {
            match text.split_once('=') {
                Some((pointer, value)) if pointer.trim().starts_with('/') => {
                    Some((pointer.trim().to_owned(), value.trim().to_owned()))
                }
                _ => {
                    return Err(cx.err(
                    key("filter_match"),
                    format!("{text:?} is not /json/pointer=value, like \"/data/object/livemode=true\""),
                ));
                }
            }
        }
    };
    let filter =
        (types.is_some() || matching.is_some()).then_some(DeliveryFilter { types, matching });
    Ok(filter)
}

/// Headers that carry a provider's signature of the request (lowercase).
const SIGNATURE_HEADERS: [&str; 10] = [
    "stripe-signature",
    "x-hub-signature-256",
    "x-shopify-hmac-sha256",
    "x-slack-signature",
    "svix-signature",
    "paddle-signature",
    "linear-signature",
    "x-twilio-signature",
    "x-gitlab-token",
    "x-hub-signature",
];
