//! A model compiled from the previous one equals one compiled from
//! scratch, for random sequences of changes to random objects (the
//! routing kinds, and the Sidecars and security policies compiled as
//! wholes); and the hosts it says changed are those a comparison of the
//! two models finds.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{RoutingConfigs, RoutingModel};
use pilot_api::{gateway_api, istio, networking, security};
use pilot_model::{DynConfig, KindRegistry, document};

/// One object of a small mesh of four hosts (`h0`..`h3`), as YAML.
#[derive(Debug, Clone)]
enum Object {
    RouteRule {
        host: u8,
        precedence: u8,
        targets: Vec<(Option<u8>, u8)>,
        mirror: Option<u8>,
        source: Option<u8>,
    },
    DestinationPolicy {
        host: u8,
        version: Option<u8>,
        random: bool,
    },
    VirtualService {
        hosts: Vec<u8>,
        gateway: bool,
        routes: Vec<(u8, Option<u8>)>,
        mirror: Option<u8>,
    },
    DestinationRule {
        host: u8,
        hash: bool,
        subsets: Vec<u8>,
    },
    EgressRule {
        port: u16,
    },
    Sidecar {
        selector: bool,
        import: u8,
        port: Option<u16>,
        registry_only: bool,
    },
    AuthorizationPolicy {
        deny: bool,
        port: u16,
    },
    PeerAuthentication {
        selector: bool,
        strict: bool,
    },
    /// A Gateway API HTTPRoute attached to the Service of `parent`, from
    /// another namespace when `consumer`; to the Gateway `edge`
    /// ([`edge`]) instead, or as well, by `attach`, for `hostnames`.
    HttpRoute {
        parent: u8,
        consumer: bool,
        port: Option<u16>,
        backends: Vec<(u8, u8)>,
        exact: bool,
        attach: Attach,
        hostnames: Vec<u8>,
    },
}

impl Object {
    fn yaml(&self, name: &str) -> String {
        match self {
            Object::RouteRule {
                host,
                precedence,
                targets,
                mirror,
                source,
            } => {
                let weight = 100 / targets.len();
                let targets: Vec<String> = targets
                    .iter()
                    .enumerate()
                    .map(|(i, (to, version))| {
                        let weight = if i == 0 {
                            100 - weight * (targets.len() - 1)
                        } else {
                            weight
                        };
                        let to = to
                            .map(|t| format!("destination: {{name: h{t}}}, "))
                            .unwrap_or_default();
                        format!("{{{to}labels: {{version: v{version}}}, weight: {weight}}}")
                    })
                    .collect();
                let mirror = mirror
                    .map(|m| format!("  mirror: {{name: h{m}, labels: {{version: v1}}}}\n"))
                    .unwrap_or_default();
                let source = source
                    .map(|s| format!("  match: {{source: {{name: h{s}}}}}\n"))
                    .unwrap_or_default();
                format!(
                    "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  destination: {{name: h{host}}}\n  precedence: {precedence}\n  route: [{}]\n{mirror}{source}",
                    targets.join(", ")
                )
            }
            Object::DestinationPolicy {
                host,
                version,
                random,
            } => {
                let labels = version
                    .map(|v| format!(", labels: {{version: v{v}}}"))
                    .unwrap_or_default();
                let lb = if *random { "RANDOM" } else { "ROUND_ROBIN" };
                format!(
                    "apiVersion: config.istio.io/v1alpha2\nkind: DestinationPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  destination: {{name: h{host}{labels}}}\n  loadBalancing: {{name: {lb}}}\n"
                )
            }
            Object::VirtualService {
                hosts,
                gateway,
                routes,
                mirror,
            } => {
                let hosts: Vec<String> = hosts.iter().map(|h| format!("h{h}")).collect();
                let gateways = if *gateway { "  gateways: [gw]\n" } else { "" };
                let mirror = mirror
                    .map(|m| format!(", mirror: {{host: h{m}}}"))
                    .unwrap_or_default();
                let routes: Vec<String> = routes
                    .iter()
                    .map(|(to, subset)| {
                        let subset = subset.map(|s| format!(", subset: s{s}")).unwrap_or_default();
                        format!("{{route: [{{destination: {{host: h{to}{subset}}}}}]{mirror}}}")
                    })
                    .collect();
                format!(
                    "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [{}]\n{gateways}  http: [{}]\n",
                    hosts.join(", "),
                    routes.join(", ")
                )
            }
            Object::DestinationRule { host, hash, subsets } => {
                let policy = if *hash {
                    "  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}\n"
                } else {
                    ""
                };
                let subsets: Vec<String> = subsets
                    .iter()
                    .map(|s| format!("{{name: s{s}, labels: {{version: v{s}}}}}"))
                    .collect();
                format!(
                    "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  host: h{host}\n{policy}  subsets: [{}]\n",
                    subsets.join(", ")
                )
            }
            Object::EgressRule { port } => format!(
                "apiVersion: config.istio.io/v1alpha2\nkind: EgressRule\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  destination: {{service: api.example.com}}\n  ports: [{{port: {port}, protocol: http}}]\n"
            ),
            Object::Sidecar {
                selector,
                import,
                port,
                registry_only,
            } => {
                let selector = if *selector {
                    "  workloadSelector: {labels: {app: a}}\n"
                } else {
                    ""
                };
                let port = port
                    .map(|p| format!("port: {{number: {p}, protocol: HTTP, name: http}}, "))
                    .unwrap_or_default();
                let mode = if *registry_only {
                    "REGISTRY_ONLY"
                } else {
                    "ALLOW_ANY"
                };
                format!(
                    "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{selector}  egress: [{{{port}hosts: [./h{import}.default.svc.cluster.local]}}]\n  outboundTrafficPolicy: {{mode: {mode}}}\n"
                )
            }
            Object::AuthorizationPolicy { deny, port } => {
                let action = if *deny { "DENY" } else { "ALLOW" };
                format!(
                    "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  action: {action}\n  rules: [{{to: [{{operation: {{ports: [\"{port}\"]}}}}]}}]\n"
                )
            }
            Object::PeerAuthentication { selector, strict } => {
                let selector = if *selector {
                    "  selector: {matchLabels: {app: a}}\n"
                } else {
                    ""
                };
                let mode = if *strict { "STRICT" } else { "PERMISSIVE" };
                format!(
                    "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{selector}  mtls: {{mode: {mode}}}\n"
                )
            }
            Object::HttpRoute {
                parent,
                consumer,
                port,
                backends,
                exact,
                attach,
                hostnames,
            } => {
                let namespace = if *consumer { "other" } else { "default" };
                let service_port = port.map(|p| format!(", port: {p}")).unwrap_or_default();
                let service = format!(
                    "{{group: \"\", kind: Service, name: h{parent}, namespace: default{service_port}}}"
                );
                let section = match port {
                    Some(80) => ", sectionName: http",
                    Some(_) => ", port: 8080",
                    None => "",
                };
                let gateway = format!("{{name: edge, namespace: default{section}}}");
                let parents = match attach {
                    Attach::Service => service,
                    Attach::Gateway => gateway,
                    Attach::Both => format!("{service}, {gateway}"),
                };
                let hostnames: Vec<&str> = hostnames.iter().map(|h| HOSTNAMES[usize::from(*h)]).collect();
                let path = if *exact { "Exact" } else { "PathPrefix" };
                let backends: Vec<String> = backends
                    .iter()
                    .map(|(to, weight)| {
                        format!("{{name: h{to}, namespace: default, port: 80, weight: {weight}}}")
                    })
                    .collect();
                format!(
                    "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  parentRefs: [{parents}]\n  hostnames: [{}]\n  rules: [{{matches: [{{path: {{type: {path}, value: /a}}}}], backendRefs: [{}]}}]\n",
                    hostnames.join(", "),
                    backends.join(", ")
                )
            }
        }
    }
}

/// How an HTTPRoute attaches.
#[derive(Debug, Clone, Copy)]
enum Attach {
    Service,
    Gateway,
    Both,
}

/// The hostnames an HTTPRoute may name: one of the Gateway's listeners'
/// exactly, one its wildcard covers, that wildcard, one of the `HTTPS`
/// listeners', one no listener with a hostname serves.
const HOSTNAMES: [&str; 5] = [
    "a.example.com",
    "b.example.com",
    "\"*.example.com\"",
    "a.example.org",
    "c.example.net",
];

/// The GatewayClass of pilot's controller and its Gateway `edge`, present
/// throughout: an HTTP listener for every hostname, two HTTP listeners
/// sharing a port (a wildcard and an exact hostname), and two `HTTPS`
/// listeners sharing a port.
fn edge() -> [String; 2] {
    let class = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: pilot}}\nspec: {{controllerName: {}}}\n",
        crate::gateway_api_status::CONTROLLER_NAME
    );
    let tls = "tls: {mode: Terminate, certificateRefs: [{name: cert}]}";
    let gateway = format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\nspec:\n  gatewayClassName: pilot\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP}}\n  - {{name: wild, port: 8080, protocol: HTTP, hostname: \"*.example.com\"}}\n  - {{name: exact, port: 8080, protocol: HTTP, hostname: a.example.com}}\n  - {{name: https-org, port: 443, protocol: HTTPS, hostname: a.example.org, {tls}}}\n  - {{name: https-com, port: 443, protocol: HTTPS, hostname: \"*.example.com\", {tls}}}\n"
    );
    [class, gateway]
}

fn host() -> impl Strategy<Value = u8> {
    0..4u8
}

fn object() -> impl Strategy<Value = Object> {
    prop_oneof![
        3 => (
            host(),
            0..2u8,
            prop::collection::vec((prop::option::of(host()), 0..3u8), 1..3),
            prop::option::of(host()),
            prop::option::weighted(0.2, host()),
        )
            .prop_map(|(host, precedence, targets, mirror, source)| Object::RouteRule {
                host,
                precedence,
                targets,
                mirror,
                source,
            }),
        1 => (host(), prop::option::of(0..3u8), any::<bool>())
            .prop_map(|(host, version, random)| Object::DestinationPolicy { host, version, random }),
        3 => (
            prop::collection::btree_set(host(), 1..3).prop_map(|h| h.into_iter().collect::<Vec<_>>()),
            prop::bool::weighted(0.2),
            prop::collection::vec((host(), prop::option::of(0..3u8)), 1..3),
            prop::option::of(host()),
        )
            .prop_map(|(hosts, gateway, routes, mirror)| Object::VirtualService {
                hosts,
                gateway,
                routes,
                mirror,
            }),
        3 => (host(), any::<bool>(), prop::collection::btree_set(0..3u8, 0..3))
            .prop_map(|(host, hash, subsets)| Object::DestinationRule {
                host,
                hash,
                subsets: subsets.into_iter().collect(),
            }),
        1 => (80..82u16).prop_map(|port| Object::EgressRule { port }),
        1 => (any::<bool>(), host(), prop::option::of(80..82u16), any::<bool>()).prop_map(
            |(selector, import, port, registry_only)| Object::Sidecar {
                selector,
                import,
                port,
                registry_only,
            }
        ),
        1 => (any::<bool>(), 80..82u16).prop_map(|(deny, port)| Object::AuthorizationPolicy { deny, port }),
        1 => (any::<bool>(), any::<bool>())
            .prop_map(|(selector, strict)| Object::PeerAuthentication { selector, strict }),
        3 => (
            (
                host(),
                prop::bool::weighted(0.3),
                prop::option::of(80..82u16),
                prop::collection::vec((host(), 0..3u8), 1..3),
                any::<bool>(),
            ),
            prop_oneof![Just(Attach::Service), Just(Attach::Gateway), Just(Attach::Both)],
            prop::collection::btree_set(0..5u8, 0..3).prop_map(|h| h.into_iter().collect::<Vec<_>>()),
        )
            .prop_map(|((parent, consumer, port, backends, exact), attach, hostnames)| Object::HttpRoute {
                parent,
                consumer,
                port,
                backends,
                exact,
                attach,
                hostnames,
            }),
    ]
}

/// A change: object slot `slot` (of eight) gets `object`, or goes.
fn change() -> impl Strategy<Value = (u8, Option<Object>)> {
    (0..8u8, prop::option::weighted(0.8, object()))
}

fn registry() -> KindRegistry {
    let registry = istio::registry();
    networking::register(&registry).unwrap();
    security::register(&registry).unwrap();
    gateway_api::register(&registry).unwrap();
    registry
}

/// The objects of the slots, each at the version it was last written.
fn objects(slots: &BTreeMap<u8, (Object, u64)>, registry: &KindRegistry) -> Vec<DynConfig> {
    let edge = edge().map(|yaml| {
        let mut config = document::parse("edge.yaml", &yaml, registry).unwrap().remove(0);
        config.meta.resource_version = Some("0".to_string());
        config
    });
    slots
        .iter()
        .map(|(slot, (object, version))| {
            let mut config = document::parse("o.yaml", &object.yaml(&format!("o{slot}")), registry)
                .unwrap_or_else(|e| panic!("{e}: {}", object.yaml("o")))
                .remove(0);
            config.meta.resource_version = Some(version.to_string());
            config
        })
        .chain(edge)
        .collect()
}

/// Applies `steps` one batch at a time, compiling each model from the
/// previous one; `tamper` may spoil a model before the next is compiled
/// from it. Fails at the first model unlike its compilation from scratch.
fn check(
    steps: &[Vec<(u8, Option<Object>)>],
    tamper: impl Fn(&mut RoutingModel),
) -> Result<(), TestCaseError> {
    let registry = registry();
    let mut slots = BTreeMap::new();
    let mut version = 0;
    let mut previous = RoutingConfigs::default();
    let mut model = previous.compile();
    for batch in steps {
        for (slot, object) in batch {
            version += 1;
            match object {
                Some(object) => slots.insert(*slot, (object.clone(), version)),
                None => slots.remove(slot),
            };
        }
        let objects = objects(&slots, &registry);
        // Typed from the previous objects where they did not change.
        let now = RoutingConfigs::from_configs_reusing(&objects, &previous).unwrap();
        let full = RoutingConfigs::from_configs(&objects).unwrap().compile();
        let recompiled = now.compile_from(&previous, &model);
        prop_assert_eq!(&recompiled.model, &full);
        if let Some(changed) = &recompiled.changed {
            let compared = full.changed_hosts(&model);
            prop_assert_eq!(Some(changed), compared.as_ref());
        }
        previous = now;
        model = recompiled.model;
        tamper(&mut model);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn compiling_from_the_previous_model_equals_compiling_from_scratch(
        steps in prop::collection::vec(prop::collection::vec(change(), 1..3), 1..8)
    ) {
        check(&steps, |_| {})?;
    }
}

/// The check above finds a model that kept an entry it should not have:
/// spoiling the reused model (a host's routes dropped) shows up at the
/// next change.
#[test]
fn a_stale_entry_reused_is_found() {
    let rule = |precedence| Object::RouteRule {
        host: 0,
        precedence,
        targets: vec![(None, 0)],
        mirror: None,
        source: None,
    };
    let steps = vec![
        vec![(0, Some(rule(0)))],
        vec![(
            1,
            Some(Object::DestinationRule {
                host: 2,
                hash: false,
                subsets: vec![0],
            }),
        )],
    ];
    check(&steps, |_| {}).unwrap();
    let spoil = |model: &mut RoutingModel| {
        model.hosts.remove("h0.default.svc.cluster.local");
    };
    assert!(check(&steps, spoil).is_err());
}

/// The same for the parts compiled as wholes: a model that kept a stale
/// Sidecar (its Sidecars dropped) is found at the next change of
/// another kind.
#[test]
fn a_stale_sidecar_reused_is_found() {
    let steps = vec![
        vec![(
            0,
            Some(Object::Sidecar {
                selector: false,
                import: 1,
                port: None,
                registry_only: true,
            }),
        )],
        vec![(
            1,
            Some(Object::PeerAuthentication {
                selector: true,
                strict: true,
            }),
        )],
    ];
    check(&steps, |_| {}).unwrap();
    let spoil = |model: &mut RoutingModel| {
        model.sidecars = Default::default();
    };
    assert!(check(&steps, spoil).is_err());
}

/// A route attached to the Gateway that changed is compiled again by
/// virtual host (the model is not compiled as a whole), and a model
/// that kept a stale virtual host of the edge is found at the next
/// change of another route there.
#[test]
fn an_edge_routes_change_compiles_its_virtual_hosts_alone() {
    let route = |backend, hostnames: Vec<u8>| Object::HttpRoute {
        parent: 0,
        consumer: false,
        // The HTTP listener alone: the HTTPS ones share a port.
        port: Some(80),
        backends: vec![(backend, 1)],
        exact: true,
        attach: Attach::Gateway,
        hostnames,
    };
    let registry = registry();
    let configs = |slots: &BTreeMap<u8, (Object, u64)>, previous: &RoutingConfigs| {
        RoutingConfigs::from_configs_reusing(&objects(slots, &registry), previous).unwrap()
    };
    let mut slots = BTreeMap::from([(0, (route(0, vec![0]), 1)), (1, (route(1, vec![1]), 2))]);
    let previous = configs(&slots, &RoutingConfigs::default());
    let before = previous.compile();
    slots.insert(0, (route(2, vec![0, 2]), 3));
    let now = configs(&slots, &previous);
    let recompiled = now
        .recompile(&previous, &before)
        .expect("compiled by virtual host");
    assert_eq!(recompiled.model, now.compile());
    assert_eq!(recompiled.changed, None, "the edge's servers changed");

    let steps = vec![
        vec![(0, Some(route(0, vec![0])))],
        vec![(1, Some(route(1, vec![1])))],
    ];
    check(&steps, |_| {}).unwrap();
    let spoil = |model: &mut RoutingModel| {
        for server in &mut model.ingress {
            server.virtual_hosts.retain(|h| h.host != "a.example.com");
        }
    };
    assert!(check(&steps, spoil).is_err());
}
