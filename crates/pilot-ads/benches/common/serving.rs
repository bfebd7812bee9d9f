//! The benches' ADS server (the `ads` bench's scoped mesh, pilot-server's
//! `status` and `replicas` benches): an `XdsServer` serving on a free
//! loopback port until stopped, started once its first push is built.

use std::sync::Arc;

use pilot_ads::{XdsOptions, XdsServer};
use pilot_model::ServiceDiscovery;
use pilot_store::Controller;

/// A server serving in a task of the bench's runtime.
pub(crate) struct Serving {
    /// The server, for its status and versions.
    pub server: XdsServer,
    /// Its loopback port, for the clients.
    pub port: u16,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Serving {
    /// Serves `controller` and `registry` with `options` on a free
    /// loopback port; returns once the first push (version 1) is built.
    pub(crate) async fn start(
        controller: Arc<Controller>,
        registry: Arc<dyn ServiceDiscovery>,
        options: XdsOptions,
    ) -> Self {
        let server = XdsServer::new(controller, registry, options);
        let port = pilot_test_support::free_port();
        let serving = server.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = serving
                .serve(([127, 0, 0, 1], port).into(), async {
                    let _ = stopped.await;
                })
                .await;
        });
        server.wait_version(1).await;
        Serving {
            server,
            port,
            stop,
            task,
        }
    }

    /// Stops serving and waits for the task to end.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}
