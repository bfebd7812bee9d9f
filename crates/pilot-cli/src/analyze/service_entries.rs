//! `pilotctl analyze` checks of ServiceEntries, as Istio's analyzers make
//! them:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0207` | warning | no | two ServiceEntries of one namespace claim one host: the first by name has it |
//! | `PLT0208` | warning | no | a ServiceEntry's `workloadSelector` selects no WorkloadEntry of its namespace: the service has no instances |

use std::collections::BTreeMap;

use pilot_model::DynConfig;
use pilot_model::networking::{ServiceEntry, WorkloadEntry};

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
        let objects = document::parse("t.yaml", CONFIG, &pilot_model::default_registry()).unwrap();
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
}
