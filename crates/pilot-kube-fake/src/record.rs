//! The requests the fake was asked, as the API server's authorizer sees
//! them: who (the bearer token presented), the verb, and the resource
//! attributes RBAC rules are written in (API group, resource, subresource,
//! namespace, name). Tests read them with [`crate::FakeApiServer::requests`]
//! to prove a Role grants what a program needs and nothing more.
//!
//! The attributes follow the Kubernetes API's request-info rules: a path
//! `/api/v1/...` is the core group, `/apis/GROUP/VERSION/...` a named one;
//! `namespaces/NS/` scopes it; the verb comes from the method (`GET` is
//! `get` with a name, `list` without, `watch` with `watch=true`; `POST`
//! `create`, `PUT` `update`, `PATCH` `patch`, `DELETE` `delete` with a name
//! and `deletecollection` without); a server-side apply that creates the
//! object is recorded as a `create` as well, the permission the API server
//! checks before an apply makes a new object. Any other path (`/api`, `/apis`,
//! `/version`, `/openapi/...`) is a non-resource request, which RBAC grants
//! through `nonResourceURLs` (every authenticated user may read discovery).

use http::Method;

/// One request, as an authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiRequest {
    /// The bearer token of the `Authorization` header, if any (the
    /// identity a real API server would authenticate).
    pub token: Option<String>,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` or
    /// `deletecollection`; for a non-resource request, the lower-case
    /// HTTP method.
    pub verb: String,
    /// What was asked of: a resource, or a non-resource path.
    pub target: Target,
}

/// A resource request's attributes, or a non-resource path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// A request for a resource.
    Resource {
        /// The API group (`""` for the core group).
        group: String,
        /// The version of the path.
        version: String,
        /// The resource's plural name (`pods`, `leases`).
        resource: String,
        /// The subresource after the name (`status`), if any.
        subresource: Option<String>,
        /// The namespace of the path (`None` when cluster-wide).
        namespace: Option<String>,
        /// The object's name, if the path names one.
        name: Option<String>,
    },
    /// Any other path (discovery, `/version`, OpenAPI).
    NonResource(String),
}

impl ApiRequest {
    /// The attributes of a request to `path` (no query) with `method`;
    /// `watch` is whether the query asks for a watch.
    pub(crate) fn new(token: Option<String>, method: &Method, path: &str, watch: bool) -> Self {
        let target = target(path);
        let verb = match &target {
            Target::NonResource(_) => method.as_str().to_ascii_lowercase(),
            Target::Resource { name, .. } => {
                let named = name.is_some();
                match *method {
                    Method::GET | Method::HEAD if watch => "watch",
                    Method::GET | Method::HEAD if named => "get",
                    Method::GET | Method::HEAD => "list",
                    Method::POST => "create",
                    Method::PUT => "update",
                    Method::PATCH => "patch",
                    Method::DELETE if named => "delete",
                    Method::DELETE => "deletecollection",
                    _ => "unknown",
                }
                .to_string()
            }
        };
        ApiRequest { token, verb, target }
    }
}

/// Splits a path by the API server's request-info rules.
fn target(path: &str) -> Target {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
        _ => return Target::NonResource(path.to_string()),
    };
    // `namespaces/NS/RESOURCE...` is namespaced; `namespaces[/NS[/SUB]]`
    // alone is the namespace resource itself.
    let (namespace, rest) = match rest {
        ["namespaces", namespace, resource, rest @ ..] => (Some(namespace.to_string()), {
            let mut v = vec![*resource];
            v.extend_from_slice(rest);
            v
        }),
        other => (None, other.to_vec()),
    };
    let Some((resource, rest)) = rest.split_first() else {
        return Target::NonResource(path.to_string());
    };
    Target::Resource {
        group: group.to_string(),
        version: version.to_string(),
        resource: resource.to_string(),
        name: rest.first().map(|s| s.to_string()),
        subresource: rest.get(1).map(|s| s.to_string()),
        namespace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str, method: Method, watch: bool) -> (String, Target) {
        let r = ApiRequest::new(None, &method, path, watch);
        (r.verb, r.target)
    }

    #[test]
    fn paths_split_as_the_api_servers_request_info() {
        let (verb, target) = resource(
            "/apis/coordination.k8s.io/v1/namespaces/pilot-system/leases/pilot",
            Method::PUT,
            false,
        );
        assert_eq!(verb, "update");
        assert_eq!(
            target,
            Target::Resource {
                group: "coordination.k8s.io".into(),
                version: "v1".into(),
                resource: "leases".into(),
                subresource: None,
                namespace: Some("pilot-system".into()),
                name: Some("pilot".into()),
            }
        );
        let (verb, target) = resource(
            "/apis/networking.istio.io/v1/namespaces/default/virtualservices/reviews/status",
            Method::PATCH,
            false,
        );
        assert_eq!(verb, "patch");
        assert!(matches!(target, Target::Resource { subresource: Some(s), .. } if s == "status"));
        let (verb, target) = resource("/api/v1/pods", Method::GET, true);
        assert_eq!(verb, "watch");
        assert!(
            matches!(target, Target::Resource { group, namespace: None, resource, .. } if group.is_empty() && resource == "pods")
        );
        // The namespace resource itself, by name: cluster-scoped.
        let (verb, target) = resource("/api/v1/namespaces/default", Method::GET, false);
        assert_eq!(verb, "get");
        assert!(
            matches!(target, Target::Resource { resource, name: Some(n), namespace: None, .. } if resource == "namespaces" && n == "default")
        );
        let (verb, _) = resource("/api/v1/namespaces/default/configmaps", Method::DELETE, false);
        assert_eq!(verb, "deletecollection");
        for path in [
            "/api",
            "/apis",
            "/apis/networking.istio.io/v1",
            "/version",
            "/openapi/v2",
        ] {
            let (verb, target) = resource(path, Method::GET, false);
            assert_eq!(verb, "get");
            assert_eq!(target, Target::NonResource(path.into()));
        }
    }
}
