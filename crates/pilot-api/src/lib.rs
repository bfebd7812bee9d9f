//! pilot's API kinds and their validation: Istio's networking kinds of
//! today ([`networking`]: VirtualService, DestinationRule, ServiceEntry,
//! Gateway, Sidecar, WorkloadEntry), its security kinds ([`security`]:
//! PeerAuthentication, RequestAuthentication, AuthorizationPolicy) and the v1alpha2 routing kinds
//! of 2017 ([`istio`]: RouteRule, DestinationPolicy, EgressRule,
//! IngressRule), and the Kubernetes Gateway API's kinds ([`gateway_api`]:
//! GatewayClass, Gateway, HTTPRoute, GRPCRoute, ReferenceGrant,
//! BackendTLSPolicy, TLSRoute, TCPRoute) validated as their CRDs validate
//! them. Each kind is a typed spec implementing
//! [`pilot_model::ConfigKind`]: a store validates every write with it.
//!
//! [`default_registry`] holds them all: pilot-discovery serves it and
//! pilotctl reads files with it. The Gateway API's kinds are registered
//! qualified (their ids are `Kind.gateway.networking.k8s.io`): their
//! `Gateway` lives beside Istio's, told apart by the group.
//!
//! ```
//! use pilot_api::networking::VirtualService;
//! use pilot_model::{ConfigMeta, DynConfig, StoreError};
//!
//! let registry = pilot_api::default_registry();
//! let bad = DynConfig {
//!     meta: ConfigMeta::new("VirtualService", "default", "reviews"),
//!     spec: serde_json::json!({"hosts": ["reviews"], "http": [{"route": []}]}),
//! };
//! let err = registry.prepare(bad).unwrap_err();
//! assert!(matches!(err, StoreError::Invalid { .. }));
//! # let _ = std::marker::PhantomData::<VirtualService>;
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod gateway_api;
pub mod istio;
pub mod mesh;
pub mod networking;
pub mod primitives;
pub mod security;

use pilot_model::KindRegistry;

/// pilot's default registry: Istio's v1alpha2 routing kinds
/// ([`istio::register`]), the `networking.istio.io` kinds
/// ([`networking::register`]), the `security.istio.io` kinds
/// ([`security::register`]) and the Gateway API's
/// ([`gateway_api::register`]). pilot-discovery serves it and pilotctl
/// reads files with it.
///
/// ```
/// let registry = pilot_api::default_registry();
/// assert!(registry.contains("RouteRule") && registry.contains("VirtualService"));
/// assert!(registry.contains("PeerAuthentication") && registry.contains("HTTPRoute"));
/// // Two Gateways: the bare name is Istio's, the group tells them apart.
/// assert_eq!(registry.get("Gateway").unwrap().group, "networking.istio.io");
/// let gateway_api = registry.resolve("Gateway", "gateway.networking.k8s.io").unwrap();
/// assert_eq!(gateway_api.id, "Gateway.gateway.networking.k8s.io");
/// ```
pub fn default_registry() -> KindRegistry {
    let registry = istio::registry();
    networking::register(&registry).expect("the routing and networking kinds have distinct names");
    security::register(&registry).expect("the security kinds' names are distinct from the others'");
    gateway_api::register(&registry).expect("the Gateway API's kinds are qualified by their group");
    registry
}
