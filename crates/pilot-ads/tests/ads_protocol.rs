//! The protocol rules both ADS flavours share, run once for state of the
//! world and once for delta against the real server on loopback: the
//! version recorded as ACKed is the one the ACKed nonce was sent with (not
//! what the client claims), a NACK is recorded and not answered with the
//! same thing again (but with the configuration without the object it
//! blames), and after a change of clusters (listeners) the load
//! assignments (route configurations) are sent again, a new cluster's
//! before the proxy subscribes to it. An endpoint change
//! sends, in both protocols, only the load assignment that changed.

mod support;

use std::sync::Arc;

use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use pilot_ads::XdsType;
use pilot_model::{Labels, Port, Protocol, Service};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::ads::{CDS, Client, EDS, LDS, RDS};
use prost::Message;
use support::bookinfo::*;

/// The endpoints' addresses of an encoded load assignment.
fn addresses(assignment: &[u8]) -> Vec<String> {
    use envoy_types::pb::envoy::config::core::v3::address::Address;
    use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
    let assignment = ClusterLoadAssignment::decode(assignment).unwrap();
    let mut found: Vec<String> = assignment
        .endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(HostIdentifier::Endpoint(endpoint)) => match &endpoint.address.as_ref()?.address {
                Some(Address::SocketAddress(socket)) => Some(socket.address.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    found.sort();
    found
}

/// An endpoint added to one of two subscribed services: the EDS response
/// holds that service's assignment only (state of the world too: the
/// client keeps the other). A new service, then a subscription naming it
/// besides the two: the response holds the new assignment only.
async fn endpoint_change(delta: bool) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    for (host, ip) in [(REVIEWS, "10.1.1.1"), (RATINGS, "10.2.2.1")] {
        registry.add_service(Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]));
        registry
            .add_endpoints(host, ip.parse().unwrap(), Labels::new())
            .unwrap();
    }
    let (server, _store, port) = start(&registry).await;
    let mut client = Client::open(port, NODE, delta).await;
    let cds = client.next().await;
    assert_eq!(cds.type_url, CDS);
    client.answer(&cds, None).await;
    client
        .subscribe(EDS, vec![RATINGS_CLUSTER.into(), REVIEWS_CLUSTER.into()])
        .await;
    let eds = client.next().await;
    assert_eq!(eds.type_url, EDS);
    let mut names: Vec<&str> = eds.resources.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, [RATINGS_CLUSTER, REVIEWS_CLUSTER], "{eds:?}");
    client.answer(&eds, None).await;
    wait_status(&server, XdsType::Endpoint, |s| s.synced()).await;

    // One endpoint added to ratings.
    registry
        .add_endpoints(RATINGS, "10.2.2.2".parse().unwrap(), Labels::new())
        .unwrap();
    let changed = client.next().await;
    assert_eq!(changed.type_url, EDS, "{changed:?}");
    assert_eq!(
        changed.resources.len(),
        1,
        "only the changed assignment: {changed:?}"
    );
    assert_eq!(changed.resources[0].0, RATINGS_CLUSTER);
    assert_eq!(addresses(&changed.resources[0].1), ["10.2.2.1", "10.2.2.2"]);
    assert_ne!(changed.version, eds.version);
    client.answer(&changed, None).await;
    let status = wait_status(&server, XdsType::Endpoint, |s| {
        s.acked.as_deref() == Some(&changed.version)
    })
    .await;
    assert!(status.synced(), "{status:?}");

    // A new service: CDS names its cluster, and its load assignment
    // follows; the proxy subscribes to it besides the two it has, and is
    // sent the new one only.
    registry.add_service(Service::new(
        DETAILS,
        vec![Port::new("http", 9080, Protocol::Http)],
    ));
    registry
        .add_endpoints(DETAILS, "10.3.3.1".parse().unwrap(), Labels::new())
        .unwrap();
    let cds = client.next().await;
    assert_eq!(cds.type_url, CDS, "{cds:?}");
    assert!(
        cds.resources.iter().any(|(name, _)| name == DETAILS_CLUSTER),
        "{cds:?}"
    );
    client.answer(&cds, None).await;
    // Its load assignment follows at once (the new cluster warms waiting
    // for it), before the proxy subscribes.
    let early = client.next().await;
    assert_eq!(early.type_url, EDS, "{early:?}");
    let names: Vec<&str> = early.resources.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, [DETAILS_CLUSTER], "only the new assignment: {early:?}");
    client.answer(&early, None).await;
    if delta {
        client.subscribe(EDS, vec![DETAILS_CLUSTER.into()]).await;
    } else {
        client
            .subscribe(
                EDS,
                vec![
                    DETAILS_CLUSTER.into(),
                    RATINGS_CLUSTER.into(),
                    REVIEWS_CLUSTER.into(),
                ],
            )
            .await;
    }
    // The proxy is sent the new assignment only, until it holds the
    // instance. The service went out alone (a change that comes alone is
    // pushed at once), and its instance, added right after it, in that
    // push or in the next one.
    let added = loop {
        let added = client.next().await;
        assert_eq!(added.type_url, EDS, "{added:?}");
        let names: Vec<&str> = added.resources.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [DETAILS_CLUSTER], "only the new assignment: {added:?}");
        if addresses(&added.resources[0].1) == ["10.3.3.1"] {
            break added;
        }
        assert_eq!(
            addresses(&added.resources[0].1),
            Vec::<String>::new(),
            "{added:?}"
        );
        client.answer(&added, None).await;
    };
    client.answer(&added, None).await;
    wait_status(&server, XdsType::Endpoint, |s| {
        s.acked.as_deref() == Some(&added.version)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_endpoint_change_sends_only_the_changed_assignment() {
    endpoint_change(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_endpoint_change_sends_only_the_changed_assignment() {
    endpoint_change(true).await;
}

async fn protocol_rules(delta: bool) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    registry.add_service(Service::new(
        REVIEWS,
        vec![Port::new("http", 9080, Protocol::Http)],
    ));
    registry
        .add_endpoints(REVIEWS, "10.1.1.1".parse().unwrap(), Labels::new())
        .unwrap();
    let (server, store, port) = start(&registry).await;
    let mut client = Client::open(port, NODE, delta).await;

    // Subscribe to everything as Envoy does, ACKing each response.
    let cds = client.next().await;
    assert_eq!(cds.type_url, CDS);
    client.answer(&cds, None).await;
    // The version recorded is the one sent with the ACKed nonce.
    let status = wait_status(&server, XdsType::Cluster, |s| s.acked.is_some()).await;
    assert_eq!(status.acked.as_deref(), Some(cds.version.as_str()), "{status:?}");
    assert!(status.synced());
    client.subscribe(EDS, vec![REVIEWS_CLUSTER.into()]).await;
    let eds = client.next().await;
    assert_eq!(eds.type_url, EDS);
    assert_eq!(eds.resources.len(), 1, "{eds:?}");
    client.answer(&eds, None).await;
    client.subscribe(LDS, vec![]).await;
    let lds = client.next().await;
    assert_eq!(lds.type_url, LDS);
    client.answer(&lds, None).await;
    client.subscribe(RDS, vec!["9080".into()]).await;
    let rds = client.next().await;
    assert_eq!(rds.type_url, RDS);
    client.answer(&rds, None).await;
    wait_status(&server, XdsType::Route, |s| s.synced()).await;

    // A rule changing routes only: RDS alone is sent, and NACKed.
    apply(
        &store,
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: reviews-timeout, namespace: default}\n\
         spec:\n  destination: {name: reviews}\n  httpReqTimeout: {simpleTimeout: {timeout: 3s}}\n",
    )
    .await;
    let rejected = client.next().await;
    assert_eq!(rejected.type_url, RDS, "{rejected:?}");
    assert_ne!(rejected.version, rds.version);
    client.answer(&rejected, Some("route rejected by the test")).await;
    let status = wait_status(&server, XdsType::Route, |s| s.nack.is_some()).await;
    let nack = status.nack.clone().unwrap();
    assert_eq!(nack.version, rejected.version);
    assert_eq!(nack.message, "route rejected by the test");
    assert_eq!(
        status.acked.as_deref(),
        Some(rds.version.as_str()),
        "the ACKed version stays"
    );
    // The NACK is blamed on the rule the refused routes brought: it is
    // left out for this proxy, and the routes without it follow, not the
    // refused ones again.
    let without = client.next().await;
    assert_eq!(without.type_url, RDS, "{without:?}");
    assert_ne!(without.version, rejected.version);
    assert_eq!(
        without.resources, rds.resources,
        "the routes without the rejected rule"
    );
    client.answer(&without, None).await;
    wait_status(&server, XdsType::Route, |s| s.synced()).await;

    // A policy changing the reviews cluster: CDS, then its load assignment
    // again although the assignment did not change. The NACKed routes are
    // not sent again.
    apply(
        &store,
        "apiVersion: config.istio.io/v1alpha2\nkind: DestinationPolicy\nmetadata: {name: reviews-lb, namespace: default}\n\
         spec:\n  destination: {name: reviews}\n  loadBalancing: {name: LEAST_CONN}\n",
    )
    .await;
    let cds = client.next().await;
    assert_eq!(cds.type_url, CDS, "the NACK was answered: {cds:?}");
    assert!(
        cds.resources.iter().any(|(name, _)| name == REVIEWS_CLUSTER),
        "{cds:?}"
    );
    client.answer(&cds, None).await;
    let eds2 = client.next().await;
    assert_eq!(eds2.type_url, EDS, "{eds2:?}");
    assert_eq!(eds2.version, cds.version);
    assert_eq!(eds2.resources, eds.resources, "the same assignment, sent again");
    client.answer(&eds2, None).await;
    wait_status(&server, XdsType::Endpoint, |s| {
        s.acked.as_deref() == Some(&eds2.version)
    })
    .await;

    // A new service on a new port: a new listener, so the route
    // configuration is sent again although it did not change.
    registry.add_service(Service::new(
        "details.default.svc.cluster.local",
        vec![Port::new("http", 8080, Protocol::Http)],
    ));
    let cds = client.next().await;
    assert_eq!(cds.type_url, CDS, "{cds:?}");
    client.answer(&cds, None).await;
    // Both protocols re-send only the changed clusters' assignments after
    // a CDS change: here a new one the proxy has not subscribed to yet,
    // whose cluster warms waiting for it.
    let assignments = client.next().await;
    assert_eq!(assignments.type_url, EDS, "{assignments:?}");
    let names: Vec<&str> = assignments.resources.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["outbound|8080||details.default.svc.cluster.local"]);
    client.answer(&assignments, None).await;
    let next = client.next().await;
    assert_eq!(next.type_url, LDS, "{next:?}");
    client.answer(&next, None).await;
    let routes = client.next().await;
    assert_eq!(routes.type_url, RDS, "{routes:?}");
    assert_eq!(routes.version, cds.version);
    assert_eq!(
        routes.resources, without.resources,
        "the same route configuration, sent again"
    );
    client.answer(&routes, None).await;
    let status = wait_status(&server, XdsType::Route, |s| s.synced()).await;
    assert_eq!(status.acked.as_deref(), Some(routes.version.as_str()));
    // Every type a sidecar subscribes to (scopes are an edge proxy's).
    for t in XdsType::ALL.into_iter().filter(|t| *t != XdsType::ScopedRoute) {
        let status = wait_status(&server, t, |s| s.acked.is_some()).await;
        assert!(
            status
                .acked
                .as_deref()
                .is_some_and(|v| !v.starts_with("client-made")),
            "{status:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_follows_the_protocol_rules() {
    protocol_rules(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_follows_the_protocol_rules() {
    protocol_rules(true).await;
}
