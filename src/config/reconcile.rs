//! A source's `[source.reconcile]`: the provider API hookinbox asks, on a
//! timer, for the events it never received. Types only; what each provider
//! is asked, and how, belongs to `reconcile`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::resolve::GivenSecret;
use super::secret::Secret;

/// A validated `[source.reconcile]`.
#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    /// Which provider API, what on it, and the credential it takes.
    pub target: Target,
    /// How often a pass runs.
    pub interval: Duration,
    /// How far back the first pass looks (later passes start at the kept
    /// cursor): by default the provider's own window.
    pub lookback: Duration,
    /// The API's root: the provider's public API unless the config names
    /// another (an enterprise host, a test's fake).
    pub api_base: reqwest::Url,
}

/// What a pass asks, per provider.
#[derive(Debug, Clone)]
pub enum Target {
    /// A GitHub repository's or organisation's webhook, read with a token
    /// (a fine-grained token with the "Webhooks" permission, or a classic one
    /// with `admin:repo_hook` / `admin:org_hook`).
    GithubHook {
        hook: GithubHook,
        token: GivenSecret<Secret>,
    },
    /// Stripe's events API, read with a secret or restricted key (read
    /// access to events and, for `endpoint`, webhook endpoints).
    Stripe {
        token: GivenSecret<Secret>,
        /// The endpoint (`we_…`) that sends to this source: its `status` is
        /// the subscription's health.
        endpoint: Option<String>,
    },
    /// A GitLab project's or group's webhook, read with a token of a
    /// Maintainer (or Owner) with the `api` scope, sent as `PRIVATE-TOKEN`.
    GitlabHook {
        hook: GitlabHook,
        token: GivenSecret<Secret>,
    },
    /// Paddle Billing's notifications, read with an API key allowed
    /// `notification.read` and `notification.write` (and, for
    /// `notification_setting`, `notification_setting.read`).
    Paddle {
        token: GivenSecret<Secret>,
        /// The notification destination (`ntfset_…`) that sends to this
        /// source: only its notifications are replayed, and its `active`
        /// is the subscription's health. Without it, every destination's.
        notification_setting: Option<String>,
    },
    /// A sender whose webhooks run on Svix: the endpoint (`ep_…`) of its
    /// application (`app_…`) that sends to this source, read with a Svix
    /// token the sender issued for that application (an App Portal token,
    /// or an API key).
    Svix {
        token: GivenSecret<Secret>,
        app: String,
        endpoint: String,
    },
    /// A GitHub App's webhook (`hook = "app"`), read as the App itself:
    /// each call carries a JWT that the App's private key signs.
    GithubApp { app_id: u64, key: AppKey },
}

impl Target {
    /// How the config file names what the pass reads, for log lines and
    /// `reconcile` output.
    pub fn describe(&self) -> String {
        match self {
            Target::GithubHook { hook, .. } => hook.to_string(),
            Target::Stripe { .. } => "events".to_owned(),
            Target::GitlabHook { hook, .. } => hook.to_string(),
            Target::Paddle {
                notification_setting: Some(id),
                ..
            } => format!("notifications to {id}"),
            Target::Paddle { .. } => "notifications".to_owned(),
            Target::Svix { app, endpoint, .. } => format!("app/{app}/endpoint/{endpoint}"),
            Target::GithubApp { app_id, .. } => format!("app/hook of app {app_id}"),
        }
    }
}

/// A GitHub App's private key, read and checked at load: the PEM file
/// GitHub hands out (PKCS#1, `BEGIN RSA PRIVATE KEY`) or the same key as
/// PKCS#8 (`BEGIN PRIVATE KEY`). `Debug` shows where it is kept, never the
/// key.
#[derive(Clone)]
pub struct AppKey {
    path: PathBuf,
    pair: Arc<ring::rsa::KeyPair>,
}

impl AppKey {
    /// Reads and parses the key at `path`; the error says what is wrong with
    /// the file in words, never with any of its content.
    pub fn read(path: &Path) -> Result<AppKey, String> {
        use rustls::pki_types::PrivateKeyDer;
        use rustls::pki_types::pem::{Error, PemObject};
        let shown = path.display();
        let der = PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
            Error::Io(e) => format!("cannot read {shown}: {e}"),
            Error::NoItemsFound => format!("{shown} holds no PEM private key"),
            // The other errors quote the file's lines: say what, not where.
            _ => format!("{shown} is not a PEM file a private key can be read from"),
        })?;
        let pair = match &der {
            PrivateKeyDer::Pkcs1(key) => ring::rsa::KeyPair::from_der(key.secret_pkcs1_der()),
            PrivateKeyDer::Pkcs8(key) => ring::rsa::KeyPair::from_pkcs8(key.secret_pkcs8_der()),
            _ => {
                return Err(format!(
                    "{shown} holds an EC key: a GitHub App's key is RSA (download a new one \
                     from the App's settings)"
                ));
            }
        }
        .map_err(|e| format!("{shown} holds no usable RSA key ({e})"))?;
        Ok(AppKey {
            path: path.to_path_buf(),
            pair: Arc::new(pair),
        })
    }

    /// Where the key is kept (what `config check` shows).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key, for the one place that signs with it.
    pub fn pair(&self) -> &ring::rsa::KeyPair {
        &self.pair
    }
}

impl fmt::Debug for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppKey")
            .field("path", &self.path)
            .field("key", &"[redacted]")
            .finish()
    }
}

/// Whose webhook a [`GitlabHook`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitlabOwner {
    Project,
    Group,
}

/// A GitLab webhook of a project or a group: `hook =
/// "projects/ID/hooks/ID"` or `"groups/ID/hooks/ID"`, the project or group
/// by its numeric ID or its URL-encoded path (`acme%2Fshop`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitlabHook {
    pub owner: GitlabOwner,
    /// The numeric ID or the URL-encoded path, `%2F` between its parts.
    pub id: String,
    pub hook: u64,
}

impl GitlabHook {
    pub fn parse(text: &str) -> Result<GitlabHook, String> {
        let parts: Vec<&str> = text.trim_matches('/').split('/').collect();
        let hook = |n: &str| n.parse::<u64>().ok().filter(|id| *id > 0);
        let parsed = match parts.as_slice() {
            [owner @ ("projects" | "groups"), id, "hooks", n] => {
                let owner = if *owner == "projects" {
                    GitlabOwner::Project
                } else {
                    GitlabOwner::Group
                };
                gitlab_id(id, owner)
                    .zip(hook(n))
                    .map(|(id, hook)| GitlabHook { owner, id, hook })
            }
            _ => None,
        };
        parsed.ok_or_else(|| {
            format!(
                "{text:?} names no GitLab webhook: write \"projects/ID/hooks/ID\" or \
                 \"groups/ID/hooks/ID\", the project or group by its ID or its URL-encoded \
                 path (\"acme%2Fshop\"), the hook's ID from its settings page"
            )
        })
    }
}

/// A project's or group's ID as the API path takes it: a positive number,
/// or the full path with each `/` written `%2F` (a project's has its
/// namespace, so two parts at least); each part of GitLab's characters.
fn gitlab_id(text: &str, owner: GitlabOwner) -> Option<String> {
    if text.parse::<u64>().is_ok_and(|n| n > 0) {
        return Some(text.to_owned());
    }
    let normal = text.replace("%2f", "%2F");
    let parts: Vec<&str> = normal.split("%2F").collect();
    let part_ok = |p: &&str| {
        !p.is_empty()
            && *p != "."
            && *p != ".."
            && p.len() <= 255
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    let least = if owner == GitlabOwner::Project { 2 } else { 1 };
    (parts.len() >= least && parts.iter().all(part_ok)).then_some(normal)
}

impl fmt::Display for GitlabHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let owner = match self.owner {
            GitlabOwner::Project => "projects",
            GitlabOwner::Group => "groups",
        };
        write!(f, "{owner}/{}/hooks/{}", self.id, self.hook)
    }
}

/// A GitHub webhook that belongs to a repository or an organisation:
/// `hook = "repos/OWNER/REPO/hooks/ID"` or `"orgs/ORG/hooks/ID"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GithubHook {
    Repo {
        owner: String,
        repo: String,
        id: u64,
    },
    Org {
        org: String,
        id: u64,
    },
}

impl GithubHook {
    /// `repos/OWNER/REPO/hooks/ID` or `orgs/ORG/hooks/ID`, as the hook's
    /// API path (without the leading `/`) writes it.
    pub fn parse(text: &str) -> Result<GithubHook, String> {
        let parts: Vec<&str> = text.trim_matches('/').split('/').collect();
        let name_ok = |n: &str| {
            !n.is_empty()
                && n != "."
                && n != ".."
                && n.len() <= 100
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        };
        let id = |n: &str| n.parse::<u64>().ok().filter(|id| *id > 0);
        match parts.as_slice() {
            ["repos", owner, repo, "hooks", n] if name_ok(owner) && name_ok(repo) => {
                id(n).map(|id| GithubHook::Repo {
                    owner: (*owner).to_owned(),
                    repo: (*repo).to_owned(),
                    id,
                })
            }
            ["orgs", org, "hooks", n] if name_ok(org) => id(n).map(|id| GithubHook::Org {
                org: (*org).to_owned(),
                id,
            }),
            _ => None,
        }
        .ok_or_else(|| {
            format!(
                "{text:?} names no GitHub hook: write \"repos/OWNER/REPO/hooks/ID\" or \
                 \"orgs/ORG/hooks/ID\" (the hook's ID is in its settings page's URL)"
            )
        })
    }
}

impl fmt::Display for GithubHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GithubHook::Repo { owner, repo, id } => write!(f, "repos/{owner}/{repo}/hooks/{id}"),
            GithubHook::Org { org, id } => write!(f, "orgs/{org}/hooks/{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{GithubHook, GitlabHook, GitlabOwner};

    #[test]
    fn a_gitlab_hook_is_a_project_or_group_by_id_or_encoded_path() {
        let by_id = GitlabHook::parse("projects/42/hooks/7").unwrap();
        assert_eq!(
            by_id,
            GitlabHook {
                owner: GitlabOwner::Project,
                id: "42".into(),
                hook: 7
            }
        );
        let by_path = GitlabHook::parse("/projects/acme%2fsub.team%2Fshop/hooks/3/").unwrap();
        assert_eq!(
            by_path.to_string(),
            "projects/acme%2Fsub.team%2Fshop/hooks/3"
        );
        let group = GitlabHook::parse("groups/acme/hooks/9").unwrap();
        assert_eq!(group.owner, GitlabOwner::Group);
        assert_eq!(group.to_string(), "groups/acme/hooks/9");
        for bad in [
            "",
            "projects/42/hooks",
            "projects/42/hooks/0",
            "projects/0/hooks/1",
            "projects/acme/hooks/1",
            "projects/acme/shop/hooks/1",
            "projects/acme%2F/hooks/1",
            "projects/acme%2F..%2Fx/hooks/1",
            "projects/ac me%2Fshop/hooks/1",
            "users/1/hooks/1",
            "repos/acme/shop/hooks/1",
        ] {
            assert!(GitlabHook::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_github_hook_is_a_repository_or_organisation_path() {
        let repo = GithubHook::parse("repos/acme/shop.web/hooks/12").unwrap();
        assert!(GithubHook::parse("repos/acme/.github/hooks/3").is_ok());
        assert_eq!(repo.to_string(), "repos/acme/shop.web/hooks/12");
        let org = GithubHook::parse("/orgs/acme/hooks/7/").unwrap();
        assert_eq!(org.to_string(), "orgs/acme/hooks/7");
        for bad in [
            "",
            "repos/acme/hooks/12",
            "repos/acme/shop/hooks/0",
            "repos/acme/shop/hooks/x",
            "repos/ac me/shop/hooks/1",
            "orgs/acme/hooks",
            "users/acme/hooks/1",
            "repos/../shop/hooks/1",
            "repos/acme/shop/hooks/1/extra",
        ] {
            assert!(GithubHook::parse(bad).is_err(), "{bad:?}");
        }
    }
}
