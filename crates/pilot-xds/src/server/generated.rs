//! Generated configuration shared between connections: computed once per
//! push for each class of proxy, and encoded once.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use envoy_types::pb::envoy::service::discovery::v3::Resource;
use envoy_types::pb::google::protobuf::Any;
use pilot_model::{Labels, ServiceDiscovery};
use tokio::sync::OnceCell;

use crate::util::any;
use crate::{MeshConfig, Proxy, ProxyType, Resources, TrafficCapture, generate};

/// What a proxy's configuration depends on besides the mesh: proxies equal
/// here get equal configuration, so it is generated once for all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ProxyClass {
    proxy_type: ProxyType,
    capture: TrafficCapture,
    domain: String,
    labels: Labels,
    /// The proxy's own instances: (hostname, address, port, service port, labels).
    own: Vec<(String, String, u16, u16, Labels)>,
}

impl ProxyClass {
    pub(crate) fn of(proxy: &Proxy, registry: &dyn ServiceDiscovery) -> Self {
        let mut own: Vec<_> = registry
            .host_instances(&[proxy.ip])
            .into_iter()
            .map(|i| {
                (
                    i.service.hostname.clone(),
                    i.endpoint.address.to_string(),
                    i.endpoint.port,
                    i.endpoint.service_port.port,
                    i.labels,
                )
            })
            .collect();
        own.sort();
        ProxyClass {
            proxy_type: proxy.proxy_type,
            capture: proxy.capture,
            domain: proxy.domain.clone(),
            labels: proxy.labels.clone(),
            own,
        }
    }
}

/// One resource of an [`EncodedType`].
pub(crate) struct Entry {
    pub(crate) name: Arc<str>,
    /// A digest of the resource's encoding.
    pub(crate) version: u64,
    /// Where its entry is in [`EncodedType::sotw`].
    range: Range<usize>,
    /// The length of its `Any.value`.
    value_len: usize,
}

/// One type's resources, encoded once for every connection that is sent
/// them: `sotw` holds each resource as it appears in a
/// `DiscoveryResponse` (field 2, an `Any`), back to back, so a response is
/// a small header plus slices of this buffer; the delta form (field 2 of a
/// `DeltaDiscoveryResponse`, a `Resource` with name and version) is built
/// the first time an incremental stream needs it.
pub(crate) struct EncodedType {
    pub(crate) entries: Vec<Entry>,
    sotw: Bytes,
    delta: OnceLock<(Bytes, Vec<Range<usize>>)>,
    type_url: &'static str,
}

impl EncodedType {
    fn new(type_url: &'static str, resources: Vec<(String, Any)>) -> Self {
        let mut buffer = BytesMut::new();
        let mut entries = Vec::with_capacity(resources.len());
        for (name, any) in resources {
            let start = buffer.len();
            prost::encoding::message::encode(2, &any, &mut buffer);
            entries.push(Entry {
                name: name.into(),
                version: digest_of(&any.value),
                range: start..buffer.len(),
                value_len: any.value.len(),
            });
        }
        EncodedType {
            entries,
            sotw: buffer.freeze(),
            delta: OnceLock::new(),
            type_url,
        }
    }

    /// A digest of the resources that `wanted` selects.
    pub(crate) fn digest(&self, wanted: impl Fn(&str) -> bool) -> u64 {
        let mut hasher = DefaultHasher::new();
        for entry in self.entries.iter().filter(|e| wanted(&e.name)) {
            entry.name.hash(&mut hasher);
            entry.version.hash(&mut hasher);
        }
        hasher.finish()
    }

    /// The `DiscoveryResponse.resources` of the entries `wanted` selects:
    /// slices of the shared buffer (one when the selection is contiguous).
    pub(crate) fn sotw(&self, wanted: impl Fn(&Entry) -> bool) -> Vec<Bytes> {
        slices(
            &self.sotw,
            self.entries.iter().map(|e| (wanted(e), e.range.clone())),
        )
    }

    /// The `DeltaDiscoveryResponse.resources` of the entries `wanted`
    /// selects, each named and versioned.
    pub(crate) fn delta(&self, wanted: impl Fn(&Entry) -> bool) -> Vec<Bytes> {
        let (buffer, ranges) = self.delta.get_or_init(|| {
            let mut buffer = BytesMut::new();
            let ranges = self
                .entries
                .iter()
                .map(|entry| {
                    let start = buffer.len();
                    let resource = Resource {
                        name: entry.name.to_string(),
                        version: version_text(entry.version),
                        resource: Some(Any {
                            type_url: self.type_url.to_string(),
                            value: self.any_value(entry).to_vec(),
                        }),
                        ..Default::default()
                    };
                    prost::encoding::message::encode(2, &resource, &mut buffer);
                    start..buffer.len()
                })
                .collect();
            (buffer.freeze(), ranges)
        });
        slices(
            buffer,
            self.entries
                .iter()
                .zip(ranges)
                .map(|(e, r)| (wanted(e), r.clone())),
        )
    }

    /// The encoded `Any.value` of an entry: the tail of its `sotw` form
    /// (prost writes `Any`'s fields in tag order, `value` last).
    fn any_value(&self, entry: &Entry) -> &[u8] {
        &self.sotw[entry.range.end - entry.value_len..entry.range.end]
    }
}

/// The slices of `buffer` whose flag is set, neighbours joined.
fn slices(buffer: &Bytes, ranges: impl Iterator<Item = (bool, Range<usize>)>) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut run: Option<Range<usize>> = None;
    for (wanted, range) in ranges {
        if !wanted {
            continue;
        }
        run = match run {
            Some(r) if r.end == range.start => Some(r.start..range.end),
            Some(r) => {
                out.push(buffer.slice(r));
                Some(range)
            }
            None => Some(range),
        };
    }
    out.extend(run.map(|r| buffer.slice(r)));
    out
}

/// A resource version as sent to proxies.
pub(crate) fn version_text(version: u64) -> String {
    format!("{version:016x}")
}

/// A proxy class's configuration for one push, encoded per type (in
/// [`ORDER`]).
pub(crate) struct Generated {
    pub(crate) types: HashMap<&'static str, EncodedType>,
    /// What each distinct state-of-the-world subscription selects, worked
    /// out once for the proxies that share it (subscriptions' name sets are
    /// interned, so the set's address identifies it).
    selections: Mutex<HashMap<(&'static str, usize), Arc<Selection>>>,
}

/// The resources of one type a subscription selects.
pub(crate) struct Selection {
    /// A digest of their names and versions: unchanged means nothing to send.
    pub(crate) digest: u64,
    /// Their `DiscoveryResponse.resources`, as shared slices.
    pub(crate) resources: Vec<Bytes>,
    /// Keeps the set (and so the address in the key) alive.
    _names: Option<Arc<BTreeSet<String>>>,
}

impl Generated {
    /// What `names` (`None`: every resource) selects of type `short`.
    pub(crate) fn select(
        &self,
        short: &'static str,
        names: &Option<Arc<BTreeSet<String>>>,
    ) -> Arc<Selection> {
        let key = (short, names.as_ref().map_or(0, |n| Arc::as_ptr(n) as usize));
        if let Some(found) = self
            .selections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Arc::clone(found);
        }
        let wanted = |name: &str| names.as_ref().is_none_or(|names| names.contains(name));
        let encoded = &self.types[short];
        let selection = Arc::new(Selection {
            digest: encoded.digest(wanted),
            resources: encoded.sotw(|entry| wanted(&entry.name)),
            _names: names.clone(),
        });
        self.selections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, Arc::clone(&selection));
        selection
    }
}

/// The configurations generated for one push, by proxy class.
#[derive(Default)]
pub(crate) struct GeneratedCache {
    by_class: Mutex<HashMap<ProxyClass, Arc<OnceCell<Arc<Generated>>>>>,
}

impl GeneratedCache {
    /// The configuration of `proxy`'s class, generating it if no proxy of
    /// the class has yet for this push.
    pub(crate) async fn get(
        &self,
        proxy: &Proxy,
        registry: &dyn ServiceDiscovery,
        mesh: &MeshConfig,
    ) -> Arc<Generated> {
        let class = ProxyClass::of(proxy, registry);
        let cell = Arc::clone(
            self.by_class
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(class)
                .or_default(),
        );
        cell.get_or_init(|| async {
            let resources = generate(proxy, registry, mesh);
            let types = ORDER
                .iter()
                .map(|&(short, url)| (short, EncodedType::new(url, named(&resources, short))))
                .collect();
            Arc::new(Generated {
                types,
                selections: Default::default(),
            })
        })
        .await
        .clone()
    }
}

/// A digest of a resource's encoding: its version.
fn digest_of(value: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// The xDS types this server serves, in push order.
pub(crate) const ORDER: [(&str, &str); 4] = [
    ("CDS", "type.googleapis.com/envoy.config.cluster.v3.Cluster"),
    (
        "EDS",
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
    ),
    ("LDS", "type.googleapis.com/envoy.config.listener.v3.Listener"),
    (
        "RDS",
        "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
    ),
];

/// Every resource of a type, by name, encoded.
pub(crate) fn named(resources: &Resources, short: &str) -> Vec<(String, Any)> {
    match short {
        "CDS" => resources
            .clusters
            .iter()
            .map(|c| (c.name.clone(), any(c)))
            .collect(),
        "EDS" => resources
            .endpoints
            .iter()
            .map(|e| (e.cluster_name.clone(), any(e)))
            .collect(),
        "LDS" => resources
            .listeners
            .iter()
            .map(|l| (l.name.clone(), any(l)))
            .collect(),
        _ => resources
            .routes
            .iter()
            .map(|r| (r.name.clone(), any(r)))
            .collect(),
    }
}
