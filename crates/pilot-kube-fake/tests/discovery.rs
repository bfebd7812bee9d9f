//! The fake's discovery documents as kube-rs's `Discovery` (the same
//! legacy documents kubectl reads) finds them: the built-in resources, the
//! webhook configurations, and a CRD's resource once it is created.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::discovery::{Discovery, Scope};
use pilot_kube_fake::FakeApiServer;

#[tokio::test]
async fn discovery_lists_every_served_resource_with_its_scope() {
    let fake = FakeApiServer::new();
    let discovery = Discovery::new(fake.client()).run().await.unwrap();
    let find = |discovery: &Discovery, group: &str, plural: &str| {
        discovery.groups().find(|g| g.name() == group).and_then(|g| {
            g.recommended_resources()
                .into_iter()
                .find(|(resource, _)| resource.plural == plural)
        })
    };
    let (resource, capabilities) = find(&discovery, "", "configmaps").expect("configmaps");
    assert_eq!(resource.kind, "ConfigMap");
    assert_eq!(capabilities.scope, Scope::Namespaced);
    let (resource, capabilities) = find(
        &discovery,
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    )
    .expect("validatingwebhookconfigurations");
    assert_eq!(resource.kind, "ValidatingWebhookConfiguration");
    assert_eq!(capabilities.scope, Scope::Cluster);
    assert!(find(&discovery, "example.com", "widgets").is_none());

    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}}}]},
    }))
    .unwrap();
    Api::<CustomResourceDefinition>::all(fake.client())
        .create(&PostParams::default(), &crd)
        .await
        .unwrap();
    let discovery = Discovery::new(fake.client()).run().await.unwrap();
    let (resource, capabilities) = find(&discovery, "example.com", "widgets").expect("widgets");
    assert_eq!(
        (resource.kind.as_str(), resource.version.as_str()),
        ("Widget", "v1")
    );
    assert_eq!(capabilities.scope, Scope::Namespaced);
    let subresources: Vec<&str> = capabilities
        .subresources
        .iter()
        .map(|(s, _)| s.plural.as_str())
        .collect();
    assert_eq!(subresources, ["status"], "{:?}", capabilities.subresources);
}
