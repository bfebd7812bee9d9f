//! Distribution status (`ConfigStore::update_status`): written beside the
//! object, never a user's write's concern, never a push.

use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, Event, StoreError, now_seconds,
};

use super::{EVENT_TIMEOUT, StoreFactory, mock, registry};
use crate::{Controller, Notification};

const KIND: &str = "MockConfig";

fn status(observed: &str, acked: u64) -> ConfigStatus {
    ConfigStatus {
        observed_version: observed.to_string(),
        proxies: 3,
        acked,
        nacked: 0,
        nacks: Vec::new(),
        last_update: now_seconds(),
    }
}

async fn stored_status(store: &dyn ConfigWatch, key: &ConfigKey) -> Option<ConfigStatus> {
    store
        .get(key)
        .await
        .expect("get")
        .expect("object present")
        .meta
        .status
        .clone()
}

/// A status write is read back by get, list and snapshot; a user's update
/// carrying the version from before the status write still succeeds; a
/// second status write replaces the first.
pub async fn status_write_read_back(factory: &dyn StoreFactory) {
    let store = factory.make(registry()).await;
    let created = store.create(mock("default", "s", "1")).await.expect("create");
    let key = created.key();
    let version = created.meta.resource_version.clone().expect("version");
    assert_eq!(created.meta.status, None, "a new object has no status");
    let first = status(&version, 1);
    store
        .update_status(&key, &version, first.clone())
        .await
        .expect("status write");
    assert_eq!(stored_status(&*store, &key).await, Some(first));
    store
        .update_status(&key, &version, status(&version, 3))
        .await
        .expect("second status write");
    assert_eq!(stored_status(&*store, &key).await.map(|s| s.acked), Some(3));
    let listed = store.list(KIND, Some("default")).await.expect("list");
    assert_eq!(listed[0].meta.status.as_ref().map(|s| s.acked), Some(3));
    let snapshot = store.snapshot(KIND).await.expect("snapshot");
    assert_eq!(snapshot.items[0].meta.status.as_ref().map(|s| s.acked), Some(3));
    // The user read the object before the status writes and updates it.
    let mut changed = (*created).clone();
    changed.spec["key"] = "2".into();
    let updated = store
        .update(changed)
        .await
        .expect("a status write does not make a user's update conflict");
    let new_version = updated.meta.resource_version.clone().expect("version");
    assert_ne!(new_version, version);
    // What status the object keeps is about the old version, and says so.
    if let Some(kept) = stored_status(&*store, &key).await {
        assert_eq!(kept.observed_version, version);
    }
}

/// A status write for a version the object no longer has is refused
/// (Conflict) and changes nothing; for a missing object it is NotFound; a
/// user's create or update cannot set a status.
pub async fn status_never_fights_a_user_write(factory: &dyn StoreFactory) {
    let store = factory.make(registry()).await;
    let created = store.create(mock("default", "s", "1")).await.expect("create");
    let key = created.key();
    let old = created.meta.resource_version.clone().expect("version");
    let mut changed = (*created).clone();
    changed.spec["key"] = "2".into();
    let updated = store.update(changed).await.expect("update");
    let stale = store.update_status(&key, &old, status(&old, 3)).await;
    assert!(matches!(stale, Err(StoreError::Conflict { .. })), "{stale:?}");
    let now = store.get(&key).await.expect("get").expect("present");
    assert_eq!(now.meta.status, None, "a refused status write changes nothing");
    assert_eq!(now.meta.resource_version, updated.meta.resource_version);
    assert_eq!(now.spec["key"], "2");
    let missing = ConfigKey::new(KIND, "default", "missing");
    let absent = store.update_status(&missing, &old, status(&old, 1)).await;
    assert!(matches!(absent, Err(StoreError::NotFound { .. })), "{absent:?}");
    // A user cannot write status through create or update.
    let mut with_status: DynConfig = mock("default", "t", "1");
    with_status.meta.status = Some(status("1", 3));
    let created = store.create(with_status).await.expect("create");
    assert_eq!(created.meta.status, None);
    assert_eq!(stored_status(&*store, &created.key()).await, None);
    let version = created.meta.resource_version.clone().expect("version");
    store
        .update_status(&created.key(), &version, status(&version, 2))
        .await
        .expect("status write");
    let mut forged = (*created).clone();
    forged.meta.status = Some(status(&version, 99));
    store.update(forged).await.expect("update");
    assert_ne!(
        stored_status(&*store, &created.key()).await.map(|s| s.acked),
        Some(99),
        "a user's update does not write status"
    );
}

/// Through a Controller: the cache shows a status write, subscribers (the
/// push pipeline) are not told of it; the next event they get is the next
/// user write.
pub async fn status_is_not_a_change(factory: &dyn StoreFactory) {
    let backend = factory.make(registry()).await;
    let controller = Arc::new(Controller::new(Arc::clone(&backend)));
    let mut events = controller.subscribe(KIND);
    controller.run();
    controller.wait_synced().await;
    let created = controller
        .create(mock("default", "s", "1"))
        .await
        .expect("create");
    let version = created.meta.resource_version.clone().expect("version");
    match next(&mut events).await {
        Ok(Some(Notification::Event(Event::Added(config)))) => assert_eq!(config.meta.name, "s"),
        other => panic!("expected the create, got {other:?}"),
    }
    controller
        .update_status(&created.key(), &version, status(&version, 2))
        .await
        .expect("status write");
    let cached = controller.get_cached(&created.key()).expect("cached");
    assert_eq!(
        cached.meta.status.as_ref().map(|s| s.acked),
        Some(2),
        "the cache shows the status"
    );
    controller
        .create(mock("default", "after", "1"))
        .await
        .expect("create");
    match next(&mut events).await {
        Ok(Some(Notification::Event(Event::Added(config)))) => assert_eq!(
            config.meta.name, "after",
            "the status write reached subscribers as a change"
        ),
        other => panic!("expected the second create, got {other:?}"),
    }
}

type Events = futures::stream::BoxStream<'static, Notification<Arc<DynConfig>>>;

async fn next(
    events: &mut Events,
) -> Result<Option<Notification<Arc<DynConfig>>>, tokio::time::error::Elapsed> {
    tokio::time::timeout(EVENT_TIMEOUT, events.next()).await
}
