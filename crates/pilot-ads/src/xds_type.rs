//! The xDS types this server serves, as an enum: push order, short names
//! and type URLs in one place.

/// The xDS types, in the order they are pushed.
pub const TYPES: [&str; 4] = ["CDS", "EDS", "LDS", "RDS"];

/// One xDS resource type. [`XdsType::ALL`] is the push order: clusters
/// before their load assignments, listeners before their route
/// configurations, so nothing Envoy warms waits on something not yet sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum XdsType {
    /// Clusters (CDS).
    Cluster,
    /// Cluster load assignments (EDS).
    Endpoint,
    /// Listeners (LDS).
    Listener,
    /// Route configurations (RDS).
    Route,
}

impl XdsType {
    /// Every type, in push order.
    pub const ALL: [XdsType; 4] = [
        XdsType::Cluster,
        XdsType::Endpoint,
        XdsType::Listener,
        XdsType::Route,
    ];

    /// `CDS`, `EDS`, `LDS` or `RDS`.
    pub const fn short(self) -> &'static str {
        match self {
            XdsType::Cluster => "CDS",
            XdsType::Endpoint => "EDS",
            XdsType::Listener => "LDS",
            XdsType::Route => "RDS",
        }
    }

    /// The type URL of its resources.
    pub const fn url(self) -> &'static str {
        match self {
            XdsType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            XdsType::Endpoint => "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            XdsType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            XdsType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        }
    }

    /// The type of a type URL; `None` for a type this server does not
    /// serve.
    pub fn from_url(url: &str) -> Option<XdsType> {
        XdsType::ALL.into_iter().find(|t| t.url() == url)
    }

    /// Its place in [`XdsType::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// True for the types an empty first subscription means "everything"
    /// for (CDS and LDS); EDS and RDS are always subscribed by name.
    pub const fn wildcard_by_default(self) -> bool {
        matches!(self, XdsType::Cluster | XdsType::Listener)
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
        let shorts: Vec<_> = XdsType::ALL.iter().map(|t| t.short()).collect();
        assert_eq!(shorts, TYPES);
    }
}
