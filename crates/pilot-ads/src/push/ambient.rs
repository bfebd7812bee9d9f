//! What ztunnels are served, generated once per push for all of them: every
//! `istio.workload.Address` (workloads and services, `pilot_xds::ambient`)
//! and every `istio.security.Authorization`, each encoded once as a delta
//! `Resource` with its version (a digest of its content), and what changed
//! since the resources generated before (so a stream that holds those
//! looks only at the changes: a pod change costs each ztunnel one
//! resource, not a pass over the mesh).
//!
//! Generated lazily, by the first ztunnel stream that serves a push, and
//! kept until a push changes the registry or the rules: a push that
//! changes neither (an Envoy's rejection, say) is served the same
//! resources.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{BufMut, Bytes, BytesMut};
use pilot_xds::ambient::{self, AmbientOptions};
use prost::Message;

use super::snapshot::MeshSnapshot;
use crate::xds_type::XdsType;

/// One resource, encoded.
#[derive(Debug)]
pub(crate) struct Entry {
    /// Its name.
    pub(crate) name: Arc<str>,
    /// A digest of its content, in hex: equal versions, equal content.
    pub(crate) version: Arc<str>,
    /// The message (an `Address` or `Authorization`), encoded.
    pub(crate) value: Bytes,
    /// The delta response's `resources` field with it: tag, length and the
    /// `Resource` (name, version, `Any`), ready to frame.
    pub(crate) framed: Bytes,
    /// For an authorization: the namespace whose workloads it may apply to
    /// (`None`: every namespace, a root-namespace policy).
    pub(crate) namespace: Option<Arc<str>>,
}

/// One type's resources, by name.
pub(crate) type TypeEntries = BTreeMap<Arc<str>, Arc<Entry>>;

/// Every resource ztunnels are served, as of one push.
#[derive(Debug)]
pub(crate) struct AmbientResources {
    /// Increases with every generation.
    pub(crate) generation: u64,
    /// The push's version (reported as the responses' version).
    pub(crate) version: u64,
    /// By type: `[Address, Authorization]`.
    pub(crate) types: [TypeEntries; 2],
    /// By `<network>/<ip>`, the name of the workload or service at that
    /// address (what an on-demand subscription may ask for).
    pub(crate) by_address: HashMap<String, Arc<str>>,
    /// By node, the namespaces of the workloads running there.
    pub(crate) node_namespaces: HashMap<String, BTreeSet<String>>,
    /// The names changed, added or removed since generation `since.0`, by
    /// type.
    pub(crate) since: Option<(u64, [Vec<Arc<str>>; 2])>,
    /// By type, every entry's `framed` concatenated in name order: what a
    /// ztunnel that holds nothing is sent at connect, made once (by the
    /// first stream that needs it) and shared, so that the response goes
    /// out as a few large DATA frames rather than one per resource.
    whole: [OnceLock<Bytes>; 2],
}

impl AmbientResources {
    /// The index of `t` in [`AmbientResources::types`].
    pub(crate) fn slot(t: XdsType) -> usize {
        t.index() - XdsType::ALL.len()
    }

    /// The namespaces of the workloads on `node`.
    pub(crate) fn namespaces_on(&self, node: &str) -> Option<&BTreeSet<String>> {
        self.node_namespaces.get(node)
    }

    /// Every resource of type `slot`, framed, in name order (see
    /// [`AmbientResources::whole`]).
    pub(crate) fn whole(&self, slot: usize) -> Bytes {
        self.whole[slot]
            .get_or_init(|| {
                let entries = &self.types[slot];
                let mut all = BytesMut::with_capacity(entries.values().map(|e| e.framed.len()).sum());
                for entry in entries.values() {
                    all.put_slice(&entry.framed);
                }
                all.freeze()
            })
            .clone()
    }
}

/// The latest resources generated, shared by the server's ztunnel streams.
///
/// Generation runs on the blocking pool, once per push that changed the
/// registry or the rules: the streams that need it wait for it without
/// holding a worker thread (a mesh of 10,000 workloads takes about a
/// tenth of a second), and no lock is held meanwhile.
#[derive(Default)]
pub(crate) struct AmbientCache {
    latest: Mutex<Option<Slot>>,
    /// The last generation number given out.
    generations: std::sync::atomic::AtomicU64,
}

/// The resources of one push, generated once by whichever stream asks
/// first.
struct Slot {
    inputs: (usize, usize),
    version: u64,
    cell: Arc<tokio::sync::OnceCell<Arc<AmbientResources>>>,
}

impl AmbientCache {
    /// The resources of `snapshot` (or of a later push, when one came
    /// since), generated now if nobody has.
    pub(crate) async fn of(
        &self,
        snapshot: &Arc<MeshSnapshot>,
        options: &AmbientOptions,
    ) -> Arc<AmbientResources> {
        let inputs = (
            Arc::as_ptr(&snapshot.registry) as usize,
            Arc::as_ptr(&snapshot.rules) as usize,
        );
        let (cell, previous) = {
            let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
            match latest.as_ref() {
                Some(slot) if slot.inputs == inputs || slot.version >= snapshot.version => {
                    (Arc::clone(&slot.cell), None)
                }
                _ => {
                    // What changed is worked out against the generation
                    // before, when it is done (else streams compare all).
                    let previous = latest.as_ref().and_then(|slot| slot.cell.get().cloned());
                    let cell = Arc::new(tokio::sync::OnceCell::new());
                    *latest = Some(Slot {
                        inputs,
                        version: snapshot.version,
                        cell: Arc::clone(&cell),
                    });
                    (cell, previous)
                }
            }
        };
        let generation = &self.generations;
        let resources = cell
            .get_or_init(|| {
                let number = generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                let (snapshot, options) = (Arc::clone(snapshot), options.clone());
                async move {
                    let made = tokio::task::spawn_blocking(move || {
                        generate(&snapshot, &options, number, previous.as_deref())
                    })
                    .await;
                    // Generation is pure; a panic in it is a bug to surface.
                    Arc::new(made.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())))
                }
            })
            .await;
        Arc::clone(resources)
    }
}

/// Every resource of `snapshot`, with what changed since `previous`.
fn generate(
    snapshot: &MeshSnapshot,
    options: &AmbientOptions,
    generation: u64,
    previous: Option<&AmbientResources>,
) -> AmbientResources {
    let model = snapshot.rules.model();
    let root = model.root_namespace().to_string();
    let mut addresses = TypeEntries::new();
    let mut by_address = HashMap::new();
    let mut node_namespaces: HashMap<String, BTreeSet<String>> = HashMap::new();
    for (name, address) in ambient::addresses(&snapshot.registry, model, options) {
        let name: Arc<str> = Arc::from(name);
        match &address.r#type {
            Some(ambient::proto::workload::address::Type::Workload(w)) => {
                for ip in &w.addresses {
                    if let Some(ip) = ip_of(ip) {
                        by_address.insert(format!("{}/{ip}", w.network), Arc::clone(&name));
                    }
                }
                if !w.node.is_empty() {
                    node_namespaces
                        .entry(w.node.clone())
                        .or_default()
                        .insert(w.namespace.clone());
                }
            }
            Some(ambient::proto::workload::address::Type::Service(s)) => {
                for a in &s.addresses {
                    if let Some(ip) = ip_of(&a.address) {
                        by_address.insert(format!("{}/{ip}", a.network), Arc::clone(&name));
                    }
                }
            }
            None => {}
        }
        let entry = entry(XdsType::Address, &name, address.encode_to_vec(), None);
        addresses.insert(name, reuse(previous, 0, entry));
    }
    let mut authorizations = TypeEntries::new();
    for (name, policy) in
        ambient::authorization::authorizations(model.authorization(), model.peer_authentication(), &root)
    {
        let name: Arc<str> = Arc::from(name);
        let namespace = (policy.namespace != root).then(|| Arc::from(policy.namespace.as_str()));
        let entry = entry(XdsType::Authorization, &name, policy.encode_to_vec(), namespace);
        authorizations.insert(name, reuse(previous, 1, entry));
    }
    let types = [addresses, authorizations];
    let since = previous.map(|p| {
        let changed = [0, 1].map(|i| changed_names(&p.types[i], &types[i]));
        (p.generation, changed)
    });
    AmbientResources {
        generation,
        version: snapshot.version,
        types,
        by_address,
        node_namespaces,
        since,
        whole: Default::default(),
    }
}

fn ip_of(bytes: &[u8]) -> Option<std::net::IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(std::net::IpAddr::from),
        _ => None,
    }
}

/// The previous generation's entry when it is the same (shared, so a
/// stream compares versions by pointer), else `entry`.
fn reuse(previous: Option<&AmbientResources>, slot: usize, entry: Entry) -> Arc<Entry> {
    if let Some(name) = previous.and_then(|p| p.types[slot].get_key_value(&*entry.name))
        && name.1.version == entry.version
        && name.1.namespace == entry.namespace
    {
        return Arc::clone(name.1);
    }
    Arc::new(entry)
}

/// The names whose entries differ between `old` and `new` (changed, added
/// or removed), sorted.
fn changed_names(old: &TypeEntries, new: &TypeEntries) -> Vec<Arc<str>> {
    let mut changed: Vec<Arc<str>> = new
        .iter()
        .filter(|(name, entry)| old.get(*name).is_none_or(|o| !Arc::ptr_eq(o, entry)))
        .map(|(name, _)| Arc::clone(name))
        .collect();
    changed.extend(old.keys().filter(|name| !new.contains_key(*name)).cloned());
    changed.sort();
    changed
}

/// An entry of type `t` named `name` for the encoded message `value`.
fn entry(t: XdsType, name: &str, value: Vec<u8>, namespace: Option<Arc<str>>) -> Entry {
    let mut hasher = std::hash::DefaultHasher::new();
    value.hash(&mut hasher);
    let version: Arc<str> = Arc::from(format!("{:016x}", hasher.finish()));
    let value = Bytes::from(value);
    let framed = framed_resource(t, name, &version, &value, &[]);
    Entry {
        version,
        value,
        framed,
        namespace,
        name: Arc::from(name),
    }
}

/// A delta response's `resources` field (field 2) holding one `Resource`:
/// its name, version, `aliases` and the message as an `Any`.
pub(crate) fn framed_resource(
    t: XdsType,
    name: &str,
    version: &str,
    value: &[u8],
    aliases: &[String],
) -> Bytes {
    use envoy_types::pb::envoy::service::discovery::v3::Resource;
    use envoy_types::pb::google::protobuf::Any;
    let resource = Resource {
        name: name.to_string(),
        version: version.to_string(),
        aliases: aliases.to_vec(),
        resource: Some(Any {
            type_url: t.url().to_string(),
            value: value.to_vec(),
        }),
        ..Default::default()
    };
    let mut buffer = BytesMut::new();
    // Field 2, length-delimited.
    buffer.put_u8((2 << 3) | 2);
    prost::encoding::encode_varint(resource.encoded_len() as u64, &mut buffer);
    resource.encode_raw(&mut buffer);
    buffer.freeze()
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryResponse;

    use super::*;

    fn resources(names: &[&str]) -> AmbientResources {
        let addresses: TypeEntries = names
            .iter()
            .map(|name| {
                let entry = entry(XdsType::Address, name, name.as_bytes().to_vec(), None);
                (Arc::from(*name), Arc::new(entry))
            })
            .collect();
        AmbientResources {
            generation: 1,
            version: 1,
            types: [addresses, TypeEntries::new()],
            by_address: HashMap::new(),
            node_namespaces: HashMap::new(),
            since: None,
            whole: Default::default(),
        }
    }

    /// The shared concatenation is the resources field of a response
    /// holding every resource, in name order, each as framed alone.
    #[test]
    fn the_whole_type_is_every_framed_resource_in_name_order() {
        let all = resources(&["ns1/b", "ns0/a", "ns2/c"]);
        let whole = all.whole(0);
        let one_by_one: Vec<u8> = all.types[0].values().flat_map(|e| e.framed.to_vec()).collect();
        assert_eq!(whole.to_vec(), one_by_one);
        let response = DeltaDiscoveryResponse::decode(whole.clone()).unwrap();
        let names: Vec<&str> = response.resources.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["ns0/a", "ns1/b", "ns2/c"]);
        assert_eq!(response.resources[1].resource.as_ref().unwrap().value, b"ns1/b");
        // Made once: the same buffer every time.
        assert_eq!(all.whole(0).as_ptr(), whole.as_ptr());
        assert!(all.whole(1).is_empty());
    }
}
