//! Least privilege, proven by the calls the code makes: pilot-discovery
//! runs with the arguments of the Deployment that `kubectl kustomize
//! deploy/base` renders (addresses and files swapped for the test's), as
//! its service account, against the fake API server, which records every
//! request. Two replicas share the store; every served kind is created,
//! read, replaced and deleted through the REST API; a proxy connects and
//! ACKs, so status is written; the CA signs; the webhooks answer; one
//! replica is killed and the other collects its records. Then:
//!
//! - every recorded request is allowed by the rendered ClusterRole and Role
//!   bound to the service account (a request they would deny is a
//!   permission the code needs and the manifests forgot);
//! - every verb of every resource of every rule was used by some request
//!   (a permission nobody used is one the manifests should not grant).
//!
//! Non-resource requests (discovery, `/version`) are allowed to every
//! authenticated user by Kubernetes' default `system:discovery` role; they
//! are checked to be only those.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use pilot_kube_fake::{ApiRequest, FakeApiServer, Target};
use pilot_test_support::{Discovery, FakeCluster, TestCerts, eventually, free_port, pilotctl, workspace};
use serde_json::Value;

/// The token pilot-discovery presents to the API server in this test: the
/// requests it carries are the service account's.
const SA_TOKEN: &str = "pilot-discovery-service-account-token";
const NAMESPACE: &str = "pilot-system";
const SERVICE_ACCOUNT: &str = "pilot-discovery";

/// One rule of a Role or ClusterRole.
#[derive(Debug)]
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    names: Vec<String>,
}

/// The rules a binding gives the service account: cluster-wide (a
/// ClusterRoleBinding) or in one namespace (a RoleBinding).
#[derive(Debug)]
struct Grant {
    role: String,
    namespace: Option<String>,
    rules: Vec<Rule>,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The manifests `kubectl kustomize DIR` renders, as JSON values.
fn render(dir: &Path) -> Vec<Value> {
    let kubectl = workspace().join(".tools/kubectl/bin/kubectl");
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{} kustomize: {e} (scripts/install-deps installs kubectl)",
                kubectl.display()
            )
        });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    pilot_model::document::parse_values("kustomize", &text).expect("kustomize renders YAML")
}

/// The grants bound to the service account.
fn grants(docs: &[Value]) -> Vec<Grant> {
    let role = |kind: &str, name: &str, namespace: Option<&str>| -> Vec<Rule> {
        let found = docs
            .iter()
            .find(|d| {
                d["kind"] == kind
                    && d["metadata"]["name"] == name
                    && (kind == "ClusterRole" || d["metadata"]["namespace"].as_str() == namespace)
            })
            .unwrap_or_else(|| panic!("{kind} {name} is bound but not rendered"));
        found["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|rule| Rule {
                groups: strings(&rule["apiGroups"]),
                resources: strings(&rule["resources"]),
                verbs: strings(&rule["verbs"]),
                names: strings(&rule["resourceNames"]),
            })
            .collect()
    };
    let mut grants = Vec::new();
    for binding in docs {
        let kind = binding["kind"].as_str().unwrap_or_default();
        if kind != "ClusterRoleBinding" && kind != "RoleBinding" {
            continue;
        }
        let bound = binding["subjects"].as_array().into_iter().flatten().any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == SERVICE_ACCOUNT && s["namespace"] == NAMESPACE
        });
        if !bound {
            continue;
        }
        let namespace =
            (kind == "RoleBinding").then(|| binding["metadata"]["namespace"].as_str().unwrap().to_string());
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap();
        let role_name = binding["roleRef"]["name"].as_str().unwrap();
        grants.push(Grant {
            role: format!("{role_kind}/{role_name}"),
            rules: role(role_kind, role_name, namespace.as_deref()),
            namespace,
        });
    }
    assert!(
        !grants.is_empty(),
        "nothing is bound to {NAMESPACE}/{SERVICE_ACCOUNT}"
    );
    grants
}

fn matches(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

/// `resource` or `resource/subresource`, as RBAC names it.
fn resource_name(resource: &str, subresource: Option<&str>) -> String {
    match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    }
}

/// Whether `rule` of a grant in `namespace` allows the request, as RBAC's
/// authorizer decides.
fn allows(grant_namespace: Option<&str>, rule: &Rule, request: &ApiRequest) -> bool {
    let Target::Resource {
        group,
        resource,
        subresource,
        namespace,
        name,
        ..
    } = &request.target
    else {
        return false;
    };
    if let Some(granted) = grant_namespace
        && namespace.as_deref() != Some(granted)
    {
        return false;
    }
    matches(&rule.groups, group)
        && matches(&rule.resources, &resource_name(resource, subresource.as_deref()))
        && matches(&rule.verbs, &request.verb)
        && (rule.names.is_empty() || name.as_deref().is_some_and(|n| rule.names.iter().any(|r| r == n)))
}

#[test]
fn the_deployments_roles_allow_every_call_and_grant_nothing_unused() {
    let docs = render(&workspace().join("deploy/base"));
    let grants = grants(&docs);
    let requests = run_scenario(&docs);

    let mut denied = Vec::new();
    let mut non_resource = BTreeSet::new();
    for request in &requests {
        match &request.target {
            Target::NonResource(path) => {
                non_resource.insert(path.clone());
            }
            Target::Resource { .. } => {
                let allowed = grants.iter().any(|grant| {
                    grant
                        .rules
                        .iter()
                        .any(|rule| allows(grant.namespace.as_deref(), rule, request))
                });
                if !allowed {
                    denied.push(format!("{} {:?}", request.verb, request.target));
                }
            }
        }
    }
    assert!(
        denied.is_empty(),
        "pilot-discovery made requests its roles do not allow:\n{}",
        denied.join("\n")
    );
    for path in &non_resource {
        assert!(
            path == "/api"
                || path == "/apis"
                || path == "/version"
                || path.starts_with("/apis/")
                || path.starts_with("/api/"),
            "a non-resource request beyond discovery: {path}"
        );
    }

    // Every (group, resource, verb) of every rule was asked for.
    let mut unused = Vec::new();
    for grant in &grants {
        for rule in &grant.rules {
            for group in &rule.groups {
                for resource in &rule.resources {
                    for verb in &rule.verbs {
                        let single = Rule {
                            groups: vec![group.clone()],
                            resources: vec![resource.clone()],
                            verbs: vec![verb.clone()],
                            names: rule.names.clone(),
                        };
                        if !requests
                            .iter()
                            .any(|r| allows(grant.namespace.as_deref(), &single, r))
                        {
                            unused.push(format!(
                                "{}: {verb} {group}/{resource}{}",
                                grant.role,
                                if rule.names.is_empty() {
                                    String::new()
                                } else {
                                    format!(" {:?}", rule.names)
                                }
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "the roles grant what no request used:\n{}",
        unused.join("\n")
    );
}

/// Every kind pilot serves, one object each, then the same with a change.
const OBJECTS: &str = include_str!("rbac_least/objects.yaml");
const CHANGED: &str = include_str!("rbac_least/objects-changed.yaml");

/// The test's files: certificates, tokens, the mesh config, a kubeconfig
/// whose user presents the service account's token.
struct Files {
    dir: tempfile::TempDir,
    certs: TestCerts,
    tokens: PathBuf,
    mesh: PathBuf,
    kubeconfig: PathBuf,
}

/// The Deployment's container arguments with the test's addresses and
/// files (`--listen` and `--xds-listen` are Discovery's own).
fn deployment_args(docs: &[Value], files: &Files, replica: &str, inject: u16) -> Vec<String> {
    let deployment = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "pilot-discovery")
        .expect("the Deployment pilot-discovery");
    let args = strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]);
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let takes_value = !matches!(flag.as_str(), "--kube-token-review" | "--install-crds");
        let value = if takes_value && !flag.contains('=') {
            args.next()
        } else {
            None
        };
        let swapped = match flag.as_str() {
            "--listen" | "--xds-listen" => continue,
            "--inject-webhook" => Some(format!("127.0.0.1:{inject}")),
            "--tls-cert" => Some(files.certs.server_cert.display().to_string()),
            "--tls-key" => Some(files.certs.server_key.display().to_string()),
            "--token-file" => Some(files.tokens.display().to_string()),
            "--mesh-config" => Some(files.mesh.display().to_string()),
            "--replica-name" => Some(replica.to_string()),
            _ => value,
        };
        out.push(flag);
        out.extend(swapped);
    }
    out
}

fn run_scenario(docs: &[Value]) -> Vec<ApiRequest> {
    let fake = FakeApiServer::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cluster = runtime.block_on(FakeCluster::serve(&fake));
    // The namespace, the CRDs and the webhook configurations are the
    // manifests' (kubectl apply's, as the operator), not pilot's.
    apply_as_operator(&cluster, docs, &runtime);

    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).expect("openssl (scripts/install-deps installs it)");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "operator-token-0123456789 rw operator\n").unwrap();
    let mesh = dir.path().join("mesh.yaml");
    let mesh_config = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == "pilot-mesh")
        .and_then(|d| d["data"]["mesh.yaml"].as_str())
        .expect("the ConfigMap pilot-mesh with mesh.yaml");
    std::fs::write(&mesh, mesh_config).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let text = std::fs::read_to_string(cluster.kubeconfig()).unwrap();
    let text = text
        .replace("user: {}", &format!("user: {{token: {SA_TOKEN}}}"))
        .replace("namespace: default", &format!("namespace: {NAMESPACE}"));
    assert!(text.contains(SA_TOKEN), "{text}");
    std::fs::write(&kubeconfig, text).unwrap();
    let files = Files {
        dir,
        certs,
        tokens,
        mesh,
        kubeconfig,
    };

    let start = |replica: &str| {
        let mut args = deployment_args(docs, &files, replica, free_port());
        // A self-signed root renewed within a second, so that renewal's
        // calls are made too.
        args.extend(
            [
                "--ca-root-ttl",
                "4s",
                "--ca-root-renew-before",
                "3s",
                "--ca-root-check-interval",
                "200ms",
            ]
            .map(String::from),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Discovery::start_with_env(&args, &[("KUBECONFIG", files.kubeconfig.as_os_str())]);
        wait_ready(&server, &files.certs.ca);
        server
    };
    let a = start("replica-a");
    let b = start("replica-b");

    // Every kind: created, read, replaced, deleted through the REST API.
    let write = |verb: &str, text: &str| {
        let run = pilotctl(
            Some(&a.url),
            &[
                verb,
                "-f",
                "-",
                "--token",
                "operator-token-0123456789",
                "--ca-file",
                files.certs.ca.to_str().unwrap(),
            ],
            &[],
            Some(text),
        );
        assert_eq!(run.code, 0, "pilotctl {verb}: {run:?}");
    };
    // Each routing kind's status is written (the status loop's pace)
    // before the objects change and go.
    let status_written = |kinds: &[&str]| {
        kinds.iter().all(|plural| {
            cluster.fake.requests().iter().any(|r| {
                r.token.as_deref() == Some(SA_TOKEN)
                    && r.verb == "update"
                    && matches!(&r.target, Target::Resource { resource, subresource: Some(s), .. }
                        if resource == plural && s == "status")
            })
        })
    };
    let routing = [
        "routerules",
        "destinationpolicies",
        "egressrules",
        "ingressrules",
        "virtualservices",
        "destinationrules",
        "gateways",
        "sidecars",
        "peerauthentications",
        "authorizationpolicies",
        "requestauthentications",
    ];
    write("create", OBJECTS);
    eventually("every routing kind's status to be written", || {
        status_written(&routing)
    });
    write("replace", CHANGED);
    write("delete", CHANGED);

    let asked = |verb: &str, plural: &str| {
        cluster.fake.requests().iter().any(|r| {
            r.token.as_deref() == Some(SA_TOKEN)
                && r.verb == verb
                && matches!(&r.target, Target::Resource { resource, .. } if resource == plural)
        })
    };
    eventually("the CA's root to be renewed in its Secret", || {
        asked("update", "secrets")
    });
    // A pod's service-account token on the REST API's proxy reports: a
    // TokenReview (the same review ADS and the CA make).
    let pod_token = cluster.fake.issue_token(
        "default",
        "reviews",
        &["istio-ca"],
        std::time::Duration::from_secs(600),
    );
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(&files.certs.ca)
        .args(["-X", "POST", "-H", "content-type: application/json", "-H"])
        .arg(format!("authorization: Bearer {pod_token}"))
        .args(["--data-binary", "{}"])
        .arg(format!("{}/v1/proxy-events", b.url))
        .output()
        .expect("curl runs");
    assert_ne!(out.stdout, b"401", "the pod's token was not reviewed");
    eventually("the pod's token to be reviewed", || {
        asked("create", "tokenreviews")
    });
    // The validating webhook's caBundle written, the trust bundle in every
    // namespace.
    eventually("pilot-validator's caBundle to be written", || {
        asked("update", "validatingwebhookconfigurations")
    });
    eventually("the root ConfigMap to be applied", || {
        asked("patch", "configmaps")
    });

    // A replica dies without resigning; the other collects its records.
    drop(a);
    eventually("replica-b to collect replica-a's records", || {
        cluster.fake.requests().iter().any(|r| {
            r.token.as_deref() == Some(SA_TOKEN)
                && r.verb == "delete"
                && matches!(&r.target, Target::Resource { resource, name: Some(n), .. } if resource == "configmaps" && n.contains("replica-a"))
        })
    });
    b.terminate();
    let _ = &files.dir;

    fake.requests()
        .into_iter()
        .filter(|r| r.token.as_deref() == Some(SA_TOKEN))
        .collect()
}

/// Waits until `/readyz` answers 200 over the REST port's TLS.
fn wait_ready(server: &Discovery, ca: &Path) {
    eventually("pilot-discovery to be ready", || {
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(ca)
            .arg(format!("{}/readyz", server.url))
            .output()
            .expect("curl runs");
        out.stdout == b"200"
    });
}

/// What the operator applies before pilot starts: the Namespace, the CRDs
/// (pilot's and the Gateway API's) and the webhook configurations
/// (written in process, without the service account's token).
fn apply_as_operator(cluster: &FakeCluster, docs: &[Value], runtime: &tokio::runtime::Runtime) {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
    let client = {
        let _entered = runtime.enter();
        cluster.fake.client()
    };
    for (kind, plural) in [
        ("Namespace", "namespaces"),
        ("CustomResourceDefinition", "customresourcedefinitions"),
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
        ),
        ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
    ] {
        for doc in docs.iter().filter(|d| d["kind"] == kind) {
            let api_version = doc["apiVersion"].as_str().unwrap();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let resource =
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let object: DynamicObject = serde_json::from_value(doc.clone()).unwrap();
            runtime
                .block_on(api.create(&PostParams::default(), &object))
                .unwrap_or_else(|e| panic!("the operator's {kind} {}: {e}", doc["metadata"]["name"]));
        }
    }
    // The Gateway API's CRDs, which the operator installs from the Gateway
    // API's release (not pilot's manifests); pilot's rendition stands in.
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client);
    for crd in pilot_store_k8s::crds_defined_elsewhere(&pilot_api::default_registry()) {
        runtime
            .block_on(crds.create(&PostParams::default(), &crd))
            .unwrap_or_else(|e| panic!("the Gateway API's CRD {:?}: {e}", crd.metadata.name));
    }
}
