//! Proxies' scopes for one push (`pilot_xds::serving::scope_in`): computed once per
//! namespace and Sidecar, with each namespace's own view of the rules when
//! `exportTo` gives it one; and which scoped classes' configurations the
//! push may keep from the push before, because the batch of changes it
//! carries touched none of their hosts.
//!
//! A batch touches the hosts whose routes or destination changed (the
//! models compared host by host), whose service changed and whose
//! instances changed. When some rule is not exported to every namespace,
//! the models compared are each namespace's own view: those of the
//! namespaces such a rule names (its own and its `exportTo` entries), and
//! one view for every other namespace (they all see the same rules). When
//! it cannot be said host by host (external services, ingress servers or
//! the compiled security policies changed) it touches everything. A class whose scope holds no
//! touched host keeps its configuration, encodings and all, so its
//! proxies are sent nothing (their streams see the same digests).
//!
//! The scopes themselves are kept from push to push in the same way: a
//! scope is computed from its Sidecar, the services (and their
//! `exportTo`) and the route targets of the hosts in it, so while the
//! Sidecar and the services are the same, a scope holding no touched host
//! is the previous push's. A push then computes only the scopes of what
//! it touched, not one per namespace of the mesh.
//!
//! When every proxy's class is the previous push's ([`steady`]: the batch
//! is said host by host, the registry's services, the compiled Sidecars
//! and the visibility are the same), a stream holding a kept class's configuration
//! does nothing for the push but record it: it works out no class and
//! compares no digest (`GeneratedCache::holds`). Endpoint changes keep a
//! push steady: only the proxies at an address whose own instances moved
//! (`own_instances.rs`) work their class out again.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use pilot_model::{Labels, RegistrySnapshot, ServiceInstance};
use pilot_routing::{RoutingConfigs, RoutingModel, ScopeOrigin, SidecarScope, is_public};
use pilot_xds::serving::{ScopeKey, ServiceIndex, scope_in, scoping_applies};
use pilot_xds::{Proxy, ProxyScope};

use super::proxy_class::ProxyClass;
use super::proxy_config::Generated;
use super::recompile::PushRules;

/// Where a scope applies: a namespace and the Sidecar deciding it.
type ScopeAt = (String, ScopeOrigin);

/// A scope with its key.
type KeyedScope = (Arc<ProxyScope>, ScopeKey);

/// A scope with the Sidecar (compiled) it was computed from.
type ComputedScope = (Arc<ProxyScope>, Option<Arc<SidecarScope>>);

/// A push's scopes.
#[derive(Default)]
pub(crate) struct Scopes {
    /// Whether any proxy may see less than the whole mesh.
    applies: OnceLock<bool>,
    /// By namespace and the Sidecar that applies (none: no Sidecar), with
    /// that Sidecar.
    /// Each with its key, shared by the classes of its proxies.
    by_sidecar: Mutex<HashMap<ScopeAt, (ComputedScope, ScopeKey)>>,
    /// By namespace and workload labels: what decides which Sidecar
    /// applies, so proxies alike look the Sidecar up once per push.
    by_workload: Mutex<HashMap<(String, Labels), KeyedScope>>,
    /// The previous push's scopes this push may keep (holding no touched
    /// host, with the same services), each with the Sidecar it was
    /// computed from: kept when that Sidecar is still the one applying.
    reusable: HashMap<ScopeAt, ComputedScope>,
    /// How many scopes were computed (not kept).
    pub(crate) computed: std::sync::atomic::AtomicUsize,
    /// Each namespace's own view of the rules, when it has one.
    views: Mutex<HashMap<String, Arc<RoutingModel>>>,
    /// The previous push's scoped configurations this push may keep.
    kept: HashMap<ProxyClass, Arc<Generated>>,
    /// How many scoped classes were generated (not kept).
    pub(crate) generated: std::sync::atomic::AtomicUsize,
    /// The registry's services indexed for scoping: built by the first
    /// scope computed, or the previous push's when its services are the
    /// same.
    services: OnceLock<Arc<ServiceIndex>>,
}

impl Scopes {
    /// The scopes of a push whose batch touched `touched` (`None`:
    /// everything), keeping from `before` (the previous push's scoped
    /// classes, with their configurations) those untouched (an edge
    /// proxy's only with `same_ingress`, the same edge servers), and from
    /// `scopes_before` (the previous push's scopes) those untouched when
    /// `same_services` (the registry's services are the previous push's).
    pub(crate) fn new<'a>(
        before: impl Iterator<Item = (&'a ProxyClass, Arc<Generated>)>,
        touched: Option<&BTreeSet<String>>,
        scopes_before: Option<&Scopes>,
        same_services: bool,
        same_ingress: bool,
    ) -> Self {
        let reusable = match (touched, scopes_before) {
            (Some(touched), Some(scopes_before)) if same_services => scopes_before
                .by_sidecar
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|(_, ((scope, _), _))| touched.iter().all(|h| !scope.contains(h)))
                .map(|(at, (computed, _))| (at.clone(), computed.clone()))
                .collect(),
            _ => HashMap::new(),
        };
        let kept = match touched {
            None => HashMap::new(),
            Some(touched) => before
                .filter(|(class, _)| {
                    class
                        .scope
                        .as_ref()
                        .is_some_and(|scope| touched.iter().all(|h| !scope.hosts().contains(h)))
                        && (same_ingress || !class.is_edge())
                })
                .map(|(class, generated)| (class.clone(), generated))
                .collect(),
        };
        let services = OnceLock::new();
        if let Some(index) = scopes_before
            .filter(|_| same_services)
            .and_then(|before| before.services.get())
        {
            let _ = services.set(Arc::clone(index));
        }
        Scopes {
            kept,
            reusable,
            services,
            ..Default::default()
        }
    }

    /// `proxy`'s scope at this push; `None` when no proxy's is restricted
    /// (then every proxy gets the whole mesh and generation shares it).
    pub(crate) fn scope(
        &self,
        proxy: &Proxy,
        own: &[ServiceInstance],
        registry: &RegistrySnapshot,
        rules: &PushRules,
    ) -> Option<Arc<ProxyScope>> {
        self.scope_keyed(proxy, own, registry, rules)
            .map(|(scope, _)| scope)
    }

    /// `proxy`'s scope at this push with its key ([`ProxyScope::key`]),
    /// the same for every proxy of the scope (a class holds its key, so
    /// the proxies of a class share one).
    pub(crate) fn scope_keyed(
        &self,
        proxy: &Proxy,
        own: &[ServiceInstance],
        registry: &RegistrySnapshot,
        rules: &PushRules,
    ) -> Option<KeyedScope> {
        if !*self
            .applies
            .get_or_init(|| scoping_applies(registry, rules.model()))
        {
            return None;
        }
        let namespace = proxy_namespace(proxy);
        let labels = workload_labels(proxy, own);
        let workload = (namespace, labels);
        if let Some(scope) = self
            .by_workload
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&workload)
        {
            return Some(scope.clone());
        }
        let scope = self.scope_of_workload(&workload.0, &workload.1, registry, rules);
        // Proxies alike arriving together may have worked it out side by
        // side: the first one recorded is everyone's.
        Some(
            self.by_workload
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(workload)
                .or_insert(scope)
                .clone(),
        )
    }

    /// The scope of a workload of `namespace` with `labels`: the Sidecar
    /// applying, then its scope, computed or kept.
    fn scope_of_workload(
        &self,
        namespace: &str,
        labels: &Labels,
        registry: &RegistrySnapshot,
        rules: &PushRules,
    ) -> KeyedScope {
        let sidecar = rules.model().sidecar_for(namespace, labels);
        let origin = sidecar
            .as_ref()
            .map_or(ScopeOrigin::NoSidecar, |(_, origin)| origin.clone());
        let key = (namespace.to_string(), origin);
        if let Some(((scope, _), scope_key)) = self
            .by_sidecar
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return (Arc::clone(scope), scope_key.clone());
        }
        let applying = sidecar.as_ref().map(|(compiled, _)| *compiled);
        let computed = match self.reusable.get(&key) {
            Some((scope, from))
                if from.as_ref() == applying && scope.own_view == rules.model().restricts_visibility() =>
            {
                (Arc::clone(scope), from.clone())
            }
            _ => {
                self.computed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let view = self.view(namespace, rules);
                let model = view.as_deref().unwrap_or_else(|| rules.model());
                let from = applying.cloned();
                let services = self
                    .services
                    .get_or_init(|| Arc::new(ServiceIndex::new(registry)));
                let scope = Arc::new(scope_in(namespace, sidecar, services, &rules.mesh, model));
                (scope, from)
            }
        };
        let scope_key = computed.0.key();
        // The first recorded is everyone's (see `scope_keyed`).
        let mut by_sidecar = self.by_sidecar.lock().unwrap_or_else(|p| p.into_inner());
        let ((scope, _), scope_key) = by_sidecar.entry(key).or_insert((computed, scope_key));
        (Arc::clone(scope), scope_key.clone())
    }

    /// The model `namespace` sees: its own when some rule is not exported
    /// to every namespace, else `None` (the push's).
    pub(crate) fn view(&self, namespace: &str, rules: &PushRules) -> Option<Arc<RoutingModel>> {
        if !rules.model().restricts_visibility() {
            return None;
        }
        let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        let view = views
            .entry(namespace.to_string())
            .or_insert_with(|| Arc::new(rules.view_of(namespace)));
        Some(Arc::clone(view))
    }

    /// The previous push's scoped classes this push keeps, with their
    /// configurations.
    pub(crate) fn kept_classes(&self) -> impl Iterator<Item = (&ProxyClass, Arc<Generated>)> {
        self.kept
            .iter()
            .map(|(class, generated)| (class, Arc::clone(generated)))
    }

    /// The previous push's configuration of `class`, when this push keeps
    /// it.
    pub(crate) fn kept(&self, class: &ProxyClass) -> Option<Arc<Generated>> {
        self.kept.get(class).cloned()
    }
}

/// The namespace of a proxy: the first label of its DNS domain
/// (`default.svc.cluster.local`).
pub(crate) fn proxy_namespace(proxy: &Proxy) -> String {
    proxy.domain.split('.').next().unwrap_or_default().to_string()
}

/// Whether two models' security policies (compiled) are the same: a
/// change to them changes what every workload accepts and sends (mutual
/// TLS, authorization, BackendTLSPolicies), so it is not said host by
/// host.
fn same_security(before: &RoutingModel, after: &RoutingModel) -> bool {
    before.peer_authentication() == after.peer_authentication()
        && before.authorization() == after.authorization()
        && before.request_authentication() == after.request_authentication()
        && before.backend_tls() == after.backend_tls()
}

/// The hosts a batch touched between two pushes' models and registry
/// states, or `None` when it cannot be said host by host. `rules`: the
/// hosts whose routes or destination changed, when the compilation of
/// `after`'s model from `before`'s knew them (`recompile.rs`); otherwise,
/// and when some rule is not visible everywhere (each view is compared),
/// the models are compared host by host.
///
/// The edge servers are left out (no sidecar is served them):
/// `same_ingress` is set to whether they (and every view's) are the same
/// too. When they are not, an edge proxy's scoped class is not kept
/// though its scope holds no touched host.
pub(crate) fn touched_hosts(
    before: (&PushRules, &RegistrySnapshot),
    after: (&PushRules, &RegistrySnapshot),
    rules: Option<&BTreeSet<String>>,
    same_ingress: &mut bool,
) -> Option<BTreeSet<String>> {
    let (rules_before, registry_before) = before;
    let (rules_after, registry_after) = after;
    let mut touched = BTreeSet::new();
    *same_ingress = true;
    if !std::ptr::eq(rules_before, rules_after) {
        let (model_before, model_after) = (rules_before.model(), rules_after.model());
        *same_ingress = model_after.same_ingress(model_before);
        if !same_security(model_before, model_after) {
            return None;
        }
        if model_before.restricts_visibility() || model_after.restricts_visibility() {
            for namespace in distinct_views(&rules_before.configs, &rules_after.configs) {
                let after = rules_after.view_of(&namespace);
                let before = rules_before.view_of(&namespace);
                *same_ingress &= after.same_ingress(&before);
                touched.extend(after.changed_mesh_hosts(&before)?);
            }
        } else if let Some(rules) = rules {
            touched = rules.clone();
        } else {
            touched = model_after.changed_mesh_hosts(model_before)?;
        }
    }
    // One registry state (nothing changed in any registry): no service
    // or instance list to compare.
    if std::ptr::eq(registry_before, registry_after) {
        return Some(touched);
    }
    use pilot_model::ServiceDiscovery;
    let hosts: BTreeSet<String> = registry_before
        .services()
        .iter()
        .chain(registry_after.services().iter())
        .map(|s| s.hostname.clone())
        .collect();
    for host in hosts {
        let same_service = match (
            registry_before.get_service(&host),
            registry_after.get_service(&host),
        ) {
            (Some(a), Some(b)) => Arc::ptr_eq(&a, &b) || a == b,
            _ => false,
        };
        let same_instances = match (
            registry_before.instance_list(&host),
            registry_after.instance_list(&host),
        ) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (None, None) => true,
            _ => false,
        };
        if !same_service || !same_instances {
            touched.insert(host);
        }
    }
    Some(touched)
}

/// Whether every proxy's class at a push is the one it had at the push
/// `before`, but for the proxies whose own instances the batch moved
/// (`own_instances.rs`): the batch is said host by host (`touched`), the
/// registry's services are the same (`same_services`: so are every
/// scope's hosts), and so are the compiled Sidecars and whether some rule
/// is not exported everywhere (so every workload's Sidecar and view are,
/// its own instances being the same).
pub(crate) fn steady(
    before: &PushRules,
    after: &PushRules,
    touched: Option<&BTreeSet<String>>,
    same_services: bool,
) -> bool {
    let (model_before, model_after) = (before.model(), after.model());
    touched.is_some()
        && same_services
        && model_before.restricts_visibility() == model_after.restricts_visibility()
        && (std::ptr::eq(before, after) || model_before.sidecars() == model_after.sidecars())
}

/// Whether two registry states hold the same services (hostnames, ports,
/// `exportTo` and all): then every namespace sees the same hosts.
pub(crate) fn same_services(before: &RegistrySnapshot, after: &RegistrySnapshot) -> bool {
    if std::ptr::eq(before, after) {
        return true;
    }
    use pilot_model::ServiceDiscovery;
    let services = after.services();
    services.len() == before.services().len()
        && services.iter().all(|service| {
            before
                .get_service(&service.hostname)
                .is_some_and(|b| Arc::ptr_eq(&b, service) || *b == **service)
        })
}

/// A namespace for each distinct view of the rules, before or after: those
/// a rule not exported to every namespace names (its own, its `exportTo`
/// entries), and one named by none (every other namespace sees what it
/// sees: the public rules).
fn distinct_views(before: &RoutingConfigs, after: &RoutingConfigs) -> BTreeSet<String> {
    // No namespace is called this (not a DNS label): it stands for all
    // the namespaces no rule names.
    let mut namespaces = BTreeSet::from(["~unnamed".to_string()]);
    for configs in [before, after] {
        let default = &configs.default_export_to;
        let restricted = configs
            .virtual_services
            .iter()
            .map(|vs| (&vs.meta.namespace, &vs.spec.export_to))
            .chain(
                configs
                    .destination_rules
                    .iter()
                    .map(|dr| (&dr.meta.namespace, &dr.spec.export_to)),
            )
            .filter(|(_, export_to)| !is_public(export_to, default));
        for (namespace, export_to) in restricted {
            namespaces.insert(namespace.clone());
            let list = if export_to.is_empty() { default } else { export_to };
            namespaces.extend(
                list.iter()
                    .filter(|e| !matches!(e.as_str(), "." | "*" | "~"))
                    .cloned(),
            );
        }
    }
    namespaces
}

/// Labels of `proxy` and its own instances together (what a Sidecar's
/// workload selector is matched against).
pub(crate) fn workload_labels(proxy: &Proxy, own: &[ServiceInstance]) -> Labels {
    let mut labels = proxy.labels.clone();
    for instance in own {
        labels
            .0
            .extend(instance.labels.0.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    labels
}

#[cfg(test)]
mod tests;
