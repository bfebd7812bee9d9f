//! Blast radius with a real Envoy 1.40, state of the world and delta: a
//! rule this Envoy rejects (a regex over its lowered RE2 limit, valid for
//! pilot) is left out of its configuration, so a later innocent rule on
//! the same port reaches it and routes real requests; the proxy's record
//! says which object is withheld and why; the exclusion survives a
//! reconnect (the new Envoy is never sent the rule); fixing the rule
//! brings it in. Requests sent throughout never fail, and Envoy never
//! routes to a cluster it lacks (leaving the rule out is make before
//! break: its routes go before its cluster).

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pilot_ads::XdsServer;
use pilot_api::istio;
use pilot_model::{ConfigKey, ConfigStore, Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::NACKED_REGEX;
use support::envoy::{
    HOST, admin, eventually, free_port, instance, request, rule, spread, start_envoy, upstream,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_leaves_a_rejected_rule_out() {
    rejected_rule(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_leaves_a_rejected_rule_out() {
    rejected_rule(true).await;
}

/// A cookie this rule's regex matches.
const COOKIE: &str = "0123456789abcdef0123456789abcdef";

fn cookie_rule(regex: &str) -> pilot_model::DynConfig {
    rule(&format!(
        "metadata: {{name: reviews-cookie, namespace: default}}\nspec:\n  destination: {{name: reviews}}\n  precedence: 9\n  match: {{request: {{headers: {{cookie: {{regex: \"{regex}\"}}}}}}}}\n  route: [{{labels: {{version: v2}}}}]\n"
    ))
}

/// Requests without pause (one connection each), counted, until `stop`.
fn background(port: u16, stop: Arc<AtomicBool>, ok: Arc<AtomicU64>, failed: Arc<AtomicU64>) {
    while !stop.load(Ordering::Relaxed) {
        match request(port, &[]) {
            (200, _) => ok.fetch_add(1, Ordering::Relaxed),
            _ => failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

async fn rejected_rule(delta: bool) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let service_port = free_port();
    let service = registry.add_service(Service::new(
        HOST,
        vec![Port::new("http", service_port, Protocol::Http)],
    ));
    let no_delay = Arc::new(AtomicU64::new(0));
    for version in ["v1", "v2", "v3"] {
        let port = upstream(version, Arc::clone(&no_delay));
        registry.add_instance(instance(&service, port, version)).unwrap();
    }
    store
        .create(rule("metadata: {name: reviews-default, namespace: default}\nspec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}}]\n"))
        .await
        .unwrap();
    let (server, xds_port) = support::server::serve(controller, Arc::new(registry.clone()));
    let mut envoy = start_envoy(xds_port, delta);
    let admin_port = envoy.admin_port;
    let run = |f: Box<dyn FnOnce() + Send>| tokio::task::spawn_blocking(f);
    run(Box::new(move || {
        eventually("v1 serves", || spread(service_port, 10, &[]).keys().eq(["v1"]))
    }))
    .await
    .unwrap();
    // Requests all along (but while no Envoy runs): none may fail.
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let start_client = || {
        let stop = Arc::new(AtomicBool::new(false));
        let (stopping, ok, failed) = (Arc::clone(&stop), Arc::clone(&ok), Arc::clone(&failed));
        (
            stop,
            std::thread::spawn(move || background(service_port, stopping, ok, failed)),
        )
    };
    let (stop, client) = start_client();

    // The rule Envoy rejects: NACKed once, then left out of its
    // configuration, which Envoy ACKs; its record says so.
    let bad = store.create(cookie_rule(NACKED_REGEX)).await.unwrap();
    let bad = bad.meta.resource_version.clone().unwrap();
    let withheld = wait_for(&server, "the rejected rule withheld", |p| {
        p.withheld.iter().any(|w| w.name == "reviews-cookie") && p.types.values().all(|t| t.synced())
    })
    .await;
    let entry = withheld
        .withheld
        .iter()
        .find(|w| w.name == "reviews-cookie")
        .unwrap();
    assert_eq!(entry.resource_version, bad, "{withheld:?}");
    assert_eq!(entry.type_, "RDS", "{withheld:?}");
    assert!(entry.message.contains("program size"), "{withheld:?}");
    assert_eq!(
        withheld.withheld.len(),
        1,
        "only the rejected rule is withheld: {withheld:?}"
    );
    assert_eq!(server.nacks_total(), 1, "{:?}", server.status());
    // The status an object is given from the proxies' records: the bad
    // rule withheld from the one proxy, with Envoy's message.
    let status = |version: &str| {
        pilot_model::distribution_status(
            "RouteRule",
            version,
            &server.distribution(),
            std::time::SystemTime::UNIX_EPOCH,
        )
    };
    let bad_status = status(&bad);
    assert_eq!(bad_status.summary(), "0/1 1 WITHHELD", "{bad_status:?}");
    assert!(
        bad_status.nacks[0].message.contains("program size"),
        "{bad_status:?}"
    );

    // An innocent rule on the same port, written after: it reaches Envoy
    // and routes real requests (every one of 20).
    let innocent = store
        .create(rule("metadata: {name: reviews-innocent, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 8\n  match: {request: {headers: {x-innocent: {exact: \"yes\"}}}}\n  route: [{labels: {version: v3}}]\n"))
        .await
        .unwrap();
    let innocent = innocent.meta.resource_version.clone().unwrap();
    run(Box::new(move || {
        eventually("the innocent rule routes to v3", || {
            spread(service_port, 1, &[("x-innocent", "yes")])
                .keys()
                .eq(["v3"])
        });
        let counts = spread(service_port, 20, &[("x-innocent", "yes")]);
        assert_eq!(counts.get("v3"), Some(&20), "{counts:?}");
        // The rejected rule is not in Envoy: its cookie goes to v1.
        let counts = spread(service_port, 20, &[("cookie", COOKIE)]);
        assert_eq!(counts.get("v1"), Some(&20), "{counts:?}");
    }))
    .await
    .unwrap();
    assert_eq!(
        server.nacks_total(),
        1,
        "the innocent rule was refused: {:?}",
        server.status()
    );
    wait_for(&server, "the innocent rule's push ACKed", |p| {
        p.types.values().all(|t| t.synced())
    })
    .await;
    assert_eq!(status(&innocent).summary(), "1/1");
    assert_eq!(status(&bad).summary(), "0/1 1 WITHHELD");
    let no_cluster_before_reconnect = admin(admin_port, "/stats?filter=no_cluster");

    // The same proxy reconnects (a new Envoy, the same node id): the
    // exclusion belongs to the node, so the rule is never sent to it.
    stop.store(true, Ordering::Relaxed);
    client.join().unwrap();
    envoy.kill();
    drop(envoy);
    let envoy = start_envoy(xds_port, delta);
    let admin_port = envoy.admin_port;
    run(Box::new(move || {
        eventually("the innocent rule routes through the new Envoy", || {
            spread(service_port, 1, &[("x-innocent", "yes")])
                .keys()
                .eq(["v3"])
        });
    }))
    .await
    .unwrap();
    wait_for(&server, "the new stream synced, the rule withheld", |p| {
        p.withheld.len() == 1 && p.types.values().all(|t| t.synced())
    })
    .await;
    assert_eq!(
        server.nacks_total(),
        1,
        "the reconnected Envoy was sent the rule: {:?}",
        server.status()
    );
    let (stop, client) = start_client();

    // Fixed: the new version is sent, ACKed, and routes.
    let mut fixed = cookie_rule("[0-9a-f]+");
    fixed.meta.resource_version = Some(bad);
    store.update(fixed).await.unwrap();
    wait_for(&server, "nothing withheld", |p| {
        p.withheld.is_empty() && p.types.values().all(|t| t.synced())
    })
    .await;
    run(Box::new(move || {
        eventually("the fixed rule routes to v2", || {
            spread(service_port, 1, &[("cookie", COOKIE)]).keys().eq(["v2"])
        });
        let counts = spread(service_port, 20, &[("cookie", COOKIE)]);
        assert_eq!(counts.get("v2"), Some(&20), "{counts:?}");
    }))
    .await
    .unwrap();
    assert_eq!(server.nacks_total(), 1, "{:?}", server.status());

    // Deleted after being rejected again: nothing withheld either.
    let current = store
        .get(&ConfigKey::new("RouteRule", "default", "reviews-cookie"))
        .await
        .unwrap()
        .unwrap();
    let mut bad_again = cookie_rule(NACKED_REGEX);
    bad_again.meta.resource_version = current.meta.resource_version.clone();
    store.update(bad_again).await.unwrap();
    wait_for(&server, "the rule withheld again", |p| {
        p.withheld.len() == 1 && p.types.values().all(|t| t.synced())
    })
    .await;
    store
        .delete(&ConfigKey::new("RouteRule", "default", "reviews-cookie"), None)
        .await
        .unwrap();
    wait_for(&server, "nothing withheld after the delete", |p| {
        p.withheld.is_empty() && p.types.values().all(|t| t.synced())
    })
    .await;

    let before = ok.load(Ordering::Relaxed);
    while ok.load(Ordering::Relaxed) < before + 20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    client.join().unwrap();
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed ({} answered)",
        ok.load(Ordering::Relaxed)
    );
    for stats in [
        no_cluster_before_reconnect,
        admin(admin_port, "/stats?filter=no_cluster"),
    ] {
        assert!(stats.contains("no_cluster"), "{stats}");
        assert!(
            stats
                .lines()
                .filter(|l| l.contains("no_cluster"))
                .all(|l| l.ends_with(": 0")),
            "{stats}"
        );
    }
    drop(envoy);
}

/// Waits until the one connected proxy's record passes `check`, and
/// returns it.
async fn wait_for(
    server: &XdsServer,
    what: &str,
    check: impl Fn(&pilot_ads::ProxyStatus) -> bool,
) -> pilot_ads::ProxyStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let proxies = server.status();
        if let [one] = &proxies[..]
            && check(one)
        {
            return one.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
