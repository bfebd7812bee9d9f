//! The backend conformance suite against the fake API server (one server
//! per store, its CRDs installed by `install_crds`).

use std::sync::Arc;

use pilot_kube_fake::FakeApiServer;
use pilot_model::{ConfigWatch, KindRegistry};
use pilot_store_k8s::{KubeConfigStore, install_crds};

async fn fake(registry: KindRegistry) -> Arc<dyn ConfigWatch> {
    let client = FakeApiServer::new().client();
    install_crds(client.clone(), &registry)
        .await
        .expect("install the CRDs");
    Arc::new(KubeConfigStore::new(client, registry).create_missing_namespaces(true))
}

pilot_store::conformance_suite!(fake);

mod status {
    use super::*;

    pilot_store::status_conformance_suite!(fake);
}
