//! Random v1alpha2 routing configurations (route rules, destination
//! policies, egress rules and ingress rules over a random small registry)
//! and their conversion to `networking.istio.io/v1` (`pilot_routing::convert`,
//! what `pilotctl convert` writes: VirtualServices, DestinationRules,
//! `MESH_EXTERNAL` ServiceEntries, a Gateway and its VirtualService)
//! generate the same Envoy and gRPC resources for a sidecar, a router, an
//! ingress carrying the converted Gateway's selector and a proxyless gRPC
//! client; where they do not, the converter reported a construct with no
//! exact equivalent. The converted ServiceEntries reach generation as they
//! reach it in pilot-discovery: as services of a registry aggregated after
//! the platform's.
//!
//! Resources are compared with names left out, and only names: a v1alpha2
//! rule's Envoy route is named `namespace/rule`, and its conversion's
//! `namespace/virtual-service/rule`, because the rules of a host become the
//! routes of one VirtualService (which keeps their precedence order; one
//! VirtualService per rule could not); an ingress rule's route
//! configuration (and its virtual host) is `ingress_<port>`, a Gateway
//! server's `http.<port>` or `https.<port>.<server>.<gateway>.<namespace>`
//! (with a virtual host `*:<port>`), so route configurations are compared
//! in order without their names, and the listeners' RDS references
//! likewise. What Envoy takes as a set is compared as one: clusters, load
//! assignments and listeners by name, a route configuration's virtual hosts
//! by domains (a registry's services and egress rules' hosts come in
//! different orders).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
use envoy_types::pb::envoy::config::route::v3::route;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use pilot_api::default_registry;
use pilot_api::networking::ServiceEntry;
use pilot_model::{
    AggregateDiscovery, Config, ConfigMeta, DynConfig, Labels, NetworkEndpoint, Port, Protocol, Service,
    ServiceDiscovery, ServiceInstance,
};
use pilot_routing::RoutingConfigs;
use pilot_routing::convert;
use pilot_store::FollowedRegistry;
use pilot_store::service_entries::desired_state;
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::{MeshConfig, Proxy, Resources, generate};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use prost::Message;
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

/// An egress rule: a host, a wildcard or an address block, with one to
/// three ports, mostly HTTP ones (the API refuses what it would refuse: a
/// block with HTTP).
fn egress_spec() -> impl Strategy<Value = Value> {
    let http = vec![(80, "HTTP"), (8080, "HTTP2"), (9090, "GRPC")];
    let any = vec![
        (80, "HTTP"),
        (443, "HTTPS"),
        (8080, "HTTP2"),
        (9000, "TCP"),
        (27017, "MONGO"),
        (9090, "GRPC"),
    ];
    (
        select(vec![
            "api.example.com",
            "*.example.org",
            "10.20.0.0/16",
            "www.example.net",
        ]),
        prop_oneof![3 => subsequence(http, 1..=3), 1 => subsequence(any, 1..=3)],
    )
        .prop_map(|(service, ports)| {
            let ports: Vec<Value> = ports
                .into_iter()
                .map(|(port, protocol)| json!({"port": port, "protocol": protocol}))
                .collect();
            json!({"destination": {"service": service}, "ports": ports})
        })
}

/// An ingress rule: a port (or none: 80, 443 with a secret), perhaps a
/// secret, a precedence, a request match, a service and perhaps its port.
fn ingress_spec() -> impl Strategy<Value = Value> {
    (
        select(vec![0, 80, 8080]),
        prop::bool::weighted(0.2),
        0..3i32,
        prop::option::of(request_match()),
        0..3usize,
        prop::option::weighted(
            0.3,
            select(vec![
                json!({"destinationPort": 9080}),
                json!({"destinationPortName": "http"}),
            ]),
        ),
    )
        .prop_map(|(port, tls, precedence, request, h, destination_port)| {
            let mut spec = json!({"destination": {"name": HOSTS[h]}});
            if port > 0 {
                spec["port"] = json!(port);
            }
            if tls {
                spec["tlsSecret"] = json!("ingress-certs");
            }
            if precedence > 0 {
                spec["precedence"] = json!(precedence);
            }
            if let Some(request) = request {
                spec["match"] = json!({"request": request});
            }
            if let Some(Value::Object(port)) = destination_port {
                for (k, v) in port {
                    spec[k.as_str()] = v;
                }
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

/// A sidecar of svc-a's first instance, a router, an ingress and a
/// proxyless gRPC client.
fn proxies(versions: &[Vec<usize>]) -> Vec<(&'static str, Proxy)> {
    let first = versions[0].first().copied().unwrap_or(0);
    let grpc: BTreeMap<String, String> = [("GENERATOR".to_string(), "grpc".to_string())].into();
    // The converted Gateway's selector.
    let ingress: BTreeMap<String, String> =
        [("LABELS".to_string(), r#"{"istio":"ingress"}"#.to_string())].into();
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
            "ingress",
            Proxy::from_node_id("ingress~10.3.0.1~ingress.istio-system~istio-system.svc.cluster.local")
                .unwrap()
                .with_metadata(&ingress)
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
    // Sets, where Envoy reads them as sets.
    resources.clusters.sort_by(|a, b| a.name.cmp(&b.name));
    resources
        .endpoints
        .sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
    resources.listeners.sort_by(|a, b| a.name.cmp(&b.name));
    for config in &mut resources.routes {
        config.virtual_hosts.sort_by(|a, b| a.domains.cmp(&b.domains));
        config.name.clear();
        // With `*` its only domain, a route configuration matches alike
        // whether ports in Host headers are ignored or not.
        if config.virtual_hosts.iter().all(|h| h.domains == ["*"]) {
            config.ignore_port_in_host_matching = false;
        }
        for host in &mut config.virtual_hosts {
            if host.domains == ["*"] {
                host.name.clear();
            }
            for route in &mut host.routes {
                route.name.clear();
            }
        }
    }
    for listener in &mut resources.listeners {
        for chain in &mut listener.filter_chains {
            for filter in &mut chain.filters {
                let Some(ConfigType::TypedConfig(any)) = &mut filter.config_type else {
                    continue;
                };
                if !any.type_url.ends_with("HttpConnectionManager") {
                    continue;
                }
                let mut manager = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
                if let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = &mut manager.route_specifier
                {
                    rds.route_config_name.clear();
                    // The manager's stat prefix is the route configuration's name.
                    manager.stat_prefix.clear();
                    any.value = manager.encode_to_vec();
                }
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
        prop::collection::vec(egress_spec(), 0..3),
        prop::collection::vec(ingress_spec(), 0..4),
    )
        .prop_map(|(versions, rules, policies, egress, ingress)| {
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
            objects.extend(
                egress
                    .into_iter()
                    .enumerate()
                    .map(|(i, spec)| object("EgressRule", format!("egress-{i}"), spec)),
            );
            objects.extend(
                ingress
                    .into_iter()
                    .enumerate()
                    .map(|(i, spec)| object("IngressRule", format!("ingress-{i}"), spec)),
            );
            (versions, objects)
        })
}

/// What one configuration's check found.
#[derive(Debug, Default, Clone, Copy)]
struct Outcome {
    /// It had egress or ingress rules.
    edge: bool,
    /// The converter wrote no note (or only ingress rules' websocket
    /// notes), so every proxy's resources were compared for equality (but
    /// for the routes' websocket upgrades).
    strict: bool,
}

/// The registry the converted objects are generated against: the
/// platform's, then their ServiceEntries'.
fn with_entries(platform: MemoryServiceRegistry, objects: &[DynConfig]) -> AggregateDiscovery {
    let entries: Vec<Config<ServiceEntry>> = objects
        .iter()
        .filter(|o| o.meta.kind == "ServiceEntry")
        .map(|o| Config::from_dyn(o).unwrap())
        .collect();
    let (entries_registry, writer) = FollowedRegistry::new();
    writer.apply(desired_state(&entries, &[]));
    AggregateDiscovery::new(vec![
        Arc::new(platform) as Arc<dyn ServiceDiscovery>,
        Arc::new(entries_registry),
    ])
}

/// `resources` with no route's upgrade settings (websocket).
fn without_upgrades(mut resources: Resources) -> Resources {
    for config in &mut resources.routes {
        for host in &mut config.virtual_hosts {
            for route in &mut host.routes {
                if let Some(route::Action::Route(action)) = &mut route.action {
                    action.upgrade_configs.clear();
                }
            }
        }
    }
    resources
}

/// Where `old` and `new` differ: per type, the resources only one has and
/// those both have but not alike.
fn difference(old: &Resources, new: &Resources) -> String {
    fn by_name<T: std::fmt::Debug + PartialEq>(
        kind: &str,
        old: &[T],
        new: &[T],
        name: impl Fn(&T) -> String,
        out: &mut Vec<String>,
    ) {
        for o in old {
            let name_of = name(o);
            match new.iter().find(|n| name(n) == name_of) {
                None => out.push(format!("{kind} {} only in the original's", name(o))),
                Some(n) if n != o => {
                    // From the first character that differs.
                    let (o, n) = (format!("{o:?}"), format!("{n:?}"));
                    let at = o
                        .chars()
                        .zip(n.chars())
                        .take_while(|(a, b)| a == b)
                        .count()
                        .saturating_sub(80);
                    let tail = |s: &str| s.chars().skip(at).take(400).collect::<String>();
                    out.push(format!(
                        "{kind} {} differs:\n  original ...{}\n  converted ...{}",
                        name_of,
                        tail(&o),
                        tail(&n)
                    ))
                }
                Some(_) => {}
            }
        }
        for n in new.iter().filter(|n| !old.iter().any(|o| name(o) == name(n))) {
            out.push(format!("{kind} {} only in the conversion's", name(n)));
        }
    }
    let mut out = Vec::new();
    by_name(
        "cluster",
        &old.clusters,
        &new.clusters,
        |c| c.name.clone(),
        &mut out,
    );
    by_name(
        "endpoints",
        &old.endpoints,
        &new.endpoints,
        |c| c.cluster_name.clone(),
        &mut out,
    );
    by_name(
        "listener",
        &old.listeners,
        &new.listeners,
        |l| l.name.clone(),
        &mut out,
    );
    let hosts = |r: &Resources| -> Vec<_> { r.routes.iter().flat_map(|c| c.virtual_hosts.clone()).collect() };
    by_name(
        "virtual host",
        &hosts(old),
        &hosts(new),
        |h| h.domains.join(","),
        &mut out,
    );
    if out.is_empty() {
        let order = |r: &Resources| {
            format!(
                "clusters {:?}, listeners {:?}, virtual hosts {:?}",
                r.clusters.iter().map(|c| &c.name).collect::<Vec<_>>(),
                r.listeners.iter().map(|l| &l.name).collect::<Vec<_>>(),
                r.routes
                    .iter()
                    .map(|c| c.virtual_hosts.iter().map(|h| &h.name).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            )
        };
        out.push(format!(
            "in order, or in route configurations' own fields:\n  original {}\n  converted {}",
            order(old),
            order(new)
        ));
    }
    out.join("\n")
}

/// The property for one configuration.
fn check(versions: &[Vec<usize>], objects: &[DynConfig]) -> Result<Outcome, TestCaseError> {
    let kinds = default_registry();
    // Only configurations the API would take.
    let valid: Result<Vec<DynConfig>, _> = objects.iter().cloned().map(|o| kinds.prepare(o)).collect();
    prop_assume!(valid.is_ok());
    let edge = objects
        .iter()
        .any(|o| o.meta.kind == "EgressRule" || o.meta.kind == "IngressRule");
    let configs = RoutingConfigs::from_configs(objects).unwrap();
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
    let old = MeshConfig::from_configs(objects).unwrap();
    let new = MeshConfig::from_configs(&conversion.objects).unwrap();
    let old_registry = registry(versions);
    let new_registry = with_entries(registry(versions), &conversion.objects);
    let notes: Vec<String> = conversion.notes.iter().map(ToString::to_string).collect();
    // An ingress rule's only note: its route now allows websocket upgrades.
    // Then everything else must be alike.
    let websocket_only = !notes.is_empty()
        && conversion
            .notes
            .iter()
            .all(|n| n.kind == "IngressRule" && n.path == "spec" && n.message.contains("websocket"));
    for (name, proxy) in proxies(versions) {
        let expected = unnamed(generate(&proxy, &old_registry, &old));
        let generated = unnamed(generate(&proxy, &new_registry, &new));
        if websocket_only {
            let (expected, generated) = (
                without_upgrades(expected.clone()),
                without_upgrades(generated.clone()),
            );
            prop_assert!(
                generated == expected,
                "{}: but for websocket upgrades, different: {}\n{}",
                name,
                difference(&expected, &generated),
                yaml
            );
        }
        if notes.is_empty() {
            prop_assert!(
                generated == expected,
                "{}: no note, yet different: {}\n{}",
                name,
                difference(&expected, &generated),
                yaml
            );
        }
        // With notes, a difference is one the converter reported.
    }
    Ok(Outcome {
        edge,
        strict: notes.is_empty() || websocket_only,
    })
}

/// 300 random configurations; of those with egress or ingress rules, the
/// ones the converter wrote no note for (or only ingress rules' websocket
/// notes) are compared strictly, and there must be enough of them for the
/// property to say something.
#[test]
fn a_configuration_and_its_conversion_generate_the_same_resources() {
    let mut runner = TestRunner::new(RunnerConfig {
        cases: 300,
        source_file: Some(file!()),
        ..RunnerConfig::default()
    });
    let outcomes = std::cell::RefCell::new(Vec::new());
    let result = runner.run(&configuration(), |(versions, objects)| {
        let outcome = check(&versions, &objects)?;
        outcomes.borrow_mut().push(outcome);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    let outcomes = outcomes.into_inner();
    let count = |f: &dyn Fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let edge = count(&|o| o.edge);
    let edge_strict = count(&|o| o.edge && o.strict);
    eprintln!(
        "{} configurations: {} compared strictly; with egress or ingress rules {edge}, {edge_strict} of them strictly",
        outcomes.len(),
        count(&|o| o.strict),
    );
    assert!(
        edge_strict >= 20,
        "only {edge_strict} configurations with egress or ingress rules were compared strictly"
    );
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
