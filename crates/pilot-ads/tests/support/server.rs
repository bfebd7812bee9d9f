//! The ADS server the tests talk to, serving on a free loopback port.

use std::sync::Arc;

use pilot_ads::{XdsOptions, XdsServer};
use pilot_api::default_registry;
use pilot_model::ServiceDiscovery;
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};

/// A server with default options over `controller` and `registry`,
/// serving on a free loopback port (returned) until the test ends.
pub(crate) fn serve(controller: Arc<Controller>, registry: Arc<dyn ServiceDiscovery>) -> (XdsServer, u16) {
    serve_with(controller, registry, XdsOptions::default())
}

/// [`serve`] with `options`.
pub(crate) fn serve_with(
    controller: Arc<Controller>,
    registry: Arc<dyn ServiceDiscovery>,
    options: XdsOptions,
) -> (XdsServer, u16) {
    let server = XdsServer::new(controller, registry, options);
    // Reserved for this process: a port bound and let go of could be
    // taken by another connection before the server binds it.
    let port = pilot_test_support::free_port();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve(([127, 0, 0, 1], port).into(), std::future::pending())
            .await
            .expect("the ADS server serves");
    });
    (server, port)
}

/// A server with default options over an empty store and an empty
/// registry (not yet serving); call within a Tokio runtime.
pub(crate) fn empty() -> XdsServer {
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();
    XdsServer::new(
        controller,
        Arc::new(MemoryServiceRegistry::new()),
        XdsOptions::default(),
    )
}
