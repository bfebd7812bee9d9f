//! One push: the routing configuration and the registry's state, frozen
//! and shared by every stream, with what has been generated from them.

use std::sync::Arc;
use std::time::Duration;

use pilot_model::{KindRevisions, RegistrySnapshot};
use pilot_xds::{MeshConfig, Proxy};

use super::generation_cache::GeneratedCache;
use super::proxy_config::ProxyConfig;

/// The kinds a push is generated from (the routing configuration, compiled
/// into the routing model): the kinds whose objects get a distribution
/// status.
pub const PUSHED_KINDS: [&str; 6] = [
    "RouteRule",
    "DestinationPolicy",
    "EgressRule",
    "IngressRule",
    "VirtualService",
    "DestinationRule",
];

/// One push: the routing configuration and the registry's state, both
/// frozen, shared by every connection, with the configurations generated
/// from them so far (one per class of proxy, encoded once). Every proxy of
/// a push is generated from the same registry state, whatever the live
/// registry does meanwhile.
pub(crate) struct MeshSnapshot {
    /// Increases with every push.
    pub(crate) version: u64,
    /// Per routing kind, the store revision the push was built from: every
    /// write to the kind up to it is in the push (empty when unknown).
    pub(crate) revisions: Arc<KindRevisions>,
    /// The typed rules (shared with the pushes before when no routing
    /// configuration changed since).
    pub(crate) mesh: Arc<MeshConfig>,
    /// The registry's services and instances as of this push.
    pub(crate) registry: Arc<RegistrySnapshot>,
    pub(crate) generated: GeneratedCache,
}

impl MeshSnapshot {
    /// `proxy`'s configuration at this push, shared with its class.
    pub(crate) async fn config(&self, proxy: &Proxy) -> ProxyConfig {
        self.generated.get(proxy, &self.registry, &self.mesh).await
    }
}

impl std::fmt::Debug for MeshSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeshSnapshot")
            .field("version", &self.version)
            .field("revisions", &self.revisions)
            .finish_non_exhaustive()
    }
}

/// One published push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushInfo {
    /// Its version (the `version_info` proxies are sent).
    pub version: u64,
    /// From the first configuration or registry change it carries to its
    /// publication (debounce included); `None` for the first push.
    pub latency: Option<Duration>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn pushed_kinds_are_the_istio_routing_kinds() {
        use pilot_model::ConfigKind;
        use pilot_model::istio::{DestinationPolicy, EgressRule, IngressRule, RouteRule};
        use pilot_model::networking::{DestinationRule, VirtualService};
        assert_eq!(
            super::PUSHED_KINDS,
            [
                RouteRule::KIND,
                DestinationPolicy::KIND,
                EgressRule::KIND,
                IngressRule::KIND,
                VirtualService::KIND,
                DestinationRule::KIND,
            ]
        );
    }
}
