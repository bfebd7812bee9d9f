//! The memory store under concurrent writers: optimistic concurrency loses
//! no update, and the watch sees every write once, in revision order.

use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{ConfigKey, ConfigStore, ConfigWatch, StoreError, WatchEvent};
use pilot_store::testing::{mock, registry};
use pilot_store_memory::MemoryConfigStore;

const WRITERS: usize = 8;
const INCREMENTS: usize = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_read_modify_write_loses_nothing() {
    let store = MemoryConfigStore::new(registry());
    store.create(mock("default", "counter", "0")).await.unwrap();
    let start = store.revision();
    let mut watch = store.watch("MockConfig", start).await.unwrap();
    let key = ConfigKey::new("MockConfig", "default", "counter");

    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let store = store.clone();
        let key = key.clone();
        writers.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for _ in 0..INCREMENTS {
                loop {
                    let current = store.get(&key).await.unwrap().unwrap();
                    let value: u64 = current.spec["key"].as_str().unwrap().parse().unwrap();
                    let mut next = (*current).clone();
                    next.spec["key"] = (value + 1).to_string().into();
                    match store.update(next).await {
                        Ok(_) => break,
                        Err(StoreError::Conflict { .. }) => conflicts += 1,
                        Err(other) => panic!("{other}"),
                    }
                    tokio::task::yield_now().await;
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for writer in writers {
        conflicts += writer.await.unwrap();
    }
    let total = WRITERS * INCREMENTS;
    let last = store.get(&key).await.unwrap().unwrap();
    assert_eq!(
        last.spec["key"],
        total.to_string(),
        "no increment lost ({conflicts} conflicts retried)"
    );

    let mut revision = start;
    let mut values = Vec::new();
    while values.len() < total {
        match watch.next().await.unwrap().unwrap() {
            WatchEvent::Put { revision: r, config } => {
                assert!(r > revision, "revisions increase");
                revision = r;
                values.push(config.spec["key"].as_str().unwrap().parse::<usize>().unwrap());
            }
            WatchEvent::Progress { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        values,
        (1..=total).collect::<Vec<_>>(),
        "every write seen once, in order"
    );
}

#[tokio::test]
async fn compaction_makes_old_revisions_unwatchable_and_current_ones_fine() {
    let store = Arc::new(MemoryConfigStore::with_history(registry(), 1000));
    for i in 0..5 {
        store
            .create(mock("default", &format!("n{i}"), "v"))
            .await
            .unwrap();
    }
    store.compact(3);
    assert_eq!(
        store.watch("MockConfig", 2).await.err(),
        Some(StoreError::Compacted {
            requested: 2,
            oldest: 3
        })
    );
    let mut watch = store.watch("MockConfig", 3).await.unwrap();
    let Some(Ok(WatchEvent::Put { revision, .. })) = watch.next().await else {
        panic!()
    };
    assert_eq!(revision, 4);
    assert!(matches!(
        store.watch("Nope", 3).await.err(),
        Some(StoreError::UnknownKind { .. })
    ));
}
