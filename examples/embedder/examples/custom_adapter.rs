//! Implement `ConfigStore` for a backend of your own, a directory of JSON
//! files, and run pilot's conformance suite against it.
//!
//!     cargo run -p pilot-embedder-example --example custom_adapter

use std::sync::Arc;

use pilot_embedder_example::FileConfigStore;
use pilot_model::{ConfigWatch, KindRegistry};
use pilot_store::testing;

fn main() {
    // Every test gets a fresh, empty directory of its own, removed with the store.
    let factory = |registry: KindRegistry| async move {
        Arc::new(FileConfigStore::temporary(registry).expect("a file store")) as Arc<dyn ConfigWatch>
    };

    macro_rules! run {
        ($($name:ident),*) => {$(
            testing::block_on(testing::$name(&factory));
            println!("ok   {}", stringify!($name));
        )*};
    }
    run!(
        map_create_get,
        map_duplicate_create,
        map_invalid_not_stored,
        map_update_versions,
        map_delete,
        map_list,
        map_delete_all,
        map_same_name_two_groups,
        watch_resumes_after_revision,
        cache_initial_list,
        cache_events_in_order,
        cache_freshness,
        cache_sync_backend_writes
    );
    testing::model_based(&factory);
    println!("ok   model_based ({} random sequences)", testing::MODEL_CASES);
    println!("the file store passes pilot's conformance suite");
}
