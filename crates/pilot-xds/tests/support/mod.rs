//! A bookinfo-sized mesh: services, versioned instances, the bookinfo
//! example rules plus rules using every other routing feature.

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses its own part of the shared support module"
)]

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use pilot_api::istio;
use pilot_model::{
    Labels, NetworkEndpoint, Port, Protocol, Service, ServiceDiscovery, ServiceInstance, document,
};
use pilot_routing::RoutingConfigs;
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::{MeshConfig, Proxy};

pub(crate) mod gateway;
pub(crate) mod sidecar;
pub(crate) mod static_envoy;

pub(crate) const REVIEWS: &str = "reviews.default.svc.cluster.local";
pub(crate) const RATINGS: &str = "ratings.default.svc.cluster.local";

/// More rules: redirect, rewrite, mirror, CORS, appended headers,
/// websocket, retries, regex and prefix header matches, method match, and
/// an ingress with TLS by port name.
pub(crate) const EXTRA_RULES: &str = r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: details-redirect, namespace: default}
spec:
  destination: {name: details}
  precedence: 5
  match: {request: {headers: {uri: {exact: /old-details}}}}
  redirect: {uri: /details, authority: details.default.svc.cluster.local}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: details-rewrite, namespace: default}
spec:
  destination: {name: details}
  precedence: 4
  match: {request: {headers: {uri: {prefix: /v1/details}, method: {exact: GET}}}}
  rewrite: {uri: /details, authority: details.internal}
  route: [{labels: {version: v1}}]
  websocketUpgrade: true
  appendHeaders: {x-pilot-route: rewrite}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: productpage-cors-mirror, namespace: default}
spec:
  destination: {name: productpage}
  precedence: 1
  match: {request: {headers: {cookie: {regex: "^(.*?;)?(user=jason)(;.*)?$"}, x-canary: {prefix: "yes"}}}}
  route: [{labels: {version: v1}}]
  mirror: {name: productpage, labels: {version: v2}}
  corsPolicy:
    allowOrigin: [https://bookinfo.example]
    allowMethods: [GET, POST]
    allowHeaders: [x-custom]
    exposeHeaders: [x-trace]
    maxAge: 24h
    allowCredentials: true
  httpReqRetries: {simpleRetry: {attempts: 3, perTryTimeout: 2s}}
  httpReqTimeout: {simpleTimeout: {timeout: 10s}}
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: bookinfo-tls, namespace: default}
spec:
  port: 443
  tlsSecret: ingress-certs
  destination: {name: productpage}
  destinationPortName: http
  match: {request: {headers: {uri: {prefix: /}}}}
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The registry of the mesh.
pub(crate) fn registry() -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    let http = |name: &str| {
        Service::new(
            format!("{name}.default.svc.cluster.local"),
            vec![Port::new("http", 9080, Protocol::Http)],
        )
    };
    for name in ["productpage", "reviews", "ratings", "details"] {
        registry.add_service(http(name));
    }
    let mut mongo = Service::new(
        "mongodb.default.svc.cluster.local",
        vec![Port::new("tcp-mongo", 27017, Protocol::Mongo)],
    );
    mongo.address = Some(ip("10.0.0.50"));
    registry.add_service(mongo);
    registry.add_service(Service::new(
        "greeter.default.svc.cluster.local",
        vec![Port::new("grpc", 50051, Protocol::Grpc)],
    ));
    let mut external = Service::new(
        "httpbin.default.svc.cluster.local",
        vec![Port::new("http", 8000, Protocol::Http)],
    );
    external.external_name = Some("httpbin.org".into());
    registry.add_service(external);

    let instances = [
        ("productpage", "10.1.0.1", "v1", None),
        ("productpage", "10.1.0.2", "v2", None),
        ("reviews", "10.1.1.1", "v1", Some("zone-a")),
        ("reviews", "10.1.1.2", "v2", Some("zone-a")),
        ("reviews", "10.1.1.3", "v3", Some("zone-b")),
        ("ratings", "10.1.2.1", "v1", None),
        ("details", "10.1.3.1", "v1", None),
        ("mongodb", "10.1.4.1", "v1", None),
        ("greeter", "10.1.5.1", "v1", None),
    ];
    for (name, address, version, zone) in instances {
        let service = registry
            .get_service(&format!("{name}.default.svc.cluster.local"))
            .unwrap();
        for port in &service.ports {
            registry
                .add_instance(
                    ServiceInstance::new(
                        service.clone(),
                        NetworkEndpoint::new(ip(address), port.port, port.clone()),
                        Labels::from_pairs([("app", name), ("version", version)]),
                    )
                    .with_availability_zone(zone.map(str::to_string)),
                )
                .unwrap();
        }
    }
    registry
}

/// The bookinfo example rules and [`EXTRA_RULES`], compiled.
pub(crate) fn mesh() -> MeshConfig {
    MeshConfig::new(configs().compile())
}

/// The bookinfo example rules and [`EXTRA_RULES`]; where two files define
/// the same object, the later one wins (as `pilotctl apply` would leave it).
pub(crate) fn configs() -> RoutingConfigs {
    let registry = istio::registry();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/bookinfo");
    let mut objects = BTreeMap::new();
    for object in document::read_dir(&dir, &registry).unwrap() {
        objects.insert(object.key(), object);
    }
    for object in document::parse("extra.yaml", EXTRA_RULES, &registry).unwrap() {
        objects.insert(object.key(), object);
    }
    RoutingConfigs::from_configs(objects.values()).unwrap()
}

/// The sidecar of reviews v2 (capture on), the sidecar of productpage v1
/// without capture, an ingress and a router.
pub(crate) fn proxies() -> Vec<(&'static str, Proxy)> {
    let no_capture: BTreeMap<String, String> = [("INTERCEPTION_MODE".to_string(), "NONE".to_string())].into();
    vec![
        (
            "reviews-v2-sidecar",
            Proxy::from_node_id("sidecar~10.1.1.2~reviews-v2.default~default.svc.cluster.local").unwrap(),
        ),
        (
            "productpage-no-capture",
            Proxy::from_node_id("sidecar~10.1.0.1~productpage-v1.default~default.svc.cluster.local")
                .unwrap()
                .with_metadata(&no_capture)
                .unwrap(),
        ),
        (
            "ingress",
            Proxy::from_node_id("ingress~10.2.0.1~ingress.istio-system~istio-system.svc.cluster.local")
                .unwrap(),
        ),
        (
            "router",
            Proxy::from_node_id("router~10.2.0.2~egress.istio-system~istio-system.svc.cluster.local")
                .unwrap(),
        ),
    ]
}
