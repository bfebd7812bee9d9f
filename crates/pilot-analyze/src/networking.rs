//! `pilotctl analyze` checks of the networking.istio.io kinds, in the
//! manner of `istioctl analyze`:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0201` | error | yes | a VirtualService routes (or mirrors) to a host neither the registry nor a ServiceEntry has |
//! | `PLT0202` | error | no | a VirtualService routes to a subset no DestinationRule of its host defines |
//! | `PLT0203` | warning | yes | a DestinationRule subset's labels select no instance of its host |
//! | `PLT0204` | error | no | two VirtualServices bound to the same gateway (or the mesh) claim one host |
//!
//! Short hosts are resolved in the object's namespace (`reviews` in
//! `default` is `reviews.default.<domain>`), as Istio resolves them.

use std::collections::{BTreeMap, BTreeSet};

use pilot_api::networking::{Destination, DestinationRule, ServiceEntry, VirtualService, hosts_overlap};
use pilot_model::{Config, DynConfig};

use super::{Finding, Services, Severity, finding};

/// Every networking finding for `objects` into `out`.
pub(super) fn analyze(
    objects: &[DynConfig],
    services: Option<&Services>,
    domain: &str,
    out: &mut Vec<Finding>,
) {
    let services_of = typed::<VirtualService>(objects);
    let rules = typed::<DestinationRule>(objects);
    let entries = typed::<ServiceEntry>(objects);

    // Subsets by resolved host.
    let mut subsets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rule in &rules {
        let host = resolve(&rule.spec.host, &rule.meta.namespace, domain);
        subsets
            .entry(host)
            .or_default()
            .extend(rule.spec.subsets.iter().map(|s| s.name.clone()));
    }
    let entry_hosts: Vec<String> = entries.iter().flat_map(|e| e.spec.hosts.clone()).collect();

    for vs in &services_of {
        let namespace = &vs.meta.namespace;
        for (path, destination) in destinations(&vs.spec) {
            if destination.host.contains('*') {
                continue;
            }
            let host = resolve(&destination.host, namespace, domain);
            if let Some(services) = services
                && !services.hosts.contains_key(&host)
                && !entry_hosts
                    .iter()
                    .any(|h| hosts_overlap(h, &destination.host) || hosts_overlap(h, &host))
            {
                out.push(finding(
                    vs,
                    "PLT0201",
                    Severity::Error,
                    format!("{path}.host"),
                    format!("the host {host} is neither in the service registry nor in a ServiceEntry"),
                ));
            }
            if !destination.subset.is_empty()
                && !subsets
                    .get(&host)
                    .is_some_and(|s| s.contains(&destination.subset))
            {
                out.push(finding(
                    vs,
                    "PLT0202",
                    Severity::Error,
                    format!("{path}.subset"),
                    format!(
                        "no DestinationRule for {host} defines the subset {:?}; requests to it fail",
                        destination.subset
                    ),
                ));
            }
        }
    }

    if let Some(services) = services {
        for rule in &rules {
            let host = resolve(&rule.spec.host, &rule.meta.namespace, domain);
            let Some(instances) = services.hosts.get(&host) else {
                continue;
            };
            for (i, subset) in rule.spec.subsets.iter().enumerate() {
                let selects = instances
                    .iter()
                    .any(|instance| subset.labels.iter().all(|(k, v)| instance.get(k) == Some(v)));
                if !selects {
                    out.push(finding(
                        rule,
                        "PLT0203",
                        Severity::Warning,
                        format!("spec.subsets[{i}].labels"),
                        format!("the subset {:?} selects no instance of {host}", subset.name),
                    ));
                }
            }
        }
    }

    conflicting_hosts(&services_of, domain, out);
}

/// PLT0204: for each gateway (or the mesh), hosts two VirtualServices
/// both claim; the later (by namespace, then name) is reported.
fn conflicting_hosts(services: &[Config<VirtualService>], domain: &str, out: &mut Vec<Finding>) {
    // (gateway, resolved host) -> first VirtualService claiming it.
    let mut claimed: BTreeMap<(String, String), String> = BTreeMap::new();
    for vs in services {
        let namespace = &vs.meta.namespace;
        let gateways: Vec<String> = if vs.spec.gateways.is_empty() {
            vec!["mesh".to_string()]
        } else {
            vs.spec
                .gateways
                .iter()
                .map(|g| {
                    if g == "mesh" || g.contains('/') {
                        g.clone()
                    } else {
                        format!("{namespace}/{g}")
                    }
                })
                .collect()
        };
        for (i, host) in vs.spec.hosts.iter().enumerate() {
            let host = resolve(host, namespace, domain);
            for gateway in &gateways {
                let id = format!("{}/{}", vs.meta.namespace, vs.meta.name);
                match claimed.get(&(gateway.clone(), host.clone())) {
                    Some(first) if *first != id => out.push(finding(
                        vs,
                        "PLT0204",
                        Severity::Error,
                        format!("spec.hosts[{i}]"),
                        format!(
                            "the VirtualService {first} already routes {host} on {gateway}; Istio uses only one of them"
                        ),
                    )),
                    Some(_) => {}
                    None => {
                        claimed.insert((gateway.clone(), host.clone()), id);
                    }
                }
            }
        }
    }
}

/// A host as Istio resolves it in `namespace`: a name without a dot is a
/// short name of that namespace.
pub(super) fn resolve(host: &str, namespace: &str, domain: &str) -> String {
    if host.contains('.') || host.contains('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.{domain}")
    }
}

/// Every destination of `vs` with its field path.
fn destinations(vs: &VirtualService) -> Vec<(String, &Destination)> {
    let mut out = Vec::new();
    for (i, route) in vs.http.iter().enumerate() {
        for (j, r) in route.route.iter().enumerate() {
            out.push((format!("spec.http[{i}].route[{j}].destination"), &r.destination));
        }
        if let Some(mirror) = &route.mirror {
            out.push((format!("spec.http[{i}].mirror"), mirror));
        }
        for (j, m) in route.mirrors.iter().enumerate() {
            out.push((format!("spec.http[{i}].mirrors[{j}].destination"), &m.destination));
        }
    }
    for (i, route) in vs.tls.iter().enumerate() {
        for (j, r) in route.route.iter().enumerate() {
            out.push((format!("spec.tls[{i}].route[{j}].destination"), &r.destination));
        }
    }
    for (i, route) in vs.tcp.iter().enumerate() {
        for (j, r) in route.route.iter().enumerate() {
            out.push((format!("spec.tcp[{i}].route[{j}].destination"), &r.destination));
        }
    }
    out
}

/// One object per name, the last given, by namespace and name.
pub(super) fn typed<K: pilot_model::ConfigKind>(objects: &[DynConfig]) -> Vec<Config<K>> {
    let mut typed: BTreeMap<(String, String), Config<K>> = BTreeMap::new();
    for object in objects.iter().filter(|o| o.meta.kind == K::id()) {
        if let Ok(config) = Config::<K>::from_dyn(object) {
            typed.insert((config.meta.namespace.clone(), config.meta.name.clone()), config);
        }
    }
    typed.into_values().collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pilot_model::document;

    use super::super::{Services, analyze};

    const DOMAIN: &str = "svc.cluster.local";

    const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 50
    - destination: {host: reviews, subset: v9}
      weight: 50
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-again, namespace: default}
spec:
  hosts: [reviews.default.svc.cluster.local]
  http:
  - route:
    - destination: {host: ratings}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: external, namespace: default}
spec:
  hosts: [api.example.com]
  http:
  - route:
    - destination: {host: api.example.com}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v3
    labels: {version: v3}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
"#;

    #[test]
    fn unknown_hosts_missing_subsets_empty_subsets_and_conflicts() {
        let objects = document::parse("t.yaml", CONFIG, &pilot_api::default_registry()).unwrap();
        let mut services = Services::default();
        services.hosts.insert(
            "reviews.default.svc.cluster.local".into(),
            vec![BTreeMap::from([("version".to_string(), "v1".to_string())])],
        );
        let found: Vec<(&str, String, String)> = analyze(&objects, Some(&services), DOMAIN)
            .into_iter()
            .map(|f| (f.code, f.name, f.path))
            .collect();
        let expected = [
            ("PLT0203", "reviews", "spec.subsets[1].labels"),
            ("PLT0202", "reviews", "spec.http[0].route[1].destination.subset"),
            (
                "PLT0201",
                "reviews-again",
                "spec.http[0].route[0].destination.host",
            ),
            ("PLT0204", "reviews-again", "spec.hosts[0]"),
        ]
        .map(|(c, n, p)| (c, n.to_string(), p.to_string()));
        assert_eq!(found, expected);

        // Offline: only what needs no registry.
        let offline: Vec<&str> = analyze(&objects, None, DOMAIN).iter().map(|f| f.code).collect();
        assert_eq!(offline, ["PLT0202", "PLT0204"]);
    }
}
