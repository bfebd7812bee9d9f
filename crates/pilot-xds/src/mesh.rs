//! The routing configuration the generator reads: the routing objects,
//! typed, and the routing model compiled from them.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use pilot_model::DynConfig;
use pilot_model::routing::{RoutingConfigs, RoutingModel};

use crate::XdsError;

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
}

impl MeshConfig {
    /// The routing configuration of `configs`.
    pub fn new(configs: RoutingConfigs) -> Self {
        MeshConfig {
            configs,
            model: OnceLock::new(),
        }
    }

    /// A configuration whose model is `model` and which holds no objects:
    /// a model restricted to a proxy's scope
    /// ([`RoutingModel::scoped`]), which generation reads alone.
    pub fn from_model(model: RoutingModel) -> Self {
        MeshConfig {
            configs: RoutingConfigs::default(),
            model: OnceLock::from(Arc::new(model)),
        }
    }

    /// The routing kinds among `configs`, typed; other kinds are ignored.
    pub fn from_configs<'a>(configs: impl IntoIterator<Item = &'a DynConfig>) -> Result<Self, XdsError> {
        RoutingConfigs::from_configs(configs)
            .map(MeshConfig::new)
            .map_err(|e| XdsError::BadConfig(e.to_string()))
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
