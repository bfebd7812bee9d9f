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
//! push unless their host's rules changed (`virtual_hosts.rs`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use envoy_types::pb::google::protobuf::Any;
use pilot_model::{Labels, RegistrySnapshot, ServiceDiscovery, ServiceInstance};
use pilot_xds::serving::{
    any, backend_client_credential, destination_route_configurations, edge_route_configurations_holding,
    eds_clusters, generate_outbound, generate_scoped_inbound, generate_scoped_outbound, listener_plan,
    load_assignment, outbound_clusters, serves_auto_passthrough, sni_dnat_clusters,
};
use pilot_xds::{
    ClusterName, Generator, MeshConfig, Proxy, ProxyType, Resources, ServerCertificates, route_config_name,
};
use prost::Message;
use tokio::sync::OnceCell;

use super::edge_hosts::EdgeHosts;
use super::encoded_type::{EncodedType, digest_of};
use super::proxy_class::ProxyClass;
use super::proxy_config::{Generated, ORDER, ProxyConfig, named};
use super::recompile::PushRules;
use super::scopes::Scopes;
use super::virtual_hosts::{self, VirtualHosts};
use crate::cpu_bound as heavy;

/// Which outbound clusters a proxy gets: whether it captures traffic (the
/// passthrough cluster), whether it has workload certificates (mutual TLS),
/// whether it is an edge proxy (BackendTLSPolicies), the labels of an
/// edge proxy serving `AUTO_PASSTHROUGH` servers (its SNI-DNAT clusters),
/// and the client certificate an edge proxy presents to TLS backends.
type CdsKey = (bool, bool, bool, Option<Labels>, Option<String>);

/// The configurations generated for one push, by proxy class, all from
/// one registry state and one set of rules.
pub(crate) struct GeneratedCache {
    by_class: Mutex<HashMap<ProxyClass, Arc<OnceCell<Arc<Generated>>>>>,
    /// The namespaces some service lives in (the second label of its
    /// hostname): only a proxy in one of them sees short names.
    namespaces: OnceLock<HashSet<String>>,
    /// Envoy route configurations by [`ProxyClass::for_routes`]: classes of
    /// namespaces without services of their own share one assembly.
    routes_by_class: Mutex<HashMap<ProxyClass, Arc<OnceCell<Arc<EncodedType>>>>>,
    /// Envoy clusters, by whether the proxy captures (the passthrough).
    cds: Mutex<HashMap<CdsKey, Arc<OnceCell<Arc<EncodedType>>>>>,
    /// Envoy load assignments: the same for every Envoy.
    eds: OnceCell<Arc<EncodedType>>,
    /// Envoy listeners, by proxy type and capture mode, and an edge proxy's
    /// labels and namespace (gateways select it by them, and its namespace
    /// decides which Gateway API Gateways it serves and which secrets it
    /// reads): a sidecar's do not depend on its namespace or on
    /// source-matched rules.
    listeners: Mutex<HashMap<(ProxyType, bool, Labels, String), ListenerCell>>,
    /// The virtual hosts, encoded once for every class they apply to, or
    /// kept from the previous push when their host's rules and service did
    /// not change.
    pub(crate) virtual_hosts: VirtualHosts,
    /// Edge proxies' gateway virtual hosts, encoded once, or kept from the
    /// previous push when the model kept their host.
    pub(crate) edge_hosts: EdgeHosts,
    /// Envoy classes' route configurations by a digest of their encoding:
    /// equal ones are kept once.
    routes: Mutex<HashMap<u64, Vec<Arc<EncodedType>>>>,
    previous: Option<Previous>,
    /// False: every class generates everything itself (the behaviour
    /// before sharing, kept to measure against).
    incremental: bool,
    /// Load assignments generated (not taken from the previous push).
    pub(crate) assignments_built: AtomicUsize,
    /// The load assignments patched into this push's encodings, by cluster.
    assignments: Mutex<HashMap<Arc<str>, AssignmentCell>>,
    /// Sets of route configurations assembled.
    pub(crate) routes_assembled: AtomicUsize,
    /// Edge classes patched from the previous push's
    /// ([`GeneratedCache::patch_edge`]).
    pub(crate) edge_patched: AtomicUsize,
    /// The proxies' scopes, and the scoped classes kept from the previous
    /// push.
    pub(crate) scopes: Scopes,
    /// Edge classes the previous push generated, with the gateway hosts
    /// whose routes alone changed since ([`Changes::edge_hosts`]): their
    /// configurations are patched ([`GeneratedCache::patch_edge`]).
    edge: Option<EdgePrevious>,
    /// Which server certificates the proxies can be sent: generation
    /// leaves out the edge servers whose certificate does not come.
    certificates: Option<Arc<dyn ServerCertificates>>,
    /// Every proxy's class is the previous push's ([`Changes::steady`])...
    steady: bool,
    /// ...but for the proxies at these addresses ([`Changes::moved`]).
    moved: BTreeSet<IpAddr>,
}

/// The class a stream's configuration was generated for, with the shared
/// part it was given: at the next push, [`GeneratedCache::holds`] tells
/// whether that push keeps it.
#[derive(Clone)]
pub(crate) struct Held {
    pub(crate) class: ProxyClass,
    pub(crate) shared: Arc<Generated>,
    /// The proxy's address: a push that moved its own instances holds
    /// nothing for it ([`GeneratedCache::moved`]).
    pub(crate) address: IpAddr,
    /// Its own instances when the configuration was generated: a push
    /// moves only the addresses its own batch changed, and a stream may
    /// have skipped the push that moved this one.
    pub(crate) own: Vec<ServiceInstance>,
}

impl GeneratedCache {
    /// The cache of a push with `changes` since `before` (the previous
    /// push's cache, if any).
    pub(crate) fn new(before: Option<&GeneratedCache>, changes: &Changes, incremental: bool) -> Self {
        let previous = before.filter(|_| incremental && !changes.full).map(|before| {
            let by_class = before.by_class.lock().unwrap_or_else(|p| p.into_inner());
            let generated = || {
                by_class
                    .iter()
                    .filter(|(class, _)| class.generator == Generator::Envoy)
                    .filter_map(|(class, cell)| Some((class, cell.get()?)))
            };
            Previous {
                endpoints: changes.endpoints.clone(),
                cds: before
                    .cds
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter_map(|(k, cell)| Some((k.clone(), Arc::clone(cell.get()?))))
                    .collect(),
                eds: Mutex::new(before.eds.get().cloned()),
                // Only an unscoped class's listeners and routes are
                // reused this way; a scoped class is kept whole, has
                // its load assignments patched, or is generated again
                // whole (`scopes.rs`).
                classes: generated()
                    .filter(|(class, _)| class.scope.is_none())
                    // Which servers an edge proxy is served depends on the
                    // credentials.
                    .filter(|(class, _)| !(changes.credentials && class.is_edge()))
                    .map(|(class, generated)| {
                        (
                            class.clone(),
                            (
                                Arc::clone(&generated.types["LDS"]),
                                Arc::clone(&generated.types["SRDS"]),
                                Arc::clone(&generated.types["RDS"]),
                            ),
                        )
                    })
                    .collect(),
                scoped: scoped_since(before, &by_class, &changes.endpoints, changes.credentials),
            }
        });
        let scopes = match before {
            Some(before) if incremental => {
                let by_class = before.by_class.lock().unwrap_or_else(|p| p.into_inner());
                Scopes::new(
                    by_class
                        .iter()
                        .filter(|(class, _)| class.scope.is_some())
                        .filter_map(|(class, cell)| Some((class, Arc::clone(cell.get()?)))),
                    changes.touched.as_ref(),
                    Some(&before.scopes),
                    changes.same_services,
                    changes.same_ingress && !changes.credentials,
                )
            }
            _ => Scopes::default(),
        };
        let edge = before
            .filter(|_| incremental && !changes.credentials)
            .zip(changes.edge_hosts.as_ref())
            .map(|(before, hosts)| EdgePrevious {
                hosts: Arc::clone(hosts),
                classes: before
                    .by_class
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter(|(class, _)| {
                        class.is_edge() && class.generator == Generator::Envoy && class.scope.is_none()
                    })
                    .filter_map(|(class, cell)| Some((class.clone(), Arc::clone(cell.get()?))))
                    .collect(),
            });
        // The kept classes are this push's at once: a stream holding one
        // finds it without working out its class (`GeneratedCache::holds`).
        let by_class = scopes
            .kept_classes()
            .map(|(class, generated)| (class.clone(), Arc::new(OnceCell::new_with(Some(generated)))))
            .collect();
        GeneratedCache {
            scopes,
            edge,
            by_class: Mutex::new(by_class),
            steady: incremental && changes.steady,
            moved: changes.moved.clone(),
            namespaces: OnceLock::new(),
            routes_by_class: Default::default(),
            cds: Default::default(),
            eds: OnceCell::new(),
            listeners: Default::default(),
            virtual_hosts: match before {
                Some(before) if incremental => VirtualHosts::after(&before.virtual_hosts),
                _ => VirtualHosts::default(),
            },
            edge_hosts: match before {
                Some(before) if incremental => EdgeHosts::after(&before.edge_hosts),
                _ => EdgeHosts::default(),
            },
            routes: Default::default(),
            previous,
            incremental,
            assignments_built: AtomicUsize::new(0),
            assignments: Mutex::default(),
            routes_assembled: AtomicUsize::new(0),
            edge_patched: AtomicUsize::new(0),
            certificates: None,
        }
    }

    /// The cache, its proxies sent the server certificates `certificates`
    /// says they can be: an edge server terminating TLS with another is
    /// left out of their listeners ([`ServerCertificates`]).
    pub(crate) fn with_certificates(mut self, certificates: Option<Arc<dyn ServerCertificates>>) -> Self {
        self.certificates = certificates;
        self
    }

    /// What [`GeneratedCache::with_certificates`] gave.
    pub(crate) fn certificates(&self) -> Option<Arc<dyn ServerCertificates>> {
        self.certificates.clone()
    }

    /// Whether this push keeps the configuration `held` (of the previous
    /// push or one before it) for the proxies of its class: every class is
    /// the previous push's and this one is kept as it was (its scope holds
    /// no touched host), and the proxy's own instances in `registry` (the
    /// push's) are those it was generated with. Then a stream holding it
    /// has nothing to send and need not work out its class again.
    pub(crate) fn holds(&self, held: &Held, registry: &RegistrySnapshot) -> bool {
        !self.moved(held.address)
            && self.keeps(&held.class, &held.shared)
            && registry.host_instances(&[held.address]) == held.own
    }

    /// Whether the batch of this push moved the own instances of the
    /// proxy at `address` (so its class may be another): a stream of a
    /// kept class is woken for it all the same.
    pub(crate) fn moved(&self, address: IpAddr) -> bool {
        self.moved.contains(&address)
    }

    /// Whether the batch of this push moved anyone's own instances.
    pub(crate) fn moves_any(&self) -> bool {
        !self.moved.is_empty()
    }

    /// [`GeneratedCache::holds`] for a class and the configuration held.
    pub(crate) fn keeps(&self, class: &ProxyClass, shared: &Arc<Generated>) -> bool {
        self.steady
            && self
                .by_class
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(class)
                .and_then(|cell| cell.get())
                .is_some_and(|generated| Arc::ptr_eq(generated, shared))
    }

    /// The configuration of `proxy`'s class, generating it if no proxy of
    /// the class has yet for this push. `registry` and `rules` are the
    /// push's (the same for every call).
    pub(crate) async fn get(
        &self,
        proxy: &Proxy,
        registry: &RegistrySnapshot,
        rules: &PushRules,
    ) -> ProxyConfig {
        let own = registry.host_instances(&[proxy.ip]);
        let with_certificates;
        let mesh = match &self.certificates {
            Some(certificates) => {
                with_certificates = rules
                    .mesh
                    .clone()
                    .with_server_certificates(Arc::clone(certificates));
                &with_certificates
            }
            None => &rules.mesh,
        };
        let model = mesh.model();
        let keyed = self.scopes.scope_keyed(proxy, &own, registry, rules);
        let (scope, key) = match keyed {
            Some((scope, key)) => (Some(scope), Some(key)),
            None => (None, None),
        };
        let class =
            ProxyClass::of(proxy, &own, model.source_services(), model.sources_by_labels()).with_scope(key);
        let cell = Arc::clone(
            self.by_class
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(class.clone())
                .or_default(),
        );
        let shared = cell
            .get_or_init(|| async {
                if let Some(scope) = &scope {
                    if let Some(kept) = self.scopes.kept(&class) {
                        return kept;
                    }
                    if let Some(patched) = self.patch_endpoints(&class, registry) {
                        return patched;
                    }
                    self.scopes.generated.fetch_add(1, Ordering::Relaxed);
                    let view = self.scopes.view(&scope.namespace, rules);
                    let model = view.as_deref().unwrap_or_else(|| mesh.model());
                    let generate = || {
                        Arc::new(Generated::encode(&generate_scoped_outbound(
                            proxy, registry, mesh, model, scope, &own,
                        )))
                    };
                    // A scope of a few hosts is generated in well under a
                    // millisecond: handing the worker's tasks to another
                    // thread would cost more, and in a connect storm
                    // (hundreds of classes at once) started hundreds of
                    // blocking threads, each keeping an allocator cache.
                    return if scope.hosts.len() <= INLINE_SCOPE_HOSTS {
                        generate()
                    } else {
                        heavy(generate)
                    };
                }
                if !self.incremental || proxy.generator == Generator::Grpc {
                    return heavy(|| {
                        Arc::new(Generated::encode(&generate_outbound(proxy, registry, mesh, &own)))
                    });
                }
                let captured = proxy.proxy_type == ProxyType::Sidecar && proxy.capture.captures();
                let mutual_tls = mesh.security_for(proxy).is_some();
                let edge = proxy.proxy_type.is_edge();
                let sni_dnat = serves_auto_passthrough(proxy, mesh.model()).then(|| proxy.labels.clone());
                let client = edge
                    .then(|| backend_client_credential(proxy, mesh.model()).map(str::to_string))
                    .flatten();
                let cds = self
                    .envoy_cds(
                        (captured, mutual_tls, edge, sni_dnat, client),
                        proxy,
                        registry,
                        mesh,
                    )
                    .await;
                let eds = self.envoy_eds(registry, mesh).await;
                let reused = self
                    .previous
                    .as_ref()
                    .and_then(|p| p.classes.get(&class))
                    .map(|(lds, srds, rds)| (Arc::clone(lds), Arc::clone(srds), Arc::clone(rds)));
                let reused = reused.or_else(|| self.patch_edge(&class, proxy, registry, mesh));
                let (lds, srds, rds) = match reused {
                    Some(reused) => reused,
                    None => {
                        let listeners = self.envoy_listeners(proxy, registry, mesh, &own).await;
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
                        (Arc::clone(&listeners.lds), Arc::clone(&listeners.srds), rds)
                    }
                };
                Arc::new(Generated::from_types([
                    ("CDS", cds),
                    ("EDS", eds),
                    ("LDS", lds),
                    ("SRDS", srds),
                    ("RDS", rds),
                ]))
            })
            .await
            .clone();
        let inbound =
            generate_scoped_inbound(proxy, &own, &mesh.resolving_providers(registry), scope.as_deref());
        let inbound = (inbound != Resources::default()).then(|| Arc::new(Generated::encode(&inbound)));
        let held = class.scope.is_some().then(|| Held {
            class,
            shared: Arc::clone(&shared),
            address: proxy.ip,
            own,
        });
        ProxyConfig {
            shared,
            own: inbound,
            held,
        }
    }

    /// An edge class's listeners, scopes and route configurations after
    /// a push that changed the routes of some gateway hosts alone
    /// ([`Changes::edge_hosts`]): the previous push's, the route
    /// configurations holding those hosts built again and patched in
    /// (the others copied as encoded, with their versions). A router
    /// serving thousands of routes is then generated in the time of the
    /// routes that changed, not of every host's scope and route
    /// configuration. `None` when the previous push did not generate the
    /// class, or a configuration built is not one it had (then the whole
    /// class is generated).
    fn patch_edge(
        &self,
        class: &ProxyClass,
        proxy: &Proxy,
        registry: &RegistrySnapshot,
        mesh: &MeshConfig,
    ) -> Option<(Arc<EncodedType>, Arc<EncodedType>, Arc<EncodedType>)> {
        let edge = self.edge.as_ref()?;
        let before = edge.classes.get(class)?;
        let (lds, srds, rds) = (
            before.types.get("LDS")?,
            before.types.get("SRDS")?,
            before.types.get("RDS")?,
        );
        let mut replaced = Vec::new();
        for config in edge_route_configurations_holding(
            proxy,
            registry,
            mesh.model(),
            mesh.server_certificates(),
            &edge.hosts,
        ) {
            let at = rds.position(&config.name)?;
            // The same bytes as `EdgeHosts::route_configuration`'s, without
            // putting the few hosts encoded here in the place of the
            // whole push's in that cache.
            replaced.push((at, Bytes::from(config.build().encode_to_vec())));
        }
        replaced.sort_by_key(|(at, _)| *at);
        replaced.dedup_by_key(|(at, _)| *at);
        self.edge_patched.fetch_add(1, Ordering::Relaxed);
        let rds = if replaced.is_empty() {
            Arc::clone(rds)
        } else {
            Arc::new(rds.patched(replaced))
        };
        Some((Arc::clone(lds), Arc::clone(srds), rds))
    }

    /// A scoped Envoy class's configuration after a push of endpoint
    /// changes only: the previous push's, with the load assignments of the
    /// hosts whose instances changed replaced. Its clusters, listeners and
    /// routes depend on the rules and services, which such a push keeps
    /// (as the unscoped classes' reuse assumes); each new load assignment
    /// is built once for every class ([`GeneratedCache::assignment`]).
    /// `None` when the class is new or a push of other changes.
    fn patch_endpoints(&self, class: &ProxyClass, registry: &RegistrySnapshot) -> Option<Arc<Generated>> {
        let (before, since) = self.previous.as_ref()?.scoped.get(class)?;
        let eds = before.types.get("EDS")?;
        let changed = self.changed_assignments(eds, since, registry)?;
        if changed.is_empty() {
            return Some(Arc::clone(before));
        }
        let mut types = before.types.clone();
        types.insert("EDS", Arc::new(eds.patched(changed)));
        Some(Arc::new(Generated { types }))
    }

    /// The entries of `eds` (by position) whose host is one of `hosts`,
    /// with their load assignments in this push's registry; `None` when
    /// one names a cluster the registry lacks.
    fn changed_assignments(
        &self,
        eds: &EncodedType,
        hosts: &HashSet<String>,
        registry: &RegistrySnapshot,
    ) -> Option<Vec<(usize, Bytes)>> {
        eds.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| hosts.contains(e.name.rsplit('|').next().unwrap_or_default()))
            .map(|(at, e)| Some((at, self.assignment(&e.name, registry)?)))
            .collect()
    }

    /// The encoded load assignment of the cluster `name` in this push's
    /// registry, built once for every class that needs it.
    fn assignment(&self, name: &Arc<str>, registry: &RegistrySnapshot) -> Option<Bytes> {
        let cell = Arc::clone(
            self.assignments
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(Arc::clone(name))
                .or_default(),
        );
        cell.get_or_init(|| {
            self.assignments_built.fetch_add(1, Ordering::Relaxed);
            assignment_of(name, registry)
        })
        .clone()
    }

    /// Envoy's outbound clusters, built once per push for each capture mode
    /// and with or without mutual TLS (`key`), or kept from the previous
    /// push when only endpoints changed.
    async fn envoy_cds(
        &self,
        key: CdsKey,
        proxy: &Proxy,
        registry: &RegistrySnapshot,
        mesh: &MeshConfig,
    ) -> Arc<EncodedType> {
        let cell = Arc::clone(
            self.cds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key.clone())
                .or_default(),
        );
        cell.get_or_init(|| async {
            if let Some(kept) = self.previous.as_ref().and_then(|p| p.cds.get(&key)) {
                return Arc::clone(kept);
            }
            heavy(|| {
                let services = registry.services();
                let clusters = {
                    let (captured, mutual_tls, edge, ref sni_dnat, ref client) = key;
                    let mut clusters = outbound_clusters(
                        captured,
                        edge,
                        client.as_deref(),
                        &services,
                        mesh.model(),
                        mutual_tls.then(|| mesh.mesh_tls()),
                    );
                    if sni_dnat.is_some() {
                        clusters.extend(sni_dnat_clusters(proxy, &services, mesh.model()));
                    }
                    clusters
                };
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
    /// capture mode (and edge proxy labels); for each class when some TCP
    /// or TLS route matches on its source.
    async fn envoy_listeners(
        &self,
        proxy: &Proxy,
        registry: &RegistrySnapshot,
        mesh: &MeshConfig,
        own: &[ServiceInstance],
    ) -> Arc<ListenerPart> {
        let build = || {
            let plan = listener_plan(proxy, registry, mesh.model(), mesh.server_certificates(), own);
            let ingress_routes = plan
                .ingress_routes
                .iter()
                .map(|config| {
                    let value = Any {
                        type_url: ORDER[4].1.to_string(),
                        value: self.edge_hosts.route_configuration(config),
                    };
                    (config.name.clone(), value)
                })
                .collect();
            let resources = Resources {
                listeners: plan.listeners,
                scoped_routes: plan.scoped_routes,
                ..Default::default()
            };
            Arc::new(ListenerPart {
                lds: Arc::new(EncodedType::new(ORDER[2].1, named(&resources, "LDS"))),
                srds: Arc::new(EncodedType::new(ORDER[3].1, named(&resources, "SRDS"))),
                http_ports: plan.http_ports.into_iter().collect(),
                destination_ports: plan.destination_ports.into_iter().collect(),
                ingress_routes,
            })
        };
        if mesh.model().l4_by_source() {
            return heavy(build);
        }
        let cell = Arc::clone(
            self.listeners
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry((
                    proxy.proxy_type,
                    proxy.capture.captures(),
                    edge_labels(proxy),
                    edge_namespace(proxy),
                ))
                .or_default(),
        );
        cell.get_or_init(|| async { heavy(build) }).await.clone()
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
        let model = mesh.model();
        let services = registry.services();
        let mut resources: Vec<(String, Any)> = listeners
            .http_ports
            .iter()
            .filter(|port| !listeners.destination_ports.contains(port))
            .map(|&port| {
                let encoded = virtual_hosts::route_configuration(
                    port,
                    &services,
                    model,
                    proxy,
                    own,
                    &self.virtual_hosts,
                );
                let value = Any {
                    type_url: ORDER[4].1.to_string(),
                    value: encoded.to_vec(),
                };
                (route_config_name(port), value)
            })
            .collect();
        for &port in &listeners.destination_ports {
            let configs = destination_route_configurations(port, &services, model, proxy, own);
            resources.extend(configs.iter().map(|config| {
                let value = Any {
                    type_url: ORDER[4].1.to_string(),
                    value: config.encode_to_vec(),
                };
                (config.name.clone(), value)
            }));
        }
        resources.extend(listeners.ingress_routes.iter().cloned());
        let encoded = EncodedType::new(ORDER[4].1, resources);
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
                        // None: a cluster of a service the registry lacks,
                        // which an endpoint-only push cannot have; built
                        // afresh below if it ever does.
                        if let Some(changed) =
                            self.changed_assignments(&before, &previous.endpoints, registry)
                        {
                            return Arc::new(before.patched(changed));
                        }
                    }
                    let resources = eds_clusters(&registry.services(), mesh.model())
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

/// A load assignment built once per push (`None`: no such cluster).
type AssignmentCell = Arc<OnceLock<Option<Bytes>>>;

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
    /// The hosts the batch touched (`scopes.rs`), `None` when unknown:
    /// scoped classes holding none of them keep their configuration.
    pub(crate) touched: Option<BTreeSet<String>>,
    /// Every proxy's class is the previous push's (`scopes::steady`),
    /// but for those at `moved`: a stream holding a kept class's
    /// configuration has nothing to do.
    pub(crate) steady: bool,
    /// With `steady`: the addresses whose own instances the batch moved
    /// (`own_instances.rs`); the proxies at them may have another class.
    pub(crate) moved: BTreeSet<IpAddr>,
    /// The credential source changed: which edge servers' certificates
    /// their proxies can be sent may have, so no edge class is kept.
    pub(crate) credentials: bool,
    /// A proxy rejected objects (they are left out for it).
    pub(crate) rejected: bool,
    /// The edge servers are the previous push's (`scopes::same_ingress`):
    /// `touched` leaves them out, so without this no edge proxy's scoped
    /// class is kept.
    pub(crate) same_ingress: bool,
    /// The rules changed in the routes of these gateway hosts alone
    /// (`RoutingModel::changed_edge_hosts`), the services did not: an
    /// edge class generated by the previous push keeps its listeners and
    /// scopes, and its route configurations holding none of these.
    pub(crate) edge_hosts: Option<Arc<BTreeSet<String>>>,
    /// The registry's services are the previous push's: with `touched`,
    /// the scopes holding no touched host are kept (`scopes.rs`).
    pub(crate) same_services: bool,
}

/// The edge classes a push changing some gateway hosts' routes alone
/// patches ([`GeneratedCache::patch_edge`]).
struct EdgePrevious {
    /// The domains whose routes changed.
    hosts: Arc<BTreeSet<String>>,
    /// The unscoped Envoy edge classes the previous push generated.
    classes: HashMap<ProxyClass, Arc<Generated>>,
}

/// What a push carrying endpoint changes only takes from the push before.
struct Previous {
    /// Hostnames whose load assignments must be rebuilt.
    endpoints: HashSet<String>,
    /// Envoy clusters, by whether the proxy captures.
    cds: HashMap<CdsKey, Arc<EncodedType>>,
    /// Taken (and so freed) once this push's are built.
    eds: Mutex<Option<Arc<EncodedType>>>,
    /// Envoy classes' listeners, scopes and route configurations.
    classes: HashMap<ProxyClass, ListenersAndRoutes>,
    /// Scoped Envoy classes' configurations, each with the hosts whose
    /// instances changed since: one whose scope holds such a host gets it
    /// again with those hosts' load assignments replaced
    /// ([`GeneratedCache::patch_endpoints`]).
    scoped: HashMap<ProxyClass, (Arc<Generated>, Arc<HashSet<String>>)>,
}

/// A class's encoded listeners, scopes and route configurations (LDS,
/// SRDS, RDS).
type ListenersAndRoutes = (Arc<EncodedType>, Arc<EncodedType>, Arc<EncodedType>);

/// The scoped Envoy classes a push of endpoint changes (`endpoints`) after
/// `before` may patch: those `before` generated, and those it did not
/// generate (no stream of theirs took that push, busy with an older one)
/// as the push before it held them, with `endpoints` added to what changed
/// since. Classes with the same changes since share one set.
fn scoped_since(
    before: &GeneratedCache,
    by_class: &HashMap<ProxyClass, Arc<OnceCell<Arc<Generated>>>>,
    endpoints: &HashSet<String>,
    credentials: bool,
) -> HashMap<ProxyClass, (Arc<Generated>, Arc<HashSet<String>>)> {
    let now = Arc::new(endpoints.clone());
    let mut scoped: HashMap<ProxyClass, (Arc<Generated>, Arc<HashSet<String>>)> = by_class
        .iter()
        .filter(|(class, _)| class.generator == Generator::Envoy && class.scope.is_some())
        .filter(|(class, _)| !(credentials && class.is_edge()))
        .filter_map(|(class, cell)| Some((class.clone(), (Arc::clone(cell.get()?), Arc::clone(&now)))))
        .collect();
    if let Some(older) = &before.previous {
        let mut widened: HashMap<*const HashSet<String>, Arc<HashSet<String>>> = HashMap::new();
        for (class, (generated, since)) in &older.scoped {
            if scoped.contains_key(class) || (credentials && class.is_edge()) {
                continue;
            }
            let since = widened.entry(Arc::as_ptr(since)).or_insert_with(|| {
                let mut wider = (**since).clone();
                wider.extend(endpoints.iter().cloned());
                Arc::new(wider)
            });
            scoped.insert(class.clone(), (Arc::clone(generated), Arc::clone(since)));
        }
    }
    scoped
}

/// An Envoy's listeners for one push, shared by every class of the same
/// proxy type and capture mode, with what its route configurations need.
struct ListenerPart {
    lds: Arc<EncodedType>,
    /// An edge proxy's scopes (SRDS), none for others.
    srds: Arc<EncodedType>,
    /// The outbound HTTP ports: one route configuration each.
    http_ports: Vec<u16>,
    /// The outbound HTTP ports routed by Service address
    /// (`ListenerPlan::destination_ports`).
    destination_ports: Vec<u16>,
    /// An ingress's route configurations (from ingress rules), encoded.
    ingress_routes: Vec<(String, Any)>,
}

/// A push's listeners of one proxy type and capture mode, once built.
type ListenerCell = Arc<OnceCell<Arc<ListenerPart>>>;

/// The encoded load assignment of the EDS cluster `name`, if it names a
/// port of a service `registry` has.
fn assignment_of(name: &str, registry: &RegistrySnapshot) -> Option<Bytes> {
    let cluster = name.parse::<ClusterName>().ok()?;
    let service = registry.get_service(&cluster.hostname)?;
    let port = service.port_by_number(cluster.port)?.name.clone();
    Some(
        load_assignment(&cluster, &service, &port, registry)
            .encode_to_vec()
            .into(),
    )
}

/// The most hosts a scope may hold for its class to be generated on the
/// worker itself rather than through [`heavy`](crate::cpu_bound): 64 hosts take about a
/// millisecond (a Sidecar's scope in the `ads` bench holds 21).
const INLINE_SCOPE_HOSTS: usize = 64;

#[cfg(test)]
mod tests;

/// The labels an edge proxy's listeners depend on (the gateways selecting
/// it); none for a sidecar.
/// An edge proxy's namespace (none for a sidecar).
fn edge_namespace(proxy: &Proxy) -> String {
    if proxy.proxy_type == ProxyType::Sidecar {
        String::new()
    } else {
        crate::push::proxy_namespace(proxy)
    }
}

fn edge_labels(proxy: &Proxy) -> Labels {
    if proxy.proxy_type == ProxyType::Sidecar {
        Labels::new()
    } else {
        proxy.labels.clone()
    }
}
