//! Istio's routing kinds (group `config.istio.io`, version `v1alpha2`, JSON
//! field names as in Istio's v1alpha1 routing API): [`RouteRule`],
//! [`DestinationPolicy`], [`EgressRule`] and [`IngressRule`], with their
//! complete validation.
//!
//! Every rule reports every problem with its field path. Features the data
//! plane cannot honour (exponential delays, gRPC and HTTP/2 aborts,
//! header overrides, layer-4 faults, UDP matches, custom policies, egress
//! proxies) are rejected as "not supported", never silently ignored.
//!
//! ```
//! use pilot_api::istio;
//! let registry = istio::registry();
//! assert_eq!(registry.kinds(), ["DestinationPolicy", "EgressRule", "IngressRule", "RouteRule"]);
//! ```

mod common;
mod destination_policy;
mod egress_rule;
mod ingress_rule;
mod route_rule;

pub use common::{IstioService, L4MatchAttributes, MatchCondition, MatchRequest, StringMatch};
pub use destination_policy::{
    CircuitBreaker, DestinationPolicy, LoadBalancing, SimpleCircuitBreakerPolicy, SimpleLbPolicy,
};
pub use egress_rule::{CIDR_PROTOCOLS, EGRESS_PROTOCOLS, EgressPort, EgressRule};
pub use ingress_rule::{DEFAULT_PORT, DEFAULT_TLS_PORT, IngressRule};
pub use route_rule::{
    Abort, CorsPolicy, Delay, DestinationWeight, HTTP_METHODS, HttpFaultInjection, HttpRedirect, HttpRetry,
    HttpRewrite, HttpTimeout, RouteRule, SimpleRetryPolicy, SimpleTimeoutPolicy,
};

use pilot_model::{KindRegistry, StoreError};

/// The API group of the routing kinds.
pub const GROUP: &str = "config.istio.io";
/// The API version of the routing kinds.
pub const VERSION: &str = "v1alpha2";

/// Registers the four routing kinds with `registry`.
pub fn register(registry: &KindRegistry) -> Result<(), StoreError> {
    registry.register::<RouteRule>()?;
    registry.register::<DestinationPolicy>()?;
    registry.register::<EgressRule>()?;
    registry.register::<IngressRule>()
}

/// A new registry holding the routing kinds: pilot's default registry.
pub fn registry() -> KindRegistry {
    let registry = KindRegistry::new();
    register(&registry).expect("a new registry has none of the routing kinds");
    registry
}

#[cfg(test)]
mod envoy_limits_tests;
#[cfg(test)]
mod proto_name_tests;
#[cfg(test)]
mod tests;
