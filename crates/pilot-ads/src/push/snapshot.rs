//! One push: the routing configuration and the registry's state, frozen
//! and shared by every stream, with what has been generated from them;
//! and, for the proxies that rejected some objects, the configuration
//! without them (generated once per push for each set of objects left
//! out, and shared by the proxies of a class that left out the same).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pilot_model::{KindRevisions, RegistrySnapshot};
use pilot_xds::Proxy;

use super::generation_cache::{Changes, GeneratedCache};
use super::inputs::{LeftOut, PushObjects};
use super::proxy_config::ProxyConfig;
use super::recompile::PushRules;

/// The kinds a push is generated from (the routing configuration, compiled
/// into the routing model, the PeerAuthentications that decide mutual
/// TLS, the authorization policies and the RequestAuthentications of
/// inbound listeners; the Gateway API's routes, and the GatewayClasses
/// and Gateways that decide how router proxies serve them, the
/// BackendTLSPolicies that decide how proxies connect to Services, by
/// their qualified ids): the kinds whose objects get a distribution
/// status.
pub const PUSHED_KINDS: [&str; 18] = [
    "RouteRule",
    "DestinationPolicy",
    "EgressRule",
    "IngressRule",
    "VirtualService",
    "DestinationRule",
    "Gateway",
    "Sidecar",
    "PeerAuthentication",
    "AuthorizationPolicy",
    "RequestAuthentication",
    "HTTPRoute.gateway.networking.k8s.io",
    "GRPCRoute.gateway.networking.k8s.io",
    "GatewayClass.gateway.networking.k8s.io",
    "Gateway.gateway.networking.k8s.io",
    "TLSRoute.gateway.networking.k8s.io",
    "TCPRoute.gateway.networking.k8s.io",
    "BackendTLSPolicy.gateway.networking.k8s.io",
];

/// The kinds a push reads beside [`PUSHED_KINDS`]: objects that decide how
/// others are served and have no status of their own (the Gateway API's
/// ReferenceGrants, whose definition has no status).
pub(crate) const READ_KINDS: [&str; 1] = ["ReferenceGrant.gateway.networking.k8s.io"];

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
    /// The routing objects the rules were compiled from (shared with the
    /// pushes before, like the rules).
    pub(crate) objects: Arc<PushObjects>,
    /// The rules, typed and compiled (shared with the pushes before when
    /// no routing configuration changed since).
    pub(crate) rules: Arc<PushRules>,
    /// The registry's services and instances as of this push.
    pub(crate) registry: Arc<RegistrySnapshot>,
    pub(crate) generated: GeneratedCache,
    /// The configurations without some objects, by the objects left out.
    pub(crate) reduced: Mutex<HashMap<LeftOut, Arc<Reduced>>>,
    /// Whether generation shares work between classes (the options').
    pub(crate) incremental: bool,
    /// By node id, the objects this push leaves out for the node: it
    /// rejected them (`feedback/rejections.rs`).
    pub(crate) rejected: Arc<crate::feedback::LeftOutByNode>,
    /// When the push was published, and when the first change it carries
    /// arrived (none for the first push): its queue and convergence times
    /// are measured from them (`timings.rs`).
    pub(crate) published: PushClock,
}

/// When a push was published, and when the first change it carries arrived.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PushClock {
    pub(crate) published: tokio::time::Instant,
    pub(crate) changed: Option<tokio::time::Instant>,
}

impl PushClock {
    /// Published now, carrying no change (tests, the first push).
    #[cfg(test)]
    pub(crate) fn now() -> Self {
        PushClock {
            published: tokio::time::Instant::now(),
            changed: None,
        }
    }
}

/// A push's configuration without some objects.
pub(crate) struct Reduced {
    rules: OnceLock<Arc<PushRules>>,
    generated: GeneratedCache,
}

impl MeshSnapshot {
    /// `proxy`'s configuration at this push without the objects
    /// `left_out` (none: the push's own), shared with the proxies of its
    /// class that leave out the same.
    pub(crate) async fn config(&self, proxy: &Proxy, left_out: &LeftOut) -> ProxyConfig {
        if left_out.is_empty() {
            return self.generated.get(proxy, &self.registry, &self.rules).await;
        }
        let reduced = Arc::clone(
            self.reduced
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(Arc::clone(left_out))
                .or_insert_with(|| {
                    let everything = Changes {
                        full: true,
                        rules: true,
                        ..Default::default()
                    };
                    Arc::new(Reduced {
                        rules: OnceLock::new(),
                        generated: GeneratedCache::new(None, &everything, self.incremental)
                            .with_certificates(self.generated.certificates()),
                    })
                }),
        );
        let rules = reduced.rules.get_or_init(|| {
            match self.objects.compile_without(left_out, &self.rules) {
                Ok(rules) => Arc::new(rules),
                // Leaving objects out of rules that compiled cannot fail;
                // if it ever does, the proxy gets the whole push.
                Err(error) => {
                    tracing::error!(%error, "cannot compile the rules without the rejected objects");
                    Arc::clone(&self.rules)
                }
            }
        });
        reduced.generated.get(proxy, &self.registry, rules).await
    }
}

/// Whether `snapshot` keeps, for a stream, the configuration it holds
/// (`held`, generated without the objects `left_out_before`), the stream
/// now leaving out `left_out`: it leaves nothing out, then or now, and the
/// push keeps the scoped class it holds as it was. Then the stream has
/// nothing to send and does no more work for this push.
pub(crate) fn kept(
    snapshot: &MeshSnapshot,
    held: Option<&ProxyConfig>,
    left_out_before: &LeftOut,
    left_out: &LeftOut,
) -> bool {
    left_out_before.is_empty()
        && left_out.is_empty()
        && held
            .and_then(|config| config.held.as_ref())
            .is_some_and(|held| snapshot.generated.holds(held, &snapshot.registry))
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
    /// The version of the registry state it was built from
    /// ([`RegistrySnapshot::version`](pilot_model::RegistrySnapshot::version)):
    /// it holds every registry change up to that version (what a bench
    /// needs to know which push first carried a change).
    pub registry_version: u64,
}

#[cfg(test)]
mod tests {
    #[test]
    fn pushed_kinds_are_the_istio_routing_and_security_kinds_and_the_gateway_api_routes() {
        use pilot_api::gateway_api::{
            BackendTlsPolicy, Gateway as ApiGateway, GatewayClass, GrpcRoute, HttpRoute, TcpRoute, TlsRoute,
        };
        use pilot_api::istio::{DestinationPolicy, EgressRule, IngressRule, RouteRule};
        use pilot_api::networking::{DestinationRule, Gateway, Sidecar, VirtualService};
        use pilot_api::security::{AuthorizationPolicy, PeerAuthentication, RequestAuthentication};
        use pilot_model::ConfigKind;
        assert_eq!(
            super::PUSHED_KINDS,
            [
                RouteRule::KIND,
                DestinationPolicy::KIND,
                EgressRule::KIND,
                IngressRule::KIND,
                VirtualService::KIND,
                DestinationRule::KIND,
                Gateway::KIND,
                Sidecar::KIND,
                PeerAuthentication::KIND,
                AuthorizationPolicy::KIND,
                RequestAuthentication::KIND,
                &HttpRoute::id(),
                &GrpcRoute::id(),
                &GatewayClass::id(),
                &ApiGateway::id(),
                &TlsRoute::id(),
                &TcpRoute::id(),
                &BackendTlsPolicy::id(),
            ]
        );
    }
}
