//! Istio's networking kinds of today (group `networking.istio.io`, stored
//! at version `v1`, also served at `v1beta1` and `v1alpha3` with the same
//! schema, as Istio's CRDs serve them): [`VirtualService`],
//! [`DestinationRule`], [`ServiceEntry`], [`Gateway`] and
//! [`WorkloadEntry`] and [`Sidecar`], with Istio's validation.
//!
//! JSON field names are those of Istio's protos in lowerCamel case; the
//! proto's snake_case names are accepted on input too, as protobuf's JSON
//! mapping accepts them, and never written.
//!
//! ```
//! use pilot_api::networking;
//! let registry = networking::registry();
//! assert_eq!(
//!     registry.kinds(),
//!     ["DestinationRule", "Gateway", "ServiceEntry", "Sidecar", "VirtualService", "WorkloadEntry"]
//! );
//! ```

mod checks;
mod common;
mod destination_rule;
mod export;
mod gateway;
mod service_entry;
mod sidecar;
mod traffic_policy;
mod validate_destination_rule;
mod validate_entries;
mod validate_sidecar;
mod validate_sidecar_socket;
mod validate_virtual_service;
mod virtual_service;
mod workload_entry;

pub use common::{
    Destination, HeaderOperations, Headers, LabelSelector, Percent, PortSelector, StringMatch,
    WorkloadSelector,
};
pub use destination_rule::{DestinationRule, Subset};
pub use export::{check_export_to_list, exported_to, is_public};
pub use gateway::{
    Gateway, GatewayPort, Server, ServerTlsMode, ServerTlsSettings, TlsCertificate, TlsProtocol,
};
pub use service_entry::{Location, Resolution, ServiceEntry, ServicePort};
pub use sidecar::{
    CaptureMode, EgressHost, EgressListener, IngressListener, NamespaceSelector, OutboundMode,
    OutboundTrafficPolicy, Sidecar, SidecarPort, host_matches, in_scope,
};
pub use traffic_policy::{
    ClientTlsMode, ClientTlsSettings, ConnectionKeepalive, ConnectionPoolSettings, ConsistentHashLb,
    CookieAttribute, H2UpgradePolicy, HttpCookie, HttpSettings, LoadBalancerSettings, LocalityDistribute,
    LocalityFailover, LocalityLbSetting, MagLev, OutlierDetection, PortTrafficPolicy, ProxyProtocol,
    ProxyProtocolVersion, RetryBudget, RingHash, SimpleLb, TcpKeepalive, TcpSettings, TrafficPolicy,
    TunnelSettings, Warmup, ZoneAwareLbSetting,
};
pub use validate_virtual_service::{RETRY_ON, hosts_overlap};
pub use virtual_service::{
    CorsPolicy, Delegate, FaultAbort, FaultDelay, HttpBody, HttpDirectResponse, HttpFaultInjection,
    HttpMatchRequest, HttpMirrorPolicy, HttpRedirect, HttpRetry, HttpRewrite, HttpRoute,
    HttpRouteDestination, L4MatchAttributes, RedirectPortSelection, RegexRewrite, RouteDestination, TcpRoute,
    TlsMatchAttributes, TlsRoute, UnmatchedPreflights, VirtualService,
};
pub use workload_entry::WorkloadEntry;

use pilot_model::{ConfigKind, FieldErrors, KindRegistry, StoreError};

/// The API group of the networking kinds.
pub const GROUP: &str = "networking.istio.io";
/// The storage version of the networking kinds.
pub const VERSION: &str = "v1";
/// Every version the networking kinds are served at, the storage version
/// first; all share one schema.
pub const VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3"];

macro_rules! networking_kind {
    ($ty:ty, $kind:literal, $plural:literal, $short:literal, $validate:path) => {
        networking_kind!($ty, $kind, $plural, $short, $validate, false);
    };
    ($ty:ty, $kind:literal, $plural:literal, $short:literal, $validate:path, $label_names:literal) => {
        impl ConfigKind for $ty {
            const KIND: &'static str = $kind;
            const PLURAL: &'static str = $plural;
            const GROUP: &'static str = GROUP;
            const VERSION: &'static str = VERSION;
            const SERVED_VERSIONS: &'static [&'static str] = VERSIONS;
            const SHORT_NAMES: &'static [&'static str] = &[$short];
            const NAME_IS_LABEL: bool = $label_names;

            #[cfg(feature = "schema")]
            fn openapi_schema() -> Option<serde_json::Value> {
                Some(crate::primitives::openapi_schema::<Self>())
            }

            fn validate(&self, errors: &mut FieldErrors) {
                $validate(self, errors)
            }
        }
    };
}

networking_kind!(
    VirtualService,
    "VirtualService",
    "virtualservices",
    "vs",
    validate_virtual_service
);
networking_kind!(
    DestinationRule,
    "DestinationRule",
    "destinationrules",
    "dr",
    validate_destination_rule
);
networking_kind!(
    ServiceEntry,
    "ServiceEntry",
    "serviceentries",
    "se",
    validate_service_entry
);
// A Gateway's name is a DNS-1123 label, as Istio's ValidateGateway
// requires: VirtualServices name gateways `name.namespace...` too.
networking_kind!(Gateway, "Gateway", "gateways", "gw", validate_gateway, true);
networking_kind!(
    WorkloadEntry,
    "WorkloadEntry",
    "workloadentries",
    "we",
    validate_workload_entry
);

// Istio's Sidecar CRD has no short name.
impl ConfigKind for Sidecar {
    const KIND: &'static str = "Sidecar";
    const PLURAL: &'static str = "sidecars";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;
    const SERVED_VERSIONS: &'static [&'static str] = VERSIONS;

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        validate_sidecar::sidecar(self, errors)
    }
}

fn validate_virtual_service(vs: &VirtualService, errors: &mut FieldErrors) {
    validate_virtual_service::validate(vs, errors);
}

fn validate_destination_rule(dr: &DestinationRule, errors: &mut FieldErrors) {
    validate_destination_rule::validate(dr, errors);
}

fn validate_service_entry(se: &ServiceEntry, errors: &mut FieldErrors) {
    validate_entries::service_entry(se, errors);
}

fn validate_gateway(gw: &Gateway, errors: &mut FieldErrors) {
    validate_entries::gateway(gw, errors);
}

fn validate_workload_entry(we: &WorkloadEntry, errors: &mut FieldErrors) {
    validate_entries::workload_entry(we, errors);
}

/// Registers the six networking kinds with `registry`.
pub fn register(registry: &KindRegistry) -> Result<(), StoreError> {
    registry.register::<VirtualService>()?;
    registry.register::<DestinationRule>()?;
    registry.register::<ServiceEntry>()?;
    registry.register::<Gateway>()?;
    registry.register::<WorkloadEntry>()?;
    registry.register::<Sidecar>()
}

/// A new registry holding only the networking kinds.
pub fn registry() -> KindRegistry {
    let registry = KindRegistry::new();
    register(&registry).expect("a new registry has none of the networking kinds");
    registry
}
