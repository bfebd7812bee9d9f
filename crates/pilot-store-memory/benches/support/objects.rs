//! The objects the `journal` benchmark and the `journal_memory` example
//! store: the same generator for both, so their figures are comparable.

use pilot_model::{ConfigMeta, DynConfig, KindRegistry, KindSchema};

/// A registry with the one kind the objects are (`Rule`, no validation).
pub(crate) fn registry() -> KindRegistry {
    let registry = KindRegistry::new();
    registry
        .register_schema(KindSchema::new("Rule", "rules", "example.com", "v1", |_, _| {}))
        .unwrap();
    registry
}

/// A route rule of about 1.4 KB of JSON, as `kubectl apply` leaves it: a
/// destination, header matches, four weighted routes with labels, a
/// timeout, and the last-applied annotation (the object again, as text).
pub(crate) fn object(i: usize) -> DynConfig {
    let routes: Vec<serde_json::Value> = (0..4)
        .map(|r| {
            serde_json::json!({
                "labels": {"version": format!("v{r}"), "track": "stable"},
                "weight": if r == 0 { 70 } else { 10 },
            })
        })
        .collect();
    let spec = serde_json::json!({
        "destination": {"name": format!("service-{i}"), "namespace": format!("ns-{}", i % 100)},
        "precedence": i % 10,
        "match": {"request": {"headers": {"cookie": {"regex": "^(.*?;)?(user=jason)(;.*)?$"}, "x-team": {"exact": format!("team-{}", i % 50)}}}},
        "route": routes,
        "httpReqTimeout": {"simpleTimeout": {"timeout": "5s"}},
    });
    let mut meta = ConfigMeta::new("Rule", format!("ns-{}", i % 100), format!("rule-{i}"));
    meta.group = "example.com".into();
    meta.version = "v1".into();
    meta.resource_version = Some((i + 1).to_string());
    meta.labels.insert("app".into(), format!("app-{}", i % 1000));
    meta.annotations.insert(
        "kubectl.kubernetes.io/last-applied-configuration".into(),
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Rule", "metadata": {"name": format!("rule-{i}"), "namespace": format!("ns-{}", i % 100)}, "spec": spec}).to_string(),
    );
    DynConfig { meta, spec }
}
