//! The file store and the JSON registry behind pilot's cached Controller:
//! its ADS server, the REST API over the same store ([`rest_api`]), and
//! the status loop writing each routing object's distribution status back
//! into the files.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pilot_ads::{ServeOptions, XdsOptions, XdsServer};
use pilot_api::istio;
use pilot_apiserver::ApiServer;
use pilot_apiserver::axum::Router;
use pilot_distribution::StatusWriter;
use pilot_model::{ConfigStore, ConfigWatch, StoreError};
use pilot_store::Controller;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::{FileConfigStore, JsonFileRegistry};

/// How often the objects' status is brought up to date.
const STATUS_INTERVAL: Duration = Duration::from_millis(500);

/// Why [`serve`] stopped.
#[derive(Debug)]
pub enum Error {
    /// The configuration directory could not be opened.
    Store(StoreError),
    /// Serving ADS failed.
    Serve(pilot_ads::tonic::transport::Error),
    /// Serving the REST API failed.
    Rest(std::io::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Store(error) => write!(f, "cannot open the configuration directory: {error}"),
            Error::Serve(error) => write!(f, "cannot serve ADS: {error}"),
            Error::Rest(error) => write!(f, "cannot serve the REST API: {error}"),
        }
    }
}

impl std::error::Error for Error {}

/// The REST API (kubectl, pilotctl, any Kubernetes client) over `store`,
/// writing through `controller` (its cache over the same store), so a
/// write answers once the ADS server's cache has it.
pub fn rest_api(store: Arc<dyn ConfigWatch>, controller: Arc<Controller>) -> Router {
    let admits = Arc::clone(&controller);
    ApiServer::new(store)
        .cache(controller as Arc<dyn ConfigStore>)
        .admits(move |config| admits.admits(config).is_ok())
        .into_router()
}

/// Serves ADS on `xds` and the REST API on `rest` until `shutdown`
/// completes: Istio's routing kinds stored as files under `config_dir`,
/// with their distribution status written into them, and the services of
/// the JSON file `services` (read again every second). Call inside a
/// Tokio runtime.
pub async fn serve(
    config_dir: &Path,
    services: &Path,
    xds: TcpListener,
    rest: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let store = Arc::new(FileConfigStore::open(config_dir, istio::registry()).map_err(Error::Store)?);
    let controller = Arc::new(Controller::new(Arc::clone(&store) as Arc<dyn ConfigWatch>));
    controller.run();
    let registry = JsonFileRegistry::open(services.to_path_buf(), Duration::from_secs(1));
    let server = XdsServer::new(Arc::clone(&controller), Arc::new(registry), XdsOptions::default());

    // One signal, watched by each part.
    let (stop, stopped) = watch::channel(false);
    let until_stopped = || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }
    };
    // This program is the only replica: the ADS server's own records are
    // every proxy's.
    let status = StatusWriter::new(
        Arc::clone(&controller),
        Arc::clone(&store) as Arc<dyn ConfigStore>,
        Arc::new(server.clone()),
    )
    .interval(STATUS_INTERVAL);
    let status = tokio::spawn(status.run(until_stopped()));
    let api = rest_api(store, controller);
    let rest = tokio::spawn(
        pilot_apiserver::axum::serve(rest, api)
            .with_graceful_shutdown(until_stopped())
            .into_future(),
    );
    let ads = server.serve_with(xds, ServeOptions::default(), async move {
        shutdown.await;
        stop.send_replace(true);
    });
    let served = ads.await.map_err(Error::Serve);
    // ADS has stopped (on the signal, or failing): stop the others too.
    let _ = status.await;
    let rest = rest.await;
    served?;
    match rest {
        Ok(result) => result.map_err(Error::Rest),
        Err(join) => Err(Error::Rest(std::io::Error::other(join))),
    }
}
