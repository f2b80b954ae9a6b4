//! Unit tests of `[source.reconcile]` per provider: each kind's keys, its
//! window and API root by default, another provider's key refused, each
//! error naming its key, and `config check` showing where a credential is
//! kept, never the credential.

use std::time::Duration;

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

/// A source of `kind` with `[source.reconcile]` holding `keys`.
fn with_reconcile(kind: &str, keys: &str) -> String {
    format!(
        "[admin]\ntoken = \"the-admin-token-0123\"\n\
         [[source]]\nname = \"s\"\nkind = \"{kind}\"\nsecret = \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"\n\
         [source.reconcile]\n{keys}"
    )
}

fn load(kind: &str, keys: &str) -> Result<Config<Loaded>, ConfigError> {
    Config::from_toml(&with_reconcile(kind, keys), "f.toml", None, &no_env)
}

fn reconcile_of(config: &Config<Loaded>) -> &ReconcileConfig {
    config.sources[0].reconcile.as_ref().unwrap()
}

/// The error `keys` give for `kind`, which must name `key`.
fn refused(kind: &str, keys: &str, key: &str) -> String {
    let err = load(kind, keys).unwrap_err().to_string();
    assert!(err.contains(&format!("source[0].reconcile.{key}")), "{err}");
    err
}

#[test]
fn gitlab_reads_a_project_or_group_hook_with_its_token() {
    let config = load(
        "gitlab",
        "hook = \"projects/acme%2Fshop/hooks/7\"\ntoken = \"glpat-0123456789abcdef\"\n",
    )
    .unwrap();
    let r = reconcile_of(&config);
    let Target::GitlabHook { hook, token } = &r.target else {
        panic!("{:?}", r.target);
    };
    assert_eq!(hook.owner, GitlabOwner::Project);
    assert_eq!(hook.id, "acme%2Fshop");
    assert_eq!(token.value.expose(), "glpat-0123456789abcdef");
    assert_eq!(r.target.describe(), "projects/acme%2Fshop/hooks/7");
    // GitLab lists a hook's requests of the past 7 days.
    assert_eq!(r.lookback, Duration::from_secs(7 * 86_400));
    // The root keeps its path: calls go under /api/v4.
    assert_eq!(r.api_base.as_str(), "https://gitlab.com/api/v4");
    let shown = config.to_redacted_toml();
    assert!(
        shown.contains("hook = \"projects/acme%2Fshop/hooks/7\""),
        "{shown}"
    );
    assert!(!shown.contains("glpat-0123456789abcdef"), "{shown}");

    let group = load(
        "gitlab",
        "hook = \"groups/12/hooks/3\"\ntoken = \"t\"\napi_base = \"https://git.example.com/api/v4\"\n",
    )
    .unwrap();
    assert_eq!(reconcile_of(&group).target.describe(), "groups/12/hooks/3");
}

#[test]
fn gitlab_needs_a_hook_and_takes_no_other_provider_s_key() {
    let err = refused("gitlab", "token = \"t\"\n", "hook");
    assert!(err.contains("is required for gitlab"), "{err}");
    let err = refused(
        "gitlab",
        "hook = \"repos/acme/shop/hooks/7\"\ntoken = \"t\"\n",
        "hook",
    );
    assert!(err.contains("names no GitLab webhook"), "{err}");
    let err = refused(
        "gitlab",
        "hook = \"projects/1/hooks/7\"\nendpoint = \"we_1\"\ntoken = \"t\"\n",
        "endpoint",
    );
    assert!(
        err.contains("applies to another provider, not gitlab"),
        "{err}"
    );
    refused("gitlab", "hook = \"projects/1/hooks/7\"\n", "token");
    // And GitLab's key is not another provider's.
    let err = refused(
        "stripe",
        "hook = \"projects/1/hooks/7\"\ntoken = \"sk_test_1\"\n",
        "hook",
    );
    assert!(
        err.contains("applies to another provider, not stripe"),
        "{err}"
    );
}

#[test]
fn paddle_reads_its_notifications_of_one_destination() {
    let config = load(
        "paddle",
        "notification_setting = \"ntfset_01gt21c5pdx9q1e4mh1xrsjjn6\"\ntoken_env = \"PADDLE_KEY\"\n",
    );
    // The key's variable is not set: named as what is missing.
    let err = config.unwrap_err().to_string();
    assert!(err.contains("source[0].reconcile.token_env"), "{err}");
    let env = |name: &str| (name == "PADDLE_KEY").then(|| "pdl_live_apikey_0123".to_owned());
    let config = Config::from_toml(
        &with_reconcile(
            "paddle",
            "notification_setting = \"ntfset_01gt21c5pdx9q1e4mh1xrsjjn6\"\ntoken_env = \"PADDLE_KEY\"\n",
        ),
        "f.toml",
        None,
        &env,
    )
    .unwrap();
    let r = reconcile_of(&config);
    let Target::Paddle {
        token,
        notification_setting,
    } = &r.target
    else {
        panic!("{:?}", r.target);
    };
    assert_eq!(token.value.expose(), "pdl_live_apikey_0123");
    assert_eq!(
        notification_setting.as_deref(),
        Some("ntfset_01gt21c5pdx9q1e4mh1xrsjjn6")
    );
    // Paddle keeps notifications 90 days.
    assert_eq!(r.lookback, Duration::from_secs(90 * 86_400));
    assert_eq!(r.api_base.as_str(), "https://api.paddle.com/");
    assert!(
        !config
            .warnings
            .iter()
            .any(|w| w.contains("notification_setting")),
        "{:?}",
        config.warnings
    );
    let shown = config.to_redacted_toml();
    assert!(
        shown.contains("notification_setting = \"ntfset_01gt21c5pdx9q1e4mh1xrsjjn6\""),
        "{shown}"
    );
    assert!(shown.contains("token_env = \"PADDLE_KEY\""), "{shown}");
    assert!(!shown.contains("pdl_live_apikey_0123"), "{shown}");
}

#[test]
fn paddle_without_a_destination_is_warned_and_another_kind_refuses_the_key() {
    let config = load("paddle", "token = \"pdl_sdbx_apikey_0123\"\n").unwrap();
    assert_eq!(reconcile_of(&config).target.describe(), "notifications");
    assert!(
        config
            .warnings
            .iter()
            .any(|w| w.contains("source[0].reconcile.notification_setting is not set")),
        "{:?}",
        config.warnings
    );
    let err = refused(
        "paddle",
        "notification_setting = \"we_123\"\ntoken = \"t\"\n",
        "notification_setting",
    );
    assert!(
        err.contains("not a Paddle notification destination id"),
        "{err}"
    );
    let err = refused(
        "stripe",
        "notification_setting = \"ntfset_01gt21c5pdx9q1e4mh1xrsjjn6\"\ntoken = \"t\"\n",
        "notification_setting",
    );
    assert!(
        err.contains("applies to another provider, not stripe"),
        "{err}"
    );
    refused(
        "paddle",
        "hook = \"projects/1/hooks/2\"\ntoken = \"t\"\n",
        "hook",
    );
}

#[test]
fn svix_reads_an_application_s_endpoint_within_14_days() {
    let config = load(
        "standard",
        "app = \"app_1srOrx2ZWZBpBUvZwXKQmoEYga2\"\nendpoint = \"ep_1srOrx2ZWZBpBUvZwXKQmoEYga2\"\n\
         token = \"appsk_fake0123\"\n",
    )
    .unwrap();
    let r = reconcile_of(&config);
    let Target::Svix {
        app,
        endpoint,
        token,
    } = &r.target
    else {
        panic!("{:?}", r.target);
    };
    assert_eq!(app, "app_1srOrx2ZWZBpBUvZwXKQmoEYga2");
    assert_eq!(endpoint, "ep_1srOrx2ZWZBpBUvZwXKQmoEYga2");
    assert_eq!(token.value.expose(), "appsk_fake0123");
    // Svix recovers messages of the past 14 days.
    assert_eq!(r.lookback, Duration::from_secs(14 * 86_400));
    assert_eq!(r.api_base.as_str(), "https://api.svix.com/");
    assert_eq!(
        r.target.describe(),
        "app/app_1srOrx2ZWZBpBUvZwXKQmoEYga2/endpoint/ep_1srOrx2ZWZBpBUvZwXKQmoEYga2"
    );
    let shown = config.to_redacted_toml();
    assert!(
        shown.contains("app = \"app_1srOrx2ZWZBpBUvZwXKQmoEYga2\""),
        "{shown}"
    );
    assert!(
        shown.contains("endpoint = \"ep_1srOrx2ZWZBpBUvZwXKQmoEYga2\""),
        "{shown}"
    );
    assert!(!shown.contains("appsk_fake0123"), "{shown}");
}

#[test]
fn svix_needs_its_app_and_endpoint_and_no_more_than_14_days() {
    let err = refused("standard", "endpoint = \"ep_1\"\ntoken = \"t\"\n", "app");
    assert!(err.contains("is required for kind = \"standard\""), "{err}");
    refused("standard", "app = \"app_1\"\ntoken = \"t\"\n", "endpoint");
    let err = refused(
        "standard",
        "app = \"app_1\"\nendpoint = \"we_1\"\ntoken = \"t\"\n",
        "endpoint",
    );
    assert!(err.contains("is not a Svix endpoint id (ep_…)"), "{err}");
    refused(
        "standard",
        "app = \"app_1\"\nendpoint = \"ep_1\"\ntoken = \"t\"\nlookback = \"15d\"\n",
        "lookback",
    );
    // Stripe's endpoint key is not Svix's.
    refused("stripe", "endpoint = \"ep_1\"\ntoken = \"t\"\n", "endpoint");
    let err = refused("stripe", "app = \"app_1\"\ntoken = \"t\"\n", "app");
    assert!(
        err.contains("applies to another provider, not stripe"),
        "{err}"
    );
}
