//! A service registry of your own (a JSON file of services) built on
//! pilot's followed registry, shown live and then run through pilot's
//! registry conformance suite.
//!
//!     cargo run -p pilot-embedder-example --example custom_registry

#[path = "../tests/support/json_source.rs"]
mod json_source;

use std::time::Duration;

use futures::StreamExt;
use pilot_embedder_example::JsonFileRegistry;
use pilot_model::{Event, Labels, ServiceDiscovery, ServiceEvent};
use pilot_store::testing;

fn main() {
    testing::block_on(async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("services.json");
        let file = |v2: &str| {
            format!(
                r#"{{"services": [{{"hostname": "reviews.default.svc.cluster.local",
                    "ports": [{{"name": "http", "port": 9080, "protocol": "HTTP"}}],
                    "instances": [
                      {{"address": "10.0.0.1", "port": 9080, "portName": "http", "labels": {{"version": "v1"}}}},
                      {{"address": "10.0.0.2", "port": 9080, "portName": "http", "labels": {{"version": "{v2}"}}}}]}}]}}"#
            )
        };
        std::fs::write(&path, file("v2")).expect("written");
        let registry = JsonFileRegistry::open(path.clone(), Duration::from_millis(50));
        ServiceDiscovery::wait_synced(&registry).await;
        let host = "reviews.default.svc.cluster.local";
        let v2 = [Labels::from_pairs([("version", "v2")])];
        println!(
            "synced: {} instance(s) of {host}, {} at v2",
            registry.instances(host, &[], &[]).len(),
            registry.instances(host, &[], &v2).len()
        );

        // One label changes in the file: subscribers see exactly one update.
        let mut events = registry.subscribe();
        std::fs::write(&path, file("v3")).expect("written");
        match events.next().await.expect("an event") {
            ServiceEvent::Instance(Event::Updated { old, new }) => println!(
                "one event: {}:{} updated, {} -> {}",
                new.endpoint.address, new.endpoint.port, old.labels, new.labels
            ),
            other => println!("unexpected event: {other:?}"),
        }
        println!("snapshot version {}", registry.snapshot().version());
    });

    let factory =
        || async { Box::new(json_source::JsonFileSource::new()) as Box<dyn testing::RegistrySource> };
    macro_rules! run {
        ($($name:ident),*) => {$(
            testing::block_on(testing::$name(&factory));
            println!("ok   {}", stringify!($name));
        )*};
    }
    run!(
        registry_sync,
        registry_diff,
        registry_resync,
        registry_delete_in_gap
    );
    println!("the JSON file registry passes pilot's registry conformance suite");
}
