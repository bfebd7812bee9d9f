//! Debounced pushes: Controller and registry events in, snapshots out.

use std::sync::{Arc, Weak};

use futures::StreamExt;
use pilot_model::istio::{DestinationPolicy, EgressRule, IngressRule, RouteRule};
use pilot_model::{ConfigKind, ServiceDiscovery};
use pilot_store::Controller;
use tokio::time::Instant;

use super::{Inner, MeshSnapshot, PushInfo, XdsOptions};
use crate::MeshConfig;

pub(crate) async fn run(
    server: Weak<Inner>,
    controller: Arc<Controller>,
    registry: Arc<dyn ServiceDiscovery>,
    options: XdsOptions,
) {
    let mut config_events = controller.subscribe_all();
    // A registry whose stream ends (an empty aggregate, a static registry)
    // has no more changes; configuration changes still push.
    let mut registry_events = registry.subscribe().chain(futures::stream::pending());
    // Nothing is served before the cache and the registry have synced.
    controller.wait_synced().await;
    while !registry.has_synced() {
        // The trait has no sync notification; its events (or a short
        // wait, when the registry turns out empty) prompt another look.
        tokio::select! {
            _ = registry_events.next() => {}
            _ = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
        }
    }
    let mut version = 1;
    if !publish(&server, &controller, version, None) {
        return;
    }
    loop {
        let first = tokio::select! {
            event = config_events.next() => event.is_some(),
            event = registry_events.next() => event.is_some(),
        };
        if !first {
            return;
        }
        let started = Instant::now();
        loop {
            let left = options.debounce_max.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            let quiet = options.debounce_quiet.min(left);
            let more = tokio::time::timeout(quiet, async {
                tokio::select! {
                    event = config_events.next() => event.is_some(),
                    event = registry_events.next() => event.is_some(),
                }
            })
            .await;
            match more {
                Ok(true) => continue,
                Ok(false) | Err(_) => break,
            }
        }
        version += 1;
        if !publish(&server, &controller, version, Some(started)) {
            return;
        }
    }
}

/// Decodes the rules once and publishes them; false when the server is gone.
/// `changed`: when the first change this push carries arrived.
fn publish(server: &Weak<Inner>, controller: &Controller, version: u64, changed: Option<Instant>) -> bool {
    let Some(server) = server.upgrade() else {
        return false;
    };
    let mut configs = Vec::new();
    for kind in [
        RouteRule::KIND,
        DestinationPolicy::KIND,
        EgressRule::KIND,
        IngressRule::KIND,
    ] {
        configs.extend(controller.list_cached(kind, None));
    }
    let mesh = match MeshConfig::from_configs(configs.iter().map(|c| &**c)) {
        Ok(mesh) => mesh,
        Err(error) => {
            tracing::error!(%error, "cannot decode the routing configuration; keeping the last push");
            return true;
        }
    };
    tracing::debug!(version, "pushing");
    server.snapshots.send_replace(Some(Arc::new(MeshSnapshot {
        version,
        mesh,
        generated: Default::default(),
    })));
    // Nobody listening is fine.
    let _ = server.pushes.send(PushInfo {
        version,
        latency: changed.map(|c| c.elapsed()),
    });
    true
}
