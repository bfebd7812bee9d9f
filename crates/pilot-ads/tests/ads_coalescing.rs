//! The push pipeline's coalescing, as a property: for random sequences of
//! registry changes (an instance added or removed, each at an address
//! never used before) and configuration writes (a DestinationPolicy whose
//! `maxConnections` is the write's number, so that every cluster state is
//! unique), made with random pauses shorter and longer than the debounce
//! so that changes land while pushes are built and sent, two
//! state-of-the-world proxies that ACK as Envoy does end with:
//! - what a full generation from the final state gives (a new proxy of
//!   the same namespace connecting afterwards: the same clusters and load
//!   assignments), which is the registry's final state;
//! - and never a state older than one already sent: every load
//!   assignment and every cluster they receive is a state its service
//!   was in, and each one no older than the last one received; response
//!   versions never go down.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use pilot_api::istio;
use pilot_model::{ConfigKey, ConfigStore, DynConfig, Labels, Port, Protocol, Service, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::{CDS, Client, EDS, LDS, Response, clusters, eds_names};
use proptest::prelude::*;
use prost::Message;
use support::proxies::node_id;
use tokio::sync::watch;

/// Services in the mesh.
const SERVICES: usize = 3;

fn host(i: usize) -> String {
    format!("svc{i}.a.svc.cluster.local")
}

fn cluster_name(i: usize) -> String {
    format!("outbound|80||{}", host(i))
}

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Op {
    /// An instance added to service `.0`.
    Add(usize),
    /// Service `.0`'s oldest instance removed (when it has two or more).
    Remove(usize),
    /// The DestinationPolicy of service `.0` written again.
    Policy(usize),
    /// A pause of this many milliseconds (the debounce is 10 ms quiet,
    /// 50 ms at most).
    Pause(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..SERVICES).prop_map(Op::Add),
        3 => (0..SERVICES).prop_map(Op::Remove),
        1 => (0..SERVICES).prop_map(Op::Policy),
        2 => (0u64..40).prop_map(Op::Pause),
    ]
}

/// Service `service`'s DestinationPolicy limiting connections to `n`.
fn policy(service: usize, n: u32) -> DynConfig {
    let text = format!(
        "apiVersion: config.istio.io/v1alpha2\nkind: DestinationPolicy\nmetadata: {{name: svc{service}-pool, namespace: a}}\nspec:\n  destination: {{name: svc{service}}}\n  circuitBreaker: {{simpleCb: {{maxConnections: {n}}}}}\n"
    );
    document::parse("policy.yaml", &text, &istio::registry())
        .unwrap()
        .remove(0)
}

/// The addresses of a load assignment's endpoints.
fn addresses(assignment: &ClusterLoadAssignment) -> BTreeSet<String> {
    use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
    use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint;
    assignment
        .endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(lb_endpoint::HostIdentifier::Endpoint(e)) => match &e.address.as_ref()?.address {
                Some(address::Address::SocketAddress(s)) => Some(format!(
                    "{}:{}",
                    s.address,
                    match s.port_specifier {
                        Some(socket_address::PortSpecifier::PortValue(p)) => p,
                        _ => 0,
                    }
                )),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// A cluster's connection limit (0 without one).
fn limit(cluster: &Cluster) -> u32 {
    cluster
        .circuit_breakers
        .as_ref()
        .and_then(|c| c.thresholds.first()?.max_connections.as_ref())
        .map_or(0, |v| v.value)
}

/// What a proxy holds and what it was sent, in order.
#[derive(Default, Debug)]
struct Held {
    /// Load assignments by cluster name: endpoint addresses.
    eds: BTreeMap<String, BTreeSet<String>>,
    /// Clusters by name: their connection limit.
    cds: BTreeMap<String, u32>,
    /// Every response received, in order.
    received: Vec<Response>,
}

impl Held {
    fn apply(&mut self, response: &Response) {
        self.received.push(response.clone());
        if response.type_url == EDS {
            for (name, value) in &response.resources {
                let assignment = ClusterLoadAssignment::decode(value.as_slice()).unwrap();
                self.eds.insert(name.clone(), addresses(&assignment));
            }
        } else if response.type_url == CDS {
            // State of the world: the clusters are every cluster.
            self.cds = clusters(response)
                .iter()
                .map(|c| (c.name.clone(), limit(c)))
                .collect();
        }
    }
}

/// A proxy as Envoy behaves, on a state-of-the-world stream: subscribes
/// to clusters, their load assignments and listeners, ACKs everything,
/// until `stop`; returns what it holds and was sent.
async fn proxy(port: u16, node: String, mut stop: watch::Receiver<bool>) -> Held {
    let mut client = Client::sotw(port, &node).await;
    let mut held = Held::default();
    let mut listeners = false;
    loop {
        let response = tokio::select! {
            response = client.next() => response,
            _ = stop.wait_for(|s| *s) => return held,
        };
        held.apply(&response);
        if response.type_url == CDS {
            client.request(CDS, vec![], Some(&response)).await;
            let names = eds_names(&clusters(&response));
            if names != client.eds_names {
                client.eds_names = names.clone();
                client.request(EDS, names, None).await;
            }
            if !listeners {
                listeners = true;
                client.request(LDS, vec![], None).await;
            }
        } else {
            let names = if response.type_url == EDS {
                client.eds_names.clone()
            } else {
                vec![]
            };
            client.request(&response.type_url, names, Some(&response)).await;
        }
    }
}

/// Runs `ops` against a server with two connected proxies and checks the
/// properties (see the module's doc).
async fn run(ops: Vec<Op>) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    let store = MemoryConfigStore::new(istio::registry());
    // Each service's states in order: its addresses after each change.
    let mut eds_history: Vec<Vec<BTreeSet<String>>> = vec![Vec::new(); SERVICES];
    let mut limit_history: Vec<Vec<u32>> = vec![vec![0]; SERVICES];
    let mut instances: Vec<Vec<IpAddr>> = vec![Vec::new(); SERVICES];
    let mut next_ip = 1u32;
    let mut fresh = || {
        next_ip += 1;
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + next_ip))
    };
    let state = |instances: &[IpAddr]| -> BTreeSet<String> {
        instances.iter().map(|ip| format!("{ip}:80")).collect()
    };
    for (i, held) in instances.iter_mut().enumerate() {
        registry.add_service(Service::new(host(i), vec![Port::new("http", 80, Protocol::Http)]));
        let ip = fresh();
        registry.add_endpoints(&host(i), ip, Labels::new()).unwrap();
        held.push(ip);
        eds_history[i].push(state(held));
    }
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let (server, port) = support::server::serve(controller, Arc::clone(&registry) as _);
    let (stop, stopping) = watch::channel(false);
    let proxies: Vec<_> = ["10.1.0.1", "10.1.0.2"]
        .into_iter()
        .map(|ip| tokio::spawn(proxy(port, node_id("a", ip), stopping.clone())))
        .collect();
    // Both connected and synced before the changes start.
    for ip in ["10.1.0.1", "10.1.0.2"] {
        support::proxies::wait_proxy(&server, &node_id("a", ip), |p| p.acked_push().is_some()).await;
    }

    let mut writes = 0u32;
    for op in &ops {
        match *op {
            Op::Add(s) => {
                let ip = fresh();
                registry.add_endpoints(&host(s), ip, Labels::new()).unwrap();
                instances[s].push(ip);
                eds_history[s].push(state(&instances[s]));
            }
            Op::Remove(s) if instances[s].len() >= 2 => {
                let ip = instances[s].remove(0);
                registry.remove_instances(&host(s), ip, None);
                eds_history[s].push(state(&instances[s]));
            }
            Op::Remove(_) => {}
            Op::Policy(s) => {
                writes += 1;
                let mut next = policy(s, writes);
                let key = ConfigKey::new("DestinationPolicy", "a", format!("svc{s}-pool"));
                match store.get(&key).await.unwrap() {
                    Some(current) => {
                        next.meta.resource_version = current.meta.resource_version.clone();
                        store.update(next).await.unwrap();
                    }
                    None => {
                        store.create(next).await.unwrap();
                    }
                }
                limit_history[s].push(writes);
            }
            Op::Pause(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
    }

    // Settled: both proxies ACKed the latest push, and no push follows
    // within a while (the debounce is at most 50 ms).
    let mut settled = None;
    loop {
        let version = server.version().unwrap();
        for ip in ["10.1.0.1", "10.1.0.2"] {
            support::proxies::wait_proxy(&server, &node_id("a", ip), |p| p.acked_push() >= Some(version))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        if server.version() == Some(version) && settled == Some(version) {
            break;
        }
        settled = Some(version);
    }
    // A full generation from the final state: a new proxy of the same
    // namespace.
    let newcomer = tokio::spawn(proxy(port, node_id("a", "10.1.0.3"), stopping.clone()));
    support::proxies::wait_proxy(&server, &node_id("a", "10.1.0.3"), |p| {
        p.acked_push() >= settled && p.types.get("EDS").is_some_and(|t| t.synced())
    })
    .await;
    stop.send(true).unwrap();
    let full = newcomer.await.unwrap();
    let expected_eds: BTreeMap<String, BTreeSet<String>> = (0..SERVICES)
        .map(|i| (cluster_name(i), state(&instances[i])))
        .collect();
    let final_limits: Vec<u32> = limit_history.iter().map(|h| *h.last().unwrap()).collect();
    for (i, limit) in final_limits.iter().enumerate() {
        assert_eq!(full.cds.get(&cluster_name(i)), Some(limit), "{:?}", full.cds);
    }
    let services_eds = |held: &Held| -> BTreeMap<String, BTreeSet<String>> {
        held.eds
            .iter()
            .filter(|(name, _)| (0..SERVICES).any(|i| **name == cluster_name(i)))
            .map(|(n, a)| (n.clone(), a.clone()))
            .collect()
    };
    assert_eq!(
        services_eds(&full),
        expected_eds,
        "the full generation is the registry's state"
    );

    for (n, handle) in proxies.into_iter().enumerate() {
        let held = handle.await.unwrap();
        let states: usize = eds_history.iter().map(Vec::len).sum();
        eprintln!(
            "{} ops, {states} registry states, {} pushes: proxy {n} received {} responses ({} EDS)",
            ops.len(),
            settled.unwrap(),
            held.received.len(),
            held.received.iter().filter(|r| r.type_url == EDS).count(),
        );
        assert_eq!(held.eds, full.eds, "proxy {n}'s load assignments, after {ops:?}");
        assert_eq!(held.cds, full.cds, "proxy {n}'s clusters, after {ops:?}");
        // Never older than what was already sent.
        let mut last_version: BTreeMap<&str, u64> = BTreeMap::new();
        let mut eds_at = [0usize; SERVICES];
        let mut limit_at = [0usize; SERVICES];
        for Response {
            type_url,
            version,
            resources,
            ..
        } in &held.received
        {
            let version: u64 = version.parse().expect("a numeric version");
            let last = last_version.entry(type_url.as_str()).or_default();
            assert!(
                version >= *last,
                "proxy {n}: {type_url} version {version} after {last}"
            );
            *last = version;
            for (name, value) in resources {
                let Some(s) = (0..SERVICES).find(|&i| *name == cluster_name(i)) else {
                    continue;
                };
                if type_url == EDS {
                    let addresses = addresses(&ClusterLoadAssignment::decode(value.as_slice()).unwrap());
                    let at = eds_history[s]
                        .iter()
                        .position(|h| *h == addresses)
                        .unwrap_or_else(|| {
                            panic!("proxy {n}: {name} {addresses:?} was never the registry's state")
                        });
                    assert!(
                        at >= eds_at[s],
                        "proxy {n}: {name} went back from state {} to {at}",
                        eds_at[s]
                    );
                    eds_at[s] = at;
                } else if type_url == CDS {
                    let value = limit(&Cluster::decode(value.as_slice()).unwrap());
                    let at = limit_history[s]
                        .iter()
                        .position(|h| *h == value)
                        .unwrap_or_else(|| panic!("proxy {n}: {name} limit {value} was never written"));
                    assert!(
                        at >= limit_at[s],
                        "proxy {n}: {name} went back from write {} to {at}",
                        limit_at[s]
                    );
                    limit_at[s] = at;
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn proxies_end_with_a_full_generation_of_the_final_state_and_never_go_back(
        ops in proptest::collection::vec(op(), 5..40)
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(ops));
    }
}
