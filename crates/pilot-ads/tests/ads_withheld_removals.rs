//! Make before break on one stream, state of the world and delta, with a
//! raw ADS client that decides when to ACK: when a route rule is deleted,
//! its subset clusters stay with the proxy (state of the world: still in
//! every CDS response; delta: not named in `removed_resources`) for as
//! long as the proxy has not ACKed the routes without them, whatever else
//! is pushed meanwhile; the ACK brings the removal (delta: clusters, then
//! their load assignments). A rule applied again before the ACK cancels
//! the withheld removal: the clusters are never removed.

mod support;

use std::sync::Arc;

use pilot_ads::XdsType;
use pilot_model::{ConfigStore, Labels, Port, Protocol, Service};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::ads::{CDS, Client, EDS, LDS, RDS, Response};
use support::bookinfo::*;

const V1: &str = "outbound|9080|version=v1|reviews.default.svc.cluster.local";
const V2: &str = "outbound|9080|version=v2|reviews.default.svc.cluster.local";
const SPLIT: &str = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: reviews-split, namespace: default}\n\
    spec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}, weight: 80}, {labels: {version: v2}, weight: 20}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_withholds_a_cluster_removal_until_the_routes_are_acked() {
    withheld(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_withholds_a_cluster_removal_until_the_routes_are_acked() {
    withheld(true).await;
}

/// True when `response` removes `name` from the proxy (state of the world
/// clusters: by leaving it out).
fn removes(response: &Response, delta: bool, name: &str) -> bool {
    if delta {
        return response.removed.iter().any(|n| n == name);
    }
    response.type_url == CDS && !response.resources.iter().any(|(n, _)| n == name)
}

/// Reads responses, ACKing each, until one of type `t` for which `last`
/// holds (not ACKed); returns it and those before it.
async fn until(client: &mut Client, t: &str, last: impl Fn(&Response) -> bool) -> (Response, Vec<Response>) {
    let mut before = Vec::new();
    loop {
        let response = client.next().await;
        if response.type_url == t && last(&response) {
            return (response, before);
        }
        client.answer(&response, None).await;
        before.push(response);
    }
}

async fn withheld(delta: bool) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    for (host, ips) in [(REVIEWS, &["10.1.1.1", "10.1.1.2"][..]), (RATINGS, &["10.2.2.1"])] {
        registry.add_service(Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]));
        for (i, ip) in ips.iter().enumerate() {
            let version = format!("v{}", i + 1);
            registry
                .add_endpoints(
                    host,
                    ip.parse().unwrap(),
                    Labels::from_pairs([("version", version.as_str())]),
                )
                .unwrap();
        }
    }
    let (server, store, port) = start(&registry).await;
    apply(&store, SPLIT).await;
    let mut client = Client::open(port, NODE, delta).await;
    // (A first push may come before the rule's.)
    let (cds, _) = until(&mut client, CDS, |r| {
        [V1, V2]
            .iter()
            .all(|name| r.resources.iter().any(|(n, _)| n == name))
    })
    .await;
    client.answer(&cds, None).await;
    let assignments = vec![
        REVIEWS_CLUSTER.into(),
        RATINGS_CLUSTER.into(),
        V1.into(),
        V2.into(),
    ];
    client.subscribe(EDS, assignments).await;
    let (eds, _) = until(&mut client, EDS, |_| true).await;
    client.answer(&eds, None).await;
    client.subscribe(LDS, vec![]).await;
    let (lds, _) = until(&mut client, LDS, |_| true).await;
    client.answer(&lds, None).await;
    client.subscribe(RDS, vec!["9080".into()]).await;
    let (rds, _) = until(&mut client, RDS, |_| true).await;
    client.answer(&rds, None).await;
    wait_status(&server, XdsType::Route, |s| s.synced()).await;

    // The rule deleted: routes without the subsets, not ACKed yet.
    store
        .delete(
            &pilot_model::ConfigKey::new("RouteRule", "default", "reviews-split"),
            None,
        )
        .await
        .unwrap();
    let (routes, before) = until(&mut client, RDS, |_| true).await;
    assert!(!String::from_utf8_lossy(&routes.resources[0].1).contains("version=v1"));
    // Another push meanwhile (an endpoint of ratings): the removal still
    // waits.
    registry
        .add_endpoints(
            RATINGS,
            "10.2.2.2".parse().unwrap(),
            Labels::from_pairs([("version", "v2")]),
        )
        .unwrap();
    let (marker, between) = until(&mut client, EDS, |r| {
        r.resources.iter().any(|(n, _)| n == RATINGS_CLUSTER)
    })
    .await;
    client.answer(&marker, None).await;
    for response in before.iter().chain(&between) {
        for name in [V1, V2] {
            assert!(
                !removes(response, delta, name),
                "{name} removed before the ACK: {response:?}"
            );
        }
    }
    // The ACK of the routes: then the clusters go (delta: then their load
    // assignments).
    client.answer(&routes, None).await;
    let removal = client.next().await;
    assert_eq!(removal.type_url, CDS, "{removal:?}");
    for name in [V1, V2] {
        assert!(removes(&removal, delta, name), "{name} not removed: {removal:?}");
    }
    assert!(
        removal.resources.iter().any(|(n, _)| n == REVIEWS_CLUSTER) || delta,
        "{removal:?}"
    );
    client.answer(&removal, None).await;
    if delta {
        let assignments = client.next().await;
        assert_eq!(assignments.type_url, EDS, "{assignments:?}");
        let mut removed = assignments.removed.clone();
        removed.sort();
        assert_eq!(removed, [V1, V2], "{assignments:?}");
        client.answer(&assignments, None).await;
    }

    // Applied again, deleted (not ACKed) and applied again before the ACK:
    // the removal is cancelled, the clusters never leave.
    apply(&store, SPLIT).await;
    let (routes, mut seen) = until(&mut client, RDS, |_| true).await;
    client.answer(&routes, None).await;
    wait_status(&server, XdsType::Route, |s| s.synced()).await;
    store
        .delete(
            &pilot_model::ConfigKey::new("RouteRule", "default", "reviews-split"),
            None,
        )
        .await
        .unwrap();
    let (unacked, before) = until(&mut client, RDS, |_| true).await;
    seen.extend(before);
    apply(&store, SPLIT).await;
    let (again, before) = until(&mut client, RDS, |r| r.nonce != unacked.nonce).await;
    seen.extend(before);
    client.answer(&unacked, None).await;
    client.answer(&again, None).await;
    registry.remove_instances(RATINGS, "10.2.2.2".parse().unwrap(), None);
    let (marker, before) = until(&mut client, EDS, |r| {
        r.resources.iter().any(|(n, _)| n == RATINGS_CLUSTER)
    })
    .await;
    seen.extend(before);
    client.answer(&marker, None).await;
    for response in &seen {
        for name in [V1, V2] {
            assert!(!removes(response, delta, name), "{name} removed: {response:?}");
        }
    }
}
