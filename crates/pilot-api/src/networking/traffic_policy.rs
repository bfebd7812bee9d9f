//! [`TrafficPolicy`]: load balancing, connection pools, outlier detection
//! and client TLS for traffic to a host, a subset or a port.

use serde::{Deserialize, Serialize};

use super::common::PortSelector;
use crate::primitives::Duration;

/// Policies for traffic to a destination.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrafficPolicy {
    /// How requests are spread over instances.
    #[serde(default, alias = "load_balancer", skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerSettings>,
    /// Connection limits.
    #[serde(default, alias = "connection_pool", skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
    /// Ejection of failing instances.
    #[serde(default, alias = "outlier_detection", skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// TLS towards the destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClientTlsSettings>,
    /// Overrides for single ports.
    #[serde(default, alias = "port_level_settings", skip_serializing_if = "Vec::is_empty")]
    pub port_level_settings: Vec<PortTrafficPolicy>,
    /// Tunnelling of TCP over HTTP CONNECT or POST (not supported:
    /// refused, since ignoring it would send the traffic around the
    /// tunnel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelSettings>,
    /// PROXY protocol towards the destination: Envoy's upstream PROXY
    /// protocol transport socket around the connection (and its TLS).
    #[serde(default, alias = "proxy_protocol", skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<ProxyProtocol>,
    /// A retry budget: Envoy's circuit breaker `retry_budget`, in place of
    /// the fixed `maxRetries`.
    #[serde(default, alias = "retry_budget", skip_serializing_if = "Option::is_none")]
    pub retry_budget: Option<RetryBudget>,
}

/// Policies for one port of a destination.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortTrafficPolicy {
    /// The port (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<PortSelector>,
    /// How requests are spread over instances.
    #[serde(default, alias = "load_balancer", skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerSettings>,
    /// Connection limits.
    #[serde(default, alias = "connection_pool", skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
    /// Ejection of failing instances.
    #[serde(default, alias = "outlier_detection", skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// TLS towards the destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClientTlsSettings>,
}

/// Load balancing: exactly one of `simple` or `consistentHash`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancerSettings {
    /// A built-in algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simple: Option<SimpleLb>,
    /// Session affinity by a hash of the request.
    #[serde(default, alias = "consistent_hash", skip_serializing_if = "Option::is_none")]
    pub consistent_hash: Option<ConsistentHashLb>,
    /// Locality-weighted load balancing and failover: accepted with a
    /// warning (pilot does not weigh or fail over endpoints by locality).
    #[serde(
        default,
        alias = "locality_lb_setting",
        skip_serializing_if = "Option::is_none"
    )]
    pub locality_lb_setting: Option<LocalityLbSetting>,
    /// Zone-aware load balancing: accepted with a warning, as
    /// `localityLbSetting`.
    #[serde(
        default,
        alias = "zone_aware_lb_setting",
        skip_serializing_if = "Option::is_none"
    )]
    pub zone_aware_lb_setting: Option<ZoneAwareLbSetting>,
    /// Slow start for new instances (deprecated for `warmup`).
    #[serde(
        default,
        alias = "warmup_duration_secs",
        skip_serializing_if = "Option::is_none"
    )]
    pub warmup_duration_secs: Option<Duration>,
    /// Slow start for new instances: Envoy's `slow_start_config` of the
    /// round-robin and least-request balancers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Warmup>,
}

/// Slow start: a new instance's share of traffic grows over `duration`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Warmup {
    /// How long an instance stays in slow start (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// The share of its weight a new instance starts with, in percent
    /// (Envoy's default: 10).
    #[serde(default, alias = "minimum_percent", skip_serializing_if = "Option::is_none")]
    pub minimum_percent: Option<f64>,
    /// How fast the share grows: 1 linearly, more faster at first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggression: Option<f64>,
}

/// Locality-weighted load balancing (Istio's `LocalityLoadBalancerSetting`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityLbSetting {
    /// Shares of traffic from a locality to others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distribute: Vec<LocalityDistribute>,
    /// Where traffic goes when a region's instances are unhealthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<LocalityFailover>,
    /// Labels that order failover priorities.
    #[serde(default, alias = "failover_priority", skip_serializing_if = "Vec::is_empty")]
    pub failover_priority: Vec<String>,
    /// Whether locality load balancing is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Zone-aware load balancing (Istio's `ZoneAwareLoadBalancerSetting`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneAwareLbSetting {
    /// Whether zone-aware load balancing is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Where traffic goes when a region's instances are unhealthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<LocalityFailover>,
    /// Labels that order failover priorities.
    #[serde(default, alias = "failover_priority", skip_serializing_if = "Vec::is_empty")]
    pub failover_priority: Vec<String>,
    /// The fewest instances a zone must have to be preferred.
    #[serde(default, alias = "min_cluster_size", skip_serializing_if = "Option::is_none")]
    pub min_cluster_size: Option<u64>,
}

/// Shares of traffic from one locality.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityDistribute {
    /// The origin locality (`region/zone/subzone`, `*` allowed).
    #[serde(default)]
    pub from: String,
    /// Destination localities and their shares (summing to 100).
    #[serde(default)]
    pub to: std::collections::BTreeMap<String, u32>,
}

/// A region's failover.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalityFailover {
    /// The region whose instances failed.
    #[serde(default)]
    pub from: String,
    /// The region traffic goes to instead.
    #[serde(default)]
    pub to: String,
}

/// Tunnelling of TCP traffic over HTTP (Istio's `TunnelSettings`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TunnelSettings {
    /// `CONNECT` (default) or `POST`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The host the tunnel reaches.
    #[serde(default, alias = "target_host")]
    pub target_host: String,
    /// The port the tunnel reaches.
    #[serde(default, alias = "target_port")]
    pub target_port: u32,
}

/// The PROXY protocol header sent before a connection's bytes.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProxyProtocol {
    /// `V1` (text, the default) or `V2` (binary).
    #[serde(default)]
    pub version: ProxyProtocolVersion,
}

/// A PROXY protocol version.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProxyProtocolVersion {
    /// Human-readable text.
    #[default]
    V1,
    /// Binary.
    V2,
}

/// A retry budget: retries in flight as a share of the requests in flight.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryBudget {
    /// The share, in percent (Envoy's default: 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// Retries always allowed, whatever the share says (Envoy's default: 3).
    #[serde(
        default,
        alias = "min_retry_concurrency",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_retry_concurrency: Option<u32>,
    /// Over how long requests count towards the budget (default: only
    /// those in flight).
    #[serde(default, alias = "budget_interval", skip_serializing_if = "Option::is_none")]
    pub budget_interval: Option<Duration>,
}

/// HTTP/2 keepalive pings on upstream connections.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionKeepalive {
    /// Time between pings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// How long an unanswered ping waits before the connection is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

/// The built-in load-balancing algorithms.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SimpleLb {
    /// The default (least request).
    Unspecified,
    /// Deprecated name of least request.
    LeastConn,
    /// A random instance.
    Random,
    /// The original destination address of the connection.
    Passthrough,
    /// Each instance in turn.
    RoundRobin,
    /// The instance with fewer active requests of two picked at random.
    LeastRequest,
}

/// Consistent hashing: exactly one hash key, optionally an algorithm.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConsistentHashLb {
    /// Hash a request header.
    #[serde(default, alias = "http_header_name", skip_serializing_if = "Option::is_none")]
    pub http_header_name: Option<String>,
    /// Hash a cookie, generating it when absent.
    #[serde(default, alias = "http_cookie", skip_serializing_if = "Option::is_none")]
    pub http_cookie: Option<HttpCookie>,
    /// Hash the source IP address.
    #[serde(default, alias = "use_source_ip", skip_serializing_if = "Option::is_none")]
    pub use_source_ip: Option<bool>,
    /// Hash a query parameter.
    #[serde(
        default,
        alias = "http_query_parameter_name",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_query_parameter_name: Option<String>,
    /// Ring hash with its minimum ring size.
    #[serde(default, alias = "ring_hash", skip_serializing_if = "Option::is_none")]
    pub ring_hash: Option<RingHash>,
    /// Maglev with its table size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maglev: Option<MagLev>,
    /// Deprecated: minimum ring size of the ring hash.
    #[serde(default, alias = "minimum_ring_size", skip_serializing_if = "Option::is_none")]
    pub minimum_ring_size: Option<u64>,
}

/// Ring hash settings.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RingHash {
    /// Minimum number of virtual nodes on the ring.
    #[serde(default, alias = "minimum_ring_size", skip_serializing_if = "Option::is_none")]
    pub minimum_ring_size: Option<u64>,
}

/// Maglev settings.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MagLev {
    /// The table size, a prime number.
    #[serde(default, alias = "table_size", skip_serializing_if = "Option::is_none")]
    pub table_size: Option<u64>,
}

/// A cookie to hash on.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpCookie {
    /// The cookie's name (required).
    #[serde(default)]
    pub name: String,
    /// The cookie's path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// The lifetime of a generated cookie.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// Further attributes of a generated cookie.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<CookieAttribute>,
}

/// A cookie attribute.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CookieAttribute {
    /// The attribute's name (required).
    #[serde(default)]
    pub name: String,
    /// The attribute's value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// Connection limits, TCP and HTTP.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionPoolSettings {
    /// TCP settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSettings>,
    /// HTTP settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSettings>,
}

/// TCP connection limits.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpSettings {
    /// Maximum connections to the destination.
    #[serde(default, alias = "max_connections", skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<i32>,
    /// Connect timeout.
    #[serde(default, alias = "connect_timeout", skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<Duration>,
    /// TCP keepalive.
    #[serde(default, alias = "tcp_keepalive", skip_serializing_if = "Option::is_none")]
    pub tcp_keepalive: Option<TcpKeepalive>,
    /// Maximum lifetime of a connection.
    #[serde(
        default,
        alias = "max_connection_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_connection_duration: Option<Duration>,
    /// Idle timeout of a connection.
    #[serde(default, alias = "idle_timeout", skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Duration>,
}

/// TCP keepalive settings.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpKeepalive {
    /// Unanswered probes before the connection is dead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<u32>,
    /// Idle time before probes start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Duration>,
    /// Time between probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
}

/// HTTP connection limits.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpSettings {
    /// Maximum requests waiting for a connection.
    #[serde(
        default,
        alias = "http1_max_pending_requests",
        skip_serializing_if = "Option::is_none"
    )]
    pub http1_max_pending_requests: Option<i32>,
    /// Maximum active requests.
    #[serde(
        default,
        alias = "http2_max_requests",
        skip_serializing_if = "Option::is_none"
    )]
    pub http2_max_requests: Option<i32>,
    /// Maximum requests per connection.
    #[serde(
        default,
        alias = "max_requests_per_connection",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_requests_per_connection: Option<i32>,
    /// Maximum concurrent retries.
    #[serde(default, alias = "max_retries", skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<i32>,
    /// Idle timeout of a connection.
    #[serde(default, alias = "idle_timeout", skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<Duration>,
    /// Whether HTTP/1.1 connections are upgraded to HTTP/2.
    #[serde(default, alias = "h2_upgrade_policy", skip_serializing_if = "Option::is_none")]
    pub h2_upgrade_policy: Option<H2UpgradePolicy>,
    /// Use the client's protocol towards the destination.
    #[serde(
        default,
        alias = "use_client_protocol",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub use_client_protocol: bool,
    /// Maximum concurrent streams per HTTP/2 connection.
    #[serde(
        default,
        alias = "max_concurrent_streams",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_concurrent_streams: Option<i32>,
    /// HTTP/2 keepalive pings on HTTP/2 upstream connections.
    #[serde(default, alias = "http2_keep_alive", skip_serializing_if = "Option::is_none")]
    pub http2_keep_alive: Option<ConnectionKeepalive>,
}

/// HTTP/2 upgrade policy.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum H2UpgradePolicy {
    /// The mesh-wide default.
    Default,
    /// Never upgrade.
    DoNotUpgrade,
    /// Upgrade.
    Upgrade,
}

/// Ejection of failing instances.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutlierDetection {
    /// Deprecated: consecutive gateway errors before ejection.
    #[serde(
        default,
        alias = "consecutive_errors",
        skip_serializing_if = "Option::is_none"
    )]
    pub consecutive_errors: Option<i32>,
    /// Count local-origin failures apart.
    #[serde(
        default,
        alias = "split_external_local_origin_errors",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub split_external_local_origin_errors: bool,
    /// Consecutive local-origin failures before ejection.
    #[serde(
        default,
        alias = "consecutive_local_origin_failures",
        skip_serializing_if = "Option::is_none"
    )]
    pub consecutive_local_origin_failures: Option<u32>,
    /// Consecutive 502, 503 and 504 answers before ejection.
    #[serde(
        default,
        alias = "consecutive_gateway_errors",
        skip_serializing_if = "Option::is_none"
    )]
    pub consecutive_gateway_errors: Option<u32>,
    /// Consecutive 5xx answers before ejection.
    #[serde(
        default,
        alias = "consecutive_5xx_errors",
        skip_serializing_if = "Option::is_none"
    )]
    pub consecutive_5xx_errors: Option<u32>,
    /// How often instances are checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// Minimum ejection time.
    #[serde(
        default,
        alias = "base_ejection_time",
        skip_serializing_if = "Option::is_none"
    )]
    pub base_ejection_time: Option<Duration>,
    /// Maximum percentage of instances ejected.
    #[serde(
        default,
        alias = "max_ejection_percent",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_ejection_percent: Option<i32>,
    /// Outlier detection is off below this percentage of healthy instances.
    #[serde(
        default,
        alias = "min_health_percent",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_health_percent: Option<i32>,
    /// Status codes counted as errors (not supported).
    #[serde(
        default,
        alias = "outlier_detection_http_error_codes",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub outlier_detection_http_error_codes: Vec<u32>,
}

/// TLS towards a destination.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientTlsSettings {
    /// The TLS mode (DISABLE when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ClientTlsMode>,
    /// Path of the client certificate (MUTUAL).
    #[serde(
        default,
        alias = "client_certificate",
        skip_serializing_if = "String::is_empty"
    )]
    pub client_certificate: String,
    /// Path of the client's private key (MUTUAL).
    #[serde(default, alias = "private_key", skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// Path of the CA certificates that verify the server.
    #[serde(default, alias = "ca_certificates", skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
    /// A secret holding the certificates instead of paths.
    #[serde(default, alias = "credential_name", skip_serializing_if = "String::is_empty")]
    pub credential_name: String,
    /// Names the server certificate must carry.
    #[serde(default, alias = "subject_alt_names", skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
    /// The SNI sent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sni: String,
    /// Skip verification of the server certificate.
    #[serde(
        default,
        alias = "insecure_skip_verify",
        skip_serializing_if = "Option::is_none"
    )]
    pub insecure_skip_verify: Option<bool>,
    /// Path of a certificate revocation list.
    #[serde(default, alias = "ca_crl", skip_serializing_if = "String::is_empty")]
    pub ca_crl: String,
}

/// Client TLS modes.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClientTlsMode {
    /// Plain text.
    Disable,
    /// TLS, verifying the server.
    Simple,
    /// TLS with a client certificate.
    Mutual,
    /// Mutual TLS with the mesh's workload certificates.
    IstioMutual,
}
