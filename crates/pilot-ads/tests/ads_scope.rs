//! Scoping over real ADS streams: a Sidecar in namespace `a` importing
//! `./*` with `REGISTRY_ONLY` gives `a`'s proxies only `a`'s services and a
//! black hole for the rest, while `b` (no Sidecar) sees the whole mesh; a
//! change to a host outside `a`'s scope reaches `b` and sends `a` nothing.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use pilot_ads::{XdsOptions, XdsServer};
use pilot_model::{ConfigStore, Labels, Port, Protocol, Service, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::{self, CDS, EDS, LDS};
use pilot_xds::{BLACK_HOLE, HostReason, PASSTHROUGH, Proxy, ScopeOrigin};
use prost::Message;
use tokio::sync::mpsc;

/// How long any one response may take before the test fails (a hang, not a
/// timing measurement).
const PATIENCE: Duration = Duration::from_secs(20);

const HOSTS: [&str; 3] = [
    "a1.a.svc.cluster.local",
    "a2.a.svc.cluster.local",
    "b1.b.svc.cluster.local",
];

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

async fn apply(controller: &Controller, yaml: &str) {
    for object in document::parse("t.yaml", yaml, &pilot_model::default_registry()).unwrap() {
        controller.create(object).await.unwrap();
    }
}

async fn server() -> (XdsServer, u16, Arc<MemoryServiceRegistry>, Arc<Controller>) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    for (i, host) in HOSTS.iter().enumerate() {
        registry.add_service(Service::new(*host, vec![Port::new("http", 80, Protocol::Http)]));
        registry
            .add_endpoints(
                host,
                ip(&format!("10.0.{i}.1")),
                Labels::from_pairs([("version", "v1")]),
            )
            .unwrap();
    }
    let store = MemoryConfigStore::new(pilot_model::default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();
    apply(
        &controller,
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress: [{hosts: ["./*"]}]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"#,
    )
    .await;
    let server = XdsServer::new(
        Arc::clone(&controller),
        Arc::clone(&registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        XdsOptions::default(),
    );
    let port = pilot_test_support::free_port();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve(([127, 0, 0, 1], port).into(), std::future::pending())
            .await
    });
    (server, port, registry, controller)
}

fn node_id(namespace: &str, ip: &str) -> String {
    format!("sidecar~{ip}~client.{namespace}~{namespace}.svc.cluster.local")
}

/// A state-of-the-world client subscribed to clusters, load assignments
/// and listeners, ACKing.
struct Client {
    requests: mpsc::Sender<DiscoveryRequest>,
    responses: tonic::Streaming<DiscoveryResponse>,
    eds_names: Vec<String>,
}

impl Client {
    async fn open(port: u16, namespace: &str, ip: &str) -> Self {
        let (tx, requests) = ads::requests(8);
        tx.send(DiscoveryRequest {
            node: Some(Node {
                id: node_id(namespace, ip),
                ..Default::default()
            }),
            type_url: CDS.into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let responses = ads::ads_client(port)
            .await
            .stream_aggregated_resources(requests)
            .await
            .unwrap()
            .into_inner();
        Client {
            requests: tx,
            responses,
            eds_names: Vec::new(),
        }
    }

    async fn next(&mut self) -> DiscoveryResponse {
        tokio::time::timeout(PATIENCE, self.responses.message())
            .await
            .expect("a response")
            .unwrap()
            .expect("the stream is open")
    }

    async fn request(&self, type_url: &str, names: Vec<String>, answering: Option<&DiscoveryResponse>) {
        self.requests
            .send(DiscoveryRequest {
                type_url: type_url.into(),
                resource_names: names,
                version_info: answering.map(|r| r.version_info.clone()).unwrap_or_default(),
                response_nonce: answering.map(|r| r.nonce.clone()).unwrap_or_default(),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    /// Subscribes to everything, ACKing; returns the clusters.
    async fn sync(&mut self) -> Vec<Cluster> {
        let cds = self.next().await;
        assert_eq!(cds.type_url, CDS);
        let clusters = clusters(&cds);
        self.eds_names = eds_names(&clusters);
        self.request(CDS, vec![], Some(&cds)).await;
        self.request(EDS, self.eds_names.clone(), None).await;
        let eds = self.next().await;
        assert_eq!(eds.type_url, EDS);
        self.request(EDS, self.eds_names.clone(), Some(&eds)).await;
        self.request(LDS, vec![], None).await;
        let lds = self.next().await;
        assert_eq!(lds.type_url, LDS);
        self.request(LDS, vec![], Some(&lds)).await;
        clusters
    }

    /// ACKs `response` (a CDS one: with the load assignments of its EDS
    /// clusters subscribed, and their response ACKed).
    async fn ack(&mut self, response: &DiscoveryResponse) {
        if response.type_url == CDS {
            self.request(CDS, vec![], Some(response)).await;
            self.eds_names = eds_names(&clusters(response));
            self.request(EDS, self.eds_names.clone(), None).await;
            let eds = self.next().await;
            assert_eq!(eds.type_url, EDS);
            self.request(EDS, self.eds_names.clone(), Some(&eds)).await;
        } else {
            self.request(&response.type_url, self.names(&response.type_url), Some(response))
                .await;
        }
    }

    fn names(&self, type_url: &str) -> Vec<String> {
        if type_url == EDS {
            self.eds_names.clone()
        } else {
            vec![]
        }
    }
}

fn clusters(response: &DiscoveryResponse) -> Vec<Cluster> {
    response
        .resources
        .iter()
        .map(|any| Cluster::decode(any.value.as_slice()).unwrap())
        .collect()
}

fn eds_names(clusters: &[Cluster]) -> Vec<String> {
    clusters
        .iter()
        .filter(|c| {
            c.cluster_discovery_type
                == Some(cluster::ClusterDiscoveryType::Type(
                    cluster::DiscoveryType::Eds as i32,
                ))
        })
        .map(|c| c.name.clone())
        .collect()
}

fn names(clusters: &[Cluster]) -> BTreeSet<String> {
    clusters.iter().map(|c| c.name.clone()).collect()
}

fn outbound(host: &str) -> String {
    format!("outbound|80||{host}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_scopes_its_namespace_and_an_out_of_scope_change_sends_it_nothing() {
    let (server, port, registry, controller) = server().await;
    let mut a = Client::open(port, "a", "10.1.0.1").await;
    let mut b = Client::open(port, "b", "10.1.0.2").await;
    let in_a = names(&a.sync().await);
    let in_b = names(&b.sync().await);

    // a: its own namespace's services and the black hole, nothing of b's.
    assert!(in_a.contains(&outbound(HOSTS[0])), "{in_a:?}");
    assert!(in_a.contains(&outbound(HOSTS[1])), "{in_a:?}");
    assert!(
        !in_a.contains(&outbound(HOSTS[2])),
        "b1 is out of a's scope: {in_a:?}"
    );
    assert!(in_a.contains(BLACK_HOLE), "REGISTRY_ONLY: {in_a:?}");
    assert!(!in_a.contains(PASSTHROUGH), "REGISTRY_ONLY: {in_a:?}");
    // b: no Sidecar, the whole mesh and the passthrough.
    for host in HOSTS {
        assert!(in_b.contains(&outbound(host)), "{host} in {in_b:?}");
    }
    assert!(in_b.contains(PASSTHROUGH), "{in_b:?}");
    assert!(!in_b.contains(BLACK_HOLE), "{in_b:?}");

    // Why: the namespace's default Sidecar imported a's hosts by `./*`.
    let proxy = Proxy::from_node_id(&node_id("a", "10.1.0.1")).unwrap();
    let scope = server.scope(&proxy).unwrap();
    assert_eq!(
        scope.origin,
        ScopeOrigin::NamespaceDefault {
            namespace: "a".into(),
            name: "default".into()
        }
    );
    assert_eq!(
        scope.hosts.into_iter().collect::<Vec<_>>(),
        [
            (HOSTS[0].to_string(), HostReason::Imported("./*".into())),
            (HOSTS[1].to_string(), HostReason::Imported("./*".into())),
        ]
    );

    // A DestinationRule for b1 (out of a's scope) adds a subset cluster:
    // b is sent new clusters...
    let sent = |server: &XdsServer| server.sent_by_type().iter().map(|(_, n)| n).sum::<u64>();
    let before = sent(&server);
    apply(
        &controller,
        r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b1, namespace: b}
spec:
  host: b1.b.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}]
"#,
    )
    .await;
    let cds = b.next().await;
    assert_eq!(cds.type_url, CDS);
    assert!(
        names(&clusters(&cds)).len() > in_b.len(),
        "the subset's cluster is new"
    );
    b.ack(&cds).await;
    let after_rule = sent(&server);
    // CDS and the EDS answering b's new subscription: b only.
    assert_eq!(after_rule - before, 2, "{:?}", server.sent_by_type());

    // ...and a nothing: its next response is the load assignment of a1's
    // new endpoint, not anything the rule brought.
    registry
        .add_endpoints(HOSTS[0], ip("10.0.0.2"), Labels::from_pairs([("version", "v1")]))
        .unwrap();
    let eds = a.next().await;
    assert_eq!(eds.type_url, EDS, "a's first response since the rule");
    a.ack(&eds).await;
    let eds = b.next().await;
    assert_eq!(eds.type_url, EDS);
}
