//! Conversion of the v1alpha2 routing kinds to today's
//! `networking.istio.io/v1` kinds, as Istio's own converter
//! (`istioctl experimental convert-networking-config`) mapped them:
//!
//! - the RouteRules of one destination host become one VirtualService for
//!   that host, its HTTP routes the rules in precedence order (higher
//!   first, ties by namespace and name), each route named after its rule;
//! - label-selected targets, mirrors and DestinationPolicies become one
//!   DestinationRule per host, its subsets named from their labels' values
//!   (`version: v1` is subset `v1`), a policy without labels its
//!   `trafficPolicy`, a policy with labels its subset's;
//! - an EgressRule becomes a `MESH_EXTERNAL` ServiceEntry (DNS resolution,
//!   or `NONE` for a wildcard, address or CIDR block);
//! - the IngressRules become one Gateway with a server per port and one
//!   VirtualService bound to it, its routes the rules in precedence order.
//!
//! Hosts are written fully qualified. Whatever has no exact equivalent is
//! converted as closely as v1 allows and reported as a [`Note`] naming the
//! object and the field path; objects of other kinds pass through as they
//! are. Conversion is pure and deterministic.
//!
//! ```
//! use pilot_model::document;
//! use pilot_api::default_registry;
//! use pilot_routing::convert;
//!
//! let text = r#"
//! apiVersion: config.istio.io/v1alpha2
//! kind: RouteRule
//! metadata: {name: reviews-split, namespace: default}
//! spec:
//!   destination: {name: reviews}
//!   route: [{labels: {version: v1}, weight: 80}, {labels: {version: v2}, weight: 20}]
//!   websocketUpgrade: true
//! "#;
//! let objects = document::parse("rules.yaml", text, &default_registry()).unwrap();
//! let conversion = convert::convert_objects(&objects).unwrap();
//! let kinds: Vec<&str> = conversion.objects.iter().map(|o| o.meta.kind.as_str()).collect();
//! assert_eq!(kinds, ["VirtualService", "DestinationRule"]);
//! assert!(conversion.notes.is_empty());
//! let yaml = document::to_yaml(&conversion.objects);
//! assert!(yaml.contains("subset: v1"));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::RoutingConfigs;
use pilot_api::istio::{DestinationPolicy, EgressRule, IngressRule, RouteRule};
use pilot_api::networking::{DestinationRule, Gateway, ServiceEntry, VirtualService};
use pilot_model::{Config, ConfigKind, DynConfig, Labels, StoreError};

mod edge;
mod first_cli;
pub mod gateway_api;
mod policies;
mod routes;

pub use first_cli::from_first_cli;

/// What a conversion made: the v1 objects, and a note per construct that
/// had no exact equivalent.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Conversion {
    /// The converted objects (and those of other kinds, as they were).
    pub objects: Vec<DynConfig>,
    /// What was not converted exactly, in the order met.
    pub notes: Vec<Note>,
}

/// A construct with no exact v1 equivalent, and what was done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Note {
    /// The kind of the object it is in (`RouteRule`).
    pub kind: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The field path (`spec.websocketUpgrade`).
    pub path: String,
    /// What v1 lacks and what the converter did instead.
    pub message: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{}: {}: {}",
            self.kind, self.namespace, self.name, self.path, self.message
        )
    }
}

/// The v1 equivalent of the routing objects among `objects`; objects of
/// other kinds are kept as they are, after the converted ones. Fails on an
/// object that does not decode as its kind.
pub fn convert_objects(objects: &[DynConfig]) -> Result<Conversion, StoreError> {
    let configs = RoutingConfigs::from_configs(objects)?;
    let mut conversion = convert(&configs)?;
    let converted = [
        RouteRule::KIND,
        DestinationPolicy::KIND,
        EgressRule::KIND,
        IngressRule::KIND,
    ];
    conversion.objects.extend(
        objects
            .iter()
            .filter(|o| !converted.contains(&o.meta.kind.as_str()))
            .cloned(),
    );
    Ok(conversion)
}

/// The v1 equivalent of the v1alpha2 objects of `configs` (its v1 objects
/// are left out): VirtualServices, then DestinationRules, ServiceEntries,
/// and the ingress's Gateway and VirtualService.
pub fn convert(configs: &RoutingConfigs) -> Result<Conversion, StoreError> {
    let mut out = Out::default();
    let subsets = policies::subset_names(configs);
    routes::route_rules(configs, &subsets, &mut out);
    policies::destination_policies(configs, &subsets, &mut out);
    edge::egress_rules(configs, &mut out);
    edge::ingress_rules(configs, &mut out);
    let mut objects = Vec::new();
    for vs in &out.virtual_services {
        objects.push(vs.to_dyn()?);
    }
    for dr in &out.destination_rules {
        objects.push(dr.to_dyn()?);
    }
    for se in &out.service_entries {
        objects.push(se.to_dyn()?);
    }
    for gw in &out.gateways {
        objects.push(gw.to_dyn()?);
    }
    for vs in &out.ingress_services {
        objects.push(vs.to_dyn()?);
    }
    Ok(Conversion {
        objects,
        notes: out.notes,
    })
}

/// What the converters write into.
#[derive(Default)]
struct Out {
    virtual_services: Vec<Config<VirtualService>>,
    destination_rules: Vec<Config<DestinationRule>>,
    service_entries: Vec<Config<ServiceEntry>>,
    gateways: Vec<Config<Gateway>>,
    ingress_services: Vec<Config<VirtualService>>,
    notes: Vec<Note>,
    /// (kind, namespace, name) already used.
    names: BTreeSet<(&'static str, String, String)>,
}

impl Out {
    fn note<S>(&mut self, object: &Config<S>, path: &str, message: impl Into<String>) {
        self.notes.push(Note {
            kind: object.meta.kind.clone(),
            namespace: object.meta.namespace.clone(),
            name: object.meta.name.clone(),
            path: path.to_string(),
            message: message.into(),
        });
    }

    /// `wanted`, or `wanted-2`, `wanted-3`... if a `kind` of that name is
    /// already in `namespace`.
    fn unique_name(&mut self, kind: &'static str, namespace: &str, wanted: &str) -> String {
        let mut name = wanted.to_string();
        let mut n = 1;
        while !self.names.insert((kind, namespace.to_string(), name.clone())) {
            n += 1;
            name = format!("{wanted}-{n}");
        }
        name
    }
}

/// Where a host's objects go: a service host `name.namespace.suffix` is
/// named `name` in `namespace`; any other host is named after itself
/// (`*` as `wildcard`) in `fallback_namespace`.
fn placement(host: &str, domain_suffix: &str, fallback_namespace: &str) -> (String, String) {
    if let Some(rest) = host.strip_suffix(&format!(".{domain_suffix}"))
        && let Some((name, namespace)) = rest.split_once('.')
        && !namespace.contains('.')
        && !name.contains('*')
    {
        return (namespace.to_string(), name.to_string());
    }
    (fallback_namespace.to_string(), object_name(host))
}

/// `host` as a DNS-1123 subdomain: lower case, `*` as `wildcard`, other
/// characters outside `[a-z0-9.-]` as `-`.
fn object_name(host: &str) -> String {
    let name: String = host
        .replace('*', "wildcard")
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches(|c: char| c == '-' || c == '.');
    if name.is_empty() {
        "converted".to_string()
    } else {
        name.chars().take(253).collect()
    }
}

/// Subset names by host, then by labels.
type SubsetNames = BTreeMap<String, BTreeMap<Labels, String>>;

#[cfg(test)]
mod tests;
