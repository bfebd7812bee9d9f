//! A proxy that does not read its responses: its stream holds at most
//! `XdsOptions::send_buffer` bytes of them in h2 (no more than the proxy's
//! flow-control window either), plus the message being written and the one
//! queued behind it, after which its task waits and later pushes are not
//! queued for it; once it reads again it is sent the configuration of its
//! time.

mod support;

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use pilot_ads::{ProxyStatus, XdsOptions, XdsServer};
use pilot_api::default_registry;
use pilot_model::AggregateDiscovery;
use pilot_store::{Controller, service_entry_registry};
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::PATIENCE;
use pilot_test_support::ads::{self, CDS, LDS, Response, SotwStream, clusters};
use support::mesh::apply;
use support::proxies::{node_id, wait_proxy};

/// The HTTP/2 window a stalled client gives each stream: smaller than the
/// first cluster response, so that response stays queued at the server.
const WINDOW: u32 = 1024;

/// Forty external hosts: a cluster response of several KB.
fn hosts(name: &str, count: usize) -> String {
    let hosts: Vec<String> = (0..count).map(|i| format!("h{i}.{name}.test")).collect();
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [{}]\n  location: MESH_EXTERNAL\n  ports: [{{number: 443, name: tls, protocol: TLS}}]\n  resolution: DNS\n",
        hosts.join(", ")
    )
}

/// A server with `send_buffer` over a store of ServiceEntries.
async fn start(send_buffer: usize) -> (XdsServer, MemoryConfigStore, u16) {
    let store = MemoryConfigStore::new(default_registry());
    apply(&store, &hosts("first", 40)).await;
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = AggregateDiscovery::new(vec![
        Arc::new(MemoryServiceRegistry::new()),
        Arc::new(service_entry_registry(&controller)),
    ]);
    let mut options = XdsOptions::default();
    options.send_buffer = send_buffer;
    let (server, port) = support::server::serve_with(controller, Arc::new(registry), options);
    // The first push is published before any proxy connects: a stream
    // opening on a push takes it at once (before it has sent anything),
    // while one opening before the first push takes it only once it has
    // sent it, which a stalled proxy never lets it finish.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while server.version().is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the first push in time");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    (server, store, port)
}

/// A state-of-the-world stream of the sidecar at `ip`, over a connection
/// whose stream's HTTP/2 window is `window` (`None`: Envoy's, 256 MiB),
/// asking for every cluster and every listener at once.
async fn open(port: u16, ip: &str, window: Option<u32>) -> SotwStream {
    let mut stream = SotwStream::connect_with_window(port, window.unwrap_or(ads::WINDOW)).await;
    for type_url in [CDS, LDS] {
        stream
            .send(&DiscoveryRequest {
                node: Some(Node {
                    id: node_id("default", ip),
                    ..Default::default()
                }),
                type_url: type_url.into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    stream
}

/// Whether the proxy has been sent listeners (its second response).
fn sent_listeners(status: &ProxyStatus) -> bool {
    status.types.get("LDS").is_some_and(|t| t.sent.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_does_not_read_holds_no_more_than_the_send_buffer() {
    // One byte: the first response queued fills it.
    let (server, store, port) = start(1).await;
    let mut stalled = open(port, "10.9.0.1", Some(WINDOW)).await;
    let stalled_id = node_id("default", "10.9.0.1");
    // Its cluster response is queued; its listener response is made and
    // waits for room, so the stream's task waits with it.
    let before = wait_proxy(&server, &stalled_id, sent_listeners).await;
    let taken = before.push.expect("the stream took the first push");
    // A proxy whose window has room (reading nothing either) takes the
    // next push as soon as it comes...
    let _other = open(port, "10.9.0.2", None).await;
    let other_id = node_id("default", "10.9.0.2");
    wait_proxy(&server, &other_id, sent_listeners).await;
    apply(&store, &hosts("second", 1)).await;
    let second = wait_proxy(&server, &other_id, |p| p.push > Some(taken))
        .await
        .push;
    // ...and the next: the stalled one does not. Its task may have taken
    // the second push before it began to wait (a change that comes alone
    // is pushed at once, maybe while the task still writes the first
    // push), queueing its first message (its queue of one); then it waits,
    // and takes no later push.
    apply(&store, &hosts("third", 1)).await;
    wait_proxy(&server, &other_id, |p| p.push > second).await;
    let after = wait_proxy(&server, &stalled_id, |_| true).await;
    assert!(after.push >= Some(taken) && after.push <= second, "{after:?}");
    // Reading again, it is sent the configuration of its time.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let response: Response = tokio::time::timeout_at(deadline, stalled.message())
            .await
            .expect("the new host in time")
            .unwrap()
            .expect("the stream is open")
            .into();
        if response.type_url == CDS
            && clusters(&response)
                .iter()
                .any(|c| c.name.contains("h0.third.test"))
        {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_that_does_not_read_is_queued_pushes_within_the_send_buffer() {
    // The default (1 MiB) has room for the same responses and the push,
    // for a proxy whose window has room too (Envoy's): h2 holds no more
    // for a stream than its window lets out.
    let (server, store, port) = start(XdsOptions::default().send_buffer).await;
    let _stalled = open(port, "10.9.0.1", None).await;
    let stalled_id = node_id("default", "10.9.0.1");
    let before = wait_proxy(&server, &stalled_id, sent_listeners).await;
    let taken = before.push.expect("the stream took the first push");
    apply(&store, &hosts("second", 1)).await;
    wait_proxy(&server, &stalled_id, |p| p.push > Some(taken)).await;
}
