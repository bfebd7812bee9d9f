//! What the tests that drive one raw client against the server share: the
//! proxy's node, bookinfo's hosts and their clusters, a server over a
//! registry of them and an empty store, and waiting on the proxy's
//! feedback of one type.

use std::sync::Arc;

use pilot_ads::{TypeStatus, XdsServer, XdsType};
use pilot_api::istio;
use pilot_model::{ConfigStore, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};

pub(crate) const NODE: &str = "sidecar~10.9.0.1~app.default~default.svc.cluster.local";
pub(crate) const REVIEWS: &str = "reviews.default.svc.cluster.local";
pub(crate) const REVIEWS_CLUSTER: &str = "outbound|9080||reviews.default.svc.cluster.local";
pub(crate) const RATINGS: &str = "ratings.default.svc.cluster.local";
pub(crate) const RATINGS_CLUSTER: &str = "outbound|9080||ratings.default.svc.cluster.local";
pub(crate) const DETAILS: &str = "details.default.svc.cluster.local";
pub(crate) const DETAILS_CLUSTER: &str = "outbound|9080||details.default.svc.cluster.local";

/// Waits until [`NODE`]'s status of `t` satisfies `check`.
pub(crate) async fn wait_status(
    server: &XdsServer,
    t: XdsType,
    check: impl Fn(&TypeStatus) -> bool,
) -> TypeStatus {
    let proxy =
        super::proxies::wait_proxy(server, NODE, |p| p.types.get(t.short()).is_some_and(&check)).await;
    proxy.types[t.short()].clone()
}

/// Creates the objects of the YAML `yaml` (Istio's v1alpha2 kinds) in
/// `store`.
pub(crate) async fn apply(store: &MemoryConfigStore, yaml: &str) {
    for object in document::parse("test.yaml", yaml, &istio::registry()).unwrap() {
        store.create(object).await.unwrap();
    }
}

/// A server on a free loopback port over `registry` and an empty store.
pub(crate) async fn start(registry: &Arc<MemoryServiceRegistry>) -> (XdsServer, MemoryConfigStore, u16) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let (server, port) = super::server::serve(controller, Arc::clone(registry) as _);
    (server, store, port)
}
