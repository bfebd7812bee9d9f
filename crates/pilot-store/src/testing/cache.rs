//! The Controller over a backend: sync, event order, freshness, and writes
//! made around it.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{ConfigKey, ConfigStore, DynConfig, Event};
use tokio::sync::mpsc;

use super::{EVENT_TIMEOUT, StoreFactory, mock, registry};
use crate::{Controller, Notification};

const KIND: &str = "MockConfig";

type Events = BoxStream<'static, Notification<Arc<DynConfig>>>;

/// The next event, failing the test on a timeout or a lag.
async fn next_event(events: &mut Events) -> Event<Arc<DynConfig>> {
    let notification = tokio::time::timeout(EVENT_TIMEOUT, events.next())
        .await
        .expect("an event in time")
        .expect("the subscription is open");
    match notification {
        Notification::Event(event) => event,
        Notification::Lagged { missed } => panic!("subscriber lagged by {missed} in a conformance test"),
    }
}

fn describe(event: &Event<Arc<DynConfig>>) -> (char, String) {
    let (op, config) = match event {
        Event::Added(c) => ('+', c),
        Event::Updated { new, .. } => ('~', new),
        Event::Deleted(c) => ('-', c),
    };
    (op, format!("{}/{}", config.meta.namespace, config.meta.name))
}

/// Objects present before the Controller starts are cached and announced as
/// adds; `has_synced` turns true only after that first list.
pub async fn cache_initial_list(factory: &dyn StoreFactory) {
    let backend = factory.make(registry()).await;
    for i in 0..5 {
        backend
            .create(mock("default", &format!("pre-{i}"), "v"))
            .await
            .unwrap();
    }
    let controller = Controller::new(Arc::clone(&backend));
    let mut events = controller.subscribe(KIND);
    assert!(!controller.has_synced(), "not synced before it ran");
    controller.run();
    tokio::time::timeout(EVENT_TIMEOUT, controller.wait_synced())
        .await
        .expect("synced in time");
    assert!(controller.has_synced());
    assert_eq!(controller.list_cached(KIND, None).len(), 5);
    let mut added = Vec::new();
    for _ in 0..5 {
        let (op, name) = describe(&next_event(&mut events).await);
        assert_eq!(op, '+');
        added.push(name);
    }
    added.sort();
    assert_eq!(
        added,
        (0..5).map(|i| format!("default/pre-{i}")).collect::<Vec<_>>()
    );
}

/// Every add is seen before its update and its delete, and the counts add
/// up; no subscriber lags at this rate.
pub async fn cache_events_in_order(factory: &dyn StoreFactory) {
    const N: usize = 40;
    let backend = factory.make(registry()).await;
    let controller = Controller::new(backend);
    let mut events = controller.subscribe(KIND);
    controller.run();
    controller.wait_synced().await;
    let mut stored = Vec::new();
    for i in 0..N {
        stored.push(
            controller
                .create(mock("default", &format!("c{i}"), "1"))
                .await
                .unwrap(),
        );
    }
    for config in &stored {
        let mut next = (**config).clone();
        next.spec["key"] = "2".into();
        controller.update(next).await.unwrap();
    }
    for config in &stored {
        controller.delete(&config.key(), None).await.unwrap();
    }
    let mut history: HashMap<String, Vec<char>> = HashMap::new();
    for _ in 0..3 * N {
        let (op, name) = describe(&next_event(&mut events).await);
        history.entry(name).or_default().push(op);
    }
    assert_eq!(history.len(), N);
    for (name, ops) in &history {
        assert_eq!(ops, &['+', '~', '-'], "events of {name}");
    }
    assert!(controller.list_cached(KIND, None).is_empty());
}

/// A handler that updates and then deletes the object it was told about
/// reads each of its own writes back from the cache.
pub async fn cache_freshness(factory: &dyn StoreFactory) {
    let backend = factory.make(registry()).await;
    let controller = Arc::new(Controller::new(backend));
    let (report, mut reports) = mpsc::channel::<Result<(), String>>(4);
    let weak = Arc::downgrade(&controller);
    controller.add_handler(KIND, move |notification: Notification<Arc<DynConfig>>| {
        let controller = weak.upgrade();
        let report = report.clone();
        async move {
            let (Some(controller), Notification::Event(Event::Added(config))) = (controller, notification)
            else {
                return;
            };
            let _ = report.send(update_then_delete(&controller, &config).await).await;
        }
    });
    controller.run();
    controller.wait_synced().await;
    controller.create(mock("default", "fresh", "1")).await.unwrap();
    let outcome = tokio::time::timeout(EVENT_TIMEOUT, reports.recv())
        .await
        .expect("the handler ran in time")
        .expect("the handler reported");
    outcome.expect("the handler saw its own writes");
}

async fn update_then_delete(controller: &Controller, config: &DynConfig) -> Result<(), String> {
    let mut next = config.clone();
    next.spec["key"] = "2".into();
    let updated = controller.update(next).await.map_err(|e| e.to_string())?;
    let seen = controller.get(&config.key()).await.map_err(|e| e.to_string())?;
    if seen.as_deref().map(|c| &c.meta.resource_version) != Some(&updated.meta.resource_version) {
        return Err(format!("after its update the handler read {seen:?}"));
    }
    controller
        .delete(&config.key(), updated.meta.resource_version.as_deref())
        .await
        .map_err(|e| e.to_string())?;
    match controller.get(&config.key()).await.map_err(|e| e.to_string())? {
        None => Ok(()),
        Some(seen) => Err(format!("after its delete the handler still read {seen:?}")),
    }
}

/// Writes made straight to the backend (by another process, say) reach the
/// cache as events, and the cache then equals the backend.
pub async fn cache_sync_backend_writes(factory: &dyn StoreFactory) {
    let backend = factory.make(registry()).await;
    let controller = Controller::new(Arc::clone(&backend));
    let mut events = controller.subscribe(KIND);
    controller.run();
    controller.wait_synced().await;

    let key = ConfigKey::new(KIND, "default", "direct");
    let created = backend.create(mock("default", "direct", "1")).await.unwrap();
    assert_eq!(
        describe(&next_event(&mut events).await),
        ('+', "default/direct".into())
    );
    assert_eq!(controller.get_cached(&key).as_deref(), Some(&*created));

    let mut next = (*created).clone();
    next.spec["key"] = "2".into();
    let updated = backend.update(next).await.unwrap();
    let Event::Updated { old, new } = next_event(&mut events).await else {
        panic!("expected an update");
    };
    assert_eq!(old.meta.resource_version, created.meta.resource_version);
    assert_eq!(new.meta.resource_version, updated.meta.resource_version);
    assert_eq!(controller.get_cached(&key).as_deref(), Some(&*updated));

    backend.create(mock("other", "second", "1")).await.unwrap();
    backend.delete(&key, None).await.unwrap();
    assert_eq!(
        describe(&next_event(&mut events).await),
        ('+', "other/second".into())
    );
    assert_eq!(
        describe(&next_event(&mut events).await),
        ('-', "default/direct".into())
    );
    assert!(controller.get_cached(&key).is_none());
    assert_cache_equals_backend(&controller, &*backend, KIND).await;
}

/// Asserts that the Controller's cache of `kind` holds exactly what the
/// backend lists.
pub async fn assert_cache_equals_backend(controller: &Controller, backend: &dyn ConfigStore, kind: &str) {
    let cached: Vec<DynConfig> = controller
        .list_cached(kind, None)
        .iter()
        .map(|c| (**c).clone())
        .collect();
    let stored: Vec<DynConfig> = backend
        .list(kind, None)
        .await
        .expect("the backend lists")
        .iter()
        .map(|c| (**c).clone())
        .collect();
    assert_eq!(cached, stored, "the cache of {kind} differs from the backend");
}
