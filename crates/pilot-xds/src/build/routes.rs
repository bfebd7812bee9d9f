//! Envoy routes from the routing model's HTTP routes: a virtual host's
//! routes in order (matches, weighted clusters, redirects, direct
//! responses, rewrites, retries, faults, mirrors, CORS, headers), which
//! of a route's matches admit the asking proxy, and the default route to
//! the service. A sidecar's route configurations are `route_config.rs`'s.

use std::collections::HashMap;

use envoy_types::pb::envoy::config::core::v3::{
    DataSource, HeaderValue, HeaderValueOption, RuntimeFractionalPercent, TypedExtensionConfig, data_source,
    header_value_option,
};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, HeaderMatcher, QueryParameterMatcher, RedirectAction, RetryPolicy, Route,
    RouteAction, RouteMatch, WeightedCluster, header_matcher, query_parameter_matcher, redirect_action,
    retry_policy, route, route_action, route_match, weighted_cluster,
};
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{FaultDelay, fault_delay};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{FaultAbort, HttpFault, fault_abort};
use envoy_types::pb::envoy::extensions::filters::http::stateful_session::v3::{
    StatefulSession, StatefulSessionPerRoute, stateful_session_per_route,
};
use envoy_types::pb::envoy::extensions::http::stateful_session::cookie::v3::CookieBasedSessionState;
use envoy_types::pb::envoy::extensions::http::stateful_session::header::v3::HeaderBasedSessionState;
use envoy_types::pb::envoy::r#type::http::v3::Cookie;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatchAndSubstitute, RegexMatcher, StringMatcher as EnvoyStringMatcher, string_matcher,
};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent};
use envoy_types::pb::google::protobuf::{Any, BoolValue, UInt32Value};
use pilot_model::{Labels, Service, ServiceInstance};
use pilot_routing::{
    Cors, Fault, HashKey, HeaderOperations, HttpAction, HttpMatch, HttpRoute, MESH_GATEWAY, Redirect,
    Retries, RouteDestination, StickySession, StringMatch, WeightedDestination,
};

use super::util::{any, duration};
use crate::{ClusterName, Proxy};

/// The filter names routes configure per route.
pub const FAULT_FILTER: &str = "envoy.filters.http.fault";
/// The CORS filter's name.
pub const CORS_FILTER: &str = "envoy.filters.http.cors";
/// The stateful session filter: in every HTTP connection manager with no
/// session of its own, given one by the routes that keep sessions.
pub const STATEFUL_SESSION_FILTER: &str = "envoy.filters.http.stateful_session";

/// The routes of `service`'s virtual host on `port` (`service_port`: the
/// service port's own number): an Envoy route for each match of the host's
/// `routes` that `admitted` admits (one flag per match, in order, as
/// [`admitted`] gives them; a route without matches takes every request),
/// then a default route unless one of them catches everything, hashing
/// `default_hash` when the service's DestinationRule asks for a consistent
/// hash ([`RoutingModel::default_hash`](pilot_routing::RoutingModel::default_hash)). The same for every proxy the same
/// matches admit.
pub fn virtual_host_routes(
    service: &Service,
    service_port: u16,
    port: u16,
    routes: &[HttpRoute],
    admitted: &[bool],
    default_hash: Option<&HashKey>,
) -> Vec<Route> {
    let mut out = Vec::new();
    let mut flags = admitted.iter().copied();
    for route in routes {
        if route.matches.is_empty() {
            out.push(envoy_route(route, None, &service.hostname, service_port));
            continue;
        }
        for request in &route.matches {
            // A match on another port is not this port's.
            if flags.next().unwrap_or(true) && request.port.is_none_or(|p| p == port) {
                out.push(envoy_route(route, Some(request), &service.hostname, service_port));
            }
        }
    }
    if !out.iter().any(is_catch_all) {
        let mut action =
            to_cluster(ClusterName::outbound(&service.hostname, port, Labels::new()).to_string());
        action
            .hash_policy
            .extend(default_hash.map(super::hash_policy::route_hash_policy));
        out.push(Route {
            name: "default".into(),
            r#match: Some(prefix_match("/")),
            action: Some(route::Action::Route(action)),
            ..Default::default()
        });
    }
    out
}

/// For each match of `routes`, in order, whether it admits this proxy
/// ([`admits`]).
pub fn admitted(routes: &[HttpRoute], own: &[ServiceInstance], proxy: &Proxy) -> Vec<bool> {
    routes
        .iter()
        .flat_map(|r| &r.matches)
        .map(|m| admits(m, own, proxy))
        .collect()
}

/// Whether a match's source conditions admit this proxy. A source service
/// (v1alpha2): the proxy runs an instance of it whose labels include the
/// source labels (or carries them in its node metadata). Source labels
/// alone: one of its instances or its node metadata carries them. A source
/// namespace: the proxy's. Matches bound to gateways other than `mesh`
/// admit no sidecar.
pub fn admits(request: &HttpMatch, own: &[ServiceInstance], proxy: &Proxy) -> bool {
    if !request.gateways.is_empty() && !request.gateways.iter().any(|g| g == MESH_GATEWAY) {
        return false;
    }
    if let Some(namespace) = &request.source_namespace
        && proxy.domain.split('.').next() != Some(namespace.as_str())
    {
        return false;
    }
    let wanted = &request.source_labels;
    match &request.source_service {
        Some(host) => own.iter().any(|i| {
            &i.service.hostname == host
                && (wanted.is_subset_of(&i.labels) || wanted.is_subset_of(&proxy.labels))
        }),
        None => {
            wanted.is_empty()
                || wanted.is_subset_of(&proxy.labels)
                || own.iter().any(|i| wanted.is_subset_of(&i.labels))
        }
    }
}

/// The Envoy route of one route of the model and one of its matches (none:
/// every request), for one service port.
pub(crate) fn envoy_route(route: &HttpRoute, request: Option<&HttpMatch>, host: &str, port: u16) -> Route {
    let route_match = match request {
        Some(request) => request_match(request),
        None => prefix_match("/"),
    };
    let action = match &route.action {
        HttpAction::Redirect(redirect) => route::Action::Redirect(redirect_action(redirect)),
        HttpAction::DirectResponse(response) => route::Action::DirectResponse(DirectResponseAction {
            status: response.status,
            body: response.body.clone().map(|body| DataSource {
                specifier: Some(data_source::Specifier::InlineString(body)),
                ..Default::default()
            }),
            ..Default::default()
        }),
        HttpAction::Route(targets) => route::Action::Route(route_action(route, targets, host, port)),
        _ => route::Action::Route(to_cluster(
            ClusterName::outbound(host, port, Labels::new()).to_string(),
        )),
    };
    let mut typed_per_filter_config: HashMap<String, Any> = HashMap::new();
    if let Some(fault) = &route.fault {
        typed_per_filter_config.insert(FAULT_FILTER.into(), any(&http_fault(fault)));
    }
    if let Some(cors) = &route.cors {
        typed_per_filter_config.insert(CORS_FILTER.into(), any(&cors_policy(cors)));
    }
    if let Some(session) = &route.session {
        typed_per_filter_config.insert(STATEFUL_SESSION_FILTER.into(), any(&stateful_session(session)));
    }
    let headers = &route.headers;
    Route {
        name: route.name.clone(),
        r#match: Some(route_match),
        action: Some(action),
        request_headers_to_add: headers_to_add(&headers.request),
        request_headers_to_remove: headers.request.remove.clone(),
        response_headers_to_add: headers_to_add(&headers.response),
        response_headers_to_remove: headers.response.remove.clone(),
        typed_per_filter_config,
        ..Default::default()
    }
}

/// Added headers (appended to a value already there), then set ones
/// (replacing it).
fn headers_to_add(operations: &HeaderOperations) -> Vec<HeaderValueOption> {
    let option = |(key, value): &(String, String), action: header_value_option::HeaderAppendAction| {
        HeaderValueOption {
            header: Some(HeaderValue {
                key: key.clone(),
                // Envoy reads `%` as the start of a substitution.
                value: value.replace('%', "%%"),
                ..Default::default()
            }),
            append_action: action as i32,
            ..Default::default()
        }
    };
    operations
        .add
        .iter()
        .map(|h| option(h, header_value_option::HeaderAppendAction::AppendIfExistsOrAdd))
        .chain(
            operations
                .set
                .iter()
                .map(|h| option(h, header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd)),
        )
        .collect()
}

/// A redirect: the new authority, path (or path prefix), scheme and port
/// (given, or the scheme's default when derived from it), and code.
fn redirect_action(redirect: &Redirect) -> RedirectAction {
    let path = match (&redirect.uri, &redirect.prefix) {
        (Some(uri), _) => Some(redirect_action::PathRewriteSpecifier::PathRedirect(uri.clone())),
        (None, Some(prefix)) => Some(redirect_action::PathRewriteSpecifier::PrefixRewrite(
            prefix.clone(),
        )),
        (None, None) => None,
    };
    let scheme = redirect
        .scheme
        .clone()
        .map(redirect_action::SchemeRewriteSpecifier::SchemeRedirect);
    let default_port = match redirect.scheme.as_deref() {
        Some("https") => 443,
        _ => 80,
    };
    let port = redirect
        .port
        .map(u32::from)
        .or(redirect.port_from_scheme.then_some(default_port));
    RedirectAction {
        host_redirect: redirect.authority.clone().unwrap_or_default(),
        path_rewrite_specifier: path,
        scheme_rewrite_specifier: scheme,
        port_redirect: port.unwrap_or_default(),
        response_code: redirect.code.map(redirect_code).unwrap_or_default() as i32,
        ..Default::default()
    }
}

fn redirect_code(code: u32) -> redirect_action::RedirectResponseCode {
    use redirect_action::RedirectResponseCode as Code;
    match code {
        302 => Code::Found,
        303 => Code::SeeOther,
        307 => Code::TemporaryRedirect,
        308 => Code::PermanentRedirect,
        _ => Code::MovedPermanently,
    }
}

fn route_action(route: &HttpRoute, targets: &[WeightedDestination], host: &str, port: u16) -> RouteAction {
    let cluster_of = |d: &RouteDestination| {
        ClusterName::outbound(&d.host, d.port.unwrap_or(port), d.subset.clone()).to_string()
    };
    // A destination's own headers need a weighted cluster, even alone.
    let own_headers = targets.iter().any(|t| !t.headers.is_empty());
    let mut action = match targets {
        [] => to_cluster(ClusterName::outbound(host, port, Labels::new()).to_string()),
        [one] if !own_headers => to_cluster(cluster_of(&one.destination)),
        many => RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::WeightedClusters(
                WeightedCluster {
                    clusters: many
                        .iter()
                        .map(|target| weighted_cluster::ClusterWeight {
                            name: cluster_of(&target.destination),
                            weight: Some(UInt32Value { value: target.weight }),
                            request_headers_to_add: headers_to_add(&target.headers.request),
                            request_headers_to_remove: target.headers.request.remove.clone(),
                            response_headers_to_add: headers_to_add(&target.headers.response),
                            response_headers_to_remove: target.headers.response.remove.clone(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        },
    };
    if let Some(rewrite) = &route.rewrite {
        if let Some(uri) = &rewrite.uri {
            action.prefix_rewrite = uri.clone();
        }
        if let Some((pattern, substitution)) = &rewrite.uri_regex {
            action.regex_rewrite = Some(RegexMatchAndSubstitute {
                pattern: Some(regex_matcher(pattern)),
                substitution: substitution.clone(),
            });
        }
        if let Some(authority) = &rewrite.authority {
            action.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(
                authority.clone(),
            ));
        }
    }
    if let Some(timeout) = route.timeout {
        action.timeout = Some(duration(timeout));
    }
    action.cluster_not_found_response_code = match route.no_cluster_status {
        Some(404) => route_action::ClusterNotFoundResponseCode::NotFound,
        Some(500) => route_action::ClusterNotFoundResponseCode::InternalServerError,
        _ => route_action::ClusterNotFoundResponseCode::ServiceUnavailable,
    } as i32;
    if let Some(retry) = &route.retries {
        action.retry_policy = Some(RetryPolicy {
            retry_on: retry
                .retry_on
                .clone()
                .unwrap_or_else(|| Retries::DEFAULT_RETRY_ON.to_string()),
            num_retries: Some(UInt32Value {
                value: retry.attempts,
            }),
            per_try_timeout: retry.per_try_timeout.map(duration),
            retriable_status_codes: retry.status_codes.clone(),
            retry_back_off: retry.backoff.map(|base| retry_policy::RetryBackOff {
                base_interval: Some(duration(base)),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    for mirror in &route.mirrors {
        action
            .request_mirror_policies
            .push(route_action::RequestMirrorPolicy {
                cluster: cluster_of(&mirror.destination),
                runtime_fraction: mirror.percent.map(|p| RuntimeFractionalPercent {
                    default_value: Some(percent(p)),
                    ..Default::default()
                }),
                ..Default::default()
            });
    }
    if let Some(key) = &route.hash {
        action
            .hash_policy
            .push(super::hash_policy::route_hash_policy(key));
    }
    if route.websocket {
        action.upgrade_configs.push(route_action::UpgradeConfig {
            upgrade_type: "websocket".into(),
            enabled: Some(BoolValue { value: true }),
            ..Default::default()
        });
    }
    action
}

/// The route match of a request match: the path, then header matchers in
/// name order (`:authority`, `:method` and `:scheme` ordered by their
/// names without the colon), headers that must not match, query
/// parameters.
pub(crate) fn request_match(request: &HttpMatch) -> RouteMatch {
    let mut route_match = prefix_match("/");
    if let Some(uri) = &request.uri {
        route_match.path_specifier = Some(path_specifier(uri));
    }
    let mut named: Vec<(&str, String, &StringMatch)> = request
        .headers
        .iter()
        .map(|(name, matcher)| (name.as_str(), name.clone(), matcher))
        .collect();
    for (bare, matcher) in [
        ("authority", &request.authority),
        ("method", &request.method),
        ("scheme", &request.scheme),
    ] {
        if let Some(matcher) = matcher {
            named.push((bare, format!(":{bare}"), matcher));
        }
    }
    named.sort_by(|a, b| a.0.cmp(b.0));
    route_match.headers = named
        .into_iter()
        .map(|(_, name, matcher)| header(&name, matcher))
        .collect();
    for (name, matcher) in &request.without_headers {
        let mut inverted = header(name, matcher);
        inverted.invert_match = true;
        route_match.headers.push(inverted);
    }
    route_match.query_parameters = request
        .query_params
        .iter()
        .map(|(name, matcher)| QueryParameterMatcher {
            name: name.clone(),
            query_parameter_match_specifier: Some(
                query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(string_matcher(matcher)),
            ),
        })
        .collect();
    route_match
}

pub(crate) fn to_cluster(name: String) -> RouteAction {
    RouteAction {
        cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(name)),
        ..Default::default()
    }
}

pub(crate) fn prefix_match(prefix: &str) -> RouteMatch {
    RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix(prefix.to_string())),
        ..Default::default()
    }
}

pub(crate) fn is_catch_all(route: &Route) -> bool {
    route.r#match.as_ref().is_some_and(|m| {
        m.headers.is_empty()
            && matches!(&m.path_specifier, Some(route_match::PathSpecifier::Prefix(p)) if p == "/")
    })
}

fn path_specifier(matcher: &StringMatch) -> route_match::PathSpecifier {
    match matcher {
        StringMatch::Exact(exact) => route_match::PathSpecifier::Path(exact.clone()),
        StringMatch::Regex(regex) => route_match::PathSpecifier::SafeRegex(regex_matcher(regex)),
        StringMatch::Prefix(prefix) => route_match::PathSpecifier::Prefix(prefix.clone()),
        StringMatch::PathPrefix(prefix) if prefix == "/" => {
            route_match::PathSpecifier::Prefix(prefix.clone())
        }
        StringMatch::PathPrefix(prefix) => route_match::PathSpecifier::PathSeparatedPrefix(prefix.clone()),
        _ => route_match::PathSpecifier::Prefix("/".into()),
    }
}

fn header(name: &str, matcher: &StringMatch) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_string(),
        header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(string_matcher(
            matcher,
        ))),
        ..Default::default()
    }
}

fn string_matcher(matcher: &StringMatch) -> EnvoyStringMatcher {
    let pattern = match matcher {
        StringMatch::Exact(exact) => string_matcher::MatchPattern::Exact(exact.clone()),
        StringMatch::Regex(regex) => string_matcher::MatchPattern::SafeRegex(regex_matcher(regex)),
        StringMatch::Prefix(prefix) | StringMatch::PathPrefix(prefix) => {
            string_matcher::MatchPattern::Prefix(prefix.clone())
        }
        _ => string_matcher::MatchPattern::Prefix(String::new()),
    };
    EnvoyStringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    }
}

fn regex_matcher(regex: &str) -> RegexMatcher {
    RegexMatcher {
        regex: regex.to_string(),
        ..Default::default()
    }
}

/// A percentage with up to four decimals, as a fraction of a million.
fn percent(value: f64) -> FractionalPercent {
    FractionalPercent {
        numerator: (value.clamp(0.0, 100.0) * 10_000.0).round() as u32,
        denominator: fractional_percent::DenominatorType::Million as i32,
    }
}

fn http_fault(fault: &Fault) -> HttpFault {
    HttpFault {
        delay: fault.delay.as_ref().map(|delay| FaultDelay {
            percentage: Some(percent(delay.percent)),
            fault_delay_secifier: delay
                .fixed
                .map(|d| fault_delay::FaultDelaySecifier::FixedDelay(duration(d))),
        }),
        abort: fault.abort.as_ref().map(|abort| FaultAbort {
            percentage: Some(percent(abort.percent)),
            error_type: abort.http_status.map(fault_abort::ErrorType::HttpStatus),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn cors_policy(cors: &Cors) -> CorsPolicy {
    CorsPolicy {
        allow_origin_string_match: cors.allow_origins.iter().map(string_matcher).collect(),
        allow_methods: cors.allow_methods.join(","),
        allow_headers: cors.allow_headers.join(","),
        expose_headers: cors.expose_headers.join(","),
        max_age: cors.max_age.map(|d| d.as_secs().to_string()).unwrap_or_default(),
        allow_credentials: cors.allow_credentials.map(|value| BoolValue { value }),
        ..Default::default()
    }
}

/// The stateful session filter's configuration for a route keeping
/// sessions: Envoy names the endpoint it chose in the cookie (its value
/// the address and, with a TTL, the expiry Envoy checks) or the header of
/// its answer, and sends a request carrying it there while that endpoint
/// is one of the cluster's healthy ones (else chooses again).
fn stateful_session(session: &StickySession) -> StatefulSessionPerRoute {
    let state = match session {
        StickySession::Cookie { name, path, ttl } => TypedExtensionConfig {
            name: "envoy.http.stateful_session.cookie".into(),
            typed_config: Some(any(&CookieBasedSessionState {
                cookie: Some(Cookie {
                    name: name.clone(),
                    path: path.clone(),
                    ttl: ttl.map(duration),
                    ..Default::default()
                }),
            })),
        },
        StickySession::Header { name } => TypedExtensionConfig {
            name: "envoy.http.stateful_session.header".into(),
            typed_config: Some(any(&HeaderBasedSessionState { name: name.clone() })),
        },
        _ => TypedExtensionConfig::default(),
    };
    StatefulSessionPerRoute {
        r#override: Some(stateful_session_per_route::Override::StatefulSession(
            StatefulSession {
                session_state: Some(state),
                ..Default::default()
            },
        )),
    }
}
