//! [`KubeServiceDiscovery`]: Kubernetes as a service registry.

mod model;
mod workloads;

use std::collections::BTreeMap;
use std::fmt::Debug;

use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service as KubeService};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use pilot_model::RegistryAdapter;
use pilot_store::{FollowedRegistry, RegistryWriter};
use serde::de::DeserializeOwned;

use model::{ObjectKey, Objects};
pub use model::{hostname, port_protocol};

/// What a [`KubeServiceDiscovery`] follows and how it names services.
#[derive(Debug, Clone)]
pub struct DiscoveryOptions {
    /// The cluster's DNS domain (default `cluster.local`): services are
    /// `<name>.<namespace>.svc.<domain>`.
    pub domain: String,
    /// Follow one namespace only (`None`: every namespace, which needs
    /// cluster-wide RBAC to list and watch Services, EndpointSlices and
    /// Pods).
    pub namespace: Option<String>,
    /// Follow Nodes for instances' zones (`region/zone` from the
    /// `topology.kubernetes.io` labels); needs RBAC to list and watch Nodes.
    /// Without it an instance's zone is its EndpointSlice endpoint's `zone`.
    pub nodes: bool,
    /// Follow Namespaces for their labels (a namespace's
    /// `istio.io/dataplane-mode` enrolls its Pods in ambient mode); needs
    /// RBAC to list and watch Namespaces, cluster-wide even when
    /// [`namespace`](Self::namespace) is set.
    pub namespaces: bool,
    /// The cluster's id in workloads' uids (`<cluster>//Pod/<ns>/<name>`);
    /// `None`: `Kubernetes`, as istiod's default.
    pub cluster_id: Option<String>,
}

impl Default for DiscoveryOptions {
    fn default() -> Self {
        DiscoveryOptions {
            domain: "cluster.local".into(),
            namespace: None,
            nodes: true,
            namespaces: true,
            cluster_id: None,
        }
    }
}

/// A [`ServiceDiscovery`](pilot_model::ServiceDiscovery) that follows a Kubernetes cluster.
///
/// - Each Service is a service `<name>.<namespace>.svc.<domain>` with its
///   cluster IP (none for headless Services) and ports; a port's protocol
///   comes from `appProtocol` or its name's prefix ([`port_protocol`]). An
///   `ExternalName` Service is an external service with no instances.
/// - Its instances are the ready addresses of its EndpointSlices (label
///   `kubernetes.io/service-name`), one per address and Service port, on the
///   EndpointSlice's port of the same name: labels and service account from
///   the Pod the endpoint points to (so `version=v2` selects), zone from the
///   Node's topology labels (or the endpoint's `zone`).
/// - Each Pod is a [`Workload`](pilot_model::Workload) (`workloads.rs`:
///   uid `<cluster>//Pod/<ns>/<name>`, its IPs, service account, labels,
///   node, network from `topology.istio.io/network`, locality, readiness
///   and its Namespace's labels), shared by the instances of the endpoints
///   that point to it; the Pods that back no ready endpoint are listed
///   ([`ServiceDiscovery::workloads`](pilot_model::ServiceDiscovery::workloads)).
///   A change to a Pod or to its Namespace's labels changes its workload:
///   its instances are updated, or the listed workload is, with events.
/// - Services, EndpointSlices, Pods (and Nodes and Namespaces) are followed with
///   kube-runtime's watcher with its default backoff: a 410 Gone or a broken
///   watch leads to a new list, and whatever the list no longer holds is
///   removed, with events, as any other delete.
/// - After each batch of watcher events the services and instances they
///   describe (a pure function) are applied to a [`FollowedRegistry`] as a
///   minimal diff: changes stream to subscribers as [`ServiceEvent`](pilot_model::ServiceEvent)s (a
///   subscriber that falls behind gets [`ServiceEvent::Resync`](pilot_model::ServiceEvent::Resync)) and
///   snapshots are shared, not copied.
///
/// It is a [`ServiceDiscovery`](pilot_model::ServiceDiscovery) through [`RegistryAdapter`]: it has synced
/// once every followed resource has been listed once and the registry shows
/// what was listed. A resource that cannot be listed (RBAC, no API server)
/// is retried with backoff and logged, so `wait_synced` waits until it can;
/// bound it with a timeout where that matters.
///
/// Dropping the last handle stops the watches.
#[derive(Clone)]
pub struct KubeServiceDiscovery {
    followed: FollowedRegistry,
}

impl KubeServiceDiscovery {
    /// Starts following the cluster. Must be called inside a Tokio runtime.
    pub fn start(client: Client, options: DiscoveryOptions) -> Self {
        KubeServiceDiscovery {
            followed: FollowedRegistry::spawn(move |writer| follow(client, options, writer)),
        }
    }
}

// Every read (and sync, and snapshot) is the followed registry's.
impl RegistryAdapter for KubeServiceDiscovery {
    type Registry = FollowedRegistry;

    fn registry(&self) -> &FollowedRegistry {
        &self.followed
    }
}

/// One watcher event of one of the followed resources.
enum Change {
    Service(Box<watcher::Event<KubeService>>),
    Slice(Box<watcher::Event<EndpointSlice>>),
    Pod(Box<watcher::Event<Pod>>),
    Node(Box<watcher::Event<Node>>),
    Namespace(Box<watcher::Event<Namespace>>),
}

/// Follows the resources and keeps the registry equal to what they
/// describe.
async fn follow(client: Client, options: DiscoveryOptions, writer: RegistryWriter) {
    let ns = options.namespace.as_deref();
    let mut streams: Vec<BoxStream<'static, Change>> = vec![
        follow_resource(api(&client, ns), Change::Service),
        follow_resource(api(&client, ns), Change::Slice),
        follow_resource(api(&client, ns), Change::Pod),
    ];
    if options.nodes {
        streams.push(follow_resource(Api::all(client.clone()), Change::Node));
    }
    if options.namespaces {
        streams.push(follow_resource(Api::all(client.clone()), Change::Namespace));
    }
    let cluster_id = options
        .cluster_id
        .clone()
        .unwrap_or_else(|| pilot_model::DEFAULT_CLUSTER_ID.to_string());
    let resources = streams.len();
    // Up to 256 ready changes are applied together, then the registry is
    // brought up to date once.
    let mut changes = futures::stream::select_all(streams).ready_chunks(256);
    let mut objects = Objects::default();
    let mut lists = Lists::default();
    while let Some(batch) = changes.next().await {
        for change in batch {
            match change {
                Change::Service(event) => lists.services.apply(&mut objects.services, *event),
                Change::Slice(event) => lists.slices.apply(&mut objects.slices, *event),
                Change::Pod(event) => lists.pods.apply(&mut objects.pods, *event),
                Change::Node(event) => lists.nodes.apply(&mut objects.nodes, *event),
                Change::Namespace(event) => lists.namespaces.apply(&mut objects.namespaces, *event),
            }
        }
        if lists.listed() < resources {
            continue;
        }
        writer.apply(objects.desired(&options.domain, &cluster_id));
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// A resource's watcher events, with errors logged (the watcher retries
/// them with backoff).
fn follow_resource<K>(api: Api<K>, wrap: fn(Box<watcher::Event<K>>) -> Change) -> BoxStream<'static, Change>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |item| {
            futures::future::ready(match item {
                Ok(event) => Some(wrap(Box::new(event))),
                Err(error) => {
                    tracing::warn!(resource = %K::plural(&K::DynamicType::default()), %error, "watch failed; retrying");
                    None
                }
            })
        })
        .boxed()
}

/// Each resource's list in progress (between `Init` and `InitDone`).
#[derive(Default)]
struct Lists {
    services: Listing<KubeService>,
    slices: Listing<EndpointSlice>,
    pods: Listing<Pod>,
    nodes: Listing<Node>,
    namespaces: Listing<Namespace>,
}

impl Lists {
    /// How many resources have been listed at least once.
    fn listed(&self) -> usize {
        [
            self.services.done,
            self.slices.done,
            self.pods.done,
            self.nodes.done,
            self.namespaces.done,
        ]
        .iter()
        .filter(|d| **d)
        .count()
    }
}

struct Listing<K> {
    buffer: Option<BTreeMap<ObjectKey, K>>,
    done: bool,
}

impl<K> Default for Listing<K> {
    fn default() -> Self {
        Listing {
            buffer: None,
            done: false,
        }
    }
}

impl<K: ResourceExt> Listing<K> {
    /// Applies a watcher event. A relist replaces the objects when it is
    /// complete, so objects deleted while the watch was down disappear.
    fn apply(&mut self, objects: &mut BTreeMap<ObjectKey, K>, event: watcher::Event<K>) {
        let key = |o: &K| (o.namespace().unwrap_or_default(), o.name_any());
        match event {
            watcher::Event::Init => self.buffer = Some(BTreeMap::new()),
            watcher::Event::InitApply(object) => {
                self.buffer.get_or_insert_default().insert(key(&object), object);
            }
            watcher::Event::InitDone => {
                *objects = self.buffer.take().unwrap_or_default();
                self.done = true;
            }
            watcher::Event::Apply(object) => {
                objects.insert(key(&object), object);
            }
            watcher::Event::Delete(object) => {
                objects.remove(&key(&object));
            }
        }
    }
}
