//! A VirtualService's HTTP routes as HTTPRoutes: its parents (Services for
//! the mesh, the converted Gateways for its gateways), one rule per route
//! (per match where a prefix rewrite needs it), backends, filters and
//! timeouts.
//!
//! Exact: destinations to Services with a port and their weights; header
//! operations of the route (`RequestHeaderModifier`,
//! `ResponseHeaderModifier`) and of each destination (the backendRef's
//! own filters); redirects (`uri`, `authority`, `port`, `scheme`,
//! `redirectCode`, 301 when not written, where the Gateway API's default
//! is 302); rewrites of the authority, of the whole path (a route whose
//! match is an exact path or a regular expression) and of a prefix where
//! the Gateway API's slash handling gives the same path; mirrors with
//! their percentage; the timeout (`timeouts.request`). Not converted, with
//! a note: `fault`, `retries`, `corsPolicy`, `delegate`,
//! `directResponse`, a destination's `subset`, destinations that are not
//! Services, `exportTo`, and the `tcp` and `tls` routes.

use pilot_api::gateway_api::{
    HeaderModifier, HttpBackendRef, HttpHeader, HttpPathModifier, HttpRoute, HttpRouteFilter,
    HttpRouteFilterType, HttpRouteRule, HttpRouteTimeouts, ParentReference, PathMatchType, PathModifierType,
    RedirectScheme, RequestMirror, RequestRedirect, UrlRewrite,
};
use pilot_api::networking::{self, Destination, HeaderOperations, HttpMirrorPolicy, Percent, VirtualService};
use pilot_model::Config;

use super::matches::request_match;
use super::order::{self, Entry};
use super::{GatewayApiOptions, Out, is_hostname, section_name, service_of};
use crate::http::MESH_GATEWAY;

/// At most 16 rules in an HTTPRoute, and 128 matches.
const MAX_RULES: usize = 16;
const MAX_MATCHES: usize = 128;

/// The HTTPRoutes of `service`: for its gateways, then for the mesh.
pub(super) fn virtual_service(
    service: &Config<VirtualService>,
    options: &GatewayApiOptions,
    out: &mut Out,
) -> Vec<Config<HttpRoute>> {
    let spec = &service.spec;
    let namespace = &service.meta.namespace;
    let suffix = &options.domain_suffix;
    if !spec.tcp.is_empty() {
        out.note(
            "spec.tcp",
            "TCP routes are not converted (a TCPRoute has no match and one rule): left out",
        );
    }
    if !spec.tls.is_empty() {
        out.note(
            "spec.tls",
            "TLS routes are not converted (a TLSRoute matches SNI for a whole route): left out",
        );
    }
    if !spec.export_to.is_empty() && spec.export_to.iter().any(|e| e != "*") {
        out.note(
            "spec.exportTo",
            "an HTTPRoute on a Service applies to every namespace's clients (in the Service's namespace) \
             or to its own namespace's (elsewhere), not to a list: left out",
        );
    }
    let rules = rules(service, options, out);
    if rules.is_empty() {
        return Vec::new();
    }
    let hosts: Vec<String> = spec
        .hosts
        .iter()
        .map(|h| crate::v1::resolve(h, namespace, suffix))
        .collect();
    let mesh = spec.gateways.is_empty() || spec.gateways.iter().any(|g| g == MESH_GATEWAY);
    let mut gateways: Vec<String> = Vec::new();
    for gateway in spec.gateways.iter().filter(|g| *g != MESH_GATEWAY) {
        let gateway = crate::gateway::qualify(gateway, namespace);
        if !gateways.contains(&gateway) {
            gateways.push(gateway);
        }
    }
    let mut routes = Vec::new();
    if !gateways.is_empty() {
        let parents: Vec<ParentReference> = gateways
            .iter()
            .map(|g| {
                let (ns, name) = g.split_once('/').unwrap_or((namespace.as_str(), g.as_str()));
                ParentReference {
                    namespace: (ns != namespace).then(|| ns.to_string()),
                    name: name.to_string(),
                    ..Default::default()
                }
            })
            .collect();
        let mut hostnames = Vec::new();
        let mut any = false;
        for (i, host) in hosts.iter().enumerate() {
            if host == "*" {
                any = true;
            } else if is_hostname(host) {
                if !hostnames.contains(host) {
                    hostnames.push(host.clone());
                }
            } else {
                out.note(
                    format!("spec.hosts[{i}]"),
                    format!("{host:?} is not a Gateway API hostname: left out of the gateways' hostnames"),
                );
            }
        }
        if any || !hostnames.is_empty() {
            let hostnames = (!any).then_some(hostnames);
            routes.extend(split(
                &service.meta.name,
                namespace,
                parents,
                hostnames,
                &rules,
                out,
            ));
        }
    }
    if mesh {
        let mut parents = Vec::new();
        for (i, host) in hosts.iter().enumerate() {
            match service_of(host, suffix) {
                Some((name, ns)) => {
                    if ns != *namespace {
                        out.note(
                            format!("spec.hosts[{i}]"),
                            format!(
                                "an HTTPRoute in {namespace} on the Service {name}.{ns} is a consumer route: it \
                                 applies to the clients of {namespace} only (Istio: every namespace's); \
                                 put it in {ns} for every client"
                            ),
                        );
                    }
                    let parent = ParentReference {
                        group: Some(String::new()),
                        kind: Some("Service".to_string()),
                        namespace: (ns != *namespace).then_some(ns),
                        name,
                        ..Default::default()
                    };
                    // `reviews` and `reviews.default.svc...` name one Service.
                    if !parents.contains(&parent) {
                        parents.push(parent);
                    }
                }
                None => out.note(
                    format!("spec.hosts[{i}]"),
                    format!(
                        "{host} is not a Service (name.namespace.{suffix}): the mesh's HTTPRoutes attach to \
                         Services only; left out"
                    ),
                ),
            }
        }
        if !parents.is_empty() {
            let name = if gateways.is_empty() {
                service.meta.name.clone()
            } else {
                format!("{}-mesh", service.meta.name)
            };
            routes.extend(split(&name, namespace, parents, None, &rules, out));
        }
    }
    routes
}

/// `rules` in HTTPRoutes of at most 16 rules and 128 matches, named
/// `name`, `name-2`, ...
fn split(
    name: &str,
    namespace: &str,
    parents: Vec<ParentReference>,
    hostnames: Option<Vec<String>>,
    rules: &[HttpRouteRule],
    out: &mut Out,
) -> Vec<Config<HttpRoute>> {
    let mut chunks: Vec<Vec<HttpRouteRule>> = vec![Vec::new()];
    let mut matches = 0;
    for rule in rules {
        let count = rule.matches_written.as_ref().map_or(1, Vec::len);
        let last = chunks.last_mut().expect("one chunk at least");
        if last.len() == MAX_RULES || matches + count > MAX_MATCHES {
            chunks.push(Vec::new());
            matches = 0;
        }
        matches += count;
        chunks.last_mut().expect("one chunk at least").push(rule.clone());
    }
    if chunks.len() > 1 {
        out.note(
            "spec.http",
            format!(
                "more routes than one HTTPRoute holds: {} HTTPRoutes ({name}, {name}-2, ...); rules of equal \
                 precedence in two of them are taken in the order the HTTPRoutes were created",
                chunks.len()
            ),
        );
    }
    chunks
        .into_iter()
        .enumerate()
        .map(|(i, rules)| {
            let name = if i == 0 {
                name.to_string()
            } else {
                format!("{name}-{}", i + 1)
            };
            Config::new(
                namespace,
                name,
                HttpRoute {
                    parent_refs: Some(parents.clone()),
                    hostnames: hostnames.clone(),
                    rules_written: Some(rules),
                    ..Default::default()
                },
            )
        })
        .collect()
}

/// The rules of `service`'s HTTP routes, in their order; notes for what
/// is not exact, and for matches the precedence reorders.
fn rules(service: &Config<VirtualService>, options: &GatewayApiOptions, out: &mut Out) -> Vec<HttpRouteRule> {
    let convert = Converter {
        namespace: &service.meta.namespace,
        options,
    };
    let mut rules = Vec::new();
    let mut entries = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, http) in service.spec.http.iter().enumerate() {
        let at = format!("spec.http[{i}]");
        if http.delegate.is_some() {
            out.note(
                format!("{at}.delegate"),
                "delegation to another VirtualService has no equivalent: the route is left out",
            );
            continue;
        }
        if http.direct_response.is_some() {
            out.note(
                format!("{at}.directResponse"),
                "a direct response has no equivalent in the Gateway API: the route is left out (its requests \
                 go to the later rules)",
            );
            continue;
        }
        // (index of the match in the Istio route, converted match).
        let matches: Vec<(Option<usize>, Option<pilot_api::gateway_api::HttpRouteMatch>)> =
            if http.matches.is_empty() {
                vec![(None, None)]
            } else {
                let kept: Vec<_> = http
                    .matches
                    .iter()
                    .enumerate()
                    .filter_map(|(j, m)| {
                        request_match(m, &format!("{at}.match[{j}]"), out).map(|m| (Some(j), Some(m)))
                    })
                    .collect();
                if kept.is_empty() {
                    out.note(
                        format!("{at}.match"),
                        "no match of the route could be converted: the route is left out",
                    );
                    continue;
                }
                kept
            };
        let Some(base) = convert.rule(http, &at, out) else {
            continue;
        };
        // A prefix rewrite replaces what its one match matched: one rule
        // per match.
        let per_match = matches.len() > 1
            && (http.rewrite.as_ref().is_some_and(|r| !r.uri.is_empty())
                || http
                    .redirect
                    .as_ref()
                    .is_some_and(|r| !r.prefix_rewrite.is_empty()));
        let groups: Vec<Vec<(Option<usize>, Option<_>)>> = if per_match {
            matches.into_iter().map(|m| vec![m]).collect()
        } else {
            vec![matches]
        };
        let count = groups.len();
        for (g, group) in groups.into_iter().enumerate() {
            let mut rule = base.clone();
            let written: Vec<_> = group.iter().filter_map(|(_, m)| m.clone()).collect();
            rule.matches_written = (!written.is_empty()).then_some(written);
            convert.path_filters(http, &mut rule, &at, out);
            rule.name = section_name(&http.name)
                .map(|n| if count > 1 { format!("{n}-{}", g + 1) } else { n })
                .filter(|n| names.insert(n.clone()));
            for (index, (istio_at, _)) in group.iter().enumerate() {
                entries.push(Entry {
                    route: i,
                    at: *istio_at,
                    rule: rules.len(),
                    index,
                    request: rule.matches()[index].clone(),
                });
            }
            rules.push(rule);
        }
    }
    order::check(&entries, out);
    rules
}

struct Converter<'a> {
    namespace: &'a str,
    options: &'a GatewayApiOptions,
}

impl Converter<'_> {
    /// The rule of `http` without its matches and path modifiers; none
    /// (with a note) when it cannot be converted.
    fn rule(&self, http: &networking::HttpRoute, at: &str, out: &mut Out) -> Option<HttpRouteRule> {
        let mut rule = HttpRouteRule::default();
        let mut filters = Vec::new();
        if http.fault.is_some() {
            out.note(
                format!("{at}.fault"),
                "fault injection is not expressible in an HTTPRoute: left out",
            );
        }
        if http.retries.is_some() {
            out.note(
                format!("{at}.retries"),
                "retries are not in the Gateway API's standard HTTPRoute: left out (no retries)",
            );
        }
        if http.cors_policy.is_some() {
            out.note(
                format!("{at}.corsPolicy"),
                "CORS is not in the Gateway API's standard HTTPRoute: left out",
            );
        }
        if let Some(headers) = &http.headers {
            filters.extend(header_filters(
                headers.request.as_ref(),
                headers.response.as_ref(),
            ));
        }
        // (the destination's path, the percentage's path, the mirror).
        let mut mirrors: Vec<(String, String, HttpMirrorPolicy)> = Vec::new();
        if let Some(mirror) = &http.mirror {
            let (percentage, field) = match (http.mirror_percentage, http.mirror_percent) {
                (Some(p), _) => (Some(p), "mirrorPercentage"),
                (None, Some(p)) => (Some(Percent { value: f64::from(p) }), "mirrorPercent"),
                (None, None) => (None, "mirrorPercentage"),
            };
            mirrors.push((
                format!("{at}.mirror"),
                format!("{at}.{field}"),
                HttpMirrorPolicy {
                    destination: mirror.clone(),
                    percentage,
                },
            ));
        }
        for (m, mirror) in http.mirrors.iter().enumerate() {
            mirrors.push((
                format!("{at}.mirrors[{m}].destination"),
                format!("{at}.mirrors[{m}].percentage"),
                mirror.clone(),
            ));
        }
        for (path, percentage_path, mirror) in mirrors {
            let Some(backend) = self.service(&mirror.destination, &path, out) else {
                continue;
            };
            let mut filter = RequestMirror {
                backend_ref: Some(pilot_api::gateway_api::BackendObjectReference {
                    name: backend.name,
                    namespace: backend.namespace,
                    port: backend.port,
                    ..Default::default()
                }),
                ..Default::default()
            };
            if let Some(percent) = mirror.percentage.map(|p| p.value) {
                if percent.fract() == 0.0 && (0.0..=100.0).contains(&percent) {
                    filter.percent = Some(percent as i32);
                } else {
                    let numerator = (percent * 10_000.0).round();
                    if (numerator / 10_000.0 - percent).abs() > f64::EPSILON {
                        out.note(
                            percentage_path.clone(),
                            format!("{percent}% rounded to {}%", numerator / 10_000.0),
                        );
                    }
                    filter.fraction = Some(pilot_api::gateway_api::Fraction {
                        numerator: Some(numerator as i32),
                        denominator_written: Some(1_000_000),
                    });
                }
            }
            filters.push(HttpRouteFilter {
                kind: Some(HttpRouteFilterType::RequestMirror),
                request_mirror: Some(filter),
                ..Default::default()
            });
        }
        if let Some(redirect) = &http.redirect {
            let mut converted = RequestRedirect {
                status_code_written: Some(301),
                ..Default::default()
            };
            if let Some(code) = redirect.redirect_code {
                if [301, 302, 303, 307, 308].contains(&code) {
                    converted.status_code_written = Some(code as i32);
                } else {
                    out.note(
                        format!("{at}.redirect.redirectCode"),
                        format!(
                            "a redirect's status is 301, 302, 303, 307 or 308 in the Gateway API, not {code}: \
                             the route is left out"
                        ),
                    );
                    return None;
                }
            }
            if !redirect.authority.is_empty() {
                // `host:port` is a hostname and a port.
                let (host, port) = match redirect.authority.rsplit_once(':') {
                    Some((host, port)) if redirect.port.is_none() => match port.parse::<u16>() {
                        Ok(port) => (host, Some(i32::from(port))),
                        Err(_) => (redirect.authority.as_str(), None),
                    },
                    _ => (redirect.authority.as_str(), None),
                };
                if is_hostname(host) && !host.starts_with('*') {
                    converted.hostname = Some(host.to_string());
                    converted.port = port;
                } else {
                    out.note(
                        format!("{at}.redirect.authority"),
                        format!(
                            "{:?} is not a hostname (the Gateway API redirects to a hostname and a port): the \
                             route is left out",
                            redirect.authority
                        ),
                    );
                    return None;
                }
            }
            if let Some(port) = redirect.port {
                converted.port = i32::try_from(port).ok();
            }
            match redirect.scheme.as_str() {
                "" => {}
                "http" => converted.scheme = Some(RedirectScheme::Http),
                "https" => converted.scheme = Some(RedirectScheme::Https),
                other => {
                    out.note(
                        format!("{at}.redirect.scheme"),
                        format!(
                            "the Gateway API redirects to http or https, not {other:?}: the route is left out"
                        ),
                    );
                    return None;
                }
            }
            if redirect.derive_port.is_some() {
                out.note(
                    format!("{at}.redirect.derivePort"),
                    "the Gateway API derives a redirect's port from its scheme when no port is given: \
                     derivePort is left out",
                );
            }
            filters.push(HttpRouteFilter {
                kind: Some(HttpRouteFilterType::RequestRedirect),
                request_redirect: Some(converted),
                ..Default::default()
            });
        } else {
            let total = http.route.len();
            let mut backends = Vec::new();
            for (d, destination) in http.route.iter().enumerate() {
                let path = format!("{at}.route[{d}]");
                let Some(mut backend) =
                    self.service(&destination.destination, &format!("{path}.destination"), out)
                else {
                    continue;
                };
                backend.weight = match destination.weight {
                    Some(weight) => Some(weight),
                    None if total > 1 => {
                        out.note(
                            format!("{path}.weight"),
                            "not written beside other destinations: Istio reads it as 0 (no traffic), pilot \
                             as 100; written as 0",
                        );
                        Some(0)
                    }
                    None => None,
                };
                if let Some(headers) = &destination.headers {
                    let own = header_filters(headers.request.as_ref(), headers.response.as_ref());
                    backend.filters = (!own.is_empty()).then_some(own);
                }
                backends.push(backend);
            }
            rule.backend_refs = (!backends.is_empty()).then_some(backends);
        }
        if let Some(rewrite) = &http.rewrite {
            if rewrite.uri_regex_rewrite.is_some() {
                out.note(
                    format!("{at}.rewrite.uriRegexRewrite"),
                    "a path rewritten by a regular expression has no equivalent: left out",
                );
            }
            if !rewrite.authority.is_empty() {
                if is_hostname(&rewrite.authority) && !rewrite.authority.starts_with('*') {
                    filters.push(HttpRouteFilter {
                        kind: Some(HttpRouteFilterType::UrlRewrite),
                        url_rewrite: Some(UrlRewrite {
                            hostname: Some(rewrite.authority.clone()),
                            path: None,
                        }),
                        ..Default::default()
                    });
                } else {
                    out.note(
                        format!("{at}.rewrite.authority"),
                        format!(
                            "{:?} is not a hostname (the Gateway API rewrites the hostname): left out",
                            rewrite.authority
                        ),
                    );
                }
            }
        }
        if let Some(timeout) = http.timeout {
            match gateway_duration(timeout.as_std()) {
                Some(duration) => {
                    rule.timeouts = Some(HttpRouteTimeouts {
                        request: Some(duration),
                        backend_request: None,
                    })
                }
                None => out.note(
                    format!("{at}.timeout"),
                    "longer than a Gateway API duration holds: left out",
                ),
            }
        }
        rule.filters = (!filters.is_empty()).then_some(filters);
        Some(rule)
    }

    /// Adds to `rule` (whose matches are set) the path of `http`'s rewrite
    /// or redirect: the whole path, or the prefix its one match matched.
    fn path_filters(&self, http: &networking::HttpRoute, rule: &mut HttpRouteRule, at: &str, out: &mut Out) {
        let matches = rule.matches();
        let prefix = match matches.as_slice() {
            [only] if only.path().match_type() == PathMatchType::PathPrefix => {
                Some(only.path().value().to_string())
            }
            _ => None,
        };
        let modifier = |value: &str, field: &str, out: &mut Out| -> HttpPathModifier {
            match &prefix {
                Some(prefix) => {
                    let same = if prefix == "/" {
                        value.ends_with('/')
                    } else {
                        !value.ends_with('/')
                    };
                    if !same {
                        out.note(
                            format!("{at}.{field}"),
                            format!(
                                "Istio puts {value:?} in place of the prefix's characters, the Gateway API in \
                                 place of its segments, minding the slash between: a path under {prefix} is \
                                 rewritten differently"
                            ),
                        );
                    }
                    HttpPathModifier {
                        kind: Some(PathModifierType::ReplacePrefixMatch),
                        replace_prefix_match: Some(value.to_string()),
                        replace_full_path: None,
                    }
                }
                None => HttpPathModifier {
                    kind: Some(PathModifierType::ReplaceFullPath),
                    replace_full_path: Some(value.to_string()),
                    replace_prefix_match: None,
                },
            }
        };
        let filters = rule.filters.get_or_insert_with(Vec::new);
        if let Some(rewrite) = http.rewrite.as_ref().filter(|r| !r.uri.is_empty()) {
            let path = modifier(&rewrite.uri, "rewrite.uri", out);
            match filters.iter_mut().find_map(|f| f.url_rewrite.as_mut()) {
                Some(existing) => existing.path = Some(path),
                None => filters.push(HttpRouteFilter {
                    kind: Some(HttpRouteFilterType::UrlRewrite),
                    url_rewrite: Some(UrlRewrite {
                        hostname: None,
                        path: Some(path),
                    }),
                    ..Default::default()
                }),
            }
        }
        if let Some(redirect) = &http.redirect
            && let Some(converted) = filters.iter_mut().find_map(|f| f.request_redirect.as_mut())
        {
            if !redirect.uri.is_empty() {
                converted.path = Some(HttpPathModifier {
                    kind: Some(PathModifierType::ReplaceFullPath),
                    replace_full_path: Some(redirect.uri.clone()),
                    replace_prefix_match: None,
                });
            } else if !redirect.prefix_rewrite.is_empty() {
                if prefix.is_some() {
                    converted.path = Some(modifier(&redirect.prefix_rewrite, "redirect.prefixRewrite", out));
                } else {
                    out.note(
                        format!("{at}.redirect.prefixRewrite"),
                        "a prefix replaced in a redirect needs a prefix match: left out (the path is kept)",
                    );
                }
            }
        }
        if filters.is_empty() {
            rule.filters = None;
        }
    }

    /// The Service `destination` names, with its port, as a backend; none
    /// (with a note) when it names no Service or no port is known.
    fn service(&self, destination: &Destination, at: &str, out: &mut Out) -> Option<HttpBackendRef> {
        let suffix = &self.options.domain_suffix;
        let host = crate::v1::resolve(&destination.host, self.namespace, suffix);
        let Some((name, namespace)) = service_of(&host, suffix) else {
            out.note(
                format!("{at}.host"),
                format!(
                    "{host} is not a Service (name.namespace.{suffix}): a ServiceEntry's host is no \
                     Gateway API backend; left out"
                ),
            );
            return None;
        };
        if !destination.subset.is_empty() {
            out.note(
                format!("{at}.subset"),
                format!(
                    "the Gateway API routes to Services, not subsets: sent to the whole Service {name} \
                     (make a Service per subset, such as {name}-{}, to keep the split)",
                    destination.subset
                ),
            );
        }
        let port = match destination.port {
            Some(port) => i32::try_from(port.number).ok(),
            None => match self.options.service_ports.get(&host).map(Vec::as_slice) {
                Some([only]) => Some(i32::from(*only)),
                Some(ports) if !ports.is_empty() => {
                    out.note(
                        format!("{at}.port"),
                        format!(
                            "not written, and {host} has several ports (Istio keeps the request's): a \
                             backendRef names one; left out"
                        ),
                    );
                    return None;
                }
                _ => {
                    out.note(
                        format!("{at}.port"),
                        format!(
                            "not written, and {host}'s port is not known (give the services): a backendRef \
                             to a Service names its port; left out"
                        ),
                    );
                    return None;
                }
            },
        };
        if namespace != self.namespace {
            out.note(
                format!("{at}.host"),
                format!(
                    "a backend in another namespace ({namespace}) needs a ReferenceGrant there letting \
                     HTTPRoutes of {} refer to the Service {name}",
                    self.namespace
                ),
            );
        }
        Some(HttpBackendRef {
            name,
            namespace: (namespace != self.namespace).then_some(namespace),
            port,
            ..Default::default()
        })
    }
}

/// The header modifier filters of a route's or destination's header
/// operations.
fn header_filters(
    request: Option<&HeaderOperations>,
    response: Option<&HeaderOperations>,
) -> Vec<HttpRouteFilter> {
    let modifier = |ops: &HeaderOperations| {
        let pairs = |map: &std::collections::BTreeMap<String, String>| {
            let list: Vec<HttpHeader> = map
                .iter()
                .map(|(name, value)| HttpHeader {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect();
            (!list.is_empty()).then_some(list)
        };
        let modifier = HeaderModifier {
            set: pairs(&ops.set),
            add: pairs(&ops.add),
            remove: (!ops.remove.is_empty()).then(|| ops.remove.clone()),
        };
        (modifier != HeaderModifier::default()).then_some(modifier)
    };
    let mut filters = Vec::new();
    if let Some(modifier) = request.and_then(modifier) {
        filters.push(HttpRouteFilter {
            kind: Some(HttpRouteFilterType::RequestHeaderModifier),
            request_header_modifier: Some(modifier),
            ..Default::default()
        });
    }
    if let Some(modifier) = response.and_then(modifier) {
        filters.push(HttpRouteFilter {
            kind: Some(HttpRouteFilterType::ResponseHeaderModifier),
            response_header_modifier: Some(modifier),
            ..Default::default()
        });
    }
    filters
}

/// A duration as the Gateway API writes one (`1h30m`, `250ms`: each unit
/// at most five digits); none when it does not fit.
pub(super) fn gateway_duration(duration: std::time::Duration) -> Option<String> {
    let mut millis = duration.as_millis();
    if millis == 0 {
        return Some("0s".to_string());
    }
    let mut out = String::new();
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
        let count = millis / size;
        millis %= size;
        if count > 0 {
            if count > 99_999 {
                return None;
            }
            out.push_str(&format!("{count}{unit}"));
        }
    }
    Some(out)
}
