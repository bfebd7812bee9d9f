//! Compilation of the v1alpha2 routing kinds into the routing model:
//! a route rule is one HTTP route of its destination host, its
//! label-selected targets are subsets named after their labels, a
//! destination policy is the policy of its host or of its subset, an
//! egress rule an external service, ingress rules the ingress's servers.

use std::collections::{BTreeMap, BTreeSet};

use pilot_api::istio::{self, DestinationPolicy, IngressRule, RouteRule, SimpleLbPolicy};
use pilot_model::{Config, Labels, Protocol};

use super::{
    ConnectionPool, Cors, ExternalPort, ExternalService, Fault, FaultAbort, FaultDelay, HttpAction,
    HttpMatch, HttpRoute, IngressRoute, IngressServer, LoadBalancer, Mirror, OutlierDetection, PortSelector,
    Redirect, Resolution, Retries, Rewrite, RouteDestination, RoutingConfigs, RoutingModel, ServerTls,
    SimpleLb, StringMatch, TrafficPolicy, WeightedDestination,
};

/// Adds what the v1alpha2 objects of `configs` say to `model`.
pub(super) fn compile(configs: &RoutingConfigs, model: &mut RoutingModel) {
    route_rules(configs, model);
    destination_policies(configs, model);
    for rule in &configs.egress_rules {
        let Some(destination) = &rule.spec.destination else {
            continue;
        };
        let host = destination.service.clone();
        let ports = rule
            .spec
            .ports
            .iter()
            .filter_map(|port| {
                Some(ExternalPort {
                    number: u16::try_from(port.port).ok()?,
                    protocol: egress_protocol(&port.protocol),
                })
            })
            .collect();
        model.external.push(ExternalService {
            resolution: Resolution::of(&host),
            host,
            ports,
        });
    }
    model.ingress = ingress_servers(configs);
}

/// Each rule with a destination becomes a route of its host; a host's
/// routes are ordered by precedence (higher first), then namespace and
/// name. Every labelled target (and mirror) becomes a subset.
fn route_rules(configs: &RoutingConfigs, model: &mut RoutingModel) {
    let mut by_host: BTreeMap<String, Vec<&Config<RouteRule>>> = BTreeMap::new();
    for rule in &configs.route_rules {
        if let Some(destination) = &rule.spec.destination {
            by_host
                .entry(configs.hostname(destination, &rule.meta.namespace))
                .or_default()
                .push(rule);
        }
    }
    for (host, mut rules) in by_host {
        rules.sort_by(|a, b| {
            b.spec
                .precedence
                .cmp(&a.spec.precedence)
                .then_with(|| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)))
        });
        for rule in rules {
            let route = http_route(configs, rule, &host);
            // A rule's labelled targets are subsets, with or without weight.
            for target in &rule.spec.route {
                let labels = Labels(target.labels.clone());
                if !labels.is_empty() {
                    let target_host = target
                        .destination
                        .as_ref()
                        .map(|d| configs.hostname(d, &rule.meta.namespace))
                        .unwrap_or_else(|| host.clone());
                    model.add_subset(&target_host, &labels);
                }
            }
            for mirror in route.mirrors.iter().filter(|m| !m.destination.subset.is_empty()) {
                model.add_subset(&mirror.destination.host, &mirror.destination.subset);
            }
            model.host_mut(&host).http.push(route);
        }
    }
}

/// A policy without labels is its host's; with labels, its subset's. The
/// first one configured wins.
fn destination_policies(configs: &RoutingConfigs, model: &mut RoutingModel) {
    for policy in &configs.destination_policies {
        let Some(destination) = &policy.spec.destination else {
            continue;
        };
        let host = configs.hostname(destination, &policy.meta.namespace);
        let labels = Labels(destination.labels.clone());
        if labels.is_empty() {
            let entry = model.destination_mut(&host);
            if entry.policy.is_none() {
                entry.policy = Some(traffic_policy(&policy.spec));
            }
        } else {
            let subset = model.add_subset(&host, &labels);
            if subset.policy.is_none() {
                subset.policy = Some(traffic_policy(&policy.spec));
            }
        }
    }
}

fn http_route(configs: &RoutingConfigs, rule: &Config<RouteRule>, host: &str) -> HttpRoute {
    let spec = &rule.spec;
    let namespace = &rule.meta.namespace;
    let mut route = HttpRoute {
        name: format!("{namespace}/{}", rule.meta.name),
        ..Default::default()
    };
    if let Some(condition) = &spec.match_condition
        && (condition.source.is_some() || condition.request.is_some())
    {
        let mut matches = condition.request.as_ref().map(http_match).unwrap_or_default();
        if let Some(source) = &condition.source {
            matches.source_service = Some(configs.hostname(source, namespace));
            matches.source_labels = Labels(source.labels.clone());
        }
        route.matches.push(matches);
    }
    route.action = match &spec.redirect {
        Some(redirect) => HttpAction::Redirect(Redirect {
            uri: non_empty(&redirect.uri),
            authority: non_empty(&redirect.authority),
            ..Default::default()
        }),
        None => HttpAction::Route(
            spec.route
                .iter()
                .map(|target| {
                    let target_host = target
                        .destination
                        .as_ref()
                        .map(|d| configs.hostname(d, namespace))
                        .unwrap_or_else(|| host.to_string());
                    let weight = match target.weight {
                        Some(w) => u32::try_from(w).unwrap_or(0),
                        None => 100,
                    };
                    WeightedDestination::new(
                        RouteDestination::new(target_host, Labels(target.labels.clone())),
                        weight,
                    )
                })
                .filter(|target| target.weight > 0)
                .collect(),
        ),
    };
    route.rewrite = spec.rewrite.as_ref().map(|rewrite| Rewrite {
        uri: non_empty(&rewrite.uri),
        authority: non_empty(&rewrite.authority),
        uri_regex: None,
    });
    route.timeout = spec
        .http_req_timeout
        .as_ref()
        .and_then(|t| t.simple_timeout.as_ref())
        .and_then(|t| t.timeout)
        .map(|t| t.as_std());
    route.retries = spec
        .http_req_retries
        .as_ref()
        .and_then(|r| r.simple_retry.as_ref())
        .map(|retry| Retries {
            attempts: count(retry.attempts),
            per_try_timeout: retry.per_try_timeout.map(|d| d.as_std()),
            ..Default::default()
        });
    route.fault = spec.http_fault.as_ref().map(|fault| Fault {
        delay: fault.delay.as_ref().map(|delay| FaultDelay {
            percent: delay.percent,
            fixed: delay.fixed_delay.map(|d| d.as_std()),
        }),
        abort: fault.abort.as_ref().map(|abort| FaultAbort {
            percent: abort.percent,
            http_status: abort
                .http_status
                .map(|status| u32::try_from(status).unwrap_or(503)),
        }),
    });
    route.mirrors = spec
        .mirror
        .iter()
        .map(|mirror| Mirror {
            destination: RouteDestination::new(
                configs.hostname(mirror, namespace),
                Labels(mirror.labels.clone()),
            ),
            percent: None,
        })
        .collect();
    route.cors = spec.cors_policy.as_ref().map(|cors| Cors {
        allow_origins: cors
            .allow_origin
            .iter()
            .cloned()
            .map(StringMatch::Exact)
            .collect(),
        allow_methods: cors.allow_methods.clone(),
        allow_headers: cors.allow_headers.clone(),
        expose_headers: cors.expose_headers.clone(),
        max_age: cors.max_age.map(|d| d.as_std()),
        allow_credentials: cors.allow_credentials,
    });
    route.headers.request.add = spec
        .append_headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    route.websocket = spec.websocket_upgrade;
    route
}

/// A request match: `uri` matches the path; `scheme`, `method` and
/// `authority` the pseudo-headers; any other name a request header.
pub(super) fn http_match(request: &istio::MatchRequest) -> HttpMatch {
    let mut out = HttpMatch::default();
    for (name, matcher) in &request.headers {
        match name.as_str() {
            "uri" => out.uri = Some(string_match(matcher, "/")),
            "scheme" => out.scheme = Some(string_match(matcher, "")),
            "method" => out.method = Some(string_match(matcher, "")),
            "authority" => out.authority = Some(string_match(matcher, "")),
            _ => {
                out.headers.insert(name.clone(), string_match(matcher, ""));
            }
        }
    }
    out
}

/// Exact, else regular expression, else prefix (`default` when none is
/// given, which validation refuses).
fn string_match(matcher: &istio::StringMatch, default: &str) -> StringMatch {
    if let Some(exact) = &matcher.exact {
        StringMatch::Exact(exact.clone())
    } else if let Some(regex) = &matcher.regex {
        StringMatch::Regex(regex.clone())
    } else {
        StringMatch::Prefix(matcher.prefix.clone().unwrap_or_else(|| default.to_string()))
    }
}

fn traffic_policy(policy: &DestinationPolicy) -> TrafficPolicy {
    let mut out = TrafficPolicy {
        load_balancer: policy.load_balancing.as_ref().and_then(|lb| lb.name).map(|name| {
            LoadBalancer::Simple(match name {
                SimpleLbPolicy::RoundRobin => SimpleLb::RoundRobin,
                SimpleLbPolicy::LeastConn => SimpleLb::LeastRequest,
                SimpleLbPolicy::Random => SimpleLb::Random,
            })
        }),
        ..Default::default()
    };
    let Some(cb) = policy.circuit_breaker.as_ref().and_then(|c| c.simple_cb.as_ref()) else {
        return out;
    };
    out.connection_pool = Some(ConnectionPool {
        max_connections: cb.max_connections.map(count),
        max_pending_requests: cb.http_max_pending_requests.map(count),
        max_requests: cb.http_max_requests.map(count),
        max_retries: cb.http_max_retries.map(count),
        max_requests_per_connection: cb.http_max_requests_per_connection.map(count),
        connect_timeout: None,
        ..Default::default()
    });
    if cb.http_consecutive_errors.is_some()
        || cb.http_detection_interval.is_some()
        || cb.sleep_window.is_some()
        || cb.http_max_ejection_percent.is_some()
    {
        out.outlier_detection = Some(OutlierDetection {
            consecutive_5xx_errors: cb.http_consecutive_errors.map(count),
            interval: cb.http_detection_interval.map(|d| d.as_std()),
            base_ejection_time: cb.sleep_window.map(|d| d.as_std()),
            max_ejection_percent: cb.http_max_ejection_percent.map(count),
            ..Default::default()
        });
    }
    out
}

/// The ingress's servers: one per port some rule names, its routes the
/// rules on it by precedence (higher first), then namespace and name; its
/// TLS secret the first of theirs.
fn ingress_servers(configs: &RoutingConfigs) -> Vec<IngressServer> {
    let mut rules: Vec<&Config<IngressRule>> = configs.ingress_rules.iter().map(|c| &**c).collect();
    rules.sort_by(|a, b| {
        b.spec
            .precedence
            .cmp(&a.spec.precedence)
            .then_with(|| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)))
    });
    let ports: BTreeSet<u16> = rules
        .iter()
        .filter_map(|r| u16::try_from(r.spec.listener_port()).ok())
        .collect();
    ports
        .into_iter()
        .map(|port| {
            let on_port: Vec<&Config<IngressRule>> = rules
                .iter()
                .copied()
                .filter(|r| r.spec.listener_port() == i32::from(port))
                .collect();
            let routes = on_port
                .iter()
                .filter_map(|rule| {
                    let destination = rule.spec.destination.as_ref()?;
                    let port = match (&rule.spec.destination_port, &rule.spec.destination_port_name) {
                        (Some(number), _) => PortSelector::Number(u16::try_from(*number).ok()?),
                        (None, Some(name)) => PortSelector::Name(name.clone()),
                        (None, None) => return None,
                    };
                    Some(IngressRoute {
                        name: format!("{}/{}", rule.meta.namespace, rule.meta.name),
                        request: rule
                            .spec
                            .match_condition
                            .as_ref()
                            .and_then(|m| m.request.as_ref())
                            .map(http_match)
                            .unwrap_or_default(),
                        host: configs.hostname(destination, &rule.meta.namespace),
                        port,
                    })
                })
                .collect();
            let mut server = IngressServer::new(port);
            server.tls = on_port
                .iter()
                .map(|r| r.spec.tls_secret.as_str())
                .find(|s| !s.is_empty())
                .map(ServerTls::credential);
            if server.tls.is_some() {
                server.protocol = Protocol::Https;
            }
            server.routes = routes;
            server
        })
        .collect()
}

/// An egress port's protocol (HTTP unless HTTP/2, gRPC or plain TCP).
fn egress_protocol(name: &str) -> Protocol {
    match name.to_ascii_uppercase().as_str() {
        "HTTP2" => Protocol::Http2,
        "GRPC" => Protocol::Grpc,
        "HTTPS" => Protocol::Https,
        "TCP" => Protocol::Tcp,
        "MONGO" => Protocol::Mongo,
        _ => Protocol::Http,
    }
}

/// A count from a signed field (negative counts are 0).
fn count(n: i32) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}
