//! `DestinationPolicy`: load balancing and circuit breaking for a service
//! (or a version of it).

use serde::{Deserialize, Serialize};

use super::common::IstioService;
use super::{GROUP, VERSION};
use crate::primitives::{Duration, not_supported};
use pilot_model::{ConfigKind, FieldErrors};

/// Policies applied to traffic sent to a destination (optionally only from
/// a source).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DestinationPolicy {
    /// The service (or the version, by labels) the policy applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<IstioService>,
    /// Only for traffic from this service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<IstioService>,
    /// How requests are spread over instances.
    #[serde(alias = "load_balancing", default, skip_serializing_if = "Option::is_none")]
    pub load_balancing: Option<LoadBalancing>,
    /// When to stop sending to an overloaded or failing destination.
    #[serde(alias = "circuit_breaker", default, skip_serializing_if = "Option::is_none")]
    pub circuit_breaker: Option<CircuitBreaker>,
    /// A custom policy (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Value>,
}

/// A load-balancing policy.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancing {
    /// One of the built-in algorithms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<SimpleLbPolicy>,
    /// A custom algorithm (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Value>,
}

/// The built-in load-balancing algorithms.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SimpleLbPolicy {
    /// Each instance in turn.
    RoundRobin,
    /// The instance with the fewest active requests.
    LeastConn,
    /// A random instance.
    Random,
}

/// A circuit breaker.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreaker {
    /// The thresholds.
    #[serde(alias = "simple_cb", default, skip_serializing_if = "Option::is_none")]
    pub simple_cb: Option<SimpleCircuitBreakerPolicy>,
    /// A custom breaker (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Value>,
}

/// Circuit-breaker thresholds and outlier detection, all optional.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimpleCircuitBreakerPolicy {
    /// Maximum connections to the destination.
    #[serde(alias = "max_connections", default, skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<i32>,
    /// Maximum requests waiting for a connection.
    #[serde(
        alias = "http_max_pending_requests",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_max_pending_requests: Option<i32>,
    /// Maximum concurrent requests.
    #[serde(alias = "http_max_requests", default, skip_serializing_if = "Option::is_none")]
    pub http_max_requests: Option<i32>,
    /// How long an ejected instance stays out.
    #[serde(alias = "sleep_window", default, skip_serializing_if = "Option::is_none")]
    pub sleep_window: Option<Duration>,
    /// Consecutive 5xx errors before an instance is ejected.
    #[serde(
        alias = "http_consecutive_errors",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_consecutive_errors: Option<i32>,
    /// How often instances are checked for ejection.
    #[serde(
        alias = "http_detection_interval",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_detection_interval: Option<Duration>,
    /// Maximum requests per connection.
    #[serde(
        alias = "http_max_requests_per_connection",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_max_requests_per_connection: Option<i32>,
    /// Maximum percent of instances ejected at once (0 to 100).
    #[serde(
        alias = "http_max_ejection_percent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_max_ejection_percent: Option<i32>,
    /// Maximum concurrent retries.
    #[serde(alias = "http_max_retries", default, skip_serializing_if = "Option::is_none")]
    pub http_max_retries: Option<i32>,
}

impl ConfigKind for DestinationPolicy {
    const KIND: &'static str = "DestinationPolicy";
    const PLURAL: &'static str = "destinationpolicies";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        match &self.destination {
            Some(destination) => destination.validate_destination("spec.destination", errors),
            None => errors.push(
                "spec.destination",
                "a destination policy needs a destination service",
            ),
        }
        if let Some(source) = &self.source {
            source.validate("spec.source", errors);
        }
        if self.custom.is_some() {
            not_supported(errors, "spec.custom", "custom destination policies");
        }
        if let Some(lb) = &self.load_balancing {
            if lb.custom.is_some() {
                not_supported(errors, "spec.loadBalancing.custom", "custom load balancers");
            }
            if self.destination.as_ref().is_some_and(IstioService::is_wildcard) {
                errors.warn(
                    "spec.loadBalancing",
                    "ignored, as Istio 0.3 ignored it: a wildcard host is reached at the connection's original destination (Envoy's ORIGINAL_DST cluster), whose load balancing cannot be chosen",
                );
            }
            if lb.name.is_none() && lb.custom.is_none() {
                errors.push(
                    "spec.loadBalancing.name",
                    "give ROUND_ROBIN, LEAST_CONN or RANDOM",
                );
            }
        }
        if let Some(cb) = &self.circuit_breaker {
            if cb.custom.is_some() {
                not_supported(errors, "spec.circuitBreaker.custom", "custom circuit breakers");
            }
            if let Some(simple) = &cb.simple_cb {
                simple.validate("spec.circuitBreaker.simpleCb", errors);
            }
        }
    }
}

impl SimpleCircuitBreakerPolicy {
    fn validate(&self, path: &str, errors: &mut FieldErrors) {
        let counts = [
            ("maxConnections", self.max_connections),
            ("httpMaxPendingRequests", self.http_max_pending_requests),
            ("httpMaxRequests", self.http_max_requests),
            ("httpConsecutiveErrors", self.http_consecutive_errors),
            (
                "httpMaxRequestsPerConnection",
                self.http_max_requests_per_connection,
            ),
            ("httpMaxEjectionPercent", self.http_max_ejection_percent),
            ("httpMaxRetries", self.http_max_retries),
        ];
        for (field, value) in counts {
            if let Some(value) = value
                && value < 0
            {
                errors.push(
                    format!("{path}.{field}"),
                    format!("must be 0 or more, got {value}"),
                );
            }
        }
        if let Some(percent) = self.http_max_ejection_percent
            && percent > 100
        {
            errors.push(
                format!("{path}.httpMaxEjectionPercent"),
                format!("must be at most 100, got {percent}"),
            );
        }
        for (field, value) in [
            ("sleepWindow", self.sleep_window),
            ("httpDetectionInterval", self.http_detection_interval),
        ] {
            if let Some(d) = value {
                d.check_millis(&format!("{path}.{field}"), errors);
            }
        }
    }
}
