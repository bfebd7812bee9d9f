//! One match of one rule of a Gateway API route as a route of the
//! model: the match, the filters, the backends, the timeouts.

use std::time::Duration;

use pilot_api::gateway_api::{
    BackendObjectReference, CookieLifetimeType, Cors as GatewayCors, GrpcHeaderMatch, GrpcMethodMatch,
    GrpcRouteFilter, GrpcRouteFilterType, GrpcRouteMatch, GrpcRouteRule, HeaderModifier, HttpHeaderMatch,
    HttpPathModifier, HttpQueryParamMatch, HttpRouteFilterType, HttpRouteMatch, HttpRouteRetry,
    HttpRouteRule, PathMatchType, PathModifierType, RedirectScheme, RequestMirror, SessionPersistence,
    SessionPersistenceType, StringMatchType,
};
use pilot_model::ConfigMeta;

use super::super::{
    Cors, DirectResponse, HeaderOperations, Headers, HttpAction, HttpMatch, HttpRoute, Mirror, Redirect,
    Retries, Rewrite, RouteDestination, StickySession, StringMatch, WeightedDestination,
};
use super::{ServiceParent, is_core, service_host};

/// The model's name of a rule: its route's `namespace/name`, and the
/// rule's name or index.
fn rule_name(meta: &ConfigMeta, name: Option<&str>, index: usize) -> String {
    match name {
        Some(name) => format!("{}/{}/{name}", meta.namespace, meta.name),
        None => format!("{}/{}/{index}", meta.namespace, meta.name),
    }
}

/// Whether a route may send traffic to the Service `name` of
/// `namespace` (a reference across namespaces needs a ReferenceGrant).
pub(super) type Permitted<'a> = &'a dyn Fn(&str, &str) -> bool;

/// The route of one match of an HTTPRoute's rule; a backend `permitted`
/// refuses takes no traffic (its share is answered 500).
pub(super) fn http_route(
    meta: &ConfigMeta,
    parent: &ServiceParent,
    rule: &HttpRouteRule,
    index: usize,
    request: &HttpRouteMatch,
    suffix: &str,
    permitted: Permitted<'_>,
) -> HttpRoute {
    let namespace = &meta.namespace;
    let mut route = HttpRoute {
        name: rule_name(meta, rule.name.as_deref(), index),
        matches: vec![http_match(request, parent)],
        websocket: true,
        no_cluster_status: Some(500),
        ..Default::default()
    };
    let mut redirect = None;
    let mut unsupported = false;
    // A redirect or URL rewrite of a backend is done for the requests
    // sent to it; of a rule's only backend, that is every request: the
    // rule's own. Of one among several, the proxies cannot (a weighted
    // backend of Envoy's redirects and rewrites no path): that backend
    // takes no traffic (below).
    let backends = rule.backend_refs.as_deref().unwrap_or_default();
    let lifted = |kind: Option<HttpRouteFilterType>| {
        backends.len() == 1
            && matches!(
                kind,
                Some(HttpRouteFilterType::RequestRedirect | HttpRouteFilterType::UrlRewrite)
            )
    };
    let of_the_backend = backends
        .iter()
        .flat_map(|b| b.filters.iter().flatten())
        .filter(|f| lifted(f.kind));
    for filter in rule.filters.iter().flatten().chain(of_the_backend) {
        match filter.kind {
            Some(HttpRouteFilterType::RequestHeaderModifier) => modify(
                &mut route.headers.request,
                filter.request_header_modifier.as_ref(),
            ),
            Some(HttpRouteFilterType::ResponseHeaderModifier) => modify(
                &mut route.headers.response,
                filter.response_header_modifier.as_ref(),
            ),
            Some(HttpRouteFilterType::RequestMirror) => {
                route.mirrors.extend(
                    filter
                        .request_mirror
                        .as_ref()
                        .and_then(|m| mirror(m, namespace, suffix)),
                );
            }
            Some(HttpRouteFilterType::RequestRedirect) => {
                redirect = filter.request_redirect.as_ref().map(|r| Redirect {
                    uri: r.path.as_ref().and_then(full_path),
                    authority: r.hostname.clone(),
                    code: u32::try_from(r.status_code()).ok(),
                    scheme: r.scheme.map(|s| {
                        match s {
                            RedirectScheme::Http => "http",
                            RedirectScheme::Https => "https",
                        }
                        .to_string()
                    }),
                    port: r.port.and_then(|p| u16::try_from(p).ok()),
                    // A scheme written without a port keeps the
                    // request's port, none when it came to the scheme's
                    // default (a mesh request's Host names none, so the
                    // location has none, as the Gateway API prefers for
                    // 80 and 443); at the edge, a listener's other port
                    // is replaced by the scheme's (`edge.rs`).
                    port_from_scheme: false,
                    prefix: r.path.as_ref().and_then(prefix_replacement),
                });
            }
            Some(HttpRouteFilterType::UrlRewrite) => {
                if let Some(rewrite) = &filter.url_rewrite {
                    route.rewrite = Some(url_rewrite(
                        rewrite.hostname.clone(),
                        rewrite.path.as_ref(),
                        request,
                    ));
                }
            }
            Some(HttpRouteFilterType::Cors) => route.cors = filter.cors.as_ref().map(cors),
            None => {}
            // An extension or external authorization pilot cannot run
            // must not let requests by.
            Some(_) => unsupported = true,
        }
    }
    route.action = if unsupported {
        internal_error()
    } else if let Some(redirect) = redirect {
        HttpAction::Redirect(redirect)
    } else {
        let backends = rule.backend_refs.iter().flatten().map(|b| {
            let mut headers = Headers::default();
            let mut valid = is_core(b.group())
                && b.kind() == "Service"
                && permitted(b.namespace.as_deref().unwrap_or(namespace), &b.name);
            for filter in b.filters.iter().flatten() {
                match filter.kind {
                    Some(HttpRouteFilterType::RequestHeaderModifier) => {
                        modify(&mut headers.request, filter.request_header_modifier.as_ref())
                    }
                    Some(HttpRouteFilterType::ResponseHeaderModifier) => {
                        modify(&mut headers.response, filter.response_header_modifier.as_ref())
                    }
                    // Done as the rule's (above).
                    kind if lifted(kind) => {}
                    // What else a backend's filters may do is not done
                    // for it: the backend takes no traffic.
                    _ => valid = false,
                }
            }
            Backend {
                valid,
                name: &b.name,
                namespace: b.namespace.as_deref(),
                port: b.port,
                weight: b.weight(),
                headers,
            }
        });
        forward(backends, namespace, suffix)
    };
    if let Some(timeouts) = &rule.timeouts {
        // `request` bounds the whole request, retries included;
        // `backendRequest` each try. A rule that is not retried makes one
        // try, which `backendRequest` bounds when `request` is not written;
        // one that is retried is bounded by `request` only (each try by
        // `backendRequest`, and a try that times out is retried).
        let request = timeouts.request_duration();
        let backend = timeouts.backend_request_duration();
        let retried = rule.retry.is_some();
        route.timeout = if retried { request } else { request.or(backend) };
        if (request.is_some() || retried)
            && let Some(per_try) = backend
        {
            route.retries = Some(Retries {
                attempts: 0,
                per_try_timeout: Some(per_try),
                ..Default::default()
            });
        }
    }
    if let Some(retry) = &rule.retry {
        let per_try_timeout = route.retries.as_ref().and_then(|r| r.per_try_timeout);
        route.retries = Some(retries(retry, per_try_timeout));
    }
    let path = request.path();
    let path = match path.match_type() {
        PathMatchType::PathPrefix | PathMatchType::Exact => path.value(),
        PathMatchType::RegularExpression => "/",
    };
    route.session = rule
        .session_persistence
        .as_ref()
        .map(|persistence| sticky(persistence, &route.name, path));
    route
}

/// A rule's `sessionPersistence`: a cookie (by default) or a header named
/// `sessionName`, else `session-` and a digest of the rule's name (so
/// rules do not share one by default); a cookie's `Path` is the match's
/// path (a prefix or an exact one; else `/`). A `Permanent` cookie lasts
/// `absoluteTimeout` (its `Max-Age`, and the expiry its value carries,
/// which the proxy checks); a `Session` one (the default) the browser
/// session. What Envoy's session state has no equivalent for is not
/// applied: `absoluteTimeout` but for a `Permanent` cookie (Envoy expires a cookie only through its `Max-Age`, which would
/// make a session cookie permanent).
fn sticky(persistence: &SessionPersistence, rule: &str, path: &str) -> StickySession {
    let name = persistence.session_name.clone().unwrap_or_else(|| {
        // FNV-1a: stable across releases, unlike the standard hasher.
        let digest = rule.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        format!("session-{:08x}", digest as u32)
    });
    match persistence.persistence_type() {
        SessionPersistenceType::Header => StickySession::Header { name },
        SessionPersistenceType::Cookie => StickySession::Cookie {
            name,
            path: path.to_string(),
            ttl: persistence
                .absolute_timeout_duration()
                .filter(|_| persistence.lifetime_type() == CookieLifetimeType::Permanent),
        },
    }
}

/// A rule's `retry` (the Gateway API's experimental channel): its codes
/// retried (`retriable-status-codes`), and connection failures, resets
/// and refused streams (the errors before any status); `attempts` retries
/// after the first try (1 when not written), `backoff` between them.
fn retries(retry: &HttpRouteRetry, per_try_timeout: Option<Duration>) -> Retries {
    let status_codes: Vec<u32> = retry
        .codes
        .iter()
        .flatten()
        .filter_map(|c| u32::try_from(*c).ok())
        .collect();
    let mut retry_on = String::from("connect-failure,refused-stream,reset");
    if !status_codes.is_empty() {
        retry_on.push_str(",retriable-status-codes");
    }
    Retries {
        attempts: retry.attempts.and_then(|a| u32::try_from(a).ok()).unwrap_or(1),
        per_try_timeout,
        retry_on: Some(retry_on),
        status_codes,
        backoff: retry.backoff_duration(),
    }
}

/// The route of one match of a GRPCRoute's rule, as [`http_route`].
pub(super) fn grpc_route(
    meta: &ConfigMeta,
    parent: &ServiceParent,
    rule: &GrpcRouteRule,
    index: usize,
    request: &GrpcRouteMatch,
    suffix: &str,
    permitted: Permitted<'_>,
) -> HttpRoute {
    let namespace = &meta.namespace;
    let mut route = HttpRoute {
        name: rule_name(meta, rule.name.as_deref(), index),
        matches: vec![grpc_match(request, parent)],
        no_cluster_status: Some(500),
        ..Default::default()
    };
    let mut unsupported = false;
    let filters: &[GrpcRouteFilter] = rule.filters.as_deref().unwrap_or_default();
    for filter in filters {
        match filter.kind {
            Some(GrpcRouteFilterType::RequestHeaderModifier) => modify(
                &mut route.headers.request,
                filter.request_header_modifier.as_ref(),
            ),
            Some(GrpcRouteFilterType::ResponseHeaderModifier) => modify(
                &mut route.headers.response,
                filter.response_header_modifier.as_ref(),
            ),
            Some(GrpcRouteFilterType::RequestMirror) => {
                route.mirrors.extend(
                    filter
                        .request_mirror
                        .as_ref()
                        .and_then(|m| mirror(m, namespace, suffix)),
                );
            }
            None => {}
            Some(_) => unsupported = true,
        }
    }
    route.action = if unsupported {
        internal_error()
    } else {
        let backends = rule.backend_refs.iter().flatten().map(|b| {
            let mut headers = Headers::default();
            let mut valid = is_core(b.group())
                && b.kind() == "Service"
                && permitted(b.namespace.as_deref().unwrap_or(namespace), &b.name);
            for filter in b.filters.iter().flatten() {
                match filter.kind {
                    Some(GrpcRouteFilterType::RequestHeaderModifier) => {
                        modify(&mut headers.request, filter.request_header_modifier.as_ref())
                    }
                    Some(GrpcRouteFilterType::ResponseHeaderModifier) => {
                        modify(&mut headers.response, filter.response_header_modifier.as_ref())
                    }
                    _ => valid = false,
                }
            }
            Backend {
                valid,
                name: &b.name,
                namespace: b.namespace.as_deref(),
                port: b.port,
                weight: b.weight(),
                headers,
            }
        });
        forward(backends, namespace, suffix)
    };
    // A gRPC call's path is its method: the cookie is for every path.
    route.session = rule
        .session_persistence
        .as_ref()
        .map(|persistence| sticky(persistence, &route.name, "/"));
    route
}

/// A rule's backend reference, read.
struct Backend<'a> {
    /// A Service, with only filters pilot does.
    valid: bool,
    name: &'a str,
    namespace: Option<&'a str>,
    port: Option<i32>,
    weight: i32,
    /// Its own header modifiers.
    headers: Headers,
}

/// A CORS filter: an origin with `*` matches any characters there.
fn cors(cors: &GatewayCors) -> Cors {
    let words = |list: &Option<Vec<String>>| list.iter().flatten().cloned().collect::<Vec<_>>();
    Cors {
        allow_origins: cors
            .allow_origins
            .iter()
            .flatten()
            .map(|origin| {
                if origin.contains('*') {
                    let parts: Vec<String> = origin.split('*').map(regex_escape).collect();
                    StringMatch::Regex(parts.join(".*"))
                } else {
                    StringMatch::Exact(origin.clone())
                }
            })
            .collect(),
        allow_methods: cors
            .allow_methods
            .iter()
            .flatten()
            .filter_map(|m| match serde_json::to_value(m) {
                Ok(serde_json::Value::String(method)) => Some(method),
                _ => None,
            })
            .collect(),
        allow_headers: words(&cors.allow_headers),
        expose_headers: words(&cors.expose_headers),
        max_age: u64::try_from(cors.max_age()).ok().map(Duration::from_secs),
        allow_credentials: cors.allow_credentials,
    }
}

/// The answer of a rule that cannot forward: 500, as the Gateway API
/// says.
fn internal_error() -> HttpAction {
    HttpAction::DirectResponse(DirectResponse {
        status: 500,
        body: None,
    })
}

/// Forwarding to the backends with traffic: an invalid one (not a
/// Service, or no port) is a destination naming no service, whose share
/// is answered 500; 500 for every request when no backend is valid or none
/// has traffic.
fn forward<'a>(backends: impl Iterator<Item = Backend<'a>>, namespace: &str, suffix: &str) -> HttpAction {
    let targets: Vec<WeightedDestination> = backends
        .filter_map(|backend| {
            let weight = u32::try_from(backend.weight).ok().filter(|w| *w > 0)?;
            let port = backend.port.and_then(|p| u16::try_from(p).ok());
            let host = match port {
                Some(_) if backend.valid => service_host(backend.name, backend.namespace, namespace, suffix),
                _ => String::new(),
            };
            let mut destination = RouteDestination::new(host, Default::default());
            destination.port = port;
            let mut target = WeightedDestination::new(destination, weight);
            target.headers = backend.headers;
            Some(target)
        })
        .collect();
    if targets.iter().all(|t| t.destination.host.is_empty()) {
        internal_error()
    } else {
        HttpAction::Route(targets)
    }
}

fn mirror(mirror: &RequestMirror, namespace: &str, suffix: &str) -> Option<Mirror> {
    let backend: &BackendObjectReference = mirror.backend_ref.as_ref()?;
    if !is_core(backend.group()) || backend.kind() != "Service" {
        return None;
    }
    let mut destination = RouteDestination::new(
        service_host(&backend.name, backend.namespace.as_deref(), namespace, suffix),
        Default::default(),
    );
    destination.port = Some(u16::try_from(backend.port?).ok()?);
    let percent = match (&mirror.percent, &mirror.fraction) {
        (Some(percent), _) => Some(f64::from(*percent)),
        (None, Some(fraction)) => {
            let denominator = fraction.denominator();
            (denominator > 0)
                .then(|| f64::from(fraction.numerator.unwrap_or(0)) * 100.0 / f64::from(denominator))
        }
        (None, None) => None,
    };
    Some(Mirror { destination, percent })
}

fn modify(operations: &mut HeaderOperations, modifier: Option<&HeaderModifier>) {
    let Some(modifier) = modifier else { return };
    let pairs = |headers: &Option<Vec<pilot_api::gateway_api::HttpHeader>>| {
        headers
            .iter()
            .flatten()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.clone()))
            .collect::<Vec<_>>()
    };
    operations.set.extend(pairs(&modifier.set));
    operations.add.extend(pairs(&modifier.add));
    operations
        .remove
        .extend(modifier.remove.iter().flatten().map(|h| h.to_ascii_lowercase()));
}

fn full_path(modifier: &HttpPathModifier) -> Option<String> {
    (modifier.kind == Some(PathModifierType::ReplaceFullPath))
        .then(|| modifier.replace_full_path.clone())
        .flatten()
}

fn prefix_replacement(modifier: &HttpPathModifier) -> Option<String> {
    (modifier.kind == Some(PathModifierType::ReplacePrefixMatch))
        .then(|| modifier.replace_prefix_match.clone())
        .flatten()
}

/// A URL rewrite: the authority, and the path replaced in full (a regular
/// expression taking the whole path) or its matched prefix (whole
/// segments: `/prefix/one` with `/prefix` replaced by `/new/` is
/// `/new/one`, by `/` it is `/one`).
fn url_rewrite(
    hostname: Option<String>,
    path: Option<&HttpPathModifier>,
    request: &HttpRouteMatch,
) -> Rewrite {
    let mut rewrite = Rewrite {
        authority: hostname,
        ..Default::default()
    };
    if let Some(path) = path {
        if let Some(full) = full_path(path) {
            rewrite.uri_regex = Some(("^/.*$".into(), full));
        } else if let Some(replacement) = prefix_replacement(path) {
            let matched = path_prefix(request.path().value());
            let replacement = match replacement.trim_end_matches('/') {
                "" => "/".to_string(),
                trimmed => trimmed.to_string(),
            };
            let (pattern, substitution) = if matched == "/" {
                let substitution = if replacement == "/" {
                    "/".to_string()
                } else {
                    format!("{replacement}/")
                };
                ("^/".to_string(), substitution)
            } else if replacement == "/" {
                (format!("^{}/?", regex_escape(&matched)), "/".to_string())
            } else {
                (
                    format!("^{}(/?)", regex_escape(&matched)),
                    format!("{replacement}\\1"),
                )
            };
            rewrite.uri_regex = Some((pattern, substitution));
        }
    }
    rewrite
}

/// A `PathPrefix` value as matched: without a trailing `/` unless `/`.
fn path_prefix(value: &str) -> String {
    match value.trim_end_matches('/') {
        "" => "/".to_string(),
        trimmed => trimmed.to_string(),
    }
}

fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn http_match(request: &HttpRouteMatch, parent: &ServiceParent) -> HttpMatch {
    let path = request.path();
    let uri = match path.match_type() {
        PathMatchType::Exact => StringMatch::Exact(path.value().to_string()),
        PathMatchType::RegularExpression => StringMatch::Regex(path.value().to_string()),
        _ => StringMatch::PathPrefix(path_prefix(path.value())),
    };
    let mut out = parent_match(parent);
    out.uri = Some(uri);
    for header in request.headers.iter().flatten() {
        out.headers
            .entry(header.name.to_ascii_lowercase())
            .or_insert_with(|| header_match(header));
    }
    for param in request.query_params.iter().flatten() {
        out.query_params
            .entry(param.name.clone())
            .or_insert_with(|| query_match(param));
    }
    out.method = request.method.and_then(|m| match serde_json::to_value(m) {
        Ok(serde_json::Value::String(method)) => Some(StringMatch::Exact(method)),
        _ => None,
    });
    out
}

fn header_match(header: &HttpHeaderMatch) -> StringMatch {
    string_match(header.match_type(), &header.value)
}

fn query_match(param: &HttpQueryParamMatch) -> StringMatch {
    string_match(param.match_type(), &param.value)
}

fn string_match(kind: StringMatchType, value: &str) -> StringMatch {
    match kind {
        StringMatchType::RegularExpression => StringMatch::Regex(value.to_string()),
        _ => StringMatch::Exact(value.to_string()),
    }
}

/// What every match of a route attached to `parent` carries: the Service
/// port, and for a consumer route its namespace.
fn parent_match(parent: &ServiceParent) -> HttpMatch {
    HttpMatch {
        port: parent.port,
        source_namespace: parent.consumer.then(|| parent.route_namespace.clone()),
        ..Default::default()
    }
}

fn grpc_match(request: &GrpcRouteMatch, parent: &ServiceParent) -> HttpMatch {
    let mut out = parent_match(parent);
    out.uri = request.method.as_ref().and_then(grpc_path);
    for header in request.headers.iter().flatten() {
        out.headers
            .entry(header.name.to_ascii_lowercase())
            .or_insert_with(|| grpc_header(header));
    }
    out
}

fn grpc_header(header: &GrpcHeaderMatch) -> StringMatch {
    string_match(header.match_type(), &header.value)
}

/// A gRPC method match as a match of the path `/service/method`.
fn grpc_path(method: &GrpcMethodMatch) -> Option<StringMatch> {
    let service = method.service.as_deref().filter(|s| !s.is_empty());
    let name = method.method.as_deref().filter(|s| !s.is_empty());
    match method.match_type() {
        StringMatchType::RegularExpression => Some(StringMatch::Regex(format!(
            "/{}/{}",
            service.unwrap_or("[^/]+"),
            name.unwrap_or("[^/]+")
        ))),
        _ => match (service, name) {
            (Some(service), Some(name)) => Some(StringMatch::Exact(format!("/{service}/{name}"))),
            (Some(service), None) => Some(StringMatch::Prefix(format!("/{service}/"))),
            (None, Some(name)) => Some(StringMatch::Regex(format!("/[^/]+/{}", regex_escape(name)))),
            (None, None) => None,
        },
    }
}
