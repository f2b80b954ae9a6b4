//! `[source.reconcile]`: which provider API a pass asks (by the source's
//! kind), its credential, interval, lookback and API root.

use std::time::Duration;

use super::{Ctx, SecretSetting, longest};
use crate::config::raw::{RawReconcile, default};
use crate::config::reconcile::{AppKey, GithubHook, GitlabHook, ReconcileConfig, Target};
use crate::config::{ConfigError, GivenSecret, Kind, Secret};

/// 90 days for a first pass's lookback: longer than any provider keeps what
/// it could not deliver (Stripe's events, 30 days).
const LONGEST_LOOKBACK: Duration = Duration::from_secs(90 * 86_400);
/// 14 days: Svix refuses to recover messages older.
const SVIX_LONGEST: Duration = Duration::from_secs(14 * 86_400);
/// A pass at most every second: a provider's rate limit is shared with the
/// app's own calls.
const SHORTEST_INTERVAL: Duration = Duration::from_secs(1);

/// What a provider keeps and where its API is, by kind.
struct Provider {
    /// How long the provider lists what it could not deliver.
    window: &'static str,
    /// How far back it can be asked at most.
    longest: Duration,
    api_base: &'static str,
    /// The keys of `[source.reconcile]` this provider reads, beside the
    /// common ones; any other provider's key is refused.
    keys: &'static [&'static str],
}

fn provider(kind: Kind) -> Option<Provider> {
    match kind {
        // "You can see deliveries from the past 3 days" (GitHub docs,
        // "Viewing webhook deliveries").
        Kind::Github => Some(Provider {
            window: "3d",
            longest: LONGEST_LOOKBACK,
            api_base: "https://api.github.com",
            keys: &["hook", "app_id", "private_key_file"],
        }),
        // "All events are kept for 30 days" (Stripe API, "List all events").
        Kind::Stripe => Some(Provider {
            window: "30d",
            longest: LONGEST_LOOKBACK,
            api_base: "https://api.stripe.com",
            keys: &["endpoint"],
        }),
        // "Get a list of events for a specific project webhook in the past
        // 7 days from start date" (GitLab docs, "Project webhooks API": "Get
        // a list of project webhook events"; the same for groups).
        Kind::Gitlab => Some(Provider {
            window: "7d",
            longest: LONGEST_LOOKBACK,
            api_base: "https://gitlab.com/api/v4",
            keys: &["hook"],
        }),
        // "Notifications older than 90 days aren't retained" (Paddle API,
        // "List notifications").
        Kind::Paddle => Some(Provider {
            window: "90d",
            longest: LONGEST_LOOKBACK,
            api_base: "https://api.paddle.com",
            keys: &["notification_setting"],
        }),
        // A sender on Svix: "Cannot recover messages more than 14 days old"
        // (svix-server, the recover endpoint; Svix API, "Recover Failed
        // Webhooks", `POST /api/v1/app/{app_id}/endpoint/{endpoint_id}/recover`).
        Kind::Standard => Some(Provider {
            window: "14d",
            longest: SVIX_LONGEST,
            api_base: "https://api.svix.com",
            keys: &["app", "endpoint"],
        }),
        _ => None,
    }
}

/// Every provider-specific key of `[source.reconcile]` and whether it is set.
fn provider_keys(raw: &RawReconcile) -> [(&'static str, bool); 6] {
    [
        ("hook", raw.hook.is_some()),
        ("endpoint", raw.endpoint.is_some()),
        ("notification_setting", raw.notification_setting.is_some()),
        ("app", raw.app.is_some()),
        ("app_id", raw.app_id.is_some()),
        ("private_key_file", raw.private_key_file.is_some()),
    ]
}

/// `source[i].reconcile`, for a source of `kind`.
pub(super) fn validate_reconcile(
    cx: &mut Ctx<'_>,
    i: usize,
    kind: Kind,
    raw: RawReconcile,
) -> Result<ReconcileConfig, ConfigError> {
    let key = |k: &str| format!("source[{i}].reconcile.{k}");
    let Some(provider) = provider(kind) else {
        return Err(cx.err(
            format!("source[{i}].reconcile"),
            format!(
                "is not available for kind = \"{kind}\": hookinbox asks the APIs of github, \
                 gitlab, paddle, stripe and svix (kind standard) for what never arrived"
            ),
        ));
    };
    let interval = cx.positive_duration(
        &key("interval"),
        raw.interval.as_deref(),
        default::RECONCILE_INTERVAL,
        longest::INTERVAL,
    )?;
    if interval < SHORTEST_INTERVAL {
        return Err(cx.err(key("interval"), "must be at least 1s"));
    }
    let lookback = cx.positive_duration(
        &key("lookback"),
        raw.lookback.as_deref(),
        provider.window,
        provider.longest,
    )?;
    let api_base = api_base(cx, i, raw.api_base.as_deref().unwrap_or(provider.api_base))?;
    let refuse = |cx: &Ctx<'_>, k: &str, set: bool| {
        if set {
            Err(cx.err(key(k), format!("applies to another provider, not {kind}")))
        } else {
            Ok(())
        }
    };
    for (k, set) in provider_keys(&raw) {
        refuse(cx, k, set && !provider.keys.contains(&k))?;
    }
    if kind == Kind::Github {
        if raw.hook.as_deref() == Some("app") {
            return Ok(ReconcileConfig {
                target: github_app(cx, i, &raw)?,
                interval,
                lookback,
                api_base,
            });
        }
        for (k, set) in [
            ("app_id", raw.app_id.is_some()),
            ("private_key_file", raw.private_key_file.is_some()),
        ] {
            if set {
                return Err(cx.err(
                    key(k),
                    "applies only to hook = \"app\", a GitHub App's webhook",
                ));
            }
        }
    }
    let token = token(cx, i, &raw)?;
    let target = match kind {
        Kind::Github => {
            let hook = raw.hook.as_deref().ok_or_else(|| {
                cx.err(
                    key("hook"),
                    "is required for github: \"repos/OWNER/REPO/hooks/ID\", \"orgs/ORG/hooks/ID\" \
                     or \"app\"",
                )
            })?;
            let hook = GithubHook::parse(hook).map_err(|m| cx.err(key("hook"), m))?;
            Target::GithubHook { hook, token }
        }
        Kind::Stripe => {
            let endpoint = raw
                .endpoint
                .map(|e| provider_id(cx, &key("endpoint"), e, "we_", "Stripe webhook endpoint"))
                .transpose()?;
            Target::Stripe { token, endpoint }
        }
        Kind::Gitlab => {
            let hook = raw.hook.as_deref().ok_or_else(|| {
                cx.err(
                    key("hook"),
                    "is required for gitlab: \"projects/ID/hooks/ID\" or \"groups/ID/hooks/ID\"",
                )
            })?;
            let hook = GitlabHook::parse(hook).map_err(|m| cx.err(key("hook"), m))?;
            Target::GitlabHook { hook, token }
        }
        Kind::Paddle => {
            let notification_setting = raw
                .notification_setting
                .map(|id| {
                    provider_id(
                        cx,
                        &key("notification_setting"),
                        id,
                        "ntfset_",
                        "Paddle notification destination",
                    )
                })
                .transpose()?;
            if notification_setting.is_none() {
                cx.warnings.push(format!(
                    "{}: {} is not set: a pass replays the failed notifications of every \
                     notification destination of the Paddle account, each to its own \
                     destination; set it to the ntfset_… that sends to this source",
                    cx.origin,
                    key("notification_setting")
                ));
            }
            Target::Paddle {
                token,
                notification_setting,
            }
        }
        Kind::Standard => {
            let required = |k: &str, value: Option<String>, prefix: &str, what: &str| {
                let value = value.ok_or_else(|| {
                    cx.err(
                        key(k),
                        format!(
                            "is required for kind = \"standard\": the Svix {what} id \
                             ({prefix}…) that sends to this source"
                        ),
                    )
                })?;
                provider_id(cx, &key(k), value, prefix, &format!("Svix {what}"))
            };
            let app = required("app", raw.app, "app_", "application")?;
            let endpoint = required("endpoint", raw.endpoint, "ep_", "endpoint")?;
            Target::Svix {
                token,
                app,
                endpoint,
            }
        }
        _ => unreachable!("provider() answers only the kinds matched here"),
    };
    Ok(ReconcileConfig {
        target,
        interval,
        lookback,
        api_base,
    })
}

/// `hook = "app"`: a GitHub App's ID and private key, the key read and
/// checked now, so one that cannot sign is a config error, not a pass that
/// fails. A token does not apply: the App signs its own JWT.
fn github_app(cx: &Ctx<'_>, i: usize, raw: &RawReconcile) -> Result<Target, ConfigError> {
    let key = |k: &str| format!("source[{i}].reconcile.{k}");
    for (k, set) in [
        ("token", raw.token.is_some()),
        ("token_env", raw.token_env.is_some()),
        ("token_file", raw.token_file.is_some()),
    ] {
        if set {
            return Err(cx.err(
                key(k),
                "does not apply to hook = \"app\": a GitHub App's calls carry a JWT that \
                 private_key_file signs",
            ));
        }
    }
    let app_id = raw.app_id.ok_or_else(|| {
        cx.err(
            key("app_id"),
            "is required for hook = \"app\": the App's ID, on its settings page",
        )
    })?;
    if app_id == 0 {
        return Err(cx.err(key("app_id"), "must be the App's ID, a positive number"));
    }
    let file = raw.private_key_file.as_deref().ok_or_else(|| {
        cx.err(
            key("private_key_file"),
            "is required for hook = \"app\": the App's private key (a .pem file generated \
             on its settings page)",
        )
    })?;
    let app_key = AppKey::read(&cx.path(file)).map_err(|m| cx.err(key("private_key_file"), m))?;
    Ok(Target::GithubApp {
        app_id,
        key: app_key,
    })
}

/// An id the provider gave (`we_…`, `ntfset_…`, `app_…`): its prefix, then letters,
/// digits and `_`, as the provider writes them.
fn provider_id(
    cx: &Ctx<'_>,
    key: &str,
    id: String,
    prefix: &str,
    what: &str,
) -> Result<String, ConfigError> {
    let ok = id.len() > prefix.len()
        && id.starts_with(prefix)
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(id)
    } else {
        Err(cx.err(key, format!("{id:?} is not a {what} id ({prefix}…)")))
    }
}

/// The API's root: https, or http to a loopback address only (a token is
/// never sent in the clear over a network).
fn api_base(cx: &Ctx<'_>, i: usize, text: &str) -> Result<reqwest::Url, ConfigError> {
    let key = format!("source[{i}].reconcile.api_base");
    let url = reqwest::Url::parse(text).map_err(|e| cx.err(&key, format!("is not a URL: {e}")))?;
    let host = url.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(cx.err(
                &key,
                "must be https: the API credential would cross the network in the clear \
                 (http is allowed to a loopback address)",
            ));
        }
        other => return Err(cx.err(&key, format!("has scheme {other:?}: use https"))),
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(cx.err(
            &key,
            "must be a plain URL: no credentials, query or fragment",
        ));
    }
    Ok(url)
}

/// The API credential: exactly one of token, token_env, token_file.
fn token(
    cx: &mut Ctx<'_>,
    i: usize,
    raw: &RawReconcile,
) -> Result<GivenSecret<Secret>, ConfigError> {
    let key = format!("source[{i}].reconcile.token");
    let found = cx.read_secret(SecretSetting {
        key: key.clone(),
        inline: raw.token.clone().into_iter().collect(),
        env: raw.token_env.clone(),
        file: raw.token_file.clone(),
    })?;
    let found = found.ok_or_else(|| {
        cx.err(
            &key,
            "is required: the provider API's credential, in token_file or token_env",
        )
    })?;
    let text = found.text.trim();
    if text.is_empty() {
        return Err(cx.err(found.key, "is empty"));
    }
    Ok(GivenSecret {
        origin: found.origin,
        value: Secret::new(text),
    })
}
