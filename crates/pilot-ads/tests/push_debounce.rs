//! The push pipeline's debounce, in the runtime's paused time: the
//! durations below are the pipeline's own waits, never the machine's
//! speed (time moves only when every task waits on a timer).
//! - A change that comes after a quiet period is pushed at once: it waits
//!   for nothing (a lone route edited is live without the quiet period).
//! - Changes that come right after a push wait out the quiet period and
//!   go out together in one push.
//! - With `debounce_leading` off, every push waits out the quiet period.

use std::sync::Arc;
use std::time::Duration;

use pilot_ads::{PushInfo, PushSubscription, XdsOptions, XdsServer};
use pilot_api::istio;
use pilot_model::{Port, Protocol, Service, ServiceDiscovery};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};

/// The quiet period: far longer than anything the pipeline does, so
/// whether a push waited for it cannot be mistaken.
const QUIET: Duration = Duration::from_secs(3600);

fn service(name: &str) -> Service {
    Service::new(
        format!("{name}.default.svc.cluster.local"),
        vec![Port::new("http", 9080, Protocol::Http)],
    )
}

/// A server over an empty store and `registry`, debouncing `QUIET`
/// (at most twice that), and its pushes after the first.
async fn server(registry: &Arc<MemoryServiceRegistry>, leading: bool) -> (XdsServer, PushSubscription) {
    let controller = Arc::new(Controller::new(Arc::new(MemoryConfigStore::new(
        istio::registry(),
    ))));
    controller.run();
    let mut options = XdsOptions::default();
    options.debounce_quiet = QUIET;
    options.debounce_max = 2 * QUIET;
    options.debounce_leading = leading;
    let server = XdsServer::new(
        controller,
        Arc::clone(registry) as Arc<dyn ServiceDiscovery>,
        options,
    );
    let mut pushes = server.subscribe_pushes();
    let first = next(&mut pushes).await;
    assert_eq!(first.latency, None, "the first push carries no change: {first:?}");
    (server, pushes)
}

async fn next(pushes: &mut PushSubscription) -> PushInfo {
    pushes.next().await.expect("the server is running")
}

#[tokio::test(start_paused = true)]
async fn a_change_after_a_quiet_period_goes_at_once_and_the_changes_right_behind_it_together() {
    let registry = Arc::new(MemoryServiceRegistry::new());
    registry.add_service(service("reviews"));
    let (_server, mut pushes) = server(&registry, true).await;

    // Nothing has changed or been pushed for the quiet period: the next
    // change waits for nothing.
    tokio::time::sleep(QUIET).await;
    registry.add_service(service("ratings"));
    let alone = next(&mut pushes).await;
    assert_eq!(alone.latency, Some(Duration::ZERO), "{alone:?}");
    assert_eq!(alone.registry_version, registry.snapshot().version(), "{alone:?}");

    // Two changes right after that push: both wait out the quiet period,
    // in one push.
    registry.add_service(service("details"));
    registry.add_service(service("productpage"));
    let together = next(&mut pushes).await;
    let latency = together.latency.expect("a change's push");
    assert!(latency >= QUIET, "{together:?}");
    assert_eq!(together.version, alone.version + 1, "{together:?}");
    assert_eq!(
        together.registry_version,
        registry.snapshot().version(),
        "{together:?}"
    );
    assert!(
        together.registry_version > alone.registry_version + 1,
        "{together:?}"
    );

    // Quiet again: at once again.
    tokio::time::sleep(QUIET).await;
    registry.add_service(service("inventory"));
    let again = next(&mut pushes).await;
    assert_eq!(again.latency, Some(Duration::ZERO), "{again:?}");
    assert_eq!(again.version, together.version + 1, "{again:?}");
}

#[tokio::test(start_paused = true)]
async fn without_the_leading_push_a_lone_change_waits_out_the_quiet_period() {
    let registry = Arc::new(MemoryServiceRegistry::new());
    registry.add_service(service("reviews"));
    let (_server, mut pushes) = server(&registry, false).await;

    tokio::time::sleep(QUIET).await;
    registry.add_service(service("ratings"));
    let debounced = next(&mut pushes).await;
    let latency = debounced.latency.expect("a change's push");
    assert!(latency >= QUIET, "{debounced:?}");
    assert_eq!(
        debounced.registry_version,
        registry.snapshot().version(),
        "{debounced:?}"
    );
}
