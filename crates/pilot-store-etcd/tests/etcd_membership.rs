//! Replicas on a real etcd: records under each replica's lease, one status
//! writer at a time, and what a replica that stops renewing leaves behind.

use std::time::{Duration, Instant, SystemTime};

use pilot_model::{ConnectedProxy, Membership, ProxyDistribution, ReplicaRecord, TypeRecord};
use pilot_store_etcd::{EtcdConfigStore, EtcdMembership, EtcdOptions, MAX_RECORD_BYTES, PAGE_BYTES};
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

/// A proxy as a replica reports it after a few pushes (about 450 bytes of
/// JSON): four types ACKed, revisions of the pushed kinds.
fn typical_proxy(replica: &str, i: usize, version: u64) -> ConnectedProxy {
    let node_id = format!(
        "sidecar~10.{}.{}.{}~reviews-v1-7d4f9c-{i:05}.default~default.svc.cluster.local",
        replica.len(),
        i / 250,
        i % 250
    );
    let types = ["CDS", "EDS", "LDS", "RDS"]
        .into_iter()
        .map(|t| {
            let record = TypeRecord {
                sent: Some(version.to_string()),
                acked: Some(version.to_string()),
                nack: None,
            };
            (t.to_string(), record)
        })
        .collect();
    let acked = ["RouteRule", "DestinationPolicy", "EgressRule", "ServiceEntry"]
        .into_iter()
        .map(|k| (k.to_string(), 1_234_567 + version))
        .collect();
    ConnectedProxy {
        node_id: node_id.clone(),
        node_name: None,
        incremental: false,
        types,
        distribution: ProxyDistribution {
            node_id,
            acked: Some(acked),
            nack: None,
            withheld: Vec::new(),
        },
        process: None,
    }
}

#[test]
fn a_record_of_a_typical_proxy_is_small() {
    let mut record = record("pilot-0-8080");
    record.proxies = (0..1000).map(|i| typical_proxy("a", i, 1234)).collect();
    let bytes = serde_json::to_vec(&record).unwrap().len();
    let per_proxy = bytes / 1000;
    // The module doc says about 450 bytes: about 3,000 proxies would fill
    // one request, and a page of PAGE_BYTES holds about 550.
    assert!((300..600).contains(&per_proxy), "{per_proxy} bytes per proxy");
    assert!(
        MAX_RECORD_BYTES / per_proxy >= 2_500,
        "{per_proxy} bytes per proxy"
    );
    assert!(PAGE_BYTES / per_proxy >= 400, "{per_proxy} bytes per proxy");
}

fn big_record(replica: &str, proxies: usize) -> ReplicaRecord {
    let mut record = record(replica);
    record.published = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    record.proxies = (0..proxies).map(|i| typical_proxy(replica, i, 1)).collect();
    record.proxies.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    record
}

/// etcd's revision: one more per write request that changed something.
async fn revision(client: &mut etcd_client::Client) -> i64 {
    client.get("/", None).await.unwrap().header().unwrap().revision()
}

async fn page_keys(client: &mut etcd_client::Client, prefix: &str) -> Vec<String> {
    let response = client
        .get(
            format!("{prefix}/_replica_pages/"),
            Some(etcd_client::GetOptions::new().with_prefix().with_keys_only()),
        )
        .await
        .unwrap();
    response
        .kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_of_ten_thousand_proxies_each_publish_and_read_back() {
    // 10,000 proxies are about 4.5 MB of records per replica: three times
    // etcd's request limit, and three such records more than its client
    // takes in one response.
    let server = EtcdServer::start().expect("etcd starts (is etcd-server installed?)");
    let prefix = "/paged";
    let store = store(&server, prefix).await;
    let ttl = Duration::from_secs(3);
    let names = ["a", "b", "c"];
    let replicas: Vec<EtcdMembership> = names
        .iter()
        .map(|n| EtcdMembership::new(&store, *n, ttl))
        .collect();
    let mut records: Vec<ReplicaRecord> = names.iter().map(|n| big_record(n, 10_000)).collect();
    for (replica, record) in replicas.iter().zip(&records) {
        replica
            .publish(record)
            .await
            .expect("a record of 10,000 proxies publishes");
    }
    for replica in &replicas {
        assert!(
            replica.members().await.expect("members reads every record") == records,
            "every replica reads the three records back whole"
        );
    }

    // One proxy's ACK changes: one request writes its page, one the
    // record, and every reader sees the change.
    let mut client = store.client();
    let before = revision(&mut client).await;
    records[1].proxies[4321] = typical_proxy("b", 4321, 2);
    records[1].proxies.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    replicas[1].publish(&records[1]).await.unwrap();
    assert_eq!(
        revision(&mut client).await - before,
        2,
        "a change to one proxy rewrites its page and the record, not every page"
    );
    assert!(replicas[0].members().await.unwrap() == records);

    // Proxies leave and come: every one listed exactly once.
    records[2].proxies.retain(|p| !p.node_id.contains("-0"));
    records[2]
        .proxies
        .extend((20_000..20_100).map(|i| typical_proxy("c", i, 3)));
    records[2].proxies.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    replicas[2].publish(&records[2]).await.unwrap();
    assert!(replicas[0].members().await.unwrap() == records);

    // Shrunk to a few proxies, the record is one key again: the pages go.
    let pages_before = page_keys(&mut client, prefix).await;
    assert!(pages_before.iter().any(|k| k.contains("/_replica_pages/a/")));
    records[0] = big_record("a", 10);
    replicas[0].publish(&records[0]).await.unwrap();
    let pages_after = page_keys(&mut client, prefix).await;
    assert!(
        !pages_after.iter().any(|k| k.contains("/_replica_pages/a/")),
        "{pages_after:?}"
    );
    assert!(replicas[2].members().await.unwrap() == records);

    // A replica that stops renewing takes its pages with it.
    drop(replicas);
    let reader = EtcdMembership::new(&store, "d", ttl);
    let mut left = page_keys(&mut client, prefix).await;
    let started = Instant::now();
    while !left.is_empty() || !reader.members().await.unwrap().is_empty() {
        assert!(started.elapsed() < PATIENCE + ttl, "pages left: {}", left.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
        left = page_keys(&mut client, prefix).await;
    }
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
