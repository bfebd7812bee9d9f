//! The real Envoy 1.40 loads every generated scenario: each proxy of the
//! bookinfo mesh with every routing feature in use.

mod support;

use pilot_test_support::envoy_binary;
use pilot_xds::{generate, testing};

#[test]
fn envoy_accepts_every_scenario() {
    let registry = support::registry();
    let mesh = support::mesh();
    for (name, proxy) in support::proxies() {
        let resources = generate(&proxy, &registry, &mesh);
        resources.check().unwrap_or_else(|e| panic!("{name}: {e}"));
        testing::validate(&envoy_binary(), &proxy.node_id(), &resources)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn envoy_rejects_what_is_wrong() {
    // The check is real: routes are loaded too (inlined), and a regular
    // expression RE2 cannot compile is refused. (Validation refuses such a
    // rule; it is made here around it.)
    use pilot_api::istio::RouteRule;
    let spec: RouteRule = serde_json::from_value(serde_json::json!({
        "destination": {"name": "ratings"},
        "match": {"request": {"headers": {"cookie": {"regex": "(unclosed"}}}}
    }))
    .unwrap();
    let mut configs = support::configs();
    configs
        .route_rules
        .push(pilot_model::Config::new("default", "bad-regex", spec).into());
    let mesh = pilot_xds::MeshConfig::new(configs.compile());
    let registry = support::registry();
    let proxy = support::proxies().remove(0).1;
    let resources = generate(&proxy, &registry, &mesh);
    resources.check().unwrap();
    let err = testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap_err();
    assert!(
        err.contains("unclosed") || err.to_lowercase().contains("regex"),
        "{err}"
    );
}
