//! The service model: services, their ports, the instances behind them and
//! the labels that tell versions apart.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The protocol a service port speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
#[non_exhaustive]
pub enum Protocol {
    /// HTTP/1.1.
    Http,
    /// HTTP/2 in clear text.
    Http2,
    /// gRPC (HTTP/2).
    Grpc,
    /// TLS-wrapped HTTP, passed through as opaque TCP.
    Https,
    /// Opaque TCP.
    Tcp,
    /// UDP.
    Udp,
    /// MongoDB wire protocol over TCP.
    Mongo,
    /// Redis protocol over TCP.
    Redis,
}

impl Protocol {
    /// True for protocols routed at layer 7 (HTTP, HTTP/2, gRPC).
    pub fn is_http(self) -> bool {
        matches!(self, Protocol::Http | Protocol::Http2 | Protocol::Grpc)
    }

    /// The protocol a port name implies, as Istio reads it: the part before
    /// the first `-` (`http-web`, `grpc`, `redis-cache`); TCP when unknown.
    ///
    /// ```
    /// use pilot_model::Protocol;
    /// assert_eq!(Protocol::from_port_name("http2-api"), Protocol::Http2);
    /// assert_eq!(Protocol::from_port_name("metrics"), Protocol::Tcp);
    /// ```
    pub fn from_port_name(name: &str) -> Protocol {
        let prefix = name.split('-').next().unwrap_or_default();
        match prefix.to_ascii_lowercase().as_str() {
            "http" => Protocol::Http,
            "http2" => Protocol::Http2,
            "grpc" => Protocol::Grpc,
            "https" => Protocol::Https,
            "udp" => Protocol::Udp,
            "mongo" => Protocol::Mongo,
            "redis" => Protocol::Redis,
            _ => Protocol::Tcp,
        }
    }
}

/// A named port of a service.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Port {
    /// The port's name, unique within the service.
    pub name: String,
    /// The port number.
    pub port: u16,
    /// What it speaks.
    pub protocol: Protocol,
}

impl Port {
    /// A port.
    pub fn new(name: impl Into<String>, port: u16, protocol: Protocol) -> Self {
        Port {
            name: name.into(),
            port,
            protocol,
        }
    }
}

/// A service: a hostname clients use, reachable on some ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Service {
    /// Fully qualified hostname, e.g. `reviews.default.svc.cluster.local`.
    pub hostname: String,
    /// The virtual IP, if the platform assigns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// The ports the service listens on.
    pub ports: Vec<Port>,
    /// For a service that is an alias of an external host, that host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
    /// Service accounts that the service's instances run as.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    /// The namespaces the service is visible to (the Kubernetes
    /// annotation `networking.istio.io/exportTo`, a ServiceEntry's
    /// `exportTo`): `*` every namespace, `.` its own, `~` none, or names;
    /// empty: the mesh's default
    /// (`pilot_api::networking::exported_to`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
    /// How a proxy finds the service's endpoints (its instances unless
    /// said otherwise).
    #[serde(default, skip_serializing_if = "ServiceResolution::is_instances")]
    pub resolution: ServiceResolution,
    /// True for a service outside the mesh (a ServiceEntry's
    /// `MESH_EXTERNAL`): its endpoints run no sidecar.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mesh_external: bool,
    /// When the object that declares the service was created, if known
    /// (a ServiceEntry's or a Kubernetes Service's `creationTimestamp`): of
    /// two services that would take one listener and cannot be told apart
    /// there, the older has it, as Istio orders services by age.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<std::time::SystemTime>,
    /// The namespace of the object that declares it (a ServiceEntry's),
    /// when its hostname does not tell (`<name>.<namespace>.svc...` does):
    /// see [`Service::namespace`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// How a proxy finds a service's endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ServiceResolution {
    /// The registry's instances, sent to the proxy (EDS).
    #[default]
    Instances,
    /// None: a connection goes to the address its client asked for (the
    /// original destination).
    Passthrough,
    /// The proxy resolves these names (or addresses) and balances over
    /// every address they have (Envoy's `STRICT_DNS`).
    Dns(Vec<DnsEndpoint>),
    /// The proxy resolves these names and connects to one address at a
    /// time (Envoy's `LOGICAL_DNS`: only the first endpoint is used).
    DnsRoundRobin(Vec<DnsEndpoint>),
}

impl ServiceResolution {
    /// True for [`ServiceResolution::Instances`].
    pub fn is_instances(&self) -> bool {
        *self == ServiceResolution::Instances
    }

    /// The names a proxy resolves, for the DNS resolutions.
    pub fn dns_endpoints(&self) -> Option<&[DnsEndpoint]> {
        match self {
            ServiceResolution::Dns(endpoints) | ServiceResolution::DnsRoundRobin(endpoints) => {
                Some(endpoints)
            }
            _ => None,
        }
    }
}

/// An endpoint a proxy resolves by DNS: a name (or an address), with the
/// port to use per service port name when it differs from the service's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DnsEndpoint {
    /// The name (or address) resolved.
    pub address: String,
    /// Ports by service port name, where they differ.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ports: BTreeMap<String, u16>,
    /// The endpoint's labels.
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Its load-balancing weight (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
}

impl DnsEndpoint {
    /// An endpoint at `address`, on the service's ports, no labels.
    pub fn new(address: impl Into<String>) -> Self {
        DnsEndpoint {
            address: address.into(),
            ports: BTreeMap::new(),
            labels: Labels::new(),
            weight: None,
        }
    }

    /// The port this endpoint serves service port `port` on.
    pub fn port_for(&self, port: &Port) -> u16 {
        self.ports.get(&port.name).copied().unwrap_or(port.port)
    }
}

impl Service {
    /// A service with a hostname and ports, no address.
    pub fn new(hostname: impl Into<String>, ports: Vec<Port>) -> Self {
        Service {
            hostname: hostname.into(),
            address: None,
            ports,
            external_name: None,
            service_accounts: Vec::new(),
            export_to: Vec::new(),
            resolution: ServiceResolution::Instances,
            mesh_external: false,
            created: None,
            namespace: None,
        }
    }

    /// Its namespace: the one set ([`Service::namespace`]'s field), else
    /// the second label of a Kubernetes hostname
    /// (`reviews.default.svc.cluster.local` is in `default`); `None` for a
    /// hostname such as `api.example.com` with none set.
    ///
    /// ```
    /// use pilot_model::Service;
    /// assert_eq!(Service::new("reviews.default.svc.cluster.local", vec![]).namespace(), Some("default"));
    /// assert_eq!(Service::new("api.example.com", vec![]).namespace(), None);
    /// ```
    pub fn namespace(&self) -> Option<&str> {
        if let Some(namespace) = &self.namespace {
            return Some(namespace);
        }
        let mut labels = self.hostname.split('.');
        let namespace = labels.nth(1)?;
        (labels.next() == Some("svc")).then_some(namespace)
    }

    /// The same service, declared in `namespace`.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The port named `name`.
    pub fn port(&self, name: &str) -> Option<&Port> {
        self.ports.iter().find(|p| p.name == name)
    }

    /// The port with number `number`.
    pub fn port_by_number(&self, number: u16) -> Option<&Port> {
        self.ports.iter().find(|p| p.port == number)
    }

    /// True for an alias of an external host.
    pub fn is_external(&self) -> bool {
        self.external_name.is_some()
    }
}

/// One network address an instance serves a service port on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct NetworkEndpoint {
    /// The instance's IP.
    pub address: IpAddr,
    /// The port on that IP (may differ from the service port).
    pub port: u16,
    /// The service port this endpoint serves.
    pub service_port: Port,
}

impl NetworkEndpoint {
    /// `address:port`, serving `service_port`.
    pub fn new(address: IpAddr, port: u16, service_port: Port) -> Self {
        NetworkEndpoint {
            address,
            port,
            service_port,
        }
    }
}

/// One instance of a service: an endpoint, the service, and the instance's
/// labels (`version=v2`), zone and identity.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceInstance {
    /// Where the instance listens.
    pub endpoint: NetworkEndpoint,
    /// The service it belongs to.
    pub service: Arc<Service>,
    /// Its labels, e.g. `version=v2`.
    pub labels: Labels,
    /// Its availability zone (locality), if known.
    pub availability_zone: Option<String>,
    /// The service account it runs as, if known.
    pub service_account: Option<String>,
    /// Its load-balancing weight among the service's instances (1 when
    /// absent).
    pub weight: Option<u32>,
    /// The workload it is, when its registry knows it (`workload.rs`):
    /// shared by every instance of the workload.
    pub workload: Option<Arc<crate::Workload>>,
}

impl ServiceInstance {
    /// An instance of `service` at `endpoint` with `labels`; no zone or
    /// service account (set them with [`with_availability_zone`](Self::with_availability_zone)
    /// and [`with_service_account`](Self::with_service_account)).
    pub fn new(service: Arc<Service>, endpoint: NetworkEndpoint, labels: Labels) -> Self {
        ServiceInstance {
            endpoint,
            service,
            labels,
            availability_zone: None,
            service_account: None,
            weight: None,
            workload: None,
        }
    }

    /// The same instance of workload `workload` (its service account
    /// becomes the workload's unless one is set).
    pub fn with_workload(mut self, workload: Arc<crate::Workload>) -> Self {
        if self.service_account.is_none() {
            self.service_account = Some(workload.service_account.clone());
        }
        self.workload = Some(workload);
        self
    }

    /// The same instance with load-balancing weight `weight`.
    pub fn with_weight(mut self, weight: impl Into<Option<u32>>) -> Self {
        self.weight = weight.into();
        self
    }

    /// The same instance in availability zone `zone` (a `String`, or an
    /// `Option<String>` where the zone may be unknown).
    pub fn with_availability_zone(mut self, zone: impl Into<Option<String>>) -> Self {
        self.availability_zone = zone.into();
        self
    }

    /// The same instance running as `account` (a `String`, or an
    /// `Option<String>`).
    pub fn with_service_account(mut self, account: impl Into<Option<String>>) -> Self {
        self.service_account = account.into();
        self
    }

    /// Whether a lookup for `port_names` (empty: any port) and label sets
    /// `labels` (empty: any instance) returns this instance, as
    /// [`ServiceDiscovery::instances`](crate::ServiceDiscovery::instances) defines it.
    pub fn selected_by(&self, port_names: &[&str], labels: &[Labels]) -> bool {
        (port_names.is_empty() || port_names.contains(&self.endpoint.service_port.name.as_str()))
            && self.labels.matches_any(labels)
    }
}

/// A set of `key=value` labels, ordered by key.
///
/// A set of labels selects an instance when it is a subset of the
/// instance's labels:
///
/// ```
/// use pilot_model::Labels;
/// let instance = Labels::from_pairs([("app", "reviews"), ("version", "v2")]);
/// assert!(Labels::from_pairs([("version", "v2")]).is_subset_of(&instance));
/// assert!(Labels::new().is_subset_of(&instance));
/// assert!(!Labels::from_pairs([("version", "v1")]).is_subset_of(&instance));
/// assert_eq!(instance.to_string(), "app=reviews,version=v2");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Labels(pub BTreeMap<String, String>);

impl Labels {
    /// No labels.
    pub fn new() -> Self {
        Self::default()
    }

    /// Labels from `(key, value)` pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Labels(pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// True when every label here is also in `other` with the same value.
    pub fn is_subset_of(&self, other: &Labels) -> bool {
        self.0.iter().all(|(k, v)| other.0.get(k) == Some(v))
    }

    /// True when `self` has any of `selectors` as a subset; an empty list of
    /// selectors matches everything.
    pub fn matches_any(&self, selectors: &[Labels]) -> bool {
        selectors.is_empty() || selectors.iter().any(|s| s.is_subset_of(self))
    }

    /// True when there are no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Labels {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        Labels::from_pairs(iter)
    }
}
