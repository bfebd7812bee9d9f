//! `pilotctl describe` against a server with a real Envoy: bookinfo's
//! VirtualServices applied, an Envoy connected as a reviews-v2 pod, then
//! a ratings VirtualService the Envoy rejects (a regex over its lowered
//! RE2 limit, [`pilot_test_support::NACKED_REGEX`]). Describing the
//! workload and the proxy shows the proxy, its sync state, and the
//! VirtualService withheld from it with Envoy's message; the exit code
//! says something does not work; fixed, the withheld object is gone.

use pilot_system_tests::{Mesh, Store};
use pilot_test_support::{Envoy, NACKED_REGEX, eventually, pilotctl};
use serde_json::Value;

/// ratings' VirtualService with a header regex the test Envoy refuses.
fn bad_ratings(regex: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: ratings, namespace: default}}\nspec:\n  hosts: [ratings]\n  http:\n  - match: [{{headers: {{cookie: {{regex: \"{regex}\"}}}}}}]\n    route: [{{destination: {{host: ratings, subset: v1}}}}]\n  - route: [{{destination: {{host: ratings, subset: v1}}}}]\n"
    )
}

/// `pilotctl describe ARGS -o json` against `url`: exit code and JSON.
fn describe(url: Option<&str>, args: &[&str]) -> (i32, Value) {
    let run = pilotctl(url, &[&["describe"], args, &["-o", "json"]].concat(), &[], None);
    let value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    (run.code, value)
}

fn withheld(description: &Value) -> Vec<Value> {
    description["workloads"][0]["proxies"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["withheld"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn describe_shows_what_a_proxy_was_served_without_after_it_rejected_it() {
    let mesh = Mesh::bookinfo();
    let server = mesh.discovery(&Store::Memory, &["--status-interval", "200ms"]);
    let url = Some(server.url.as_str());
    let applied = pilotctl(url, &["apply", "-f", "examples/bookinfo/networking/"], &[], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    let node = "sidecar~10.0.0.70~reviews-v2-7d4f9.default~default.svc.cluster.local";
    let envoy = Envoy::ads(node, &[("INTERCEPTION_MODE", "NONE")], server.xds_port, false).unwrap();

    // Connected and in sync: the workload's proxy, nothing withheld.
    let mut description = Value::Null;
    eventually("describe to show the proxy SYNCED on every type", || {
        let (code, value) = describe(url, &["workload", "reviews-v2"]);
        description = value;
        code == 0
            && description["workloads"][0]["proxies"][0]["types"]
                .as_object()
                .is_some_and(|t| t.len() == 4 && t.values().all(|s| s == "SYNCED"))
    });
    let workload = &description["workloads"][0];
    assert_eq!(workload["name"], "reviews-v2", "{description:#}");
    assert_eq!(workload["proxies"][0]["node"], node, "{description:#}");
    assert!(withheld(&description).is_empty(), "{description:#}");

    // Envoy rejects the new ratings VirtualService: it is withheld.
    let created = pilotctl(url, &["apply", "-f", "-"], &[], Some(&bad_ratings(NACKED_REGEX)));
    assert_eq!(created.code, 0, "{created:?}");
    let mut code = 0;
    eventually("describe to show the ratings VirtualService withheld", || {
        let (exit, value) = describe(url, &["workload", "reviews-v2"]);
        code = exit;
        description = value;
        !withheld(&description).is_empty()
    });
    let objects = withheld(&description);
    assert_eq!(objects.len(), 1, "{description:#}");
    assert_eq!(objects[0]["kind"], "VirtualService");
    assert_eq!(objects[0]["name"], "ratings");
    assert!(
        objects[0]["message"].as_str().unwrap().contains("program size"),
        "Envoy's message: {description:#}"
    );
    assert_eq!(code, 4, "a withheld object is a problem: {description:#}");
    // The same through the proxy, and as text.
    let (code, by_proxy) = describe(url, &["proxy", "reviews-v2-7d4f9.default"]);
    assert_eq!(code, 4, "{by_proxy:#}");
    assert_eq!(by_proxy["target"]["kind"], "proxy");
    assert_eq!(by_proxy["workloads"][0]["name"], "reviews-v2", "{by_proxy:#}");
    assert_eq!(withheld(&by_proxy).len(), 1, "{by_proxy:#}");
    let text = pilotctl(url, &["describe", "proxy", node], &[], None);
    assert!(
        text.stdout.lines().any(|l| l
            .trim_start()
            .starts_with("withheld: VirtualService default/ratings version ")
            && l.contains("program size")),
        "{text:?}"
    );

    // Fixed: nothing withheld, exit 0.
    let fixed = pilotctl(url, &["apply", "-f", "-"], &[], Some(&bad_ratings("[0-9a-f]{8}")));
    assert_eq!(fixed.code, 0, "{fixed:?}");
    eventually("describe to show nothing withheld after the fix", || {
        let (exit, value) = describe(url, &["workload", "reviews-v2"]);
        description = value;
        exit == 0 && withheld(&description).is_empty()
    });
    drop(envoy);
    server.terminate();
}
