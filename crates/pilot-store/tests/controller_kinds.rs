//! Which kinds a Controller watches: those registered when it is built (or
//! listed in its options). Everything that would need the watch for any
//! other kind (writes, the cache, subscriptions) is refused with an error
//! naming the kind, never half-served.

use std::sync::Arc;

use pilot_model::{
    ConfigKey, ConfigMeta, ConfigStatus, ConfigStore, DynConfig, KindSchema, StoreError, now_seconds,
};
use pilot_store::testing::{MockConfig, mock, registry};
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_memory::MemoryConfigStore;

const LATE: &str = "Late";

fn late(name: &str) -> DynConfig {
    DynConfig {
        meta: ConfigMeta::new(LATE, "default", name),
        spec: serde_json::json!({"text": "registered after the Controller"}),
    }
}

/// A `NotWatched` error for `kind`, whose message names it.
fn assert_not_watched<T: std::fmt::Debug>(result: Result<T, StoreError>, kind: &str, what: &str) {
    match result {
        Err(error @ StoreError::NotWatched { .. }) => {
            let StoreError::NotWatched {
                kind: ref named,
                ref watched,
            } = error
            else {
                unreachable!()
            };
            assert_eq!(named, kind, "{what}: the error names the kind");
            assert_eq!(
                watched,
                &["MockConfig", "MockOther"],
                "{what}: and the kinds watched"
            );
            let message = error.to_string();
            assert!(
                message.contains(&format!("{kind:?}"))
                    && message.contains("build it after registering every kind"),
                "{what}: {message}"
            );
        }
        other => panic!("{what}: expected Err(NotWatched {{ kind: {kind:?} }}), got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_registered_after_the_controller_is_refused_by_name() {
    let kinds = registry();
    let store = MemoryConfigStore::new(kinds.clone());
    let controller = Controller::new(Arc::new(store.clone()));
    let mut kinds_watched = controller.kinds().to_vec();
    kinds_watched.sort();
    assert_eq!(kinds_watched, ["MockConfig", "MockOther"]);
    kinds
        .register_schema(KindSchema::new(LATE, "lates", "test.pilot.io", "v1", |_, _| {}))
        .unwrap();
    controller.run();
    controller.wait_synced().await;

    // Writes: refused before they reach the backend.
    assert_not_watched(controller.create(late("a")).await, LATE, "create");
    assert_eq!(
        store.list(LATE, None).await.unwrap(),
        [],
        "a refused create wrote nothing"
    );
    let stored = store.create(late("b")).await.unwrap();
    let key = stored.key();
    let version = stored.meta.resource_version.clone().unwrap();
    assert_not_watched(controller.update((*stored).clone()).await, LATE, "update");
    assert_not_watched(controller.delete(&key, None).await, LATE, "delete");
    let status = ConfigStatus {
        observed_version: version.clone(),
        proxies: 1,
        acked: 1,
        nacked: 0,
        withheld: 0,
        nacks: Vec::new(),
        last_update: now_seconds(),
        conditions: Vec::new(),
        validation_messages: Vec::new(),
        parents: Vec::new(),
        listeners: Vec::new(),
        addresses: Vec::new(),
        ancestors: Vec::new(),
    };
    assert_not_watched(
        controller.update_status(&key, &version, status).await,
        LATE,
        "update_status",
    );
    assert_eq!(
        store.get(&key).await.unwrap().as_deref(),
        Some(&*stored),
        "refused writes left the object as it was"
    );

    // The cache and subscriptions: refused, not empty.
    assert_not_watched(controller.list_cached(LATE, None), LATE, "list_cached");
    assert_not_watched(controller.get_cached(&key), LATE, "get_cached");
    assert_not_watched(controller.subscribe(LATE).map(|_| ()), LATE, "subscribe");
    assert_not_watched(
        controller.add_handler(LATE, |_: Notification<Arc<DynConfig>>| async {}),
        LATE,
        "add_handler",
    );
    assert_not_watched(
        controller.sync_with_backend(LATE).await,
        LATE,
        "sync_with_backend",
    );
    assert_eq!(controller.applied_revision(LATE), None);

    // Reads through ConfigStore are the backend's answers.
    assert_eq!(controller.get(&key).await.unwrap().as_deref(), Some(&*stored));
    assert_eq!(controller.list(LATE, None).await.unwrap().len(), 1);

    // The kinds it watches are served as ever.
    let created = controller.create(mock("default", "m", "v")).await.unwrap();
    assert_eq!(controller.list_cached("MockConfig", None).unwrap(), [created]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_no_registry_knows_is_unknown_everywhere() {
    let controller = Controller::new(Arc::new(MemoryConfigStore::new(registry())));
    controller.run();
    controller.wait_synced().await;
    let unknown = |what: &str, result: Result<(), StoreError>| {
        assert!(
            matches!(result, Err(StoreError::UnknownKind { ref kind }) if kind == "Nope"),
            "{what}: expected Err(UnknownKind {{ kind: \"Nope\" }}), got {result:?}"
        );
    };
    let config = DynConfig {
        meta: ConfigMeta::new("Nope", "default", "x"),
        spec: serde_json::json!({}),
    };
    let key = ConfigKey::new("Nope", "default", "x");
    unknown("create", controller.create(config.clone()).await.map(|_| ()));
    unknown("update", controller.update(config).await.map(|_| ()));
    unknown("delete", controller.delete(&key, None).await);
    unknown("get", controller.get(&key).await.map(|_| ()));
    unknown("list", controller.list("Nope", None).await.map(|_| ()));
    unknown("list_cached", controller.list_cached("Nope", None).map(|_| ()));
    unknown("subscribe", controller.subscribe("Nope").map(|_| ()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_left_out_of_the_options_are_refused_too() {
    let store = MemoryConfigStore::new(registry());
    let options = {
        let mut value = ControllerOptions::default();
        value.kinds = Some(vec!["MockOther".to_string()]);
        value
    };
    let controller = Controller::with_options(Arc::new(store.clone()), options);
    controller.run();
    controller.wait_synced().await;
    let refused = controller.create(mock("default", "m", "v")).await;
    assert!(
        matches!(&refused, Err(StoreError::NotWatched { kind, watched }) if kind == "MockConfig" && watched == &["MockOther"]),
        "{refused:?}"
    );
    assert!(matches!(
        controller.subscribe_typed::<MockConfig>(),
        Err(StoreError::NotWatched { .. })
    ));
    // Its reads are the backend's.
    store.create(mock("default", "m", "v")).await.unwrap();
    assert_eq!(controller.list("MockConfig", None).await.unwrap().len(), 1);
}
