//! The xDS types this server serves, as an enum: push order, short names
//! and type URLs in one place. Envoy's five ([`XdsType::ALL`]) and
//! ztunnel's two ([`XdsType::AMBIENT`]).

/// The short names of the xDS types: Envoy's, in the order they are
/// pushed, then ztunnel's (workload addresses, authorizations).
pub const TYPES: [&str; 7] = ["CDS", "EDS", "LDS", "SRDS", "RDS", "WDS", "WADS"];

/// The short names of the types a proxy with node id `node_id` is
/// served: ztunnel's two (WDS, WADS) for a ztunnel; Envoy's five for an
/// edge proxy (a router or ingress: scopes are its alone); the four
/// others for any other proxy (a sidecar, a gRPC client).
///
/// ```
/// assert_eq!(pilot_ads::types_of("ztunnel~10.0.0.1~z.istio-system~istio-system.svc.cluster.local"), ["WDS", "WADS"]);
/// assert_eq!(pilot_ads::types_of("router~10.0.0.3~gw.edge~edge.svc.cluster.local").len(), 5);
/// assert_eq!(pilot_ads::types_of("sidecar~10.0.0.2~a.default~default.svc.cluster.local"), ["CDS", "EDS", "LDS", "RDS"]);
/// ```
pub fn types_of(node_id: &str) -> &'static [&'static str] {
    const UNSCOPED: [&str; 4] = ["CDS", "EDS", "LDS", "RDS"];
    if node_id.starts_with("ztunnel~") {
        &TYPES[XdsType::ALL.len()..]
    } else if node_id.starts_with("router~") || node_id.starts_with("ingress~") {
        &TYPES[..XdsType::ALL.len()]
    } else {
        &UNSCOPED
    }
}

/// One xDS resource type. [`XdsType::ALL`] is the push order: clusters
/// before their load assignments, listeners before the scopes and route
/// configurations they name, so nothing Envoy warms waits on something
/// not yet sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum XdsType {
    /// Clusters (CDS).
    Cluster,
    /// Cluster load assignments (EDS).
    Endpoint,
    /// Listeners (LDS).
    Listener,
    /// Scoped route configurations (SRDS): which route configuration an
    /// HTTP connection manager with scoped routes gives a request, by a
    /// key made from its headers (an edge proxy's, one per host).
    ScopedRoute,
    /// Route configurations (RDS).
    Route,
    /// ztunnel's workloads and services, `istio.workload.Address` (WDS).
    Address,
    /// ztunnel's authorization policies, `istio.security.Authorization`
    /// (WADS).
    Authorization,
}

impl XdsType {
    /// ztunnel's types, in the order a push sends them.
    pub const AMBIENT: [XdsType; 2] = [XdsType::Address, XdsType::Authorization];

    /// Envoy's types (a sidecar's, a gateway's, a gRPC client's), in push
    /// order.
    pub const ALL: [XdsType; 5] = [
        XdsType::Cluster,
        XdsType::Endpoint,
        XdsType::Listener,
        XdsType::ScopedRoute,
        XdsType::Route,
    ];

    /// `CDS`, `EDS`, `LDS`, `SRDS` or `RDS` (`WDS`, `WADS`).
    pub const fn short(self) -> &'static str {
        match self {
            XdsType::Cluster => "CDS",
            XdsType::Endpoint => "EDS",
            XdsType::Listener => "LDS",
            XdsType::ScopedRoute => "SRDS",
            XdsType::Route => "RDS",
            XdsType::Address => "WDS",
            XdsType::Authorization => "WADS",
        }
    }

    /// The type URL of its resources.
    pub const fn url(self) -> &'static str {
        match self {
            XdsType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            XdsType::Endpoint => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            XdsType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            XdsType::ScopedRoute => "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration",
            XdsType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            XdsType::Address => pilot_xds::ambient::proto::workload::ADDRESS_TYPE,
            XdsType::Authorization => "type.googleapis.com/istio.security.Authorization",
        }
    }

    /// The Envoy type of a type URL; `None` for a type this server does
    /// not serve Envoys (ztunnel's types included: [`XdsType::ambient_from_url`]).
    pub fn from_url(url: &str) -> Option<XdsType> {
        XdsType::ALL.into_iter().find(|t| t.url() == url)
    }

    /// ztunnel's type of a type URL; `None` for any other.
    pub fn ambient_from_url(url: &str) -> Option<XdsType> {
        XdsType::AMBIENT.into_iter().find(|t| t.url() == url)
    }

    /// Its place in [`XdsType::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// True for the types an empty first subscription means "everything"
    /// for (CDS, LDS and SRDS), whose state-of-the-world responses carry
    /// every resource; EDS and RDS are always subscribed by name.
    pub const fn wildcard_by_default(self) -> bool {
        matches!(self, XdsType::Cluster | XdsType::Listener | XdsType::ScopedRoute)
    }
}

impl std::fmt::Display for XdsType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.short())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_map_back_to_their_type_in_push_order() {
        for (i, t) in XdsType::ALL.into_iter().enumerate() {
            assert_eq!(t.index(), i);
            assert_eq!(XdsType::from_url(t.url()), Some(t));
        }
        assert_eq!(
            XdsType::from_url("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"),
            None
        );
        for (i, t) in XdsType::AMBIENT.into_iter().enumerate() {
            assert_eq!(t.index(), XdsType::ALL.len() + i);
            assert_eq!(XdsType::ambient_from_url(t.url()), Some(t));
            assert_eq!(XdsType::from_url(t.url()), None, "not an Envoy type");
        }
        let shorts: Vec<_> = XdsType::ALL
            .iter()
            .chain(&XdsType::AMBIENT)
            .map(|t| t.short())
            .collect();
        assert_eq!(shorts, TYPES);
    }
}
