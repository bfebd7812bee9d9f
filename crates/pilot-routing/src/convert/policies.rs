//! DestinationPolicies and the subsets the route rules select, to one
//! DestinationRule per host.

use std::collections::BTreeMap;

use crate::RoutingConfigs;
use pilot_api::istio::{DestinationPolicy, SimpleLbPolicy};
use pilot_api::networking::{
    self, ConnectionPoolSettings, DestinationRule, HttpSettings, LoadBalancerSettings, OutlierDetection,
    Subset, TcpSettings, TrafficPolicy,
};
use pilot_model::{Config, Labels};

use super::{Out, SubsetNames, placement};

/// Every subset some route rule target, mirror or destination policy
/// selects, by host, named from its labels' values (`version: v1` is
/// `v1`; several values joined by `-`); a name already taken, or none,
/// becomes `subset-N`.
pub(super) fn subset_names(configs: &RoutingConfigs) -> SubsetNames {
    let mut wanted: BTreeMap<String, Vec<Labels>> = BTreeMap::new();
    let mut add = |host: String, labels: Labels| {
        if !labels.is_empty() {
            wanted.entry(host).or_default().push(labels);
        }
    };
    for rule in &configs.route_rules {
        let Some(destination) = &rule.spec.destination else {
            continue;
        };
        let namespace = &rule.meta.namespace;
        let host = configs.hostname(destination, namespace);
        for target in &rule.spec.route {
            let target_host = target
                .destination
                .as_ref()
                .map(|d| configs.hostname(d, namespace))
                .unwrap_or_else(|| host.clone());
            add(target_host, Labels(target.labels.clone()));
        }
        if let Some(mirror) = &rule.spec.mirror {
            add(configs.hostname(mirror, namespace), Labels(mirror.labels.clone()));
        }
    }
    for policy in &configs.destination_policies {
        if let Some(destination) = &policy.spec.destination {
            add(
                configs.hostname(destination, &policy.meta.namespace),
                Labels(destination.labels.clone()),
            );
        }
    }
    wanted
        .into_iter()
        .map(|(host, mut all)| {
            all.sort();
            all.dedup();
            let mut names: BTreeMap<Labels, String> = BTreeMap::new();
            for labels in all {
                let base = subset_name(&labels);
                let taken = |name: &str| names.values().any(|n| n == name);
                let name = if !base.is_empty() && !taken(&base) {
                    base
                } else {
                    (1..)
                        .map(|n| format!("subset-{n}"))
                        .find(|n| !taken(n))
                        .unwrap_or_default()
                };
                names.insert(labels, name);
            }
            (host, names)
        })
        .collect()
}

/// One DestinationRule per host with subsets or a policy: a policy
/// without labels is its `trafficPolicy`, with labels its subset's. The
/// first policy configured for a host or subset wins, as it did.
pub(super) fn destination_policies(configs: &RoutingConfigs, subsets: &SubsetNames, out: &mut Out) {
    // host -> (namespace of the first object naming it, top policy, subset policies)
    let mut hosts: BTreeMap<String, HostPolicies> = BTreeMap::new();
    for rule in &configs.route_rules {
        if let Some(destination) = &rule.spec.destination {
            let host = configs.hostname(destination, &rule.meta.namespace);
            if subsets.contains_key(&host) {
                hosts
                    .entry(host)
                    .or_insert_with(|| HostPolicies::new(&rule.meta.namespace));
            }
        }
    }
    for host in subsets.keys() {
        hosts
            .entry(host.clone())
            .or_insert_with(|| HostPolicies::new("default"));
    }
    for policy in &configs.destination_policies {
        let Some(destination) = &policy.spec.destination else {
            continue;
        };
        let host = configs.hostname(destination, &policy.meta.namespace);
        let entry = hosts
            .entry(host.clone())
            .or_insert_with(|| HostPolicies::new(&policy.meta.namespace));
        if policy.spec.source.is_some() {
            out.note(
                policy,
                "spec.source",
                "a DestinationRule applies to every client: the source was dropped",
            );
        }
        if policy.spec.custom.is_some() {
            out.note(
                policy,
                "spec.custom",
                "custom policies have no v1 equivalent: dropped",
            );
        }
        let labels = Labels(destination.labels.clone());
        let converted = traffic_policy(policy, out);
        if labels.is_empty() {
            if entry.top.is_some() {
                out.note(
                    policy,
                    "spec.destination",
                    format!("an earlier policy for {host} wins, as it did: not converted"),
                );
            } else {
                entry.top = Some((converted, (**policy).clone()));
            }
        } else {
            match entry.subsets.entry(labels) {
                std::collections::btree_map::Entry::Occupied(taken) => out.note(
                    policy,
                    "spec.destination.labels",
                    format!(
                        "an earlier policy for {host} {} wins, as it did: not converted",
                        taken.key()
                    ),
                ),
                std::collections::btree_map::Entry::Vacant(free) => {
                    free.insert((converted, (**policy).clone()));
                }
            }
        }
    }
    for (host, entry) in hosts {
        let (namespace, name) = placement(&host, &configs.domain_suffix, &entry.namespace);
        let name = out.unique_name("DestinationRule", &namespace, &name);
        // v1 refuses an empty policy; none says the same.
        let top = entry
            .top
            .as_ref()
            .map(|(p, _)| p.clone())
            .filter(|p| *p != TrafficPolicy::default());
        let mut rule = DestinationRule {
            host: host.clone(),
            traffic_policy: top.clone(),
            ..Default::default()
        };
        for (labels, subset_name) in subsets.get(&host).into_iter().flatten() {
            let own = entry.subsets.get(labels);
            if let (Some(top), Some((own, policy))) = (&top, own) {
                inherited(top, own, policy, out);
            }
            rule.subsets.push(Subset {
                name: subset_name.clone(),
                labels: labels.0.clone(),
                traffic_policy: own
                    .map(|(p, _)| p.clone())
                    .filter(|p| *p != TrafficPolicy::default()),
            });
        }
        out.destination_rules.push(Config::new(namespace, name, rule));
    }
}

struct HostPolicies {
    namespace: String,
    top: Option<(TrafficPolicy, Config<DestinationPolicy>)>,
    subsets: BTreeMap<Labels, (TrafficPolicy, Config<DestinationPolicy>)>,
}

impl HostPolicies {
    fn new(namespace: &str) -> Self {
        HostPolicies {
            namespace: namespace.to_string(),
            top: None,
            subsets: BTreeMap::new(),
        }
    }
}

/// A v1 subset's policy is merged over its host's; a v1alpha2 subset
/// policy replaced it. Notes each part the subset now inherits.
fn inherited(top: &TrafficPolicy, own: &TrafficPolicy, policy: &Config<DestinationPolicy>, out: &mut Out) {
    let parts = [
        (
            "loadBalancing",
            top.load_balancer.is_some() && own.load_balancer.is_none(),
        ),
        (
            "connectionPool",
            top.connection_pool.is_some() && own.connection_pool.is_none(),
        ),
        (
            "outlierDetection",
            top.outlier_detection.is_some() && own.outlier_detection.is_none(),
        ),
    ];
    for (part, inherits) in parts {
        if inherits {
            out.note(
                policy,
                "spec",
                format!(
                    "a v1 subset inherits its host's {part} where a v1alpha2 subset policy replaced it: \
                     the subset now has the host's"
                ),
            );
        }
    }
}

/// A DestinationPolicy's load balancing and circuit breaker as a v1
/// traffic policy.
fn traffic_policy(policy: &Config<DestinationPolicy>, out: &mut Out) -> TrafficPolicy {
    let spec = &policy.spec;
    let mut result = TrafficPolicy::default();
    if let Some(lb) = &spec.load_balancing {
        if lb.custom.is_some() {
            out.note(
                policy,
                "spec.loadBalancing.custom",
                "custom load balancing has no v1 equivalent: dropped",
            );
        }
        result.load_balancer = lb.name.map(|name| LoadBalancerSettings {
            simple: Some(match name {
                SimpleLbPolicy::RoundRobin => networking::SimpleLb::RoundRobin,
                SimpleLbPolicy::LeastConn => networking::SimpleLb::LeastRequest,
                SimpleLbPolicy::Random => networking::SimpleLb::Random,
            }),
            ..Default::default()
        });
    }
    let Some(cb) = &spec.circuit_breaker else {
        return result;
    };
    if cb.custom.is_some() {
        out.note(
            policy,
            "spec.circuitBreaker.custom",
            "a custom circuit breaker has no v1 equivalent: dropped",
        );
    }
    let Some(cb) = &cb.simple_cb else {
        return result;
    };
    let tcp = TcpSettings {
        max_connections: cb.max_connections,
        ..Default::default()
    };
    let http = HttpSettings {
        http1_max_pending_requests: cb.http_max_pending_requests,
        http2_max_requests: cb.http_max_requests,
        max_requests_per_connection: cb.http_max_requests_per_connection,
        max_retries: cb.http_max_retries,
        ..Default::default()
    };
    if tcp == TcpSettings::default() && http == HttpSettings::default() {
        // v1 refuses an empty connection pool; v1alpha2 sent Envoy empty
        // thresholds, which are its defaults.
        out.note(
            policy,
            "spec.circuitBreaker.simpleCb",
            "sets no connection limit, and v1 refuses an empty connectionPool: none written (Envoy's defaults either way)",
        );
    } else {
        result.connection_pool = Some(ConnectionPoolSettings {
            tcp: (tcp != TcpSettings::default()).then_some(tcp),
            http: (http != HttpSettings::default()).then_some(http),
        });
    }
    if cb.http_consecutive_errors.is_some()
        || cb.http_detection_interval.is_some()
        || cb.sleep_window.is_some()
        || cb.http_max_ejection_percent.is_some()
    {
        result.outlier_detection = Some(OutlierDetection {
            consecutive_5xx_errors: cb.http_consecutive_errors.map(|n| u32::try_from(n).unwrap_or(0)),
            interval: cb.http_detection_interval,
            base_ejection_time: cb.sleep_window,
            max_ejection_percent: cb.http_max_ejection_percent,
            ..Default::default()
        });
    }
    result
}

/// A subset's name from its labels' values, joined by `-`, as a DNS-1123
/// label (empty if nothing is left).
fn subset_name(labels: &Labels) -> String {
    let joined: Vec<&str> = labels.0.values().map(String::as_str).collect();
    let name: String = joined
        .join("-")
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(63)
        .collect();
    name.trim_matches('-').to_string()
}
