//! The edges of the routing model: external services the mesh may call,
//! and the servers of edge proxies (ingress rules' and gateways').

use std::sync::Arc;

use pilot_model::{Labels, Protocol};

use super::{HttpMatch, HttpRoute, TcpRoute, TlsRoute};

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

/// One server of an edge proxy (an ingress or a gateway's router): a port,
/// what it serves there and how.
///
/// v1alpha2 IngressRules make one server per port, for proxies of type
/// ingress ([`selector`](Self::selector) none), with [`routes`](Self::routes)
/// to service ports. A `Gateway` makes one server per server of its spec,
/// for the proxies its selector picks, with
/// [`virtual_hosts`](Self::virtual_hosts) from the VirtualServices bound to
/// it. Servers of several gateways on one port are merged at generation,
/// per proxy.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IngressServer {
    /// The port it listens on.
    pub port: u16,
    /// What it speaks on the port (HTTP for ingress rules).
    pub protocol: Protocol,
    /// The port's name (empty for ingress rules).
    pub port_name: String,
    /// The gateway it belongs to, `namespace/name` (empty for ingress
    /// rules).
    pub gateway: String,
    /// The labels a proxy must carry to serve it; none: every proxy of
    /// type ingress (ingress rules).
    pub selector: Option<Labels>,
    /// The namespace a proxy must run in to serve it (a Gateway API
    /// Gateway's); none: any.
    pub namespace: Option<String>,
    /// The hosts it serves, each with the namespace it is restricted to
    /// (`*`, any namespace, for ingress rules).
    pub hosts: Vec<ServerHost>,
    /// TLS, when it terminates or passes TLS through.
    pub tls: Option<ServerTls>,
    /// Whether plain HTTP requests are answered with a redirect to HTTPS.
    pub https_redirect: bool,
    /// An ingress rule's routes, first match wins, for any host.
    pub routes: Vec<IngressRoute>,
    /// A gateway's virtual hosts: the HTTP routes of the VirtualServices
    /// bound to it, per host its hosts and theirs share. Shared with the
    /// models compiled from this one where the routes attached there did
    /// not change (`incremental.rs`).
    pub virtual_hosts: Vec<Arc<GatewayHost>>,
    /// A TCP or TLS-terminating gateway server's TCP routes: those of the
    /// VirtualServices bound to it whose hosts meet its hosts, in order.
    pub tcp_routes: Vec<TcpRoute>,
    /// A TLS passthrough server's TLS routes, as its TCP routes, each
    /// match's `sniHosts` (the hosts both name when it has none) choosing
    /// connections by their SNI.
    pub tls_routes: Vec<TlsRoute>,
    /// The client certificate the proxies serving it present to backends
    /// they reach over TLS under a BackendTLSPolicy: a Gateway API
    /// Gateway's `tls.backend.clientCertificateRef`, as the credential
    /// name its Secret is sent under over SDS
    /// (`kubernetes://<namespace>/<name>`).
    pub backend_client_credential: Option<String>,
}

impl IngressServer {
    /// A server on `port` speaking plain HTTP, serving nothing yet.
    pub fn new(port: u16) -> Self {
        IngressServer {
            port,
            protocol: Protocol::Http,
            port_name: String::new(),
            gateway: String::new(),
            selector: None,
            namespace: None,
            hosts: vec![ServerHost::any("*")],
            tls: None,
            https_redirect: false,
            routes: Vec::new(),
            virtual_hosts: Vec::new(),
            tcp_routes: Vec::new(),
            tls_routes: Vec::new(),
            backend_client_credential: None,
        }
    }

    /// Whether TLS ends here (SIMPLE or MUTUAL): then the server's routes
    /// are its own, not shared with the port's other servers.
    pub fn terminates_tls(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| {
            !matches!(
                t.mode,
                ServerTlsMode::Passthrough | ServerTlsMode::AutoPassthrough
            )
        })
    }
}

/// One host of an edge server: the name clients ask for, and the
/// namespace it is restricted to, as a `Gateway` server's `hosts` entry
/// says it (`namespace/dnsName`):
///
/// - Only the VirtualServices of that namespace bind through it.
/// - An `AUTO_PASSTHROUGH` server exposes only the services of that
///   namespace (a service's namespace is the second label of its
///   hostname).
/// - SNI and `Host` matching read the name alone.
///
/// ```
/// use pilot_routing::ServerHost;
/// assert_eq!(ServerHost::parse("ns1/*", "edge"), ServerHost::in_namespace("ns1", "*"));
/// assert_eq!(ServerHost::parse("./a.example.com", "edge"), ServerHost::in_namespace("edge", "a.example.com"));
/// assert_eq!(ServerHost::parse("*/a.example.com", "edge"), ServerHost::any("a.example.com"));
/// assert_eq!(ServerHost::parse("a.example.com", "edge"), ServerHost::any("a.example.com"));
/// assert!(ServerHost::parse("ns1/*", "edge").admits("ns1"));
/// assert!(!ServerHost::parse("ns1/*", "edge").admits("ns2"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct ServerHost {
    /// The namespace it is restricted to; `None`: any (`*/host`, or the
    /// host alone).
    pub namespace: Option<String>,
    /// The DNS name (`bookinfo.example.com`, `*.example.com`, `*`) or an
    /// address.
    pub host: String,
}

impl ServerHost {
    /// `host` in any namespace.
    pub fn any(host: impl Into<String>) -> Self {
        ServerHost {
            namespace: None,
            host: host.into(),
        }
    }

    /// `host` restricted to `namespace`.
    pub fn in_namespace(namespace: impl Into<String>, host: impl Into<String>) -> Self {
        ServerHost {
            namespace: Some(namespace.into()),
            host: host.into(),
        }
    }

    /// A `Gateway` server's `hosts` entry: `host` and `*/host` are any
    /// namespace's, `./host` the gateway's (`gateway_namespace`),
    /// `ns/host` namespace `ns`'s.
    pub fn parse(text: &str, gateway_namespace: &str) -> Self {
        match text.split_once('/') {
            None => ServerHost::any(text),
            Some(("*", host)) => ServerHost::any(host),
            Some((".", host)) => ServerHost::in_namespace(gateway_namespace, host),
            Some((namespace, host)) => ServerHost::in_namespace(namespace, host),
        }
    }

    /// Whether objects (VirtualServices, services) of `namespace` are
    /// taken through it.
    pub fn admits(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|own| own == namespace)
    }
}

impl std::fmt::Display for ServerHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace.as_deref().unwrap_or("*"), self.host)
    }
}

/// One host of a gateway server and the HTTP routes for it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GatewayHost {
    /// The domain requests name (`bookinfo.example.com`, `*.example.com`,
    /// `*`).
    pub host: String,
    /// Its routes, first match wins.
    pub routes: Vec<HttpRoute>,
}

/// TLS on an edge server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ServerTls {
    /// Terminated (and how), or passed through.
    pub mode: ServerTlsMode,
    /// A secret holding the certificate and key, fetched over SDS.
    pub credential_name: Option<String>,
    /// Path of the certificate chain (instead of a secret).
    pub server_certificate: Option<String>,
    /// Path of the private key.
    pub private_key: Option<String>,
    /// Path of the CA certificates that verify clients (MUTUAL).
    pub ca_certificates: Option<String>,
    /// Names a client certificate must carry (MUTUAL).
    pub subject_alt_names: Vec<String>,
    /// The SDS secret (a validation context) of the certificate
    /// authorities that verify clients (MUTUAL), when neither a file nor
    /// the credential's `-cacert` secret holds them: a Gateway API
    /// Gateway's `tls.frontend` ConfigMaps (`configmap://ns/names`).
    pub client_ca_secret: Option<String>,
    /// Clients without a valid certificate are let in (MUTUAL): the
    /// Gateway API's `AllowInsecureFallback`.
    pub client_certificate_optional: bool,
}

impl ServerTls {
    /// TLS terminated with the certificate of secret `name`.
    pub fn credential(name: impl Into<String>) -> Self {
        ServerTls {
            credential_name: Some(name.into()),
            ..Default::default()
        }
    }
}

/// How an edge server treats TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ServerTlsMode {
    /// Terminated with the server's certificate.
    #[default]
    Simple,
    /// Terminated, and clients must present a certificate.
    Mutual,
    /// Forwarded unterminated, by SNI.
    Passthrough,
    /// Forwarded unterminated to the service cluster its SNI names
    /// (`outbound_.<port>_.<subset>_.<host>`, the SNI a sidecar sends with
    /// mutual TLS), without a VirtualService.
    AutoPassthrough,
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
