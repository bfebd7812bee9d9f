//! The mesh config file's (`--mesh-config`) sections the xDS server reads:
//! `extensionProviders`, the external authorizers CUSTOM
//! AuthorizationPolicies name. Read at start, as its `sidecarInjector`
//! section is (`inject_webhook.rs`); a bad provider stops the start with
//! the file, line and field; one of Istio's other kinds (tracing, access
//! logging) is logged as not used.

use std::sync::Arc;

use pilot_api::mesh::ExtensionProviders;

use crate::StartError;
use crate::args::Args;

/// The extension providers of `--mesh-config` (none without the flag).
pub(crate) fn extension_providers(args: &Args) -> Result<Arc<ExtensionProviders>, StartError> {
    let Some(path) = &args.mesh_config else {
        return Ok(Arc::default());
    };
    let providers = ExtensionProviders::load(path).map_err(StartError::Failed)?;
    for warning in providers.warnings() {
        tracing::warn!("{}: {warning}", path.display());
    }
    if !providers.is_empty() {
        tracing::info!(providers = ?providers.names(), "mesh config extension providers");
    }
    Ok(Arc::new(providers))
}
