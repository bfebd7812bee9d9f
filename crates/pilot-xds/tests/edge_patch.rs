//! An edge proxy's configuration after a change to some gateway hosts'
//! routes alone: `RoutingModel::changed_edge_hosts` names those hosts, the
//! proxy's listeners and scopes are the same as before, and
//! `edge_route_configurations_holding` builds exactly the route
//! configurations that differ (and the same ones as the whole plan),
//! with scoped routes (one configuration per host) and without, for
//! Gateway API routes, VirtualServices on an Istio Gateway, a host both
//! name (merged) and a TLS-terminating server's own configuration.

use std::collections::{BTreeMap, BTreeSet};

use pilot_api::default_registry;
use pilot_model::{Labels, Port, Protocol, Service, document};
use pilot_routing::{RoutingConfigs, RoutingModel};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::Proxy;
use pilot_xds::envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use pilot_xds::serving::{SCOPED_MIN_HOSTS, edge_route_configurations_holding, listener_plan};
use prost::Message;

/// What differs from the base objects.
#[derive(Default, Clone, Copy)]
struct Edit {
    /// This HTTPRoute's backend is `v2`.
    route_to_v2: Option<usize>,
    /// The VirtualService on the shared host sends to `v1` instead of `v2`.
    shared_to_v1: bool,
    /// The TLS server's VirtualService sends to `v2` instead of `v1`.
    secure_to_v2: bool,
    /// One more HTTPRoute (a new host: not a change of routes alone).
    one_more: bool,
}

/// A Gateway API Gateway with `routes` HTTPRoutes (one host each) and an
/// Istio Gateway on the same router: a host both name, one of its own,
/// and a TLS-terminating server.
fn objects(routes: usize, edit: Edit) -> String {
    let mut out = format!(
        "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: pilot}}
spec: {{controllerName: pilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: web}}
spec:
  gatewayClassName: pilot
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: istio, namespace: web}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: 80, name: http, protocol: HTTP}}
    hosts: [shared.example.com, istio.example.com]
  - port: {{number: 443, name: https, protocol: HTTPS}}
    hosts: [secure.example.com]
    tls: {{mode: SIMPLE, serverCertificate: /etc/certs/cert.pem, privateKey: /etc/certs/key.pem}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: shared, namespace: web}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [shared.example.com]
  rules: [{{backendRefs: [{{name: v1, port: 8080}}]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: shared, namespace: web}}
spec:
  hosts: [shared.example.com, istio.example.com]
  gateways: [istio]
  http: [{{route: [{{destination: {{host: {shared}}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: secure, namespace: web}}
spec:
  hosts: [secure.example.com]
  gateways: [istio]
  http: [{{route: [{{destination: {{host: {secure}}}}}]}}]
",
        shared = if edit.shared_to_v1 { "v1" } else { "v2" },
        secure = if edit.secure_to_v2 { "v2" } else { "v1" },
    );
    for i in 0..routes + usize::from(edit.one_more) {
        let backend = if edit.route_to_v2 == Some(i) { "v2" } else { "v1" };
        out.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: route-{i}, namespace: web}}\n\
             spec:\n  parentRefs: [{{name: edge}}]\n  hostnames: [route-{i}.example.com]\n  \
             rules:\n  - matches: [{{path: {{type: PathPrefix, value: /r{i}}}}}]\n    \
             backendRefs: [{{name: {backend}, port: 8080}}]\n"
        ));
    }
    out
}

fn configs(routes: usize, edit: Edit) -> RoutingConfigs {
    let objects = document::parse("edge.yaml", &objects(routes, edit), &default_registry()).unwrap();
    RoutingConfigs::from_configs(&objects).unwrap()
}

fn registry() -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    for name in ["v1", "v2"] {
        registry.add_service(Service::new(
            format!("{name}.web.svc.cluster.local"),
            vec![Port::new("http", 8080, Protocol::Http)],
        ));
    }
    registry
}

/// A router in `web` serving both gateways.
fn router() -> Proxy {
    let mut proxy = Proxy::from_node_id("router~10.9.0.2~edge-7d9f.web~web.svc.cluster.local").unwrap();
    proxy.labels = Labels::from_pairs([
        ("gateway.networking.k8s.io/gateway-name", "edge"),
        ("istio", "ingressgateway"),
    ]);
    proxy
}

/// The router's plan under `model`: its listeners and scopes encoded, and
/// its route configurations built, by name.
struct Plan {
    listeners: Vec<Vec<u8>>,
    scopes: Vec<Vec<u8>>,
    routes: BTreeMap<String, RouteConfiguration>,
}

fn plan(model: &RoutingModel) -> Plan {
    let plan = listener_plan(&router(), &registry(), model, None, &[]);
    Plan {
        listeners: plan.listeners.iter().map(Message::encode_to_vec).collect(),
        scopes: plan.scoped_routes.iter().map(Message::encode_to_vec).collect(),
        routes: plan
            .ingress_routes
            .iter()
            .map(|config| (config.name.clone(), config.build()))
            .collect(),
    }
}

/// Checks the patch of `edit` on `routes` HTTPRoutes, compiling the new
/// model from scratch and from the old one: the domains named are
/// `expected`, and the patch is exactly what differs.
fn patch_is_what_differs(routes: usize, edit: Edit, expected: &[&str]) {
    let base = configs(routes, Edit::default());
    let before = base.compile();
    let edited = configs(routes, edit);
    for after in [edited.compile(), edited.compile_from(&base, &before).model] {
        let changed = after
            .changed_edge_hosts(&before)
            .expect("only gateway hosts' routes changed");
        let expected: BTreeSet<String> = expected.iter().map(|d| d.to_string()).collect();
        assert_eq!(changed, expected);
        let old = plan(&before);
        let new = plan(&after);
        assert_eq!(new.listeners, old.listeners, "the listeners are the same");
        assert_eq!(new.scopes, old.scopes, "the scopes are the same");
        assert_eq!(
            !new.scopes.is_empty(),
            routes >= SCOPED_MIN_HOSTS,
            "port 80's routes are scoped with many hosts only"
        );
        assert_eq!(
            new.routes.keys().collect::<Vec<_>>(),
            old.routes.keys().collect::<Vec<_>>(),
            "the same route configurations"
        );
        let patch: BTreeMap<String, RouteConfiguration> =
            edge_route_configurations_holding(&router(), &registry(), &after, None, &changed)
                .iter()
                .map(|config| (config.name.clone(), config.build()))
                .collect();
        assert!(!patch.is_empty());
        for (name, config) in &new.routes {
            match patch.get(name) {
                Some(patched) => assert_eq!(patched, config, "{name}: built as the plan builds it"),
                None => assert_eq!(&old.routes[name], config, "{name}: not in the patch, so the same"),
            }
        }
        for (name, patched) in &patch {
            assert!(new.routes.contains_key(name), "{name}: one of the plan's");
            let domains: Vec<&String> = patched.virtual_hosts.iter().flat_map(|h| &h.domains).collect();
            assert!(
                domains.iter().any(|d| changed.contains(*d)),
                "{name} ({domains:?}) holds a changed host"
            );
        }
        // What changed is in the patch.
        for (name, config) in &new.routes {
            if old.routes[name] != *config {
                assert!(patch.contains_key(name), "{name} changed and is not in the patch");
            }
        }
    }
}

#[test]
fn one_route_of_a_scoped_gateway_is_one_configuration() {
    let routes = SCOPED_MIN_HOSTS + 10;
    patch_is_what_differs(
        routes,
        Edit {
            route_to_v2: Some(7),
            ..Default::default()
        },
        &["route-7.example.com"],
    );
}

#[test]
fn a_host_two_gateways_name_is_patched_merged() {
    let routes = SCOPED_MIN_HOSTS + 10;
    patch_is_what_differs(
        routes,
        Edit {
            shared_to_v1: true,
            route_to_v2: Some(0),
            ..Default::default()
        },
        // The Istio Gateway's server names both hosts of the
        // VirtualService; the HTTPRoute's host too.
        &["istio.example.com", "route-0.example.com", "shared.example.com"],
    );
}

#[test]
fn a_route_of_an_unscoped_configuration_patches_it_whole() {
    patch_is_what_differs(
        5,
        Edit {
            route_to_v2: Some(3),
            ..Default::default()
        },
        &["route-3.example.com"],
    );
}

#[test]
fn a_tls_servers_host_patches_its_own_configuration() {
    for routes in [5, SCOPED_MIN_HOSTS + 10] {
        patch_is_what_differs(
            routes,
            Edit {
                secure_to_v2: true,
                ..Default::default()
            },
            &["secure.example.com"],
        );
    }
}

#[test]
fn a_new_host_or_nothing_changed_is_not_a_patch_of_routes() {
    let base = configs(5, Edit::default());
    let before = base.compile();
    let more = configs(
        5,
        Edit {
            one_more: true,
            ..Default::default()
        },
    );
    assert_eq!(more.compile().changed_edge_hosts(&before), None, "a new host");
    assert_eq!(
        more.compile_from(&base, &before)
            .model
            .changed_edge_hosts(&before),
        None
    );
    assert_eq!(
        base.compile().changed_edge_hosts(&before),
        Some(BTreeSet::new()),
        "nothing changed"
    );
}
