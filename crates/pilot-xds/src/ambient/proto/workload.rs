//! `istio.workload`: an [`Address`] is a [`Workload`] or a [`Service`].
//! Type URL [`ADDRESS_TYPE`]. A workload is named by its uid, a service by
//! `<namespace>/<hostname>`.

/// The type URL of [`Address`] resources.
pub const ADDRESS_TYPE: &str = "type.googleapis.com/istio.workload.Address";

/// A workload or a service: one delta xDS resource.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Address {
    /// Which of the two it is.
    #[prost(oneof = "address::Type", tags = "1, 2")]
    pub r#type: Option<address::Type>,
}

/// [`Address`]'s variants.
pub mod address {
    /// A workload or a service.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Type {
        /// A workload.
        #[prost(message, tag = "1")]
        Workload(Box<super::Workload>),
        /// A service.
        #[prost(message, tag = "2")]
        Service(Box<super::Service>),
    }
}

/// A service: its addresses (VIPs) and ports; its endpoints are the
/// workloads whose `services` name it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Service {
    /// Its name (the hostname's first label for a Kubernetes Service).
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its namespace.
    #[prost(string, tag = "2")]
    pub namespace: String,
    /// Its hostname.
    #[prost(string, tag = "3")]
    pub hostname: String,
    /// Its virtual addresses.
    #[prost(message, repeated, tag = "4")]
    pub addresses: Vec<NetworkAddress>,
    /// Its ports (target ports are per workload).
    #[prost(message, repeated, tag = "5")]
    pub ports: Vec<Port>,
    /// The identities its workloads may present.
    #[prost(string, repeated, tag = "6")]
    pub subject_alt_names: Vec<String>,
    /// Its waypoint (none: pilot serves no waypoints yet).
    #[prost(message, optional, tag = "7")]
    pub waypoint: Option<GatewayAddress>,
    /// Locality-aware load balancing.
    #[prost(message, optional, tag = "8")]
    pub load_balancing: Option<LoadBalancing>,
    /// `IPFamilies`: 0 automatic, 1 IPv4 only, 2 IPv6 only, 3 dual.
    #[prost(int32, tag = "9")]
    pub ip_families: i32,
}

/// Locality-aware load balancing of a service (sent only when configured).
#[derive(Clone, PartialEq, prost::Message)]
pub struct LoadBalancing {
    /// Scopes to prefer, in order (`LoadBalancing.Scope`).
    #[prost(int32, repeated, tag = "1")]
    pub routing_preference: Vec<i32>,
    /// `LoadBalancing.Mode`.
    #[prost(int32, tag = "2")]
    pub mode: i32,
    /// `LoadBalancing.HealthPolicy`.
    #[prost(int32, tag = "3")]
    pub health_policy: i32,
}

/// A workload: one pod, VM or registered endpoint.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Workload {
    /// Its name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its namespace.
    #[prost(string, tag = "2")]
    pub namespace: String,
    /// Its IPs, 4 or 16 bytes each.
    #[prost(bytes = "vec", repeated, tag = "3")]
    pub addresses: Vec<Vec<u8>>,
    /// Its network.
    #[prost(string, tag = "4")]
    pub network: String,
    /// [`TunnelProtocol`]: how it is reached.
    #[prost(enumeration = "TunnelProtocol", tag = "5")]
    pub tunnel_protocol: i32,
    /// The trust domain of its identity.
    #[prost(string, tag = "6")]
    pub trust_domain: String,
    /// The service account of its identity.
    #[prost(string, tag = "7")]
    pub service_account: String,
    /// Its waypoint (none: pilot serves no waypoints yet).
    #[prost(message, optional, tag = "8")]
    pub waypoint: Option<GatewayAddress>,
    /// The node it runs on.
    #[prost(string, tag = "9")]
    pub node: String,
    /// Its canonical service name (label `service.istio.io/canonical-name`,
    /// else `app`, else its name).
    #[prost(string, tag = "10")]
    pub canonical_name: String,
    /// Its canonical revision (label `service.istio.io/canonical-revision`,
    /// else `version`, else `latest`).
    #[prost(string, tag = "11")]
    pub canonical_revision: String,
    /// [`WorkloadType`].
    #[prost(enumeration = "WorkloadType", tag = "12")]
    pub workload_type: i32,
    /// The name of what made it (a Deployment's), else its own.
    #[prost(string, tag = "13")]
    pub workload_name: String,
    /// Reached at its own ports over HBONE without a sidecar's translation.
    #[prost(bool, tag = "14")]
    pub native_tunnel: bool,
    /// The policies that apply to it, `<ns>/<name>` (ztunnel also finds
    /// namespace- and mesh-wide ones by their scope).
    #[prost(string, repeated, tag = "16")]
    pub authorization_policies: Vec<String>,
    /// [`WorkloadStatus`].
    #[prost(enumeration = "WorkloadStatus", tag = "17")]
    pub status: i32,
    /// Its cluster.
    #[prost(string, tag = "18")]
    pub cluster_id: String,
    /// A gateway in front of its network (none: one network).
    #[prost(message, optional, tag = "19")]
    pub network_gateway: Option<GatewayAddress>,
    /// Its unique id: the resource's name.
    #[prost(string, tag = "20")]
    pub uid: String,
    /// Its hostname, for a workload reached by name rather than address.
    #[prost(string, tag = "21")]
    pub hostname: String,
    /// The services it backs, `<ns>/<hostname>` to their ports.
    #[prost(map = "string, message", tag = "22")]
    pub services: std::collections::HashMap<String, PortList>,
    /// Its locality.
    #[prost(message, optional, tag = "24")]
    pub locality: Option<Locality>,
    /// `NetworkMode`: 0 standard, 1 host network.
    #[prost(int32, tag = "25")]
    pub network_mode: i32,
}

/// Region, zone and subzone.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Locality {
    /// The region.
    #[prost(string, tag = "1")]
    pub region: String,
    /// The zone.
    #[prost(string, tag = "2")]
    pub zone: String,
    /// The subzone.
    #[prost(string, tag = "3")]
    pub subzone: String,
}

/// The ports of one service a workload serves.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PortList {
    /// Service port to target port.
    #[prost(message, repeated, tag = "1")]
    pub ports: Vec<Port>,
}

/// A service port and the workload port it reaches.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Port {
    /// The service's port.
    #[prost(uint32, tag = "1")]
    pub service_port: u32,
    /// The workload's port (0: the same).
    #[prost(uint32, tag = "2")]
    pub target_port: u32,
    /// `AppProtocol`: 0 unknown, 1 HTTP/1.1, 2 HTTP/2, 3 gRPC, 4 TCP, 5 TLS.
    #[prost(int32, tag = "3")]
    pub app_protocol: i32,
}

/// A gateway or waypoint: by hostname or by address.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GatewayAddress {
    /// Where it is.
    #[prost(oneof = "gateway_address::Destination", tags = "1, 2")]
    pub destination: Option<gateway_address::Destination>,
    /// Its HBONE port.
    #[prost(uint32, tag = "3")]
    pub hbone_mtls_port: u32,
}

/// [`GatewayAddress`]'s variants.
pub mod gateway_address {
    /// By name or by address.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Destination {
        /// A service by namespace and hostname.
        #[prost(message, tag = "1")]
        Hostname(super::NamespacedHostname),
        /// An address in a network.
        #[prost(message, tag = "2")]
        Address(super::NetworkAddress),
    }
}

/// An IP in a network.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetworkAddress {
    /// The network (empty: the default one).
    #[prost(string, tag = "1")]
    pub network: String,
    /// 4 or 16 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub address: Vec<u8>,
    /// A prefix length, for a range.
    #[prost(uint32, optional, tag = "3")]
    pub length: Option<u32>,
}

/// A hostname in a namespace.
#[derive(Clone, PartialEq, prost::Message)]
pub struct NamespacedHostname {
    /// The namespace.
    #[prost(string, tag = "1")]
    pub namespace: String,
    /// The hostname.
    #[prost(string, tag = "2")]
    pub hostname: String,
}

/// How a workload is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum TunnelProtocol {
    /// Plain: it is not in the mesh's ambient data plane.
    None = 0,
    /// HBONE (HTTP CONNECT over mutual TLS on port 15008): ambient.
    Hbone = 1,
    /// Istio mutual TLS to a sidecar.
    LegacyIstioMtls = 2,
}

/// Whether a workload may receive traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum WorkloadStatus {
    /// Ready.
    Healthy = 0,
    /// Not ready.
    Unhealthy = 1,
}

/// What kind of controller made a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum WorkloadType {
    /// A Deployment.
    Deployment = 0,
    /// A CronJob.
    Cronjob = 1,
    /// A bare Pod (and anything that is not a Kubernetes controller's).
    Pod = 2,
    /// A Job.
    Job = 3,
}
