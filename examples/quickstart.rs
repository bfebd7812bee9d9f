//! pilot in one page, on the embedded in-memory store:
//! register kinds, write configuration, watch typed events, and look up
//! service instances by version.
//!
//!     cargo run --example quickstart

use std::net::IpAddr;
use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{
    Config, ConfigKind, ConfigMeta, ConfigStore, DynConfig, Event, FieldErrors, KindRegistry, KindSchema,
    Labels, Port, Protocol, Service, ServiceDiscovery,
};
use pilot_store::{Controller, Notification, TypedStore};
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use serde::{Deserialize, Serialize};

/// A typed kind: a Rust type tied to its schema and validation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TrafficSplit {
    /// The service whose traffic is split.
    service: String,
    /// Percent of traffic per version label; must add up to 100.
    weights: std::collections::BTreeMap<String, u32>,
}

impl ConfigKind for TrafficSplit {
    const KIND: &'static str = "TrafficSplit";
    const PLURAL: &'static str = "trafficsplits";
    const GROUP: &'static str = "example.pilot.io";
    const VERSION: &'static str = "v1";

    fn validate(&self, errors: &mut FieldErrors) {
        errors.check_dns1123_subdomain("spec.service", &self.service);
        let total: u32 = self.weights.values().sum();
        if total != 100 {
            errors.push("spec.weights", format!("weights add up to {total}, not 100"));
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. Kinds: one typed, one known only at run time.
    let registry = KindRegistry::new();
    registry.register::<TrafficSplit>()?;
    registry.register_schema(KindSchema::new(
        "Note",
        "notes",
        "example.pilot.io",
        "v1",
        |spec, errors| {
            if !spec.get("text").is_some_and(|t| t.is_string()) {
                errors.push("spec.text", "must be a string");
            }
        },
    ))?;

    // 2. A store, and a Controller that caches it and streams events.
    let store = MemoryConfigStore::new(registry);
    let controller = Arc::new(Controller::new(Arc::new(store)));
    let mut splits = controller.subscribe_typed::<TrafficSplit>()?;
    controller.run();
    controller.wait_synced().await;
    println!("controller synced: {}", controller.has_synced());

    // 3. Write configuration through the Controller (typed and untyped).
    let typed = TypedStore::<TrafficSplit>::new(controller.clone());
    let split = Config::new(
        "default",
        "reviews-canary",
        TrafficSplit {
            service: "reviews".into(),
            weights: [("v1".to_string(), 90), ("v2".to_string(), 10)].into(),
        },
    );
    let stored = typed.create(&split).await?;
    println!(
        "created {} at resourceVersion {}",
        stored.key(),
        stored.meta.resource_version.as_deref().unwrap_or("?")
    );

    let mut shifted = stored.clone();
    shifted.spec.weights = [("v1".to_string(), 50), ("v2".to_string(), 50)].into();
    let shifted = typed.update(&shifted).await?;

    let mut stale = stored.clone();
    stale.spec.weights = [("v1".to_string(), 100)].into();
    println!(
        "update with a stale version: {}",
        typed.update(&stale).await.unwrap_err()
    );

    let mut invalid = shifted.clone();
    invalid.spec.weights = [("v1".to_string(), 70)].into();
    println!(
        "invalid update:              {}",
        typed.update(&invalid).await.unwrap_err()
    );

    let note = DynConfig {
        meta: ConfigMeta::new("Note", "default", "hello"),
        spec: serde_json::json!({"text": "configuration is data"}),
    };
    controller.create(note).await?;
    println!(
        "notes in default: {}",
        controller.list_cached("Note", Some("default"))?.len()
    );

    typed.delete("default", "reviews-canary", None).await?;

    // 4. The typed events, in order.
    for _ in 0..3 {
        match splits.next().await {
            Some(Notification::Event(Event::Added(c))) => {
                println!("event: added   {} {:?}", c.key(), c.spec.weights)
            }
            Some(Notification::Event(Event::Updated { old, new })) => {
                println!(
                    "event: updated {} {:?} -> {:?}",
                    new.key(),
                    old.spec.weights,
                    new.spec.weights
                )
            }
            Some(Notification::Event(Event::Deleted(c))) => println!("event: deleted {}", c.key()),
            Some(Notification::Lagged { missed }) => {
                println!("fell behind by {missed}; would resync from the cache")
            }
            None => break,
        }
    }

    // 5. A service registry with two versions of `reviews`.
    let services = MemoryServiceRegistry::new();
    let host = "reviews.default.svc.cluster.local";
    services.add_service(Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]));
    for (ip, version) in [("10.1.0.1", "v1"), ("10.1.0.2", "v1"), ("10.1.0.3", "v2")] {
        services.add_endpoints(
            host,
            ip.parse::<IpAddr>()?,
            Labels::from_pairs([("app", "reviews"), ("version", version)]),
        )?;
    }
    let v2 = services.instances(host, &["http"], &[Labels::from_pairs([("version", "v2")])]);
    println!(
        "{host} has {} instances; version=v2:",
        services.instances(host, &[], &[]).len()
    );
    for instance in v2 {
        println!(
            "  {}:{} {}",
            instance.endpoint.address, instance.endpoint.port, instance.labels
        );
    }
    Ok(())
}
