//! Validation on read: objects a backend holds that fail their kind's
//! validation (written by another tool, or by an older, laxer pilot) are
//! kept out of the Controller's cache and listed in its quarantine until
//! the backend holds a valid version, deletes them, or lists without them.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use pilot_model::{ConfigMeta, ConfigStore, DynConfig, FieldError, KindRegistry, KindSchema};
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_memory::MemoryConfigStore;
use pilot_test_support::FlakyStore;

const KIND: &str = "Note";

/// `Note` as the store accepted it (anything goes) or as pilot reads it
/// (`spec.text` must not say "bad").
fn registry(strict: bool) -> KindRegistry {
    let registry = KindRegistry::new();
    registry
        .register_schema(KindSchema::new(
            KIND,
            "notes",
            "example.com",
            "v1",
            move |spec, errors| {
                let text = spec.get("text").and_then(|t| t.as_str()).unwrap_or("");
                if strict && text.contains("bad") {
                    errors.push("spec.text", format!("must not say bad, got {text:?}"));
                }
            },
        ))
        .unwrap();
    registry
}

fn note(name: &str, text: &str) -> DynConfig {
    DynConfig {
        meta: ConfigMeta::new(KIND, "default", name),
        spec: serde_json::json!({ "text": text }),
    }
}

fn rewrite(stored: &Arc<DynConfig>, text: &str) -> DynConfig {
    let mut next = (**stored).clone();
    next.spec = serde_json::json!({ "text": text });
    next
}

async fn next(events: &mut BoxStream<'static, Notification<Arc<DynConfig>>>) -> (char, String) {
    pilot_store::testing::next_change(events, Duration::from_secs(10)).await
}

fn cached(controller: &Controller) -> Vec<String> {
    controller
        .list_cached(KIND, None)
        .unwrap()
        .iter()
        .map(|c| c.meta.name.clone())
        .collect()
}

fn quarantined(controller: &Controller) -> Vec<String> {
    controller
        .quarantine()
        .list()
        .iter()
        .map(|q| q.key.name.clone())
        .collect()
}

fn options() -> ControllerOptions {
    {
        let mut value = ControllerOptions::default();
        value.retry_min = Duration::from_millis(5);
        value.retry_max = Duration::from_millis(20);
        value
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_are_quarantined_from_lists_and_watches_and_come_back_when_fixed() {
    let store = MemoryConfigStore::with_history(registry(false), 4);
    let backend = FlakyStore::with_registry(store.clone(), registry(true));
    let bad1 = store.create(note("n1", "bad one")).await.unwrap();
    let good2 = store.create(note("n2", "fine")).await.unwrap();
    store.create(note("n3", "bad three")).await.unwrap();

    let controller = Controller::with_options(Arc::new(backend.clone()), options());
    let mut events = controller.subscribe(KIND).unwrap();
    controller.run();
    controller.wait_synced().await;

    // The initial list: only the valid object is cached and announced.
    assert_eq!(next(&mut events).await, ('+', "n2".to_string()));
    assert_eq!(cached(&controller), ["n2"]);
    assert_eq!(quarantined(&controller), ["n1", "n3"]);
    let held = controller.quarantine().get(&bad1.key()).unwrap();
    assert_eq!(held.resource_version, bad1.meta.resource_version);
    assert_eq!(
        held.errors,
        [FieldError::new("spec.text", "must not say bad, got \"bad one\"")]
    );
    assert_eq!(controller.quarantine().rejected().get(KIND), Some(&2));
    assert_eq!(controller.quarantine().counts().get(KIND), Some(&2));
    // The Controller's reads (what REST get serves) do not see it either.
    assert_eq!(controller.get(&bad1.key()).await.unwrap(), None);
    assert!(controller.admits(&bad1).is_err());
    assert!(controller.admits(&good2).is_ok());

    // A valid object turned invalid by a write around validation leaves
    // the cache (subscribers see it deleted).
    let bad2 = store.update(rewrite(&good2, "now bad")).await.unwrap();
    assert_eq!(next(&mut events).await, ('-', "n2".to_string()));
    assert!(cached(&controller).is_empty());
    assert_eq!(quarantined(&controller), ["n1", "n2", "n3"]);
    assert_eq!(controller.quarantine().rejected().get(KIND), Some(&3));

    // Fixed in the store: back in the cache, announced as added.
    store.update(rewrite(&bad1, "fixed")).await.unwrap();
    assert_eq!(next(&mut events).await, ('+', "n1".to_string()));
    assert_eq!(quarantined(&controller), ["n2", "n3"]);

    // A delete of a quarantined object releases it (no event: it was never
    // served); the next event proves the delete was applied.
    store.delete(&note("n3", "").key(), None).await.unwrap();
    store.create(note("n4", "fine")).await.unwrap();
    assert_eq!(next(&mut events).await, ('+', "n4".to_string()));
    assert_eq!(quarantined(&controller), ["n2"]);

    // A relist after a gap (history compacted while disconnected) that no
    // longer holds the key releases it too, and one that holds a new
    // invalid object quarantines it.
    backend.disconnect();
    store.delete(&bad2.key(), None).await.unwrap();
    store.create(note("n5", "bad five")).await.unwrap();
    store.create(note("n6", "fine")).await.unwrap();
    store.compact(store.revision());
    backend.reconnect();
    assert_eq!(next(&mut events).await, ('+', "n6".to_string()));
    assert_eq!(quarantined(&controller), ["n5"]);
    assert_eq!(cached(&controller), ["n1", "n4", "n6"]);
    assert_eq!(controller.quarantine().rejected().get(KIND), Some(&4));
}
