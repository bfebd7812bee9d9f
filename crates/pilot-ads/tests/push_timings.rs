//! Where a push's time went, as an operator reads it from the server
//! (`XdsServer::push_timings`, exported by pilot-discovery as Istio's push
//! histograms): a registry change pushed to a connected proxy is counted
//! once in the debounce and build histograms, and, for that proxy, in the
//! queue, the per-type push and the convergence histograms; a push before
//! any change carries no convergence sample.

use std::sync::Arc;
use std::time::Duration;

use pilot_ads::{DurationHistogram, PushTimings, XdsServer};
use pilot_api::istio;
use pilot_model::{Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::{CDS, Client, sidecar_id};

mod support;

fn service(name: &str) -> Service {
    Service::new(
        format!("{name}.default.svc.cluster.local"),
        vec![Port::new("http", 9080, Protocol::Http)],
    )
}

fn push(timings: &PushTimings, short: &str) -> DurationHistogram {
    timings
        .push
        .iter()
        .find(|(t, _)| *t == short)
        .map(|(_, h)| h.clone())
        .unwrap()
}

/// Waits until `done` holds of the server's timings (a push's samples are
/// recorded as its streams take it).
async fn timings_when(server: &XdsServer, done: impl Fn(&PushTimings) -> bool) -> PushTimings {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let timings = server.push_timings();
        if done(&timings) {
            return timings;
        }
        assert!(tokio::time::Instant::now() < deadline, "{timings:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_pushed_to_a_proxy_is_timed_at_every_stage() {
    let registry = Arc::new(MemoryServiceRegistry::new());
    registry.add_service(service("reviews"));
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();
    let (server, port) = support::server::serve(Arc::clone(&controller), registry.clone());

    let mut proxy = Client::sotw(port, &sidecar_id("app-1", "default", "10.0.0.7")).await;
    let first = proxy.next().await;
    assert_eq!(first.type_url, CDS);
    proxy.ack(&first).await;

    // The first push carries no change: built, not debounced, and no
    // proxy converged on a change.
    let before = server.push_timings();
    assert_eq!(before.build.count, 1, "{before:#?}");
    assert_eq!(before.debounce.count, 0, "{before:#?}");
    assert_eq!(before.convergence.count, 0, "{before:#?}");
    // The stream took the first push at its first request, or, opened
    // before it was published, from the queue: at most one sample.
    assert!(before.queue.count <= 1, "{before:#?}");
    let cds_before = push(&before, "CDS").count;
    assert!(cds_before >= 1, "the first clusters were sent: {before:#?}");

    // A new service: one debounced push, sent to the proxy.
    registry.add_service(service("ratings"));
    let pushed = proxy.next().await;
    assert_eq!(pushed.type_url, CDS);
    assert!(
        pilot_test_support::ads::clusters(&pushed)
            .iter()
            .any(|c| c.name.contains("ratings.default.svc.cluster.local")),
        "the new service's cluster is pushed"
    );
    let after = timings_when(&server, |t| t.convergence.count >= 1).await;
    assert_eq!(after.debounce.count, 1, "{after:#?}");
    assert_eq!(after.build.count, 2, "{after:#?}");
    assert_eq!(after.queue.count, before.queue.count + 1, "{after:#?}");
    assert_eq!(after.convergence.count, 1, "{after:#?}");
    assert!(push(&after, "CDS").count > cds_before, "{after:#?}");
    // The change waited at least the debounce's quiet period before the
    // push was built, and converged after that.
    assert!(after.debounce.sum > Duration::ZERO, "{after:#?}");
    assert!(after.convergence.sum >= after.debounce.sum, "{after:#?}");
    // Buckets are cumulative and end at the count.
    for histogram in [&after.debounce, &after.build, &after.queue, &after.convergence] {
        assert!(
            histogram.buckets.windows(2).all(|w| w[0].1 <= w[1].1),
            "{histogram:?}"
        );
        assert!(
            histogram.buckets.last().unwrap().1 <= histogram.count,
            "{histogram:?}"
        );
    }
}
