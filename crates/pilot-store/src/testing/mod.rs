//! The conformance suite every backend runs (feature `testing`).
//!
//! ```toml
//! [dev-dependencies]
//! pilot-store = { version = "0.1", features = ["testing"] }
//! ```
//!
//! Nothing else is needed in the crate under test: the macros name
//! everything through `$crate`, run each test on their own Tokio runtime
//! ([`block_on`]), and what an implementation of the suites' traits needs
//! is re-exported here ([`async_trait`](macro@async_trait) for
//! [`RegistrySource`], [`BoxFuture`] for hand-written factories,
//! [`BoxStream`] for a hand-written `ServiceDiscovery::subscribe`).
//!
//! A backend provides a factory: an async function from a [`KindRegistry`]
//! to a fresh, empty store. [`conformance_suite!`](crate::conformance_suite)
//! then expands to one test per property:
//!
//! ```
//! use std::sync::Arc;
//! use pilot_model::{ConfigWatch, KindRegistry};
//! use pilot_store_memory::MemoryConfigStore;
//!
//! pilot_store::conformance_suite!(|registry: KindRegistry| async move {
//!     Arc::new(MemoryConfigStore::new(registry)) as Arc<dyn ConfigWatch>
//! });
//! # fn main() {}
//! ```
//!
//! The rules the suites enforce are the traits' documented contracts:
//! [`ConfigStore`](pilot_model::ConfigStore) and
//! [`ConfigWatch`] for stores,
//! [`ServiceDiscovery`](pilot_model::ServiceDiscovery) for registries,
//! [`Membership`](pilot_model::Membership) for replicas. A failed check
//! names the rule it enforces, what the rule expects and what the
//! implementation answered, e.g. `list of an unregistered kind must fail
//! with UnknownKind: expected Err(StoreError::UnknownKind { .. }), got
//! Ok([])`.
//!
//! The properties, each a public function here:
//! - the map invariants (`map_*`): create and get back, duplicate create,
//!   invalid input stores nothing, optimistic concurrency on update and
//!   delete, unknown kinds, names and namespaces, listing per namespace and
//!   across all, delete everything, two groups' kinds of one name side by
//!   side;
//! - the watch contract (`watch_*`): a snapshot's revision and a watch that
//!   resumes strictly after it;
//! - the Controller over the backend (`cache_*`): initial list and sync,
//!   event order and counts, handlers reading their own writes, writes made
//!   straight to the backend reaching the cache;
//! - distribution status (`status_*`, [`status_conformance_suite!`](crate::status_conformance_suite)
//!   for backends that keep status): read back beside the object, refused
//!   for a version the object no longer has, never a conflict for a user's
//!   update, never an event for the Controller's subscribers;
//! - [`model_based`]: random sequences of operations compared with a plain
//!   reference model (proptest-state-machine).
//!
//! Replicas sharing a store have theirs, [`membership`]'s
//! [`membership_conformance_suite!`](crate::membership_conformance_suite):
//! records seen by every replica, one elected writer, expiry and resign.
//!
//! Service registries have their own suite, [`mod@registry`]'s
//! [`registry_conformance_suite!`](crate::registry_conformance_suite):
//! sync, minimal diffs, resync and deletes in a gap.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pilot_model::{ConfigWatch, KindRegistry};

/// Re-exported so that a [`RegistrySource`] (an async trait) is written
/// without depending on `async-trait`:
/// `#[pilot_store::testing::async_trait] impl RegistrySource for Mine { .. }`.
pub use async_trait::async_trait;
/// The future a hand-written [`StoreFactory`], [`RegistryFactory`] or
/// [`MembershipFactory`] returns (`futures::future::BoxFuture`).
pub use futures::future::BoxFuture;
/// The stream `ServiceDiscovery::subscribe` returns
/// (`futures::stream::BoxStream`).
pub use futures::stream::BoxStream;

mod cache;
mod check;
mod events;
mod kinds;
mod map;
pub mod membership;
mod model;
pub mod registry;
mod status;
mod watch;

pub use cache::{
    assert_cache_equals_backend, cache_events_in_order, cache_freshness, cache_initial_list,
    cache_reads_its_own_writes, cache_sync_backend_writes,
};
pub use events::next_change;
pub use kinds::{
    MockConfig, MockOther, MockPair, MockSealed, OtherMockConfig, mock, registry, registry_with_other_group,
    registry_with_sealed,
};
pub use map::{
    map_create_get, map_delete, map_delete_all, map_duplicate_create, map_invalid_not_stored, map_list,
    map_same_name_two_groups, map_update_checks_transition_rules, map_update_versions,
};
pub use membership::{
    EXPIRY_SLACK, MEMBERSHIP_TTL, MembershipFactory, membership_dead_replica_expires,
    membership_lone_campaigner_wins, membership_one_writer_at_a_time, membership_publish_read_back,
    membership_replicas_see_each_other, membership_resign_frees_the_election, membership_resign_withdraws,
    replica_record,
};
pub use model::{MODEL_CASES, model_based};
pub use registry::{
    RegistryFactory, RegistrySource, SourceInstance, SourceService, desired_state, registry_delete_in_gap,
    registry_diff, registry_resync, registry_sync,
};
pub use status::{status_is_not_a_change, status_never_fights_a_user_write, status_write_read_back};
pub use watch::watch_resumes_after_revision;

/// Makes a fresh, empty store for the kinds in a registry.
pub trait StoreFactory: Send + Sync {
    /// A new store; every call returns one that shares nothing with earlier
    /// ones.
    fn make(&self, registry: KindRegistry) -> BoxFuture<'static, Arc<dyn ConfigWatch>>;
}

impl<F, Fut> StoreFactory for F
where
    F: Fn(KindRegistry) -> Fut + Send + Sync,
    Fut: Future<Output = Arc<dyn ConfigWatch>> + Send + 'static,
{
    fn make(&self, registry: KindRegistry) -> BoxFuture<'static, Arc<dyn ConfigWatch>> {
        Box::pin(self(registry))
    }
}

/// How long a conformance test waits for an event before failing.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs a conformance test on a fresh multi-threaded runtime.
pub fn block_on<F: Future<Output = ()>>(test: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime for the conformance suite")
        .block_on(test);
}

/// Expands to one `#[test]` per conformance property, each on a fresh store
/// from `$factory` (an async `Fn(KindRegistry) -> Arc<dyn ConfigWatch>`).
#[macro_export]
macro_rules! conformance_suite {
    ($factory:expr) => {
        $crate::conformance_suite!(@each $factory;
            map_create_get, map_duplicate_create, map_invalid_not_stored, map_update_versions,
            map_update_checks_transition_rules,
            map_delete, map_list, map_delete_all, map_same_name_two_groups, watch_resumes_after_revision,
            cache_initial_list, cache_events_in_order, cache_freshness, cache_sync_backend_writes,
            cache_reads_its_own_writes);

        #[test]
        fn model_based() {
            $crate::testing::model_based(&$factory);
        }
    };
    (@each $factory:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                $crate::testing::block_on($crate::testing::$name(&$factory));
            }
        )*
    };
}

/// Expands to one `#[test]` per distribution-status property (for
/// backends that implement `ConfigStore::update_status`).
#[macro_export]
macro_rules! status_conformance_suite {
    ($factory:expr) => {
        $crate::conformance_suite!(@each $factory;
            status_write_read_back, status_never_fights_a_user_write, status_is_not_a_change);
    };
}
