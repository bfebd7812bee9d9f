//! A state-of-the-world client for proxies in several namespaces, and
//! waiting on one proxy's feedback: for the tests that compare what each
//! proxy is sent (scoping, incremental pushes).

use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use pilot_ads::{ProxyStatus, XdsServer};
use pilot_test_support::ads::{self, CDS, EDS, LDS};
use prost::Message;
use tokio::sync::mpsc;

use super::ads_client::PATIENCE;

/// The node id of a sidecar at `ip` in `namespace`.
pub fn node_id(namespace: &str, ip: &str) -> String {
    format!("sidecar~{ip}~client.{namespace}~{namespace}.svc.cluster.local")
}

/// A state-of-the-world client subscribing to clusters, the load
/// assignments of its EDS clusters and listeners, ACKing.
pub struct Sotw {
    /// The node id it connected with.
    pub node_id: String,
    requests: mpsc::Sender<DiscoveryRequest>,
    responses: tonic::Streaming<DiscoveryResponse>,
    /// The load assignments it subscribes to: the EDS clusters of the
    /// last cluster response it took.
    pub eds_names: Vec<String>,
}

impl Sotw {
    /// Opens a stream for a sidecar at `ip` in `namespace`, asking for
    /// every cluster.
    pub async fn open(port: u16, namespace: &str, ip: &str) -> Self {
        let node_id = node_id(namespace, ip);
        let (tx, requests) = ads::requests(8);
        tx.send(DiscoveryRequest {
            node: Some(Node {
                id: node_id.clone(),
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
        Sotw {
            node_id,
            requests: tx,
            responses,
            eds_names: Vec::new(),
        }
    }

    /// The next response (a hang fails the test).
    pub async fn next(&mut self) -> DiscoveryResponse {
        tokio::time::timeout(PATIENCE, self.responses.message())
            .await
            .expect("a response")
            .unwrap()
            .expect("the stream is open")
    }

    /// Asks for `names` of `type_url`, answering (ACKing) `answering`.
    pub async fn request(&self, type_url: &str, names: Vec<String>, answering: Option<&DiscoveryResponse>) {
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

    /// Takes the first cluster response, subscribes to the load
    /// assignments of its EDS clusters and to listeners, ACKing each;
    /// returns the three responses.
    pub async fn sync(&mut self) -> Synced {
        let cds = self.next().await;
        assert_eq!(cds.type_url, CDS);
        let eds = self.ack(&cds).await;
        self.request(LDS, vec![], None).await;
        let lds = self.next().await;
        assert_eq!(lds.type_url, LDS);
        self.request(LDS, vec![], Some(&lds)).await;
        Synced { cds, eds, lds }
    }

    /// ACKs `response`. A cluster response's EDS clusters become the
    /// load assignments subscribed to, and the next response, which must
    /// be of load assignments, is ACKed and returned.
    pub async fn ack(&mut self, response: &DiscoveryResponse) -> Option<DiscoveryResponse> {
        if response.type_url != CDS {
            let names = if response.type_url == EDS {
                self.eds_names.clone()
            } else {
                vec![]
            };
            self.request(&response.type_url, names, Some(response)).await;
            return None;
        }
        self.request(CDS, vec![], Some(response)).await;
        self.eds_names = eds_names(&clusters(response));
        self.request(EDS, self.eds_names.clone(), None).await;
        let eds = self.next().await;
        assert_eq!(eds.type_url, EDS);
        self.request(EDS, self.eds_names.clone(), Some(&eds)).await;
        Some(eds)
    }
}

/// What a client was sent when it connected.
pub struct Synced {
    /// The clusters.
    pub cds: DiscoveryResponse,
    /// The load assignments of its EDS clusters.
    pub eds: Option<DiscoveryResponse>,
    /// The listeners.
    pub lds: DiscoveryResponse,
}

/// The clusters of a cluster response.
pub fn clusters(response: &DiscoveryResponse) -> Vec<Cluster> {
    response
        .resources
        .iter()
        .map(|any| Cluster::decode(any.value.as_slice()).unwrap())
        .collect()
}

/// The names of the EDS clusters among `clusters`.
pub fn eds_names(clusters: &[Cluster]) -> Vec<String> {
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

/// Waits until the feedback of the proxy `node_id` satisfies `check`;
/// returns it.
pub async fn wait_proxy(
    server: &XdsServer,
    node_id: &str,
    check: impl Fn(&ProxyStatus) -> bool,
) -> ProxyStatus {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let found = server.status().into_iter().find(|p| p.node_id == node_id);
        if let Some(status) = found.filter(|s| check(s)) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{node_id}: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
