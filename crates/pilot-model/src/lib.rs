//! pilot's vocabulary: configuration objects keyed by kind, namespace and
//! name; kinds with schemas and validation; the [`ConfigStore`] and
//! [`ConfigWatch`] contracts every backend implements; and the service model
//! with the [`ServiceDiscovery`] contract every platform adapter implements;
//! the status every object carries and the replica records the stores keep;
//! and YAML/JSON [`document`]s.
//!
//! This crate knows no backend, no transport and no API kind: Istio's kinds
//! are in pilot-api, the routing model they compile into in pilot-routing,
//! the contracts between a proxy and pilot-discovery in pilot-proxy-api.
//!
//! ```
//! use pilot_model::{ConfigMeta, DynConfig, KindRegistry, KindSchema, StoreError};
//!
//! // A kind known only at run time, with its own validation.
//! let registry = KindRegistry::new();
//! registry
//!     .register_schema(KindSchema::new("Quota", "quotas", "example.com", "v1", |spec, errors| {
//!         if spec.get("limit").and_then(|v| v.as_u64()).is_none() {
//!             errors.push("spec.limit", "must be a non-negative integer");
//!         }
//!     }))
//!     .unwrap();
//!
//! let bad = DynConfig { meta: ConfigMeta::new("Quota", "default", "q"), spec: serde_json::json!({}) };
//! let err = registry.prepare(bad).unwrap_err();
//! assert!(matches!(err, StoreError::Invalid { .. }));
//! assert_eq!(err.to_string(), "Quota default/q is invalid: spec.limit: must be a non-negative integer");
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod conditions;
mod config;
mod credentials;
mod discovery;
mod distribution;
mod error;
mod event;
mod key;
mod kind;
mod membership;
mod meta;
mod proto_names;
mod registry_snapshot;
mod service;
mod store;
mod validation;
mod workload;

pub mod document;

/// The attribute [`ConfigStore`], [`ConfigWatch`] and [`ServiceDiscovery`]
/// are declared with: a store or registry of your own implements them under
/// `#[pilot_model::async_trait]`, with no async-trait dependency of its own.
pub use async_trait::async_trait;
pub use conditions::{
    Condition, GatewayApiStatus, GatewayStatusAddress, ListenerStatus, MessageType, PolicyAncestorStatus,
    RECONCILED, RouteGroupKind, RouteParentStatus, ValidationMessage, same_conditions,
};
pub use config::{Config, DynConfig, now_seconds, push_key};
pub use credentials::{
    CA_BUNDLE_PREFIX, CA_SUFFIX, CREDENTIAL_PREFIX, CaBundleName, CredentialName, CredentialSource,
    TlsCredential,
};
pub use discovery::{AggregateDiscovery, RegistryAdapter, ServiceDiscovery, ServiceEvent};
pub use distribution::{
    ConfigStatus, DistributionIndex, KindRevisions, MAX_NACK_MESSAGE_LEN, MAX_NACK_MESSAGES, NackSummary,
    ProxyDistribution, ProxyNack, WithheldObject, distribution_status,
};
pub use error::{BackendError, StoreError, chain as error_chain};
pub use event::Event;
pub use key::ConfigKey;
pub use kind::{
    ConfigKind, KindRegistry, KindSchema, SpecNormalizer, SpecValidator, TransitionValidator, kind_name,
};
pub use membership::{
    ConnectedProxy, LocalMembership, Membership, ProcessReport, ReplicaRecord, TypeNack, TypeRecord,
};
pub use meta::{ConfigMeta, ManagedFieldsEntry, REVISION_LABEL, in_revision, revision_name};
pub use registry_snapshot::RegistrySnapshot;
pub use service::{
    DnsEndpoint, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, ServiceResolution,
};
pub use store::{ConfigStore, ConfigWatch, Revision, Snapshot, Undecodable, WatchEvent, WatchStream};
pub use validation::{FieldError, FieldErrors, dns1123_label, dns1123_subdomain, label_key, label_value};
pub use workload::{
    AMBIENT, DATAPLANE_MODE_LABEL, DEFAULT_CLUSTER_ID, Workload, WorkloadKind, uid as workload_uid,
};
