//! One `[[source]]`: its name, kind, signing secrets, tolerance, body cap,
//! event locators, public URL, Meta's verify token and the `hmac` kind's
//! keys and signed-payload template. Its destinations are checked in
//! `destination.rs`.

use std::time::Duration;

use super::destination::validate_destinations;
use super::reconcile::validate_reconcile;
use super::{Ctx, SecretSetting, SecretText, longest};
use crate::config::raw::{OneOrMany, RawSecretEntry, RawSource, default};
use crate::config::{
    ConfigError, GivenSecret, HmacSpec, Kind, Loaded, Locator, PayloadPart, RedactFor, Secret,
    SecretOrigin, SecretPlan, SourceConfig, SourceName, SourceSecret,
};
use crate::standard_webhooks::StandardKey;

/// `source[i]`, key by key in the order below; each step names its keys.
pub(super) fn validate_source(
    cx: &mut Ctx<'_>,
    i: usize,
    mut rs: RawSource,
) -> Result<SourceConfig<Loaded>, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let name = rs
        .name
        .as_deref()
        .ok_or_else(|| cx.err(key("name"), "is required"))?;
    let name = SourceName::parse(name).map_err(|m| cx.err(key("name"), m))?;
    let kind = rs.kind.ok_or_else(|| cx.err(key("kind"), "is required"))?;

    let secrets = source_secrets(cx, i, kind, &mut rs)?;

    let tolerance = source_tolerance(cx, i, kind, &rs)?;
    let expect_within = source_expect_within(cx, i, &rs)?;
    let max_body = cx.size(&key("max_body"), rs.max_body.take(), default::MAX_BODY)?;
    let event_id = source_locators(cx, i, "event_id", rs.event_id.take())?;
    let event_type = source_locators(cx, i, "event_type", rs.event_type.take())?;

    let public_url = source_public_url(cx, i, kind, &mut rs)?;
    let verify_token = validate_verify_token(cx, i, kind, &mut rs)?;
    let destinations = validate_destinations(cx, i, &name, &mut rs)?;
    let (redact, redact_for) = source_redact(cx, i, &mut rs)?;
    let reconcile = rs
        .reconcile
        .take()
        .map(|raw| validate_reconcile(cx, i, kind, raw))
        .transpose()?;

    if reconcile.is_some() && event_id.is_some() {
        return Err(cx.err(
            key("event_id"),
            "cannot be combined with [source.reconcile]: a pass matches what the provider \
             lists to what hookinbox holds by the provider's own event id",
        ));
    }
    let hmac = source_hmac(cx, i, kind, rs)?;
    if kind == Kind::Hmac && event_id.is_none() {
        return Err(cx.err(
            key("event_id"),
            "is required for kind = \"hmac\": e.g. [\"header:X-Event-Id\"], [\"json:/id\"] or [\"body-sha256\"]",
        ));
    }

    Ok(SourceConfig {
        name,
        kind,
        secrets,
        tolerance,
        expect_within,
        max_body,
        event_id,
        event_type,
        public_url,
        verify_token,
        destinations,
        hmac,
        reconcile,
        redact,
        redact_for,
    })
}

/// `source[i].redact`: JSON pointers, at most [`MAX_REDACT`]; and
/// `redact_for`, which needs them.
fn source_redact(
    cx: &Ctx<'_>,
    i: usize,
    rs: &mut RawSource,
) -> Result<(Vec<crate::redact::Pattern>, RedactFor), ConfigError> {
    let texts = rs.redact.take().unwrap_or_default();
    if texts.len() > MAX_REDACT {
        return Err(cx.err(
            format!("source[{i}].redact"),
            format!("has {} pointers: at most {MAX_REDACT}", texts.len()),
        ));
    }
    let patterns = texts
        .iter()
        .enumerate()
        .map(|(j, t)| {
            crate::redact::Pattern::parse(t)
                .map_err(|e| cx.err(format!("source[{i}].redact[{j}]"), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let redact_for = rs.redact_for.take();
    if redact_for.is_some() && patterns.is_empty() {
        return Err(cx.err(
            format!("source[{i}].redact_for"),
            "needs redact: the JSON pointers to mask",
        ));
    }
    Ok((patterns, redact_for.unwrap_or_default()))
}

/// The most `redact` pointers a source may have.
const MAX_REDACT: usize = 64;

/// `source[i]`'s signing secrets: inline (`secret`, `secrets`), in a
/// variable or a file, in `[[source.secrets]]` tables (one each, named, with
/// an expiry), or left to `generate_secret`.
fn source_secrets(
    cx: &mut Ctx<'_>,
    i: usize,
    kind: Kind,
    rs: &mut RawSource,
) -> Result<SecretPlan<Vec<SourceSecret>>, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let (mut inline, mut tables) = (Vec::new(), Vec::new());
    inline.extend(rs.secret.take());
    for entry in rs.secrets.take().into_iter().flatten() {
        match entry {
            RawSecretEntry::Text(text) => inline.push(text),
            RawSecretEntry::Table(table) => tables.push(table),
        }
    }
    let found = cx.read_secrets(SecretSetting {
        key: key("secret"),
        inline,
        env: rs.secret_env.take(),
        file: rs.secret_file.take(),
    })?;
    // Unnamed: named after where they are kept, below.
    let mut secrets: Vec<(Option<String>, SourceSecret)> = Vec::new();
    for place in found {
        for text in secret_texts(cx, kind, &place)? {
            secrets.push((None, unnamed(place.origin.clone(), text)));
        }
    }
    for (j, table) in tables.into_iter().enumerate() {
        let at = key(&format!("secrets[{j}]"));
        let place = cx
            .read_secret(SecretSetting {
                key: format!("{at}.secret"),
                inline: table.secret.into_iter().collect(),
                env: table.secret_env,
                file: table.secret_file,
            })?
            .ok_or_else(|| cx.err(&at, "has no secret: set secret_file, secret_env or secret"))?;
        let text = match secret_texts(cx, kind, &place)?.as_slice() {
            [one] => one.clone(),
            many => {
                return Err(cx.err(
                    &place.key,
                    format!(
                        "holds {} secrets: a [[source.secrets]] table names one",
                        many.len()
                    ),
                ));
            }
        };
        let name = table
            .name
            .map(|n| secret_name(&n).ok_or_else(|| cx.err(format!("{at}.name"), NAME_RULE)))
            .transpose()?;
        let expires = table
            .expires
            .map(|text| expiry(&text).ok_or_else(|| cx.err(format!("{at}.expires"), EXPIRES_RULE)))
            .transpose()?;
        let mut secret = unnamed(place.origin, text);
        secret.table = true;
        secret.expires = expires;
        secrets.push((name, secret));
    }
    let generate = rs.generate_secret.unwrap_or(default::GENERATE_SECRET);
    if generate && !secrets.is_empty() {
        return Err(cx.err(
            key("generate_secret"),
            "cannot be combined with secret, secrets, secret_env or secret_file",
        ));
    }
    if !generate && secrets.is_empty() {
        return Err(cx.err(
            format!("source[{i}]"),
            "has no secret: set secret_file, secret_env or generate_secret = true",
        ));
    }
    if secrets.len() > MAX_SECRETS {
        return Err(cx.err(
            format!("source[{i}]"),
            format!("has {} secrets: at most {MAX_SECRETS}", secrets.len()),
        ));
    }
    if generate {
        return Ok(SecretPlan::Generated);
    }
    let secrets = named(cx, i, secrets)?;
    for s in &secrets {
        if let Some(at) = s.expires.filter(|at| at.0 <= cx.now_ms) {
            cx.warnings.push(format!(
                "{}: source[{i}]'s secret {:?} expired at {at}: it verifies nothing; remove it",
                cx.origin, s.name
            ));
        }
    }
    Ok(SecretPlan::Given(secrets))
}

/// The most secrets a source may have: a rotation needs two.
const MAX_SECRETS: usize = 16;
const NAME_RULE: &str = "use 1 to 64 characters of a-z, A-Z, 0-9, '.', '_', ':', '@' and '-'";
const EXPIRES_RULE: &str =
    "is not a time: use RFC 3339 (2026-12-31T00:00:00Z) or a date (2026-12-31, midnight UTC)";

/// The secrets one place holds: a file one a line, a variable
/// whitespace-separated ones; each one the kind can use.
fn secret_texts(
    cx: &mut Ctx<'_>,
    kind: Kind,
    place: &SecretText,
) -> Result<Vec<String>, ConfigError> {
    let texts = place.pieces();
    if texts.is_empty() || texts.iter().any(|t| t.is_empty()) {
        let what = match &place.origin {
            SecretOrigin::File(path) => format!("{} holds no secret", path.display()),
            SecretOrigin::Env(var) => format!("environment variable {var} is set but empty"),
            SecretOrigin::Inline => "is empty".to_owned(),
        };
        return Err(cx.err(&place.key, what));
    }
    for text in &texts {
        if ["sk_live_", "sk_test_", "rk_live_", "rk_test_"]
            .iter()
            .any(|p| text.starts_with(p))
        {
            cx.warnings.push(format!(
                "{}: {} looks like a Stripe API key, not a webhook signing secret: \
                 Stripe signs webhooks with the endpoint's secret (whsec_…, in the \
                 dashboard under Developers → Webhooks); keep API keys out of hookinbox",
                cx.origin, place.key
            ));
        }
        // Refused here, naming the key, rather than by the verifier at start.
        if kind == Kind::Standard {
            StandardKey::parse(text).map_err(|e| cx.err(&place.key, e.to_string()))?;
        }
    }
    Ok(texts.into_iter().map(str::to_owned).collect())
}

fn unnamed(origin: SecretOrigin, text: String) -> SourceSecret {
    SourceSecret {
        name: String::new(),
        table: false,
        origin,
        expires: None,
        value: Secret::new(text),
    }
}

/// `text` as a secret's name, if it is one.
fn secret_name(text: &str) -> Option<String> {
    let ok = (1..=64).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:@".contains(&b));
    ok.then(|| text.to_owned())
}

/// An `expires`: RFC 3339 (any offset), or a date at midnight UTC.
fn expiry(text: &str) -> Option<crate::api::Timestamp> {
    let full = match text.len() {
        10 => format!("{text}T00:00:00Z"),
        _ => text.to_owned(),
    };
    full.parse().ok()
}

/// Each secret with its name: the given one, or where it is kept (the
/// file's name, `$VAR`, `inline`), with `:2`, `:3`… for the second and
/// third from one place. Names are unique within the source.
fn named(
    cx: &Ctx<'_>,
    i: usize,
    secrets: Vec<(Option<String>, SourceSecret)>,
) -> Result<Vec<SourceSecret>, ConfigError> {
    let place = |s: &SourceSecret| -> String {
        let raw = match &s.origin {
            SecretOrigin::File(path) => path
                .file_name()
                .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned()),
            SecretOrigin::Env(var) => format!("${var}"),
            SecretOrigin::Inline => "inline".to_owned(),
        };
        let kept: String = raw
            .chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || ".-_:@$".contains(c) {
                    true => c,
                    false => '_',
                },
            )
            .take(60)
            .collect();
        kept
    };
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(secrets.len());
    let mut names = std::collections::HashSet::new();
    for (given, mut secret) in secrets {
        secret.name = match given {
            Some(name) => name,
            None => {
                let base = place(&secret);
                let n = seen.entry(base.clone()).or_default();
                *n += 1;
                match *n {
                    1 => base,
                    n => format!("{base}:{n}"),
                }
            }
        };
        if !names.insert(secret.name.clone()) {
            return Err(cx.err(
                format!("source[{i}].secrets"),
                format!(
                    "two secrets are named {:?}: give each [[source.secrets]] table a name of its own",
                    secret.name
                ),
            ));
        }
        out.push(secret);
    }
    Ok(out)
}

/// `source[i].tolerance`, and the warning when its kind signs no timestamp.
fn source_tolerance(
    cx: &mut Ctx<'_>,
    i: usize,
    kind: Kind,
    rs: &RawSource,
) -> Result<Option<Duration>, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let tolerance = rs
        .tolerance
        .as_deref()
        .map(|t| cx.duration(&key("tolerance"), Some(t), t, longest::TOLERANCE))
        .transpose()?;
    let signs_time = match kind {
        Kind::Github | Kind::Shopify | Kind::Gitlab | Kind::Twilio | Kind::Meta => false,
        Kind::Hmac => rs.timestamp_header.is_some(),
        _ => true,
    };
    if tolerance.is_some() && !signs_time {
        cx.warnings.push(format!(
            "{}: {} has no effect: {} signs no timestamp, so there is no age to check \
             (dedupe by event id is the replay defence)",
            cx.origin,
            key("tolerance"),
            kind.as_str()
        ));
    }
    Ok(tolerance)
}

/// `source[i].expect_within`: longer than 0, at most 2 months (a monthly
/// sender). Hours suit most providers; seconds are allowed (a test, a
/// sender that beats every few seconds).
fn source_expect_within(
    cx: &mut Ctx<'_>,
    i: usize,
    rs: &RawSource,
) -> Result<Option<Duration>, ConfigError> {
    let key = format!("source[{i}].expect_within");
    rs.expect_within
        .as_deref()
        .map(|text| cx.positive_duration(&key, Some(text), text, longest::EXPECT_WITHIN))
        .transpose()
}

/// `source[i].event_id` or `.event_type`: one place or a list of them.
fn source_locators(
    cx: &Ctx<'_>,
    i: usize,
    field: &str,
    value: Option<OneOrMany>,
) -> Result<Option<Vec<Locator>>, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let Some(value) = value else { return Ok(None) };
    let texts = match value {
        OneOrMany::One(text) => vec![text],
        OneOrMany::Many(texts) => texts,
    };
    let list = texts
        .iter()
        .map(|t| Locator::parse(t).map_err(|m| cx.err(key(field), m)))
        .collect::<Result<Vec<_>, _>>()?;
    if list.is_empty() {
        return Err(cx.err(key(field), "must name at least one place"));
    }
    Ok(Some(list))
}

/// `source[i].public_url`: required for twilio, which signs it.
fn source_public_url(
    cx: &Ctx<'_>,
    i: usize,
    kind: Kind,
    rs: &mut RawSource,
) -> Result<Option<String>, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let public_url = match rs.public_url.take() {
        Some(u) => {
            reqwest::Url::parse(&u)
                .map_err(|e| cx.err(key("public_url"), format!("is not a URL: {e}")))?;
            Some(u)
        }
        None if kind == Kind::Twilio => {
            return Err(cx.err(
                key("public_url"),
                "is required for twilio: the URL Twilio calls, which it signs",
            ));
        }
        None => None,
    };
    Ok(public_url)
}

/// The `hmac` kind's keys: checked for kind `hmac`, refused for any other.
fn source_hmac(
    cx: &Ctx<'_>,
    i: usize,
    kind: Kind,
    rs: RawSource,
) -> Result<Option<HmacSpec>, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let hmac_keys = [
        ("signature_header", rs.signature_header.is_some()),
        ("algorithm", rs.algorithm.is_some()),
        ("encoding", rs.encoding.is_some()),
        ("prefix", rs.prefix.is_some()),
        ("signed_payload", rs.signed_payload.is_some()),
        ("timestamp_header", rs.timestamp_header.is_some()),
    ];
    let hmac = if kind == Kind::Hmac {
        Some(validate_hmac(cx, i, rs)?)
    } else {
        if let Some((k, _)) = hmac_keys.iter().find(|(_, set)| *set) {
            return Err(cx.err(
                key(k),
                format!("applies only to kind = \"hmac\", not {kind}"),
            ));
        }
        None
    };
    Ok(hmac)
}

/// Meta's verify token: required for kind `meta` (Meta will not subscribe
/// a URL that fails its check), refused for every other kind.
fn validate_verify_token(
    cx: &mut Ctx<'_>,
    i: usize,
    kind: Kind,
    rs: &mut RawSource,
) -> Result<Option<GivenSecret<Secret>>, ConfigError> {
    let key = format!("source[{i}].verify_token");
    let found = cx.read_secret(SecretSetting {
        key: key.clone(),
        inline: rs.verify_token.take().into_iter().collect(),
        env: rs.verify_token_env.take(),
        file: rs.verify_token_file.take(),
    })?;
    match (kind, found) {
        (Kind::Meta, None) => Err(cx.err(
            key,
            "is required for kind = \"meta\": the Verify Token typed into the app's webhook \
             settings, which Meta sends back to check the URL (set verify_token_file or \
             verify_token_env)",
        )),
        (Kind::Meta, Some(found)) => {
            let text = found.text.trim();
            if text.is_empty() {
                return Err(cx.err(found.key, "is empty"));
            }
            Ok(Some(GivenSecret {
                origin: found.origin,
                value: Secret::new(text),
            }))
        }
        (_, None) => Ok(None),
        (_, Some(found)) => Err(cx.err(
            found.key,
            format!("applies only to kind = \"meta\", not {kind}"),
        )),
    }
}

fn validate_hmac(cx: &Ctx<'_>, i: usize, rs: RawSource) -> Result<HmacSpec, ConfigError> {
    let key = |k: &str| format!("source[{i}].{k}");
    let header = |k: &str, v: &str| {
        http::HeaderName::from_bytes(v.as_bytes())
            .map_err(|_| cx.err(key(k), format!("{v:?} is not a header name")))
    };
    let signature_header = rs
        .signature_header
        .as_deref()
        .ok_or_else(|| cx.err(key("signature_header"), "is required for kind = \"hmac\""))?;
    let signature_header = header("signature_header", signature_header)?;
    let timestamp_header = rs
        .timestamp_header
        .as_deref()
        .map(|v| header("timestamp_header", v))
        .transpose()?;
    let template = rs
        .signed_payload
        .as_deref()
        .unwrap_or(default::SIGNED_PAYLOAD);
    let signed_payload = parse_template(template).map_err(|m| cx.err(key("signed_payload"), m))?;
    if !signed_payload.contains(&PayloadPart::Body) {
        return Err(cx.err(
            key("signed_payload"),
            "must include {body}: a signature that does not cover the body proves nothing",
        ));
    }
    if signed_payload.contains(&PayloadPart::Timestamp) && timestamp_header.is_none() {
        return Err(cx.err(
            key("timestamp_header"),
            "is required when signed_payload uses {timestamp}",
        ));
    }
    Ok(HmacSpec {
        signature_header,
        algorithm: rs.algorithm.unwrap_or(default::ALGORITHM),
        encoding: rs.encoding.unwrap_or(default::ENCODING),
        prefix: rs.prefix.unwrap_or_else(|| default::PREFIX.to_owned()),
        signed_payload,
        timestamp_header,
    })
}

/// A `signed_payload` template that [`parse_template`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum TemplateError {
    #[error("unclosed '{{' in {template:?}")]
    Unclosed { template: String },
    #[error("{name:?} is not a header name")]
    HeaderName { name: String },
    #[error("unknown placeholder {{{name}}}: use {{body}}, {{timestamp}} or {{header:Name}}")]
    UnknownPlaceholder { name: String },
}

/// Parses a template such as `"{timestamp}.{body}"` or
/// `"{header:Twitch-Eventsub-Message-Id}{header:Twitch-Eventsub-Message-Timestamp}{body}"`.
fn parse_template(template: &str) -> Result<Vec<PayloadPart>, TemplateError> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(PayloadPart::Literal(rest[..open].to_owned()));
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| TemplateError::Unclosed {
                template: template.to_owned(),
            })?
            + open;
        let name = &rest[open + 1..close];
        parts.push(match name {
            "body" => PayloadPart::Body,
            "timestamp" => PayloadPart::Timestamp,
            _ => match name.strip_prefix("header:") {
                Some(h) => PayloadPart::Header(
                    http::HeaderName::from_bytes(h.as_bytes())
                        .map_err(|_| TemplateError::HeaderName { name: h.to_owned() })?,
                ),
                None => {
                    return Err(TemplateError::UnknownPlaceholder {
                        name: name.to_owned(),
                    });
                }
            },
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(PayloadPart::Literal(rest.to_owned()));
    }
    Ok(parts)
}
