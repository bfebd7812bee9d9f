//! `pilotctl analyze` checks of Sidecars, in the manner of `istioctl
//! analyze`:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0205` | warning | yes | a Sidecar's workload selector selects no instance of its namespace |
//! | `PLT0206` | error | no (defaults) / yes | two Sidecars apply to one workload: two namespace defaults, or two selectors matching one instance; Istio uses only one of them |
//!
//! A workload's namespace is its service's (the second label of the
//! hostname).

use std::collections::BTreeMap;

use pilot_api::networking::Sidecar;
use pilot_model::{Config, DynConfig};

use super::{Finding, Services, Severity, finding};

/// Every Sidecar finding for `objects` into `out`.
pub(super) fn analyze(objects: &[DynConfig], services: Option<&Services>, out: &mut Vec<Finding>) {
    let sidecars = super::networking::typed::<Sidecar>(objects);
    let mut defaults: BTreeMap<&str, &Config<Sidecar>> = BTreeMap::new();
    for sidecar in &sidecars {
        let namespace = sidecar.meta.namespace.as_str();
        let Some(selector) = &sidecar.spec.workload_selector else {
            if let Some(first) = defaults.get(namespace) {
                out.push(finding(
                    sidecar,
                    "PLT0206",
                    Severity::Error,
                    "spec",
                    format!(
                        "the Sidecar {}/{} is also the default of namespace {namespace}; Istio uses only one of them",
                        first.meta.namespace, first.meta.name
                    ),
                ));
            } else {
                defaults.insert(namespace, sidecar);
            }
            continue;
        };
        let Some(services) = services else { continue };
        let mine = selected(services, namespace, &selector.labels);
        if mine.is_empty() {
            out.push(finding(
                sidecar,
                "PLT0205",
                Severity::Warning,
                "spec.workloadSelector.labels",
                format!("the workload selector selects no instance in namespace {namespace}"),
            ));
            continue;
        }
        let earlier = sidecars.iter().take_while(|other| {
            other.meta.name != sidecar.meta.name || other.meta.namespace != sidecar.meta.namespace
        });
        for other in earlier.filter(|o| o.meta.namespace == sidecar.meta.namespace) {
            let Some(other_selector) = &other.spec.workload_selector else {
                continue;
            };
            let overlap = selected(services, namespace, &other_selector.labels)
                .into_iter()
                .find(|instance| mine.contains(instance));
            if let Some((host, _)) = overlap {
                out.push(finding(
                    sidecar,
                    "PLT0206",
                    Severity::Error,
                    "spec.workloadSelector.labels",
                    format!(
                        "the Sidecar {}/{} also selects an instance of {host}; Istio uses only one of them",
                        other.meta.namespace, other.meta.name
                    ),
                ));
            }
        }
    }
}

/// The instances (host, labels) of `namespace` that carry every label of
/// `labels`.
fn selected<'a>(
    services: &'a Services,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<(&'a str, &'a BTreeMap<String, String>)> {
    services
        .hosts
        .iter()
        .filter(|(host, _)| host.split('.').nth(1) == Some(namespace))
        .flat_map(|(host, instances)| instances.iter().map(move |i| (host.as_str(), i)))
        .filter(|(_, instance)| labels.iter().all(|(k, v)| instance.get(k) == Some(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pilot_model::document;

    use super::super::{Services, analyze};

    const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: prod}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: second-default, namespace: prod}
spec:
  egress: [{hosts: ["./*", "istio-system/*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: a-reviews, namespace: prod}
spec:
  workloadSelector: {labels: {app: reviews}}
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: b-reviews-v1, namespace: prod}
spec:
  workloadSelector: {labels: {app: reviews, version: v1}}
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: c-nobody, namespace: prod}
spec:
  workloadSelector: {labels: {app: nobody}}
  egress: [{hosts: ["./*"]}]
"#;

    #[test]
    fn sidecars_selecting_nothing_and_sidecars_selecting_one_workload() {
        let objects = document::parse("t.yaml", CONFIG, &pilot_api::default_registry()).unwrap();
        let mut services = Services::default();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        services.hosts.insert(
            "reviews.prod.svc.cluster.local".into(),
            vec![labels(&[("app", "reviews"), ("version", "v1")])],
        );
        services.hosts.insert(
            "nobody.other.svc.cluster.local".into(),
            vec![labels(&[("app", "nobody")])],
        );
        let found: Vec<(&str, String)> = analyze(&objects, Some(&services), "svc.cluster.local")
            .into_iter()
            .map(|f| (f.code, f.name))
            .collect();
        assert_eq!(
            found,
            [
                ("PLT0206", "b-reviews-v1".to_string()),
                ("PLT0205", "c-nobody".to_string()),
                ("PLT0206", "second-default".to_string()),
            ]
        );
        let offline: Vec<&str> = analyze(&objects, None, "svc.cluster.local")
            .iter()
            .map(|f| f.code)
            .collect();
        assert_eq!(offline, ["PLT0206"]);
    }
}
