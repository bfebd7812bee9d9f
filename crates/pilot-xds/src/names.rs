//! Stable, parseable names for generated resources, and the names they
//! are made of: a service hostname's namespace, a subset's name, the SNI
//! of mutual TLS to a service port.

use std::fmt;
use std::str::FromStr;

use pilot_model::Labels;
use pilot_routing::RoutingModel;

use crate::XdsError;

/// Which way a cluster carries traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// From this proxy's application to a service.
    Outbound,
    /// From the mesh to this proxy's own application.
    Inbound,
}

/// A cluster name: `direction|port|subset|hostname`, as Istio writes it,
/// e.g. `outbound|9080|version=v2|reviews.default.svc.cluster.local`. The
/// subset is the label selector of a version (empty for the whole service).
///
/// ```
/// use pilot_xds::{ClusterName, Direction};
/// let name: ClusterName = "outbound|9080|version=v2|reviews.default.svc.cluster.local".parse().unwrap();
/// assert_eq!(name.direction, Direction::Outbound);
/// assert_eq!(name.subset.get("version"), Some("v2"));
/// assert_eq!(name.to_string().parse::<ClusterName>().unwrap(), name);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterName {
    /// Outbound or inbound.
    pub direction: Direction,
    /// The service port.
    pub port: u16,
    /// The subset's labels (empty: every instance).
    pub subset: Labels,
    /// The service hostname.
    pub hostname: String,
}

impl ClusterName {
    /// The outbound cluster of a service port (or of one of its subsets).
    pub fn outbound(hostname: &str, port: u16, subset: Labels) -> Self {
        ClusterName {
            direction: Direction::Outbound,
            port,
            subset,
            hostname: hostname.to_string(),
        }
    }

    /// The inbound cluster of one of the proxy's own service ports.
    pub fn inbound(hostname: &str, port: u16) -> Self {
        ClusterName {
            direction: Direction::Inbound,
            port,
            subset: Labels::new(),
            hostname: hostname.to_string(),
        }
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let direction = match self.direction {
            Direction::Outbound => "outbound",
            Direction::Inbound => "inbound",
        };
        write!(f, "{direction}|{}|{}|{}", self.port, self.subset, self.hostname)
    }
}

impl FromStr for ClusterName {
    type Err = XdsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| XdsError::BadName {
            name: s.to_string(),
            reason: reason.to_string(),
        };
        let parts: Vec<&str> = s.split('|').collect();
        let [direction, port, subset, hostname] = parts.as_slice() else {
            return Err(bad("expected direction|port|subset|hostname"));
        };
        let direction = match *direction {
            "outbound" => Direction::Outbound,
            "inbound" => Direction::Inbound,
            _ => return Err(bad("direction is not outbound or inbound")),
        };
        let port = port.parse().map_err(|_| bad("port is not a number"))?;
        let subset = subset
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                pair.split_once('=')
                    .ok_or_else(|| bad("subset is not key=value pairs"))
            })
            .collect::<Result<Labels, _>>()?;
        if hostname.is_empty() {
            return Err(bad("hostname is empty"));
        }
        Ok(ClusterName {
            direction,
            port,
            subset,
            hostname: hostname.to_string(),
        })
    }
}

/// The name of the outbound cluster of `hostname`'s `port` (and `subset`):
/// `ClusterName::outbound(hostname, port, subset).to_string()` without
/// cloning the subset, in one allocation.
pub(crate) fn outbound_cluster(hostname: &str, port: u16, subset: &Labels) -> String {
    use fmt::Write as _;
    let mut name = String::with_capacity(16 + hostname.len() + 24 * subset.0.len());
    // Writing to a String cannot fail.
    let _ = write!(name, "outbound|{port}|{subset}|{hostname}");
    name
}

/// The route configuration of an outbound HTTP port: its number.
pub fn route_config_name(port: u16) -> String {
    port.to_string()
}

/// The namespace of a service's hostname (its second label), if it has one.
pub fn host_namespace(hostname: &str) -> Option<&str> {
    // The second label (what `split('.').nth(1)` gives), found byte by
    // byte: every class of proxies asks it of every service.
    let dot = |s: &str| s.bytes().position(|b| b == b'.');
    let rest = &hostname[dot(hostname)? + 1..];
    Some(&rest[..dot(rest).unwrap_or(rest.len())])
}

/// The SNI a sidecar sends to `hostname`'s `port` (its subset named
/// `subset`, empty for the whole service) when it originates mutual TLS,
/// and the name of an edge proxy's SNI-DNAT cluster for it:
/// `outbound_.<port>_.<subset>_.<hostname>`.
pub(crate) fn sni(hostname: &str, port: u16, subset: &str) -> String {
    format!("outbound_.{port}_.{subset}_.{hostname}")
}

/// The name of the model's subset of `hostname` selected by `labels`
/// (empty for the whole service).
pub(crate) fn subset_name<'a>(model: &'a RoutingModel, hostname: &str, labels: &Labels) -> &'a str {
    if labels.is_empty() {
        return "";
    }
    model
        .destination(hostname)
        .and_then(|d| d.subsets.iter().find(|s| &s.labels == labels))
        .map(|s| s.name.as_str())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_garbage() {
        let name = ClusterName::outbound("a.b", 80, Labels::from_pairs([("version", "v1"), ("zone", "x")]));
        assert_eq!(name.to_string(), "outbound|80|version=v1,zone=x|a.b");
        assert_eq!(name.to_string().parse::<ClusterName>().unwrap(), name);
        assert_eq!(
            outbound_cluster("a.b", 80, &name.subset),
            "outbound|80|version=v1,zone=x|a.b"
        );
        assert_eq!(outbound_cluster("a.b", 80, &Labels::new()), "outbound|80||a.b");
        let inbound = ClusterName::inbound("a.b", 9080);
        assert_eq!(inbound.to_string(), "inbound|9080||a.b");
        assert_eq!(inbound.to_string().parse::<ClusterName>().unwrap(), inbound);
        for bad in [
            "outbound|80|a.b",
            "sideways|80||a",
            "outbound|x||a",
            "outbound|80|v|a",
            "outbound|80||",
        ] {
            assert!(bad.parse::<ClusterName>().is_err(), "{bad}");
        }
    }
}
