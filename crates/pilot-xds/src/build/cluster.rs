//! One cluster's shape: the base every cluster starts from, EDS, static,
//! DNS and original-destination clusters, the upstream protocol, and a
//! traffic policy's load balancing, circuit breakers and outlier detection
//! applied to it (slow start, retry budget, HTTP/2 keepalive, the PROXY
//! protocol too).

use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, OutlierDetection, UpstreamConnectionOptions,
    circuit_breakers::{Thresholds, thresholds::RetryBudget},
    cluster,
};
use envoy_types::pb::envoy::config::core::v3::{
    Http2ProtocolOptions, HttpProtocolOptions as CoreHttpOptions, KeepaliveSettings, ProxyProtocolConfig,
    RuntimeDouble, TcpKeepalive as CoreTcpKeepalive, TransportSocket, proxy_protocol_config,
    transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport;
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{HttpProtocolOptions, http_protocol_options};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt32Value;
use pilot_model::Protocol;
use pilot_routing::{Http2Keepalive, LoadBalancer, SimpleLb, TrafficPolicy, Warmup};

use super::util::{ads, any, duration, socket};

/// How long a new upstream connection may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The cluster that forwards to a connection's original destination.
pub const PASSTHROUGH: &str = "PassthroughCluster";

const HTTP_OPTIONS_KEY: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

pub(crate) fn base(name: &str, kind: cluster::DiscoveryType) -> Cluster {
    Cluster {
        name: name.to_string(),
        connect_timeout: Some(duration(CONNECT_TIMEOUT)),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(kind as i32)),
        ..Default::default()
    }
}

pub(crate) fn eds_cluster(name: &str, protocol: Protocol) -> Cluster {
    let mut cluster = base(name, cluster::DiscoveryType::Eds);
    cluster.eds_cluster_config = Some(cluster::EdsClusterConfig {
        eds_config: Some(ads()),
        service_name: name.to_string(),
    });
    set_protocol(&mut cluster, protocol);
    cluster
}

pub(crate) fn static_cluster(name: &str, address: &str, port: u16) -> Cluster {
    let mut cluster = base(name, cluster::DiscoveryType::Static);
    cluster.load_assignment = Some(ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![lb_endpoint_at(address, port)],
            ..Default::default()
        }],
        ..Default::default()
    });
    cluster
}

pub(crate) fn dns_cluster(name: &str, host: &str, port: u16, protocol: Protocol) -> Cluster {
    let mut cluster = static_cluster(name, host, port);
    cluster.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(
        cluster::DiscoveryType::StrictDns as i32,
    ));
    set_protocol(&mut cluster, protocol);
    cluster
}

pub(crate) fn original_destination(name: &str) -> Cluster {
    let mut cluster = base(name, cluster::DiscoveryType::OriginalDst);
    cluster.lb_policy = cluster::LbPolicy::ClusterProvided as i32;
    cluster
}

/// HTTP/2 upstreams for HTTP/2 and gRPC ports.
pub(crate) fn set_protocol(cluster: &mut Cluster, protocol: Protocol) {
    if matches!(protocol, Protocol::Http2 | Protocol::Grpc) {
        use_http2(cluster);
    }
}

/// Makes a cluster speak HTTP/2 to its upstreams (gRPC, xDS).
pub(crate) fn use_http2(cluster: &mut Cluster) {
    let options = HttpProtocolOptions {
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            Http2ProtocolOptions::default(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    cluster
        .typed_extension_protocol_options
        .insert(HTTP_OPTIONS_KEY.into(), any(&options));
}

/// Load balancing, circuit breaking and outlier detection from a traffic
/// policy.
pub(crate) fn apply_policy(cluster: &mut Cluster, policy: &TrafficPolicy) {
    if let Some(balancer) = &policy.load_balancer {
        let lb = match balancer {
            LoadBalancer::Simple(SimpleLb::RoundRobin) => Some(cluster::LbPolicy::RoundRobin),
            LoadBalancer::Simple(SimpleLb::LeastRequest) => Some(cluster::LbPolicy::LeastRequest),
            LoadBalancer::Simple(SimpleLb::Random) => Some(cluster::LbPolicy::Random),
            LoadBalancer::ConsistentHash(_) => Some(cluster::LbPolicy::RingHash),
            _ => None,
        };
        if let Some(lb) = lb {
            cluster.lb_policy = lb as i32;
        }
        if let LoadBalancer::ConsistentHash(hash) = balancer {
            super::hash_policy::apply(cluster, hash);
        }
    }
    let count = |n: u32| UInt32Value { value: n };
    if let Some(pool) = &policy.connection_pool {
        cluster.circuit_breakers = Some(CircuitBreakers {
            thresholds: vec![Thresholds {
                max_connections: pool.max_connections.map(count),
                max_pending_requests: pool.max_pending_requests.map(count),
                max_requests: pool.max_requests.map(count),
                max_retries: pool.max_retries.map(count),
                ..Default::default()
            }],
            ..Default::default()
        });
        if let Some(timeout) = pool.connect_timeout {
            cluster.connect_timeout = Some(duration(timeout));
        }
    }
    if let Some(outlier) = &policy.outlier_detection {
        // As Istio: a count given is enforced at 100%; gateway errors and
        // local failures only when asked for.
        let enforced = |given: Option<u32>| given.map(|_| count(100));
        cluster.outlier_detection = Some(OutlierDetection {
            consecutive_5xx: outlier.consecutive_5xx_errors.map(count),
            interval: outlier.interval.map(duration),
            base_ejection_time: outlier.base_ejection_time.map(duration),
            max_ejection_percent: outlier.max_ejection_percent.map(count),
            consecutive_gateway_failure: outlier.consecutive_gateway_errors.map(count),
            enforcing_consecutive_gateway_failure: enforced(outlier.consecutive_gateway_errors),
            split_external_local_origin_errors: outlier.split_external_local_origin_errors,
            consecutive_local_origin_failure: outlier.consecutive_local_origin_failures.map(count),
            enforcing_consecutive_local_origin_failure: enforced(outlier.consecutive_local_origin_failures),
            ..Default::default()
        });
        if let Some(percent) = outlier.min_health_percent {
            cluster
                .common_lb_config
                .get_or_insert_default()
                .healthy_panic_threshold = Some(Percent {
                value: f64::from(percent),
            });
        }
    }
    if let Some(keepalive) = policy.connection_pool.as_ref().and_then(|p| p.tcp_keepalive) {
        let seconds = |d: Duration| count(u32::try_from(d.as_secs()).unwrap_or(u32::MAX));
        cluster.upstream_connection_options = Some(UpstreamConnectionOptions {
            tcp_keepalive: Some(CoreTcpKeepalive {
                keepalive_probes: keepalive.probes.map(count),
                keepalive_time: keepalive.time.map(seconds),
                keepalive_interval: keepalive.interval.map(seconds),
            }),
            ..Default::default()
        });
    }
    if let Some(pool) = &policy.connection_pool {
        if pool.use_client_protocol {
            cluster.typed_extension_protocol_options.insert(
                HTTP_OPTIONS_KEY.into(),
                any(&HttpProtocolOptions {
                    upstream_protocol_options: Some(
                        http_protocol_options::UpstreamProtocolOptions::UseDownstreamProtocolConfig(
                            http_protocol_options::UseDownstreamHttpConfig {
                                http2_protocol_options: Some(Http2ProtocolOptions::default()),
                                ..Default::default()
                            },
                        ),
                    ),
                    ..Default::default()
                }),
            );
        } else if pool.upgrade_to_http2
            && !cluster
                .typed_extension_protocol_options
                .contains_key(HTTP_OPTIONS_KEY)
        {
            use_http2(cluster);
        }
    }
    let common = policy.connection_pool.as_ref().map(|pool| CoreHttpOptions {
        max_requests_per_connection: pool.max_requests_per_connection.map(count),
        idle_timeout: pool.idle_timeout.map(duration),
        max_connection_duration: pool.max_connection_duration.map(duration),
        ..Default::default()
    });
    if let Some(common) = common.filter(|c| *c != CoreHttpOptions::default()) {
        let key = HTTP_OPTIONS_KEY.to_string();
        let mut options = cluster
            .typed_extension_protocol_options
            .get(&key)
            .and_then(|a| <HttpProtocolOptions as prost::Message>::decode(a.value.as_slice()).ok())
            .unwrap_or_else(|| HttpProtocolOptions {
                upstream_protocol_options: Some(
                    http_protocol_options::UpstreamProtocolOptions::UseDownstreamProtocolConfig(
                        http_protocol_options::UseDownstreamHttpConfig::default(),
                    ),
                ),
                ..Default::default()
            });
        options.common_http_protocol_options = Some(common);
        cluster
            .typed_extension_protocol_options
            .insert(key, any(&options));
    }
    if let Some(keepalive) = policy.connection_pool.as_ref().and_then(|p| p.http2_keepalive) {
        http2_keepalive(cluster, keepalive);
    }
    if let Some(streams) = policy
        .connection_pool
        .as_ref()
        .and_then(|p| p.max_concurrent_streams)
    {
        max_concurrent_streams(cluster, streams);
    }
    if let Some(warmup) = &policy.warmup {
        slow_start(cluster, warmup);
    }
    if let Some(budget) = &policy.retry_budget {
        let breakers = cluster.circuit_breakers.get_or_insert_default();
        if breakers.thresholds.is_empty() {
            breakers.thresholds.push(Thresholds::default());
        }
        breakers.thresholds[0].retry_budget = Some(RetryBudget {
            budget_percent: budget.percent.map(|value| Percent { value }),
            min_retry_concurrency: budget.min_retry_concurrency.map(count),
            budget_interval: budget.interval.map(duration),
        });
    }
}

/// Envoy's slow start on the round-robin or least-request balancer the
/// cluster has (others have none: validation warned).
fn slow_start(cluster: &mut Cluster, warmup: &Warmup) {
    let config = cluster::SlowStartConfig {
        slow_start_window: Some(duration(warmup.window)),
        aggression: warmup.aggression.map(|default_value| RuntimeDouble {
            default_value,
            runtime_key: "upstream.slow_start.aggression".into(),
        }),
        min_weight_percent: warmup.minimum_percent.map(|value| Percent { value }),
    };
    let lb = cluster.lb_policy;
    cluster.lb_config = if lb == cluster::LbPolicy::RoundRobin as i32 {
        Some(cluster::LbConfig::RoundRobinLbConfig(
            cluster::RoundRobinLbConfig {
                slow_start_config: Some(config),
            },
        ))
    } else if lb == cluster::LbPolicy::LeastRequest as i32 {
        Some(cluster::LbConfig::LeastRequestLbConfig(
            cluster::LeastRequestLbConfig {
                slow_start_config: Some(config),
                ..Default::default()
            },
        ))
    } else {
        return;
    };
}

/// HTTP/2 keepalive pings, on a cluster that speaks HTTP/2 to its
/// upstreams (an HTTP/1 cluster has no pings: as Istio, nothing).
fn http2_keepalive(cluster: &mut Cluster, keepalive: Http2Keepalive) {
    let Some(options) = cluster.typed_extension_protocol_options.get_mut(HTTP_OPTIONS_KEY) else {
        return;
    };
    let Ok(mut decoded) = <HttpProtocolOptions as prost::Message>::decode(options.value.as_slice()) else {
        return;
    };
    let settings = KeepaliveSettings {
        interval: keepalive.interval.map(duration),
        timeout: keepalive.timeout.map(duration),
        ..Default::default()
    };
    let http2 = match &mut decoded.upstream_protocol_options {
        Some(http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(explicit)) => {
            match &mut explicit.protocol_config {
                Some(http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                    h2,
                )) => h2,
                _ => return,
            }
        }
        _ => return,
    };
    http2.connection_keepalive = Some(settings);
    *options = any(&decoded);
}

/// Concurrent streams per connection, on a cluster that speaks HTTP/2.
fn max_concurrent_streams(cluster: &mut Cluster, streams: u32) {
    let Some(options) = cluster.typed_extension_protocol_options.get_mut(HTTP_OPTIONS_KEY) else {
        return;
    };
    let Ok(mut decoded) = <HttpProtocolOptions as prost::Message>::decode(options.value.as_slice()) else {
        return;
    };
    if let Some(http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(explicit)) =
        &mut decoded.upstream_protocol_options
        && let Some(http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(h2)) =
            &mut explicit.protocol_config
    {
        h2.max_concurrent_streams = Some(UInt32Value { value: streams });
        *options = any(&decoded);
    }
}

/// Sends the PROXY protocol header (`version` 1 or 2) first on every
/// connection of the cluster: Envoy's upstream PROXY protocol transport
/// socket around whatever the connection otherwise uses (plaintext, TLS,
/// the mutual TLS of the mesh's matches).
pub(crate) fn proxy_protocol(cluster: &mut Cluster, version: u8) {
    let wrap = |inner: Option<TransportSocket>| TransportSocket {
        name: "envoy.transport_sockets.upstream_proxy_protocol".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &ProxyProtocolUpstreamTransport {
                config: Some(ProxyProtocolConfig {
                    version: if version == 2 {
                        proxy_protocol_config::Version::V2 as i32
                    } else {
                        proxy_protocol_config::Version::V1 as i32
                    },
                    ..Default::default()
                }),
                transport_socket: Some(inner.unwrap_or_else(|| TransportSocket {
                    name: "envoy.transport_sockets.raw_buffer".into(),
                    config_type: Some(transport_socket::ConfigType::TypedConfig(any(&RawBuffer {}))),
                })),
                ..Default::default()
            },
        ))),
    };
    cluster.transport_socket = Some(wrap(cluster.transport_socket.take()));
    for matched in &mut cluster.transport_socket_matches {
        matched.transport_socket = Some(wrap(matched.transport_socket.take()));
    }
}

pub(crate) fn lb_endpoint_at(address: &str, port: u16) -> LbEndpoint {
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(socket(address, port)),
            ..Default::default()
        })),
        ..Default::default()
    }
}
