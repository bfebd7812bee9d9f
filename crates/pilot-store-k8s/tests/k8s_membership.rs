//! The membership conformance suite on the fake API server: every replica
//! a `KubeMembership` with its own client on one fake, in `default`.

use std::sync::Arc;
use std::time::Duration;

use pilot_kube_fake::FakeApiServer;
use pilot_model::Membership;
use pilot_store_k8s::KubeMembership;

async fn replicas(names: Vec<String>, ttl: Duration) -> Vec<Arc<dyn Membership>> {
    let fake = FakeApiServer::new();
    names
        .into_iter()
        .map(|name| Arc::new(KubeMembership::new(fake.client(), "default", name, ttl)) as Arc<dyn Membership>)
        .collect()
}

pilot_store::membership_conformance_suite!(replicas);
