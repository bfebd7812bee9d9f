//! An edge proxy's route configurations assembled from encoded virtual
//! hosts kept from push to push.
//!
//! A router serving a Gateway with thousands of routes has as many virtual
//! hosts in one route configuration; a change to one route changes one of
//! them (the routing model keeps the others, shared). So each gateway
//! virtual host is encoded once and kept, keyed by what it is built from
//! ([`GatewayVirtualHost`]: the model's host itself, the port, the proxy's
//! admitted matches and the destinations' ports): the next push takes
//! every key it meets again as encoded and encodes only the others. The
//! result is byte for byte the encoding of
//! [`EdgeRouteConfiguration::build`] (prost writes fields in tag order, as
//! this does).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_xds::serving::{EdgeRouteConfiguration, EdgeVirtualHost, GatewayVirtualHost};
use prost::encoding::{WireType, encode_key, encode_varint};

/// `RouteConfiguration.name`, `.virtual_hosts`, `.validate_clusters`,
/// `.ignore_port_in_host_matching`.
const CONFIG_NAME: u32 = 1;
const CONFIG_VIRTUAL_HOSTS: u32 = 2;
const CONFIG_REQUEST_HEADERS_TO_REMOVE: u32 = 8;
const CONFIG_VALIDATE_CLUSTERS: u32 = 7;
const CONFIG_IGNORE_PORT_IN_HOST_MATCHING: u32 = 14;

/// One push's encoded gateway virtual hosts (each a whole
/// `RouteConfiguration.virtual_hosts` entry), with the previous push's to
/// take from.
#[derive(Default)]
pub(crate) struct EdgeHosts {
    encoded: Mutex<HashMap<GatewayVirtualHost, Bytes>>,
    previous: Arc<HashMap<GatewayVirtualHost, Bytes>>,
    /// Virtual hosts encoded (not taken from this push or the one before).
    pub(crate) built: AtomicUsize,
}

impl EdgeHosts {
    /// This push's cache, taking from `before` (the previous push's)
    /// whatever this push meets again. A push that met none (no edge
    /// proxy's listeners were built: their classes were kept) hands on
    /// what it was handed, shared, not copied.
    pub(crate) fn after(before: &EdgeHosts) -> Self {
        let encoded = before.encoded.lock().unwrap_or_else(|p| p.into_inner());
        EdgeHosts {
            previous: if encoded.is_empty() {
                Arc::clone(&before.previous)
            } else {
                Arc::new(encoded.clone())
            },
            ..Default::default()
        }
    }

    /// The encoded entry of `host`: this push's, the previous push's, or
    /// encoded now.
    fn entry(&self, host: &GatewayVirtualHost) -> Bytes {
        if let Some(found) = self.encoded.lock().unwrap_or_else(|p| p.into_inner()).get(host) {
            return found.clone();
        }
        // Encoded without the lock: two classes racing encode the same
        // bytes, and the first one stored wins.
        let entry = match self.previous.get(host) {
            Some(kept) => kept.clone(),
            None => {
                self.built.fetch_add(1, Ordering::Relaxed);
                let mut out = BytesMut::new();
                prost::encoding::message::encode(CONFIG_VIRTUAL_HOSTS, &host.build(), &mut out);
                out.freeze()
            }
        };
        self.encoded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(host.clone())
            .or_insert(entry)
            .clone()
    }

    /// The encoding of `config.build()`, its gateway virtual hosts taken
    /// from this cache.
    pub(crate) fn route_configuration(&self, config: &EdgeRouteConfiguration) -> Vec<u8> {
        let entries: Vec<Bytes> = config
            .virtual_hosts
            .iter()
            .map(|host| match host {
                EdgeVirtualHost::Gateway(host) => self.entry(host),
                EdgeVirtualHost::Built(host) => {
                    let mut out = BytesMut::new();
                    prost::encoding::message::encode(CONFIG_VIRTUAL_HOSTS, host, &mut out);
                    out.freeze()
                }
            })
            .collect();
        let validate = BoolValue { value: false };
        // Written once into a buffer of the right size: a router's route
        // configuration runs to hundreds of kilobytes.
        let size = prost::encoding::string::encoded_len(CONFIG_NAME, &config.name)
            + entries.iter().map(Bytes::len).sum::<usize>()
            + prost::encoding::string::encoded_len_repeated(
                CONFIG_REQUEST_HEADERS_TO_REMOVE,
                &config.request_headers_to_remove,
            )
            + prost::encoding::message::encoded_len(CONFIG_VALIDATE_CLUSTERS, &validate)
            + 2;
        let mut out = Vec::with_capacity(size);
        prost::encoding::string::encode(CONFIG_NAME, &config.name, &mut out);
        for entry in &entries {
            out.extend_from_slice(entry);
        }
        // In the order prost writes the fields, by tag: `validate_clusters`
        // (7) before the removed headers (8).
        prost::encoding::message::encode(CONFIG_VALIDATE_CLUSTERS, &validate, &mut out);
        prost::encoding::string::encode_repeated(
            CONFIG_REQUEST_HEADERS_TO_REMOVE,
            &config.request_headers_to_remove,
            &mut out,
        );
        if config.ignore_port_in_host_matching {
            encode_key(CONFIG_IGNORE_PORT_IN_HOST_MATCHING, WireType::Varint, &mut out);
            encode_varint(1, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
    use pilot_api::default_registry;
    use pilot_model::{Labels, Port, Protocol, Service, ServiceDiscovery, document};
    use pilot_routing::{RoutingConfigs, RoutingModel};
    use pilot_store_memory::MemoryServiceRegistry;
    use pilot_xds::Proxy;
    use pilot_xds::serving::listener_plan;
    use prost::Message;

    use super::*;

    /// A Gateway API Gateway and an Istio Gateway on one port of one
    /// router: two routes of their own hostnames, a hostname both name
    /// (its virtual host merges the two), and a VirtualService sending to
    /// services without naming ports (the registry's decide).
    fn objects(a_backend: &str) -> String {
        format!(
            "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: pilot, resourceVersion: \"1\"}}
spec: {{controllerName: pilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: web, resourceVersion: \"1\"}}
spec:
  gatewayClassName: pilot
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: a, namespace: web, resourceVersion: {a_backend}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [a.example.com]
  rules: [{{backendRefs: [{{name: {a_backend}, port: 8080}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: b, namespace: web, resourceVersion: \"1\"}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [b.example.com]
  rules: [{{backendRefs: [{{name: v1, port: 8080}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: shared, namespace: web, resourceVersion: \"1\"}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [shared.example.com]
  rules: [{{backendRefs: [{{name: v1, port: 8080}}]}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: istio, namespace: web, resourceVersion: \"1\"}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: 80, name: http, protocol: HTTP}}
    hosts: [shared.example.com, istio.example.com]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: shared, namespace: web, resourceVersion: \"1\"}}
spec:
  hosts: [shared.example.com]
  gateways: [istio]
  http: [{{route: [{{destination: {{host: v2}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: istio, namespace: web, resourceVersion: \"1\"}}
spec:
  hosts: [istio.example.com]
  gateways: [istio]
  http: [{{route: [{{destination: {{host: v1}}}}], mirror: {{host: v2}}}}]
"
        )
    }

    fn routing(a_backend: &str) -> RoutingConfigs {
        let objects = document::parse("edge.yaml", &objects(a_backend), &default_registry()).unwrap();
        RoutingConfigs::from_configs(&objects).unwrap()
    }

    fn services(port: u16) -> MemoryServiceRegistry {
        let registry = MemoryServiceRegistry::new();
        for name in ["v1", "v2"] {
            registry.add_service(Service::new(
                format!("{name}.web.svc.cluster.local"),
                vec![Port::new("http", port, Protocol::Http)],
            ));
        }
        registry
    }

    fn router() -> Proxy {
        let mut proxy = Proxy::from_node_id("router~10.9.0.2~edge-7d9f.web~web.svc.cluster.local").unwrap();
        proxy.labels = Labels::from_pairs([
            ("gateway.networking.k8s.io/gateway-name", "edge"),
            ("istio", "ingressgateway"),
        ]);
        proxy
    }

    /// The router's route configurations encoded through `cache`, each
    /// checked against its own encoding, byte for byte.
    fn encode(
        cache: &EdgeHosts,
        model: &RoutingModel,
        registry: &dyn ServiceDiscovery,
    ) -> Vec<RouteConfiguration> {
        let plan = listener_plan(&router(), registry, model, None, &[]);
        assert!(!plan.ingress_routes.is_empty(), "the router serves the gateways");
        plan.ingress_routes
            .iter()
            .map(|config| {
                let encoded = cache.route_configuration(config);
                let expected = config.build();
                assert_eq!(
                    encoded,
                    expected.encode_to_vec(),
                    "{}: the same bytes",
                    config.name
                );
                // As a scoped host's (headers removed, written after
                // `validate_clusters` as prost writes them, by tag).
                let mut scoped = config.clone();
                scoped.request_headers_to_remove = vec!["x-pilot-scope".into()];
                assert_eq!(
                    cache.route_configuration(&scoped),
                    scoped.build().encode_to_vec(),
                    "{}, scoped: the same bytes",
                    config.name
                );
                expected
            })
            .collect()
    }

    fn host<'a>(configs: &'a [RouteConfiguration], domain: &str) -> &'a VirtualHost {
        configs
            .iter()
            .flat_map(|c| &c.virtual_hosts)
            .find(|h| h.domains == [domain])
            .unwrap()
    }

    #[test]
    fn an_edge_route_change_encodes_its_virtual_host_alone() {
        let before = routing("v1");
        let model = before.compile();
        let registry = services(8080);
        let first = EdgeHosts::default();
        let configs = encode(&first, &model, &registry);
        let hosts: Vec<&str> = configs
            .iter()
            .flat_map(|c| &c.virtual_hosts)
            .flat_map(|h| &h.domains)
            .map(String::as_str)
            .collect();
        assert_eq!(
            hosts,
            [
                "istio.example.com",
                "shared.example.com",
                "a.example.com",
                "b.example.com"
            ],
            "one route configuration on port 80 (the Istio Gateway's server first); the shared host once"
        );
        let shared = host(&configs, "shared.example.com");
        assert_eq!(
            shared.routes.len(),
            2,
            "the shared host has both gateways' routes"
        );
        // The shared host is built whole (two servers name it); the
        // others are encoded once each.
        assert_eq!(first.built.load(Ordering::Relaxed), 3);
        let again = EdgeHosts::after(&first);
        encode(&again, &model, &registry);
        assert_eq!(
            again.built.load(Ordering::Relaxed),
            0,
            "nothing changed: nothing encoded"
        );

        // One route's backend: the model keeps the other hosts, and so
        // does the cache.
        let after = routing("v2");
        let recompiled = after.compile_from(&before, &model);
        let changed = EdgeHosts::after(&again);
        let configs = encode(&changed, &recompiled.model, &registry);
        assert_eq!(changed.built.load(Ordering::Relaxed), 1, "a.example.com's alone");
        let cluster = format!("{:?}", host(&configs, "a.example.com").routes);
        assert!(cluster.contains("v2.web.svc.cluster.local"), "{cluster}");

        // The registry moves the services' port: the virtual host whose
        // destinations name none follows it.
        let moved = EdgeHosts::after(&changed);
        let configs = encode(&moved, &recompiled.model, &services(9090));
        assert_eq!(
            moved.built.load(Ordering::Relaxed),
            1,
            "istio.example.com's alone"
        );
        let routes = format!("{:?}", host(&configs, "istio.example.com").routes);
        assert!(routes.contains("|9090|"), "{routes}");
    }
}
