//! RDS: one route configuration per outbound HTTP port, a virtual host per
//! service, and route rules turned into routes in precedence order.

use std::collections::{BTreeSet, HashMap};

use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption, header_value_option};
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, RedirectAction, RetryPolicy, Route, RouteAction, RouteConfiguration, RouteMatch,
    VirtualHost, WeightedCluster, header_matcher, redirect_action, route, route_action, route_match,
    weighted_cluster,
};
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{FaultDelay, fault_delay};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{FaultAbort, HttpFault, fault_abort};
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent};
use envoy_types::pb::google::protobuf::{Any, BoolValue};
use pilot_model::istio::{HttpFaultInjection, MatchRequest, RouteRule, StringMatch};
use pilot_model::{Config, Labels, Service, ServiceInstance};

use crate::names::route_config_name;
use crate::util::{any, duration, u32_value};
use crate::{ClusterName, MeshConfig, MeshIndex, Proxy};

/// The filter names routes configure per route.
pub const FAULT_FILTER: &str = "envoy.filters.http.fault";
/// The CORS filter's name.
pub const CORS_FILTER: &str = "envoy.filters.http.cors";

/// The route configuration of outbound HTTP port `port`: a virtual host
/// for every service with an HTTP port of that number.
pub fn route_configuration(
    port: u16,
    services: &[std::sync::Arc<Service>],
    mesh: &MeshConfig,
    proxy: &Proxy,
    own: &[ServiceInstance],
    index: &MeshIndex<'_>,
) -> RouteConfiguration {
    let mut used_domains = BTreeSet::new();
    let mut virtual_hosts = Vec::new();
    for service in services {
        let Some(service_port) = service.port_by_number(port).filter(|p| p.protocol.is_http()) else {
            continue;
        };
        let domains: Vec<String> = domains(service, proxy)
            .into_iter()
            .filter(|d| used_domains.insert(d.clone()))
            .collect();
        if domains.is_empty() {
            continue;
        }
        let applying = index
            .rules_for(&service.hostname)
            .iter()
            .copied()
            .filter(|rule| applies_to(rule, mesh, own, proxy));
        let routes = virtual_host_routes(service, service_port.port, port, applying, mesh);
        virtual_hosts.push(VirtualHost {
            name: format!("{}:{port}", service.hostname),
            domains,
            routes,
            ..Default::default()
        });
    }
    virtual_hosts.extend(crate::egress::virtual_hosts(
        port,
        mesh,
        proxy,
        own,
        index,
        &mut used_domains,
    ));
    RouteConfiguration {
        name: route_config_name(port),
        virtual_hosts,
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    }
}

/// The routes of `service`'s virtual host on `port` (`service_port`: the
/// service port's own number): the `applying` rules' routes in order, then
/// a default route unless one of them catches everything. The same for
/// every proxy the same rules apply to.
pub fn virtual_host_routes<'a>(
    service: &Service,
    service_port: u16,
    port: u16,
    applying: impl Iterator<Item = &'a Config<RouteRule>>,
    mesh: &MeshConfig,
) -> Vec<Route> {
    let mut routes = Vec::new();
    for rule in applying {
        routes.extend(rule_routes(rule, &service.hostname, service_port, mesh));
    }
    if !routes.iter().any(is_catch_all) {
        routes.push(Route {
            name: "default".into(),
            r#match: Some(prefix_match("/")),
            action: Some(route::Action::Route(to_cluster(
                ClusterName::outbound(&service.hostname, port, Labels::new()).to_string(),
            ))),
            ..Default::default()
        });
    }
    routes
}

/// The names a client may use for a service: the hostname, `name.namespace`,
/// `name.namespace.svc`, the short name within the proxy's own namespace, and
/// the address. Without a port: a sidecar's route configurations set
/// `ignore_port_in_host_matching`, so Envoy matches `Host: name:port` (any
/// port) against `name`, as Istio's sidecars do; the listener's port already
/// chose the route configuration. (Proxyless gRPC matches the target's
/// authority with its port: `domains_with_port`.)
pub fn domains(service: &Service, proxy: &Proxy) -> Vec<String> {
    let mut names = vec![service.hostname.clone()];
    let parts: Vec<&str> = service.hostname.split('.').collect();
    if parts.len() >= 2 {
        names.push(format!("{}.{}", parts[0], parts[1]));
        if parts.len() >= 3 {
            names.push(format!("{}.{}.{}", parts[0], parts[1], parts[2]));
        }
        let proxy_namespace = proxy.domain.split('.').next().unwrap_or_default();
        if parts[1] == proxy_namespace {
            names.push(parts[0].to_string());
        }
    }
    if let Some(address) = service.address {
        names.push(address.to_string());
    }
    let mut all: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        if !all.contains(&name) {
            all.push(name);
        }
    }
    all
}

/// [`domains`], each with `:port` and without: the names a proxyless gRPC
/// client's target may carry (its route configurations match the authority
/// as given, port included).
pub(crate) fn domains_with_port(service: &Service, port: u16, proxy: &Proxy) -> Vec<String> {
    domains(service, proxy)
        .into_iter()
        .flat_map(|name| [format!("{name}:{port}"), name])
        .collect()
}

/// Whether a rule's source match admits this proxy: the proxy must run an
/// instance of the source service whose labels include the source's labels
/// (or carry them in its node metadata).
pub fn applies_to(
    rule: &Config<RouteRule>,
    mesh: &MeshConfig,
    own: &[ServiceInstance],
    proxy: &Proxy,
) -> bool {
    let Some(source) = rule.spec.match_condition.as_ref().and_then(|m| m.source.as_ref()) else {
        return true;
    };
    let host = mesh.hostname(source, &rule.meta.namespace);
    let wanted = Labels(source.labels.clone());
    own.iter().any(|i| {
        i.service.hostname == host && (wanted.is_subset_of(&i.labels) || wanted.is_subset_of(&proxy.labels))
    })
}

/// The routes of one rule for one service port.
pub(crate) fn rule_routes(rule: &Config<RouteRule>, host: &str, port: u16, mesh: &MeshConfig) -> Vec<Route> {
    let spec = &rule.spec;
    let route_match = match spec.match_condition.as_ref().and_then(|m| m.request.as_ref()) {
        Some(request) => request_match(request),
        None => prefix_match("/"),
    };
    let action = if let Some(redirect) = &spec.redirect {
        route::Action::Redirect(RedirectAction {
            host_redirect: redirect.authority.clone(),
            path_rewrite_specifier: (!redirect.uri.is_empty())
                .then(|| redirect_action::PathRewriteSpecifier::PathRedirect(redirect.uri.clone())),
            ..Default::default()
        })
    } else {
        route::Action::Route(route_action(rule, host, port, mesh))
    };
    let mut typed_per_filter_config: HashMap<String, Any> = HashMap::new();
    if let Some(fault) = &spec.http_fault {
        typed_per_filter_config.insert(FAULT_FILTER.into(), any(&http_fault(fault)));
    }
    if let Some(cors) = &spec.cors_policy {
        typed_per_filter_config.insert(CORS_FILTER.into(), any(&cors_policy(cors)));
    }
    vec![Route {
        name: format!("{}/{}", rule.meta.namespace, rule.meta.name),
        r#match: Some(route_match),
        action: Some(action),
        request_headers_to_add: spec
            .append_headers
            .iter()
            .map(|(key, value)| HeaderValueOption {
                header: Some(HeaderValue {
                    key: key.clone(),
                    // Envoy reads `%` as the start of a substitution.
                    value: value.replace('%', "%%"),
                    ..Default::default()
                }),
                append_action: header_value_option::HeaderAppendAction::AppendIfExistsOrAdd as i32,
                ..Default::default()
            })
            .collect(),
        typed_per_filter_config,
        ..Default::default()
    }]
}

fn route_action(rule: &Config<RouteRule>, host: &str, port: u16, mesh: &MeshConfig) -> RouteAction {
    let spec = &rule.spec;
    let targets: Vec<(String, u32)> = spec
        .route
        .iter()
        .map(|r| {
            let target_host = r
                .destination
                .as_ref()
                .map(|d| mesh.hostname(d, &rule.meta.namespace))
                .unwrap_or_else(|| host.to_string());
            let weight = match r.weight {
                Some(w) => u32::try_from(w).unwrap_or(0),
                None => 100,
            };
            (
                ClusterName::outbound(&target_host, port, Labels(r.labels.clone())).to_string(),
                weight,
            )
        })
        .filter(|(_, weight)| *weight > 0)
        .collect();
    let mut action = match targets.as_slice() {
        [] => to_cluster(ClusterName::outbound(host, port, Labels::new()).to_string()),
        [(cluster, _)] => to_cluster(cluster.clone()),
        many => RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::WeightedClusters(
                WeightedCluster {
                    clusters: many
                        .iter()
                        .map(|(name, weight)| weighted_cluster::ClusterWeight {
                            name: name.clone(),
                            weight: Some(u32_value(i32::try_from(*weight).unwrap_or(0))),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            )),
            ..Default::default()
        },
    };
    if let Some(rewrite) = &spec.rewrite {
        action.prefix_rewrite = rewrite.uri.clone();
        if !rewrite.authority.is_empty() {
            action.host_rewrite_specifier = Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(
                rewrite.authority.clone(),
            ));
        }
    }
    if let Some(timeout) = spec
        .http_req_timeout
        .as_ref()
        .and_then(|t| t.simple_timeout.as_ref())
        .and_then(|t| t.timeout)
    {
        action.timeout = Some(duration(timeout.as_std()));
    }
    if let Some(retry) = spec
        .http_req_retries
        .as_ref()
        .and_then(|r| r.simple_retry.as_ref())
    {
        action.retry_policy = Some(RetryPolicy {
            retry_on: "5xx,connect-failure,refused-stream".into(),
            num_retries: Some(u32_value(retry.attempts)),
            per_try_timeout: retry.per_try_timeout.map(|d| duration(d.as_std())),
            ..Default::default()
        });
    }
    if let Some(mirror) = &spec.mirror {
        let mirror_host = mesh.hostname(mirror, &rule.meta.namespace);
        action
            .request_mirror_policies
            .push(route_action::RequestMirrorPolicy {
                cluster: ClusterName::outbound(&mirror_host, port, Labels(mirror.labels.clone())).to_string(),
                ..Default::default()
            });
    }
    if spec.websocket_upgrade {
        action.upgrade_configs.push(route_action::UpgradeConfig {
            upgrade_type: "websocket".into(),
            enabled: Some(BoolValue { value: true }),
            ..Default::default()
        });
    }
    action
}

/// The route match for a rule's request attributes: `uri` matches the
/// path; `scheme`, `method` and `authority` the pseudo-headers; any other
/// name a request header.
pub(crate) fn request_match(request: &MatchRequest) -> RouteMatch {
    let mut route_match = prefix_match("/");
    for (name, matcher) in &request.headers {
        match name.as_str() {
            "uri" => route_match.path_specifier = Some(path_specifier(matcher)),
            "scheme" | "method" | "authority" => {
                route_match.headers.push(header(&format!(":{name}"), matcher))
            }
            _ => route_match.headers.push(header(name, matcher)),
        }
    }
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
    if let Some(exact) = &matcher.exact {
        route_match::PathSpecifier::Path(exact.clone())
    } else if let Some(regex) = &matcher.regex {
        route_match::PathSpecifier::SafeRegex(regex_matcher(regex))
    } else {
        route_match::PathSpecifier::Prefix(matcher.prefix.clone().unwrap_or_else(|| "/".into()))
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

fn string_matcher(matcher: &StringMatch) -> StringMatcher {
    let pattern = if let Some(exact) = &matcher.exact {
        string_matcher::MatchPattern::Exact(exact.clone())
    } else if let Some(regex) = &matcher.regex {
        string_matcher::MatchPattern::SafeRegex(regex_matcher(regex))
    } else {
        string_matcher::MatchPattern::Prefix(matcher.prefix.clone().unwrap_or_default())
    };
    StringMatcher {
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

fn http_fault(fault: &HttpFaultInjection) -> HttpFault {
    HttpFault {
        delay: fault.delay.as_ref().map(|delay| FaultDelay {
            percentage: Some(percent(delay.percent)),
            fault_delay_secifier: delay
                .fixed_delay
                .map(|d| fault_delay::FaultDelaySecifier::FixedDelay(duration(d.as_std()))),
        }),
        abort: fault.abort.as_ref().map(|abort| FaultAbort {
            percentage: Some(percent(abort.percent)),
            error_type: abort
                .http_status
                .map(|status| fault_abort::ErrorType::HttpStatus(u32::try_from(status).unwrap_or(503))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn cors_policy(cors: &pilot_model::istio::CorsPolicy) -> CorsPolicy {
    CorsPolicy {
        allow_origin_string_match: cors
            .allow_origin
            .iter()
            .map(|origin| StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Exact(origin.clone())),
                ..Default::default()
            })
            .collect(),
        allow_methods: cors.allow_methods.join(","),
        allow_headers: cors.allow_headers.join(","),
        expose_headers: cors.expose_headers.join(","),
        max_age: cors
            .max_age
            .map(|d| d.as_std().as_secs().to_string())
            .unwrap_or_default(),
        allow_credentials: cors.allow_credentials.map(|value| BoolValue { value }),
        ..Default::default()
    }
}
