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
//! use pilot_model::istio;
//! let registry = istio::registry();
//! assert_eq!(registry.kinds(), ["DestinationPolicy", "EgressRule", "IngressRule", "RouteRule"]);
//! ```

mod common;
mod destination_policy;
mod duration;
mod egress_rule;
mod ingress_rule;
mod re2;
mod route_rule;

pub use common::{
    IstioService, L4MatchAttributes, MAX_HEADER_BYTES, MatchCondition, MatchRequest, StringMatch,
    check_percent, cidr, header_name, header_value, uri_text, wildcard_host,
};
pub use destination_policy::{
    CircuitBreaker, DestinationPolicy, LoadBalancing, SimpleCircuitBreakerPolicy, SimpleLbPolicy,
};
pub use duration::{Duration, ParseDurationError};
pub use egress_rule::{CIDR_PROTOCOLS, EGRESS_PROTOCOLS, EgressPort, EgressRule};
pub use ingress_rule::{DEFAULT_PORT, DEFAULT_TLS_PORT, IngressRule};
pub use re2::{MAX_PROGRAM_SIZE, check_regex, regex_program_size};
pub use route_rule::{
    Abort, CorsPolicy, Delay, DestinationWeight, HTTP_METHODS, HttpFaultInjection, HttpRedirect, HttpRetry,
    HttpRewrite, HttpTimeout, RouteRule, SimpleRetryPolicy, SimpleTimeoutPolicy,
};

use crate::{FieldErrors, KindRegistry, StoreError};

/// The OpenAPI v3 schema of `T`, every subschema inlined (no `$ref`), as
/// Kubernetes CRDs need it.
#[cfg(feature = "schema")]
pub(crate) fn openapi_schema<T: schemars::JsonSchema>() -> serde_json::Value {
    let mut settings = schemars::generate::SchemaSettings::openapi3();
    settings.inline_subschemas = true;
    let mut schema = settings.into_generator().into_root_schema_for::<T>().to_value();
    if let Some(map) = schema.as_object_mut() {
        for key in ["$schema", "title", "components", "$defs", "definitions"] {
            map.remove(key);
        }
    }
    schema
}

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

/// Records that a field asks for something the data plane cannot do.
pub(crate) fn not_supported(errors: &mut FieldErrors, path: &str, what: &str) {
    errors.push(
        path,
        format!("{what} is not supported by the data plane; remove this field"),
    );
}

#[cfg(test)]
mod envoy_limits_tests;
#[cfg(test)]
mod proto_name_tests;
#[cfg(test)]
mod tests;
