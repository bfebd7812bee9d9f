//! A proxy's side of one ADS stream, scripted by the test: either
//! protocol, the names it subscribes to kept per type as Envoy keeps
//! them, every response taken whole and answered (or not) when the test
//! says.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use prost::Message;

use super::stream::{DeltaStream, SotwStream};
use super::{CDS, EDS, LDS, RDS};

/// One response, whatever the protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// Its type URL ([`CDS`], [`EDS`], [`LDS`] or [`RDS`]).
    pub type_url: String,
    /// The version it carries (state of the world: `version_info`;
    /// delta: `system_version_info`).
    pub version: String,
    /// Its nonce.
    pub nonce: String,
    /// Its resources: (name, encoded resource).
    pub resources: Vec<(String, Vec<u8>)>,
    /// The names a delta response removes (none in state of the world).
    pub removed: Vec<String>,
}

impl From<DiscoveryResponse> for Response {
    fn from(response: DiscoveryResponse) -> Self {
        let resources = response
            .resources
            .into_iter()
            .map(|any| (resource_name(&response.type_url, &any.value), any.value))
            .collect();
        Response {
            type_url: response.type_url,
            version: response.version_info,
            nonce: response.nonce,
            resources,
            removed: Vec::new(),
        }
    }
}

impl From<DeltaDiscoveryResponse> for Response {
    fn from(response: DeltaDiscoveryResponse) -> Self {
        Response {
            type_url: response.type_url,
            version: response.system_version_info,
            nonce: response.nonce,
            resources: response
                .resources
                .into_iter()
                .map(|resource| {
                    let value = resource
                        .resource
                        .expect("a delta resource has its resource")
                        .value;
                    (resource.name, value)
                })
                .collect(),
            removed: response.removed_resources,
        }
    }
}

/// A client of either protocol on a local ADS server, keeping what Envoy
/// keeps: per type, the names subscribed to.
pub struct Client {
    /// The node id it connected with.
    pub node_id: String,
    stream: Stream,
    /// The names subscribed to, by type URL.
    names: BTreeMap<String, Vec<String>>,
    /// The load assignments it subscribes to: the EDS clusters of the last
    /// cluster response it [`ack`](Self::ack)ed.
    pub eds_names: Vec<String>,
}

enum Stream {
    Sotw(SotwStream),
    Delta(DeltaStream),
}

impl Client {
    /// Opens a stream for `node_id` on 127.0.0.1:`port` (delta when
    /// `delta`), whose first request, carrying the node, asks for every
    /// cluster.
    pub async fn open(port: u16, node_id: &str, delta: bool) -> Self {
        let node = Some(Node {
            id: node_id.into(),
            ..Default::default()
        });
        let stream = if delta {
            let mut stream = DeltaStream::connect(port).await;
            let first = DeltaDiscoveryRequest {
                node,
                type_url: CDS.into(),
                ..Default::default()
            };
            stream.send(&first).await.expect("the stream opens");
            Stream::Delta(stream)
        } else {
            let mut stream = SotwStream::connect(port).await;
            let first = DiscoveryRequest {
                node,
                type_url: CDS.into(),
                ..Default::default()
            };
            stream.send(&first).await.expect("the stream opens");
            Stream::Sotw(stream)
        };
        Client {
            node_id: node_id.into(),
            stream,
            names: BTreeMap::new(),
            eds_names: Vec::new(),
        }
    }

    /// [`open`](Self::open) a state-of-the-world stream.
    pub async fn sotw(port: u16, node_id: &str) -> Self {
        Self::open(port, node_id, false).await
    }

    /// Whether it speaks delta.
    pub fn is_delta(&self) -> bool {
        matches!(self.stream, Stream::Delta(_))
    }

    /// The next response (a hang, an error or the end of the stream fails
    /// the test).
    pub async fn next(&mut self) -> Response {
        match &mut self.stream {
            Stream::Sotw(stream) => stream.next().await.into(),
            Stream::Delta(stream) => stream.next().await.into(),
        }
    }

    /// Subscribes to `names` of `type_url` (state of the world: the whole
    /// list, empty for every resource of CDS and LDS; delta: these names
    /// besides those it has).
    pub async fn subscribe(&mut self, type_url: &str, names: Vec<String>) {
        self.names.insert(type_url.into(), names.clone());
        if self.is_delta() {
            self.send_delta(DeltaDiscoveryRequest {
                type_url: type_url.into(),
                resource_names_subscribe: names,
                ..Default::default()
            })
            .await;
        } else {
            self.send_sotw(DiscoveryRequest {
                type_url: type_url.into(),
                resource_names: names,
                ..Default::default()
            })
            .await;
        }
    }

    /// ACKs (`error` None) or NACKs `response` by its nonce. A
    /// state-of-the-world answer carries the names subscribed to and a
    /// `version_info` of the client's own making: the server must record
    /// the version it sent with the nonce, not this.
    pub async fn answer(&mut self, response: &Response, error: Option<&str>) {
        let error_detail = error.map(|message| RpcStatus {
            code: 3,
            message: message.into(),
            ..Default::default()
        });
        if self.is_delta() {
            self.send_delta(DeltaDiscoveryRequest {
                type_url: response.type_url.clone(),
                response_nonce: response.nonce.clone(),
                error_detail,
                ..Default::default()
            })
            .await;
        } else {
            let names = self.names.get(&response.type_url).cloned().unwrap_or_default();
            self.send_sotw(DiscoveryRequest {
                type_url: response.type_url.clone(),
                resource_names: names,
                version_info: format!("client-made-{}", response.version),
                response_nonce: response.nonce.clone(),
                error_detail,
                ..Default::default()
            })
            .await;
        }
    }

    /// State of the world: asks for `names` of `type_url`, ACKing
    /// `answering` as Envoy does (its version and nonce), or with neither.
    pub async fn request(&mut self, type_url: &str, names: Vec<String>, answering: Option<&Response>) {
        self.names.insert(type_url.into(), names.clone());
        self.send_sotw(DiscoveryRequest {
            type_url: type_url.into(),
            resource_names: names,
            version_info: answering.map(|r| r.version.clone()).unwrap_or_default(),
            response_nonce: answering.map(|r| r.nonce.clone()).unwrap_or_default(),
            ..Default::default()
        })
        .await;
    }

    /// State of the world: ACKs `response` as Envoy does. A cluster
    /// response's EDS clusters become the load assignments subscribed to,
    /// and the next response, which must be of load assignments, is ACKed
    /// and returned.
    pub async fn ack(&mut self, response: &Response) -> Option<Response> {
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

    /// State of the world: takes the first cluster response, subscribes to
    /// the load assignments of its EDS clusters and to listeners, ACKing
    /// each; returns the three responses.
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

    /// Sends `request` on a state-of-the-world stream.
    pub async fn send_sotw(&mut self, request: DiscoveryRequest) {
        let Stream::Sotw(stream) = &mut self.stream else {
            panic!("a state-of-the-world request on a delta stream");
        };
        stream.send(&request).await.expect("the stream is open");
    }

    /// Sends `request` on a delta stream.
    pub async fn send_delta(&mut self, request: DeltaDiscoveryRequest) {
        let Stream::Delta(stream) = &mut self.stream else {
            panic!("a delta request on a state-of-the-world stream");
        };
        stream.send(&request).await.expect("the stream is open");
    }
}

/// What a state-of-the-world client was sent when it connected
/// ([`Client::sync`]).
pub struct Synced {
    /// The clusters.
    pub cds: Response,
    /// The load assignments of its EDS clusters.
    pub eds: Option<Response>,
    /// The listeners.
    pub lds: Response,
}

/// The clusters of a cluster response.
pub fn clusters(response: &Response) -> Vec<Cluster> {
    response
        .resources
        .iter()
        .map(|(_, value)| Cluster::decode(value.as_slice()).expect("a cluster"))
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

/// The name of an encoded resource of type `type_url`.
fn resource_name(type_url: &str, value: &[u8]) -> String {
    match type_url {
        CDS => Cluster::decode(value).expect("a cluster").name,
        EDS => {
            ClusterLoadAssignment::decode(value)
                .expect("a load assignment")
                .cluster_name
        }
        LDS => Listener::decode(value).expect("a listener").name,
        RDS => {
            RouteConfiguration::decode(value)
                .expect("a route configuration")
                .name
        }
        super::SDS => {
            envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret::decode(value)
                .expect("a secret")
                .name
        }
        other => panic!("a response of unknown type {other}"),
    }
}
