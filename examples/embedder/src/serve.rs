//! The file store and the JSON registry behind pilot's cached Controller
//! and its ADS server.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pilot_ads::{ServeOptions, XdsOptions, XdsServer};
use pilot_api::istio;
use pilot_model::{ConfigWatch, StoreError};
use pilot_store::Controller;

use crate::{FileConfigStore, JsonFileRegistry};

/// Why [`serve`] stopped.
#[derive(Debug)]
pub enum Error {
    /// The configuration directory could not be opened.
    Store(StoreError),
    /// Serving ADS failed.
    Serve(pilot_ads::tonic::transport::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Store(error) => write!(f, "cannot open the configuration directory: {error}"),
            Error::Serve(error) => write!(f, "cannot serve ADS: {error}"),
        }
    }
}

impl std::error::Error for Error {}

/// Serves ADS on `listener` until `shutdown` completes: Istio's routing
/// kinds stored as files under `config_dir`, and the services of the JSON
/// file `services` (read again every second). Call inside a Tokio runtime.
pub async fn serve(
    config_dir: &Path,
    services: &Path,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let store = FileConfigStore::open(config_dir, istio::registry()).map_err(Error::Store)?;
    let controller = Arc::new(Controller::new(Arc::new(store) as Arc<dyn ConfigWatch>));
    controller.run();
    let registry = JsonFileRegistry::open(services.to_path_buf(), Duration::from_secs(1));
    let server = XdsServer::new(controller, Arc::new(registry), XdsOptions::default());
    server
        .serve_with(listener, ServeOptions::default(), shutdown)
        .await
        .map_err(Error::Serve)
}
