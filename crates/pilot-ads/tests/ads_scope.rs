//! Scoping over real ADS streams: a Sidecar in namespace `a` importing
//! `./*` with `REGISTRY_ONLY` gives `a`'s proxies only `a`'s services and a
//! black hole for the rest, while `b` (no Sidecar) sees the whole mesh; a
//! change to a host outside `a`'s scope reaches `b` and sends `a` nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use pilot_ads::XdsServer;
use pilot_model::Labels;
use pilot_routing::ScopeOrigin;
use pilot_store::Controller;
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::ads::{CDS, Client, EDS, Response, clusters};
use pilot_xds::{BLACK_HOLE, HostReason, PASSTHROUGH, Proxy};
use prost::Message;

mod support;

use support::proxies::{node_id, wait_proxy};
use support::scoped::{HOSTS, apply, ip, registry, sent, serve};

async fn server() -> (XdsServer, u16, Arc<MemoryServiceRegistry>, Arc<Controller>) {
    let registry = registry(&Labels::from_pairs([("version", "v1")]));
    let (server, port, controller) = serve(
        &registry,
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress: [{hosts: ["./*"]}]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"#,
    )
    .await;
    (server, port, registry, controller)
}

fn names(clusters: &[Cluster]) -> BTreeSet<String> {
    clusters.iter().map(|c| c.name.clone()).collect()
}

fn outbound(host: &str) -> String {
    format!("outbound|80||{host}")
}

fn version(response: &Response) -> u64 {
    response.version.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sidecar_scopes_its_namespace_and_an_out_of_scope_change_sends_it_nothing() {
    let (server, port, registry, controller) = server().await;
    let mut a = Client::sotw(port, &node_id("a", "10.1.0.1")).await;
    let mut b = Client::sotw(port, &node_id("b", "10.1.0.2")).await;
    let in_a = names(&clusters(&a.sync().await.cds));
    let in_b = names(&clusters(&b.sync().await.cds));

    // a: its own namespace's services and the black hole, nothing of b's.
    assert!(in_a.contains(&outbound(HOSTS[0])), "{in_a:?}");
    assert!(in_a.contains(&outbound(HOSTS[1])), "{in_a:?}");
    assert!(
        !in_a.contains(&outbound(HOSTS[2])),
        "b1 is out of a's scope: {in_a:?}"
    );
    assert!(in_a.contains(BLACK_HOLE), "REGISTRY_ONLY: {in_a:?}");
    assert!(!in_a.contains(PASSTHROUGH), "REGISTRY_ONLY: {in_a:?}");
    // b: no Sidecar, the whole mesh and the passthrough.
    for host in HOSTS {
        assert!(in_b.contains(&outbound(host)), "{host} in {in_b:?}");
    }
    assert!(in_b.contains(PASSTHROUGH), "{in_b:?}");
    assert!(!in_b.contains(BLACK_HOLE), "{in_b:?}");

    // Why: the namespace's default Sidecar imported a's hosts by `./*`.
    let proxy = Proxy::from_node_id(&node_id("a", "10.1.0.1")).unwrap();
    let scope = server.scope(&proxy).unwrap();
    assert_eq!(
        scope.origin,
        ScopeOrigin::NamespaceDefault {
            namespace: "a".into(),
            name: "default".into()
        }
    );
    assert_eq!(
        scope.hosts.into_iter().collect::<Vec<_>>(),
        [
            (HOSTS[0].to_string(), HostReason::Imported("./*".into())),
            (HOSTS[1].to_string(), HostReason::Imported("./*".into())),
        ]
    );

    // A DestinationRule for b1 (out of a's scope) adds a subset cluster:
    // b is sent new clusters...
    let a_before = wait_proxy(&server, &a.node_id, |_| true).await;
    apply(
        &controller,
        r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b1, namespace: b}
spec:
  host: b1.b.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}]
"#,
    )
    .await;
    let cds = b.next().await;
    assert_eq!(cds.type_url, CDS);
    let rule = version(&cds);
    let subset = "outbound|80|version=v1|b1.b.svc.cluster.local";
    assert!(
        names(&clusters(&cds)).len() > in_b.len(),
        "the subset's cluster is new"
    );
    assert!(b.eds_names.iter().all(|n| n != subset));
    // b subscribes to the subset's load assignment and is sent it (after
    // the re-send of its load assignments that follows new clusters):
    // every response to b since is of the rule's push.
    let mut to_b = vec![version(&cds)];
    let mut eds = b.ack(&cds).await.unwrap();
    loop {
        to_b.push(version(&eds));
        if assignment_names(&eds).contains(subset) {
            break;
        }
        eds = b.next().await;
        b.ack(&eds).await;
    }
    assert!(to_b.iter().all(|v| *v == rule), "{to_b:?}");

    // ...and a nothing: once a's stream has taken the rule's push, it was
    // sent no type since,
    let a_after = wait_proxy(&server, &a.node_id, |p| p.push >= Some(rule)).await;
    assert_eq!(sent(&a_after), sent(&a_before), "a is sent nothing for b1's rule");
    // and its next response is the load assignment of a1's new endpoint,
    // of a later push: nothing the rule brought was on its way.
    registry
        .add_endpoints(HOSTS[0], ip("10.0.0.2"), Labels::from_pairs([("version", "v1")]))
        .unwrap();
    let eds = a.next().await;
    assert_eq!(eds.type_url, EDS, "a's first response since the rule");
    assert!(version(&eds) > rule, "{} after the rule's {rule}", eds.version);
    a.ack(&eds).await;
    let eds = b.next().await;
    assert_eq!(eds.type_url, EDS);
}

fn assignment_names(response: &Response) -> BTreeSet<String> {
    assert_eq!(response.type_url, EDS);
    response
        .resources
        .iter()
        .map(|(_, value)| {
            ClusterLoadAssignment::decode(value.as_slice())
                .unwrap()
                .cluster_name
        })
        .collect()
}
