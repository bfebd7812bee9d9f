//! What the generator produces for each routing feature, asserted on the
//! protobufs themselves.

mod support;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, VirtualHost, header_matcher, route, route_action, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{HttpFault, fault_abort};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher;
use pilot_xds::{Resources, generate};
use prost::Message;
use support::{RATINGS, REVIEWS};

fn resources(proxy: &str) -> Resources {
    let (_, proxy) = support::proxies()
        .into_iter()
        .find(|(name, _)| *name == proxy)
        .unwrap();
    let resources = generate(&proxy, &support::registry(), &support::mesh());
    resources.check().unwrap();
    resources
}

fn vhost<'a>(resources: &'a Resources, host: &str, port: u16) -> &'a VirtualHost {
    let config: &RouteConfiguration = resources
        .routes
        .iter()
        .find(|r| r.name == port.to_string())
        .unwrap();
    config
        .virtual_hosts
        .iter()
        .find(|v| v.name == format!("{host}:{port}"))
        .unwrap()
}

fn route<'a>(host: &'a VirtualHost, name: &str) -> &'a Route {
    host.routes
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no route {name} in {:?}", host.routes))
}

fn action(route: &Route) -> &RouteAction {
    match &route.action {
        Some(route::Action::Route(action)) => action,
        other => panic!("not a route action: {other:?}"),
    }
}

fn cluster<'a>(resources: &'a Resources, name: &str) -> &'a Cluster {
    resources
        .clusters
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no cluster {name}"))
}

fn listener<'a>(resources: &'a Resources, name: &str) -> &'a Listener {
    resources
        .listeners
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

fn subset(host: &str, version: &str) -> String {
    format!("outbound|9080|version={version}|{host}")
}

#[test]
fn weighted_routes_point_at_version_subsets() {
    let resources = resources("productpage-no-capture");
    let reviews = vhost(&resources, REVIEWS, 9080);
    let Some(route_action::ClusterSpecifier::WeightedClusters(weighted)) =
        &action(route(reviews, "default/reviews-default")).cluster_specifier
    else {
        panic!("expected weighted clusters");
    };
    let split: Vec<(String, u32)> = weighted
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.weight.as_ref().unwrap().value))
        .collect();
    assert_eq!(split, [(subset(REVIEWS, "v1"), 80), (subset(REVIEWS, "v2"), 20)]);
    // Subset clusters exist for every version a rule names.
    for version in ["v1", "v2", "v3"] {
        cluster(&resources, &subset(REVIEWS, version));
    }
}

#[test]
fn header_matches_come_first_in_precedence_order() {
    let resources = resources("productpage-no-capture");
    let reviews = vhost(&resources, REVIEWS, 9080);
    let names: Vec<&str> = reviews.routes.iter().map(|r| r.name.as_str()).collect();
    let v3 = names
        .iter()
        .position(|n| *n == "default/reviews-test-v3")
        .unwrap();
    let default = names
        .iter()
        .position(|n| *n == "default/reviews-default")
        .unwrap();
    assert!(v3 < default, "precedence 2 before precedence 1: {names:?}");
    let matcher = &route(reviews, "default/reviews-test-v3")
        .r#match
        .as_ref()
        .unwrap()
        .headers[0];
    assert_eq!(matcher.name, "end-user");
    let Some(header_matcher::HeaderMatchSpecifier::StringMatch(string)) = &matcher.header_match_specifier
    else {
        panic!()
    };
    assert_eq!(
        string.match_pattern,
        Some(string_matcher::MatchPattern::Exact("jason".into()))
    );
    assert_eq!(
        action(route(reviews, "default/reviews-test-v3")).cluster_specifier,
        Some(route_action::ClusterSpecifier::Cluster(subset(REVIEWS, "v3")))
    );
    // Every name a client uses reaches the virtual host, once: Envoy
    // ignores the Host header's port (as for Istio's sidecars), so no
    // domain carries one.
    for domain in ["reviews", "reviews.default", "reviews.default.svc", REVIEWS] {
        assert!(
            reviews.domains.contains(&domain.to_string()),
            "{domain} in {:?}",
            reviews.domains
        );
    }
    assert!(
        reviews.domains.iter().all(|d| !d.contains(':')),
        "{:?}",
        reviews.domains
    );
    let config = resources.routes.iter().find(|r| r.name == "9080").unwrap();
    assert!(config.ignore_port_in_host_matching);
}

#[test]
fn faults_follow_source_matches() {
    let fault = |resources: &Resources, name: &str| -> Option<HttpFault> {
        let ratings = vhost(resources, RATINGS, 9080);
        let route = ratings.routes.iter().find(|r| r.name == name)?;
        Some(
            HttpFault::decode(
                route.typed_per_filter_config[pilot_xds::FAULT_FILTER]
                    .value
                    .as_slice(),
            )
            .unwrap(),
        )
    };
    // ratings-test-abort matches traffic from reviews v2 only.
    let abort =
        fault(&resources("reviews-v2-sidecar"), "default/ratings-test-abort").expect("abort for reviews v2");
    let abort = abort.abort.unwrap();
    assert_eq!(abort.error_type, Some(fault_abort::ErrorType::HttpStatus(503)));
    assert_eq!(abort.percentage.unwrap().numerator, 500_000, "50% of a million");
    assert!(fault(&resources("productpage-no-capture"), "default/ratings-test-abort").is_none());
    let delay = fault(&resources("productpage-no-capture"), "default/ratings-test-delay")
        .unwrap()
        .delay
        .unwrap();
    assert_eq!(delay.percentage.unwrap().numerator, 1_000_000);
    assert_eq!(format!("{:?}", delay.fault_delay_secifier), format!("{:?}", Some(envoy_types::pb::envoy::extensions::filters::common::fault::v3::fault_delay::FaultDelaySecifier::FixedDelay(envoy_types::pb::google::protobuf::Duration { seconds: 7, nanos: 0 }))));
}

#[test]
fn timeouts_retries_mirror_cors_and_regex() {
    let resources = resources("reviews-v2-sidecar");
    let productpage = vhost(&resources, "productpage.default.svc.cluster.local", 9080);
    let rule = route(productpage, "default/productpage-cors-mirror");
    let action = action(rule);
    assert_eq!(action.timeout.as_ref().unwrap().seconds, 10);
    let retry = action.retry_policy.as_ref().unwrap();
    assert_eq!(retry.num_retries.as_ref().unwrap().value, 3);
    assert_eq!(retry.per_try_timeout.as_ref().unwrap().seconds, 2);
    assert_eq!(
        action.request_mirror_policies[0].cluster,
        "outbound|9080|version=v2|productpage.default.svc.cluster.local"
    );
    let cors = CorsPolicy::decode(
        rule.typed_per_filter_config[pilot_xds::CORS_FILTER]
            .value
            .as_slice(),
    )
    .unwrap();
    assert_eq!(cors.allow_methods, "GET,POST");
    assert_eq!(cors.max_age, "86400");
    assert!(cors.allow_credentials.unwrap().value);
    let headers = &rule.r#match.as_ref().unwrap().headers;
    let cookie = headers.iter().find(|h| h.name == "cookie").unwrap();
    let Some(header_matcher::HeaderMatchSpecifier::StringMatch(string)) = &cookie.header_match_specifier
    else {
        panic!()
    };
    assert!(
        matches!(&string.match_pattern, Some(string_matcher::MatchPattern::SafeRegex(r)) if r.regex.contains("user=jason"))
    );
}

#[test]
fn redirect_rewrite_websocket_and_appended_headers() {
    let resources = resources("reviews-v2-sidecar");
    let details = vhost(&resources, "details.default.svc.cluster.local", 9080);
    let redirect = route(details, "default/details-redirect");
    assert_eq!(
        redirect.r#match.as_ref().unwrap().path_specifier,
        Some(route_match::PathSpecifier::Path("/old-details".into()))
    );
    let Some(route::Action::Redirect(redirect)) = &redirect.action else {
        panic!("expected a redirect")
    };
    assert_eq!(redirect.host_redirect, "details.default.svc.cluster.local");
    let rewrite = route(details, "default/details-rewrite");
    let matcher = rewrite.r#match.as_ref().unwrap();
    assert_eq!(
        matcher.path_specifier,
        Some(route_match::PathSpecifier::Prefix("/v1/details".into()))
    );
    assert!(matcher.headers.iter().any(|h| h.name == ":method"));
    let action = action(rewrite);
    assert_eq!(action.prefix_rewrite, "/details");
    assert_eq!(
        action.host_rewrite_specifier,
        Some(route_action::HostRewriteSpecifier::HostRewriteLiteral(
            "details.internal".into()
        ))
    );
    assert_eq!(action.upgrade_configs[0].upgrade_type, "websocket");
    assert_eq!(
        rewrite.request_headers_to_add[0].header.as_ref().unwrap().key,
        "x-pilot-route"
    );
}

#[test]
fn services_without_rules_route_to_every_instance() {
    let resources = resources("productpage-no-capture");
    let greeter = resources
        .routes
        .iter()
        .find(|r| r.name == "50051")
        .unwrap()
        .virtual_hosts
        .iter()
        .find(|v| v.name.starts_with("greeter"))
        .unwrap();
    assert_eq!(greeter.routes.len(), 1);
    assert_eq!(
        action(&greeter.routes[0]).cluster_specifier,
        Some(route_action::ClusterSpecifier::Cluster(
            "outbound|50051||greeter.default.svc.cluster.local".into()
        ))
    );
    // gRPC upstreams speak HTTP/2.
    assert!(
        cluster(&resources, "outbound|50051||greeter.default.svc.cluster.local")
            .typed_extension_protocol_options
            .contains_key("envoy.extensions.upstreams.http.v3.HttpProtocolOptions")
    );
}

#[test]
fn endpoints_follow_subsets_with_zones() {
    let resources = resources("productpage-no-capture");
    let assignment = |name: &str| {
        resources
            .endpoints
            .iter()
            .find(|e| e.cluster_name == name)
            .unwrap()
    };
    let all = assignment(&format!("outbound|9080||{REVIEWS}"));
    let zones: Vec<(String, usize)> = all
        .endpoints
        .iter()
        .map(|l| {
            (
                l.locality.as_ref().map(|l| l.zone.clone()).unwrap_or_default(),
                l.lb_endpoints.len(),
            )
        })
        .collect();
    assert_eq!(zones, [("zone-a".to_string(), 2), ("zone-b".to_string(), 1)]);
    let v2 = assignment(&subset(REVIEWS, "v2"));
    assert_eq!(v2.endpoints.len(), 1);
    assert_eq!(v2.endpoints[0].lb_endpoints.len(), 1);
    assert!(format!("{:?}", v2.endpoints[0].lb_endpoints[0]).contains("10.1.1.2"));
}

#[test]
fn destination_policies_shape_their_cluster() {
    let resources = resources("productpage-no-capture");
    let v1 = cluster(&resources, &subset(REVIEWS, "v1"));
    assert_eq!(v1.lb_policy, cluster::LbPolicy::LeastRequest as i32);
    let thresholds = &v1.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(thresholds.max_connections.as_ref().unwrap().value, 100);
    assert_eq!(thresholds.max_pending_requests.as_ref().unwrap().value, 10);
    assert_eq!(thresholds.max_requests.as_ref().unwrap().value, 100);
    assert_eq!(thresholds.max_retries.as_ref().unwrap().value, 3);
    let outlier = v1.outlier_detection.as_ref().unwrap();
    assert_eq!(outlier.consecutive_5xx.as_ref().unwrap().value, 7);
    assert_eq!(outlier.interval.as_ref().unwrap().seconds, 300);
    assert_eq!(outlier.base_ejection_time.as_ref().unwrap().seconds, 900);
    assert_eq!(outlier.max_ejection_percent.as_ref().unwrap().value, 50);
    // The policy names the v1 subset only.
    assert!(
        cluster(&resources, &subset(REVIEWS, "v2"))
            .circuit_breakers
            .is_none()
    );
}

#[test]
fn egress_and_external_services() {
    let resources = resources("productpage-no-capture");
    let kind = |c: &Cluster| c.cluster_discovery_type.clone();
    let original = Some(cluster::ClusterDiscoveryType::Type(
        cluster::DiscoveryType::OriginalDst as i32,
    ));
    let dns = Some(cluster::ClusterDiscoveryType::Type(
        cluster::DiscoveryType::StrictDns as i32,
    ));
    assert_eq!(
        kind(cluster(&resources, "outbound|443||*.googleapis.com")),
        original
    );
    assert_eq!(
        kind(cluster(&resources, "outbound|80||*.googleapis.com")),
        original
    );
    assert_eq!(
        kind(cluster(
            &resources,
            "outbound|8000||httpbin.default.svc.cluster.local"
        )),
        dns
    );
}

fn tcp_cluster(listener: &Listener) -> String {
    let Some(filter::ConfigType::TypedConfig(config)) = &listener.filter_chains[0].filters[0].config_type
    else {
        panic!()
    };
    let proxy = TcpProxy::decode(config.value.as_slice()).unwrap();
    let Some(tcp_proxy::ClusterSpecifier::Cluster(name)) = proxy.cluster_specifier else {
        panic!()
    };
    name
}

fn rds_name(listener: &Listener) -> Option<String> {
    let Some(filter::ConfigType::TypedConfig(config)) = &listener.filter_chains[0].filters[0].config_type
    else {
        panic!()
    };
    match HttpConnectionManager::decode(config.value.as_slice())
        .ok()?
        .route_specifier?
    {
        http_connection_manager::RouteSpecifier::Rds(rds) => Some(rds.route_config_name),
        _ => None,
    }
}

#[test]
fn listeners_with_and_without_capture() {
    let plain = resources("productpage-no-capture");
    let http = listener(&plain, "127.0.0.1_9080");
    assert!(http.bind_to_port.is_none(), "binds 127.0.0.1:9080");
    assert_eq!(rds_name(http).as_deref(), Some("9080"));
    assert_eq!(
        tcp_cluster(listener(&plain, "127.0.0.1_27017")),
        "outbound|27017||mongodb.default.svc.cluster.local"
    );
    assert!(!plain.listeners.iter().any(|l| l.name == "virtualOutbound"));

    let captured = resources("reviews-v2-sidecar");
    let virtual_listener = listener(&captured, "virtualOutbound");
    assert!(virtual_listener.use_original_dst.as_ref().unwrap().value);
    assert!(
        !listener(&captured, "0.0.0.0_9080")
            .bind_to_port
            .as_ref()
            .unwrap()
            .value
    );
    assert_eq!(
        tcp_cluster(listener(&captured, "10.0.0.50_27017")),
        "outbound|27017||mongodb.default.svc.cluster.local"
    );
    // Inbound: reviews v2's own port, to 127.0.0.1.
    let inbound = listener(&captured, "10.1.1.2_9080");
    assert!(rds_name(inbound).is_none(), "inbound routes are inline");
    cluster(&captured, &format!("inbound|9080||{REVIEWS}"));
}

#[test]
fn ingress_listeners_from_ingress_rules() {
    let resources = resources("ingress");
    let gateway = listener(&resources, "0.0.0.0_80");
    assert!(gateway.bind_to_port.is_none());
    assert_eq!(rds_name(gateway).as_deref(), Some("ingress_80"));
    let routes = resources.routes.iter().find(|r| r.name == "ingress_80").unwrap();
    let route = &routes.virtual_hosts[0].routes[0];
    assert_eq!(
        route.r#match.as_ref().unwrap().path_specifier,
        Some(route_match::PathSpecifier::Prefix("/productpage".into()))
    );
    assert_eq!(
        action(route).cluster_specifier,
        Some(route_action::ClusterSpecifier::Cluster(
            "outbound|9080||productpage.default.svc.cluster.local".into()
        ))
    );
    // TLS on 443 from the rule's secret, delivered by SDS; port by name.
    let tls = listener(&resources, "0.0.0.0_443");
    let socket = tls.filter_chains[0].transport_socket.as_ref().expect("TLS");
    assert_eq!(socket.name, "envoy.transport_sockets.tls");
    let routes = resources.routes.iter().find(|r| r.name == "ingress_443").unwrap();
    assert_eq!(
        action(&routes.virtual_hosts[0].routes[0]).cluster_specifier,
        Some(route_action::ClusterSpecifier::Cluster(
            "outbound|9080||productpage.default.svc.cluster.local".into()
        ))
    );
    // Routers get clusters only.
    assert!(
        generate(&support::proxies()[3].1, &support::registry(), &support::mesh())
            .listeners
            .is_empty()
    );
}
