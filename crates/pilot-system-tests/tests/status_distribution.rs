//! Distribution status with real Envoys: pilot-discovery writes
//! each routing object's status back to its store, on memory (with and
//! without `--data-dir`), etcd and the fake Kubernetes API server.
//!
//! Bookinfo applied with three Envoys connected: every object shows 3/3
//! at its current version; a rule Envoy rejects is left out of their
//! configuration and shows 0/3 3 WITHHELD with Envoy's message while the
//! others stay as they were; an innocent rule on the same port written
//! after it reaches every Envoy (3/3); fixed, the rule shows 3/3;
//! `pilotctl get` shows the STATUS column and `-o yaml` the status;
//! after a restart the stored status still speaks of the objects'
//! current versions.

use pilot_system_tests::{Mesh, Store, get, list};
use pilot_test_support::{Discovery, Envoy, EtcdServer, FakeCluster, NACKED_REGEX, eventually, pilotctl};
use serde_json::Value;

const ENVOYS: usize = 3;

/// A rule pilot accepts and the test Envoys refuse: its regex is over their
/// lowered RE2 program-size limit ([`pilot_test_support::NACKED_REGEX`]).
fn bad_rule() -> String {
    format!(
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: reviews-cookie, namespace: default}}\nspec:\n  destination: {{name: reviews}}\n  precedence: 9\n  match: {{request: {{headers: {{cookie: {{regex: \"{NACKED_REGEX}\"}}}}}}}}\n  route: [{{labels: {{version: v2}}}}]\n"
    )
}

#[test]
fn memory_store_reports_distribution_status() {
    distribution(&Store::Memory, false);
}

#[test]
fn memory_store_with_data_dir_keeps_status_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    distribution(&Store::DataDir(dir.path()), true);
}

#[test]
fn etcd_store_reports_and_keeps_distribution_status() {
    let etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    distribution(&Store::Etcd(&endpoint), true);
}

#[test]
fn kubernetes_store_reports_status_through_the_status_subresource() {
    let cluster = FakeCluster::start();
    distribution(&Store::Kubernetes(&cluster), true);
    // The status is the custom object's, written through /status.
    let routerules = kube::api::ApiResource {
        group: "config.istio.io".into(),
        version: "v1alpha2".into(),
        api_version: "config.istio.io/v1alpha2".into(),
        kind: "RouteRule".into(),
        plural: "routerules".into(),
    };
    let object = cluster
        .block_on(async {
            kube::Api::<kube::api::DynamicObject>::namespaced_with(cluster.client(), "default", &routerules)
                .get_status("reviews-default")
                .await
        })
        .unwrap();
    // (Written by the restarted server, which has no proxies.)
    assert_eq!(object.data["status"]["proxies"], 0, "{:?}", object.data);
    assert_eq!(
        object.data["status"]["observedGeneration"].as_i64(),
        object.metadata.generation,
        "{:?}",
        object
    );
    assert_ne!(
        object.data["status"]["observedVersion"].as_str(),
        object.metadata.resource_version.as_deref(),
        "Kubernetes moved the resourceVersion with the status write; pilot's version did not move"
    );
    drop(cluster);
}

/// The server on `store`, with a short status interval and the services.
fn start(mesh: &Mesh, store: &Store) -> Discovery {
    mesh.discovery(store, &["--status-interval", "200ms"])
}

/// Bookinfo's distribution status with three Envoys on `store`; with
/// `restart`, and what the store kept after a restart.
fn distribution(store: &Store, restart: bool) {
    let mesh = Mesh::bookinfo();
    let server = start(&mesh, store);
    let url = Some(server.url.as_str());
    let applied = pilotctl(url, &["apply", "-f", "examples/bookinfo/"], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");

    let envoys: Vec<Envoy> = (0..ENVOYS)
        .map(|i| {
            let node = format!(
                "sidecar~10.0.0.{}~status{i}.default~default.svc.cluster.local",
                50 + i
            );
            Envoy::ads(&node, &[("INTERCEPTION_MODE", "NONE")], server.xds_port, false).unwrap()
        })
        .collect();

    // Every object of every routing kind: 3/3 at its current version.
    let kinds = ["routerules", "destinationpolicies", "egressrules", "ingressrules"];
    let mut objects = Vec::new();
    eventually("every object to show 3/3 at its current version", || {
        objects = kinds.iter().flat_map(|kind| list(url, kind)).collect();
        objects.len() > 5 && objects.iter().all(|o| reports(o, ENVOYS as u64, 0))
    });
    // Operators see the writes: at least one per object, by result.
    let (code, metrics) = server.get("/metrics");
    assert_eq!(code, 200, "{metrics}");
    let sample = |result: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("pilot_status_writes_total{{result=\"{result}\"}} ")))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    assert!(
        sample("written") >= Some(objects.len() as u64),
        "{objects:?}: {metrics}"
    );
    assert!(
        sample("dropped").is_some() && sample("failed").is_some(),
        "{metrics}"
    );
    let table = pilotctl(url, &["get", "rr"], &[], None);
    assert!(table.stdout.starts_with("NAME"), "{table:?}");
    assert!(
        table.stdout.lines().next().unwrap().contains("STATUS"),
        "{table:?}"
    );
    for line in table.stdout.lines().skip(1) {
        assert!(line.contains(" 3/3 "), "{table:?}");
    }

    // A rule Envoy rejects: left out of their configuration, 0/3 3
    // WITHHELD, with Envoy's message.
    let created = pilotctl(url, &["create", "-f", "-"], &[], Some(&bad_rule()));
    assert_eq!(created.code, 0, "{created:?}");
    let mut bad = Value::Null;
    eventually("the rejected rule to show 0/3 3 WITHHELD", || {
        bad = get(url, "routerules", "reviews-cookie");
        reports(&bad, 0, 0) && bad["status"]["withheld"] == ENVOYS as u64
    });
    let message = bad["status"]["nacks"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("program size"), "{bad}");
    assert_eq!(bad["status"]["nacks"][0]["proxies"], ENVOYS as u64, "{bad}");
    let row = pilotctl(url, &["get", "rr", "reviews-cookie"], &[], None);
    assert!(row.stdout.contains("0/3 3 WITHHELD"), "{row:?}");
    // And each proxy's record says which object it is served without.
    let listed = pilotctl(url, &["proxy-status"], &[], None);
    assert_eq!(
        listed
            .stdout
            .matches("is served without RouteRule default/reviews-cookie")
            .count(),
        ENVOYS,
        "{listed:?}"
    );
    // The other objects did not move: same versions, still 3/3.
    for object in &objects {
        let now = get(url, kind_of(object), name_of(object));
        assert_eq!(
            now["metadata"]["resourceVersion"],
            object["metadata"]["resourceVersion"]
        );
        assert!(
            reports(&now, ENVOYS as u64, 0),
            "an unrelated write disturbed {now}"
        );
    }

    // An innocent rule on the same service port, written while the bad
    // one is withheld: it reaches every Envoy, which refused the route
    // configuration once (the bad rule's) and not again.
    let created = pilotctl(url, &["create", "-f", "-"], &[], Some(INNOCENT_RULE));
    assert_eq!(created.code, 0, "{created:?}");
    let mut shown = Value::Null;
    eventually_showing("the innocent rule to show 3/3", &server, &mut shown, || {
        let innocent = get(url, "routerules", "reviews-innocent");
        (
            reports(&innocent, ENVOYS as u64, 0),
            serde_json::json!({"innocent": innocent, "bad": get(url, "routerules", "reviews-cookie")}),
        )
    });
    for envoy in &envoys {
        assert_eq!(rds_rejections(envoy), 1, "{}", envoy.admin("/stats?filter=rds"));
    }
    let bad = get(url, "routerules", "reviews-cookie");
    assert!(
        reports(&bad, 0, 0) && bad["status"]["withheld"] == ENVOYS as u64,
        "{bad}"
    );

    // Fixed (replace, carrying the version read before status writes): 3/3.
    let yaml = pilotctl(url, &["get", "rr", "reviews-cookie", "-o", "yaml"], &[], None);
    assert!(yaml.stdout.contains("status:"), "{yaml:?}");
    assert!(yaml.stdout.contains("observedVersion:"), "{yaml:?}");
    let fixed = yaml.stdout.replace(NACKED_REGEX, "[0-9a-f]{8}");
    assert_ne!(fixed, yaml.stdout, "{yaml:?}");
    let replaced = pilotctl(url, &["replace", "-f", "-"], &[], Some(&fixed));
    assert_eq!(replaced.code, 0, "{replaced:?}");
    eventually_showing(
        "the fixed rule to show 3/3, withheld from none",
        &server,
        &mut shown,
        || {
            let fixed = get(url, "routerules", "reviews-cookie");
            let innocent = get(url, "routerules", "reviews-innocent");
            (
                reports(&fixed, ENVOYS as u64, 0)
                    && fixed["status"].get("withheld").is_none()
                    && reports(&innocent, ENVOYS as u64, 0),
                serde_json::json!({"fixed": fixed, "innocent": innocent}),
            )
        },
    );

    if !restart {
        drop(envoys);
        server.terminate();
        return;
    }
    drop(envoys);
    let before: Vec<Value> = kinds.iter().flat_map(|kind| list(url, kind)).collect();
    server.terminate();
    let server = start(&mesh, store);
    let url = Some(server.url.as_str());
    let after: Vec<Value> = kinds.iter().flat_map(|kind| list(url, kind)).collect();
    assert_eq!(after.len(), before.len());
    for (before, after) in before.iter().zip(&after) {
        assert_eq!(
            after["metadata"], before["metadata"],
            "versions changed across a restart"
        );
        assert_eq!(
            after["status"]["observedVersion"], after["metadata"]["resourceVersion"],
            "after a restart the status no longer speaks of the current version: {after}"
        );
    }
    // The restarted server has no proxies: once it holds the status-writer
    // election (it may wait for it: replicas), every object says so.
    eventually(
        "the restarted server to report 0 proxies for every object",
        || {
            kinds
                .iter()
                .flat_map(|kind| list(url, kind))
                .all(|o| o["status"]["proxies"] == 0)
        },
    );
    server.terminate();
}

/// True when `object`'s status is about its current version with
/// `acked` ACKs and `nacked` NACKs of 3 proxies.
/// A rule on the same port as the bad one, with nothing wrong in it.
const INNOCENT_RULE: &str = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: reviews-innocent, namespace: default}\nspec:\n  destination: {name: reviews}\n  precedence: 8\n  match: {request: {headers: {x-innocent: {exact: \"yes\"}}}}\n  route: [{labels: {version: v1}}]\n";

/// How many times Envoy refused a response of route configurations: a
/// state-of-the-world response carries every route configuration, and a
/// refusal counts once on each (bookinfo's egress rule gives port 80 one
/// beside the services' port), so the most any one of them counts.
fn rds_rejections(envoy: &Envoy) -> u64 {
    envoy
        .admin("/stats?filter=rds.*update_rejected")
        .lines()
        .filter_map(|line| line.rsplit_once(": ")?.1.trim().parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// [`eventually`], naming what `check` last saw when it gives up.
fn eventually_showing(
    what: &str,
    server: &Discovery,
    shown: &mut Value,
    mut check: impl FnMut() -> (bool, Value),
) {
    let started = std::time::Instant::now();
    loop {
        let (done, seen) = check();
        *shown = seen;
        if done {
            return;
        }
        assert!(
            started.elapsed() < pilot_test_support::PATIENCE,
            "timed out waiting for {what}; last seen: {shown:#}\nthe server's log:\n{}\nproxy-status:\n{}",
            server.log(),
            pilotctl(Some(&server.url), &["proxy-status"], &[], None).stdout
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn reports(object: &Value, acked: u64, nacked: u64) -> bool {
    let status = &object["status"];
    status["observedVersion"] == object["metadata"]["resourceVersion"]
        && status["proxies"] == ENVOYS as u64
        && status["acked"] == acked
        && status["nacked"] == nacked
}

fn kind_of(object: &Value) -> &'static str {
    match object["kind"].as_str() {
        Some("RouteRule") => "routerules",
        Some("DestinationPolicy") => "destinationpolicies",
        Some("EgressRule") => "egressrules",
        _ => "ingressrules",
    }
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}
