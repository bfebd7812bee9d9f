//! Generated configuration shared between connections: computed once per
//! push for each class of proxy, and encoded once.
//!
//! Envoy clusters and load assignments do not depend on the class (only
//! the passthrough cluster on whether the proxy captures), so they are
//! built once per push and shared by every class; a class adds only its
//! listeners and route configurations. When a push carries endpoint
//! changes only, it reuses the previous push's clusters, listeners and
//! routes and rebuilds just the load assignments of the services whose
//! instances changed. Listeners are shared by every class of the same
//! proxy type and capture mode; route configurations are assembled from
//! encoded virtual hosts shared between classes and kept from push to
//! push unless their host's rules changed (`routes_shared.rs`).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::{Bytes, BytesMut};
use envoy_types::pb::envoy::service::discovery::v3::Resource;
use envoy_types::pb::google::protobuf::Any;
use pilot_model::{Labels, RegistrySnapshot, ServiceDiscovery, ServiceInstance};
use tokio::sync::OnceCell;

use crate::ClusterName;
use crate::clusters::{self, eds_clusters, load_assignment};
use crate::routes_shared::{self, VirtualHosts};
use crate::util::any;
use crate::{
    Generator, MeshConfig, Proxy, ProxyType, Resources, generate_inbound, generate_outbound, listeners,
    route_config_name,
};
use prost::Message;

/// What the shared (outbound) part of a proxy's configuration depends on
/// besides the mesh: proxies equal here get equal outbound configuration,
/// so it is generated once for all of them. Their own instances (and their
/// labels) count only where a rule's source match names their service, and
/// then only by service and labels; addresses and ports go into the
/// per-proxy inbound part. So without source-matched rules every sidecar
/// of a namespace is one class, and with them every deployment is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ProxyClass {
    proxy_type: ProxyType,
    captures: bool,
    generator: Generator,
    domain: String,
    labels: Labels,
    /// The services the proxy runs instances of that are some rule's
    /// source, with the instances' labels.
    own: Vec<(String, Labels)>,
}

impl ProxyClass {
    /// `sources`: the hostnames some rule's source match names.
    pub(crate) fn of(proxy: &Proxy, own: &[ServiceInstance], sources: &HashSet<String>) -> Self {
        let mut own: Vec<_> = own
            .iter()
            .filter(|i| sources.contains(&i.service.hostname))
            .map(|i| (i.service.hostname.clone(), i.labels.clone()))
            .collect();
        own.sort();
        own.dedup();
        ProxyClass {
            proxy_type: proxy.proxy_type,
            captures: proxy.capture.captures(),
            generator: proxy.generator,
            domain: proxy.domain.clone(),
            // Proxy labels only matter with an own instance of a source.
            labels: if own.is_empty() {
                Labels::new()
            } else {
                proxy.labels.clone()
            },
            own,
        }
    }

    /// What an Envoy's route configurations depend on: the class, its
    /// domain reduced to the namespace and only when some service lives
    /// in it (`namespaces`), since the namespace only decides which
    /// services' short names are domains. So the sidecars of the many
    /// namespaces that run no service of the mesh share one assembly.
    fn for_routes(&self, namespaces: &HashSet<String>) -> ProxyClass {
        let namespace = self.domain.split('.').next().unwrap_or_default();
        ProxyClass {
            domain: if namespaces.contains(namespace) {
                namespace.to_string()
            } else {
                String::new()
            },
            ..self.clone()
        }
    }
}

/// A proxy's configuration for one push: the part shared with its class,
/// and its own inbound part (captured sidecars with instances only).
#[derive(Clone)]
pub(crate) struct ProxyConfig {
    pub(crate) shared: Arc<Generated>,
    pub(crate) own: Option<Arc<Generated>>,
}

impl ProxyConfig {
    /// Every resource of type `short`.
    #[cfg(test)]
    pub(crate) fn entries(&self, short: &str) -> impl Iterator<Item = &Entry> {
        self.shared.types[short].entries.iter().chain(
            self.own
                .iter()
                .flat_map(move |own| own.types[short].entries.iter()),
        )
    }

    /// What a state-of-the-world subscription (`None`: wildcard) selects:
    /// its digest and `DiscoveryResponse.resources`.
    pub(crate) fn sotw(
        &self,
        short: &'static str,
        names: &Option<Arc<BTreeSet<String>>>,
    ) -> (u64, Vec<Bytes>) {
        let shared = self.shared.select(short, names);
        let Some(own) = &self.own else {
            return (shared.digest, shared.resources.clone());
        };
        let wanted = |name: &str| names.as_ref().is_none_or(|names| names.contains(name));
        let own = &own.types[short];
        let mut hasher = DefaultHasher::new();
        shared.digest.hash(&mut hasher);
        own.digest(wanted).hash(&mut hasher);
        let mut resources = shared.resources.clone();
        resources.extend(own.sotw(|entry| wanted(&entry.name)));
        (hasher.finish(), resources)
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
    /// Delta forms of single entries, by position, encoded when few were
    /// asked for before `delta` was built.
    delta_few: Mutex<HashMap<usize, Bytes>>,
    /// What each distinct subscription selects (by the address of its
    /// interned set, 0 for the wildcard), worked out once for every stream
    /// and every proxy class sharing this encoding.
    selections: Mutex<HashMap<usize, Arc<Selection>>>,
    /// When this encoding is another one patched (`patched`): that one,
    /// and the positions whose values were replaced.
    patch_of: Option<(Weak<EncodedType>, Vec<usize>)>,
    /// Where each name is in `entries`, built the first time a name is
    /// looked up.
    index: OnceLock<Arc<HashMap<Arc<str>, usize>>>,
    /// Every name, sorted, built the first time a stream asks.
    names: OnceLock<Arc<BTreeSet<String>>>,
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
            delta_few: Mutex::default(),
            selections: Mutex::default(),
            patch_of: None,
            index: OnceLock::new(),
            names: OnceLock::new(),
            type_url,
        }
    }

    /// What a subscription to `names` (`None`: the wildcard) selects:
    /// worked out once for every stream with the same subscription, of
    /// either protocol and any proxy class this encoding is shared by.
    pub(crate) fn selection(&self, names: Option<&Arc<BTreeSet<String>>>) -> Arc<Selection> {
        let key = names.map_or(0, |n| Arc::as_ptr(n) as usize);
        let mut selections = self.selections.lock().unwrap_or_else(|p| p.into_inner());
        let selection = selections.entry(key).or_insert_with(|| {
            let positions: Vec<usize> = match names {
                None => (0..self.entries.len()).collect(),
                Some(names) => self
                    .entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| names.contains(&*e.name))
                    .map(|(i, _)| i)
                    .collect(),
            };
            let selected = || positions.iter().map(|&i| &self.entries[i]);
            Arc::new(Selection {
                digest: digest_entries(selected()),
                resources: slices(&self.sotw, selected().map(|e| (true, e.range.clone()))),
                positions,
                _names: names.cloned(),
            })
        });
        Arc::clone(selection)
    }

    /// The positions whose values may differ from `old`'s, when this
    /// encoding is `old` patched (same names, same order).
    pub(crate) fn patched_from(&self, old: &Arc<EncodedType>) -> Option<&[usize]> {
        let (base, positions) = self.patch_of.as_ref()?;
        (base.as_ptr() == Arc::as_ptr(old)).then_some(positions.as_slice())
    }

    /// Every resource's name.
    pub(crate) fn names(&self) -> Arc<BTreeSet<String>> {
        Arc::clone(
            self.names
                .get_or_init(|| Arc::new(self.entries.iter().map(|e| e.name.to_string()).collect())),
        )
    }

    /// Where the resource `name` is in `entries`.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.index
            .get_or_init(|| {
                Arc::new(
                    self.entries
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (Arc::clone(&e.name), i))
                        .collect(),
                )
            })
            .get(name)
            .copied()
    }

    /// The `DeltaDiscoveryResponse.resources` of the entries at
    /// `positions` (in `entries`; sorted and deduplicated here).
    pub(crate) fn delta_at(&self, positions: &mut Vec<usize>) -> Vec<Bytes> {
        positions.sort_unstable();
        positions.dedup();
        // A few entries of an encoding whose delta form nobody needed yet
        // (a push after a rule change that left the load assignments as
        // they were, say): those entries only, each encoded once.
        if self.delta.get().is_none() && positions.len() * 8 < self.entries.len() {
            let mut few = self.delta_few.lock().unwrap_or_else(|p| p.into_inner());
            return positions
                .iter()
                .map(|&at| {
                    few.entry(at)
                        .or_insert_with(|| {
                            let entry = &self.entries[at];
                            let mut buffer = BytesMut::new();
                            self.encode_delta(entry, self.any_value(entry), &mut buffer);
                            buffer.freeze()
                        })
                        .clone()
                })
                .collect();
        }
        let (buffer, ranges) = self.delta_form();
        slices(buffer, positions.iter().map(|&i| (true, ranges[i].clone())))
    }

    /// A digest of the resources that `wanted` selects.
    pub(crate) fn digest(&self, wanted: impl Fn(&str) -> bool) -> u64 {
        digest_entries(self.entries.iter().filter(|e| wanted(&e.name)))
    }

    /// The `DiscoveryResponse.resources` of the entries `wanted` selects:
    /// slices of the shared buffer (one when the selection is contiguous).
    pub(crate) fn sotw(&self, wanted: impl Fn(&Entry) -> bool) -> Vec<Bytes> {
        slices(
            &self.sotw,
            self.entries.iter().map(|e| (wanted(e), e.range.clone())),
        )
    }

    /// Every entry as a `DeltaDiscoveryResponse.resources` field, back to
    /// back, and where each is.
    fn delta_form(&self) -> &(Bytes, Vec<Range<usize>>) {
        self.delta.get_or_init(|| {
            let mut buffer = BytesMut::new();
            let ranges = self
                .entries
                .iter()
                .map(|entry| self.encode_delta(entry, self.any_value(entry), &mut buffer))
                .collect();
            (buffer.freeze(), ranges)
        })
    }

    /// Appends `entry` (its value `value`) as a
    /// `DeltaDiscoveryResponse.resources` field; where it went.
    fn encode_delta(&self, entry: &Entry, value: &[u8], buffer: &mut BytesMut) -> Range<usize> {
        let start = buffer.len();
        let resource = Resource {
            name: entry.name.to_string(),
            version: version_text(entry.version),
            resource: Some(Any {
                type_url: self.type_url.to_string(),
                value: value.to_vec(),
            }),
            ..Default::default()
        };
        prost::encoding::message::encode(2, &resource, buffer);
        start..buffer.len()
    }

    /// This encoding with the values of the entries at the given positions
    /// (ascending) replaced: the same names in the same order, the other
    /// entries copied as encoded with their versions (no digest taken
    /// again), the name index and name set shared, and the delta form
    /// patched alike when this one has it.
    fn patched(self: &Arc<Self>, changed: Vec<(usize, Vec<u8>)>) -> EncodedType {
        let mut buffer = BytesMut::with_capacity(self.sotw.len());
        let mut entries = Vec::with_capacity(self.entries.len());
        let mut replaced = changed.iter().peekable();
        // Entries copied, not yet written: a run of the old buffer.
        let mut run = 0..0;
        let mut values: Vec<Option<&[u8]>> = Vec::with_capacity(self.entries.len());
        for (at, entry) in self.entries.iter().enumerate() {
            let new_value = replaced.next_if(|(p, _)| *p == at).map(|(_, v)| v.as_slice());
            values.push(new_value);
            let Some(value) = new_value else {
                // Entries lie back to back: a run is one slice.
                if run.is_empty() {
                    run = entry.range.clone();
                }
                run.end = entry.range.end;
                let start = buffer.len() + (entry.range.start - run.start);
                entries.push(Entry {
                    name: Arc::clone(&entry.name),
                    version: entry.version,
                    range: start..start + entry.range.len(),
                    value_len: entry.value_len,
                });
                continue;
            };
            buffer.extend_from_slice(&self.sotw[run.clone()]);
            run = 0..0;
            let start = buffer.len();
            let any = Any {
                type_url: self.type_url.to_string(),
                value: value.to_vec(),
            };
            prost::encoding::message::encode(2, &any, &mut buffer);
            entries.push(Entry {
                name: Arc::clone(&entry.name),
                version: digest_of(value),
                range: start..buffer.len(),
                value_len: value.len(),
            });
        }
        buffer.extend_from_slice(&self.sotw[run]);
        let patched = EncodedType {
            entries,
            sotw: buffer.freeze(),
            delta: OnceLock::new(),
            delta_few: Mutex::default(),
            selections: Mutex::default(),
            patch_of: Some((Arc::downgrade(self), changed.iter().map(|(at, _)| *at).collect())),
            index: self.index.get().cloned().map(OnceLock::from).unwrap_or_default(),
            names: self.names.get().cloned().map(OnceLock::from).unwrap_or_default(),
            type_url: self.type_url,
        };
        if let Some((old, ranges)) = self.delta.get() {
            let mut buffer = BytesMut::with_capacity(old.len());
            let ranges = patched
                .entries
                .iter()
                .zip(ranges)
                .zip(&values)
                .map(|((entry, range), value)| match value {
                    None => {
                        let start = buffer.len();
                        buffer.extend_from_slice(&old[range.clone()]);
                        start..buffer.len()
                    }
                    Some(value) => patched.encode_delta(entry, value, &mut buffer),
                })
                .collect();
            let _ = patched.delta.set((buffer.freeze(), ranges));
        }
        patched
    }

    /// The encoded `Any.value` of an entry: the tail of its `sotw` form
    /// (prost writes `Any`'s fields in tag order, `value` last).
    fn any_value(&self, entry: &Entry) -> &[u8] {
        &self.sotw[entry.range.end - entry.value_len..entry.range.end]
    }
}

/// A digest of entries' names and versions, in order.
fn digest_entries<'a>(entries: impl Iterator<Item = &'a Entry>) -> u64 {
    let mut hasher = DefaultHasher::new();
    for entry in entries {
        entry.name.hash(&mut hasher);
        entry.version.hash(&mut hasher);
    }
    hasher.finish()
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
    /// Shared with other classes where they are equal (clusters, load
    /// assignments).
    pub(crate) types: HashMap<&'static str, Arc<EncodedType>>,
}

/// The resources of one type a subscription selects (see
/// [`EncodedType::selection`]).
pub(crate) struct Selection {
    /// Their positions in the encoding's entries, ascending.
    pub(crate) positions: Vec<usize>,
    /// A digest of their names and versions: unchanged means nothing to send.
    pub(crate) digest: u64,
    /// Their `DiscoveryResponse.resources`, as shared slices.
    pub(crate) resources: Vec<Bytes>,
    /// Keeps the set (and so the address in the key) alive.
    _names: Option<Arc<BTreeSet<String>>>,
}

impl Generated {
    fn encode(resources: &Resources) -> Self {
        let types = ORDER
            .iter()
            .map(|&(short, url)| (short, Arc::new(EncodedType::new(url, named(resources, short)))))
            .collect();
        Generated { types }
    }

    fn from_types(types: [(&'static str, Arc<EncodedType>); 4]) -> Self {
        Generated {
            types: types.into_iter().collect(),
        }
    }

    /// What `names` (`None`: every resource) selects of type `short`.
    pub(crate) fn select(
        &self,
        short: &'static str,
        names: &Option<Arc<BTreeSet<String>>>,
    ) -> Arc<Selection> {
        self.types[short].selection(names.as_ref())
    }
}

/// An Envoy's listeners for one push, shared by every class of the same
/// proxy type and capture mode, with what its route configurations need.
struct ListenerPart {
    lds: Arc<EncodedType>,
    /// The outbound HTTP ports: one route configuration each.
    http_ports: Vec<u16>,
    /// An ingress's route configurations (from ingress rules), encoded.
    ingress_routes: Vec<(String, Any)>,
}

/// A push's listeners of one proxy type and capture mode, once built.
type ListenerCell = Arc<OnceCell<Arc<ListenerPart>>>;

/// What changed since the previous push, as far as generation cares.
#[derive(Debug, Default, Clone)]
pub(crate) struct Changes {
    /// Rules, services, or a registry resync: nothing is reused.
    pub(crate) full: bool,
    /// The routing configuration may have changed: it is listed and
    /// decoded again (else the last push's rules are kept, and with them
    /// the store revisions they were read at).
    pub(crate) rules: bool,
    /// The hostnames whose instances changed.
    pub(crate) endpoints: HashSet<String>,
}

/// What a push carrying endpoint changes only takes from the push before.
struct Previous {
    /// Hostnames whose load assignments must be rebuilt.
    endpoints: HashSet<String>,
    /// Envoy clusters, by whether the proxy captures.
    cds: HashMap<bool, Arc<EncodedType>>,
    /// Taken (and so freed) once this push's are built.
    eds: Mutex<Option<Arc<EncodedType>>>,
    /// Envoy classes' listeners and route configurations.
    classes: HashMap<ProxyClass, (Arc<EncodedType>, Arc<EncodedType>)>,
}

/// The configurations generated for one push, by proxy class, all from
/// one registry state and one set of rules.
pub(crate) struct GeneratedCache {
    by_class: Mutex<HashMap<ProxyClass, Arc<OnceCell<Arc<Generated>>>>>,
    /// The hostnames the rules' source matches name.
    sources: OnceLock<HashSet<String>>,
    /// The namespaces some service lives in (the second label of its
    /// hostname): only a proxy in one of them sees short names.
    namespaces: OnceLock<HashSet<String>>,
    /// Envoy route configurations by [`ProxyClass::for_routes`]: classes of
    /// namespaces without services of their own share one assembly.
    routes_by_class: Mutex<HashMap<ProxyClass, Arc<OnceCell<Arc<EncodedType>>>>>,
    /// Envoy clusters, by whether the proxy captures (the passthrough).
    cds: Mutex<HashMap<bool, Arc<OnceCell<Arc<EncodedType>>>>>,
    /// Envoy load assignments: the same for every Envoy.
    eds: OnceCell<Arc<EncodedType>>,
    /// Envoy listeners, by proxy type and capture mode: they do not depend
    /// on the namespace or on source-matched rules.
    listeners: Mutex<HashMap<(ProxyType, bool), ListenerCell>>,
    /// The virtual hosts, encoded once for every class they apply to, or
    /// kept from the previous push when their host's rules and service did
    /// not change.
    pub(crate) virtual_hosts: VirtualHosts,
    /// Envoy classes' route configurations by a digest of their encoding:
    /// equal ones are kept once.
    routes: Mutex<HashMap<u64, Vec<Arc<EncodedType>>>>,
    previous: Option<Previous>,
    /// False: every class generates everything itself (the behaviour
    /// before sharing, kept to measure against).
    incremental: bool,
    /// Load assignments generated (not taken from the previous push).
    pub(crate) assignments_built: AtomicUsize,
    /// Sets of route configurations assembled.
    pub(crate) routes_assembled: AtomicUsize,
}

impl GeneratedCache {
    /// The cache of a push with `changes` since `before` (the previous
    /// push's cache, if any).
    pub(crate) fn new(before: Option<&GeneratedCache>, changes: &Changes, incremental: bool) -> Self {
        let previous = before
            .filter(|_| incremental && !changes.full)
            .map(|before| Previous {
                endpoints: changes.endpoints.clone(),
                cds: before
                    .cds
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter_map(|(k, cell)| Some((*k, Arc::clone(cell.get()?))))
                    .collect(),
                eds: Mutex::new(before.eds.get().cloned()),
                classes: before
                    .by_class
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter(|(class, _)| class.generator == Generator::Envoy)
                    .filter_map(|(class, cell)| {
                        let generated = cell.get()?;
                        Some((
                            class.clone(),
                            (
                                Arc::clone(&generated.types["LDS"]),
                                Arc::clone(&generated.types["RDS"]),
                            ),
                        ))
                    })
                    .collect(),
            });
        GeneratedCache {
            by_class: Default::default(),
            sources: OnceLock::new(),
            namespaces: OnceLock::new(),
            routes_by_class: Default::default(),
            cds: Default::default(),
            eds: OnceCell::new(),
            listeners: Default::default(),
            virtual_hosts: match before {
                Some(before) if incremental => VirtualHosts::after(&before.virtual_hosts),
                _ => VirtualHosts::default(),
            },
            routes: Default::default(),
            previous,
            incremental,
            assignments_built: AtomicUsize::new(0),
            routes_assembled: AtomicUsize::new(0),
        }
    }

    /// The configuration of `proxy`'s class, generating it if no proxy of
    /// the class has yet for this push. `registry` and `mesh` are the
    /// push's (the same for every call).
    pub(crate) async fn get(
        &self,
        proxy: &Proxy,
        registry: &RegistrySnapshot,
        mesh: &MeshConfig,
    ) -> ProxyConfig {
        let own = registry.host_instances(&[proxy.ip]);
        let sources = self.sources.get_or_init(|| {
            mesh.route_rules
                .iter()
                .filter_map(|rule| {
                    let source = rule.spec.match_condition.as_ref()?.source.as_ref()?;
                    Some(mesh.hostname(source, &rule.meta.namespace))
                })
                .collect()
        });
        let class = ProxyClass::of(proxy, &own, sources);
        let cell = Arc::clone(
            self.by_class
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(class.clone())
                .or_default(),
        );
        let shared = cell
            .get_or_init(|| async {
                if !self.incremental || proxy.generator == Generator::Grpc {
                    return heavy(|| {
                        Arc::new(Generated::encode(&generate_outbound(proxy, registry, mesh, &own)))
                    });
                }
                let captured = proxy.proxy_type == ProxyType::Sidecar && proxy.capture.captures();
                let cds = self.envoy_cds(captured, registry, mesh).await;
                let eds = self.envoy_eds(registry, mesh).await;
                let reused = self.previous.as_ref().and_then(|p| p.classes.get(&class));
                let (lds, rds) = match reused {
                    Some((lds, rds)) => (Arc::clone(lds), Arc::clone(rds)),
                    None => {
                        let listeners = self.envoy_listeners(proxy, registry, mesh).await;
                        let namespaces = self.namespaces.get_or_init(|| {
                            registry
                                .services()
                                .iter()
                                .filter_map(|s| s.hostname.split('.').nth(1).map(str::to_string))
                                .collect()
                        });
                        let cell = Arc::clone(
                            self.routes_by_class
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .entry(class.for_routes(namespaces))
                                .or_default(),
                        );
                        let rds = cell
                            .get_or_init(|| async {
                                heavy(|| self.envoy_routes(proxy, registry, mesh, &own, &listeners))
                            })
                            .await
                            .clone();
                        (Arc::clone(&listeners.lds), rds)
                    }
                };
                Arc::new(Generated::from_types([
                    ("CDS", cds),
                    ("EDS", eds),
                    ("LDS", lds),
                    ("RDS", rds),
                ]))
            })
            .await
            .clone();
        let inbound = generate_inbound(proxy, &own);
        let own = (inbound != Resources::default()).then(|| Arc::new(Generated::encode(&inbound)));
        ProxyConfig { shared, own }
    }

    /// Envoy's outbound clusters, built once per push for each capture mode
    /// (or kept from the previous push when only endpoints changed).
    async fn envoy_cds(
        &self,
        captured: bool,
        registry: &RegistrySnapshot,
        mesh: &MeshConfig,
    ) -> Arc<EncodedType> {
        let cell = Arc::clone(
            self.cds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(captured)
                .or_default(),
        );
        cell.get_or_init(|| async {
            if let Some(kept) = self.previous.as_ref().and_then(|p| p.cds.get(&captured)) {
                return Arc::clone(kept);
            }
            heavy(|| {
                let services = registry.services();
                let index = mesh.index();
                let clusters =
                    clusters::outbound(captured, &services, &clusters::subsets(mesh), mesh, &index);
                let resources = Resources {
                    clusters,
                    ..Default::default()
                };
                Arc::new(EncodedType::new(ORDER[0].1, named(&resources, "CDS")))
            })
        })
        .await
        .clone()
    }

    /// Envoy's listeners, built once per push for each proxy type and
    /// capture mode.
    async fn envoy_listeners(
        &self,
        proxy: &Proxy,
        registry: &RegistrySnapshot,
        mesh: &MeshConfig,
    ) -> Arc<ListenerPart> {
        let cell = Arc::clone(
            self.listeners
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry((proxy.proxy_type, proxy.capture.captures()))
                .or_default(),
        );
        cell.get_or_init(|| async {
            heavy(|| {
                let plan = listeners::listeners(proxy, registry, mesh);
                let resources = Resources {
                    listeners: plan.listeners,
                    routes: plan.ingress_routes,
                    ..Default::default()
                };
                Arc::new(ListenerPart {
                    lds: Arc::new(EncodedType::new(ORDER[2].1, named(&resources, "LDS"))),
                    http_ports: plan.http_ports.into_iter().collect(),
                    ingress_routes: named(&resources, "RDS"),
                })
            })
        })
        .await
        .clone()
    }

    /// A class's route configurations: one per outbound HTTP port of its
    /// listeners, assembled from the virtual hosts' routes shared with the
    /// other classes, then the ingress routes.
    fn envoy_routes(
        &self,
        proxy: &Proxy,
        registry: &RegistrySnapshot,
        mesh: &MeshConfig,
        own: &[ServiceInstance],
        listeners: &ListenerPart,
    ) -> Arc<EncodedType> {
        self.routes_assembled.fetch_add(1, Ordering::Relaxed);
        let index = mesh.index();
        let services = registry.services();
        let mut resources: Vec<(String, Any)> = listeners
            .http_ports
            .iter()
            .map(|&port| {
                let encoded = routes_shared::route_configuration(
                    port,
                    &services,
                    mesh,
                    proxy,
                    own,
                    &index,
                    &self.virtual_hosts,
                );
                let value = Any {
                    type_url: ORDER[3].1.to_string(),
                    value: encoded.to_vec(),
                };
                (route_config_name(port), value)
            })
            .collect();
        resources.extend(listeners.ingress_routes.iter().cloned());
        let encoded = EncodedType::new(ORDER[3].1, resources);
        // Classes whose route configurations came out the same (namespaces
        // without services of their own, say) share one copy.
        let mut interned = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let same = interned.entry(digest_of(&encoded.sotw)).or_default();
        if let Some(found) = same.iter().find(|known| known.sotw == encoded.sotw) {
            return Arc::clone(found);
        }
        let encoded = Arc::new(encoded);
        same.push(Arc::clone(&encoded));
        encoded
    }

    /// Envoy's load assignments, built once per push. After endpoint
    /// changes only, the clusters are the previous push's (they depend on
    /// services and rules alone), so the previous encoding is patched:
    /// only the changed services' assignments are generated and encoded,
    /// the others are copied as encoded with their versions, and the
    /// name index is shared. A push then costs the changed services plus
    /// a copy of the buffer, not a pass generating names and digests over
    /// the whole mesh.
    async fn envoy_eds(&self, registry: &RegistrySnapshot, mesh: &MeshConfig) -> Arc<EncodedType> {
        self.eds
            .get_or_init(|| async {
                heavy(|| {
                    let before = self
                        .previous
                        .as_ref()
                        .and_then(|p| Some((p.eds.lock().unwrap_or_else(|p| p.into_inner()).take()?, p)));
                    if let Some((before, previous)) = before {
                        let changed: Option<Vec<(usize, Vec<u8>)>> = before
                            .entries
                            .iter()
                            .enumerate()
                            .filter(|(_, e)| {
                                previous
                                    .endpoints
                                    .contains(e.name.rsplit('|').next().unwrap_or_default())
                            })
                            .map(|(at, e)| Some((at, assignment_of(&e.name, registry)?)))
                            .collect();
                        // None: a cluster of a service the registry lacks,
                        // which an endpoint-only push cannot have; built
                        // afresh below if it ever does.
                        if let Some(changed) = changed {
                            self.assignments_built.fetch_add(changed.len(), Ordering::Relaxed);
                            return Arc::new(before.patched(changed));
                        }
                    }
                    let resources = eds_clusters(&registry.services(), &clusters::subsets(mesh))
                        .iter()
                        .map(|c| {
                            self.assignments_built.fetch_add(1, Ordering::Relaxed);
                            let value = any(&load_assignment(&c.name, &c.service, &c.port_name, registry));
                            (c.name.to_string(), value)
                        })
                        .collect();
                    Arc::new(EncodedType::new(ORDER[1].1, resources))
                })
            })
            .await
            .clone()
    }
}

/// The encoded load assignment of the EDS cluster `name`, if it names a
/// port of a service `registry` has.
fn assignment_of(name: &str, registry: &RegistrySnapshot) -> Option<Vec<u8>> {
    let cluster = name.parse::<ClusterName>().ok()?;
    let service = registry.get_service(&cluster.hostname)?;
    let port = service.port_by_number(cluster.port)?.name.clone();
    Some(load_assignment(&cluster, &service, &port, registry).encode_to_vec())
}

/// Runs CPU-heavy generation without stalling the runtime's other tasks:
/// on a multi-threaded runtime the worker hands its queued tasks (the
/// HTTP/2 connections among them, whose keepalive PINGs must be answered
/// within seconds) to another thread first. Generating one class of a
/// 1,000-service mesh takes tens to hundreds of milliseconds, and a push
/// to many classes runs many of them back to back.
fn heavy<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
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

#[cfg(test)]
mod tests;
