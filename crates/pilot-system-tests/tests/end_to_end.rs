//! The operator's path with the real binaries: pilot-discovery (on the
//! memory store, then on a real etcd), `pilotctl apply -f
//! examples/bookinfo/`, get, a stale replace, a real Envoy that receives
//! the rule, proxy-status, delete.

use pilot_system_tests::{Mesh, Store, weighted};
use pilot_test_support::{Envoy, eventually, pilotctl};

const NODE: &str = "sidecar~10.0.0.100~e2e.default~default.svc.cluster.local";

#[test]
fn memory_store_apply_get_replace_envoy_proxy_status_delete() {
    operator_flow(&Store::Memory);
}

#[test]
fn etcd_store_apply_get_replace_envoy_proxy_status_delete() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    operator_flow(&Store::Etcd(&etcd.endpoint()));
}

fn operator_flow(store: &Store) {
    let mesh = Mesh::bookinfo();
    let server = mesh.discovery(store, &[]);
    let url = Some(server.url.as_str());

    // apply the whole directory: everything is created.
    let applied = pilotctl(url, &["apply", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    assert!(
        applied.stdout.contains("routerule/reviews-default created"),
        "{applied:?}"
    );
    assert!(
        applied.stdout.contains("destinationpolicy/reviews-v1-cb created"),
        "{applied:?}"
    );
    // Applying again changes nothing.
    let again = pilotctl(url, &["apply", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(!again.stdout.contains("created"), "{again:?}");
    assert!(
        again.stdout.contains("routerule/reviews-timeout unchanged"),
        "{again:?}"
    );

    // get: by kind name, plural or short name.
    for kind in ["routerules", "RouteRule", "rr"] {
        let got = pilotctl(url, &["get", kind], &[], None);
        assert_eq!(got.code, 0, "{got:?}");
        assert!(got.stdout.starts_with("NAME"), "{got:?}");
        assert!(
            got.stdout.lines().any(|l| l.starts_with("reviews-default ")),
            "{got:?}"
        );
    }
    let yaml = pilotctl(url, &["get", "rr", "reviews-default", "-o", "yaml"], &[], None);
    assert_eq!(yaml.code, 0, "{yaml:?}");
    assert!(yaml.stdout.contains("weight: 80"), "{yaml:?}");
    let json = pilotctl(url, &["get", "rr", "reviews-default", "-o", "json"], &[], None);
    let object: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let current = object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // replace with a stale version: refused, with both versions named.
    let stale = yaml.stdout.replace(
        &format!("resourceVersion: \"{current}\""),
        "resourceVersion: \"1\"",
    );
    assert_ne!(stale, yaml.stdout);
    let replaced = pilotctl(url, &["replace", "-f", "-"], &[], Some(&stale));
    assert_eq!(replaced.code, 1, "{replaced:?}");
    assert_eq!(
        replaced.stderr.trim(),
        format!(
            "routerule reviews-default was changed since you read it: you sent version 1, the current version \
             is {current}; get it again and retry, or use apply"
        )
    );
    // create of an existing object: refused, with the current version.
    let created = pilotctl(
        url,
        &["create", "-f", "examples/bookinfo/route-rule-reviews-80-20.yaml"],
        &[],
        None,
    );
    assert_eq!(created.code, 1, "{created:?}");
    assert_eq!(
        created.stderr.trim(),
        format!("routerule reviews-default already exists at version {current}; use replace or apply")
    );
    // replace at the current version works.
    let replaced = pilotctl(url, &["replace", "-f", "-"], &[], Some(&yaml.stdout));
    assert_eq!(replaced.code, 0, "{replaced:?}");
    assert_eq!(replaced.stdout.trim(), "routerule/reviews-default replaced");

    // A real Envoy gets the rule: reviews split 80/20 between v1 and v2.
    let envoy = Envoy::ads(NODE, &[("INTERCEPTION_MODE", "NONE")], server.xds_port, false).unwrap();
    let (v1, v2) = (mesh.reviews("v1"), mesh.reviews("v2"));
    let split = |dump: &serde_json::Value| {
        let weights = weighted(dump);
        weights.contains(&(v1.clone(), 80)) && weights.contains(&(v2.clone(), 20))
    };
    let mut dump = serde_json::Value::Null;
    eventually("Envoy to receive the reviews 80/20 split", || {
        dump = serde_json::from_str(&envoy.admin("/config_dump")).unwrap_or_default();
        split(&dump)
    });

    // proxy-status: the Envoy is SYNCED for every type.
    let mut status = pilotctl(url, &["proxy-status"], &[], None);
    eventually("proxy-status to show the Envoy synced", || {
        status = pilotctl(url, &["proxy-status"], &[], None);
        status
            .stdout
            .lines()
            .any(|l| l.starts_with(NODE) && l.matches("SYNCED").count() == 4)
    });
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.stdout.starts_with("NAME"), "{status:?}");
    assert!(!status.stdout.contains("NACKED"), "{status:?}");

    // delete: the rule leaves the store and the proxy.
    let deleted = pilotctl(
        url,
        &["delete", "-f", "examples/bookinfo/route-rule-reviews-80-20.yaml"],
        &[],
        None,
    );
    assert_eq!(deleted.code, 0, "{deleted:?}");
    assert_eq!(deleted.stdout.trim(), "routerule/reviews-default deleted");
    let missing = pilotctl(url, &["get", "rr", "reviews-default"], &[], None);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert_eq!(missing.stderr.trim(), "routerule reviews-default not found");
    eventually("Envoy to drop the 80/20 split", || {
        let dump: serde_json::Value = serde_json::from_str(&envoy.admin("/config_dump")).unwrap_or_default();
        !dump.is_null() && !split(&dump)
    });
    let by_name = pilotctl(
        url,
        &["delete", "rr", "reviews-test-v3", "reviews-timeout"],
        &[],
        None,
    );
    assert_eq!(by_name.code, 0, "{by_name:?}");
    assert_eq!(
        by_name.stdout,
        "routerule/reviews-test-v3 deleted\nrouterule/reviews-timeout deleted\n"
    );

    drop(envoy);
    server.terminate();
}
