//! The routing configuration the generator reads: the routing objects,
//! typed, and the routing model compiled from them.

use std::collections::BTreeSet;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use pilot_model::DynConfig;
use pilot_routing::{RoutingConfigs, RoutingModel};

use crate::XdsError;
use crate::security::SecurityPolicies;

/// The routing configuration of one push: the routing objects, typed
/// ([`RoutingConfigs`], which it dereferences to), and the
/// [`RoutingModel`] compiled from them, which is all generation reads.
///
/// The model is compiled once, on first use, and shared by clones; any
/// change through `&mut` discards it, so it is compiled again from what
/// the objects are then.
///
/// ```
/// use pilot_xds::MeshConfig;
/// let mut mesh = MeshConfig::default();
/// assert!(mesh.model().http_routes("reviews.default.svc.cluster.local").is_empty());
/// mesh.domain_suffix = "svc.example".into(); // discards the compiled model
/// assert_eq!(mesh.configs().domain_suffix, "svc.example");
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct MeshConfig {
    configs: RoutingConfigs,
    model: OnceLock<Arc<RoutingModel>>,
    security: SecurityPolicies,
}

impl MeshConfig {
    /// The routing configuration of `configs`.
    pub fn new(configs: RoutingConfigs) -> Self {
        MeshConfig {
            configs,
            model: OnceLock::new(),
            security: SecurityPolicies::default(),
        }
    }

    /// A configuration whose model is `model` and which holds no routing
    /// objects: a model restricted to a proxy's scope
    /// ([`RoutingModel::scoped`]), which generation reads alone, with the
    /// security policies and mesh settings of `like`.
    pub fn from_model(model: RoutingModel, like: &MeshConfig) -> Self {
        let mut configs = RoutingConfigs::default();
        configs.domain_suffix = like.configs.domain_suffix.clone();
        configs.root_namespace = like.configs.root_namespace.clone();
        configs.default_export_to = like.configs.default_export_to.clone();
        MeshConfig {
            configs,
            model: OnceLock::from(Arc::new(model)),
            security: like.security.clone(),
        }
    }

    /// The routing and security kinds among `configs`, typed; other kinds
    /// are ignored.
    pub fn from_configs<'a>(configs: impl IntoIterator<Item = &'a DynConfig>) -> Result<Self, XdsError> {
        let configs: Vec<&DynConfig> = configs.into_iter().collect();
        let bad = |e: pilot_model::StoreError| XdsError::BadConfig(e.to_string());
        let mut mesh = RoutingConfigs::from_configs(configs.iter().copied())
            .map(MeshConfig::new)
            .map_err(bad)?;
        mesh.security = SecurityPolicies::from_configs(configs).map_err(bad)?;
        Ok(mesh)
    }

    /// The routing and security kinds among `configs`, typed, taking the
    /// objects `previous` holds at the same resource version from it
    /// ([`RoutingConfigs::from_configs_reusing`]), with its settings.
    pub fn from_configs_reusing<'a>(
        configs: impl IntoIterator<Item = &'a DynConfig>,
        previous: &MeshConfig,
    ) -> Result<Self, XdsError> {
        let configs: Vec<&DynConfig> = configs.into_iter().collect();
        let bad = |e: pilot_model::StoreError| XdsError::BadConfig(e.to_string());
        let mut mesh = RoutingConfigs::from_configs_reusing(configs.iter().copied(), &previous.configs)
            .map(MeshConfig::new)
            .map_err(bad)?;
        mesh.security = SecurityPolicies::from_configs(configs).map_err(bad)?;
        Ok(mesh)
    }

    /// Compiles the model from `previous`'s
    /// ([`RoutingConfigs::compile_from`]): the hosts no changed object
    /// names are shared with it. Returns the hosts whose routes or
    /// destination changed, `None` when that is not known by host (the
    /// whole model was compiled again).
    pub fn compile_from(&mut self, previous: &MeshConfig) -> Option<BTreeSet<String>> {
        let recompiled = self.configs.compile_from(&previous.configs, previous.model());
        self.model = OnceLock::from(Arc::new(recompiled.model));
        recompiled.changed
    }

    /// The same configuration read with this mesh's root namespace (of
    /// mesh-wide policy) and trust domain (of workload identities).
    pub fn with_mesh_settings(mut self, root_namespace: &str, trust_domain: &str) -> Self {
        self.security.root_namespace = root_namespace.to_string();
        self.security.trust_domain = trust_domain.to_string();
        self
    }

    /// The security policies (PeerAuthentication) and mesh settings.
    pub fn security(&self) -> &SecurityPolicies {
        &self.security
    }

    /// The security policies a proxy's generation follows: none (no mutual
    /// TLS) for a proxy without SDS certificates or a proxyless gRPC one.
    pub fn security_for(&self, proxy: &crate::Proxy) -> Option<&SecurityPolicies> {
        (proxy.sds && proxy.generator == crate::Generator::Envoy).then_some(&self.security)
    }

    /// The security policies, to change.
    pub fn security_mut(&mut self) -> &mut SecurityPolicies {
        &mut self.security
    }

    /// The routing objects.
    pub fn configs(&self) -> &RoutingConfigs {
        &self.configs
    }

    /// The routing model, compiled on first use.
    pub fn model(&self) -> &RoutingModel {
        self.model.get_or_init(|| Arc::new(self.configs.compile()))
    }
}

impl Deref for MeshConfig {
    type Target = RoutingConfigs;
    fn deref(&self) -> &RoutingConfigs {
        &self.configs
    }
}

impl DerefMut for MeshConfig {
    /// The objects, to change: the compiled model is discarded.
    fn deref_mut(&mut self) -> &mut RoutingConfigs {
        self.model = OnceLock::new();
        &mut self.configs
    }
}
