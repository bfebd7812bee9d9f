//! The Kubernetes Gateway API's kinds (group `gateway.networking.k8s.io`):
//! [`GatewayClass`], [`Gateway`], [`HttpRoute`], [`GrpcRoute`],
//! [`ReferenceGrant`], [`BackendTlsPolicy`], [`TlsRoute`] and
//! [`TcpRoute`], with the fields of the standard and experimental channels
//! and validated as the Gateway API's CRDs validate them: every
//! constraint of their OpenAPI schemas that typing does not enforce
//! (patterns, lengths, ranges, counts, required fields, unique keys of
//! list maps and sets) and every CEL rule, each error at the field path
//! the API server names.
//!
//! Only specs are typed. Defaults the CRDs apply (a `PathPrefix /` match,
//! weight 1, routes from the Gateway's namespace) are accessor methods
//! (`HttpRouteMatch::path`, `BackendRef::weight`, `Listener::allowed_routes`):
//! a stored spec stays as written.
//!
//! Kinds served at several versions share one type here, and one set of
//! rules but where the CRDs' versions differ: TLSRoute and TCPRoute written
//! at `v1alpha2` may have up to 16 rules (a stream takes the first: it has
//! no request to tell them apart), and a TLSRoute there no hostname (it
//! takes every SNI name of its listeners) and hostnames checked by their
//! pattern only, where `v1` and `v1alpha3` ask for exactly one rule and a
//! hostname ([`ConfigKind::validate_at`]). Their OpenAPI schemas differ
//! by version as the CRDs' do ([`ConfigKind::openapi_schema_at`]): the
//! required fields and the bounds of their lists. Objects are stored at
//! the storage version, as Kubernetes stores them.
//!
//! The CRDs' one rule that compares an object with its previous version,
//! a GatewayClass's immutable `controllerName`, is a transition rule
//! ([`ConfigKind::validate_update`]): every store checks it on update.
//!
//! ```
//! use pilot_api::gateway_api;
//! use pilot_model::{ConfigMeta, DynConfig};
//!
//! let registry = gateway_api::registry();
//! let route = DynConfig {
//!     meta: ConfigMeta::new("HTTPRoute", "default", "store"),
//!     spec: serde_json::json!({
//!         "parentRefs": [{"name": "edge"}],
//!         "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "shop"}}]}]
//!     }),
//! };
//! let err = registry.prepare(route).unwrap_err().to_string();
//! assert!(err.contains("spec.rules[0].matches[0].path"), "{err}");
//! ```

mod backend_tls_policy;
mod checks;
mod common;
mod cors;
mod external_auth;
mod filters;
mod gateway;
mod gateway_class;
mod gateway_tls;
mod grpcroute;
mod httproute;
mod patterns;
mod reference_grant;
mod session;
#[cfg(feature = "schema")]
mod shapes;
mod tls_tcp;

#[cfg(test)]
mod tests;

pub use backend_tls_policy::{
    BackendTlsPolicy, BackendTlsValidation, PolicyTargetReference, SubjectAltName, SubjectAltNameType,
};
pub use common::{
    BackendObjectReference, BackendRef, LabelSelector, LabelSelectorRequirement, LocalObjectReference,
    ObjectReference, ParentReference, SecretObjectReference,
};
pub use cors::{AnyMethod, Cors, CorsMethod};
pub use external_auth::{ExternalAuth, ExternalAuthProtocol, ForwardBody, GrpcAuthConfig, HttpAuthConfig};
pub use filters::{
    Fraction, HeaderModifier, HttpHeader, HttpMethod, HttpPathModifier, HttpRouteFilter, HttpRouteFilterType,
    PathModifierType, RedirectScheme, RequestMirror, RequestRedirect, UrlRewrite,
};
pub use gateway::{
    AllowedListeners, AllowedRoutes, FromNamespaces, Gateway, GatewayAddress, GatewayDefaultScope,
    GatewayInfrastructure, Listener, ListenerTlsConfig, RouteGroupKind, RouteNamespaces, TlsMode,
};
pub use gateway_class::{GatewayClass, ParametersReference};
pub use gateway_tls::{
    FrontendTlsConfig, FrontendTlsValidation, FrontendValidationMode, GatewayBackendTls, GatewayTlsConfig,
    TlsConfig, TlsPortConfig,
};
pub use grpcroute::{
    GrpcBackendRef, GrpcHeaderMatch, GrpcMethodMatch, GrpcRoute, GrpcRouteFilter, GrpcRouteFilterType,
    GrpcRouteMatch, GrpcRouteRule,
};
pub use httproute::{
    HttpBackendRef, HttpHeaderMatch, HttpPathMatch, HttpQueryParamMatch, HttpRoute, HttpRouteMatch,
    HttpRouteRetry, HttpRouteRule, HttpRouteTimeouts, PathMatchType, StringMatchType,
};
pub use reference_grant::{ReferenceGrant, ReferenceGrantFrom, ReferenceGrantTo};
pub use session::{CookieConfig, CookieLifetimeType, SessionPersistence, SessionPersistenceType};
pub use tls_tcp::{StreamRouteRule, TcpRoute, TlsRoute};

use pilot_model::{ConfigKind, FieldErrors, KindRegistry, StoreError};

/// The API group of the Gateway API's kinds.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// The category of the Gateway API's kinds, as their CRDs declare it:
/// `kubectl get gateway-api` lists them all.
pub const CATEGORY: &str = "gateway-api";

macro_rules! gateway_api_kind {
    (@schema $ty:ty, $version:expr) => {
        Some(crate::primitives::openapi_schema::<$ty>())
    };
    (@schema $ty:ty, $version:expr, $schema_at:path) => {
        Some($schema_at($version))
    };
    (
        $ty:ty, $kind:literal, $plural:literal, $version:literal, [$($served:literal),*],
        [$($short:literal),*], $validate:path $(, update: $update:path)? $(, cluster_scoped: $cluster:literal)?
        $(, versioned: [$($versioned:expr),*] => $validate_at:path)?
        $(, schema_at: $schema_at:path)?
    ) => {
        impl ConfigKind for $ty {
            const KIND: &'static str = $kind;
            const PLURAL: &'static str = $plural;
            const GROUP: &'static str = GROUP;
            const VERSION: &'static str = $version;
            const SERVED_VERSIONS: &'static [&'static str] = &[$($served),*];
            const SHORT_NAMES: &'static [&'static str] = &[$($short),*];
            const QUALIFIED: bool = true;
            const DEFINED_ELSEWHERE: bool = true;
            const CATEGORIES: &'static [&'static str] = &[CATEGORY];

            #[cfg(feature = "schema")]
            fn openapi_schema() -> Option<serde_json::Value> {
                gateway_api_kind!(@schema $ty, Self::VERSION $(, $schema_at)?)
            }

            $(
                #[cfg(feature = "schema")]
                fn openapi_schema_at(version: &str) -> Option<serde_json::Value> {
                    Some($schema_at(version))
                }
            )?

            fn validate(&self, errors: &mut FieldErrors) {
                $validate(self, errors)
            }

            $(const CLUSTER_SCOPED: bool = $cluster;)?

            $(
                const VERSIONED_RULES: &'static [&'static str] = &[$($versioned),*];

                fn validate_at(&self, version: &str, errors: &mut FieldErrors) {
                    $validate_at(self, version, errors)
                }
            )?

            $(
                const TRANSITION_RULES: bool = true;

                fn validate_update(&self, old: &Self, errors: &mut FieldErrors) {
                    $update(self, old, errors)
                }
            )?
        }
    };
}

// Versions and short names as the Gateway API's CRDs declare them (the
// experimental channel serves the most versions). The CRDs of HTTPRoute,
// GRPCRoute, TLSRoute and TCPRoute declare no short name, and the registry
// derives none for a qualified kind. Every kind is qualified: its id is
// `Kind.gateway.networking.k8s.io` (`Gateway` is Istio's kind's too).
gateway_api_kind!(
    GatewayClass,
    "GatewayClass",
    "gatewayclasses",
    "v1",
    ["v1beta1"],
    ["gc"],
    gateway_class::validate,
    update: gateway_class::validate_update,
    cluster_scoped: true
);
gateway_api_kind!(
    Gateway,
    "Gateway",
    "gateways",
    "v1",
    ["v1beta1"],
    ["gtw"],
    gateway::validate
);
gateway_api_kind!(
    HttpRoute,
    "HTTPRoute",
    "httproutes",
    "v1",
    ["v1beta1"],
    [],
    httproute::validate
);
gateway_api_kind!(
    GrpcRoute,
    "GRPCRoute",
    "grpcroutes",
    "v1",
    [],
    [],
    grpcroute::validate
);
gateway_api_kind!(
    ReferenceGrant,
    "ReferenceGrant",
    "referencegrants",
    "v1beta1",
    ["v1"],
    ["refgrant"],
    reference_grant::validate
);
gateway_api_kind!(
    BackendTlsPolicy,
    "BackendTLSPolicy",
    "backendtlspolicies",
    "v1",
    ["v1alpha3"],
    ["btlspolicy"],
    backend_tls_policy::validate
);
gateway_api_kind!(
    TlsRoute,
    "TLSRoute",
    "tlsroutes",
    "v1",
    ["v1alpha2", "v1alpha3"],
    [],
    tls_tcp::validate_tls,
    versioned: [tls_tcp::V1ALPHA2] => tls_tcp::validate_tls_at,
    schema_at: tls_tcp::tls_schema_at
);
gateway_api_kind!(
    TcpRoute,
    "TCPRoute",
    "tcproutes",
    "v1",
    ["v1alpha2"],
    [],
    tls_tcp::validate_tcp,
    versioned: [tls_tcp::V1ALPHA2] => tls_tcp::validate_tcp_at,
    schema_at: tls_tcp::tcp_schema_at
);

/// Registers the eight Gateway API kinds with `registry`.
pub fn register(registry: &KindRegistry) -> Result<(), StoreError> {
    registry.register::<GatewayClass>()?;
    registry.register::<Gateway>()?;
    registry.register::<HttpRoute>()?;
    registry.register::<GrpcRoute>()?;
    registry.register::<ReferenceGrant>()?;
    registry.register::<BackendTlsPolicy>()?;
    registry.register::<TlsRoute>()?;
    registry.register::<TcpRoute>()
}

/// A new registry holding only the Gateway API kinds.
pub fn registry() -> KindRegistry {
    let registry = KindRegistry::new();
    register(&registry).expect("a new registry has none of the Gateway API kinds");
    registry
}
