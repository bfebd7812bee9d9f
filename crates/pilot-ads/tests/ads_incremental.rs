//! What a push sends when only endpoints move: a state-of-the-world client
//! gets an EDS response holding the load assignments that changed and
//! nothing else, an incremental (delta) client gets exactly those too; and proxies in different
//! namespaces get the same clusters and load assignments.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use pilot_ads::XdsServer;
use pilot_api::istio;
use pilot_model::{Labels, Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::{CDS, Client, DeltaStream, EDS, LDS, RDS, Response};
use prost::Message;

mod support;

use support::proxies::node_id;

fn host(i: usize) -> String {
    format!("svc{i}.a.svc.cluster.local")
}

fn cluster(i: usize) -> String {
    format!("outbound|80||{}", host(i))
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

async fn server() -> (XdsServer, u16, Arc<MemoryServiceRegistry>) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    for i in 0..3 {
        registry.add_service(Service::new(host(i), vec![Port::new("http", 80, Protocol::Http)]));
        registry
            .add_endpoints(&host(i), ip(&format!("10.0.{i}.1")), Labels::new())
            .unwrap();
    }
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();
    let (server, port) = support::server::serve(controller, Arc::clone(&registry) as _);
    (server, port, registry)
}

fn assignments(response: &Response) -> Vec<ClusterLoadAssignment> {
    response
        .resources
        .iter()
        .map(|(_, value)| ClusterLoadAssignment::decode(value.as_slice()).unwrap())
        .collect()
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_change_sends_sotw_clients_eds_only_and_the_same_to_every_namespace() {
    let (_server, port, registry) = server().await;
    let names: Vec<String> = (0..3).map(cluster).collect();
    let mut a = Client::sotw(port, &node_id("a", "10.1.0.1")).await;
    let mut b = Client::sotw(port, &node_id("b", "10.1.0.2")).await;
    let eds_a = assignments(&a.sync().await.eds.unwrap());
    let every: BTreeSet<&String> = names.iter().collect();
    assert_eq!(a.eds_names.iter().collect::<BTreeSet<_>>(), every);
    let eds_b = assignments(&b.sync().await.eds.unwrap());
    assert_eq!(b.eds_names.iter().collect::<BTreeSet<_>>(), every);
    assert_eq!(
        eds_a, eds_b,
        "proxies in two namespaces get the same load assignments"
    );
    assert_eq!(eds_a.len(), 3);

    // One endpoint of svc1 added: the next response of each client is EDS
    // with svc1's new endpoint and nothing else (a state-of-the-world EDS
    // response may carry a subset: the client keeps the others).
    registry
        .add_endpoints(&host(1), ip("10.0.1.2"), Labels::new())
        .unwrap();
    for client in [&mut a, &mut b] {
        let eds = client.next().await;
        assert_eq!(
            eds.type_url, EDS,
            "an endpoint change sends EDS, not {}",
            eds.type_url
        );
        let got = assignments(&eds);
        let svc1 = got.iter().find(|c| c.cluster_name == cluster(1)).unwrap();
        assert_eq!(
            addresses(svc1),
            BTreeSet::from(["10.0.1.1:80".to_string(), "10.0.1.2:80".to_string()])
        );
        assert_eq!(got.len(), 1, "only svc1's assignment is sent");
        client.request(EDS, names.clone(), Some(&eds)).await;
    }
    // Another endpoint change: had the first one also sent CDS, LDS or RDS,
    // they would come before this EDS.
    registry
        .add_endpoints(&host(2), ip("10.0.2.2"), Labels::new())
        .unwrap();
    for client in [&mut a, &mut b] {
        let eds = client.next().await;
        assert_eq!(
            eds.type_url, EDS,
            "an endpoint change sends EDS, not {}",
            eds.type_url
        );
        let got = assignments(&eds);
        let svc2 = got.iter().find(|c| c.cluster_name == cluster(2)).unwrap();
        assert_eq!(addresses(svc2).len(), 2);
        assert_eq!(got.len(), 1, "only svc2's assignment is sent");
    }
}

/// An incremental client.
struct Delta {
    stream: DeltaStream,
}

impl Delta {
    async fn next(&mut self) -> DeltaDiscoveryResponse {
        self.stream.next().await
    }

    async fn ack(&mut self, response: &DeltaDiscoveryResponse) {
        self.stream
            .send(&DeltaDiscoveryRequest {
                type_url: response.type_url.clone(),
                response_nonce: response.nonce.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    async fn subscribe(&mut self, type_url: &str, names: Vec<String>) {
        self.stream
            .send(&DeltaDiscoveryRequest {
                type_url: type_url.into(),
                resource_names_subscribe: names,
                ..Default::default()
            })
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_change_sends_delta_clients_only_the_changed_load_assignment() {
    let (_server, port, registry) = server().await;
    let (mut delta, _) = delta_client(port, "10.1.0.3").await;
    delta.subscribe(EDS, (0..3).map(cluster).collect()).await;
    let eds = delta.next().await;
    assert_eq!(eds.type_url, EDS);
    assert_eq!(eds.resources.len(), 3);
    delta.ack(&eds).await;
    delta.subscribe(LDS, vec![]).await;
    let lds = delta.next().await;
    assert_eq!(lds.type_url, LDS);
    delta.ack(&lds).await;
    let routes: Vec<String> = vec!["80".into()];
    delta.subscribe(RDS, routes).await;
    let rds = delta.next().await;
    assert_eq!(rds.type_url, RDS);
    delta.ack(&rds).await;

    for (i, address) in [(1, "10.0.1.2"), (2, "10.0.2.2"), (1, "10.0.1.3")] {
        registry
            .add_endpoints(&host(i), ip(address), Labels::new())
            .unwrap();
        let eds = delta.next().await;
        assert_eq!(
            eds.type_url, EDS,
            "an endpoint change sends EDS, not {}",
            eds.type_url
        );
        let names: Vec<&str> = eds.resources.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            vec![cluster(i).as_str()],
            "only the changed load assignment"
        );
        assert!(eds.removed_resources.is_empty());
        let assignment =
            ClusterLoadAssignment::decode(eds.resources[0].resource.as_ref().unwrap().value.as_slice())
                .unwrap();
        assert!(addresses(&assignment).contains(&format!("{address}:80")));
        delta.ack(&eds).await;
    }
}

/// Opens a delta stream whose first request asks for every cluster, and
/// reads and ACKs that response.
async fn delta_client(port: u16, ip: &str) -> (Delta, DeltaDiscoveryResponse) {
    let mut stream = DeltaStream::connect(port).await;
    stream
        .send(&DeltaDiscoveryRequest {
            node: Some(Node {
                id: node_id("a", ip),
                ..Default::default()
            }),
            type_url: CDS.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut delta = Delta { stream };
    let cds = delta.next().await;
    assert_eq!(cds.type_url, CDS);
    delta.ack(&cds).await;
    (delta, cds)
}

fn names(response: &DeltaDiscoveryResponse) -> BTreeSet<String> {
    response.resources.iter().map(|r| r.name.clone()).collect()
}

/// The next response of `type_url`, ACKing the others on the way.
async fn next_of(delta: &mut Delta, type_url: &str) -> DeltaDiscoveryResponse {
    loop {
        let response = delta.next().await;
        if response.type_url == type_url {
            return response;
        }
        delta.ack(&response).await;
    }
}

/// What a delta stream is sent follows what the proxy holds: versions it
/// reconnects with (ours, or not ours), names it unsubscribes from and
/// subscribes to again, and resources that go away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_streams_are_sent_what_the_proxy_lacks_and_told_what_went_away() {
    let (_server, port, registry) = server().await;

    // A first stream learns the versions of the three load assignments.
    let (mut first, _) = delta_client(port, "10.1.0.3").await;
    first.subscribe(EDS, (0..3).map(cluster).collect()).await;
    let eds = first.next().await;
    assert_eq!(names(&eds), (0..3).map(cluster).collect());
    let version = |i: usize| {
        eds.resources
            .iter()
            .find(|r| r.name == cluster(i))
            .map(|r| r.version.clone())
            .unwrap()
    };

    // A proxy reconnects holding svc0's current assignment, svc1's in a
    // version that is not ours, and one for a service that no longer
    // exists: it is sent svc1 and svc2 (lacked), told the old one is gone.
    let gone = "outbound|80||gone.a.svc.cluster.local".to_string();
    let (mut delta, _) = delta_client(port, "10.1.0.4").await;
    delta
        .stream
        .send(&DeltaDiscoveryRequest {
            type_url: EDS.into(),
            resource_names_subscribe: (0..3).map(cluster).chain([gone.clone()]).collect(),
            initial_resource_versions: [
                (cluster(0), version(0)),
                (cluster(1), "not-ours".to_string()),
                (gone.clone(), "0000000000000001".to_string()),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        })
        .await
        .unwrap();
    let eds = delta.next().await;
    assert_eq!(eds.type_url, EDS);
    assert_eq!(names(&eds), [cluster(1), cluster(2)].into_iter().collect());
    assert_eq!(eds.removed_resources, vec![gone]);
    delta.ack(&eds).await;

    // Unsubscribed from svc2: its change is not sent; svc0's is.
    delta
        .stream
        .send(&DeltaDiscoveryRequest {
            type_url: EDS.into(),
            resource_names_unsubscribe: vec![cluster(2)],
            ..Default::default()
        })
        .await
        .unwrap();
    // The server reads a stream's requests in order: once it answers the
    // listeners asked for next, it has taken the unsubscription (which it
    // does not answer), and the changes below come after it (a change
    // that comes alone is pushed at once).
    delta
        .stream
        .send(&DeltaDiscoveryRequest {
            type_url: LDS.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let lds = next_of(&mut delta, LDS).await;
    delta.ack(&lds).await;
    registry
        .add_endpoints(&host(2), ip("10.0.2.9"), Labels::new())
        .unwrap();
    registry
        .add_endpoints(&host(0), ip("10.0.0.9"), Labels::new())
        .unwrap();
    let eds = next_of(&mut delta, EDS).await;
    assert_eq!(names(&eds), [cluster(0)].into_iter().collect());
    assert!(eds.removed_resources.is_empty());
    delta.ack(&eds).await;

    // Subscribed again: the proxy dropped it, so it is sent again, with
    // the change it missed.
    delta.subscribe(EDS, vec![cluster(2)]).await;
    let eds = next_of(&mut delta, EDS).await;
    assert_eq!(names(&eds), [cluster(2)].into_iter().collect());
    let assignment =
        ClusterLoadAssignment::decode(eds.resources[0].resource.as_ref().unwrap().value.as_slice()).unwrap();
    assert!(addresses(&assignment).contains("10.0.2.9:80"));
    delta.ack(&eds).await;

    // svc1 goes away: its cluster and its load assignment are removed.
    registry.remove_service(&host(1));
    let cds = next_of(&mut delta, CDS).await;
    assert!(cds.removed_resources.contains(&cluster(1)), "{cds:?}");
    delta.ack(&cds).await;
    let eds = next_of(&mut delta, EDS).await;
    assert_eq!(eds.removed_resources, vec![cluster(1)]);
    assert!(eds.resources.is_empty(), "{:?}", names(&eds));
}
