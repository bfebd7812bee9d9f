//! The watch contract: a snapshot's revision, and watches that resume
//! strictly after a revision (the rules in
//! [`ConfigWatch`](pilot_model::ConfigWatch)'s documentation).

use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{ConfigWatch, Revision, StoreError, WatchEvent, WatchStream};

use super::check::{equal, holds, must_match, ok};
use super::{EVENT_TIMEOUT, StoreFactory, mock, registry};

const KIND: &str = "MockConfig";

/// Reads `count` put/delete events (skipping progress) from `stream`.
async fn changes(stream: &mut WatchStream, count: usize) -> Vec<(char, String, Revision)> {
    let mut seen = Vec::new();
    while seen.len() < count {
        let item = match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
            Ok(Some(item)) => item,
            Ok(None) => panic!(
                "a watch must stay open while the store runs: it ended after {seen:?}, {} event(s) short",
                count - seen.len()
            ),
            Err(_) => panic!(
                "a watch must deliver every write of its kind: after {seen:?}, none of the {} more \
                 came within {EVENT_TIMEOUT:?}",
                count - seen.len()
            ),
        };
        match ok(
            item,
            "a watch whose history is kept must deliver events, not errors",
        ) {
            WatchEvent::Put { revision, config } => seen.push(('+', config.meta.name.clone(), revision)),
            WatchEvent::Delete { revision, key } => seen.push(('-', key.name, revision)),
            WatchEvent::Progress { .. } => {}
            WatchEvent::Undecodable(u) => {
                panic!("a watch must decode every object the store itself wrote, got Undecodable({u:?})")
            }
        }
    }
    seen
}

/// A snapshot holds what was written before it; a watch after its revision
/// delivers exactly the later changes of that kind, in order, with
/// increasing revisions; resuming after any of them delivers the rest.
pub async fn watch_resumes_after_revision(factory: &dyn StoreFactory) {
    let store: Arc<dyn ConfigWatch> = factory.make(registry()).await;
    let created = "create of a new, valid object must succeed";
    ok(store.create(mock("default", "before", "v")).await, created);
    let snapshot = ok(
        store.snapshot(KIND).await,
        "snapshot of a registered kind must succeed",
    );
    let names: Vec<&str> = snapshot.items.iter().map(|c| c.meta.name.as_str()).collect();
    equal(
        names,
        vec!["before"],
        "a snapshot must hold every object written before it",
    );

    let mut live = ok(
        store.watch(KIND, snapshot.revision).await,
        "watch after a snapshot's revision must succeed",
    );
    let a = ok(store.create(mock("default", "a", "1")).await, created);
    let mut a2 = (*a).clone();
    a2.spec["key"] = "2".into();
    ok(
        store.update(a2).await,
        "update carrying the current resource version must succeed",
    );
    ok(
        store
            .create(pilot_model::DynConfig {
                meta: pilot_model::ConfigMeta::new("MockOther", "default", "noise"),
                spec: serde_json::json!({"text": "not this kind"}),
            })
            .await,
        created,
    );
    ok(
        store.delete(&a.key(), None).await,
        "delete without a version must succeed",
    );

    let seen = changes(&mut live, 3).await;
    let shape: Vec<(char, &str)> = seen.iter().map(|(op, name, _)| (*op, name.as_str())).collect();
    equal(
        shape,
        vec![('+', "a"), ('+', "a"), ('-', "a")],
        "a watch must deliver its kind's writes after the revision, in order, and no other kind's \
         ('+' put, '-' delete)",
    );
    holds(
        seen.windows(2).all(|w| w[0].2 < w[1].2),
        "a watch's events must carry increasing revisions",
        &seen,
    );
    holds(
        seen[0].2 > snapshot.revision,
        "a watch must deliver only writes strictly after the revision it resumed after",
        (snapshot.revision, &seen),
    );

    let mut resumed = ok(
        store.watch(KIND, seen[0].2).await,
        "watch after a revision the store handed out must succeed",
    );
    let rest = changes(&mut resumed, 2).await;
    equal(
        &rest[..],
        &seen[1..],
        "a watch resumed after an event's revision must deliver exactly the events after it",
    );

    let current = ok(store.current_revision().await, "current_revision must succeed");
    holds(
        current >= seen[2].2,
        "current_revision must be at least the revision of the last write",
        (current, &seen),
    );
    let later = ok(
        store.snapshot(KIND).await,
        "snapshot of a registered kind must succeed",
    );
    holds(
        later.revision >= seen[2].2,
        "a snapshot's revision must be at least that of every write it holds",
        (later.revision, &seen),
    );
    let names: Vec<&str> = later.items.iter().map(|c| c.meta.name.as_str()).collect();
    equal(
        names,
        vec!["before"],
        "a snapshot must hold what is stored now, not what was deleted",
    );

    must_match!(
        store.snapshot("Nope").await,
        Err(StoreError::UnknownKind { .. }),
        "snapshot of an unregistered kind must fail with UnknownKind"
    );
    let unknown_watch = store.watch("Nope", later.revision).await.map(|_| ());
    must_match!(
        unknown_watch,
        Err(StoreError::UnknownKind { .. }),
        "watch of an unregistered kind must fail with UnknownKind"
    );
}
