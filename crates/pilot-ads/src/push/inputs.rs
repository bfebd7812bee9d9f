//! What a push is generated from, object by object: the routing objects
//! the Controller held ([`PushObjects`]), and what a proxy's configuration
//! is generated from ([`Inputs`]): those objects less the ones left out
//! for it because it rejected them (`feedback/rejections.rs`).
//!
//! Leaving an object out happens here, before the objects are compiled
//! into the model generation reads ([`PushObjects::compile_without`]): proxies whose
//! class shares a generation and who left out the same objects share one
//! reduced generation per push (`snapshot.rs`), and generation itself
//! knows nothing of it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use pilot_model::DynConfig;
use pilot_routing::RoutingConfigs;
use pilot_xds::XdsError;

use super::recompile::{PushRules, bad};

/// One version of one object: its kind, namespace, name and
/// `resourceVersion`. A new version of an object is another
/// `ObjectVersion`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ObjectVersion {
    pub(crate) kind: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) resource_version: String,
}

impl ObjectVersion {
    /// The version `config` is at.
    pub(crate) fn of(config: &DynConfig) -> Self {
        ObjectVersion {
            kind: config.meta.kind.clone(),
            namespace: config.meta.namespace.clone(),
            name: config.meta.name.clone(),
            resource_version: config.meta.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// The objects left out of a configuration (shared: the proxies that left
/// out the same ones share the set and the generation).
pub(crate) type LeftOut = Arc<BTreeSet<ObjectVersion>>;

/// The routing objects a push was built from, as the Controller's cache
/// held them (shared with the pushes after it while no rule changes).
#[derive(Default)]
pub(crate) struct PushObjects {
    configs: Vec<Arc<DynConfig>>,
    /// By kind, namespace and name, the version held: built the first
    /// time it is asked for (only once some proxy rejected something).
    index: OnceLock<HashMap<(String, String, String), String>>,
}

impl PushObjects {
    /// The objects of a push.
    pub(crate) fn new(configs: Vec<Arc<DynConfig>>) -> Self {
        PushObjects {
            configs,
            index: OnceLock::new(),
        }
    }

    /// Every object.
    pub(crate) fn configs(&self) -> &[Arc<DynConfig>] {
        &self.configs
    }

    /// True when the push holds `object` at its version.
    pub(crate) fn holds(&self, object: &ObjectVersion) -> bool {
        let index = self.index.get_or_init(|| {
            self.configs
                .iter()
                .map(|c| {
                    let key = (c.meta.kind.clone(), c.meta.namespace.clone(), c.meta.name.clone());
                    (key, c.meta.resource_version.clone().unwrap_or_default())
                })
                .collect()
        });
        let key = (object.kind.clone(), object.namespace.clone(), object.name.clone());
        index.get(&key) == Some(&object.resource_version)
    }

    /// The rules of every object but those `left_out`, compiled with the
    /// mesh-wide settings of `like` (the push's): the one place objects
    /// become rules for a proxy that rejected some.
    pub(crate) fn compile_without(
        &self,
        left_out: &BTreeSet<ObjectVersion>,
        like: &PushRules,
    ) -> Result<PushRules, XdsError> {
        let mut configs = RoutingConfigs::from_configs(
            self.configs
                .iter()
                .filter(|c| left_out.is_empty() || !left_out.contains(&ObjectVersion::of(c)))
                .map(|c| &**c),
        )
        .map_err(bad)?;
        configs.root_namespace = like.configs.root_namespace.clone();
        configs.default_export_to = like.configs.default_export_to.clone();
        let mut rules = PushRules::compile(configs, like.mesh.trust_domain());
        rules.mesh = rules.mesh.with_settings_of(&like.mesh);
        Ok(rules)
    }
}

/// What one response of a proxy was generated from: a push's objects less
/// those left out for the proxy.
#[derive(Clone)]
pub(crate) struct Inputs {
    pub(crate) objects: Arc<PushObjects>,
    pub(crate) left_out: LeftOut,
}

impl Inputs {
    /// True when `config` (at its version) went into the configuration.
    fn took(&self, config: &DynConfig) -> bool {
        let version = ObjectVersion::of(config);
        self.objects.holds(&version) && !self.left_out.contains(&version)
    }

    /// The objects `self` took that `before` did not (at their version):
    /// what a response generated from `self` brought to a proxy that had
    /// applied one generated from `before`.
    pub(crate) fn brought_since(&self, before: &Inputs) -> Vec<ObjectVersion> {
        self.objects
            .configs()
            .iter()
            .filter(|c| self.took(c) && !before.took(c))
            .map(|c| ObjectVersion::of(c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_api::istio;
    use pilot_model::document;

    fn rule(name: &str, version: &str) -> Arc<DynConfig> {
        let text = format!(
            "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  destination: {{name: reviews}}\n  route: [{{labels: {{version: v1}}}}]\n"
        );
        let mut config = document::parse("r.yaml", &text, &istio::registry())
            .unwrap()
            .remove(0);
        config.meta.resource_version = Some(version.into());
        Arc::new(config)
    }

    #[test]
    fn brought_since_is_what_changed_less_what_is_left_out() {
        let before = Inputs {
            objects: Arc::new(PushObjects::new(vec![rule("a", "1"), rule("b", "2")])),
            left_out: Default::default(),
        };
        let after = Inputs {
            objects: Arc::new(PushObjects::new(vec![
                rule("a", "1"),
                rule("b", "5"),
                rule("c", "6"),
            ])),
            left_out: Default::default(),
        };
        let names = |v: Vec<ObjectVersion>| -> Vec<(String, String)> {
            v.into_iter().map(|o| (o.name, o.resource_version)).collect()
        };
        assert_eq!(
            names(after.brought_since(&before)),
            [("b".into(), "5".into()), ("c".into(), "6".into())]
        );
        // Left out of the newer one: not brought. Left out of the older
        // one: brought when the newer one takes it.
        let c = ObjectVersion::of(&rule("c", "6"));
        let without_c = Inputs {
            left_out: Arc::new([c.clone()].into_iter().collect()),
            ..after.clone()
        };
        assert_eq!(
            names(without_c.brought_since(&before)),
            [("b".into(), "5".into())]
        );
        assert_eq!(names(after.brought_since(&without_c)), [("c".into(), "6".into())]);
        assert!(after.objects.holds(&c));
        assert!(!before.objects.holds(&c));
        let rules = after
            .objects
            .compile_without(&without_c.left_out, &PushRules::from_configs([]).unwrap())
            .unwrap();
        assert_eq!(rules.configs.route_rules.len(), 2);
    }

    /// The mesh config's extension providers (CUSTOM policies' external
    /// authorizers) are in a push's rules, and in the rules of a proxy
    /// that left objects out.
    #[test]
    fn the_extension_providers_reach_every_push_and_every_left_out_compilation() {
        let options = crate::options::XdsOptions {
            extension_providers: Arc::new(
                pilot_routing::ExtensionProviders::parse(
                    "mesh.yaml",
                    "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: authz.foo.svc.cluster.local, port: 9000}\n",
                )
                .unwrap(),
            ),
            ..Default::default()
        };
        let objects = PushObjects::new(vec![rule("a", "1")]);
        let (rules, _) = crate::push::recompile::rules(objects.configs(), None, &options).unwrap();
        assert_eq!(rules.mesh.extension_providers().names(), ["authz"]);
        let left_out = [ObjectVersion::of(&rule("a", "1"))].into_iter().collect();
        let without = objects.compile_without(&left_out, &rules).unwrap();
        assert_eq!(without.mesh.extension_providers().names(), ["authz"]);
        assert!(without.configs.route_rules.is_empty());
    }
}
