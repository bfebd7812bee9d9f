//! The fake API server on its own, through a real `kube::Client`: the
//! semantics pilot-store-k8s's store and registry rely on.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
    WatchEvent, WatchParams,
};
use kube::core::Status;
use pilot_kube_fake::FakeApiServer;

fn service(name: &str) -> Service {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    }))
    .unwrap()
}

fn api_error(error: kube::Error) -> Box<Status> {
    match error {
        kube::Error::Api(status) => status,
        other => panic!("expected a Status from the API server, got {other}"),
    }
}

fn version(service: &Service) -> u64 {
    service
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn writes_bump_one_version_and_lists_carry_it() {
    let fake = FakeApiServer::new();
    let services: Api<Service> = Api::namespaced(fake.client(), "default");
    let a = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let b = services
        .create(&PostParams::default(), &service("b"))
        .await
        .unwrap();
    assert!(version(&b) > version(&a));
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    let list = services.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        list.metadata.resource_version.as_deref(),
        Some(&*version(&b).to_string())
    );
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(fake.revision(), version(&b));

    // An update that changes nothing keeps the version.
    let same = services.replace("a", &PostParams::default(), &a).await.unwrap();
    assert_eq!(version(&same), version(&a));
}

#[tokio::test]
async fn failures_are_status_objects_with_the_documented_codes() {
    let fake = FakeApiServer::new();
    let services: Api<Service> = Api::namespaced(fake.client(), "default");
    let a = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();

    let exists = api_error(
        services
            .create(&PostParams::default(), &service("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!((exists.code, exists.reason.as_str()), (409, "AlreadyExists"));

    let mut changed = a.clone();
    changed.metadata.labels = Some([("v".to_string(), "2".to_string())].into());
    services
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    let stale = api_error(
        services
            .replace("a", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert!(
        stale.message.contains("the object has been modified"),
        "{}",
        stale.message
    );

    let mut unversioned = changed.clone();
    unversioned.metadata.resource_version = None;
    let invalid = api_error(
        services
            .replace("a", &PostParams::default(), &unversioned)
            .await
            .unwrap_err(),
    );
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));

    let missing = api_error(services.get("nope").await.unwrap_err());
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.details.unwrap().name, "nope");

    let bad_name = api_error(
        services
            .create(&PostParams::default(), &service("Bad_Name"))
            .await
            .unwrap_err(),
    );
    assert_eq!(bad_name.code, 422);
    assert_eq!(bad_name.details.unwrap().causes[0].field, "metadata.name");

    let stale_delete = DeleteParams::default().preconditions(Preconditions {
        resource_version: a.metadata.resource_version.clone(),
        uid: None,
    });
    let precondition = api_error(services.delete("a", &stale_delete).await.unwrap_err());
    assert_eq!(precondition.code, 409);
    assert!(
        services.get_opt("a").await.unwrap().is_some(),
        "a failed delete keeps the object"
    );

    let selector = api_error(
        services
            .list(&ListParams::default().labels("app=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(selector.code, 400, "label selectors are refused, not ignored");
}

#[tokio::test]
async fn field_selectors_choose_what_lists_and_watches_see() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::runtime::watcher;
    let fake = FakeApiServer::new();
    let secrets: Api<Secret> = Api::namespaced(fake.client(), "default");
    let secret = |name: &str, type_: &str| {
        serde_json::from_value::<Secret>(serde_json::json!({
            "metadata": {"name": name}, "type": type_, "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}
        }))
        .unwrap()
    };
    secrets
        .create(&PostParams::default(), &secret("shop", "kubernetes.io/tls"))
        .await
        .unwrap();
    secrets
        .create(&PostParams::default(), &secret("token", "Opaque"))
        .await
        .unwrap();
    let tls = ListParams::default().fields("type=kubernetes.io/tls");
    let names = |list: kube::core::ObjectList<Secret>| -> Vec<String> {
        list.items.into_iter().map(|s| s.metadata.name.unwrap()).collect()
    };
    assert_eq!(names(secrets.list(&tls).await.unwrap()), ["shop"]);
    let not_tls = ListParams::default().fields("type!=kubernetes.io/tls,metadata.namespace=default");
    assert_eq!(names(secrets.list(&not_tls).await.unwrap()), ["token"]);

    // A watch sees the TLS Secrets only, those written before and after.
    let config = watcher::Config::default().fields("type=kubernetes.io/tls");
    let mut events = watcher(secrets.clone(), config).boxed();
    let mut seen = Vec::new();
    let mut written = false;
    while !seen.contains(&"later".to_string()) {
        if seen.len() == 1 && !written {
            written = true;
            secrets
                .create(&PostParams::default(), &secret("other", "Opaque"))
                .await
                .unwrap();
            secrets
                .create(&PostParams::default(), &secret("later", "kubernetes.io/tls"))
                .await
                .unwrap();
        }
        match tokio::time::timeout(std::time::Duration::from_secs(60), events.next())
            .await
            .expect("the watch went quiet")
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(s) | watcher::Event::Apply(s) => seen.push(s.metadata.name.unwrap()),
            _ => {}
        }
    }
    assert_eq!(seen, ["shop", "later"], "the Opaque Secrets are not seen");

    let services: Api<Service> = Api::namespaced(fake.client(), "default");
    let unknown = api_error(
        services
            .list(&ListParams::default().fields("spec.clusterIP=None"))
            .await
            .unwrap_err(),
    );
    assert_eq!(unknown.code, 400, "{}", unknown.message);
    assert!(
        unknown
            .message
            .contains("field label not supported: spec.clusterIP")
    );
}

#[tokio::test]
async fn namespaces_must_exist_and_scope_lists() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let elsewhere: Api<Service> = Api::namespaced(client.clone(), "elsewhere");
    let missing = api_error(
        elsewhere
            .create(&PostParams::default(), &service("a"))
            .await
            .unwrap_err(),
    );
    assert_eq!(missing.code, 404);
    assert_eq!(missing.details.unwrap().kind, "namespaces");

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some("elsewhere".into());
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    elsewhere
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let default: Api<Service> = Api::namespaced(client.clone(), "default");
    default
        .create(&PostParams::default(), &service("b"))
        .await
        .unwrap();

    let in_default = default.list(&ListParams::default()).await.unwrap();
    assert_eq!(in_default.items.len(), 1);
    let all: Api<Service> = Api::all(client);
    let everywhere = all.list(&ListParams::default()).await.unwrap();
    let keys: Vec<_> = everywhere
        .items
        .iter()
        .map(|s| {
            format!(
                "{}/{}",
                s.metadata.namespace.as_deref().unwrap(),
                s.metadata.name.as_deref().unwrap()
            )
        })
        .collect();
    assert_eq!(keys, ["default/b", "elsewhere/a"]);
}

#[tokio::test]
async fn watch_replays_from_a_version_then_follows_with_bookmarks() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let start = services
        .create(&PostParams::default(), &service("before"))
        .await
        .unwrap();
    let a = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let mut events = services
        .watch(&WatchParams::default(), &version(&start).to_string())
        .await
        .unwrap()
        .boxed();
    let mut changed = a.clone();
    changed.metadata.labels = Some([("v".to_string(), "2".to_string())].into());
    let modified = services
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    services.delete("a", &DeleteParams::default()).await.unwrap();
    // A write to another resource moves the version: a bookmark follows.
    let namespaces: Api<Namespace> = Api::all(client);
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some("other".into());
    let other = namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();

    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(s) => format!("ADDED a@{}", version(&s)),
            WatchEvent::Modified(s) => format!("MODIFIED a@{}", version(&s)),
            WatchEvent::Deleted(s) => format!("DELETED a@{}", version(&s)),
            WatchEvent::Bookmark(b) => format!("BOOKMARK @{}", b.metadata.resource_version),
            WatchEvent::Error(e) => panic!("unexpected error {e:?}"),
        });
    }
    let other_version = other.metadata.resource_version.unwrap();
    assert_eq!(
        seen,
        [
            format!("ADDED a@{}", version(&a)),
            format!("MODIFIED a@{}", version(&modified)),
            format!("DELETED a@{}", version(&modified) + 1),
            format!("BOOKMARK @{other_version}"),
        ]
    );
}

#[tokio::test]
async fn watch_from_an_expired_version_gets_410() {
    let fake = FakeApiServer::new();
    let services: Api<Service> = Api::namespaced(fake.client(), "default");
    let a = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    services
        .create(&PostParams::default(), &service("b"))
        .await
        .unwrap();
    fake.expire_history();
    let mut events = services
        .watch(&WatchParams::default(), &version(&a).to_string())
        .await
        .unwrap()
        .boxed();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(
        events.try_next().await.unwrap().is_none(),
        "the watch ends after the error"
    );
    assert_eq!(fake.expired_answers(), 1);

    // From the current version, history is complete again.
    let now = fake.revision().to_string();
    let mut events = services
        .watch(&WatchParams::default(), &now)
        .await
        .unwrap()
        .boxed();
    services.delete("b", &DeleteParams::default()).await.unwrap();
    assert!(matches!(
        events.try_next().await.unwrap(),
        Some(WatchEvent::Deleted(_))
    ));
}

#[tokio::test]
async fn closed_and_refused_watches() {
    let fake = FakeApiServer::new();
    let services: Api<Service> = Api::namespaced(fake.client(), "default");
    let mut events = services
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(fake.open_watches(), 1);
    fake.close_watches();
    assert!(events.try_next().await.unwrap().is_none());
    fake.refuse_watches(true);
    let refused = match services.watch(&WatchParams::default(), "0").await {
        Err(error) => api_error(error),
        Ok(_) => panic!("watches are refused"),
    };
    assert_eq!(refused.code, 503);
}

#[tokio::test]
async fn a_crd_serves_its_resource_and_apply_creates_then_merges() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let not_served = api_error(widgets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(not_served.code, 404);

    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true}]},
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let params = PatchParams::apply("test");
    crds.patch("widgets.example.com", &params, &Patch::Apply(&crd))
        .await
        .unwrap();
    assert!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let applied = |size: u32| {
        DynamicObject::new("w", &resource).data(serde_json::json!({"spec": {"size": size, "color": "red"}}))
    };
    let first = widgets
        .patch("w", &params, &Patch::Apply(applied(1)))
        .await
        .unwrap();
    let again = widgets
        .patch("w", &params, &Patch::Apply(applied(1)))
        .await
        .unwrap();
    assert_eq!(
        first.metadata.resource_version, again.metadata.resource_version,
        "a no-op apply"
    );
    let partial = DynamicObject::new("w", &resource).data(serde_json::json!({"spec": {"size": 2}}));
    let merged = widgets.patch("w", &params, &Patch::Apply(partial)).await.unwrap();
    assert_eq!(
        merged.data["spec"],
        serde_json::json!({"size": 2, "color": "red"})
    );
    assert_ne!(merged.metadata.resource_version, first.metadata.resource_version);

    let merge = api_error(
        widgets
            .patch("w", &PatchParams::default(), &Patch::Merge(serde_json::json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(merge.code, 415, "only server-side apply is implemented");
}

#[tokio::test]
async fn a_watch_that_falls_too_far_behind_is_closed() {
    let fake = FakeApiServer::new();
    let services: Api<Service> = Api::namespaced(fake.client(), "default");
    let mut events = services
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let total = pilot_kube_fake::WATCH_BUFFER + 1;
    for i in 0..total {
        services
            .create(&PostParams::default(), &service(&format!("s{i}")))
            .await
            .unwrap();
    }
    let mut delivered = 0;
    while let Some(event) = events.try_next().await.unwrap() {
        assert!(matches!(event, WatchEvent::Added(_)));
        delivered += 1;
    }
    assert_eq!(
        delivered,
        pilot_kube_fake::WATCH_BUFFER,
        "then the server closed the watch"
    );
    assert_eq!(fake.open_watches(), 0);
}

/// The `status` subresource as Kubernetes documents it for custom
/// resources: a create's status is dropped, the resource's PUT ignores
/// status, `/status` ignores everything but status (and leaves
/// `generation`), and a resource without the subresource has no `/status`.
#[tokio::test]
async fn the_status_subresource_separates_status_from_the_rest() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let resource = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let crd = |plural: &str, kind: &str, subresources: serde_json::Value| -> CustomResourceDefinition {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural},
                "versions": [{"name": "v1", "served": true, "storage": true, "subresources": subresources}]},
        }))
        .unwrap()
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(
        &PostParams::default(),
        &crd("gadgets", "Gadget", serde_json::json!({"status": {}})),
    )
    .await
    .unwrap();
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let pp = PostParams::default();

    let created = gadgets
        .create(
            &pp,
            &DynamicObject::new("g", &resource)
                .data(serde_json::json!({"spec": {"size": 1}, "status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert!(
        created.data.get("status").is_none(),
        "a create's status is dropped"
    );
    assert_eq!(created.metadata.generation, Some(1));

    // /status: only status is taken, under the resourceVersion precondition.
    let mut body = created.clone();
    body.data = serde_json::json!({"spec": {"size": 99}, "status": {"ready": true}});
    body.metadata.labels = Some([("sneaky".to_string(), "yes".to_string())].into());
    let with_status = gadgets.replace_status("g", &pp, &body).await.unwrap();
    assert_eq!(with_status.data["status"], serde_json::json!({"ready": true}));
    assert_eq!(
        with_status.data["spec"],
        serde_json::json!({"size": 1}),
        "spec changes to /status are ignored"
    );
    assert!(
        with_status.metadata.labels.is_none(),
        "metadata changes to /status are ignored"
    );
    assert_eq!(
        with_status.metadata.generation,
        Some(1),
        "a status write leaves generation"
    );
    assert_ne!(
        with_status.metadata.resource_version,
        created.metadata.resource_version
    );
    let stale = api_error(gadgets.replace_status("g", &pp, &body).await.unwrap_err());
    assert_eq!(stale.code, 409, "a stale resourceVersion on /status conflicts");

    // The resource's PUT ignores status and bumps generation for the spec.
    let mut update = with_status.clone();
    update.data = serde_json::json!({"spec": {"size": 2}, "status": {"ready": false}});
    let updated = gadgets.replace("g", &pp, &update).await.unwrap();
    assert_eq!(updated.data["spec"], serde_json::json!({"size": 2}));
    assert_eq!(
        updated.data["status"],
        serde_json::json!({"ready": true}),
        "status changes to the resource are ignored"
    );
    assert_eq!(updated.metadata.generation, Some(2));
    assert_eq!(
        gadgets.get_status("g").await.unwrap().data["status"],
        serde_json::json!({"ready": true})
    );

    // Without the subresource there is no /status, and status is ordinary.
    crds.create(
        &PostParams::default(),
        &crd("plains", "Plain", serde_json::json!({})),
    )
    .await
    .unwrap();
    let plain_resource = ApiResource {
        kind: "Plain".into(),
        plural: "plains".into(),
        ..resource.clone()
    };
    let plains: Api<DynamicObject> = Api::namespaced_with(client, "default", &plain_resource);
    let plain = plains
        .create(
            &pp,
            &DynamicObject::new("p", &plain_resource)
                .data(serde_json::json!({"spec": {}, "status": {"x": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(plain.data["status"], serde_json::json!({"x": 1}));
    let missing = api_error(plains.replace_status("p", &pp, &plain).await.unwrap_err());
    assert_eq!(missing.code, 404);
}

/// Leases (coordination.k8s.io/v1) and ConfigMaps, namespaced, with the
/// same write semantics: a replace carrying a stale resourceVersion is 409
/// (what the status-writer election relies on), apply creates then merges,
/// a missing namespace is 404.
#[tokio::test]
async fn leases_and_configmaps_are_served_with_the_same_semantics() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::ConfigMap;

    let fake = FakeApiServer::new();
    let leases: Api<Lease> = Api::namespaced(fake.client(), "default");
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "writer"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 3},
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let taken = api_error(leases.create(&PostParams::default(), &lease).await.unwrap_err());
    assert_eq!((taken.code, taken.reason.as_str()), (409, "AlreadyExists"));
    let mut by_b = created.clone();
    by_b.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let renewed = leases
        .replace("writer", &PostParams::default(), &by_b)
        .await
        .unwrap();
    let mut by_c = created.clone(); // read before b's write
    by_c.spec.as_mut().unwrap().holder_identity = Some("c".into());
    let stale = api_error(
        leases
            .replace("writer", &PostParams::default(), &by_c)
            .await
            .unwrap_err(),
    );
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    let now = leases.get("writer").await.unwrap();
    assert_eq!(now.spec.unwrap().holder_identity.as_deref(), Some("b"));
    assert_eq!(now.metadata.resource_version, renewed.metadata.resource_version);

    let configmaps: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    let params = PatchParams::apply("test").force();
    let configmap = |value: &str| ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("record".into()),
            ..Default::default()
        },
        data: Some(
            [("record.json".to_string(), value.to_string())]
                .into_iter()
                .collect(),
        ),
        ..Default::default()
    };
    configmaps
        .patch("record", &params, &Patch::Apply(&configmap("1")))
        .await
        .unwrap();
    configmaps
        .patch("record", &params, &Patch::Apply(&configmap("2")))
        .await
        .unwrap();
    let listed = configmaps.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data.as_ref().unwrap()["record.json"], "2");
    let elsewhere: Api<ConfigMap> = Api::namespaced(fake.client(), "missing");
    let missing = api_error(
        elsewhere
            .create(&PostParams::default(), &configmap("1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(missing.code, 404);
}
