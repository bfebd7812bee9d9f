//! RouteRules to VirtualServices: one per destination host, its HTTP
//! routes the host's rules in precedence order.

use std::collections::BTreeMap;

use crate::RoutingConfigs;
use pilot_api::istio::{self, RouteRule};
use pilot_api::networking::{
    self, CorsPolicy, Destination, FaultAbort, FaultDelay, HeaderOperations, Headers, HttpFaultInjection,
    HttpMatchRequest, HttpRedirect, HttpRetry, HttpRewrite, HttpRoute, HttpRouteDestination, Percent,
    VirtualService,
};
use pilot_model::{Config, Labels};

use super::{Out, SubsetNames, placement};

/// One VirtualService per destination host.
pub(super) fn route_rules(configs: &RoutingConfigs, subsets: &SubsetNames, out: &mut Out) {
    let mut by_host: BTreeMap<String, Vec<&Config<RouteRule>>> = BTreeMap::new();
    for rule in &configs.route_rules {
        match &rule.spec.destination {
            Some(destination) => by_host
                .entry(configs.hostname(destination, &rule.meta.namespace))
                .or_default()
                .push(rule),
            None => out.note(
                rule,
                "spec.destination",
                "a rule without a destination: not converted",
            ),
        }
    }
    for (host, mut rules) in by_host {
        rules.sort_by(|a, b| {
            b.spec
                .precedence
                .cmp(&a.spec.precedence)
                .then_with(|| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)))
        });
        let first = rules
            .first()
            .map(|r| r.meta.namespace.clone())
            .unwrap_or_default();
        let (namespace, name) = placement(&host, &configs.domain_suffix, &first);
        let name = out.unique_name("VirtualService", &namespace, &name);
        let mut spec = VirtualService {
            hosts: vec![host.clone()],
            ..Default::default()
        };
        for rule in rules {
            let converter = RuleConverter {
                configs,
                subsets,
                rule,
                host: &host,
            };
            let mut route = converter.http_route(out);
            if spec.http.iter().any(|r| r.name == route.name) {
                route.name = format!("{}-{}", rule.meta.namespace, rule.meta.name);
            }
            spec.http.push(route);
        }
        out.virtual_services.push(Config::new(namespace, name, spec));
    }
}

/// A v1alpha2 request match as a v1 one: `uri`, `scheme`, `method` and
/// `authority` are their own fields, any other name a header.
pub(super) fn request_match(request: &istio::MatchRequest) -> HttpMatchRequest {
    let mut out = HttpMatchRequest::default();
    for (name, matcher) in &request.headers {
        let matcher = string_match(matcher);
        match name.as_str() {
            "uri" => out.uri = Some(matcher),
            "scheme" => out.scheme = Some(matcher),
            "method" => out.method = Some(matcher),
            "authority" => out.authority = Some(matcher),
            _ => {
                out.headers.insert(name.clone(), matcher);
            }
        }
    }
    out
}

fn string_match(matcher: &istio::StringMatch) -> networking::StringMatch {
    networking::StringMatch {
        exact: matcher.exact.clone(),
        prefix: matcher.prefix.clone(),
        regex: matcher.regex.clone(),
    }
}

struct RuleConverter<'a> {
    configs: &'a RoutingConfigs,
    subsets: &'a SubsetNames,
    rule: &'a Config<RouteRule>,
    host: &'a str,
}

impl RuleConverter<'_> {
    fn destination(&self, host: String, labels: &Labels) -> Destination {
        let subset = if labels.is_empty() {
            String::new()
        } else {
            self.subsets
                .get(&host)
                .and_then(|names| names.get(labels))
                .cloned()
                .unwrap_or_default()
        };
        Destination {
            host,
            subset,
            port: None,
        }
    }

    fn http_route(&self, out: &mut Out) -> HttpRoute {
        let rule = self.rule;
        let spec = &rule.spec;
        let namespace = &rule.meta.namespace;
        let mut route = HttpRoute {
            name: rule.meta.name.clone(),
            ..Default::default()
        };
        if let Some(condition) = &spec.match_condition {
            if condition.source.is_some() || condition.request.is_some() {
                let mut matches = condition.request.as_ref().map(request_match).unwrap_or_default();
                if let Some(source) = &condition.source {
                    matches.source_labels = source.labels.clone();
                    out.note(
                        rule,
                        "spec.match.source",
                        format!(
                            "v1 matches a client by its workload labels, not its service: the source \
                             service {} was dropped{}",
                            self.configs.hostname(source, namespace),
                            if source.labels.is_empty() {
                                ", so the route applies to every client".to_string()
                            } else {
                                format!(
                                    " and its labels kept as sourceLabels {}",
                                    Labels(source.labels.clone())
                                )
                            }
                        ),
                    );
                }
                route.matches.push(matches);
            }
            if condition.tcp.is_some() || condition.udp.is_some() {
                out.note(
                    rule,
                    "spec.match.tcp",
                    "L4 matches of an HTTP rule have no v1 equivalent (and were never applied): dropped",
                );
            }
        }
        if let Some(redirect) = &spec.redirect {
            route.redirect = Some(HttpRedirect {
                uri: redirect.uri.clone(),
                authority: redirect.authority.clone(),
                ..Default::default()
            });
        } else {
            route.route = spec
                .route
                .iter()
                .map(|target| {
                    let host = target
                        .destination
                        .as_ref()
                        .map(|d| self.configs.hostname(d, namespace))
                        .unwrap_or_else(|| self.host.to_string());
                    HttpRouteDestination {
                        destination: self.destination(host, &Labels(target.labels.clone())),
                        weight: target.weight,
                        headers: None,
                    }
                })
                .collect();
            if route.route.is_empty() {
                route.route.push(HttpRouteDestination {
                    destination: self.destination(self.host.to_string(), &Labels::new()),
                    ..Default::default()
                });
            }
        }
        route.rewrite = spec.rewrite.as_ref().map(|rewrite| HttpRewrite {
            uri: rewrite.uri.clone(),
            authority: rewrite.authority.clone(),
            uri_regex_rewrite: None,
        });
        if let Some(timeout) = &spec.http_req_timeout {
            if timeout.custom.is_some() {
                out.note(
                    rule,
                    "spec.httpReqTimeout.custom",
                    "custom timeouts have no v1 equivalent: dropped",
                );
            }
            if let Some(simple) = &timeout.simple_timeout {
                route.timeout = simple.timeout;
                if !simple.override_header_name.is_empty() {
                    out.note(
                        rule,
                        "spec.httpReqTimeout.simpleTimeout.overrideHeaderName",
                        "v1 has no timeout override header: dropped",
                    );
                }
            }
        }
        if let Some(retries) = &spec.http_req_retries {
            if retries.custom.is_some() {
                out.note(
                    rule,
                    "spec.httpReqRetries.custom",
                    "custom retries have no v1 equivalent: dropped",
                );
            }
            if let Some(simple) = &retries.simple_retry {
                route.retries = Some(HttpRetry {
                    attempts: simple.attempts,
                    per_try_timeout: simple.per_try_timeout,
                    ..Default::default()
                });
                if !simple.override_header_name.is_empty() {
                    out.note(
                        rule,
                        "spec.httpReqRetries.simpleRetry.overrideHeaderName",
                        "v1 has no retry override header: dropped",
                    );
                }
            }
        }
        route.fault = spec.http_fault.as_ref().and_then(|fault| self.fault(fault, out));
        if spec.l4_fault.is_some() {
            out.note(
                rule,
                "spec.l4Fault",
                "L4 faults have no v1 equivalent (and were never applied): dropped",
            );
        }
        route.mirror = spec.mirror.as_ref().map(|mirror| {
            self.destination(
                self.configs.hostname(mirror, namespace),
                &Labels(mirror.labels.clone()),
            )
        });
        route.cors_policy = spec.cors_policy.as_ref().map(|cors| CorsPolicy {
            allow_origins: cors
                .allow_origin
                .iter()
                .map(|origin| networking::StringMatch {
                    exact: Some(origin.clone()),
                    ..Default::default()
                })
                .collect(),
            allow_methods: cors.allow_methods.clone(),
            allow_headers: cors.allow_headers.clone(),
            expose_headers: cors.expose_headers.clone(),
            max_age: cors.max_age,
            allow_credentials: cors.allow_credentials,
            ..Default::default()
        });
        if !spec.append_headers.is_empty() {
            route.headers = Some(Headers {
                request: Some(HeaderOperations {
                    add: spec.append_headers.clone(),
                    ..Default::default()
                }),
                response: None,
            });
        }
        if !spec.websocket_upgrade {
            out.note(
                rule,
                "spec.websocketUpgrade",
                "v1 allows websocket upgrades on every route: this route now allows them",
            );
        }
        route
    }

    fn fault(&self, fault: &istio::HttpFaultInjection, out: &mut Out) -> Option<HttpFaultInjection> {
        let rule = self.rule;
        let delay = fault.delay.as_ref().and_then(|delay| {
            if !delay.override_header_name.is_empty() {
                out.note(
                    rule,
                    "spec.httpFault.delay.overrideHeaderName",
                    "v1 has no fault override header: dropped",
                );
            }
            if delay.fixed_delay.is_none() {
                out.note(
                    rule,
                    "spec.httpFault.delay.exponentialDelay",
                    "v1 has fixed delays only (and exponential ones were never applied): the delay was dropped",
                );
                return None;
            }
            Some(FaultDelay {
                fixed_delay: delay.fixed_delay,
                percentage: Some(Percent { value: delay.percent }),
                ..Default::default()
            })
        });
        let abort = fault.abort.as_ref().and_then(|abort| {
            if !abort.override_header_name.is_empty() {
                out.note(
                    rule,
                    "spec.httpFault.abort.overrideHeaderName",
                    "v1 has no fault override header: dropped",
                );
            }
            if abort.http_status.is_none() {
                out.note(
                    rule,
                    "spec.httpFault.abort.grpcStatus",
                    "a gRPC status abort was never applied to HTTP routes: the abort was dropped",
                );
                return None;
            }
            Some(FaultAbort {
                http_status: abort.http_status,
                percentage: Some(Percent { value: abort.percent }),
                ..Default::default()
            })
        });
        if delay.is_none() && abort.is_none() {
            return None;
        }
        Some(HttpFaultInjection { delay, abort })
    }
}
