//! `pilotctl quarantine` with the real binaries: a RouteRule put straight
//! into etcd (around pilot's validation) is listed with its error and
//! `pilotctl get` does not show it; fixed in etcd, it is served again.

use std::time::{Duration, Instant};

use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_system_tests::{Store, discovery};
use pilot_test_support::{EtcdServer, Run, pilotctl};

const KEY: &str = "/pilot/config/config.istio.io/RouteRule/default/reviews-30";

/// `etcdctl put KEY` of a rule whose only route weighs `weight`.
fn put(endpoint: &str, weight: u32) {
    let body = serde_json::json!({
        "apiVersion": "config.istio.io/v1alpha2",
        "kind": "RouteRule",
        "metadata": {"name": "reviews-30", "namespace": "default"},
        "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v1"}, "weight": weight}]},
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut raw = EtcdConfigStore::connect(
            &EtcdOptions::new([endpoint.to_string()]),
            pilot_api::istio::registry(),
        )
        .await
        .unwrap()
        .client();
        raw.put(KEY, serde_json::to_vec(&body).unwrap(), None)
            .await
            .unwrap();
    });
}

fn until(what: &str, mut run: impl FnMut() -> Run, done: impl Fn(&Run) -> bool) -> Run {
    let started = Instant::now();
    loop {
        let result = run();
        if done(&result) {
            return result;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{what}: {result:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pilotctl_quarantine_lists_a_rule_put_straight_into_etcd_until_it_is_fixed() {
    let etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let server = discovery(&Store::Etcd(&endpoint), &[]);
    let url = server.url.clone();
    let quarantine = || pilotctl(Some(&url), &["quarantine"], &[], None);
    let empty = quarantine();
    assert_eq!(empty.code, 0, "{empty:?}");
    assert!(empty.stderr.contains("No object"), "{empty:?}");

    put(&etcd.endpoint(), 30);
    let listed = until("pilotctl quarantine lists the rule", quarantine, |r| r.code == 1);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{listed:?}");
    assert!(
        lines[1].contains("RouteRule")
            && lines[1].contains("default/reviews-30")
            && lines[1].contains("spec.route[0].weight: weights must sum to 100, got 30"),
        "{listed:?}"
    );
    assert!(listed.stderr.contains("1 object(s)"), "{listed:?}");
    let get = pilotctl(Some(&url), &["get", "rr"], &[], None);
    assert!(!get.stdout.contains("reviews-30"), "{get:?}");

    put(&etcd.endpoint(), 100);
    let fixed = until("the fixed rule leaves quarantine", quarantine, |r| r.code == 0);
    assert!(fixed.stdout.is_empty(), "{fixed:?}");
    let get = pilotctl(Some(&url), &["get", "rr", "reviews-30", "-o", "json"], &[], None);
    assert_eq!(get.code, 0, "{get:?}");
    let object: serde_json::Value = serde_json::from_str(&get.stdout).unwrap();
    assert_eq!(object["spec"]["route"][0]["weight"], 100, "{get:?}");
    server.terminate();
}
