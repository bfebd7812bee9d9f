//! The watch contract: a snapshot's revision, and watches that resume
//! strictly after a revision.

use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{ConfigWatch, Revision, WatchEvent, WatchStream};

use super::{EVENT_TIMEOUT, StoreFactory, mock, registry};

const KIND: &str = "MockConfig";

/// Reads `count` put/delete events (skipping progress) from `stream`.
async fn changes(stream: &mut WatchStream, count: usize) -> Vec<(char, String, Revision)> {
    let mut seen = Vec::new();
    while seen.len() < count {
        let item = tokio::time::timeout(EVENT_TIMEOUT, stream.next())
            .await
            .expect("watch event in time")
            .expect("watch stream open")
            .expect("watch event, not an error");
        match item {
            WatchEvent::Put { revision, config } => seen.push(('+', config.meta.name.clone(), revision)),
            WatchEvent::Delete { revision, key } => seen.push(('-', key.name, revision)),
            WatchEvent::Progress { .. } => {}
            WatchEvent::Undecodable(u) => panic!("a value pilot wrote does not decode: {u:?}"),
        }
    }
    seen
}

/// A snapshot holds what was written before it; a watch after its revision
/// delivers exactly the later changes of that kind, in order, with
/// increasing revisions; resuming after any of them delivers the rest.
pub async fn watch_resumes_after_revision(factory: &dyn StoreFactory) {
    let store: Arc<dyn ConfigWatch> = factory.make(registry()).await;
    store.create(mock("default", "before", "v")).await.unwrap();
    let snapshot = store.snapshot(KIND).await.unwrap();
    assert_eq!(snapshot.items.len(), 1);
    assert_eq!(snapshot.items[0].meta.name, "before");

    let mut live = store.watch(KIND, snapshot.revision).await.unwrap();
    let a = store.create(mock("default", "a", "1")).await.unwrap();
    let mut a2 = (*a).clone();
    a2.spec["key"] = "2".into();
    store.update(a2).await.unwrap();
    store
        .create(pilot_model::DynConfig {
            meta: pilot_model::ConfigMeta::new("MockOther", "default", "noise"),
            spec: serde_json::json!({"text": "not this kind"}),
        })
        .await
        .unwrap();
    store.delete(&a.key(), None).await.unwrap();

    let seen = changes(&mut live, 3).await;
    let shape: Vec<(char, &str)> = seen.iter().map(|(op, name, _)| (*op, name.as_str())).collect();
    assert_eq!(shape, [('+', "a"), ('+', "a"), ('-', "a")]);
    assert!(
        seen.windows(2).all(|w| w[0].2 < w[1].2),
        "revisions increase: {seen:?}"
    );
    assert!(seen[0].2 > snapshot.revision);

    let mut resumed = store.watch(KIND, seen[0].2).await.unwrap();
    let rest = changes(&mut resumed, 2).await;
    assert_eq!(rest, seen[1..]);

    let current = store.current_revision().await.unwrap();
    assert!(current >= seen[2].2);
    let later = store.snapshot(KIND).await.unwrap();
    assert!(later.revision >= seen[2].2);
    assert_eq!(later.items.len(), 1, "only `before` is left");
}
