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

/// Runs the `openssl` CLI (CI installs it), which makes the keys.
fn openssl(args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("the openssl CLI");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

#[test]
fn a_github_app_reads_its_private_key_at_load_in_either_pem_form() {
    let dir = tempfile::tempdir().unwrap();
    let pkcs1 = dir.path().join("app.pem");
    let pkcs8 = dir.path().join("app8.pem");
    let p = |path: &std::path::Path| path.to_str().unwrap().to_owned();
    openssl(&["genrsa", "-traditional", "-out", &p(&pkcs1), "2048"]);
    openssl(&[
        "pkcs8",
        "-topk8",
        "-nocrypt",
        "-in",
        &p(&pkcs1),
        "-out",
        &p(&pkcs8),
    ]);
    assert!(
        std::fs::read_to_string(&pkcs1)
            .unwrap()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----")
    );
    assert!(
        std::fs::read_to_string(&pkcs8)
            .unwrap()
            .starts_with("-----BEGIN PRIVATE KEY-----")
    );
    for file in [&pkcs1, &pkcs8] {
        let config = load(
            "github",
            &format!(
                "hook = \"app\"\napp_id = 123456\nprivate_key_file = {:?}\n",
                p(file)
            ),
        )
        .unwrap();
        let r = reconcile_of(&config);
        let Target::GithubApp { app_id, key } = &r.target else {
            panic!("{:?}", r.target);
        };
        assert_eq!(*app_id, 123456);
        assert_eq!(key.path(), file.as_path());
        assert_eq!(key.pair().public().modulus_len(), 256);
        // Debug and config check show where the key is, never the key.
        let debug = format!("{:?}", r.target);
        assert!(
            debug.contains("[redacted]") && !debug.contains("BEGIN"),
            "{debug}"
        );
        let shown = config.to_redacted_toml();
        assert!(shown.contains("hook = \"app\""), "{shown}");
        assert!(shown.contains("app_id = 123456"), "{shown}");
        assert!(
            shown.contains(&format!("private_key_file = {:?}", p(file))),
            "{shown}"
        );
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    }
}

#[test]
fn a_github_app_key_that_cannot_sign_is_an_error_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let app = |path: &str| format!("hook = \"app\"\napp_id = 7\nprivate_key_file = {path:?}\n");
    let err = refused("github", &app(&file("missing.pem")), "private_key_file");
    assert!(err.contains("cannot read"), "{err}");
    std::fs::write(file("junk.pem"), "not a key\n").unwrap();
    let err = refused("github", &app(&file("junk.pem")), "private_key_file");
    assert!(err.contains("holds no PEM private key"), "{err}");
    openssl(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        &file("ec.pem"),
    ]);
    let err = refused("github", &app(&file("ec.pem")), "private_key_file");
    assert!(err.contains("holds an EC key"), "{err}");
    assert!(!err.contains("BEGIN"), "no key material in an error: {err}");

    openssl(&["genrsa", "-traditional", "-out", &file("app.pem"), "2048"]);
    let good = file("app.pem");
    refused("github", "hook = \"app\"\napp_id = 7\n", "private_key_file");
    refused(
        "github",
        &format!("hook = \"app\"\nprivate_key_file = {good:?}\n"),
        "app_id",
    );
    let err = refused(
        "github",
        &format!("{}token = \"ghp_x\"\n", app(&good)),
        "token",
    );
    assert!(err.contains("does not apply to hook = \"app\""), "{err}");
    let err = refused(
        "github",
        "hook = \"repos/acme/shop/hooks/1\"\napp_id = 7\ntoken = \"t\"\n",
        "app_id",
    );
    assert!(err.contains("applies only to hook = \"app\""), "{err}");
    refused(
        "gitlab",
        &format!("hook = \"projects/1/hooks/2\"\ntoken = \"t\"\nprivate_key_file = {good:?}\n"),
        "private_key_file",
    );
}

/// What `config check` prints of each provider's `[source.reconcile]`
/// reads back as the same target (secrets by where they are kept).
#[test]
fn config_check_output_reads_back_for_every_provider() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("app.pem");
    openssl(&[
        "genrsa",
        "-traditional",
        "-out",
        key.to_str().unwrap(),
        "2048",
    ]);
    let env = |name: &str| match name {
        "ADMIN" => Some("the-admin-token-0123".to_owned()),
        "SECRET" => Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned()),
        "API" => Some("api-token-0123".to_owned()),
        _ => None,
    };
    for (kind, keys) in [
        (
            "github",
            "hook = \"orgs/acme/hooks/3\"\ntoken_env = \"API\"\n".to_owned(),
        ),
        (
            "github",
            format!("hook = \"app\"\napp_id = 9\nprivate_key_file = {key:?}\n"),
        ),
        (
            "stripe",
            "endpoint = \"we_1\"\ntoken_env = \"API\"\n".to_owned(),
        ),
        (
            "gitlab",
            "hook = \"groups/acme%2Fteam/hooks/3\"\ntoken_env = \"API\"\n".to_owned(),
        ),
        (
            "paddle",
            "notification_setting = \"ntfset_1\"\ntoken_env = \"API\"\n".to_owned(),
        ),
        (
            "standard",
            "app = \"app_1\"\nendpoint = \"ep_1\"\ntoken_env = \"API\"\nlookback = \"2d\"\n"
                .to_owned(),
        ),
    ] {
        let text = format!(
            "[admin]\ntoken_env = \"ADMIN\"\n\
             [[source]]\nname = \"s\"\nkind = \"{kind}\"\nsecret_env = \"SECRET\"\n\
             [source.reconcile]\n{keys}"
        );
        let config = Config::from_toml(&text, "f.toml", None, &env).unwrap();
        let shown = config.to_redacted_toml();
        let again = Config::from_toml(&shown, "shown.toml", None, &env)
            .unwrap_or_else(|e| panic!("{kind}: {e}\n{shown}"));
        let (a, b) = (reconcile_of(&config), reconcile_of(&again));
        assert_eq!(a.target.describe(), b.target.describe(), "{shown}");
        assert_eq!(a.lookback, b.lookback, "{shown}");
        assert_eq!(a.api_base, b.api_base, "{shown}");
        assert!(!shown.contains("api-token-0123"), "{shown}");
    }
}
