//! Controller subscribers: lag is signalled, never silent; handlers run in
//! registration order; dropping the Controller stops its tasks; a
//! subscriber woken by an event finds the cache and its applied revision
//! already counting it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use pilot_model::{ConfigStore, DynConfig, Event};
use pilot_store::testing::{MockConfig, mock, registry};
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_memory::MemoryConfigStore;
use tokio::sync::mpsc;

const KIND: &str = "MockConfig";
const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_is_told_it_lagged_and_blocks_nobody() {
    let options = {
        let mut value = ControllerOptions::default();
        value.event_buffer = 8;
        value
    };
    let controller = Controller::with_options(Arc::new(MemoryConfigStore::new(registry())), options);
    let mut slow = controller.subscribe(KIND).unwrap();
    let mut fast = controller.subscribe(KIND).unwrap();
    controller.run();
    controller.wait_synced().await;

    let (seen_tx, mut seen_rx) = mpsc::channel(64);
    let reader = tokio::spawn(async move {
        while let Some(n) = fast.next().await {
            if seen_tx.send(n).await.is_err() {
                return;
            }
        }
    });
    // Write in batches smaller than the buffer, waiting for the fast reader
    // after each, so that only the slow one can fall behind.
    let mut fast_seen = Vec::new();
    for batch in 0..10 {
        for i in 0..4 {
            controller
                .create(mock("default", &format!("o{}", batch * 4 + i), "v"))
                .await
                .unwrap();
        }
        for _ in 0..4 {
            let n = tokio::time::timeout(WAIT, seen_rx.recv()).await.unwrap().unwrap();
            let Notification::Event(Event::Added(config)) = n else {
                panic!("fast reader got {n:?}")
            };
            fast_seen.push(config.meta.name.clone());
        }
    }
    let expected: Vec<String> = (0..40).map(|i| format!("o{i}")).collect();
    assert_eq!(fast_seen, expected, "the fast reader saw everything in order");

    let first = tokio::time::timeout(WAIT, slow.next()).await.unwrap().unwrap();
    let Notification::Lagged { missed } = first else {
        panic!("slow reader got {first:?}")
    };
    assert_eq!(missed, 32, "40 events through a buffer of 8");
    // After the signal the slow reader continues with what is retained, and
    // can resync from the cache.
    let next = tokio::time::timeout(WAIT, slow.next()).await.unwrap().unwrap();
    let Notification::Event(Event::Added(config)) = next else {
        panic!("{next:?}")
    };
    assert_eq!(config.meta.name, "o32");
    assert_eq!(controller.list_cached(KIND, None).unwrap().len(), 40);
    reader.abort();
}

/// The push reads the cache and the applied revision the moment an event
/// wakes it, on another thread, and records the push as built from that
/// revision: an event sent before the revision moved would make a push
/// holding an object say it was built from the revision before it (its
/// status then never counts the proxies that have it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_woken_by_an_event_finds_it_in_the_cache_and_the_applied_revision() {
    let backend = Arc::new(MemoryConfigStore::new(registry()));
    let controller = Arc::new(Controller::new(Arc::clone(&backend) as _));
    let mut events = controller.subscribe(KIND).unwrap();
    controller.run();
    controller.wait_synced().await;

    const WRITES: usize = 500;
    let reader = {
        let controller = Arc::clone(&controller);
        tokio::spawn(async move {
            let mut behind = Vec::new();
            for _ in 0..WRITES {
                let Some(Notification::Event(event)) = events.next().await else {
                    panic!("the subscription ended or lagged")
                };
                let object = event.object();
                let revision: u64 = object.meta.resource_version.as_deref().unwrap().parse().unwrap();
                let applied = controller.applied_revision(KIND).unwrap();
                let cached = controller.get_cached(&object.key()).unwrap();
                if applied < revision
                    || cached.map(|c| c.meta.resource_version.clone())
                        != Some(object.meta.resource_version.clone())
                {
                    behind.push((object.meta.name.clone(), revision, applied));
                }
            }
            behind
        })
    };
    // Written around the Controller, so that no write waits for the cache.
    for i in 0..WRITES {
        backend
            .create(mock("default", &format!("o{i}"), "v"))
            .await
            .unwrap();
    }
    let behind = tokio::time::timeout(WAIT, reader).await.unwrap().unwrap();
    assert!(
        behind.is_empty(),
        "events seen before the cache counted them: {behind:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_run_in_registration_order() {
    let controller = Controller::new(Arc::new(MemoryConfigStore::new(registry())));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, mut done_rx) = mpsc::channel(16);
    for handler in ["first", "second", "third"] {
        let log = Arc::clone(&log);
        let done = done_tx.clone();
        controller
            .add_handler(KIND, move |n: Notification<Arc<DynConfig>>| {
                let log = Arc::clone(&log);
                let done = done.clone();
                async move {
                    if let Notification::Event(event) = n {
                        // Yield so a handler that did not wait for the previous
                        // one would interleave.
                        tokio::task::yield_now().await;
                        log.lock()
                            .unwrap()
                            .push(format!("{handler}:{}", event.object().meta.name));
                        if handler == "third" {
                            let _ = done.send(()).await;
                        }
                    }
                }
            })
            .unwrap();
    }
    controller.run();
    controller.wait_synced().await;
    for name in ["a", "b"] {
        controller.create(mock("default", name, "v")).await.unwrap();
    }
    for _ in 0..2 {
        tokio::time::timeout(WAIT, done_rx.recv()).await.unwrap().unwrap();
    }
    assert_eq!(
        *log.lock().unwrap(),
        ["first:a", "second:a", "third:a", "first:b", "second:b", "third:b"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_subscribers_get_typed_objects() {
    let controller = Controller::new(Arc::new(MemoryConfigStore::new(registry())));
    let mut typed = controller.subscribe_typed::<MockConfig>().unwrap();
    controller.run();
    controller.wait_synced().await;
    controller.create(mock("default", "t", "typed")).await.unwrap();
    let n = tokio::time::timeout(WAIT, typed.next()).await.unwrap().unwrap();
    let Notification::Event(Event::Added(config)) = n else {
        panic!("{n:?}")
    };
    assert_eq!(config.spec.key, "typed");
    assert_eq!(config.meta.name, "t");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_controller_stops_its_tasks() {
    let store = MemoryConfigStore::new(registry());
    let controller = Controller::new(Arc::new(store.clone()));
    let mut events = controller.subscribe_all();
    controller.run();
    controller.wait_synced().await;
    drop(controller);
    // The event channel closes only when every task holding it is gone.
    let end = tokio::time::timeout(WAIT, events.next())
        .await
        .expect("stream ends in time");
    assert!(end.is_none(), "got {end:?}");
    // The backend is unaffected and still usable.
    store.create(mock("default", "after", "v")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_not_cached_are_served_by_the_backend() {
    let store = MemoryConfigStore::new(registry());
    let options = {
        let mut value = ControllerOptions::default();
        value.kinds = Some(vec!["MockOther".to_string()]);
        value
    };
    let controller = Controller::with_options(Arc::new(store.clone()), options);
    controller.run();
    controller.wait_synced().await;
    store.create(mock("default", "m", "v")).await.unwrap();
    assert_eq!(controller.list(KIND, None).await.unwrap().len(), 1);
    assert!(matches!(
        controller.list_cached(KIND, None),
        Err(pilot_model::StoreError::NotWatched { .. })
    ));
    assert_eq!(controller.kinds(), ["MockOther".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_does_not_stop_the_others() {
    let controller = Controller::new(Arc::new(MemoryConfigStore::new(registry())));
    controller
        .add_handler(KIND, |n: Notification<Arc<DynConfig>>| async move {
            if let Notification::Event(event) = n
                && event.object().meta.name == "boom"
            {
                panic!("handler bug");
            }
        })
        .unwrap();
    let (tx, mut rx) = mpsc::channel(16);
    controller
        .add_handler(KIND, move |n: Notification<Arc<DynConfig>>| {
            let tx = tx.clone();
            async move {
                if let Notification::Event(event) = n {
                    let _ = tx.send(event.object().meta.name.clone()).await;
                }
            }
        })
        .unwrap();
    controller.run();
    controller.wait_synced().await;
    for name in ["boom", "after"] {
        controller.create(mock("default", name, "v")).await.unwrap();
    }
    for expected in ["boom", "after"] {
        let got = tokio::time::timeout(WAIT, rx.recv()).await.unwrap().unwrap();
        assert_eq!(got, expected);
    }
}
