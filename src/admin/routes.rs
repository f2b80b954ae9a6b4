//! The admin listener's one table of routes ([`ROUTES`]): for each, its
//! method and path, who may call it, what the audit trail records of it
//! and its OpenAPI operation. The router ([`served`]), the role each path
//! needs ([`role_needed`]), the audit's action of each request
//! ([`action_of`]) and the documented paths ([`Documented`]) are all made
//! from it, so a route cannot be served and not documented, or guarded and
//! not recorded. Refuses handlers (each lives in its resource's file) and
//! the dashboard's assets ([`crate::dashboard`]), which are not the API.

use axum::Router;
use axum::http::Method;
use axum::routing::{any, delete, get, post};

use super::{
    AdminState, audit, auth, backup, bulk, destinations, events, health, keys, reconcile, reload,
    replication, scrape, secrets, shapes, stats, stream, sweep,
};
use crate::api::{AuditAction, Role};

/// One route of the admin listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub verb: Verb,
    /// The path template, as axum matches it (`{id}` is one segment).
    pub path: &'static str,
    pub gate: Gate,
    /// What the audit trail records of a person's request here; `None`: a
    /// read, not recorded. An [`Verb::Any`] route records only its
    /// changes: a `GET`, `HEAD` or `OPTIONS` there is a read.
    pub audit: Option<AuditAction>,
    /// The OpenAPI operation (its id is the handler's name); `None`: a
    /// path the document leaves out.
    pub operation: Option<&'static str>,
}

/// The methods a route answers. `Get` answers `HEAD` too, as axum's
/// `get` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Delete,
    /// Every method.
    Any,
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Anyone, without a token: health and the contract.
    Open,
    /// A person's token with at least this role (`auth::require_token`).
    Person(Role),
    /// Any token, a `[[keys.client]]` app's or a person's
    /// (`auth::require_any_token`); the keys' handlers judge what each may
    /// do (a person may read and, as an admin, delete).
    AnyToken,
}

impl Verb {
    /// The verb in OpenAPI's words (`get`, `post`, …); `None` for `Any`.
    pub fn openapi(self) -> Option<&'static str> {
        match self {
            Verb::Get => Some("get"),
            Verb::Post => Some("post"),
            Verb::Delete => Some("delete"),
            Verb::Any => None,
        }
    }

    fn answers(self, method: &Method) -> bool {
        match self {
            Verb::Get => method == Method::GET || method == Method::HEAD,
            Verb::Post => method == Method::POST,
            Verb::Delete => method == Method::DELETE,
            Verb::Any => true,
        }
    }
}

macro_rules! verb {
    (get) => {
        Verb::Get
    };
    (post) => {
        Verb::Post
    };
    (delete) => {
        Verb::Delete
    };
    (any) => {
        Verb::Any
    };
}

/// Writes [`ROUTES`], [`served`] and [`Documented`] from one list: the
/// routes the OpenAPI document describes (each handler's
/// `#[utoipa::path]`), then those it leaves out.
macro_rules! routes {
    (
        documented {
            $( $verb:ident $path:literal => $module:ident :: $handler:ident, $gate:expr, $audit:expr; )*
        }
        undocumented {
            $( $uverb:ident $upath:literal => $umodule:ident :: $uhandler:ident, $ugate:expr, $uaudit:expr; )*
        }
    ) => {
        /// Every route of the admin API, in the order the OpenAPI document
        /// names them; the dashboard's assets are not here.
        pub const ROUTES: &[Route] = &[
            $( Route {
                verb: verb!($verb),
                path: $path,
                gate: $gate,
                audit: $audit,
                operation: Some(stringify!($handler)),
            }, )*
            $( Route {
                verb: verb!($uverb),
                path: $upath,
                gate: $ugate,
                audit: $uaudit,
                operation: None,
            }, )*
        ];

        /// The routes whose gate `keep` takes, each to its handler; the
        /// caller puts the gate's check in front of them.
        pub(super) fn served(keep: impl Fn(Gate) -> bool) -> Router<AdminState> {
            let mut router = Router::new();
            $( if keep($gate) {
                router = router.route($path, $verb($module::$handler));
            } )*
            $( if keep($ugate) {
                router = router.route($upath, $uverb($umodule::$uhandler));
            } )*
            router
        }

        /// The documented routes' operations, for [`openapi`](super::openapi).
        #[derive(utoipa::OpenApi)]
        #[openapi(paths( $( $module::$handler ),* ))]
        pub(super) struct Documented;
    };
}

/// The admin API's contract as OpenAPI: every documented route of
/// [`ROUTES`] in the document's frame (`openapi.rs`), with the types of
/// [`crate::api`] as its schemas.
pub fn openapi() -> utoipa::openapi::OpenApi {
    use utoipa::OpenApi;
    super::openapi::frame(Documented::openapi())
}

/// `/api/openapi.json`: the table's own description, served.
mod contract {
    use axum::Json;

    /// The admin API's contract as an OpenAPI 3.1 document, for other tools.
    #[utoipa::path(get, path = "/api/openapi.json", tag = "health", security(()),
        responses((status = 200, description = "This document", content_type = "application/json", body = Object)))]
    pub(super) async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
        Json(super::openapi())
    }
}

use AuditAction as A;
use Gate::{AnyToken, Open, Person};
use Role::{Admin, Operator, Viewer};

routes! {
    documented {
        get "/healthz" => health::healthz, Open, None;
        get "/readyz" => health::readyz, Open, None;
        get "/api/openapi.json" => contract::openapi_json, Open, None;
        get "/metrics" => scrape::metrics, Person(Viewer), None;
        get "/api/events" => events::list_events, Person(Viewer), None;
        get "/api/events/stream" => stream::stream_events, Person(Viewer), None;
        get "/api/events/{id}" => events::show_event, Person(Viewer), None;
        post "/api/events/{id}/replay" => events::replay_event, Person(Operator), Some(A::Replay);
        post "/api/events/{id}/ignore" => events::ignore_event, Person(Operator), Some(A::Ignore);
        delete "/api/events/{id}" => events::erase_event, Person(Admin), Some(A::Erase);
        post "/api/replay" => bulk::bulk_replay, Person(Operator), Some(A::BulkReplay);
        post "/api/ignore" => bulk::bulk_ignore, Person(Operator), Some(A::BulkIgnore);
        get "/api/stats" => stats::stats, Person(Viewer), None;
        get "/api/activity" => stats::activity, Person(Viewer), None;
        get "/api/shapes" => shapes::shapes, Person(Viewer), None;
        get "/api/secrets" => secrets::secrets, Person(Operator), None;
        get "/api/reconcile" => reconcile::sources, Person(Viewer), None;
        post "/api/reconcile/{source}" => reconcile::pass, Person(Operator), Some(A::Reconcile);
        post "/api/sweep" => sweep::sweep_now, Person(Admin), Some(A::Sweep);
        // Recorded: it copies every payload out.
        get "/api/backup" => backup::backup, Person(Admin), Some(A::Backup);
        get "/api/destinations" => destinations::destinations, Person(Viewer), None;
        post "/api/destinations/{name}/pause" => destinations::pause, Person(Operator), Some(A::Pause);
        post "/api/destinations/{name}/resume" => destinations::resume, Person(Operator), Some(A::Resume);
        post "/api/keys/{key}/claim" => keys::claim, AnyToken, Some(A::KeyChange);
        post "/api/keys/{key}/complete" => keys::complete, AnyToken, Some(A::KeyChange);
        post "/api/keys/{key}/release" => keys::release, AnyToken, Some(A::KeyChange);
        post "/api/keys/{key}/extend" => keys::extend, AnyToken, Some(A::KeyChange);
        get "/api/keys/{key}" => keys::show, AnyToken, None;
        delete "/api/keys/{key}" => keys::delete, AnyToken, Some(A::KeyDelete);
        get "/api/keys" => keys::list, AnyToken, None;
        // Under /api/keys/ it would shadow a key named so.
        get "/api/key-namespaces" => keys::namespaces, Person(Viewer), None;
        get "/api/replication" => replication::status, Person(Viewer), None;
        post "/api/replication/promote" => replication::promote, Person(Admin), Some(A::Promote);
        post "/api/reload" => reload::reload, Person(Admin), Some(A::Reload);
        get "/api/whoami" => auth::whoami, Person(Viewer), None;
        get "/api/audit" => audit::audit_trail, Person(Viewer), None;
    }
    undocumented {
        // An empty key matches no `{key}`: say what a key is, not 404.
        any "/api/keys/" => keys::empty_key, AnyToken, Some(A::KeyChange);
        any "/api/keys//{action}" => keys::empty_key, AnyToken, Some(A::KeyChange);
    }
}

/// The route that answers `method` on `path` (the template the router
/// matched).
fn route(method: &Method, path: &str) -> Option<&'static Route> {
    ROUTES
        .iter()
        .find(|r| r.path == path && r.verb.answers(method))
}

/// The least role a person needs to call `method` on `path` (the template
/// the router matched). A path the table does not give a person's role
/// needs `admin`: the token check only guards routes it names, so that is
/// the safe side of a mistake, not a rule.
pub(super) fn role_needed(method: &Method, path: &str) -> Role {
    match route(method, path) {
        Some(Route {
            gate: Person(role), ..
        }) => *role,
        _ => Role::Admin,
    }
}

/// What a person's request is, for the audit trail; `None`: a read, not
/// recorded. A change to a path the table does not name (which the router
/// does not serve) would be recorded as `other`, not run unrecorded.
pub(super) fn action_of(method: &Method, path: &str) -> Option<AuditAction> {
    let read = [Method::GET, Method::HEAD, Method::OPTIONS].contains(method);
    match route(method, path) {
        Some(route) if route.verb == Verb::Any && read => None,
        Some(route) => route.audit,
        None if read => None,
        None => Some(AuditAction::Other),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The document's (method, path, operation id) are the table's
    /// documented routes': a handler's `#[utoipa::path]` that names another
    /// path or method than its route fails here.
    #[test]
    fn the_openapi_paths_are_the_tables_documented_routes() {
        let doc = super::openapi();
        let mut documented = BTreeSet::new();
        for (path, item) in &doc.paths.paths {
            let item = serde_json::to_value(item).unwrap();
            for (method, operation) in item.as_object().unwrap() {
                if let Some(id) = operation.get("operationId") {
                    documented.insert((
                        method.clone(),
                        path.clone(),
                        id.as_str().unwrap().to_owned(),
                    ));
                }
            }
        }
        let table: BTreeSet<_> = ROUTES
            .iter()
            .filter_map(|r| {
                Some((
                    r.verb.openapi()?.to_owned(),
                    r.path.to_owned(),
                    r.operation?.to_owned(),
                ))
            })
            .collect();
        assert!(
            documented == table,
            "documented, not in the table: {:?}; in the table, not documented: {:?}",
            documented.difference(&table).collect::<Vec<_>>(),
            table.difference(&documented).collect::<Vec<_>>()
        );
        // Every route left out is one the document cannot name (any
        // method), not one forgotten.
        for route in ROUTES.iter().filter(|r| r.operation.is_none()) {
            assert_eq!(route.verb, Verb::Any, "{route:?} is not documented");
        }
    }

    /// Each action the trail can record but `other` and `read_unredacted`
    /// (which the reads that unmask a payload record themselves, only when
    /// they do) is some route's, and every route that changes something is
    /// recorded.
    #[test]
    fn every_audit_action_has_a_route_and_every_change_an_action() {
        for action in AuditAction::ALL {
            let routes = ROUTES.iter().filter(|r| r.audit == Some(*action)).count();
            match action {
                AuditAction::Other | AuditAction::ReadUnredacted => {
                    assert_eq!(routes, 0, "{action:?} is no route's")
                }
                _ => assert!(routes > 0, "{action:?} is no route's action"),
            }
        }
        for route in ROUTES {
            match route.verb {
                Verb::Get => {}
                _ => assert!(route.audit.is_some(), "{route:?} changes unrecorded"),
            }
            assert!(
                route.gate != Open || route.audit.is_none(),
                "{route:?}: an open route has no person to record"
            );
        }
    }

    #[test]
    fn each_route_is_in_the_table_once() {
        let mut seen = BTreeSet::new();
        for route in ROUTES {
            assert!(
                seen.insert((route.path, format!("{:?}", route.verb))),
                "{route:?} twice"
            );
        }
    }

    /// The lookups the token check and the audit make, on the routes an
    /// operator meets most.
    #[test]
    fn the_role_and_the_action_of_a_request_are_its_routes() {
        let get = Method::GET;
        let head = Method::HEAD;
        let post = Method::POST;
        let del = Method::DELETE;
        assert_eq!(role_needed(&get, "/api/events"), Viewer);
        assert_eq!(role_needed(&head, "/api/backup"), Admin);
        assert_eq!(role_needed(&post, "/api/replay"), Operator);
        assert_eq!(role_needed(&del, "/api/events/{id}"), Admin);
        assert_eq!(role_needed(&post, "/api/events"), Admin);
        assert_eq!(action_of(&get, "/api/events/{id}"), None);
        assert_eq!(action_of(&head, "/api/backup"), Some(A::Backup));
        assert_eq!(action_of(&del, "/api/events/{id}"), Some(A::Erase));
        assert_eq!(action_of(&del, "/api/keys/{key}"), Some(A::KeyDelete));
        assert_eq!(action_of(&get, "/api/keys/"), None);
        assert_eq!(action_of(&Method::PUT, "/api/keys/"), Some(A::KeyChange));
        assert_eq!(action_of(&Method::OPTIONS, "/api/sweep"), None);
        assert_eq!(action_of(&Method::PUT, "/api/nowhere"), Some(A::Other));
    }
}
