//! Destinations of the routing model: per service host, the traffic policy
//! its clusters get and its named subsets, each with its own policy.

use std::time::Duration;

use pilot_model::Labels;

/// What is known of one destination host: its policy and its subsets.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Destination {
    /// The service's hostname.
    pub host: String,
    /// The policy of the whole service and of subsets without their own.
    pub policy: Option<TrafficPolicy>,
    /// The subsets routes or policies name, ordered by their labels.
    pub subsets: Vec<Subset>,
}

impl Destination {
    /// The policy of the subset selected by `labels` (empty: the whole
    /// service): the subset's own, else the service's.
    pub fn policy_for(&self, labels: &Labels) -> Option<&TrafficPolicy> {
        let own = (!labels.is_empty())
            .then(|| self.subsets.iter().find(|s| &s.labels == labels))
            .flatten()
            .and_then(|s| s.policy.as_ref());
        own.or(self.policy.as_ref())
    }
}

/// A named subset of a service: the instances carrying its labels.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Subset {
    /// Its name: given by a DestinationRule, else its labels written
    /// `key=value,...` (so a subset a v1alpha2 rule selects by labels is
    /// named as its clusters are: `outbound|9080|version=v1|host`).
    pub name: String,
    /// The labels its instances carry.
    pub labels: Labels,
    /// Its own policy (already merged with the service's), if any.
    pub policy: Option<TrafficPolicy>,
}

impl Subset {
    /// The subset selected by `labels`, named after them.
    pub fn from_labels(labels: Labels) -> Self {
        Subset {
            name: labels.to_string(),
            labels,
            policy: None,
        }
    }
}

/// How traffic to a destination is balanced, limited and secured.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct TrafficPolicy {
    /// Load balancing.
    pub load_balancer: Option<LoadBalancer>,
    /// Connection and request limits (Envoy's circuit breakers).
    pub connection_pool: Option<ConnectionPool>,
    /// Ejection of failing instances.
    pub outlier_detection: Option<OutlierDetection>,
    /// Policies of single ports, replacing this one on their port.
    pub port_level: Vec<PortTrafficPolicy>,
    /// TLS towards the destination.
    pub tls: Option<ClientTls>,
    /// Slow start of new instances.
    pub warmup: Option<Warmup>,
    /// Retries in flight as a share of requests in flight.
    pub retry_budget: Option<RetryBudget>,
    /// The PROXY protocol header sent first on each connection: 1 or 2.
    pub proxy_protocol: Option<u8>,
}

/// Slow start: a new instance's share of traffic grows over `window`.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Warmup {
    /// How long an instance stays in slow start.
    pub window: Duration,
    /// The share of its weight it starts with, in percent.
    pub minimum_percent: Option<f64>,
    /// How fast the share grows (1: linearly).
    pub aggression: Option<f64>,
}

/// A retry budget.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct RetryBudget {
    /// Retries in flight as a percentage of requests in flight.
    pub percent: Option<f64>,
    /// Retries always allowed.
    pub min_retry_concurrency: Option<u32>,
    /// Over how long requests count.
    pub interval: Option<Duration>,
}

/// HTTP/2 keepalive pings on upstream connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Http2Keepalive {
    /// Time between pings.
    pub interval: Option<Duration>,
    /// How long an unanswered ping waits.
    pub timeout: Option<Duration>,
}

impl TrafficPolicy {
    /// The policy on `port`: its port-level one if it has one, else itself.
    pub fn for_port(&self, port: u16) -> &TrafficPolicy {
        self.port_level
            .iter()
            .find(|p| p.port == port)
            .map(|p| &p.policy)
            .unwrap_or(self)
    }
}

/// The policy of one port.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct PortTrafficPolicy {
    /// The port.
    pub port: u16,
    /// Its policy (without port-level settings of its own).
    pub policy: TrafficPolicy,
}

/// Load balancing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadBalancer {
    /// A simple algorithm.
    Simple(SimpleLb),
    /// Session affinity by a hash of the request.
    ConsistentHash(ConsistentHash),
}

/// The simple load balancing algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SimpleLb {
    /// Round robin.
    RoundRobin,
    /// The instance with the fewest requests of two picked at random.
    LeastRequest,
    /// Random.
    Random,
    /// To the address the caller asked for.
    Passthrough,
}

/// Session affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsistentHash {
    /// What is hashed.
    pub key: HashKey,
    /// The minimum ring size.
    pub minimum_ring_size: Option<u64>,
    /// Maglev instead of a ring, with this table size if given (a prime).
    pub maglev: Option<Option<u64>>,
}

/// What a consistent hash hashes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashKey {
    /// A request header.
    Header(String),
    /// A cookie, generated with this time to live and path if missing.
    Cookie {
        /// The cookie's name.
        name: String,
        /// Its path.
        path: Option<String>,
        /// Its time to live.
        ttl: Option<Duration>,
    },
    /// The source address.
    SourceIp,
    /// A query parameter.
    QueryParameter(String),
}

/// Connection and request limits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ConnectionPool {
    /// Connections to the destination.
    pub max_connections: Option<u32>,
    /// TCP connect timeout.
    pub connect_timeout: Option<Duration>,
    /// Requests waiting for a connection.
    pub max_pending_requests: Option<u32>,
    /// Requests in flight.
    pub max_requests: Option<u32>,
    /// Retries in flight.
    pub max_retries: Option<u32>,
    /// Requests per connection.
    pub max_requests_per_connection: Option<u32>,
    /// HTTP/2 keepalive pings.
    pub http2_keepalive: Option<Http2Keepalive>,
    /// How long an upstream connection may stay idle.
    pub idle_timeout: Option<Duration>,
    /// How long an upstream connection may live.
    pub max_connection_duration: Option<Duration>,
    /// TCP keepalive on upstream connections.
    pub tcp_keepalive: Option<TcpKeepalive>,
    /// Concurrent streams per HTTP/2 connection.
    pub max_concurrent_streams: Option<u32>,
    /// Speak HTTP/2 to an HTTP/1.1 destination (h2UpgradePolicy UPGRADE).
    pub upgrade_to_http2: bool,
    /// Speak to the destination the protocol the client spoke.
    pub use_client_protocol: bool,
}

/// TCP keepalive probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TcpKeepalive {
    /// Unanswered probes before the connection is dead.
    pub probes: Option<u32>,
    /// Idle time before the first probe.
    pub time: Option<Duration>,
    /// Time between probes.
    pub interval: Option<Duration>,
}

/// Ejection of instances that keep failing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct OutlierDetection {
    /// Consecutive 5xx answers before an instance is ejected.
    pub consecutive_5xx_errors: Option<u32>,
    /// Time between analyses.
    pub interval: Option<Duration>,
    /// The shortest ejection.
    pub base_ejection_time: Option<Duration>,
    /// The largest share of instances ejected at once, in percent.
    pub max_ejection_percent: Option<u32>,
    /// Consecutive gateway errors (502, 503, 504, connection failures)
    /// before an instance is ejected.
    pub consecutive_gateway_errors: Option<u32>,
    /// Consecutive locally originated failures (connect, reset) before an
    /// instance is ejected; counted apart when split.
    pub consecutive_local_origin_failures: Option<u32>,
    /// Whether local failures are counted apart from the answers.
    pub split_external_local_origin_errors: bool,
    /// Below this share of healthy instances, in percent, ejection stops
    /// and every instance gets traffic (Envoy's panic threshold).
    pub min_health_percent: Option<u32>,
}

/// TLS towards a destination.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ClientTls {
    /// The mode.
    pub mode: TlsMode,
    /// The client certificate (mutual TLS).
    pub client_certificate: Option<String>,
    /// The client's private key (mutual TLS).
    pub private_key: Option<String>,
    /// The certificates that verify the server.
    pub ca_certificates: Option<String>,
    /// The names the server's certificate may carry.
    pub subject_alt_names: Vec<String>,
    /// The server name sent.
    pub sni: Option<String>,
    /// A secret (served over SDS) holding the client certificate and key,
    /// and `NAME-cacert` the certificates that verify the server, instead
    /// of files.
    pub credential_name: Option<String>,
    /// An SDS resource holding the certificates that verify the server
    /// (a validation context), when neither a file nor `credential_name`
    /// says (a BackendTLSPolicy's `configmap://` bundles).
    pub ca_credential: Option<String>,
    /// Whether the server's certificate goes unverified.
    pub insecure_skip_verify: bool,
    /// A certificate revocation list checked with the CA certificates.
    pub ca_crl: Option<String>,
}

/// How connections to a destination are secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum TlsMode {
    /// Plain text.
    #[default]
    Disable,
    /// TLS, verifying the server.
    Simple,
    /// TLS with a client certificate.
    Mutual,
    /// Mutual TLS with the mesh's workload certificates.
    IstioMutual,
}
