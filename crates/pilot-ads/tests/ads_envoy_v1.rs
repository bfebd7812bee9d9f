//! Istio's own v1 bookinfo samples (the corpus `istio-samples/bookinfo-v1`
//! at `../shared/corpora/`, recorded in its SOURCE) through the ADS server and a real Envoy with real traffic:
//! every service to v1, reviews 80/20, jason to reviews v2, a delay and an
//! abort on jason's ratings requests, the same scenarios and counts as the
//! v1alpha2 rules' (`ads_envoy.rs`).

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use pilot_api::default_registry;
use pilot_model::{ConfigStore, DynConfig, Port, Protocol, Service, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use support::envoy::{admin, eventually, free_port, instance, request_to, serve_envoy, spread_to, upstream};

/// The objects of the corpus file `DIR/FILE`.
fn sample(dir: &Path, file: &str) -> Vec<DynConfig> {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    document::parse(file, &text, &default_registry()).unwrap()
}

/// Creates the objects of `file`, or updates those that exist (as
/// `pilotctl apply` would).
async fn apply(store: &MemoryConfigStore, dir: &Path, file: &str) {
    for mut object in sample(dir, file) {
        match store.get(&object.key()).await.unwrap() {
            Some(current) => {
                object.meta.resource_version = current.meta.resource_version.clone();
                store.update(object).await.unwrap();
            }
            None => {
                store.create(object).await.unwrap();
            }
        }
    }
}

/// The faults' delays Envoy has injected, over every listener.
fn delays_injected(admin_port: u16) -> u64 {
    admin(admin_port, "/stats?filter=fault.delays_injected")
        .lines()
        .filter_map(|l| l.rsplit_once(": ")?.1.trim().parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn istios_v1_bookinfo_samples_route_real_traffic() {
    let Some(samples) = pilot_test_support::corpus("istio-samples/bookinfo-v1") else {
        return;
    };
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let (reviews_port, ratings_port) = (free_port(), free_port());
    let reviews = registry.add_service(Service::new(
        "reviews.default.svc.cluster.local",
        vec![Port::new("http", reviews_port, Protocol::Http)],
    ));
    let ratings = registry.add_service(Service::new(
        "ratings.default.svc.cluster.local",
        vec![Port::new("http", ratings_port, Protocol::Http)],
    ));
    let no_delay = Arc::new(AtomicU64::new(0));
    for version in ["v1", "v2", "v3"] {
        let port = upstream(version, Arc::clone(&no_delay));
        registry.add_instance(instance(&reviews, port, version)).unwrap();
    }
    for version in ["v1", "v2"] {
        let port = upstream(version, Arc::clone(&no_delay));
        registry.add_instance(instance(&ratings, port, version)).unwrap();
    }
    let (_server, envoy) = serve_envoy(controller.clone(), Arc::new(registry.clone()), false);
    let admin_port = envoy.admin_port;
    let blocking = |f: Box<dyn FnOnce() + Send>| tokio::task::spawn_blocking(f);

    // No routing: every version of reviews answers.
    blocking(Box::new(move || {
        eventually("every reviews version answers", || {
            spread_to(reviews_port, "reviews", 30, &[]).len() == 3
        })
    }))
    .await
    .unwrap();

    // destination-rule-all and virtual-service-all-v1: everything to v1.
    apply(&store, &samples, "destination-rule-all.yaml").await;
    apply(&store, &samples, "virtual-service-all-v1.yaml").await;
    blocking(Box::new(move || {
        eventually("reviews and ratings only v1", || {
            spread_to(reviews_port, "reviews", 20, &[]).keys().eq(["v1"])
                && spread_to(ratings_port, "ratings", 10, &[]).keys().eq(["v1"])
        })
    }))
    .await
    .unwrap();

    // reviews 80/20: of 1000 requests, 75% to 85% to v1, the rest v2.
    apply(&store, &samples, "virtual-service-reviews-80-20.yaml").await;
    let counts = blocking_counts(reviews_port).await;
    let v1 = counts.get("v1").copied().unwrap_or(0) as f64 / 1000.0;
    assert!((0.75..=0.85).contains(&v1), "80/20 split, got {counts:?}");
    assert_eq!(
        counts.get("v1").copied().unwrap_or(0) + counts.get("v2").copied().unwrap_or(0),
        1000,
        "{counts:?}"
    );

    // reviews-test-v2: jason to v2, everyone else to v1.
    apply(&store, &samples, "virtual-service-reviews-test-v2.yaml").await;
    blocking(Box::new(move || {
        eventually("jason reaches reviews v2", || {
            spread_to(reviews_port, "reviews", 10, &[("end-user", "jason")])
                .keys()
                .eq(["v2"])
        });
        let others = spread_to(reviews_port, "reviews", 50, &[("end-user", "mary")]);
        assert!(others.keys().eq(["v1"]), "{others:?}");
        let anonymous = spread_to(reviews_port, "reviews", 50, &[]);
        assert!(anonymous.keys().eq(["v1"]), "{anonymous:?}");
    }))
    .await
    .unwrap();

    // ratings-test-delay: jason's requests are delayed (Envoy counts the
    // injected delay) and still answered by v1.
    let before = delays_injected(admin_port);
    apply(&store, &samples, "virtual-service-ratings-test-delay.yaml").await;
    blocking(Box::new(move || {
        eventually("a delay injected on jason's ratings request", || {
            let (status, body) = request_to(ratings_port, "ratings", &[("end-user", "jason")]);
            assert_eq!((status, body.as_str()), (200, "v1"));
            delays_injected(admin_port) > before
        });
        let after = delays_injected(admin_port);
        let others = spread_to(ratings_port, "ratings", 20, &[("end-user", "mary")]);
        assert!(others.keys().eq(["v1"]), "{others:?}");
        assert_eq!(delays_injected(admin_port), after, "no delay for others");
    }))
    .await
    .unwrap();

    // ratings-test-abort: jason's requests are answered 500, the others'
    // reach v1.
    apply(&store, &samples, "virtual-service-ratings-test-abort.yaml").await;
    blocking(Box::new(move || {
        eventually("jason's ratings requests abort with 500", || {
            spread_to(ratings_port, "ratings", 10, &[("end-user", "jason")])
                .keys()
                .eq(["status 500"])
        });
        let others = spread_to(ratings_port, "ratings", 50, &[]);
        assert!(others.keys().eq(["v1"]), "{others:?}");
    }))
    .await
    .unwrap();
    drop(envoy);
}

/// Waits for reviews v2 to get traffic, then counts 1000 requests.
async fn blocking_counts(port: u16) -> std::collections::BTreeMap<String, usize> {
    tokio::task::spawn_blocking(move || {
        eventually("reviews v2 gets traffic", || {
            spread_to(port, "reviews", 20, &[]).contains_key("v2")
        });
        spread_to(port, "reviews", 1000, &[])
    })
    .await
    .unwrap()
}
