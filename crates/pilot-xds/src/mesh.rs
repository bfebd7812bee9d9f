//! The routing configuration the generator reads, and how rules name
//! services.

use std::collections::HashMap;

use pilot_model::istio::{DestinationPolicy, EgressRule, IngressRule, IstioService, RouteRule};
use pilot_model::{Config, ConfigKind, DynConfig, Labels};

use crate::XdsError;

/// A snapshot of the routing configuration, typed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MeshConfig {
    /// Route rules.
    pub route_rules: Vec<Config<RouteRule>>,
    /// Destination policies.
    pub destination_policies: Vec<Config<DestinationPolicy>>,
    /// Egress rules.
    pub egress_rules: Vec<Config<EgressRule>>,
    /// Ingress rules.
    pub ingress_rules: Vec<Config<IngressRule>>,
    /// The DNS suffix of service hostnames (`svc.cluster.local`).
    pub domain_suffix: String,
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            route_rules: Vec::new(),
            destination_policies: Vec::new(),
            egress_rules: Vec::new(),
            ingress_rules: Vec::new(),
            domain_suffix: "svc.cluster.local".into(),
        }
    }
}

impl MeshConfig {
    /// The routing kinds among `configs`, typed; other kinds are ignored.
    pub fn from_configs<'a>(configs: impl IntoIterator<Item = &'a DynConfig>) -> Result<Self, XdsError> {
        let mut mesh = MeshConfig::default();
        for config in configs {
            let decode = |e: pilot_model::StoreError| XdsError::BadConfig(e.to_string());
            match config.meta.kind.as_str() {
                RouteRule::KIND => mesh.route_rules.push(Config::from_dyn(config).map_err(decode)?),
                DestinationPolicy::KIND => mesh
                    .destination_policies
                    .push(Config::from_dyn(config).map_err(decode)?),
                EgressRule::KIND => mesh.egress_rules.push(Config::from_dyn(config).map_err(decode)?),
                IngressRule::KIND => mesh.ingress_rules.push(Config::from_dyn(config).map_err(decode)?),
                _ => {}
            }
        }
        Ok(mesh)
    }

    /// The hostname a reference in a rule of `namespace` names:
    /// `service` if given, else `name.namespace.domain`.
    pub fn hostname(&self, service: &IstioService, namespace: &str) -> String {
        service.hostname(namespace, &self.domain_suffix)
    }

    /// The rules and policies by the hostname they apply to, built once per
    /// generation so each service finds its own without a scan.
    pub fn index(&self) -> MeshIndex<'_> {
        let mut rules: HashMap<String, Vec<&Config<RouteRule>>> = HashMap::new();
        for rule in &self.route_rules {
            if let Some(destination) = &rule.spec.destination {
                rules
                    .entry(self.hostname(destination, &rule.meta.namespace))
                    .or_default()
                    .push(rule);
            }
        }
        for list in rules.values_mut() {
            list.sort_by(|a, b| {
                b.spec
                    .precedence
                    .cmp(&a.spec.precedence)
                    .then_with(|| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)))
            });
        }
        let mut policies: HashMap<String, Vec<(Labels, &Config<DestinationPolicy>)>> = HashMap::new();
        for policy in &self.destination_policies {
            if let Some(destination) = &policy.spec.destination {
                policies
                    .entry(self.hostname(destination, &policy.meta.namespace))
                    .or_default()
                    .push((Labels(destination.labels.clone()), policy));
            }
        }
        MeshIndex { rules, policies }
    }
}

/// [`MeshConfig`]'s rules and policies by hostname.
pub struct MeshIndex<'a> {
    rules: HashMap<String, Vec<&'a Config<RouteRule>>>,
    policies: HashMap<String, Vec<(Labels, &'a Config<DestinationPolicy>)>>,
}

impl<'a> MeshIndex<'a> {
    /// The route rules for `hostname`, highest precedence first, ties broken
    /// by namespace and name.
    pub fn rules_for(&self, hostname: &str) -> &[&'a Config<RouteRule>] {
        self.rules.get(hostname).map(Vec::as_slice).unwrap_or_default()
    }

    /// The destination policy for `hostname` and a subset: one whose labels
    /// equal the subset's, else one without labels.
    pub fn policy_for(&self, hostname: &str, subset: &Labels) -> Option<&'a Config<DestinationPolicy>> {
        let policies = self.policies.get(hostname)?;
        let exact = (!subset.is_empty())
            .then(|| policies.iter().find(|(labels, _)| labels == subset))
            .flatten();
        exact
            .or_else(|| policies.iter().find(|(labels, _)| labels.is_empty()))
            .map(|(_, p)| *p)
    }
}
