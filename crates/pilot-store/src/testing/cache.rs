//! The Controller over a backend: sync, event order, freshness, and writes
//! made around it.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{Config, ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, Event, now_seconds};
use tokio::sync::mpsc;

use super::check::{equal, holds, ok, some};
use super::{EVENT_TIMEOUT, MockOther, StoreFactory, mock, registry};
use crate::{Controller, Notification};

const KIND: &str = "MockConfig";

type Events = BoxStream<'static, Notification<Arc<DynConfig>>>;

/// The next event, failing the test on a timeout or a lag.
async fn next_event(events: &mut Events) -> Event<Arc<DynConfig>> {
    let notification = match tokio::time::timeout(EVENT_TIMEOUT, events.next()).await {
        Ok(Some(notification)) => notification,
        Ok(None) => panic!("a Controller's subscription must stay open while the Controller lives; it ended"),
        Err(_) => panic!(
            "a Controller must hand every change of the backend to its subscribers: none came within \
             {EVENT_TIMEOUT:?} (does the backend's watch deliver the writes?)"
        ),
    };
    match notification {
        Notification::Event(event) => event,
        Notification::Lagged { missed } => panic!(
            "a subscriber reading at once must not lag at this rate: got Lagged {{ missed: {missed} }}"
        ),
    }
}

const CREATED: &str = "create of a new, valid object must succeed";

/// `controller.subscribe(kind)`, for a kind it watches.
#[track_caller]
pub(crate) fn subscribed(controller: &Controller, kind: &str) -> Events {
    ok(
        controller.subscribe(kind),
        "subscribe to a kind the Controller watches must succeed",
    )
}

/// `controller.list_cached(kind, None)`, for a kind it watches.
#[track_caller]
pub(crate) fn cached(controller: &Controller, kind: &str) -> Vec<Arc<DynConfig>> {
    ok(
        controller.list_cached(kind, None),
        "list_cached of a kind the Controller watches must succeed",
    )
}

/// `controller.get_cached(key)`, for a kind it watches.
#[track_caller]
pub(crate) fn cached_object(controller: &Controller, key: &ConfigKey) -> Option<Arc<DynConfig>> {
    ok(
        controller.get_cached(key),
        "get_cached of a kind the Controller watches must succeed",
    )
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
        ok(
            backend.create(mock("default", &format!("pre-{i}"), "v")).await,
            CREATED,
        );
    }
    let controller = Controller::new(Arc::clone(&backend));
    let mut events = subscribed(&controller, KIND);
    holds(
        !controller.has_synced(),
        "a Controller must not say it synced before it ran",
        "has_synced() = true",
    );
    controller.run();
    if tokio::time::timeout(EVENT_TIMEOUT, controller.wait_synced())
        .await
        .is_err()
    {
        panic!(
            "a Controller must sync once it has listed every kind: not synced within {EVENT_TIMEOUT:?} \
             (does snapshot() answer for every registered kind?)"
        );
    }
    holds(
        controller.has_synced(),
        "has_synced() must be true once wait_synced() returned",
        "false",
    );
    equal(
        cached(&controller, KIND).len(),
        5,
        "the cache after the first list must hold every object the backend had",
    );
    let mut added = Vec::new();
    for _ in 0..5 {
        let (op, name) = describe(&next_event(&mut events).await);
        holds(
            op == '+',
            "objects present before the Controller ran must reach subscribers as adds",
            (op, &name),
        );
        added.push(name);
    }
    added.sort();
    equal(
        added,
        (0..5).map(|i| format!("default/pre-{i}")).collect::<Vec<_>>(),
        "every object present before the Controller ran must reach subscribers once",
    );
}

/// Every add is seen before its update and its delete, and the counts add
/// up; no subscriber lags at this rate.
pub async fn cache_events_in_order(factory: &dyn StoreFactory) {
    const N: usize = 40;
    let backend = factory.make(registry()).await;
    let controller = Controller::new(backend);
    let mut events = subscribed(&controller, KIND);
    controller.run();
    controller.wait_synced().await;
    let mut stored = Vec::new();
    for i in 0..N {
        stored.push(ok(
            controller.create(mock("default", &format!("c{i}"), "1")).await,
            CREATED,
        ));
    }
    for config in &stored {
        let mut next = (**config).clone();
        next.spec["key"] = "2".into();
        ok(
            controller.update(next).await,
            "update carrying the current resource version must succeed",
        );
    }
    for config in &stored {
        ok(
            controller.delete(&config.key(), None).await,
            "delete without a version must succeed",
        );
    }
    let mut history: HashMap<String, Vec<char>> = HashMap::new();
    for _ in 0..3 * N {
        let (op, name) = describe(&next_event(&mut events).await);
        history.entry(name).or_default().push(op);
    }
    equal(
        history.len(),
        N,
        "every object written must reach subscribers (objects with events)",
    );
    for (name, ops) in &history {
        equal(
            &ops[..],
            &['+', '~', '-'][..],
            &format!(
                "{name}'s events must come in the order of its writes ('+' add, '~' update, '-' delete)"
            ),
        );
    }
    let left = cached(&controller, KIND);
    holds(
        left.is_empty(),
        "after every object was deleted the cache must be empty",
        &left,
    );
}

/// A handler that updates and then deletes the object it was told about
/// reads each of its own writes back from the cache.
pub async fn cache_freshness(factory: &dyn StoreFactory) {
    let backend = factory.make(registry()).await;
    let controller = Arc::new(Controller::new(backend));
    let (report, mut reports) = mpsc::channel::<Result<(), String>>(4);
    let weak = Arc::downgrade(&controller);
    let handler = controller.add_handler(KIND, move |notification: Notification<Arc<DynConfig>>| {
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
    ok(
        handler,
        "add_handler for a kind the Controller watches must succeed",
    );
    controller.run();
    controller.wait_synced().await;
    ok(controller.create(mock("default", "fresh", "1")).await, CREATED);
    let outcome = match tokio::time::timeout(EVENT_TIMEOUT, reports.recv()).await {
        Ok(Some(outcome)) => outcome,
        Ok(None) => panic!("the handler must report what it read; it ended without a word"),
        Err(_) => panic!(
            "a handler must be told of a create through the Controller: none ran within {EVENT_TIMEOUT:?}"
        ),
    };
    ok(
        outcome,
        "a handler writing through the Controller must read its own writes back from the cache",
    );
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
        let created = ok(controller.create(mock("default", &name, "1")).await, CREATED);
        let seen = ok(
            controller.get(&ConfigKey::new(KIND, "default", &name)).await,
            "get through a Controller must succeed",
        );
        equal(
            version(seen),
            created.meta.resource_version.clone(),
            &format!(
                "Controller {fresh}, just synced: get after its own create must show the created version"
            ),
        );
    }

    let controller = Controller::new(Arc::clone(&backend));
    controller.run();
    controller.wait_synced().await;
    for round in 0..ROUNDS {
        let name = format!("own-{round}");
        let key = ConfigKey::new(KIND, "default", &name);

        let read = "get through a Controller must succeed";
        let created = ok(controller.create(mock("default", &name, "1")).await, CREATED);
        equal(
            version(ok(controller.get(&key).await, read)),
            created.meta.resource_version.clone(),
            &format!("round {round}: get after the Controller's own create must show the created version"),
        );

        let mut next = (*created).clone();
        next.spec["key"] = "2".into();
        let updated = ok(
            controller.update(next).await,
            "update carrying the current resource version must succeed",
        );
        equal(
            version(ok(controller.get(&key).await, read)),
            updated.meta.resource_version.clone(),
            &format!("round {round}: get after the Controller's own update must show the updated version"),
        );

        let mut current = updated.meta.resource_version.clone();
        if backend.keeps_status() {
            let observed = some(
                current.clone(),
                "update must return the object with its new resource version",
            );
            let status = ConfigStatus {
                observed_version: observed.clone(),
                proxies: 2,
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
            ok(
                controller.update_status(&key, &observed, status.clone()).await,
                "a status write for the object's current version must succeed",
            );
            let seen = some(
                ok(controller.get(&key).await, read),
                &format!("round {round}: get after the Controller's own status write must find the object"),
            );
            equal(
                seen.meta.status.as_ref(),
                Some(&status),
                &format!("round {round}: get after the Controller's own status write must show the status"),
            );
            // Kubernetes moves the resource version on a status write.
            current = seen.meta.resource_version.clone();
        }

        ok(
            controller.delete(&key, current.as_deref()).await,
            "delete carrying the current version must succeed",
        );
        equal(
            ok(controller.get(&key).await, read),
            None,
            &format!("round {round}: get after the Controller's own delete must be None"),
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        let written = ok(writer.await, "the other writer must not panic");
        holds(
            written > 0,
            "the other writers must have written while the rounds ran",
            written,
        );
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
        let stored = match ok(backend.get(&key).await, "get of a registered kind must succeed") {
            None => ok(backend.create(object).await, CREATED),
            Some(current) => {
                let mut next = object;
                next.meta.resource_version = current.meta.resource_version.clone();
                ok(
                    backend.update(next).await,
                    "update carrying the current resource version must succeed (one writer per key)",
                )
            }
        };
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
            ok(
                backend.update_status(&key, &version, status).await,
                "a status write for the object's current version must succeed",
            );
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
    let mut events = subscribed(&controller, KIND);
    controller.run();
    controller.wait_synced().await;

    let key = ConfigKey::new(KIND, "default", "direct");
    let created = ok(backend.create(mock("default", "direct", "1")).await, CREATED);
    equal(
        describe(&next_event(&mut events).await),
        ('+', "default/direct".into()),
        "a create made straight to the backend must reach subscribers as an add",
    );
    equal(
        cached_object(&controller, &key).as_deref(),
        Some(&*created),
        "the cache must show a create made straight to the backend once its event came",
    );

    let mut next = (*created).clone();
    next.spec["key"] = "2".into();
    let updated = ok(
        backend.update(next).await,
        "update carrying the current resource version must succeed",
    );
    let versions = |e: &Event<Arc<DynConfig>>| match e {
        Event::Updated { old, new } => Some((
            old.meta.resource_version.clone(),
            new.meta.resource_version.clone(),
        )),
        _ => None,
    };
    let event = next_event(&mut events).await;
    equal(
        versions(&event),
        Some((
            created.meta.resource_version.clone(),
            updated.meta.resource_version.clone(),
        )),
        "an update made straight to the backend must reach subscribers as Updated { old, new } with \
         the versions before and after (as (old, new))",
    );
    equal(
        cached_object(&controller, &key).as_deref(),
        Some(&*updated),
        "the cache must show an update made straight to the backend once its event came",
    );

    ok(backend.create(mock("other", "second", "1")).await, CREATED);
    ok(
        backend.delete(&key, None).await,
        "delete without a version must succeed",
    );
    equal(
        describe(&next_event(&mut events).await),
        ('+', "other/second".into()),
        "writes made straight to the backend must reach subscribers in order: the create first",
    );
    equal(
        describe(&next_event(&mut events).await),
        ('-', "default/direct".into()),
        "writes made straight to the backend must reach subscribers in order: then the delete",
    );
    equal(
        cached_object(&controller, &key),
        None,
        "the cache must drop an object deleted straight in the backend once its event came",
    );
    assert_cache_equals_backend(&controller, &*backend, KIND).await;
}

/// Asserts that the Controller's cache of `kind` holds exactly what the
/// backend lists.
pub async fn assert_cache_equals_backend(controller: &Controller, backend: &dyn ConfigStore, kind: &str) {
    let in_cache: Vec<DynConfig> = cached(controller, kind).iter().map(|c| (**c).clone()).collect();
    let stored: Vec<DynConfig> = ok(
        backend.list(kind, None).await,
        "list of a registered kind must succeed",
    )
    .iter()
    .map(|c| (**c).clone())
    .collect();
    equal(
        in_cache,
        stored,
        &format!("the Controller's cache of {kind} must equal the backend's list (got: the cache)"),
    );
}
