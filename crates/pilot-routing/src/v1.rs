//! Compilation of the `networking.istio.io` VirtualService and
//! DestinationRule into the routing model.
//!
//! - Hosts: a short name (no dot) is resolved in the object's namespace
//!   (`reviews` in `default`: `reviews.default.svc.cluster.local`); any
//!   other host is taken as written.
//! - A DestinationRule is the policy of its host (the first one, by
//!   namespace and name, wins) and its subsets, each with its own policy
//!   merged over the host's (a subset's load balancer, connection pool,
//!   outlier detection, TLS and port-level settings replace the host's).
//! - A VirtualService without `gateways` applies to the mesh (`mesh`); one
//!   bound only to named gateways gives sidecars no routes; its HTTP routes
//!   go to the servers of those gateways (`gateway.rs`). Its HTTP routes follow the v1alpha2 rules' routes
//!   of the same host, in namespace and name order; a destination's subset
//!   is resolved to its labels through the host's DestinationRule, and a
//!   destination naming a subset no rule defines is left out.
//! - Websocket upgrades are allowed on every route, as Istio allows them.

use std::collections::HashMap;

use pilot_api::networking::{self, DestinationRule, VirtualService};
use pilot_model::{Config, Labels};

use super::gateway;
use super::{
    ClientTls, ConnectionPool, ConsistentHash, Cors, DirectResponse, Fault, FaultAbort, FaultDelay, HashKey,
    HeaderOperations, Headers, Http2Keepalive, HttpAction, HttpMatch, HttpRoute, L4Match, LoadBalancer,
    MESH_GATEWAY, Mirror, OutlierDetection, PortTrafficPolicy, Redirect, Retries, RetryBudget, Rewrite,
    RouteDestination, RoutingConfigs, RoutingModel, SimpleLb, StringMatch, TcpKeepalive, TcpRoute, TlsMode,
    TlsRoute, TrafficPolicy, Warmup, WeightedDestination,
};

/// Adds what the v1 objects of `configs` say to `model`.
pub(super) fn compile(configs: &RoutingConfigs, model: &mut RoutingModel) {
    let mut rules: Vec<&Config<DestinationRule>> = configs.destination_rules.iter().map(|c| &**c).collect();
    rules.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    // (host, subset name) -> labels
    let mut subsets: HashMap<(String, String), Labels> = HashMap::new();
    for rule in rules {
        let host = resolve(&rule.spec.host, &rule.meta.namespace, &configs.domain_suffix);
        let top = rule.spec.traffic_policy.as_ref().map(traffic_policy);
        let destination = model.destination_mut(&host);
        if destination.policy.is_some() {
            continue;
        }
        destination.policy = top.clone();
        for subset in &rule.spec.subsets {
            let labels = Labels(subset.labels.clone());
            let own = subset.traffic_policy.as_ref().map(traffic_policy);
            let policy = match (&top, own) {
                (Some(top), Some(own)) => Some(merge(top, own)),
                (_, own) => own,
            };
            let entry = model.add_subset(&host, &labels);
            entry.name = subset.name.clone();
            entry.policy = policy;
            subsets.insert((host.clone(), subset.name.clone()), labels);
        }
    }
    let mut services: Vec<&Config<VirtualService>> = configs.virtual_services.iter().map(|c| &**c).collect();
    services.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    let mut bound = Vec::new();
    for service in services {
        let spec = &service.spec;
        let mesh = spec.gateways.is_empty() || spec.gateways.iter().any(|g| g == MESH_GATEWAY);
        let namespace = &service.meta.namespace;
        let compiler = Compiler {
            namespace,
            domain_suffix: &configs.domain_suffix,
            subsets: &subsets,
            name: format!("{namespace}/{}", service.meta.name),
        };
        let gateways: Vec<String> = spec
            .gateways
            .iter()
            .filter(|g| *g != MESH_GATEWAY)
            .map(|g| gateway::qualify(g, namespace))
            .collect();
        if !gateways.is_empty() {
            bound.push(gateway::Bound {
                namespace: namespace.clone(),
                gateways,
                hosts: spec
                    .hosts
                    .iter()
                    .map(|h| resolve(h, namespace, &configs.domain_suffix))
                    .collect(),
                http: spec.http.iter().map(|h| compiler.http_route(h)).collect(),
                tcp: spec.tcp.iter().map(|tcp| compiler.tcp_route(tcp)).collect(),
                tls: spec.tls.iter().map(|tls| compiler.tls_route(tls)).collect(),
            });
        }
        if !mesh {
            continue;
        }
        for host in &spec.hosts {
            let host = resolve(host, namespace, &configs.domain_suffix);
            for http in &spec.http {
                let route = compiler.http_route(http);
                model.host_mut(&host).http.push(route);
            }
            for tcp in &spec.tcp {
                let route = compiler.tcp_route(tcp);
                model.host_mut(&host).tcp.push(route);
            }
            for tls in &spec.tls {
                let route = compiler.tls_route(tls);
                model.host_mut(&host).tls.push(route);
            }
        }
    }
    gateway::compile(configs, &bound, model);
}

/// A host of an object of `namespace`: a short name is the service of
/// that name in it.
pub(super) fn resolve(host: &str, namespace: &str, domain_suffix: &str) -> String {
    if host.contains('.') || host.contains('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.{domain_suffix}")
    }
}

struct Compiler<'a> {
    namespace: &'a str,
    domain_suffix: &'a str,
    subsets: &'a HashMap<(String, String), Labels>,
    name: String,
}

impl Compiler<'_> {
    fn destination(&self, destination: &networking::Destination) -> Option<RouteDestination> {
        let host = resolve(&destination.host, self.namespace, self.domain_suffix);
        let subset = if destination.subset.is_empty() {
            Labels::new()
        } else {
            self.subsets
                .get(&(host.clone(), destination.subset.clone()))?
                .clone()
        };
        let mut out = RouteDestination::new(host, subset);
        out.port = destination.port.and_then(|p| u16::try_from(p.number).ok());
        Some(out)
    }

    fn destinations<'d>(
        &self,
        targets: impl Iterator<Item = (&'d networking::Destination, Option<i32>)>,
    ) -> Vec<WeightedDestination> {
        targets
            .filter_map(|(destination, weight)| {
                let weight = match weight {
                    Some(w) => u32::try_from(w).unwrap_or(0),
                    None => 100,
                };
                Some(WeightedDestination::new(self.destination(destination)?, weight))
            })
            .filter(|t| t.weight > 0)
            .collect()
    }

    fn http_route(&self, http: &networking::HttpRoute) -> HttpRoute {
        let mut route = HttpRoute {
            name: if http.name.is_empty() {
                self.name.clone()
            } else {
                format!("{}/{}", self.name, http.name)
            },
            matches: http.matches.iter().map(|m| self.http_match(m)).collect(),
            websocket: true,
            ..Default::default()
        };
        route.action = if let Some(response) = &http.direct_response {
            HttpAction::DirectResponse(DirectResponse {
                status: response.status,
                body: response
                    .body
                    .as_ref()
                    .and_then(|b| b.string.clone().or_else(|| b.bytes.clone())),
            })
        } else if let Some(redirect) = &http.redirect {
            HttpAction::Redirect(Redirect {
                uri: non_empty(&redirect.uri),
                authority: non_empty(&redirect.authority),
                code: redirect.redirect_code,
                scheme: non_empty(&redirect.scheme),
                port: redirect.port.and_then(|p| u16::try_from(p).ok()),
                port_from_scheme: redirect.derive_port
                    == Some(networking::RedirectPortSelection::FromProtocolDefault),
                prefix: non_empty(&redirect.prefix_rewrite),
            })
        } else {
            HttpAction::Route(
                http.route
                    .iter()
                    .filter_map(|r| {
                        let mut to = self
                            .destinations(std::iter::once((&r.destination, r.weight)))
                            .pop()?;
                        if let Some(headers) = &r.headers {
                            to.headers = Headers {
                                request: headers.request.as_ref().map(operations).unwrap_or_default(),
                                response: headers.response.as_ref().map(operations).unwrap_or_default(),
                            };
                        }
                        Some(to)
                    })
                    .collect(),
            )
        };
        route.rewrite = http.rewrite.as_ref().map(|rewrite| Rewrite {
            uri: non_empty(&rewrite.uri),
            authority: non_empty(&rewrite.authority),
            uri_regex: rewrite
                .uri_regex_rewrite
                .as_ref()
                .map(|r| (r.pattern.clone(), r.rewrite.clone())),
        });
        route.timeout = http.timeout.map(|t| t.as_std());
        route.retries = http.retries.as_ref().map(|retry| Retries {
            attempts: u32::try_from(retry.attempts).unwrap_or(0),
            per_try_timeout: retry.per_try_timeout.map(|d| d.as_std()),
            retry_on: non_empty(&retry.retry_on),
            ..Default::default()
        });
        route.fault = http.fault.as_ref().map(|fault| Fault {
            delay: fault.delay.as_ref().map(|delay| FaultDelay {
                percent: delay
                    .percentage
                    .map(|p| p.value)
                    .or(delay.percent.map(f64::from))
                    .unwrap_or(100.0),
                fixed: delay.fixed_delay.map(|d| d.as_std()),
            }),
            abort: fault.abort.as_ref().map(|abort| FaultAbort {
                percent: abort.percentage.map(|p| p.value).unwrap_or(100.0),
                http_status: abort.http_status.map(|s| u32::try_from(s).unwrap_or(503)),
            }),
        });
        let legacy = http.mirror.as_ref().map(|d| {
            (
                d,
                http.mirror_percentage
                    .map(|p| p.value)
                    .or(http.mirror_percent.map(f64::from)),
            )
        });
        route.mirrors = legacy
            .into_iter()
            .chain(
                http.mirrors
                    .iter()
                    .map(|m| (&m.destination, m.percentage.map(|p| p.value))),
            )
            .filter_map(|(destination, percent)| {
                Some(Mirror {
                    destination: self.destination(destination)?,
                    percent,
                })
            })
            .collect();
        route.cors = http.cors_policy.as_ref().map(|cors| Cors {
            allow_origins: cors
                .allow_origin
                .iter()
                .cloned()
                .map(StringMatch::Exact)
                .chain(cors.allow_origins.iter().map(|m| string_match(m, "")))
                .collect(),
            allow_methods: cors.allow_methods.clone(),
            allow_headers: cors.allow_headers.clone(),
            expose_headers: cors.expose_headers.clone(),
            max_age: cors.max_age.map(|d| d.as_std()),
            allow_credentials: cors.allow_credentials,
        });
        if let Some(headers) = &http.headers {
            route.headers = Headers {
                request: headers.request.as_ref().map(operations).unwrap_or_default(),
                response: headers.response.as_ref().map(operations).unwrap_or_default(),
            };
        }
        route
    }

    fn http_match(&self, request: &networking::HttpMatchRequest) -> HttpMatch {
        HttpMatch {
            uri: request.uri.as_ref().map(|m| string_match(m, "/")),
            scheme: request.scheme.as_ref().map(|m| string_match(m, "")),
            method: request.method.as_ref().map(|m| string_match(m, "")),
            authority: request.authority.as_ref().map(|m| string_match(m, "")),
            headers: map(&request.headers),
            query_params: map(&request.query_params),
            without_headers: map(&request.without_headers),
            port: request.port.and_then(|p| u16::try_from(p).ok()),
            source_labels: Labels(request.source_labels.clone()),
            source_service: None,
            source_namespace: non_empty(&request.source_namespace),
            gateways: request.gateways.clone(),
        }
    }

    fn tcp_route(&self, tcp: &networking::TcpRoute) -> TcpRoute {
        TcpRoute {
            name: self.name.clone(),
            matches: tcp.matches.iter().map(|m| self.l4_match(m)).collect(),
            destinations: self.destinations(tcp.route.iter().map(|r| (&r.destination, r.weight))),
        }
    }

    fn tls_route(&self, tls: &networking::TlsRoute) -> TlsRoute {
        TlsRoute {
            name: self.name.clone(),
            matches: tls.matches.iter().map(|m| self.tls_match(m)).collect(),
            destinations: self.destinations(tls.route.iter().map(|r| (&r.destination, r.weight))),
        }
    }

    fn l4_match(&self, m: &networking::L4MatchAttributes) -> L4Match {
        L4Match {
            sni_hosts: Vec::new(),
            destination_subnets: m.destination_subnets.clone(),
            port: m.port.and_then(|p| u16::try_from(p).ok()),
            source_labels: Labels(m.source_labels.clone()),
            source_namespace: non_empty(&m.source_namespace),
            gateways: m.gateways.clone(),
        }
    }

    fn tls_match(&self, m: &networking::TlsMatchAttributes) -> L4Match {
        L4Match {
            sni_hosts: m.sni_hosts.clone(),
            destination_subnets: m.destination_subnets.clone(),
            port: m.port.and_then(|p| u16::try_from(p).ok()),
            source_labels: Labels(m.source_labels.clone()),
            source_namespace: non_empty(&m.source_namespace),
            gateways: m.gateways.clone(),
        }
    }
}

fn map(
    matches: &std::collections::BTreeMap<String, networking::StringMatch>,
) -> std::collections::BTreeMap<String, StringMatch> {
    matches
        .iter()
        .map(|(name, m)| (name.clone(), string_match(m, "")))
        .collect()
}

fn string_match(matcher: &networking::StringMatch, default: &str) -> StringMatch {
    if let Some(exact) = &matcher.exact {
        StringMatch::Exact(exact.clone())
    } else if let Some(regex) = &matcher.regex {
        StringMatch::Regex(regex.clone())
    } else {
        StringMatch::Prefix(matcher.prefix.clone().unwrap_or_else(|| default.to_string()))
    }
}

fn operations(ops: &networking::HeaderOperations) -> HeaderOperations {
    HeaderOperations {
        add: ops.add.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        set: ops.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        remove: ops.remove.clone(),
    }
}

/// A DestinationRule's traffic policy in the model's terms.
fn traffic_policy(policy: &networking::TrafficPolicy) -> TrafficPolicy {
    let mut out = port_policy(
        policy.load_balancer.as_ref(),
        policy.connection_pool.as_ref(),
        policy.outlier_detection.as_ref(),
        policy.tls.as_ref(),
    );
    out.retry_budget = policy.retry_budget.as_ref().map(|b| RetryBudget {
        percent: b.percent,
        min_retry_concurrency: b.min_retry_concurrency,
        interval: b.budget_interval.map(|d| d.as_std()),
    });
    out.proxy_protocol = policy.proxy_protocol.as_ref().map(|p| match p.version {
        networking::ProxyProtocolVersion::V1 => 1,
        networking::ProxyProtocolVersion::V2 => 2,
    });
    out.port_level = policy
        .port_level_settings
        .iter()
        .filter_map(|port| {
            Some(PortTrafficPolicy {
                port: u16::try_from(port.port?.number).ok()?,
                policy: port_policy(
                    port.load_balancer.as_ref(),
                    port.connection_pool.as_ref(),
                    port.outlier_detection.as_ref(),
                    port.tls.as_ref(),
                ),
            })
        })
        .collect();
    // A port's settings have no retry budget or PROXY protocol of their
    // own: the destination's apply on every port.
    for port in &mut out.port_level {
        port.policy.retry_budget.clone_from(&out.retry_budget);
        port.policy.proxy_protocol = out.proxy_protocol;
    }
    out
}

fn port_policy(
    lb: Option<&networking::LoadBalancerSettings>,
    pool: Option<&networking::ConnectionPoolSettings>,
    outlier: Option<&networking::OutlierDetection>,
    tls: Option<&networking::ClientTlsSettings>,
) -> TrafficPolicy {
    let count = |n: i32| u32::try_from(n).unwrap_or(0);
    TrafficPolicy {
        load_balancer: lb.and_then(load_balancer),
        connection_pool: pool.map(|pool| {
            let tcp = pool.tcp.as_ref();
            let http = pool.http.as_ref();
            ConnectionPool {
                max_connections: tcp.and_then(|t| t.max_connections).map(count),
                connect_timeout: tcp.and_then(|t| t.connect_timeout).map(|d| d.as_std()),
                max_pending_requests: http.and_then(|h| h.http1_max_pending_requests).map(count),
                max_requests: http.and_then(|h| h.http2_max_requests).map(count),
                max_retries: http.and_then(|h| h.max_retries).map(count),
                max_requests_per_connection: http.and_then(|h| h.max_requests_per_connection).map(count),
                http2_keepalive: http.and_then(|h| h.http2_keep_alive).map(|k| Http2Keepalive {
                    interval: k.interval.map(|d| d.as_std()),
                    timeout: k.timeout.map(|d| d.as_std()),
                }),
                idle_timeout: http.and_then(|h| h.idle_timeout).map(|d| d.as_std()),
                max_connection_duration: tcp.and_then(|t| t.max_connection_duration).map(|d| d.as_std()),
                tcp_keepalive: tcp.and_then(|t| t.tcp_keepalive.as_ref()).map(|k| TcpKeepalive {
                    probes: k.probes,
                    time: k.time.map(|d| d.as_std()),
                    interval: k.interval.map(|d| d.as_std()),
                }),
                max_concurrent_streams: http.and_then(|h| h.max_concurrent_streams).map(count),
                upgrade_to_http2: http.and_then(|h| h.h2_upgrade_policy)
                    == Some(networking::H2UpgradePolicy::Upgrade),
                use_client_protocol: http.is_some_and(|h| h.use_client_protocol),
            }
        }),
        outlier_detection: outlier.map(|o| OutlierDetection {
            consecutive_5xx_errors: o.consecutive_5xx_errors.or(o.consecutive_errors.map(count)),
            interval: o.interval.map(|d| d.as_std()),
            base_ejection_time: o.base_ejection_time.map(|d| d.as_std()),
            max_ejection_percent: o.max_ejection_percent.map(count),
            consecutive_gateway_errors: o.consecutive_gateway_errors,
            consecutive_local_origin_failures: o.consecutive_local_origin_failures,
            split_external_local_origin_errors: o.split_external_local_origin_errors,
            min_health_percent: o.min_health_percent.map(count),
        }),
        port_level: Vec::new(),
        tls: tls.map(|tls| ClientTls {
            mode: match tls.mode {
                Some(networking::ClientTlsMode::Simple) => TlsMode::Simple,
                Some(networking::ClientTlsMode::Mutual) => TlsMode::Mutual,
                Some(networking::ClientTlsMode::IstioMutual) => TlsMode::IstioMutual,
                _ => TlsMode::Disable,
            },
            client_certificate: non_empty(&tls.client_certificate),
            private_key: non_empty(&tls.private_key),
            ca_certificates: non_empty(&tls.ca_certificates),
            subject_alt_names: tls.subject_alt_names.clone(),
            sni: non_empty(&tls.sni),
            credential_name: non_empty(&tls.credential_name),
            ca_credential: None,
            insecure_skip_verify: tls.insecure_skip_verify == Some(true),
            ca_crl: non_empty(&tls.ca_crl),
        }),
        warmup: lb.and_then(warmup),
        retry_budget: None,
        proxy_protocol: None,
    }
}

/// Slow start from `warmup` (or the deprecated `warmupDurationSecs`), for
/// the balancers that have it.
fn warmup(lb: &networking::LoadBalancerSettings) -> Option<Warmup> {
    if lb.consistent_hash.is_some()
        || matches!(
            lb.simple,
            Some(networking::SimpleLb::Random | networking::SimpleLb::Passthrough)
        )
    {
        return None;
    }
    match (&lb.warmup, lb.warmup_duration_secs) {
        (Some(w), _) => Some(Warmup {
            window: w.duration?.as_std(),
            minimum_percent: w.minimum_percent,
            aggression: w.aggression,
        }),
        (None, Some(d)) => Some(Warmup {
            window: d.as_std(),
            ..Default::default()
        }),
        (None, None) => None,
    }
}

fn load_balancer(lb: &networking::LoadBalancerSettings) -> Option<LoadBalancer> {
    if let Some(simple) = lb.simple {
        return Some(LoadBalancer::Simple(match simple {
            networking::SimpleLb::LeastConn | networking::SimpleLb::LeastRequest => SimpleLb::LeastRequest,
            networking::SimpleLb::Random => SimpleLb::Random,
            networking::SimpleLb::Passthrough => SimpleLb::Passthrough,
            _ => SimpleLb::RoundRobin,
        }));
    }
    let hash = lb.consistent_hash.as_ref()?;
    let key = if let Some(header) = &hash.http_header_name {
        HashKey::Header(header.clone())
    } else if let Some(cookie) = &hash.http_cookie {
        HashKey::Cookie {
            name: cookie.name.clone(),
            path: non_empty(&cookie.path),
            ttl: cookie.ttl.map(|d| d.as_std()),
        }
    } else if let Some(parameter) = &hash.http_query_parameter_name {
        HashKey::QueryParameter(parameter.clone())
    } else {
        HashKey::SourceIp
    };
    Some(LoadBalancer::ConsistentHash(ConsistentHash {
        key,
        minimum_ring_size: hash
            .ring_hash
            .as_ref()
            .and_then(|r| r.minimum_ring_size)
            .or(hash.minimum_ring_size),
        maglev: hash.maglev.as_ref().map(|m| m.table_size),
    }))
}

/// A subset's policy over its host's: what the subset sets replaces the
/// host's.
fn merge(top: &TrafficPolicy, own: TrafficPolicy) -> TrafficPolicy {
    TrafficPolicy {
        load_balancer: own.load_balancer.or_else(|| top.load_balancer.clone()),
        connection_pool: own.connection_pool.or_else(|| top.connection_pool.clone()),
        outlier_detection: own.outlier_detection.or_else(|| top.outlier_detection.clone()),
        port_level: if own.port_level.is_empty() {
            top.port_level.clone()
        } else {
            own.port_level
        },
        tls: own.tls.or_else(|| top.tls.clone()),
        warmup: own.warmup.or_else(|| top.warmup.clone()),
        retry_budget: own.retry_budget.or_else(|| top.retry_budget.clone()),
        proxy_protocol: own.proxy_protocol.or(top.proxy_protocol),
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}
