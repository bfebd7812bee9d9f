//! The rules of a push ([`PushRules`]): the routing objects, typed, and
//! the configuration generation reads, compiled from them. The next
//! push's come from the last push's: objects at the version the last push
//! held are not decoded again, and the routing model is compiled from the
//! last one, again only for the hosts the changed objects name
//! (`pilot_routing::RoutingConfigs::compile_from`), which also says which
//! hosts' routes or destination changed, so they need not be found by
//! comparing the two models.

use std::collections::BTreeSet;
use std::sync::Arc;

use pilot_model::DynConfig;
use pilot_routing::{RoutingConfigs, RoutingModel};
use pilot_xds::{MeshConfig, XdsError};

use crate::options::XdsOptions;

/// A push's rules.
#[derive(Clone)]
pub(crate) struct PushRules {
    /// The objects, typed: kept for what only they say (each namespace's
    /// own view of the rules when some are not exported everywhere,
    /// `scopes.rs`) and for the next push's compilation from this one.
    /// Generation never sees them.
    pub(crate) configs: RoutingConfigs,
    /// What generation reads: the model compiled from `configs`, with the
    /// trust domain.
    pub(crate) mesh: MeshConfig,
}

impl PushRules {
    /// The rules of `configs`, compiled, identities in `trust_domain`.
    pub(crate) fn compile(configs: RoutingConfigs, trust_domain: &str) -> Self {
        let mesh = MeshConfig::new(configs.compile()).with_trust_domain(trust_domain);
        PushRules { configs, mesh }
    }

    /// The rules of the routing and security kinds among `objects`, with
    /// the default settings (tests build pushes from objects this way).
    #[cfg(test)]
    pub(crate) fn from_configs<'a>(
        objects: impl IntoIterator<Item = &'a DynConfig>,
    ) -> Result<Self, XdsError> {
        let configs = RoutingConfigs::from_configs(objects).map_err(bad)?;
        Ok(PushRules::compile(
            configs,
            pilot_xds::security::DEFAULT_TRUST_DOMAIN,
        ))
    }

    /// The compiled model.
    pub(crate) fn model(&self) -> &RoutingModel {
        self.mesh.model()
    }

    /// The model `namespace` sees when it has a view of its own (some
    /// rule is not exported everywhere): compiled from the objects
    /// exported to it.
    pub(crate) fn view_of(&self, namespace: &str) -> RoutingModel {
        self.configs.visible_to(namespace).compile()
    }
}

/// The rules compiled from `configs` (the model included) with the
/// server's settings, and the hosts whose routes or destination differ
/// from `previous`'s model (`None`: not known by host, or no previous
/// push).
pub(crate) fn rules(
    configs: &[Arc<DynConfig>],
    previous: Option<&PushRules>,
    options: &XdsOptions,
) -> Result<(PushRules, Option<BTreeSet<String>>), XdsError> {
    let objects = configs.iter().map(|c| &**c);
    let mut typed = match previous {
        Some(previous) => RoutingConfigs::from_configs_reusing(objects, &previous.configs),
        None => RoutingConfigs::from_configs(objects),
    }
    .map_err(bad)?;
    typed.root_namespace = options.root_namespace.clone();
    typed.default_export_to = options.default_export_to.clone();
    let (model, changed) = match previous {
        Some(previous) => {
            let recompiled = typed.compile_from(&previous.configs, previous.model());
            (recompiled.model, recompiled.changed)
        }
        None => (typed.compile(), None),
    };
    let mesh = MeshConfig::new(model)
        .with_trust_domain(&options.trust_domain)
        .with_extension_providers(Arc::clone(&options.extension_providers));
    Ok((PushRules { configs: typed, mesh }, changed))
}

/// An object that does not decode as its kind.
pub(crate) fn bad(error: pilot_model::StoreError) -> XdsError {
    XdsError::BadConfig(error.to_string())
}
