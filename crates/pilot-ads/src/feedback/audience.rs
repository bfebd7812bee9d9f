//! Which proxies should have a routing object: those whose configuration
//! may depend on it, the denominator of the object's distribution status.
//!
//! A VirtualService, DestinationRule or ServiceEntry concerns a sidecar
//! when it is exported to the sidecar's namespace and one of its hosts is
//! in the sidecar's scope (a wildcard host when it matches a host in
//! scope); a VirtualService bound only to gateways concerns no sidecar. A
//! Sidecar concerns the proxies it applies to. Everything else, and every
//! object when no proxy's scope is restricted, concerns every proxy; so do
//! edge proxies and proxies whose node id does not parse. Scopes are the
//! latest push's; a proxy connected to another replica is placed by its
//! node id and its instances in this replica's registry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pilot_api::gateway_api::{GrpcRoute, HttpRoute, ParentReference};
use pilot_api::networking::{DestinationRule, ServiceEntry, Sidecar, VirtualService};
use pilot_model::{Config, ConfigKind, DynConfig, ProxyDistribution, ServiceDiscovery};
use pilot_routing::{exported_to, host_matches};
use pilot_xds::{Proxy, ProxyScope, ProxyType};

use crate::push::{MeshSnapshot, proxy_namespace, workload_labels};

/// The proxies each routing object concerns, as of one push
/// ([`crate::XdsServer::audience`]).
pub struct Audience {
    snapshot: Option<Arc<MeshSnapshot>>,
    /// By node id: the proxy's namespace, workload labels and scope (none:
    /// unrestricted), or `None` when every object concerns it.
    viewers: Mutex<HashMap<String, Option<Arc<Viewer>>>>,
}

/// What of a proxy decides which objects concern it.
struct Viewer {
    namespace: String,
    scope: Option<Arc<ProxyScope>>,
    /// The Sidecar that applies to it (namespace, name), if any: found once
    /// per proxy, not once per Sidecar asked about.
    sidecar: Option<(String, String)>,
}

/// What an object says about who it concerns.
enum Reach {
    /// Every proxy.
    Everyone,
    /// No sidecar (gateways only).
    NoSidecar,
    /// Sidecars of the namespaces it is exported to whose scope holds one
    /// of its hosts.
    Hosts {
        namespace: String,
        export_to: Vec<String>,
        hosts: Vec<String>,
    },
    /// The proxies a Sidecar applies to.
    Sidecar(pilot_model::ConfigKey),
}

impl Audience {
    pub(crate) fn new(snapshot: Option<Arc<MeshSnapshot>>) -> Self {
        Audience {
            snapshot,
            viewers: Mutex::default(),
        }
    }

    /// True when both are of the same push (the same snapshot, or none):
    /// they place every proxy alike.
    pub fn same_push(&self, other: &Audience) -> bool {
        match (&self.snapshot, &other.snapshot) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    /// The records of the proxies `object` concerns, out of `proxies`;
    /// `None` when it concerns all of them. A ztunnel is served
    /// authorization only: the AuthorizationPolicies and
    /// PeerAuthentications concern it, nothing else does.
    pub fn of(&self, object: &DynConfig, proxies: &[ProxyDistribution]) -> Option<Vec<ProxyDistribution>> {
        let ztunnel = |p: &ProxyDistribution| p.node_id.starts_with("ztunnel~");
        if !proxies.iter().any(ztunnel) {
            return self.of_envoys(object, proxies);
        }
        let ambient = matches!(
            object.meta.kind.as_str(),
            "AuthorizationPolicy" | "PeerAuthentication"
        );
        let envoys: Vec<ProxyDistribution> = proxies.iter().filter(|p| !ztunnel(p)).cloned().collect();
        let concerned = self.of_envoys(object, &envoys).unwrap_or(envoys);
        let kept: std::collections::HashSet<&str> = concerned.iter().map(|p| p.node_id.as_str()).collect();
        let all = proxies
            .iter()
            .filter(|p| {
                if ztunnel(p) {
                    ambient
                } else {
                    kept.contains(p.node_id.as_str())
                }
            })
            .cloned()
            .collect::<Vec<_>>();
        Some(all)
    }

    /// [`Audience::of`] for proxies that are all Envoys (or gRPC clients).
    fn of_envoys(&self, object: &DynConfig, proxies: &[ProxyDistribution]) -> Option<Vec<ProxyDistribution>> {
        let snapshot = self.snapshot.as_ref()?;
        if !pilot_xds::serving::scoping_applies(&*snapshot.registry, snapshot.rules.model()) {
            return None;
        }
        let reach = reach(object, snapshot);
        if matches!(reach, Reach::Everyone) {
            return None;
        }
        Some(
            proxies
                .iter()
                .filter(|p| self.concerns(&reach, &p.node_id, snapshot))
                .cloned()
                .collect(),
        )
    }

    fn concerns(&self, reach: &Reach, node_id: &str, snapshot: &MeshSnapshot) -> bool {
        let Some(viewer) = self.viewer(node_id, snapshot) else {
            return true;
        };
        let model = snapshot.rules.model();
        match reach {
            Reach::Everyone => true,
            Reach::NoSidecar => false,
            Reach::Hosts {
                namespace,
                export_to,
                hosts,
            } => {
                exported_to(export_to, namespace, model.default_export_to(), &viewer.namespace)
                    && viewer.scope.as_ref().is_none_or(|scope| {
                        hosts.iter().any(|h| {
                            scope
                                .hosts
                                .keys()
                                .any(|s| host_matches(h, s) || host_matches(s, h))
                        })
                    })
            }
            Reach::Sidecar(key) => viewer
                .sidecar
                .as_ref()
                .is_some_and(|(namespace, name)| *namespace == key.namespace && *name == key.name),
        }
    }

    fn viewer(&self, node_id: &str, snapshot: &MeshSnapshot) -> Option<Arc<Viewer>> {
        let mut viewers = self.viewers.lock().unwrap_or_else(|p| p.into_inner());
        // Found without making a key: this runs once per object and proxy.
        if let Some(viewer) = viewers.get(node_id) {
            return viewer.clone();
        }
        viewers
            .entry(node_id.to_string())
            .or_insert_with(|| {
                let proxy = Proxy::from_node_id(node_id).ok()?;
                if proxy.proxy_type != ProxyType::Sidecar {
                    return None;
                }
                let own = snapshot.registry.host_instances(&[proxy.ip]);
                let scope =
                    snapshot
                        .generated
                        .scopes
                        .scope(&proxy, &own, &snapshot.registry, &snapshot.rules);
                let namespace = proxy_namespace(&proxy);
                let sidecar = snapshot
                    .rules
                    .model()
                    .sidecar_for(&namespace, &workload_labels(&proxy, &own))
                    .map(|(sidecar, _)| (sidecar.namespace.clone(), sidecar.name.clone()));
                Some(Arc::new(Viewer {
                    namespace,
                    scope,
                    sidecar,
                }))
            })
            .clone()
    }
}

/// Who `object` concerns, from its kind and spec.
fn reach(object: &DynConfig, snapshot: &MeshSnapshot) -> Reach {
    let namespace = object.meta.namespace.clone();
    let suffix = snapshot.rules.model().domain_suffix();
    let resolve = |host: &str| {
        if host.contains('.') || host.contains('*') {
            host.to_string()
        } else {
            format!("{host}.{namespace}.{suffix}")
        }
    };
    match object.meta.kind.as_str() {
        VirtualService::KIND => match Config::<VirtualService>::from_dyn(object) {
            Ok(vs) if !vs.spec.gateways.is_empty() && !vs.spec.gateways.iter().any(|g| g == "mesh") => {
                Reach::NoSidecar
            }
            Ok(vs) => Reach::Hosts {
                hosts: vs.spec.hosts.iter().map(|h| resolve(h)).collect(),
                export_to: vs.spec.export_to,
                namespace,
            },
            Err(_) => Reach::Everyone,
        },
        DestinationRule::KIND => match Config::<DestinationRule>::from_dyn(object) {
            Ok(dr) => Reach::Hosts {
                hosts: vec![resolve(&dr.spec.host)],
                export_to: dr.spec.export_to,
                namespace,
            },
            Err(_) => Reach::Everyone,
        },
        ServiceEntry::KIND => match Config::<ServiceEntry>::from_dyn(object) {
            Ok(se) => Reach::Hosts {
                hosts: se.spec.hosts.clone(),
                export_to: se.spec.export_to,
                namespace,
            },
            Err(_) => Reach::Everyone,
        },
        Sidecar::KIND => Reach::Sidecar(object.key()),
        kind if kind == HttpRoute::id() => match Config::<HttpRoute>::from_dyn(object) {
            Ok(route) => attached(route.spec.parent_refs.as_deref(), namespace, suffix),
            Err(_) => Reach::Everyone,
        },
        kind if kind == GrpcRoute::id() => match Config::<GrpcRoute>::from_dyn(object) {
            Ok(route) => attached(route.spec.parent_refs.as_deref(), namespace, suffix),
            Err(_) => Reach::Everyone,
        },
        _ => Reach::Everyone,
    }
}

/// Who a Gateway API route of `namespace` with `parents` concerns: the
/// sidecars that see a Service it is attached to.
fn attached(parents: Option<&[ParentReference]>, namespace: String, suffix: &str) -> Reach {
    let services: Vec<(String, bool)> = parents
        .unwrap_or_default()
        .iter()
        .filter(|p| matches!(p.group(), "" | "core") && p.kind() == "Service")
        .map(|p| {
            let service_namespace = p.namespace.as_deref().unwrap_or(&namespace);
            (
                format!("{}.{service_namespace}.{suffix}", p.name),
                service_namespace != namespace,
            )
        })
        .collect();
    if services.is_empty() {
        return Reach::NoSidecar;
    }
    let consumer_only = services.iter().all(|(_, consumer)| *consumer);
    Reach::Hosts {
        export_to: vec![if consumer_only { "." } else { "*" }.to_string()],
        hosts: services.into_iter().map(|(host, _)| host).collect(),
        namespace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(node_id: &str) -> ProxyDistribution {
        ProxyDistribution {
            node_id: node_id.into(),
            acked: None,
            nack: None,
            withheld: Vec::new(),
        }
    }

    fn object(kind: &str) -> DynConfig {
        let mut meta = pilot_model::ConfigMeta::default();
        meta.kind = kind.into();
        meta.name = "x".into();
        meta.namespace = "default".into();
        DynConfig {
            meta,
            spec: serde_json::json!({}),
        }
    }

    #[test]
    fn a_ztunnel_is_concerned_by_authorization_only() {
        let sidecar = proxy("sidecar~10.0.0.1~a.default~default.svc.cluster.local");
        let ztunnel = proxy("ztunnel~10.0.0.2~z.istio-system~istio-system.svc.cluster.local");
        let proxies = [sidecar.clone(), ztunnel.clone()];
        let audience = Audience::new(None);
        let names = |kind: &str| -> Vec<String> {
            let concerned = audience
                .of(&object(kind), &proxies)
                .unwrap_or_else(|| proxies.to_vec());
            concerned.into_iter().map(|p| p.node_id).collect()
        };
        for kind in ["AuthorizationPolicy", "PeerAuthentication"] {
            assert_eq!(
                names(kind),
                [sidecar.node_id.clone(), ztunnel.node_id.clone()],
                "{kind}"
            );
        }
        for kind in [
            "VirtualService",
            "DestinationRule",
            "Sidecar",
            "RequestAuthentication",
        ] {
            assert_eq!(names(kind), std::slice::from_ref(&sidecar.node_id), "{kind}");
        }
        // Without a ztunnel, as before: every proxy (no push yet).
        assert!(audience.of(&object("VirtualService"), &proxies[..1]).is_none());
    }
}
