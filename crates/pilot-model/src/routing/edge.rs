//! The edges of the routing model: external services the mesh may call,
//! and the ingress's servers.

use crate::Protocol;

use super::HttpMatch;

/// A service outside the mesh that proxies may call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExternalService {
    /// Its host: a domain, a wildcard domain, an address or a CIDR block.
    pub host: String,
    /// Its ports.
    pub ports: Vec<ExternalPort>,
    /// How its address is found.
    pub resolution: Resolution,
}

/// A port of an external service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExternalPort {
    /// The port.
    pub number: u16,
    /// What it speaks.
    pub protocol: Protocol,
}

/// How an external service's address is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Resolution {
    /// By DNS from its host.
    Dns,
    /// None: the connection's original destination is used (wildcard
    /// hosts, addresses, CIDR blocks).
    Passthrough,
}

impl Resolution {
    /// How `host` is resolved: passthrough for a wildcard, an address or a
    /// CIDR block, DNS otherwise.
    pub fn of(host: &str) -> Resolution {
        if host.contains('*') || host.contains('/') || host.parse::<std::net::IpAddr>().is_ok() {
            Resolution::Passthrough
        } else {
            Resolution::Dns
        }
    }
}

/// One port of the ingress: what it serves and how.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IngressServer {
    /// The port it listens on.
    pub port: u16,
    /// The secret holding its TLS certificate, if it terminates TLS.
    pub tls_secret: Option<String>,
    /// Its routes, first match wins.
    pub routes: Vec<IngressRoute>,
}

/// A route of the ingress to a service port.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IngressRoute {
    /// The route's name (`namespace/name` of its object).
    pub name: String,
    /// What requests it takes (the default: every request).
    pub request: HttpMatch,
    /// The service's hostname.
    pub host: String,
    /// The service port.
    pub port: PortSelector,
}

/// A service port, by number or by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PortSelector {
    /// By number.
    Number(u16),
    /// By name (resolved against the registry).
    Name(String),
}
