//! Replicas on a real etcd: records under each replica's lease, one status
//! writer at a time, and what a replica that stops renewing leaves behind.

use std::time::{Duration, Instant, SystemTime};

use pilot_model::{Membership, ReplicaRecord};
use pilot_store_etcd::{EtcdConfigStore, EtcdMembership, EtcdOptions};
use pilot_test_support::{EtcdServer, PATIENCE};

fn record(replica: &str) -> ReplicaRecord {
    ReplicaRecord {
        replica: replica.into(),
        rest_address: Some("127.0.0.1:8080".into()),
        xds_address: Some("127.0.0.1:15010".into()),
        proxies: Vec::new(),
        writer: false,
        published: SystemTime::now(),
    }
}

async fn store(server: &EtcdServer, prefix: &str) -> EtcdConfigStore {
    EtcdConfigStore::connect(
        &EtcdOptions::new([server.endpoint()]).with_prefix(prefix),
        pilot_api::istio::registry(),
    )
    .await
    .expect("connect to etcd")
}

async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < PATIENCE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn replicas_see_each_other_and_one_writes_status() {
    let server = EtcdServer::start().expect("etcd starts (is etcd-server installed?)");
    let store = store(&server, "/replicas-test").await;
    let ttl = Duration::from_secs(2);
    let a = EtcdMembership::new(&store, "a", ttl);
    let b = EtcdMembership::new(&store, "b", ttl);
    a.publish(&record("a")).await.unwrap();
    b.publish(&record("b")).await.unwrap();
    let names = |records: Vec<ReplicaRecord>| records.into_iter().map(|r| r.replica).collect::<Vec<_>>();
    assert_eq!(names(b.members().await.unwrap()), ["a", "b"]);

    // One writer: the first to campaign, and it stays so.
    assert!(a.campaign().await.unwrap());
    assert!(!b.campaign().await.unwrap());
    assert!(a.campaign().await.unwrap());

    // The records are not configuration objects.
    use pilot_model::ConfigStore;
    for kind in pilot_api::istio::registry().kinds() {
        assert!(
            store.list(&kind, None).await.unwrap().is_empty(),
            "{kind} lists replica keys"
        );
    }

    // A clean resign hands over at once.
    a.resign().await.unwrap();
    assert_eq!(names(b.members().await.unwrap()), ["b"]);
    assert!(b.campaign().await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_that_stops_renewing_drops_out_within_its_ttl() {
    let server = EtcdServer::start().expect("etcd starts (is etcd-server installed?)");
    let store = store(&server, "/replicas-test").await;
    let ttl = Duration::from_secs(2);
    let b = EtcdMembership::new(&store, "b", ttl);
    {
        let a = EtcdMembership::new(&store, "a", ttl);
        a.publish(&record("a")).await.unwrap();
        assert!(a.campaign().await.unwrap());
        // Dropped without resigning: its lease is no longer renewed, as
        // after kill -9.
    }
    b.publish(&record("b")).await.unwrap();
    assert!(!b.campaign().await.unwrap(), "a still holds the election");
    until("a's record and election to expire", async || {
        b.members().await.unwrap().len() == 1 && b.campaign().await.unwrap()
    })
    .await;
    assert_eq!(b.members().await.unwrap()[0].replica, "b");
}

/// The membership conformance suite on one real etcd, each run under a
/// prefix of its own.
mod conformance {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, OnceLock};

    use super::*;

    fn server() -> &'static EtcdServer {
        static SERVER: OnceLock<EtcdServer> = OnceLock::new();
        SERVER.get_or_init(|| EtcdServer::start().expect("etcd starts (is etcd-server installed?)"))
    }

    async fn replicas(names: Vec<String>, ttl: Duration) -> Vec<Arc<dyn Membership>> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let prefix = format!("/membership/{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let store = store(server(), &prefix).await;
        names
            .into_iter()
            .map(|name| Arc::new(EtcdMembership::new(&store, name, ttl)) as Arc<dyn Membership>)
            .collect()
    }

    pilot_store::membership_conformance_suite!(replicas);
}
