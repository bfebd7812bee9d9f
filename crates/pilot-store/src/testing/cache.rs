//! The Controller over a backend: sync, event order, freshness, and writes
//! made around it.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{Config, ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, Event, now_seconds};
use tokio::sync::mpsc;

use super::{EVENT_TIMEOUT, MockOther, StoreFactory, mock, registry};
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

/// Every write through the Controller (create, update, status, delete)
/// is in its cache when the write returns, round after round, while
/// other writers keep the backend busy with both kinds.
/// (On etcd before 3.4.25 / 3.5.8 a requested progress notification can
/// reach the watch ahead of the event of the same revision, etcd #15220:
/// a cache that trusted it returned from a create before showing it.)
pub async fn cache_reads_its_own_writes(factory: &dyn StoreFactory) {
    const FRESH: usize = 20;
    const ROUNDS: usize = 40;
    let version = |c: Option<Arc<DynConfig>>| c.and_then(|c| c.meta.resource_version.clone());
    let backend = factory.make(registry()).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|writer| tokio::spawn(noise(Arc::clone(&backend), Arc::clone(&stop), writer)))
        .collect();

    // A Controller that has just synced, whose watch may still be catching
    // up with what was written since its list (how pilot-discovery starts;
    // on etcd such a watch is "unsynced" for up to 100 ms).
    for fresh in 0..FRESH {
        let controller = Controller::new(Arc::clone(&backend));
        controller.run();
        controller.wait_synced().await;
        let name = format!("fresh-{fresh}");
        let created = controller.create(mock("default", &name, "1")).await.unwrap();
        let seen = controller
            .get(&ConfigKey::new(KIND, "default", &name))
            .await
            .unwrap();
        assert_eq!(
            version(seen),
            created.meta.resource_version,
            "Controller {fresh}: the cache after its first write, just after it synced"
        );
    }

    let controller = Controller::new(Arc::clone(&backend));
    controller.run();
    controller.wait_synced().await;
    for round in 0..ROUNDS {
        let name = format!("own-{round}");
        let key = ConfigKey::new(KIND, "default", &name);

        let created = controller.create(mock("default", &name, "1")).await.unwrap();
        let seen = controller.get(&key).await.unwrap();
        assert_eq!(
            version(seen),
            created.meta.resource_version,
            "round {round}: the cache after its own create"
        );

        let mut next = (*created).clone();
        next.spec["key"] = "2".into();
        let updated = controller.update(next).await.unwrap();
        let seen = controller.get(&key).await.unwrap();
        assert_eq!(
            version(seen),
            updated.meta.resource_version,
            "round {round}: the cache after its own update"
        );

        let mut current = updated.meta.resource_version.clone();
        if backend.keeps_status() {
            let observed = current.clone().expect("a stored object has a version");
            let status = ConfigStatus {
                observed_version: observed.clone(),
                proxies: 2,
                acked: 1,
                nacked: 0,
                nacks: Vec::new(),
                last_update: now_seconds(),
            };
            controller
                .update_status(&key, &observed, status.clone())
                .await
                .unwrap();
            let seen = controller.get(&key).await.unwrap().expect("the object is cached");
            assert_eq!(
                seen.meta.status.as_ref(),
                Some(&status),
                "round {round}: the cache after its own status write"
            );
            // Kubernetes moves the resource version on a status write.
            current = seen.meta.resource_version.clone();
        }

        controller.delete(&key, current.as_deref()).await.unwrap();
        assert_eq!(
            controller.get(&key).await.unwrap(),
            None,
            "round {round}: the cache after its own delete"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        let written = writer.await.expect("the other writer ran");
        assert!(written > 0, "the other writer wrote while the rounds ran");
    }
}

/// Another writer, straight to the backend until `stop`: objects of both
/// kinds (`noise-<writer>-<n>`), created then updated over and over.
async fn noise(
    backend: Arc<dyn ConfigWatch>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    writer: usize,
) -> u64 {
    let mut written = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let name = format!("noise-{writer}-{}", written % 4);
        let object = if written.is_multiple_of(2) {
            let text = format!("noise {written}");
            Config::new("default", name, MockOther { text })
                .to_dyn()
                .expect("MockOther serializes")
        } else {
            mock("default", &name, &written.to_string())
        };
        let key = object.key();
        let stored = match backend.get(&key).await.expect("the backend reads") {
            None => backend.create(object).await,
            Some(current) => {
                let mut next = object;
                next.meta.resource_version = current.meta.resource_version.clone();
                backend.update(next).await
            }
        }
        .expect("the other writer writes");
        // Status writes too, where the backend keeps them: on etcd each is
        // an event the watch reads the object again for.
        if backend.keeps_status()
            && let Some(version) = stored.meta.resource_version.clone()
        {
            let status = ConfigStatus {
                observed_version: version.clone(),
                proxies: 1,
                acked: 1,
                nacked: 0,
                nacks: Vec::new(),
                last_update: now_seconds(),
            };
            backend
                .update_status(&key, &version, status)
                .await
                .expect("the other writer writes a status");
        }
        written += 1;
        // An in-memory backend answers without ever waiting: give the
        // runtime's workers back, or the Controller's tasks never run.
        tokio::task::yield_now().await;
    }
    written
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
