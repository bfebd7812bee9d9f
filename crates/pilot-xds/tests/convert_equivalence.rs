//! Random v1alpha2 routing configurations (route rules and destination
//! policies over a random small registry) and their conversion to
//! `networking.istio.io/v1` (`pilot_model::convert`, what `pilotctl
//! convert` writes) generate the same Envoy and gRPC resources for a
//! sidecar, a router and a proxyless gRPC client; where they do not, the
//! converter reported a construct with no exact equivalent.
//!
//! Resources are compared with the Envoy route names left out, and only
//! those: a v1alpha2 rule's route is named `namespace/rule`, and its
//! conversion's `namespace/virtual-service/rule`, because the rules of a
//! host become the routes of one VirtualService (which keeps their
//! precedence order; one VirtualService per rule could not).

use std::collections::BTreeMap;
use std::net::IpAddr;

use pilot_model::routing::RoutingConfigs;
use pilot_model::{
    ConfigMeta, DynConfig, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, convert,
    default_registry,
};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::{MeshConfig, Proxy, Resources, generate};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use serde_json::{Value, json};

const HOSTS: [&str; 3] = ["svc-a", "svc-b", "svc-c"];
const VERSIONS: [&str; 3] = ["v1", "v2", "v3"];

fn host(i: usize) -> String {
    format!("{}.default.svc.cluster.local", HOSTS[i])
}

fn object(kind: &str, name: String, spec: Value) -> DynConfig {
    let mut meta = ConfigMeta::new(kind, "default", name);
    meta.group = "config.istio.io".into();
    meta.version = "v1alpha2".into();
    DynConfig { meta, spec }
}

/// A request match on some of: the path, the method, a header.
fn request_match() -> impl Strategy<Value = Value> {
    (
        prop::option::of(select(vec![
            json!({"prefix": "/api"}),
            json!({"exact": "/login"}),
        ])),
        prop::option::of(Just(json!({"exact": "GET"}))),
        prop::option::of(select(vec![json!({"exact": "jason"}), json!({"regex": "^j.*"})])),
    )
        .prop_filter("some match", |(u, m, h)| {
            u.is_some() || m.is_some() || h.is_some()
        })
        .prop_map(|(uri, method, user)| {
            let mut headers = serde_json::Map::new();
            if let Some(uri) = uri {
                headers.insert("uri".into(), uri);
            }
            if let Some(method) = method {
                headers.insert("method".into(), method);
            }
            if let Some(user) = user {
                headers.insert("end-user".into(), user);
            }
            json!({"headers": headers})
        })
}

/// One to three versions with weights that sum to 100 (one alone has no
/// weight).
fn targets() -> impl Strategy<Value = Vec<(usize, Option<i32>)>> {
    (subsequence(vec![0usize, 1, 2], 1..=3), 0..=100i32, 0..=100i32).prop_map(|(versions, a, b)| {
        match versions.as_slice() {
            [one] => vec![(*one, None)],
            [x, y] => vec![(*x, Some(a)), (*y, Some(100 - a))],
            [x, y, z] => {
                let b = b.min(100 - a);
                vec![(*x, Some(a)), (*y, Some(b)), (*z, Some(100 - a - b))]
            }
            _ => Vec::new(),
        }
    })
}

/// What a rule may add besides its targets: timeout, retries, fault,
/// mirror, CORS, appended headers, rewrite.
fn features() -> impl Strategy<Value = serde_json::Map<String, Value>> {
    (
        prop::option::of(1..10u32),
        prop::option::of((1..5i32, 1..3u32)),
        prop::option::of((
            prop::option::of(0..=100u32),
            prop::option::of((0..=100u32, select(vec![400, 500, 503]))),
        )),
        prop::option::of((0..3usize, 0..3usize)),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(timeout, retries, fault, mirror, cors, append, rewrite)| {
            let mut spec = serde_json::Map::new();
            if let Some(t) = timeout {
                spec.insert(
                    "httpReqTimeout".into(),
                    json!({"simpleTimeout": {"timeout": format!("{t}s")}}),
                );
            }
            if let Some((attempts, per_try)) = retries {
                spec.insert(
                    "httpReqRetries".into(),
                    json!({"simpleRetry": {"attempts": attempts, "perTryTimeout": format!("{per_try}s")}}),
                );
            }
            if let Some((delay, abort)) = fault
                && (delay.is_some() || abort.is_some())
            {
                let mut fault = serde_json::Map::new();
                if let Some(percent) = delay {
                    fault.insert("delay".into(), json!({"percent": percent, "fixedDelay": "2s"}));
                }
                if let Some((percent, status)) = abort {
                    fault.insert("abort".into(), json!({"percent": percent, "httpStatus": status}));
                }
                spec.insert("httpFault".into(), Value::Object(fault));
            }
            if let Some((h, v)) = mirror {
                spec.insert(
                    "mirror".into(),
                    json!({"name": HOSTS[h], "labels": {"version": VERSIONS[v]}}),
                );
            }
            if cors {
                spec.insert(
                    "corsPolicy".into(),
                    json!({"allowOrigin": ["https://example.com"], "allowMethods": ["GET"], "maxAge": "1h"}),
                );
            }
            if append {
                spec.insert("appendHeaders".into(), json!({"x-converted": "yes"}));
            }
            if rewrite {
                spec.insert("rewrite".into(), json!({"uri": "/rewritten"}));
            }
            spec
        })
}

/// A route rule's spec: a destination, a precedence, perhaps a request
/// and a source match, targets or (rarely) a redirect, features; websocket
/// upgrades mostly on (v1 has them always on).
fn rule_spec() -> impl Strategy<Value = Value> {
    (
        0..3usize,
        0..3i32,
        prop::option::of(request_match()),
        prop::option::weighted(0.15, (0..3usize, prop::option::of(0..3usize))),
        targets(),
        prop::option::weighted(0.1, 0..3usize),
        prop::bool::weighted(0.1),
        features(),
        prop::bool::weighted(0.85),
    )
        .prop_map(
            |(h, precedence, request, source, targets, other_host, redirect, features, websocket)| {
                let mut spec = serde_json::Map::new();
                spec.insert("destination".into(), json!({"name": HOSTS[h]}));
                if precedence > 0 {
                    spec.insert("precedence".into(), json!(precedence));
                }
                let mut condition = serde_json::Map::new();
                if let Some(request) = request {
                    condition.insert("request".into(), request);
                }
                if let Some((s, version)) = source {
                    let mut source = json!({"name": HOSTS[s]});
                    if let Some(v) = version {
                        source["labels"] = json!({"version": VERSIONS[v]});
                    }
                    condition.insert("source".into(), source);
                }
                if !condition.is_empty() {
                    spec.insert("match".into(), Value::Object(condition));
                }
                if redirect {
                    spec.insert("redirect".into(), json!({"uri": "/moved"}));
                    return Value::Object(spec);
                }
                let route: Vec<Value> = targets
                    .iter()
                    .map(|(v, weight)| {
                        let mut target = json!({"labels": {"version": VERSIONS[*v]}});
                        if let Some(o) = other_host {
                            target["destination"] = json!({"name": HOSTS[o]});
                        }
                        if let Some(w) = weight {
                            target["weight"] = json!(w);
                        }
                        target
                    })
                    .collect();
                spec.insert("route".into(), Value::Array(route));
                spec.extend(features);
                if websocket {
                    spec.insert("websocketUpgrade".into(), json!(true));
                }
                Value::Object(spec)
            },
        )
}

/// A destination policy: a host or one of its versions, load balancing
/// and a circuit breaker.
fn policy_spec() -> impl Strategy<Value = Value> {
    (
        0..3usize,
        prop::option::of(0..3usize),
        prop::option::of(select(vec!["ROUND_ROBIN", "LEAST_CONN", "RANDOM"])),
        prop::option::of((
            prop::option::of(1..100i32),
            prop::option::of(1..100i32),
            prop::option::of(1..10i32),
            prop::option::of(1..30u32),
        )),
    )
        .prop_filter("a policy", |(_, _, lb, cb)| lb.is_some() || cb.is_some())
        .prop_map(|(h, version, lb, cb)| {
            let mut destination = json!({"name": HOSTS[h]});
            if let Some(v) = version {
                destination["labels"] = json!({"version": VERSIONS[v]});
            }
            let mut spec = json!({"destination": destination});
            if let Some(lb) = lb {
                spec["loadBalancing"] = json!({"name": lb});
            }
            if let Some((connections, pending, errors, sleep)) = cb {
                let mut simple = serde_json::Map::new();
                if let Some(n) = connections {
                    simple.insert("maxConnections".into(), json!(n));
                }
                if let Some(n) = pending {
                    simple.insert("httpMaxPendingRequests".into(), json!(n));
                }
                if let Some(n) = errors {
                    simple.insert("httpConsecutiveErrors".into(), json!(n));
                }
                if let Some(s) = sleep {
                    simple.insert("sleepWindow".into(), json!(format!("{s}s")));
                }
                spec["circuitBreaker"] = json!({"simpleCb": simple});
            }
            spec
        })
}

/// The services, each with some of the versions as instances.
fn registry(versions: &[Vec<usize>]) -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    for (h, versions) in versions.iter().enumerate() {
        let service = registry.add_service(Service::new(
            host(h),
            vec![Port::new("http", 9080, Protocol::Http)],
        ));
        for v in versions {
            let address: IpAddr = format!("10.0.{h}.{}", v + 1).parse().unwrap();
            registry
                .add_instance(ServiceInstance::new(
                    service.clone(),
                    NetworkEndpoint::new(address, 9080, service.ports[0].clone()),
                    Labels::from_pairs([("app", HOSTS[h]), ("version", VERSIONS[*v])]),
                ))
                .unwrap();
        }
    }
    registry
}

/// A sidecar of svc-a's first instance, a router and a proxyless gRPC
/// client.
fn proxies(versions: &[Vec<usize>]) -> Vec<(&'static str, Proxy)> {
    let first = versions[0].first().copied().unwrap_or(0);
    let grpc: BTreeMap<String, String> = [("GENERATOR".to_string(), "grpc".to_string())].into();
    vec![
        (
            "sidecar",
            Proxy::from_node_id(&format!(
                "sidecar~10.0.0.{}~svc-a-{}.default~default.svc.cluster.local",
                first + 1,
                VERSIONS[first]
            ))
            .unwrap(),
        ),
        (
            "router",
            Proxy::from_node_id("router~10.2.0.2~egress.istio-system~istio-system.svc.cluster.local")
                .unwrap(),
        ),
        (
            "grpc-client",
            Proxy::from_node_id("sidecar~10.9.0.1~client.default~default.svc.cluster.local")
                .unwrap()
                .with_metadata(&grpc)
                .unwrap(),
        ),
    ]
}

/// `resources` with the Envoy route names left out (see the module
/// documentation).
fn unnamed(mut resources: Resources) -> Resources {
    for config in &mut resources.routes {
        for host in &mut config.virtual_hosts {
            for route in &mut host.routes {
                route.name.clear();
            }
        }
    }
    resources
}

fn configuration() -> impl Strategy<Value = (Vec<Vec<usize>>, Vec<DynConfig>)> {
    (
        prop::collection::vec(subsequence(vec![0usize, 1, 2], 1..=3), 3),
        prop::collection::vec(rule_spec(), 0..5),
        prop::collection::vec(policy_spec(), 0..4),
    )
        .prop_map(|(versions, rules, policies)| {
            let mut objects: Vec<DynConfig> = rules
                .into_iter()
                .enumerate()
                .map(|(i, spec)| object("RouteRule", format!("rule-{i}"), spec))
                .collect();
            objects.extend(
                policies
                    .into_iter()
                    .enumerate()
                    .map(|(i, spec)| object("DestinationPolicy", format!("policy-{i}"), spec)),
            );
            (versions, objects)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn a_configuration_and_its_conversion_generate_the_same_resources(
        (versions, objects) in configuration()
    ) {
        let kinds = default_registry();
        // Only configurations the API would take.
        let valid: Result<Vec<DynConfig>, _> = objects.iter().cloned().map(|o| kinds.prepare(o)).collect();
        prop_assume!(valid.is_ok());
        let configs = RoutingConfigs::from_configs(&objects).unwrap();
        let conversion = convert::convert(&configs).unwrap();
        let yaml = pilot_model::document::to_yaml(&conversion.objects);
        for converted in &conversion.objects {
            prop_assert!(
                kinds.prepare(converted.clone()).is_ok(),
                "the converted {} {} does not validate: {:?}\n{yaml}",
                converted.meta.kind,
                converted.meta.name,
                kinds.prepare(converted.clone()).err()
            );
        }
        let old = MeshConfig::from_configs(&objects).unwrap();
        let new = MeshConfig::from_configs(&conversion.objects).unwrap();
        let registry = registry(&versions);
        let notes: Vec<String> = conversion.notes.iter().map(ToString::to_string).collect();
        for (name, proxy) in proxies(&versions) {
            let expected = unnamed(generate(&proxy, &registry, &old));
            let generated = unnamed(generate(&proxy, &registry, &new));
            if notes.is_empty() {
                prop_assert_eq!(&generated, &expected, "{}: no note, yet different\n{}", name, yaml);
            } else if generated != expected {
                // A difference is one the converter reported.
                prop_assert!(!notes.is_empty(), "{name}");
            }
        }
    }
}

/// The constructs with no exact equivalent do change what is generated,
/// and each is reported: a rule with websocket upgrades off, a source
/// service match, a subset policy that no longer replaces its host's.
#[test]
fn what_the_converter_reports_is_what_generation_would_change() {
    let cases: [(&str, Vec<DynConfig>, &str); 3] = [
        (
            "websocket",
            vec![object(
                "RouteRule",
                "no-websocket".into(),
                json!({"destination": {"name": "svc-a"}, "route": [{"labels": {"version": "v1"}}]}),
            )],
            "spec.websocketUpgrade",
        ),
        (
            "source",
            vec![object(
                "RouteRule",
                "from-b".into(),
                json!({"destination": {"name": "svc-a"}, "websocketUpgrade": true,
                       "match": {"source": {"name": "svc-b"}},
                       "route": [{"labels": {"version": "v2"}}]}),
            )],
            "spec.match.source",
        ),
        (
            "subset policy",
            vec![
                object(
                    "DestinationPolicy",
                    "a".into(),
                    json!({"destination": {"name": "svc-a"}, "circuitBreaker": {"simpleCb": {"maxConnections": 5}}}),
                ),
                object(
                    "DestinationPolicy",
                    "a-v1".into(),
                    json!({"destination": {"name": "svc-a", "labels": {"version": "v1"}}, "loadBalancing": {"name": "RANDOM"}}),
                ),
            ],
            "spec",
        ),
    ];
    let versions = vec![vec![0, 1], vec![0, 1], vec![0]];
    let registry = registry(&versions);
    let (_, sidecar) = proxies(&versions).remove(0);
    for (case, objects, path) in cases {
        let configs = RoutingConfigs::from_configs(&objects).unwrap();
        let conversion = convert::convert(&configs).unwrap();
        assert!(
            conversion.notes.iter().any(|n| n.path == path),
            "{case}: {:?}",
            conversion.notes
        );
        let old = unnamed(generate(
            &sidecar,
            &registry,
            &MeshConfig::from_configs(&objects).unwrap(),
        ));
        let new = unnamed(generate(
            &sidecar,
            &registry,
            &MeshConfig::from_configs(&conversion.objects).unwrap(),
        ));
        assert_ne!(old, new, "{case}: reported, yet generated alike");
    }
}
