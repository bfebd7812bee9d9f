//! `pilotctl analyze` checks of ServiceEntries, as Istio's analyzers make
//! them:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0207` | warning | no | two ServiceEntries of one namespace claim one host: the first by name has it |
//! | `PLT0208` | warning | no | a ServiceEntry's `workloadSelector` selects no WorkloadEntry of its namespace: the service has no instances |
//! | `PLT0209` | warning | no | a plain TCP port of a host without addresses that an older host (or the first by name) also has: capturing sidecars have one listener for the port (`0.0.0.0_<port>`) and it goes to the older host only |

use std::collections::BTreeMap;
use std::time::SystemTime;

use pilot_api::networking::{ServiceEntry, WorkloadEntry};
use pilot_model::{Config, DynConfig};

use super::networking::typed;
use super::{Finding, Severity, finding};

/// Every ServiceEntry finding for `objects` into `out`.
pub(super) fn analyze(objects: &[DynConfig], out: &mut Vec<Finding>) {
    let entries = typed::<ServiceEntry>(objects);
    let workloads = typed::<WorkloadEntry>(objects);
    // PLT0207: by namespace and host, the first entry (by name) claiming it.
    let mut claimed: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for entry in &entries {
        for (i, host) in entry.spec.hosts.iter().enumerate() {
            let key = (entry.meta.namespace.as_str(), host.as_str());
            match claimed.get(&key) {
                Some(first) => out.push(finding(
                    entry,
                    "PLT0207",
                    Severity::Warning,
                    format!("spec.hosts[{i}]"),
                    format!("the ServiceEntry {first} of this namespace already has the host {host}; this one is ignored for it"),
                )),
                None => {
                    claimed.insert(key, &entry.meta.name);
                }
            }
        }
    }
    tcp_port_conflicts(&entries, out);
    // PLT0208: a selector that selects nothing.
    for entry in &entries {
        let Some(selector) = &entry.spec.workload_selector else {
            continue;
        };
        let selects = workloads.iter().any(|w| {
            w.meta.namespace == entry.meta.namespace
                && selector
                    .labels
                    .iter()
                    .all(|(k, v)| w.spec.labels.get(k) == Some(v))
        });
        if !selects {
            out.push(finding(
                entry,
                "PLT0208",
                Severity::Warning,
                "spec.workloadSelector.labels",
                "no WorkloadEntry of this namespace carries these labels: the service has no instances"
                    .into(),
            ));
        }
    }
}

/// PLT0209: the hosts without addresses sharing a plain TCP port, as
/// generation orders them (the oldest entry first, unknown ages last, then
/// by host); each but the first is reported on its entry's port.
fn tcp_port_conflicts(entries: &[Config<ServiceEntry>], out: &mut Vec<Finding>) {
    type Claim<'a> = (
        (bool, Option<SystemTime>, &'a str),
        &'a Config<ServiceEntry>,
        usize,
    );
    // A host belongs to the first entry (by namespace and name) naming it.
    let mut ordered: Vec<&Config<ServiceEntry>> = entries.iter().collect();
    ordered.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    let mut hosts_taken = std::collections::BTreeSet::new();
    let mut by_port: BTreeMap<u32, Vec<Claim>> = BTreeMap::new();
    for entry in ordered.into_iter().filter(|e| e.spec.addresses.is_empty()) {
        let created = entry.meta.creation_timestamp;
        for host in &entry.spec.hosts {
            if !hosts_taken.insert(host.as_str()) {
                continue;
            }
            for (i, port) in entry.spec.ports.iter().enumerate() {
                if is_plain_tcp(&port.protocol, &port.name) {
                    by_port.entry(port.number).or_default().push((
                        (created.is_none(), created, host.as_str()),
                        entry,
                        i,
                    ));
                }
            }
        }
    }
    for (number, mut claims) in by_port {
        claims.sort_by(|a, b| a.0.cmp(&b.0));
        let Some(((_, _, owner_host), owner, _)) = claims.first().copied() else {
            continue;
        };
        for ((_, _, host), entry, i) in claims.into_iter().skip(1) {
            out.push(finding(
                entry,
                "PLT0209",
                Severity::Warning,
                format!("spec.ports[{i}]"),
                format!(
                    "{host} has no address and its plain TCP port {number} is also {owner_host}'s (ServiceEntry {}/{}, older or first by name): capturing sidecars have one listener for the port, 0.0.0.0_{number}, and it goes to {owner_host}; give the entries addresses to tell them apart",
                    owner.meta.namespace, owner.meta.name
                ),
            ));
        }
    }
}

/// Whether a ServiceEntry port is routed by address and port alone (not
/// HTTP, TLS or UDP), its protocol as the registry reads it.
fn is_plain_tcp(protocol: &str, name: &str) -> bool {
    let named = pilot_model::Protocol::from_port_name(name);
    match protocol.to_ascii_uppercase().as_str() {
        "HTTP" | "HTTP2" | "GRPC" | "GRPC-WEB" | "HTTPS" | "TLS" | "UDP" => false,
        "" => !named.is_http() && !matches!(named, pilot_model::Protocol::Https | pilot_model::Protocol::Udp),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use pilot_model::document;

    use super::super::analyze;

    const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api-again, namespace: default}
spec:
  hosts: [other.example.com, api.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: prod}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: default}
spec:
  hosts: [vm.example]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dbs, namespace: default}
spec:
  hosts: [db.example]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: db}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-1, namespace: default}
spec: {address: 10.0.0.1, labels: {app: vm, version: v1}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: db-1, namespace: prod}
spec: {address: 10.0.0.2, labels: {app: db}}
"#;

    #[test]
    fn shared_hosts_and_selectors_that_select_nothing() {
        let objects = document::parse("t.yaml", CONFIG, &pilot_api::default_registry()).unwrap();
        let found: Vec<(&str, String, String, String)> = analyze(&objects, None, "svc.cluster.local")
            .into_iter()
            .map(|f| (f.code, f.namespace, f.name, f.path))
            .collect();
        let expected = [
            ("PLT0207", "default", "api-again", "spec.hosts[1]"),
            ("PLT0208", "default", "dbs", "spec.workloadSelector.labels"),
        ]
        .map(|(c, ns, n, p)| (c, ns.to_string(), n.to_string(), p.to_string()));
        assert_eq!(found, expected);
    }

    #[test]
    fn plain_tcp_ports_shared_without_addresses_go_to_the_oldest_host() {
        let entry = |name: &str, host: &str, created: &str, extra: &str| {
            format!(
                "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default{created}}}\nspec:\n  hosts: [{host}]\n  ports: [{{number: 80, name: http, protocol: HTTP}}, {{number: 3306, name: mysql, protocol: TCP}}]\n  resolution: DNS\n{extra}"
            )
        };
        let found = |docs: &[String]| -> Vec<(String, String, String)> {
            let objects =
                document::parse("t.yaml", &docs.join("---\n"), &pilot_api::default_registry()).unwrap();
            analyze(&objects, None, "svc.cluster.local")
                .into_iter()
                .map(|f| {
                    assert!(f.message.contains("0.0.0.0_3306"), "{}", f.message);
                    (f.code.to_string(), f.name, f.path)
                })
                .collect()
        };
        let expected = |name: &str| {
            vec![(
                "PLT0209".to_string(),
                name.to_string(),
                "spec.ports[1]".to_string(),
            )]
        };
        // The older entry has the port, whatever the order of the names.
        let (old, new) = (
            ", creationTimestamp: '2024-01-01T00:00:00Z'",
            ", creationTimestamp: '2025-01-01T00:00:00Z'",
        );
        assert_eq!(
            found(&[entry("a", "a.example", new, ""), entry("b", "b.example", old, "")]),
            expected("a")
        );
        assert_eq!(
            found(&[entry("a", "a.example", old, ""), entry("b", "b.example", new, "")]),
            expected("b")
        );
        // Of unknown ages (files), the first host by name.
        assert_eq!(
            found(&[entry("a", "z.example", "", ""), entry("b", "b.example", "", "")]),
            expected("a")
        );
        // With an address, or on HTTP alone, nothing to report.
        let addressed = "  addresses: [240.0.0.9]\n";
        assert!(
            found(&[
                entry("a", "a.example", "", addressed),
                entry("b", "b.example", "", "")
            ])
            .is_empty()
        );
    }
}
