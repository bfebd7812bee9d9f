//! TCP and TLS routes of the routing model: connections routed by
//! address, port and SNI rather than by request.

use pilot_model::Labels;

use super::WeightedDestination;

/// A TCP route: connections any one of whose matches admits go to the
/// destinations by weight.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct TcpRoute {
    /// The route's name (`namespace/name` of its object).
    pub name: String,
    /// Any one admits a connection; none: every connection.
    pub matches: Vec<L4Match>,
    /// Where admitted connections go.
    pub destinations: Vec<WeightedDestination>,
}

/// A TLS route: as a TCP route, also matching the client's SNI.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct TlsRoute {
    /// The route's name (`namespace/name` of its object).
    pub name: String,
    /// Any one admits a connection; none: every connection.
    pub matches: Vec<L4Match>,
    /// Where admitted connections go.
    pub destinations: Vec<WeightedDestination>,
}

/// What a connection must be like, all conditions at once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct L4Match {
    /// Server names (TLS only; wildcards allowed).
    pub sni_hosts: Vec<String>,
    /// Destination addresses or CIDR blocks.
    pub destination_subnets: Vec<String>,
    /// The port the connection came in on.
    pub port: Option<u16>,
    /// The source: a proxy whose workload carries these labels.
    pub source_labels: Labels,
    /// The source: a proxy in this namespace.
    pub source_namespace: Option<String>,
    /// The gateways the match applies to (empty: the route's own).
    pub gateways: Vec<String>,
}
