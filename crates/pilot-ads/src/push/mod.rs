//! The push pipeline and what it publishes.
//!
//! - `pipeline.rs`: Controller and registry events are debounced (a quiet
//!   period and a maximum delay; a change after a quiet period is pushed
//!   at once, those after it are debounced), then one shared snapshot
//!   (`snapshot.rs`) is published. Nothing is published before the
//!   Controller and the registry have synced, so a restarted server never
//!   pushes empty configuration or endpoints.
//! - `inputs.rs`: the routing objects a push is built from, compiled into
//!   the rules generation reads, less the objects a proxy rejected
//!   (`feedback/rejections.rs`) for the proxies that rejected them.
//! - `generation_cache.rs`: what a push generates, once per class of proxy
//!   (`proxy_class.rs`), reusing the previous push's where only endpoints
//!   changed; `virtual_hosts.rs`: route configurations assembled from
//!   virtual hosts shared between classes and pushes; `scopes.rs`: each
//!   proxy's scope (Sidecar, `exportTo`), part of its class, and the
//!   scoped classes a push keeps because its changes touched none of
//!   their hosts.
//! - `certificates.rs`: which server certificates a push's proxies can
//!   be sent over SDS; an edge server whose certificate does not come is
//!   left out of its proxies' listeners until it does.
//! - `proxy_config.rs` and `encoded_type.rs`: a proxy's configuration,
//!   encoded once per type for every stream that is sent it.
//! - `own_instances.rs`: the proxies whose own instances a batch of
//!   endpoint changes moved (the rest keep their class).
//! - `parked.rs`: the streams holding a scoped class's configuration, by
//!   class, so that a push wakes only those whose class it does not keep.
//! - `timings.rs`: where pushes' time goes (debounce, build, queue, per
//!   type, convergence), as Istio's push histograms.
//! - `diffs.rs` and `name_sets.rs`: what changed between two pushes'
//!   encodings, and subscriptions' name sets, each worked out once for
//!   every stream.

pub(crate) mod ambient;
mod certificates;
mod diffs;
mod edge_hosts;
mod encoded_type;
mod generation_cache;
mod inputs;
mod name_sets;
mod own_instances;
mod parked;
pub(crate) mod pipeline;
mod proxy_class;
mod proxy_config;
mod recompile;
mod scopes;
mod snapshot;
mod subscription;
mod timings;
mod virtual_hosts;

pub(crate) use diffs::Diffs;
pub(crate) use encoded_type::EncodedType;
pub(crate) use inputs::{Inputs, LeftOut, ObjectVersion, PushObjects};
pub(crate) use name_sets::NameSets;
pub(crate) use parked::{Parking, Ticket};
pub(crate) use proxy_config::ProxyConfig;
pub(crate) use scopes::{proxy_namespace, workload_labels};
pub(crate) use snapshot::{MeshSnapshot, kept};
pub use snapshot::{PUSHED_KINDS, PushInfo};
pub use subscription::PushSubscription;
pub(crate) use timings::Timings;
pub use timings::{DurationHistogram, PUSH_BUCKETS, PushTimings};
