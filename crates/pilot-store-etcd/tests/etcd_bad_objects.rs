//! Keys written straight into etcd under pilot's prefix with bad bodies are
//! reported and skipped: never a crash, never a stuck watch.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use pilot_model::{ConfigKey, ConfigStore, Event, StoreError};
use pilot_store::testing::{mock, registry};
use pilot_store::{Controller, Notification, QuarantineReason};
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::EtcdServer;

const PREFIX: &str = "/pilot/config/test.pilot.io/MockConfig/default";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_counted_and_skipped() {
    let server = EtcdServer::start().unwrap();
    let store = EtcdConfigStore::connect(&EtcdOptions::new([server.endpoint()]), registry())
        .await
        .unwrap();
    let mut raw = store.client();
    store.create(mock("default", "good-1", "v")).await.unwrap();
    raw.put(format!("{PREFIX}/garbage"), "{not json", None)
        .await
        .unwrap();
    raw.put(
        format!("{PREFIX}/mismatch"),
        serde_json::to_vec(&mock("default", "other", "v")).unwrap(),
        None,
    )
    .await
    .unwrap();

    // Lists skip them and count them.
    let listed = store.list("MockConfig", None).await.unwrap();
    assert_eq!(
        listed.iter().map(|c| c.meta.name.as_str()).collect::<Vec<_>>(),
        ["good-1"]
    );
    assert_eq!(store.bad_objects(), 2);
    // A get of one names the key.
    let err = store
        .get(&ConfigKey::new("MockConfig", "default", "garbage"))
        .await
        .unwrap_err();
    let StoreError::Unavailable { reason, .. } = err else {
        panic!("{err}")
    };
    assert!(reason.contains(&format!("{PREFIX}/garbage")), "{reason}");

    // A Controller syncs past them, and its watch keeps going after a new
    // bad write.
    let controller = Controller::new(Arc::new(store.clone()));
    let mut events = controller.subscribe("MockConfig").unwrap();
    controller.run();
    controller.wait_synced().await;
    let first = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(first, Notification::Event(Event::Added(ref c)) if c.meta.name == "good-1"),
        "{first:?}"
    );
    raw.put(format!("{PREFIX}/garbage-2"), "[]", None).await.unwrap();
    store.create(mock("default", "good-2", "v")).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(next, Notification::Event(Event::Added(ref c)) if c.meta.name == "good-2"),
        "{next:?}"
    );
    assert_eq!(controller.list_cached("MockConfig", None).unwrap().len(), 2);
    assert!(store.bad_objects() >= 4);
    // The Controller holds each of them in quarantine, as not decodable.
    let held: Vec<(String, QuarantineReason)> = controller
        .quarantine()
        .list()
        .into_iter()
        .map(|q| (q.key.name, q.reason))
        .collect();
    assert_eq!(
        held,
        [
            ("garbage".to_string(), QuarantineReason::Undecodable),
            ("garbage-2".to_string(), QuarantineReason::Undecodable),
            ("mismatch".to_string(), QuarantineReason::Undecodable),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_object_overwritten_with_garbage_leaves_the_cache_until_fixed() {
    let server = EtcdServer::start().unwrap();
    let store = EtcdConfigStore::connect(&EtcdOptions::new([server.endpoint()]), registry())
        .await
        .unwrap();
    let mut raw = store.client();
    let good = store.create(mock("default", "good", "v")).await.unwrap();
    let controller = Controller::new(Arc::new(store.clone()));
    let mut events = controller.subscribe("MockConfig").unwrap();
    controller.run();
    controller.wait_synced().await;
    assert!(matches!(next(&mut events).await, Event::Added(_)));

    // Before, the watch turned this into a progress notification and the
    // cache went on serving the old object.
    raw.put(format!("{PREFIX}/good"), "{not json", None)
        .await
        .unwrap();
    let Event::Deleted(gone) = next(&mut events).await else {
        panic!("the overwritten object is deleted from the cache")
    };
    assert_eq!(gone.key(), good.key());
    assert!(controller.get_cached(&good.key()).unwrap().is_none());
    let held = controller.quarantine().get(&good.key()).expect("quarantined");
    assert_eq!(held.reason, QuarantineReason::Undecodable);
    assert!(held.errors[0].message.contains("not a pilot object"), "{held:?}");

    raw.put(
        format!("{PREFIX}/good"),
        serde_json::to_vec(&mock("default", "good", "w")).unwrap(),
        None,
    )
    .await
    .unwrap();
    let Event::Added(back) = next(&mut events).await else {
        panic!("the fixed object is added back")
    };
    assert_eq!(back.spec["key"], "w");
    assert!(controller.quarantine().list().is_empty());
}

async fn next(
    events: &mut futures::stream::BoxStream<'static, Notification<Arc<pilot_model::DynConfig>>>,
) -> Event<Arc<pilot_model::DynConfig>> {
    match tokio::time::timeout(Duration::from_secs(20), events.next()).await {
        Ok(Some(Notification::Event(event))) => event,
        other => panic!("expected an event, got {other:?}"),
    }
}
