//! Streams parked on their class, over real ADS streams: rule changes in
//! one namespace's scope, back to back, while proxies connect and the
//! namespace's Sidecar changes (its proxies change class): every stream of
//! the namespace ends with the newest configuration and its feedback at
//! the newest push, and the streams of a namespace whose configuration no
//! push changed are sent nothing and are at the newest push too.

use std::collections::BTreeSet;
use std::sync::Arc;

use pilot_ads::XdsServer;
use pilot_model::{ConfigKey, ConfigStore, Labels};
use pilot_store::Controller;
use pilot_test_support::ads::{CDS, Client, EDS, LDS, Response, clusters, eds_names};

mod support;

use support::proxies::{node_id, wait_proxy};
use support::scoped::{HOSTS, apply, ip, registry, sent, serve};

/// Rule changes of `a1`, one after another.
const ROUNDS: usize = 4;

fn sidecar(namespace: &str, name: &str, hosts: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  egress: [{{hosts: [{hosts}]}}]\n"
    )
}

fn rule(round: usize) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: r{round}, namespace: a}}\nspec:\n  host: {}\n  subsets: [{{name: v{round}, labels: {{version: v{round}}}}}]\n",
        HOSTS[0]
    )
}

fn subset(round: usize) -> String {
    format!("outbound|80|version=v{round}|{}", HOSTS[0])
}

async fn server() -> (XdsServer, u16, Arc<Controller>) {
    let registry = registry(&Labels::from_pairs([("version", "v1")]));
    let sidecars = format!(
        "{}---\n{}",
        sidecar("a", "default", "\"./*\""),
        sidecar("b", "default", "\"./*\"")
    );
    serve(&registry, &sidecars).await
}

fn names(response: &Response) -> BTreeSet<String> {
    clusters(response).into_iter().map(|c| c.name).collect()
}

/// Whether `clusters` are a's after every change: the last rule's subset,
/// none of the rules before, and b's host (the wide Sidecar).
fn newest(clusters: &BTreeSet<String>) -> bool {
    clusters.contains(&subset(ROUNDS))
        && (1..ROUNDS).all(|round| !clusters.contains(&subset(round)))
        && clusters.iter().any(|c| c.ends_with(HOSTS[2]))
}

/// Takes `proxy`'s responses, ACKing each, until the clusters it holds
/// (`held`, the last cluster response's) are the newest; returns them.
/// Pushes may come at any time, during its first requests too: each
/// cluster response subscribes to its load assignments afresh, the first
/// to listeners (unless `listening`).
async fn until_newest(
    proxy: &mut Client,
    mut held: BTreeSet<String>,
    mut listening: bool,
) -> BTreeSet<String> {
    while !newest(&held) {
        let response = proxy.next().await;
        match response.type_url.as_str() {
            CDS => {
                held = names(&response);
                proxy.request(CDS, vec![], Some(&response)).await;
                proxy.eds_names = eds_names(&clusters(&response));
                proxy.request(EDS, proxy.eds_names.clone(), None).await;
                if !listening {
                    proxy.request(LDS, vec![], None).await;
                    listening = true;
                }
            }
            EDS => proxy.request(EDS, proxy.eds_names.clone(), Some(&response)).await,
            other => proxy.request(other, vec![], Some(&response)).await,
        }
    }
    held
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_end_with_the_newest_configuration_whatever_they_did_during_the_pushes() {
    let (server, port, controller) = server().await;
    let mut in_a = Vec::new();
    for i in 0..4 {
        let mut proxy = Client::sotw(port, &node_id("a", &format!("10.1.0.{i}"))).await;
        let held = names(&proxy.sync().await.cds);
        in_a.push((proxy, held, true));
    }
    let mut in_b = Client::sotw(port, &node_id("b", "10.2.0.1")).await;
    let b_clusters = names(&in_b.sync().await.cds);
    let b_before = wait_proxy(&server, &in_b.node_id, |p| p.acked_push().is_some()).await;

    // Rule changes of a1 back to back, a proxy connecting during each, and
    // halfway a's Sidecar replaced by one importing b's hosts too (every
    // proxy of a changes class).
    let mut connecting = Vec::new();
    for round in 1..=ROUNDS {
        apply(&controller, &rule(round)).await;
        if round > 1 {
            let previous = ConfigKey::new("DestinationRule", "a", format!("r{}", round - 1));
            controller.delete(&previous, None).await.unwrap();
        }
        if round == ROUNDS / 2 {
            apply(&controller, &sidecar("a", "wide", "\"./*\", \"b/*\"")).await;
            controller
                .delete(&ConfigKey::new("Sidecar", "a", "default"), None)
                .await
                .unwrap();
        }
        connecting.push(tokio::spawn(async move {
            // Pushes go on while it connects: it subscribes as they come.
            let proxy = Client::sotw(port, &node_id("a", &format!("10.1.1.{round}"))).await;
            (proxy, BTreeSet::new(), false)
        }));
    }
    for proxy in connecting {
        in_a.push(proxy.await.unwrap());
    }

    // Every proxy of a ends with the last rule's subset and b's host, and
    // nothing of the rules before: what a proxy connecting now is sent.
    let mut ends = Vec::new();
    for (proxy, held, listening) in &mut in_a {
        ends.push(until_newest(proxy, std::mem::take(held), *listening).await);
    }
    let mut fresh = Client::sotw(port, &node_id("a", "10.1.2.1")).await;
    let fresh_clusters = names(&fresh.sync().await.cds);
    for ((proxy, _, _), end) in in_a.iter().zip(&ends) {
        assert_eq!(*end, fresh_clusters, "{}", proxy.node_id);
    }

    // Every stream, a's and b's, is at the newest push; b was sent nothing.
    let newest = server.status().iter().filter_map(|p| p.push).max().unwrap();
    for proxy in in_a.iter().map(|(p, _, _)| p).chain([&in_b, &fresh]) {
        wait_proxy(&server, &proxy.node_id, |p| p.push >= Some(newest)).await;
    }
    let b_after = wait_proxy(&server, &in_b.node_id, |_| true).await;
    assert_eq!(sent(&b_after), sent(&b_before), "b is sent nothing");
    assert!(b_clusters.iter().all(|c| !c.contains("version=")));
}

/// An endpoint of `b1` added at a parked proxy of `a`'s own address,
/// labelled so that another Sidecar (importing `b`'s hosts) selects it:
/// `b1` is in none of `a`'s scopes, so `a`'s class is kept, yet that
/// proxy's class is another: it is woken and sent `b1`'s cluster, while
/// another proxy of `a` is sent nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_at_a_parked_proxys_own_address_wakes_it_into_its_new_class() {
    let registry = registry(&Labels::new());
    let sidecars = format!(
        "{}---\n{}",
        sidecar("a", "default", "\"./*\""),
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: x, namespace: a}\nspec:\n  workloadSelector: {labels: {app: x}}\n  egress: [{hosts: [\"./*\", \"b/*\"]}]\n"
    );
    let (server, port, _controller) = serve(&registry, &sidecars).await;

    let mut moved = Client::sotw(port, &node_id("a", "10.1.0.1")).await;
    let held = names(&moved.sync().await.cds);
    assert!(held.iter().all(|c| !c.ends_with(HOSTS[2])), "{held:?}");
    let mut other = Client::sotw(port, &node_id("a", "10.1.0.2")).await;
    other.sync().await;
    let other_before = wait_proxy(&server, &other.node_id, |p| p.acked_push().is_some()).await;
    let before = server.status().iter().filter_map(|p| p.push).max().unwrap();

    registry
        .add_endpoints(HOSTS[2], ip("10.1.0.1"), Labels::from_pairs([("app", "x")]))
        .unwrap();
    // The moved proxy is sent the wide Sidecar's clusters, b1's among them.
    loop {
        let response = moved.next().await;
        if response.type_url == CDS {
            let clusters = names(&response);
            moved.request(CDS, vec![], Some(&response)).await;
            if clusters.iter().any(|c| c.ends_with(HOSTS[2])) {
                break;
            }
        } else {
            moved
                .request(&response.type_url.clone(), vec![], Some(&response))
                .await;
        }
    }
    // The other proxy of a is at the push and was sent nothing.
    let after = wait_proxy(&server, &other.node_id, |p| p.push > Some(before)).await;
    assert_eq!(
        sent(&after),
        sent(&other_before),
        "the other proxy of a is sent nothing"
    );
}
