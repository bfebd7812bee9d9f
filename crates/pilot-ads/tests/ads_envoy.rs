//! The ADS server driving a real Envoy 1.40 (no traffic capture): real
//! requests through Envoy's listener reach the versions the rules say, and
//! the server records what Envoy ACKed and NACKed.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pilot_api::istio;
use pilot_model::{ConfigKey, ConfigStore, Labels, Port, Protocol, Service, ServiceDiscovery};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::NACKED_REGEX;
use support::envoy::{
    HOST, admin, eventually, free_port, instance, request, rule, serve_envoy, spread, upstream,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_routing_scenarios() {
    routing_scenarios(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_routing_scenarios() {
    routing_scenarios(true).await;
}

async fn routing_scenarios(delta: bool) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let service_port = free_port();
    let service = registry.add_service(Service::new(
        HOST,
        vec![Port::new("http", service_port, Protocol::Http)],
    ));
    let slow = Arc::new(AtomicU64::new(0));
    let fast = Arc::new(AtomicU64::new(0));
    for version in ["v1", "v2", "v3"] {
        let port = upstream(
            version,
            if version == "v1" {
                Arc::clone(&slow)
            } else {
                Arc::clone(&fast)
            },
        );
        registry.add_instance(instance(&service, port, version)).unwrap();
    }

    let (server, envoy) = serve_envoy(controller.clone(), Arc::new(registry.clone()), delta);
    let admin_port = envoy.admin_port;
    let run = |f: Box<dyn FnOnce() + Send>| tokio::task::spawn_blocking(f);

    // No rules: every version gets traffic.
    run(Box::new(move || {
        eventually("every version answers", || {
            spread(service_port, 30, &[]).len() == 3
        });
    }))
    .await
    .unwrap();
    // The feedback shows the proxy in sync on every type.
    let synced = || {
        server.status().iter().any(|p| {
            p.node_id.starts_with("sidecar~10.99.0.1")
                && p.incremental == delta
                && pilot_ads::types_of(&p.node_id)
                    .iter()
                    .all(|t| p.types.get(t).is_some_and(|s| s.synced()))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !synced() {
        assert!(
            Instant::now() < deadline,
            "proxy never synced: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // 100% to v1, then 80/20 v1/v2.
    let all_v1 = store
        .create(rule("metadata: {name: reviews-default, namespace: default}\nspec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}}]\n"))
        .await
        .unwrap();
    run(Box::new(move || {
        eventually("all traffic to v1", || {
            spread(service_port, 20, &[]).keys().eq(["v1"])
        })
    }))
    .await
    .unwrap();
    let mut split = rule(
        "metadata: {name: reviews-default, namespace: default}\nspec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}, weight: 80}, {labels: {version: v2}, weight: 20}]\n",
    );
    split.meta.resource_version = all_v1.meta.resource_version.clone();
    store.update(split).await.unwrap();
    let counts = tokio::task::spawn_blocking(move || {
        eventually("v2 gets traffic", || {
            spread(service_port, 20, &[]).contains_key("v2")
        });
        spread(service_port, 1000, &[])
    })
    .await
    .unwrap();
    let v1 = counts.get("v1").copied().unwrap_or(0) as f64 / 1000.0;
    assert!((0.75..=0.85).contains(&v1), "80/20 split, got {counts:?}");
    assert!(!counts.contains_key("v3"), "{counts:?}");

    // A header match sends jason to v3; the others are unaffected.
    store
        .create(rule("metadata: {name: reviews-jason, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 2\n  match: {request: {headers: {end-user: {exact: jason}}}}\n  route: [{labels: {version: v3}}]\n"))
        .await
        .unwrap();
    run(Box::new(move || {
        eventually("jason reaches v3", || {
            spread(service_port, 10, &[("end-user", "jason")])
                .keys()
                .eq(["v3"])
        });
        assert!(!spread(service_port, 50, &[("end-user", "mary")]).contains_key("v3"));
    }))
    .await
    .unwrap();

    // An abort fault answers with its status; a timeout cuts a slow upstream.
    store
        .create(rule("metadata: {name: reviews-abort, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 3\n  match: {request: {headers: {x-fault: {exact: abort}}}}\n  route: [{labels: {version: v2}}]\n  httpFault: {abort: {percent: 100, httpStatus: 418}}\n"))
        .await
        .unwrap();
    store
        .create(rule("metadata: {name: reviews-timeout, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 3\n  match: {request: {headers: {x-slow: {exact: yes}}}}\n  route: [{labels: {version: v1}}]\n  httpReqTimeout: {simpleTimeout: {timeout: 200ms}}\n"))
        .await
        .unwrap();
    slow.store(2000, Ordering::Relaxed);
    run(Box::new(move || {
        eventually("the abort fault answers 418", || {
            request(service_port, &[("x-fault", "abort")]).0 == 418
        });
        eventually("the timeout answers 504", || {
            let started = Instant::now();
            request(service_port, &[("x-slow", "yes")]).0 == 504
                && started.elapsed() < Duration::from_millis(1500)
        });
    }))
    .await
    .unwrap();
    slow.store(0, Ordering::Relaxed);

    // A change Envoy rejects (a regex over this Envoy's lowered RE2 limit,
    // valid for pilot) is NACKed and recorded; traffic keeps flowing on
    // the previous configuration.
    let sent_before = server.version().unwrap();
    store
        .create(rule(&format!("metadata: {{name: reviews-bad-regex, namespace: default}}\nspec:\n  destination: {{name: reviews}}\n  precedence: 9\n  match: {{request: {{headers: {{cookie: {{regex: \"{NACKED_REGEX}\"}}}}}}}}\n  route: [{{labels: {{version: v2}}}}]\n")))
        .await
        .unwrap();
    server.wait_version(sent_before + 1).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let nack = loop {
        let nack = server
            .status()
            .iter()
            .find_map(|p| p.types.get("RDS").and_then(|s| s.nack.clone()));
        if let Some(nack) = nack {
            break nack;
        }
        assert!(
            Instant::now() < deadline,
            "no NACK recorded: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(nack.message.contains("program size"), "{nack:?}");
    // Counted once: the rejected version is not re-sent (which would make
    // Envoy NACK it again).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.nacks_total(), 1, "{:?}", server.status());
    // By type, as pilot_total_xds_rejects{type} and pilot_xds_pushes{type}
    // report them.
    assert_eq!(
        server.nacks_by_type(),
        [
            ("CDS", 0),
            ("EDS", 0),
            ("LDS", 0),
            ("SRDS", 0),
            ("RDS", 1),
            ("WDS", 0),
            ("WADS", 0)
        ],
        "{:?}",
        server.status()
    );
    for (short, sent) in server.sent_by_type() {
        // A sidecar is sent the Envoy types it asks for (scopes are an
        // edge proxy's); ztunnel's (WDS, WADS) none.
        let envoys = ["CDS", "EDS", "LDS", "RDS"].contains(&short);
        assert_eq!(sent > 0, envoys, "{short}: {sent} responses counted as sent");
    }
    run(Box::new(move || {
        assert_eq!(
            request(service_port, &[("end-user", "jason")]).1,
            "v3",
            "the previous routes still serve"
        );
    }))
    .await
    .unwrap();
    store
        .delete(&ConfigKey::new("RouteRule", "default", "reviews-bad-regex"), None)
        .await
        .unwrap();

    // Deleting the rules restores the default: every version again.
    for name in [
        "reviews-default",
        "reviews-jason",
        "reviews-abort",
        "reviews-timeout",
    ] {
        store
            .delete(&ConfigKey::new("RouteRule", "default", name), None)
            .await
            .unwrap();
    }
    run(Box::new(move || {
        eventually("every version again", || spread(service_port, 40, &[]).len() == 3)
    }))
    .await
    .unwrap();

    // Removing an instance removes it from Envoy's endpoints without a
    // listener rebuild.
    let listener_updates = |admin_port: u16| -> String {
        admin(admin_port, "/stats?filter=listener_manager.lds.update_success")
    };
    let before = listener_updates(admin_port);
    let v3 = registry.instances(HOST, &[], &[Labels::from_pairs([("version", "v3")])]);
    registry.remove_instances(HOST, v3[0].endpoint.address, Some(v3[0].endpoint.port));
    let v3_port = v3[0].endpoint.port;
    run(Box::new(move || {
        eventually("v3's endpoint leaves /clusters", || {
            !admin(admin_port, "/clusters").contains(&format!("127.0.0.1:{v3_port}"))
        });
        assert!(!spread(service_port, 30, &[]).contains_key("v3"));
    }))
    .await
    .unwrap();
    assert_eq!(
        listener_updates(admin_port).split("\r\n\r\n").nth(1),
        before.split("\r\n\r\n").nth(1),
        "no listener update"
    );
    drop(envoy);
}
