//! Which objects a NACK leaves out, state of the world and delta, with a
//! raw ADS client that decides what to reject: a route configuration
//! refused after a rule was written leaves out that rule only, not a
//! policy written before it that changed only clusters (which the proxy
//! ACKed); the next push carries the routes without the rule, and a rule
//! written later reaches the proxy. A refusal with nothing ACKed of the
//! type before leaves nothing out.

mod support;

use std::sync::Arc;

use pilot_ads::XdsType;
use pilot_model::{Labels, Port, Protocol, Service};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::ads::{CDS, Client, EDS, LDS, RDS, Response};
use support::bookinfo::*;

const POLICY: &str = "apiVersion: config.istio.io/v1alpha2\nkind: DestinationPolicy\nmetadata: {name: ratings-lb, namespace: default}\n\
    spec:\n  destination: {name: ratings}\n  loadBalancing: {name: RANDOM}\n";
const BAD: &str = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: reviews-bad, namespace: default}\n\
    spec:\n  destination: {name: reviews}\n  precedence: 9\n  match: {request: {headers: {x-bad: {exact: \"yes\"}}}}\n  route: [{labels: {version: v2}}]\n";
const INNOCENT: &str = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: reviews-innocent, namespace: default}\n\
    spec:\n  destination: {name: reviews}\n  precedence: 8\n  match: {request: {headers: {x-innocent: {exact: \"yes\"}}}}\n  route: [{labels: {version: v1}}]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_leaves_out_only_the_object_the_refused_routes_brought() {
    blame(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_leaves_out_only_the_object_the_refused_routes_brought() {
    blame(true).await;
}

/// Reads responses, ACKing each, until one of type `t` for which `last`
/// holds (not answered); returns it.
async fn until(client: &mut Client, t: &str, last: impl Fn(&Response) -> bool) -> Response {
    loop {
        let response = client.next().await;
        if response.type_url == t && last(&response) {
            return response;
        }
        client.answer(&response, None).await;
    }
}

/// True when a response's resources mention `text`.
fn mentions(response: &Response, text: &str) -> bool {
    response
        .resources
        .iter()
        .any(|(_, value)| String::from_utf8_lossy(value).contains(text))
}

/// The names of the objects left out for the client.
fn withheld(server: &pilot_ads::XdsServer) -> Vec<String> {
    server
        .status()
        .iter()
        .filter(|p| p.node_id == NODE)
        .flat_map(|p| p.withheld.iter().map(|w| w.name.clone()))
        .collect()
}

async fn blame(delta: bool) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    for (host, ip) in [(REVIEWS, "10.1.1.1"), (RATINGS, "10.2.2.1")] {
        registry.add_service(Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]));
        registry
            .add_endpoints(host, ip.parse().unwrap(), Labels::from_pairs([("version", "v1")]))
            .unwrap();
    }
    let (server, store, port) = start(&registry).await;
    let mut client = Client::open(port, NODE, delta).await;
    let cds = until(&mut client, CDS, |_| true).await;
    client.answer(&cds, None).await;
    client
        .subscribe(EDS, vec![REVIEWS_CLUSTER.into(), RATINGS_CLUSTER.into()])
        .await;
    let eds = until(&mut client, EDS, |_| true).await;
    client.answer(&eds, None).await;
    client.subscribe(LDS, vec![]).await;
    let lds = until(&mut client, LDS, |_| true).await;
    client.answer(&lds, None).await;
    client.subscribe(RDS, vec!["9080".into()]).await;

    // The first route configuration refused: nothing ACKed of routes to
    // compare with, so nothing is left out.
    let first = until(&mut client, RDS, |_| true).await;
    client.answer(&first, Some("refused by the test")).await;
    wait_status(&server, XdsType::Route, |s| s.nack.is_some()).await;

    // A policy changes clusters only: taken. The routes are sent again
    // (a new version, the same content) and ACKed.
    apply(&store, POLICY).await;
    let cds = until(&mut client, CDS, |_| true).await;
    client.answer(&cds, None).await;
    assert!(withheld(&server).is_empty(), "{:?}", server.status());
    let first_rule = INNOCENT
        .replace("reviews-innocent", "reviews-first")
        .replace("x-innocent", "x-first");
    apply(&store, &first_rule).await;
    let routes = until(&mut client, RDS, |r| mentions(r, "x-first")).await;
    client.answer(&routes, None).await;
    wait_status(&server, XdsType::Route, |s| s.synced()).await;
    assert!(withheld(&server).is_empty(), "{:?}", server.status());

    // Another policy (clusters only), then the bad rule, whose
    // routes the client refuses: only the rule is left out.
    apply(&store, &POLICY.replace("ratings", "reviews")).await;
    let cds = until(&mut client, CDS, |_| true).await;
    client.answer(&cds, None).await;
    apply(&store, BAD).await;
    let refused = until(&mut client, RDS, |r| mentions(r, "x-bad")).await;
    client.answer(&refused, Some("x-bad: refused by the test")).await;
    // The next routes leave it out; the client takes them.
    let without = until(&mut client, RDS, |_| true).await;
    assert!(!mentions(&without, "x-bad"), "{without:?}");
    client.answer(&without, None).await;
    assert_eq!(withheld(&server), ["reviews-bad"], "{:?}", server.status());
    let record = server.status().into_iter().find(|p| p.node_id == NODE).unwrap();
    assert_eq!(record.withheld[0].type_, "RDS");
    assert_eq!(record.withheld[0].message, "x-bad: refused by the test");
    assert_eq!(record.withheld[0].kind, "RouteRule");

    // A rule written afterwards reaches the proxy, without the bad one.
    apply(&store, INNOCENT).await;
    let routes = until(&mut client, RDS, |r| mentions(r, "x-innocent")).await;
    assert!(!mentions(&routes, "x-bad"), "{routes:?}");
    client.answer(&routes, None).await;
    wait_status(&server, XdsType::Route, |s| s.synced()).await;
    assert_eq!(withheld(&server), ["reviews-bad"]);
    assert_eq!(server.nacks_total(), 2, "{:?}", server.status());
}
