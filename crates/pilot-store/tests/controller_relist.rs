//! The Controller across watch gaps: it resumes when history allows and
//! relists when it does not, emitting exactly the changes the gap hid.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use pilot_model::{ConfigStore, DynConfig};
use pilot_store::testing::{assert_cache_equals_backend, mock, registry};
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_memory::MemoryConfigStore;
use pilot_test_support::FlakyStore as Flaky;

const KIND: &str = "MockConfig";

fn options() -> ControllerOptions {
    {
        let mut value = ControllerOptions::default();
        value.retry_min = Duration::from_millis(5);
        value.retry_max = Duration::from_millis(20);
        value
    }
}

async fn next(events: &mut BoxStream<'static, Notification<Arc<DynConfig>>>) -> (char, String) {
    pilot_store::testing::next_change(events, Duration::from_secs(10)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_after_compaction_emits_what_the_gap_hid() {
    let store = MemoryConfigStore::with_history(registry(), 4);
    let flaky = Flaky::new(store.clone());
    let controller = Controller::with_options(Arc::new(flaky.clone()), options());
    let mut events = controller.subscribe(KIND).unwrap();
    controller.run();
    controller.wait_synced().await;

    let mut versions = Vec::new();
    for name in ["a", "b", "c"] {
        versions.push(store.create(mock("default", name, "1")).await.unwrap());
    }
    for name in ["a", "b", "c"] {
        assert_eq!(next(&mut events).await, ('+', name.to_string()));
    }

    flaky.disconnect();
    store.delete(&versions[0].key(), None).await.unwrap();
    let mut b = (*versions[1]).clone();
    b.spec["key"] = "2".into();
    store.update(b).await.unwrap();
    store.create(mock("default", "d", "1")).await.unwrap();
    store.compact(store.revision());
    flaky.reconnect();

    let mut seen = BTreeSet::new();
    for _ in 0..3 {
        seen.insert(next(&mut events).await);
    }
    let expected: BTreeSet<(char, String)> = [('-', "a"), ('~', "b"), ('+', "d")]
        .into_iter()
        .map(|(op, n)| (op, n.to_string()))
        .collect();
    assert_eq!(seen, expected);
    assert_cache_equals_backend(&controller, &store, KIND).await;

    // And the watch goes on after the relist.
    store.create(mock("default", "e", "1")).await.unwrap();
    assert_eq!(next(&mut events).await, ('+', "e".to_string()));
    assert_cache_equals_backend(&controller, &store, KIND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_watch_resumes_without_losing_or_repeating_events() {
    let store = MemoryConfigStore::new(registry());
    let flaky = Flaky::new(store.clone());
    let controller = Controller::with_options(Arc::new(flaky.clone()), options());
    let mut events = controller.subscribe(KIND).unwrap();
    controller.run();
    controller.wait_synced().await;

    let a = store.create(mock("default", "a", "1")).await.unwrap();
    assert_eq!(next(&mut events).await, ('+', "a".to_string()));
    flaky.disconnect();
    let mut a2 = (*a).clone();
    a2.spec["key"] = "2".into();
    let a2 = store.update(a2).await.unwrap();
    let mut a3 = (*a2).clone();
    a3.spec["key"] = "3".into();
    store.update(a3).await.unwrap();
    store.delete(&a.key(), None).await.unwrap();
    store.create(mock("default", "a", "4")).await.unwrap();
    flaky.reconnect();

    // Every intermediate change arrives, in order, exactly once.
    for expected in [('~', "a"), ('~', "a"), ('-', "a"), ('+', "a")] {
        assert_eq!(next(&mut events).await, (expected.0, expected.1.to_string()));
    }
    store.create(mock("default", "z", "1")).await.unwrap();
    assert_eq!(next(&mut events).await, ('+', "z".to_string()));
    assert_cache_equals_backend(&controller, &store, KIND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_down_at_start_is_retried_and_sync_waits_for_it() {
    let store = MemoryConfigStore::new(registry());
    store.create(mock("default", "early", "1")).await.unwrap();
    let flaky = Flaky::new(store.clone());
    flaky.disconnect();
    let controller = Controller::with_options(Arc::new(flaky.clone()), options());
    controller.run();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !controller.has_synced(),
        "cannot have synced while the backend is down"
    );
    flaky.reconnect();
    tokio::time::timeout(Duration::from_secs(10), controller.wait_synced())
        .await
        .expect("synced after reconnect");
    assert_eq!(controller.list_cached(KIND, None).unwrap().len(), 1);
}
