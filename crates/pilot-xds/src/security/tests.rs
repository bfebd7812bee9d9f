//! Mode resolution: precedence, inheritance of unset modes, the oldest of
//! conflicting policies.

use std::time::{Duration, SystemTime};

use pilot_api::security::{MtlsMode, PeerAuthentication};
use pilot_model::{Config, Labels};

use super::{SecurityPolicies, namespace_of};

fn peer(namespace: &str, name: &str, age: u64, spec: serde_json::Value) -> Config<PeerAuthentication> {
    let mut config = Config::new(namespace, name, serde_json::from_value(spec).unwrap());
    config.meta.creation_timestamp = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 - age));
    config
}

fn reviews() -> Labels {
    Labels([("app".to_string(), "reviews".to_string())].into())
}

#[test]
fn levels_inherit_and_the_oldest_wins() {
    let mut policies = SecurityPolicies {
        peer_authentications: Vec::new(),
        ..SecurityPolicies::default()
    };
    policies.peer_authentications = vec![
        peer(
            "istio-system",
            "mesh",
            1,
            serde_json::json!({"mtls": {"mode": "STRICT"}}),
        ),
        // Unset at the namespace level: the mesh's STRICT.
        peer("default", "ns", 1, serde_json::json!({"mtls": {}})),
    ];
    assert_eq!(policies.mtls_mode("default", &reviews(), 9080), MtlsMode::Strict);
    // Two workload policies: the older decides.
    policies.peer_authentications.extend([
        peer(
            "default",
            "newer",
            1,
            serde_json::json!({"selector": {"matchLabels": {"app": "reviews"}}, "mtls": {"mode": "PERMISSIVE"}}),
        ),
        peer(
            "default",
            "older",
            5,
            serde_json::json!({"selector": {"matchLabels": {"app": "reviews"}}, "mtls": {"mode": "DISABLE"}}),
        ),
    ]);
    assert_eq!(policies.mtls_mode("default", &reviews(), 9080), MtlsMode::Disable);
    // Another namespace only has the mesh's.
    assert_eq!(policies.mtls_mode("other", &reviews(), 9080), MtlsMode::Strict);
    // Another root namespace: no mesh policy.
    policies.root_namespace = "mesh-root".into();
    assert_eq!(
        policies.mtls_mode("other", &reviews(), 9080),
        MtlsMode::Permissive
    );
}

#[test]
fn identities_and_namespaces() {
    let policies = SecurityPolicies::default();
    assert_eq!(
        policies.spiffe_id("default", "reviews"),
        "spiffe://cluster.local/ns/default/sa/reviews"
    );
    assert_eq!(namespace_of("reviews.default.svc.cluster.local"), "default");
    assert_eq!(namespace_of("reviews"), "");
}
