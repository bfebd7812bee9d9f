//! The backend conformance suite against a real etcd (one server per test,
//! one key prefix per store).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pilot_model::{ConfigWatch, KindRegistry};
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::EtcdServer;

/// A factory of stores on one etcd started for the test, each under a
/// prefix of its own; the server stops when the factory is dropped.
fn etcd() -> impl Fn(KindRegistry) -> futures::future::BoxFuture<'static, Arc<dyn ConfigWatch>> {
    let server = Arc::new(EtcdServer::start().expect("etcd starts (is etcd-server installed?)"));
    let next = Arc::new(AtomicUsize::new(0));
    move |registry: KindRegistry| {
        let options = EtcdOptions::new([server.endpoint()])
            .with_prefix(format!("/conformance/{}", next.fetch_add(1, Ordering::Relaxed)));
        let server = Arc::clone(&server);
        Box::pin(async move {
            let store = EtcdConfigStore::connect(&options, registry)
                .await
                .expect("connect to etcd");
            drop(server);
            Arc::new(store) as Arc<dyn ConfigWatch>
        })
    }
}

pilot_store::conformance_suite!(etcd());

mod status {
    use super::*;

    pilot_store::status_conformance_suite!(etcd());
}
