//! A client reads its writes through the Controller even when the cache
//! lags: a write whose event has not arrived within the write's wait
//! (`write_sync_timeout`) is read from the backend until the cache shows
//! it, never as the version before it.

use std::sync::Arc;
use std::time::Duration;

use pilot_model::ConfigStore;
use pilot_store::testing::{mock, registry};
use pilot_store::{Controller, ControllerOptions};
use pilot_store_memory::MemoryConfigStore;
use pilot_test_support::{FlakyStore as Flaky, PATIENCE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_cache_has_not_shown_is_read_from_the_backend() {
    let store = MemoryConfigStore::new(registry());
    let flaky = Flaky::new(store.clone());
    let mut options = ControllerOptions::default();
    options.write_sync_timeout = Duration::from_millis(50);
    options.retry_min = Duration::from_millis(5);
    options.retry_max = Duration::from_millis(20);
    let controller = Controller::with_options(Arc::new(flaky.clone()), options);
    controller.run();
    controller.wait_synced().await;
    let first = controller.create(mock("default", "a", "1")).await.unwrap();
    let key = first.key();
    assert_eq!(controller.get(&key).await.unwrap().unwrap().spec["key"], "1");

    // The watch stops: the next write's event does not reach the cache.
    flaky.disconnect();
    let mut changed = (*first).clone();
    changed.spec["key"] = "2".into();
    let second = controller.update(changed).await.unwrap();
    assert_eq!(
        controller.get_cached(&key).unwrap().unwrap().spec["key"],
        "1",
        "the cache is behind, as this test means it to be"
    );
    let read = controller.get(&key).await.unwrap().unwrap();
    assert_eq!(read.spec["key"], "2", "a read after a write shows the write");
    assert_eq!(read.meta.resource_version, second.meta.resource_version);

    // Once the cache catches up, it shows the write (and answers reads).
    flaky.reconnect();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while controller.get_cached(&key).unwrap().unwrap().spec["key"] != "2" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never caught up"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(controller.get(&key).await.unwrap().unwrap().spec["key"], "2");
}
