//! A 410 Gone during a watch: the Controller relists and reports what the
//! gap hid, deletes included.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use pilot_kube_fake::FakeApiServer;
use pilot_model::{ConfigStore, Event};
use pilot_store::testing::{EVENT_TIMEOUT, assert_cache_equals_backend, mock, registry};
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_k8s::{KubeConfigStore, install_crds};

const KIND: &str = "MockConfig";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_during_a_watch_relists_and_reports_the_delete_in_the_gap() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let registry = registry();
    install_crds(client.clone(), &registry).await.unwrap();
    let store = Arc::new(KubeConfigStore::new(client, registry));
    store.create(mock("default", "kept", "1")).await.unwrap();
    let gone = store.create(mock("default", "gone", "1")).await.unwrap();

    let controller = Controller::with_options(store.clone(), {
        let mut value = ControllerOptions::default();
        value.kinds = Some(vec![KIND.to_string()]);
        value
    });
    let mut events = controller.subscribe(KIND).unwrap();
    controller.run();
    controller.wait_synced().await;
    for _ in 0..2 {
        next(&mut events).await; // the initial adds
    }

    // The gap: no watch may see what happens next, and the history of it
    // is gone by the time the Controller watches again.
    fake.refuse_watches(true);
    fake.close_watches();
    store.delete(&gone.key(), None).await.unwrap();
    store.create(mock("default", "new", "1")).await.unwrap();
    fake.expire_history();
    fake.refuse_watches(false);

    let mut seen = BTreeSet::new();
    for _ in 0..2 {
        seen.insert(match next(&mut events).await {
            Event::Added(c) => format!("+{}", c.meta.name),
            Event::Deleted(c) => format!("-{}", c.meta.name),
            Event::Updated { new, .. } => format!("~{}", new.meta.name),
        });
    }
    assert_eq!(seen, BTreeSet::from(["+new".to_string(), "-gone".to_string()]));
    assert!(
        fake.expired_answers() >= 1,
        "the Controller's watch was answered 410"
    );
    assert!(controller.get_cached(&gone.key()).unwrap().is_none());
    assert_cache_equals_backend(&controller, &*store, KIND).await;
}

async fn next(
    events: &mut futures::stream::BoxStream<'static, Notification<Arc<pilot_model::DynConfig>>>,
) -> Event<Arc<pilot_model::DynConfig>> {
    match tokio::time::timeout(EVENT_TIMEOUT, events.next()).await {
        Ok(Some(Notification::Event(event))) => event,
        other => panic!("expected an event, got {other:?}"),
    }
}
