//! DestinationRule fields Istio's validation accepts, as Envoy gets them,
//! and a real Envoy loads them: `warmup` (and the deprecated
//! `warmupDurationSecs`) as the balancer's slow start, `retryBudget` as the
//! circuit breakers' retry budget, `http2KeepAlive` as HTTP/2 keepalive
//! pings of an HTTP/2 cluster, `proxyProtocol` as the upstream PROXY
//! protocol transport socket around the cluster's own (TLS included),
//! outlier detection's gateway and local-origin counts and
//! `minHealthPercent` (the panic threshold), TCP keepalive, idle timeout,
//! connection lifetime and HTTP/2 concurrent streams. `localityLbSetting`
//! is accepted with a warning that says it will not be applied.

mod support;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
use envoy_types::pb::envoy::extensions::transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{HttpProtocolOptions, http_protocol_options};
use pilot_api::default_registry;
use pilot_model::document::{self, ParseOptions};
use pilot_xds::{MeshConfig, Proxy, generate, testing};
use prost::Message;

const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews
  trafficPolicy:
    loadBalancer:
      simple: LEAST_REQUEST
      warmup: {duration: 30s, minimumPercent: 5.0, aggression: 2.0}
    retryBudget: {percent: 25.0, minRetryConcurrency: 5}
    outlierDetection:
      consecutiveGatewayErrors: 3
      consecutiveLocalOriginFailures: 2
      splitExternalLocalOriginErrors: true
      minHealthPercent: 40
    connectionPool:
      tcp: {maxConnectionDuration: 600s, tcpKeepalive: {probes: 4, time: 60s, interval: 15s}}
      http: {idleTimeout: 30s}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings, namespace: default}
spec:
  host: ratings
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN, warmupDurationSecs: 20s}
    proxyProtocol: {version: V2}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: greeter, namespace: default}
spec:
  host: greeter
  trafficPolicy:
    connectionPool:
      http: {http2KeepAlive: {interval: 10s, timeout: 3s}, maxConcurrentStreams: 50}
    tls: {mode: SIMPLE, sni: greeter.example.com}
    proxyProtocol: {version: V1}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: details, namespace: default}
spec:
  host: details
  trafficPolicy:
    loadBalancer:
      simple: RANDOM
      warmup: {duration: 10s}
      localityLbSetting:
        distribute:
        - from: us-west/zone1/*
          to: {"us-west/zone1/*": 80, "us-west/zone2/*": 20}
"#;

fn cluster<'a>(clusters: &'a [Cluster], host: &str, port: u16) -> &'a Cluster {
    let name = format!("outbound|{port}||{host}.default.svc.cluster.local");
    clusters
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no cluster {name}"))
}

#[test]
fn destination_rule_fields_reach_envoy_and_envoy_loads_them() {
    let parsed = document::parse_reporting(
        "fields.yaml",
        CONFIG,
        &default_registry(),
        &ParseOptions::default(),
    )
    .unwrap();
    // What will not happen is said, at its place; the rest is silent.
    let warnings: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].starts_with("fields.yaml:49:7 spec.trafficPolicy.loadBalancer.warmup: not applied: slow start is for the ROUND_ROBIN and LEAST_REQUEST balancers only"),
        "{warnings:#?}"
    );
    assert!(
        warnings[1].contains("spec.trafficPolicy.loadBalancer.localityLbSetting: not applied"),
        "{warnings:#?}"
    );
    let mesh = MeshConfig::from_configs(&parsed.configs).unwrap();
    let registry = support::registry();
    let proxy =
        Proxy::from_node_id("sidecar~10.1.0.1~productpage-v1.default~default.svc.cluster.local").unwrap();
    let resources = generate(&proxy, &registry, &mesh);
    resources.check().unwrap();
    let clusters = &resources.clusters;

    // warmup: slow start on the least-request balancer, with its share and
    // aggression; the retry budget beside it.
    let reviews = cluster(clusters, "reviews", 9080);
    assert_eq!(reviews.lb_policy, cluster::LbPolicy::LeastRequest as i32);
    let Some(cluster::LbConfig::LeastRequestLbConfig(least)) = &reviews.lb_config else {
        panic!("{:?}", reviews.lb_config);
    };
    let slow = least.slow_start_config.as_ref().unwrap();
    assert_eq!(slow.slow_start_window.unwrap().seconds, 30);
    assert_eq!(slow.min_weight_percent.unwrap().value, 5.0);
    assert_eq!(slow.aggression.as_ref().unwrap().default_value, 2.0);
    // Outlier detection's gateway and local-origin counts, enforced; the
    // healthy share below which Envoy balances over every instance.
    let outlier = reviews.outlier_detection.clone().unwrap();
    assert_eq!(outlier.consecutive_gateway_failure.unwrap().value, 3);
    assert_eq!(outlier.enforcing_consecutive_gateway_failure.unwrap().value, 100);
    assert_eq!(outlier.consecutive_local_origin_failure.unwrap().value, 2);
    assert!(outlier.split_external_local_origin_errors);
    let panic = reviews
        .common_lb_config
        .as_ref()
        .unwrap()
        .healthy_panic_threshold
        .unwrap();
    assert_eq!(panic.value, 40.0);
    // TCP keepalive; idle timeout and connection lifetime.
    let tcp = reviews
        .upstream_connection_options
        .as_ref()
        .unwrap()
        .tcp_keepalive
        .unwrap();
    assert_eq!(
        (
            tcp.keepalive_probes.unwrap().value,
            tcp.keepalive_time.unwrap().value,
            tcp.keepalive_interval.unwrap().value
        ),
        (4, 60, 15)
    );
    let options = HttpProtocolOptions::decode(
        reviews.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
            .value
            .as_slice(),
    )
    .unwrap();
    let common = options.common_http_protocol_options.unwrap();
    assert_eq!(common.idle_timeout.unwrap().seconds, 30);
    assert_eq!(common.max_connection_duration.unwrap().seconds, 600);
    let thresholds = &reviews.circuit_breakers.as_ref().unwrap().thresholds[0];
    let budget = thresholds.retry_budget.unwrap();
    assert_eq!(budget.budget_percent.unwrap().value, 25.0);
    assert_eq!(budget.min_retry_concurrency.unwrap().value, 5);

    // warmupDurationSecs: the window alone, on round robin; PROXY v2
    // around plaintext.
    let ratings = cluster(clusters, "ratings", 9080);
    let Some(cluster::LbConfig::RoundRobinLbConfig(rr)) = &ratings.lb_config else {
        panic!("{:?}", ratings.lb_config);
    };
    let slow = rr.slow_start_config.as_ref().unwrap();
    assert_eq!(slow.slow_start_window.unwrap().seconds, 20);
    assert!(slow.min_weight_percent.is_none() && slow.aggression.is_none());
    let socket = ratings.transport_socket.as_ref().unwrap();
    assert_eq!(socket.name, "envoy.transport_sockets.upstream_proxy_protocol");
    let Some(ConfigType::TypedConfig(any)) = &socket.config_type else {
        panic!("{socket:?}");
    };
    let upstream = ProxyProtocolUpstreamTransport::decode(any.value.as_slice()).unwrap();
    assert_eq!(upstream.config.unwrap().version, 1, "V2");
    assert_eq!(
        upstream.transport_socket.unwrap().name,
        "envoy.transport_sockets.raw_buffer"
    );

    // HTTP/2 keepalive on the gRPC cluster; PROXY v1 around its TLS.
    let greeter = cluster(clusters, "greeter", 50051);
    let options = HttpProtocolOptions::decode(
        greeter.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
            .value
            .as_slice(),
    )
    .unwrap();
    let Some(http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(explicit)) =
        options.upstream_protocol_options
    else {
        panic!("not explicit HTTP/2");
    };
    let Some(http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(h2)) =
        explicit.protocol_config
    else {
        panic!("not HTTP/2");
    };
    assert_eq!(h2.max_concurrent_streams.unwrap().value, 50);
    let keepalive = h2.connection_keepalive.unwrap();
    assert_eq!(keepalive.interval.unwrap().seconds, 10);
    assert_eq!(keepalive.timeout.unwrap().seconds, 3);
    let socket = greeter.transport_socket.as_ref().unwrap();
    let Some(ConfigType::TypedConfig(any)) = &socket.config_type else {
        panic!("{socket:?}");
    };
    let upstream = ProxyProtocolUpstreamTransport::decode(any.value.as_slice()).unwrap();
    assert_eq!(upstream.config.unwrap().version, 0, "V1");
    assert_eq!(
        upstream.transport_socket.unwrap().name,
        "envoy.transport_sockets.tls"
    );

    // RANDOM has no slow start: none is generated (and validation said so).
    let details = cluster(clusters, "details", 9080);
    assert_eq!(details.lb_policy, cluster::LbPolicy::Random as i32);
    assert!(details.lb_config.is_none(), "{:?}", details.lb_config);

    testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources).unwrap();
}
