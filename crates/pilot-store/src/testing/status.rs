//! Distribution status (`ConfigStore::update_status`): written beside the
//! object, never a user's write's concern, never a push.

use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, Event, StoreError, now_seconds,
};

use super::check::{equal, holds, must_match, ok, some};
use super::{EVENT_TIMEOUT, StoreFactory, mock, registry};
use crate::{Controller, Notification};

const KIND: &str = "MockConfig";

fn status(observed: &str, acked: u64) -> ConfigStatus {
    ConfigStatus {
        observed_version: observed.to_string(),
        proxies: 3,
        acked,
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
    }
}

const CREATED: &str = "create of a new, valid object must succeed";

#[track_caller]
fn version_of(config: &DynConfig) -> String {
    some(
        config.meta.resource_version.clone(),
        "a stored object must carry a resource version",
    )
}

async fn stored_status(store: &dyn ConfigWatch, key: &ConfigKey) -> Option<ConfigStatus> {
    let rule = format!("get of {key}, created and not deleted, must find it");
    some(ok(store.get(key).await, &rule), &rule).meta.status.clone()
}

/// A status write is read back by get, list and snapshot; a user's update
/// carrying the version from before the status write still succeeds; a
/// second status write replaces the first.
pub async fn status_write_read_back(factory: &dyn StoreFactory) {
    let store = factory.make(registry()).await;
    let created = ok(store.create(mock("default", "s", "1")).await, CREATED);
    let key = created.key();
    let version = version_of(&created);
    equal(&created.meta.status, &None, "a new object must have no status");
    let first = status(&version, 1);
    ok(
        store.update_status(&key, &version, first.clone()).await,
        "a status write for the object's current version must succeed",
    );
    equal(
        stored_status(&*store, &key).await,
        Some(first),
        "get must return the status written",
    );
    ok(
        store.update_status(&key, &version, status(&version, 3)).await,
        "a second status write for the same version must succeed (the first kept the version)",
    );
    equal(
        stored_status(&*store, &key).await.map(|s| s.acked),
        Some(3),
        "a second status write must replace the first (acked)",
    );
    let listed = ok(
        store.list(KIND, Some("default")).await,
        "list of a registered kind must succeed",
    );
    equal(
        listed
            .first()
            .and_then(|c| c.meta.status.as_ref())
            .map(|s| s.acked),
        Some(3),
        "list must return objects with their status (acked)",
    );
    let snapshot = ok(
        store.snapshot(KIND).await,
        "snapshot of a registered kind must succeed",
    );
    equal(
        snapshot
            .items
            .first()
            .and_then(|c| c.meta.status.as_ref())
            .map(|s| s.acked),
        Some(3),
        "snapshot must return objects with their status (acked)",
    );
    // The user read the object before the status writes and updates it.
    let mut changed = (*created).clone();
    changed.spec["key"] = "2".into();
    let updated = ok(
        store.update(changed).await,
        "a status write must not change the resource version a user's update carries: the update \
         with the version read before it must succeed",
    );
    let new_version = version_of(&updated);
    holds(
        new_version != version,
        "update must give the object a new resource version",
        &new_version,
    );
    // What status the object keeps is about the old version, and says so.
    if let Some(kept) = stored_status(&*store, &key).await {
        equal(
            kept.observed_version,
            version,
            "a status kept across a user's update must still name the version it was about",
        );
    }
}

/// A status write for a version the object no longer has is refused
/// (Conflict) and changes nothing; for a missing object it is NotFound; a
/// user's create or update cannot set a status.
pub async fn status_never_fights_a_user_write(factory: &dyn StoreFactory) {
    let store = factory.make(registry()).await;
    let created = ok(store.create(mock("default", "s", "1")).await, CREATED);
    let key = created.key();
    let old = version_of(&created);
    let mut changed = (*created).clone();
    changed.spec["key"] = "2".into();
    let updated = ok(
        store.update(changed).await,
        "update carrying the current resource version must succeed",
    );
    must_match!(
        store.update_status(&key, &old, status(&old, 3)).await,
        Err(StoreError::Conflict { .. }),
        "a status write for a version the object no longer has must fail with Conflict"
    );
    let rule = "get of an object created and not deleted must find it";
    let now = some(ok(store.get(&key).await, rule), rule);
    equal(
        &now.meta.status,
        &None,
        "a refused status write must write no status",
    );
    equal(
        &now.meta.resource_version,
        &updated.meta.resource_version,
        "a refused status write must leave the resource version",
    );
    equal(
        &now.spec["key"],
        &serde_json::json!("2"),
        "a refused status write must leave the spec",
    );
    let missing = ConfigKey::new(KIND, "default", "missing");
    must_match!(
        store.update_status(&missing, &old, status(&old, 1)).await,
        Err(StoreError::NotFound { .. }),
        "a status write for a key that holds no object must fail with NotFound"
    );
    let unknown = ConfigKey::new("Nope", "default", "s");
    must_match!(
        store.update_status(&unknown, &old, status(&old, 1)).await,
        Err(StoreError::UnknownKind { .. }),
        "a status write for an unregistered kind must fail with UnknownKind"
    );
    // A user cannot write status through create or update.
    let mut with_status: DynConfig = mock("default", "t", "1");
    with_status.meta.status = Some(status("1", 3));
    let created = ok(store.create(with_status).await, CREATED);
    equal(
        &created.meta.status,
        &None,
        "create must not write the status the object carries",
    );
    equal(
        stored_status(&*store, &created.key()).await,
        None,
        "create must not store the status the object carries",
    );
    let version = version_of(&created);
    ok(
        store
            .update_status(&created.key(), &version, status(&version, 2))
            .await,
        "a status write for the object's current version must succeed",
    );
    let mut forged = (*created).clone();
    forged.meta.status = Some(status(&version, 99));
    ok(
        store.update(forged).await,
        "update carrying the current resource version must succeed",
    );
    let kept = stored_status(&*store, &created.key()).await.map(|s| s.acked);
    holds(
        kept != Some(99),
        "update must not write the status the object carries (acked 99)",
        kept,
    );
}

/// Through a Controller: the cache shows a status write, subscribers (the
/// push pipeline) are not told of it; the next event they get is the next
/// user write.
pub async fn status_is_not_a_change(factory: &dyn StoreFactory) {
    let backend = factory.make(registry()).await;
    let controller = Arc::new(Controller::new(Arc::clone(&backend)));
    let mut events = super::cache::subscribed(&controller, KIND);
    controller.run();
    controller.wait_synced().await;
    let created = ok(controller.create(mock("default", "s", "1")).await, CREATED);
    let version = version_of(&created);
    let added = |n: &Result<Option<Notification<Arc<DynConfig>>>, _>| match n {
        Ok(Some(Notification::Event(Event::Added(config)))) => Some(config.meta.name.clone()),
        _ => None,
    };
    let first = next(&mut events).await;
    holds(
        added(&first).as_deref() == Some("s"),
        "a create through the Controller must reach subscribers as Added(s)",
        &first,
    );
    ok(
        controller
            .update_status(&created.key(), &version, status(&version, 2))
            .await,
        "a status write for the object's current version must succeed",
    );
    let cached = some(
        super::cache::cached_object(&controller, &created.key()),
        "the cache must hold an object created through the Controller",
    );
    equal(
        cached.meta.status.as_ref().map(|s| s.acked),
        Some(2),
        "the cache must show a status write through the Controller (acked)",
    );
    ok(controller.create(mock("default", "after", "1")).await, CREATED);
    let second = next(&mut events).await;
    holds(
        added(&second).as_deref() == Some("after"),
        "a status write must not reach subscribers as a change: the next event must be Added(after)",
        &second,
    );
}

type Events = futures::stream::BoxStream<'static, Notification<Arc<DynConfig>>>;

async fn next(
    events: &mut Events,
) -> Result<Option<Notification<Arc<DynConfig>>>, tokio::time::error::Elapsed> {
    tokio::time::timeout(EVENT_TIMEOUT, events.next()).await
}
