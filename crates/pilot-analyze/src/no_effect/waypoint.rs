//! PLT0215: an AuthorizationPolicy with rules ztunnel cannot enforce
//! (HTTP attributes and the like:
//! [`pilot_routing::authorization::Policy::needs_waypoint`]) that applies
//! to a workload in ambient mode, where only a waypoint could enforce
//! them and pilot serves none yet. Needs the registry: a workload is in
//! ambient mode when its instance carries `istio.io/dataplane-mode:
//! ambient` (a namespace's label is not known to the analysis), and the
//! policy applies to it by its selector or, without one, as its
//! namespace's or the mesh's. Sidecars enforce such rules themselves:
//! policies applying only to them get no finding.

use std::sync::Arc;

use pilot_api::security::AuthorizationPolicy;
use pilot_model::{Config, DynConfig};
use pilot_routing::{DEFAULT_ROOT_NAMESPACE, RoutingConfigs};

use super::super::networking::typed;
use super::super::security::{Workload, workloads};
use super::super::{Finding, Services, Severity, finding};

/// The label enrolling a workload (or namespace) in ambient mode, and its
/// value.
const DATAPLANE_MODE: (&str, &str) = ("istio.io/dataplane-mode", "ambient");

/// PLT0215 for the AuthorizationPolicies of `objects` into `out`.
pub(super) fn needs_waypoint(objects: &[DynConfig], services: Option<&Services>, out: &mut Vec<Finding>) {
    let Some(services) = services else {
        return;
    };
    let workloads = workloads(services);
    let policies = typed::<AuthorizationPolicy>(objects);
    let mut configs = RoutingConfigs::default();
    configs.authorization_policies = policies.iter().cloned().map(Arc::new).collect();
    let model = configs.compile();
    for (config, compiled) in policies.iter().zip(model.authorization().policies()) {
        let Some(reason) = compiled.needs_waypoint() else {
            continue;
        };
        if !applies_to_ambient(config, &workloads) {
            continue;
        }
        let scope = match &config.spec.selector {
            None if config.meta.namespace == DEFAULT_ROOT_NAMESPACE => "the mesh's workloads",
            None => "its namespace's workloads",
            Some(_) => "the workloads it selects",
        };
        out.push(finding(
            config,
            "PLT0215",
            Severity::Warning,
            "spec.rules",
            format!(
                "AuthorizationPolicy {}/{} has HTTP rules ztunnel cannot enforce: only a waypoint can (not served \
                 yet); for {scope} in ambient mode: {reason}",
                config.meta.namespace, config.meta.name
            ),
        ));
    }
}

/// Whether `policy` applies to an instance enrolled in ambient mode.
fn applies_to_ambient(policy: &Config<AuthorizationPolicy>, workloads: &[Workload]) -> bool {
    workloads.iter().any(|(ns, labels)| {
        labels.get(DATAPLANE_MODE.0).map(String::as_str) == Some(DATAPLANE_MODE.1)
            && policy
                .spec
                .applies_to(&policy.meta.namespace, DEFAULT_ROOT_NAMESPACE, ns, labels)
    })
}
