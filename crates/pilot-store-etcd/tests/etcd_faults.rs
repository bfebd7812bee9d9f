//! The etcd backend through failures: a killed and restarted server, a
//! compaction during a partition, and a leader lost in a three-member
//! cluster. Each ends with the Controller's cache equal to etcd and no
//! acknowledged write or delete lost.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use pilot_model::{ConfigKey, ConfigStore, ConfigWatch, DynConfig, Event};
use pilot_store::testing::{mock, registry};
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::{EtcdCluster, EtcdServer};
use support::{Proxy, create_acknowledged, delete_acknowledged, wait_cache_equals_etcd};

const KIND: &str = "MockConfig";

fn options() -> ControllerOptions {
    {
        let mut value = ControllerOptions::default();
        value.retry_min = Duration::from_millis(50);
        value.retry_max = Duration::from_millis(500);
        value
    }
}

/// A subscriber's view: the state its events add up to.
fn follow_events(controller: &Controller) -> Arc<Mutex<BTreeMap<ConfigKey, DynConfig>>> {
    let view = Arc::new(Mutex::new(BTreeMap::new()));
    let mut events = controller.subscribe(KIND).unwrap();
    let shared = Arc::clone(&view);
    tokio::spawn(async move {
        while let Some(notification) = events.next().await {
            let Notification::Event(event) = notification else {
                panic!("the subscriber lagged");
            };
            let mut view = shared.lock().unwrap();
            match event {
                Event::Added(c) | Event::Updated { new: c, .. } => {
                    view.insert(c.key(), (*c).clone());
                }
                Event::Deleted(c) => {
                    view.remove(&c.key());
                }
            }
        }
    });
    view
}

/// A synced Controller over `store`, and its subscriber's view.
async fn running_controller(
    store: &EtcdConfigStore,
) -> (Controller, Arc<Mutex<BTreeMap<ConfigKey, DynConfig>>>) {
    let controller = Controller::with_options(Arc::new(store.clone()), options());
    let view = follow_events(&controller);
    controller.run();
    controller.wait_synced().await;
    (controller, view)
}

/// Starts writing `count` objects in the background and returns once
/// `landed` of them are in etcd, so a fault can strike mid-stream.
async fn start_writing(
    store: &EtcdConfigStore,
    count: usize,
    landed: usize,
) -> tokio::task::JoinHandle<(BTreeSet<ConfigKey>, BTreeSet<ConfigKey>)> {
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { write_stream(&store, 0, count).await })
    };
    while store.list(KIND, None).await.map(|l| l.len()).unwrap_or(0) < landed {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writer
}

/// Writes `count` objects, deleting every fifth one after it was written;
/// returns the keys acknowledged as present and as deleted.
async fn write_stream(
    store: &dyn ConfigStore,
    from: usize,
    count: usize,
) -> (BTreeSet<ConfigKey>, BTreeSet<ConfigKey>) {
    let (mut present, mut deleted) = (BTreeSet::new(), BTreeSet::new());
    for i in from..from + count {
        let config = mock("default", &format!("obj-{i}"), "v");
        let key = config.key();
        assert!(create_acknowledged(store, config).await);
        if i % 5 == 0 {
            delete_acknowledged(store, &key).await;
            deleted.insert(key);
        } else {
            present.insert(key);
        }
    }
    (present, deleted)
}

fn assert_nothing_lost(
    content: &BTreeMap<ConfigKey, DynConfig>,
    view: &Mutex<BTreeMap<ConfigKey, DynConfig>>,
    present: &BTreeSet<ConfigKey>,
    deleted: &BTreeSet<ConfigKey>,
) {
    for key in present {
        assert!(content.contains_key(key), "acknowledged write {key} lost");
    }
    for key in deleted {
        assert!(!content.contains_key(key), "acknowledged delete of {key} lost");
    }
    assert_eq!(
        *view.lock().unwrap(),
        *content,
        "the subscriber's events add up to etcd's content"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_and_restart_during_writes_loses_nothing() {
    let mut server = EtcdServer::start().unwrap();
    let store = EtcdConfigStore::connect(&EtcdOptions::new([server.endpoint()]), registry())
        .await
        .unwrap();
    let (controller, view) = running_controller(&store).await;
    let writer = start_writing(&store, 120, 30).await;
    // Some writes have landed: kill -9 and restart on the same data.
    let server = tokio::task::spawn_blocking(move || {
        server.kill();
        std::thread::sleep(Duration::from_millis(500));
        server.restart().unwrap();
        server
    })
    .await
    .unwrap();
    let (present, deleted) = writer.await.unwrap();
    let content = wait_cache_equals_etcd(&controller, &store, KIND).await;
    assert_eq!(content.len(), present.len());
    assert_nothing_lost(&content, &view, &present, &deleted);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_during_a_partition_is_relisted() {
    let server = EtcdServer::start().unwrap();
    let proxy = Proxy::start(format!(
        "127.0.0.1:{}",
        server.endpoint().rsplit(':').next().unwrap()
    ))
    .await;
    let direct = EtcdConfigStore::connect(&EtcdOptions::new([server.endpoint()]), registry())
        .await
        .unwrap();
    let behind_proxy = EtcdConfigStore::connect(&EtcdOptions::new([proxy.endpoint()]), registry())
        .await
        .unwrap();
    let controller = Controller::with_options(Arc::new(behind_proxy), options());
    let mut events = controller.subscribe(KIND).unwrap();
    let view = follow_events(&controller);
    controller.run();
    controller.wait_synced().await;

    let mut stored = Vec::new();
    for name in ["a", "b", "c"] {
        stored.push(direct.create(mock("default", name, "1")).await.unwrap());
    }
    for _ in 0..3 {
        tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .unwrap()
            .unwrap();
    }

    let before_gap = direct.current_revision().await.unwrap();
    proxy.cut();
    direct.delete(&stored[0].key(), None).await.unwrap();
    let mut b = (*stored[1]).clone();
    b.spec["key"] = "2".into();
    direct.update(b).await.unwrap();
    direct.create(mock("default", "d", "1")).await.unwrap();
    let revision = direct
        .client()
        .get("\0", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    direct.client().compact(revision, None).await.unwrap();
    // The partition holds: nothing reaches the Controller...
    assert!(
        tokio::time::timeout(Duration::from_millis(500), events.next())
            .await
            .is_err(),
        "no event crosses the partition"
    );
    // ...and the history it would resume from is gone, so only a relist
    // can bring it up to date.
    assert!(matches!(
        direct.watch(KIND, before_gap).await.unwrap().next().await,
        Some(Err(pilot_model::StoreError::Compacted { .. }))
    ));
    proxy.restore();

    let mut seen = BTreeSet::new();
    for _ in 0..3 {
        let n = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .unwrap()
            .unwrap();
        let Notification::Event(event) = n else {
            panic!("lagged")
        };
        let op = match &event {
            Event::Added(_) => '+',
            Event::Updated { .. } => '~',
            Event::Deleted(_) => '-',
        };
        seen.insert((op, event.object().meta.name.clone()));
    }
    let expected: BTreeSet<(char, String)> = [('-', "a"), ('~', "b"), ('+', "d")]
        .into_iter()
        .map(|(o, n)| (o, n.to_string()))
        .collect();
    assert_eq!(seen, expected, "the relist emitted what the gap hid");
    let content = wait_cache_equals_etcd(&controller, &direct, KIND).await;
    assert_eq!(*view.lock().unwrap(), content);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_leader_of_three_members_loses_nothing() {
    let mut cluster = tokio::task::spawn_blocking(|| EtcdCluster::start(3))
        .await
        .unwrap()
        .unwrap();
    let store = EtcdConfigStore::connect(&EtcdOptions::new(cluster.endpoints()), registry())
        .await
        .unwrap();
    let (controller, view) = running_controller(&store).await;
    let writer = start_writing(&store, 100, 25).await;
    // Find the leader and kill it.
    let mut leader = None;
    for (i, endpoint) in cluster.endpoints().iter().enumerate() {
        let mut client = etcd_client::Client::connect([endpoint], None).await.unwrap();
        let status = client.status().await.unwrap();
        if status.header().unwrap().member_id() == status.leader() {
            leader = Some(i);
        }
    }
    let leader = leader.expect("a leader");
    let mut dead = cluster.members.remove(leader);
    tokio::task::spawn_blocking(move || dead.kill()).await.unwrap();

    let (present, deleted) = writer.await.unwrap();
    // Read through the survivors only.
    let survivors = EtcdConfigStore::connect(&EtcdOptions::new(cluster.endpoints()), registry())
        .await
        .unwrap();
    let content = wait_cache_equals_etcd(&controller, &survivors, KIND).await;
    assert_eq!(content.len(), present.len());
    assert_nothing_lost(&content, &view, &present, &deleted);
}
