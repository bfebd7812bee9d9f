//! The rules of the next push, from the last push's: objects at the
//! version the last push held are not decoded again, and the routing
//! model is compiled from the last one, again only for the hosts the
//! changed objects name (`pilot_routing::RoutingConfigs::compile_from`),
//! which also says which hosts' routes or destination changed, so they
//! need not be found by comparing the two models.

use std::collections::BTreeSet;
use std::sync::Arc;

use pilot_model::DynConfig;
use pilot_xds::{MeshConfig, XdsError};

use super::inputs::compile;
use crate::options::XdsOptions;

/// The rules compiled from `configs` (the model included) with the
/// server's settings, and the hosts whose routes or destination differ
/// from `previous`'s model (`None`: not known by host, or no previous
/// push).
pub(crate) fn rules(
    configs: &[Arc<DynConfig>],
    previous: Option<&MeshConfig>,
    options: &XdsOptions,
) -> Result<(MeshConfig, Option<BTreeSet<String>>), XdsError> {
    let objects = configs.iter().map(|c| &**c);
    let mut mesh = match previous {
        Some(previous) => MeshConfig::from_configs_reusing(objects, previous)?,
        None => compile(objects)?,
    };
    mesh.root_namespace = options.root_namespace.clone();
    mesh.default_export_to = options.default_export_to.clone();
    let mut mesh = mesh.with_mesh_settings(&options.root_namespace, &options.trust_domain);
    let changed = match previous {
        Some(previous) => mesh.compile_from(previous),
        None => {
            mesh.model();
            None
        }
    };
    Ok((mesh, changed))
}
