//! Classes of proxies: what the shared (outbound) part of a proxy's
//! configuration depends on, so that proxies of one class share one
//! generation per push.

use std::collections::HashSet;

use pilot_model::{Labels, ServiceInstance};
use pilot_xds::serving::ScopeKey;
use pilot_xds::{Generator, Proxy, ProxyType};

/// What the shared (outbound) part of a proxy's configuration depends on
/// besides the mesh: proxies equal here get equal outbound configuration,
/// so it is generated once for all of them. Their own instances (and their
/// labels) count only where a rule's source match names their service, and
/// then only by service and labels; addresses and ports go into the
/// per-proxy inbound part. So without source-matched rules every sidecar
/// of a namespace is one class, and with them every deployment is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ProxyClass {
    proxy_type: ProxyType,
    captures: bool,
    pub(crate) generator: Generator,
    sds: bool,
    domain: String,
    labels: Labels,
    /// The services the proxy runs instances of that are some rule's
    /// source, with the instances' labels.
    own: Vec<(String, Labels)>,
    /// The proxy's scope, when it may see less than the whole mesh
    /// (`scopes.rs`): proxies of one scope share a generation.
    pub(crate) scope: Option<ScopeKey>,
}

impl ProxyClass {
    /// `sources`: the hostnames some rule's source match names;
    /// `by_labels`: whether some match names its source by labels alone
    /// (then every proxy's labels and instances' labels count).
    pub(crate) fn of(
        proxy: &Proxy,
        own: &[ServiceInstance],
        sources: &HashSet<String>,
        by_labels: bool,
    ) -> Self {
        let mut own: Vec<_> = own
            .iter()
            .filter(|i| by_labels || sources.contains(&i.service.hostname))
            .map(|i| (i.service.hostname.clone(), i.labels.clone()))
            .collect();
        own.sort();
        own.dedup();
        ProxyClass {
            proxy_type: proxy.proxy_type,
            captures: proxy.capture.captures(),
            generator: proxy.generator,
            sds: proxy.sds,
            domain: proxy.domain.clone(),
            // Proxy labels only matter with an own instance of a source,
            // and to an edge proxy (gateways select it by them).
            labels: if own.is_empty() && !by_labels && proxy.proxy_type == ProxyType::Sidecar {
                Labels::new()
            } else {
                proxy.labels.clone()
            },
            own,
            scope: None,
        }
    }

    /// The class with `scope` (`None`: the whole mesh).
    /// Whether it is a class of edge proxies (ingress, router).
    pub(crate) fn is_edge(&self) -> bool {
        self.proxy_type.is_edge()
    }

    pub(crate) fn with_scope(self, scope: Option<ScopeKey>) -> ProxyClass {
        ProxyClass { scope, ..self }
    }

    /// What an Envoy's route configurations depend on: the class, its
    /// domain reduced to the namespace and only when some service lives
    /// in it (`namespaces`), since the namespace only decides which
    /// services' short names are domains. So the sidecars of the many
    /// namespaces that run no service of the mesh share one assembly.
    pub(crate) fn for_routes(&self, namespaces: &HashSet<String>) -> ProxyClass {
        let namespace = self.domain.split('.').next().unwrap_or_default();
        ProxyClass {
            // An edge proxy's namespace may decide which Gateway API
            // Gateways it serves.
            domain: if namespaces.contains(namespace) || self.proxy_type != ProxyType::Sidecar {
                namespace.to_string()
            } else {
                String::new()
            },
            ..self.clone()
        }
    }
}
