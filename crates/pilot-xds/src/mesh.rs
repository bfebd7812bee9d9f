//! The routing configuration the generator reads, and how rules name
//! services.

use pilot_model::istio::{DestinationPolicy, EgressRule, IngressRule, IstioService, RouteRule};
use pilot_model::{Config, ConfigKind, DynConfig, Labels};

use crate::XdsError;

/// A snapshot of the routing configuration, typed.
#[derive(Debug, Clone)]
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
        if !service.service.is_empty() {
            return service.service.clone();
        }
        let namespace = if service.namespace.is_empty() {
            namespace
        } else {
            &service.namespace
        };
        let domain = if service.domain.is_empty() {
            &self.domain_suffix
        } else {
            &service.domain
        };
        format!("{}.{namespace}.{domain}", service.name)
    }

    /// The route rules for `hostname`, highest precedence first, ties broken
    /// by namespace and name.
    pub fn rules_for(&self, hostname: &str) -> Vec<&Config<RouteRule>> {
        let mut rules: Vec<&Config<RouteRule>> = self
            .route_rules
            .iter()
            .filter(|r| {
                r.spec
                    .destination
                    .as_ref()
                    .is_some_and(|d| self.hostname(d, &r.meta.namespace) == hostname)
            })
            .collect();
        rules.sort_by(|a, b| {
            b.spec
                .precedence
                .cmp(&a.spec.precedence)
                .then_with(|| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)))
        });
        rules
    }

    /// The destination policy for `hostname` and a subset: one whose labels
    /// equal the subset's, else one without labels.
    pub fn policy_for(&self, hostname: &str, subset: &Labels) -> Option<&Config<DestinationPolicy>> {
        let matching = |want_labels: bool| {
            self.destination_policies.iter().find(|p| {
                p.spec.destination.as_ref().is_some_and(|d| {
                    self.hostname(d, &p.meta.namespace) == hostname
                        && if want_labels {
                            Labels(d.labels.clone()) == *subset
                        } else {
                            d.labels.is_empty()
                        }
                })
            })
        };
        (if subset.is_empty() { None } else { matching(true) }).or_else(|| matching(false))
    }
}
