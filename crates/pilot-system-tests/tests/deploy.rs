//! The Kubernetes manifests under deploy/ (a kustomize base, the `ha`
//! overlay and the example `revision` overlay), checked as a user of them
//! would find them:
//!
//! - deploy/base/crds.yaml is exactly the CRDs pilot generates for the kinds
//!   pilot-discovery serves (`PILOT_WRITE_DEPLOY=1` rewrites it);
//! - the real `kubectl kustomize` renders base and overlay, and every
//!   rendered document passes PyPI's `kubernetes-validate --strict` against
//!   Kubernetes 1.37.0: the newest version kubernetes-validate 1.37.0
//!   bundles schemas for, which kubectl 1.37 (the client tests use) speaks;
//!   and against 1.33.0, the API pilot's Kubernetes client is built for
//!   (k8s-openapi's `v1_33` feature);
//! - what an operator notices: the overlay's 3 replicas, anti-affinity, HPA
//!   and `Fail` webhooks, the names of the contract (ports, webhooks,
//!   Service), the Deployment's hardening, the webhooks covering every
//!   served resource, a revision's objects and pods apart from the default
//!   revision's, and every argument of the Deployment being a flag
//!   pilot-discovery accepts.

use std::path::{Path, PathBuf};
use std::process::Command;

use pilot_test_support::{PILOT_DISCOVERY, binary, workspace};
use serde_json::{Value, json};

/// The variable that makes the CRD test rewrite deploy/base/crds.yaml.
const WRITE_VAR: &str = "PILOT_WRITE_DEPLOY";

/// What a user renders: the base (the default revision), the HA overlay,
/// and the example revision `canary` for a canary upgrade.
const OVERLAYS: [&str; 3] = ["deploy/base", "deploy/overlays/ha", "deploy/overlays/revision"];

/// The Kubernetes versions the rendered manifests are validated against.
const KUBERNETES_VERSIONS: [&str; 2] = ["1.37.0", "1.33.0"];

#[test]
fn the_crds_in_deploy_are_the_ones_pilot_generates() {
    let path = workspace().join("deploy/base/crds.yaml");
    let generated = crds_yaml();
    if std::env::var_os(WRITE_VAR).is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("writing deploy/base/crds.yaml");
        eprintln!("wrote {}", path.display());
        return;
    }
    let file = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        file == generated,
        "{} is not what pilot generates for the served kinds; run `{WRITE_VAR}=1 cargo nextest run -p pilot-system-tests --test deploy` and commit the result",
        path.display()
    );
}

#[test]
fn base_and_overlay_render_and_validate_strictly() {
    for overlay in OVERLAYS {
        let rendered = render(overlay);
        let file = tempfile::NamedTempFile::new().expect("a temporary file");
        std::fs::write(file.path(), &rendered.yaml).expect("writing the rendered manifests");
        for version in KUBERNETES_VERSIONS {
            let output = Command::new(tool("kubernetes-validate/bin/kubernetes-validate"))
                .args(["--strict", "--kubernetes-version", version])
                .arg(file.path())
                .output()
                .expect("kubernetes-validate runs (scripts/install-deps installs it)");
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(
                output.status.success(),
                "{overlay} does not validate against Kubernetes {version}:\n{said}"
            );
            let passed = said
                .lines()
                .filter(|l| l.starts_with("INFO") && l.contains("passed"))
                .count();
            assert_eq!(
                passed,
                rendered.documents.len(),
                "every document of {overlay} validated against {version}:\n{said}"
            );
        }
    }
}

#[test]
fn the_base_holds_every_object_of_a_deployment() {
    let base = render("deploy/base");
    for (kind, name) in [
        ("Namespace", "pilot-system"),
        ("ServiceAccount", "pilot-discovery"),
        ("ClusterRole", "pilot-discovery"),
        ("ClusterRoleBinding", "pilot-discovery"),
        ("Role", "pilot-discovery"),
        ("RoleBinding", "pilot-discovery"),
        ("ConfigMap", "pilot-mesh"),
        ("Deployment", "pilot-discovery"),
        ("Service", "pilot-discovery"),
        ("PodDisruptionBudget", "pilot-discovery"),
        ("MutatingWebhookConfiguration", "pilot-sidecar-injector"),
        ("ValidatingWebhookConfiguration", "pilot-validator"),
    ] {
        base.one(kind, name);
    }
    let crds = base.all("CustomResourceDefinition");
    assert_eq!(
        crds.len(),
        pilot_store_k8s::crds(&pilot_api::default_registry()).len()
    );
    for namespaced in base.documents.iter().filter(|d| {
        !matches!(
            d["kind"].as_str(),
            Some(
                "Namespace"
                    | "CustomResourceDefinition"
                    | "ClusterRole"
                    | "ClusterRoleBinding"
                    | "MutatingWebhookConfiguration"
                    | "ValidatingWebhookConfiguration"
            )
        )
    }) {
        assert_eq!(
            namespaced["metadata"]["namespace"], "pilot-system",
            "{namespaced}"
        );
    }
    // The bindings name the service account the pods run as.
    for binding in ["ClusterRoleBinding", "RoleBinding"] {
        let subjects = &base.one(binding, "pilot-discovery")["subjects"];
        assert_eq!(
            subjects,
            &json!([{"kind": "ServiceAccount", "name": "pilot-discovery", "namespace": "pilot-system"}]),
            "{binding}"
        );
    }
}

#[test]
fn the_deployment_is_hardened_and_named_as_the_contract_says() {
    let base = render("deploy/base");
    let deployment = base.one("Deployment", "pilot-discovery");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "pilot-discovery");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{pod}");
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "{pod}"
    );
    let container = container(deployment);
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true, "{security}");
    assert_eq!(security["allowPrivilegeEscalation"], false, "{security}");
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{security}");
    assert_eq!(container["image"], "pilot:latest");
    for resource in ["cpu", "memory"] {
        assert!(
            container["resources"]["requests"][resource].is_string(),
            "a {resource} request: {container}"
        );
    }

    // Every container port of every workload is named; the contract's names.
    for workload in base.all("Deployment") {
        for port in workload["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        {
            assert!(port["name"].is_string(), "an unnamed container port: {port}");
        }
    }
    let ports: Vec<(String, i64)> = container["ports"]
        .as_array()
        .expect("container ports")
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["containerPort"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    for expected in [
        ("grpc-xds", 15010),
        ("https-webhook", 15017),
        ("http-monitoring", 8080),
    ] {
        assert!(
            ports.contains(&(expected.0.to_string(), expected.1)),
            "{expected:?} in {ports:?}"
        );
    }
    let service = base.one("Service", "pilot-discovery");
    let webhook_port = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["port"] == 443)
        .expect("the Service's port 443");
    assert_eq!(webhook_port["targetPort"], "https-webhook", "{service}");
    assert_eq!(
        service["spec"]["selector"],
        pod_labels_subset(deployment, &service["spec"]["selector"]),
        "the Service selects the Deployment's pods"
    );

    // Probes: readiness on /readyz (the caches synced), liveness on /healthz.
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"], "/readyz",
        "{container}"
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"], "/healthz",
        "{container}"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "http-monitoring", "{probe}");
    }

    // The projected service-account token of the in-cluster client, in the
    // service-account directory's layout (token, ca.crt, namespace), in
    // place of the automounted one.
    assert_eq!(pod["automountServiceAccountToken"], false, "{pod}");
    let volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "kube-api-access")
        .expect("the kube-api-access volume");
    let sources = volume["projected"]["sources"]
        .as_array()
        .expect("projected sources");
    let paths: Vec<&str> = sources
        .iter()
        .flat_map(|s| {
            let token = s["serviceAccountToken"]["path"].as_str();
            let items = s["configMap"]["items"]
                .as_array()
                .into_iter()
                .chain(s["downwardAPI"]["items"].as_array())
                .flatten()
                .filter_map(|i| i["path"].as_str());
            token.into_iter().chain(items)
        })
        .collect();
    assert_eq!(paths, ["token", "ca.crt", "namespace"], "{volume}");
    let mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == "kube-api-access")
        .expect("the kube-api-access mount");
    assert_eq!(
        mount["mountPath"], "/var/run/secrets/kubernetes.io/serviceaccount",
        "{mount}"
    );
}

#[test]
fn every_deployment_argument_is_a_flag_pilot_discovery_accepts() {
    let help = Command::new(binary(PILOT_DISCOVERY))
        .arg("--help")
        .output()
        .expect("pilot-discovery --help runs");
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let known = |flag: &str| {
        help.lines()
            .any(|l| l.trim_start().split([' ', ',']).any(|w| w == flag))
    };
    for overlay in OVERLAYS {
        let rendered = render(overlay);
        let deployment = rendered.all("Deployment");
        assert_eq!(deployment.len(), 1, "{overlay}: one Deployment");
        let args = container(deployment[0])["args"].clone();
        let args: Vec<String> = serde_json::from_value(args).expect("the container's args");
        assert!(!args.is_empty(), "{overlay}: the Deployment passes arguments");
        for arg in args.iter().filter(|a| a.starts_with("--")) {
            let flag = arg.split('=').next().unwrap_or_default();
            assert!(
                known(flag),
                "{overlay}: the Deployment passes {flag}, which pilot-discovery does not accept"
            );
        }
    }
}

#[test]
fn the_webhooks_cover_every_served_resource() {
    let base = render("deploy/base");
    // pilot's kinds and the Gateway API's (whose CRDs are the Gateway API
    // release's): every served kind is validated.
    let registry = pilot_api::default_registry();
    let mut crds = pilot_store_k8s::crds(&registry);
    crds.extend(pilot_store_k8s::crds_defined_elsewhere(&registry));
    let validator = base.one("ValidatingWebhookConfiguration", "pilot-validator");
    let webhooks = validator["webhooks"].as_array().expect("webhooks");
    assert_eq!(webhooks.len(), 1, "{validator}");
    let webhook = &webhooks[0];
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["admissionReviewVersions"], json!(["v1"]));
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/validate");
    assert_eq!(webhook["clientConfig"]["service"]["name"], "pilot-discovery");
    let rules = webhook["rules"].as_array().expect("rules");
    for crd in &crds {
        let group = &crd.spec.group;
        let plural = &crd.spec.names.plural;
        for version in crd.spec.versions.iter().filter(|v| v.served) {
            let covered = rules.iter().any(|rule| {
                let has = |field: &str, value: &str| {
                    rule[field]
                        .as_array()
                        .is_some_and(|values| values.iter().any(|v| v == value || v == "*"))
                };
                has("apiGroups", group)
                    && has("apiVersions", &version.name)
                    && has("resources", plural)
                    && has("operations", "CREATE")
                    && has("operations", "UPDATE")
            });
            assert!(covered, "{plural}.{group}/{} is not validated", version.name);
        }
    }

    let injector = base.one("MutatingWebhookConfiguration", "pilot-sidecar-injector");
    let inject = &injector["webhooks"][0];
    assert_eq!(inject["clientConfig"]["service"]["path"], "/inject");
    assert_eq!(inject["failurePolicy"], "Ignore");
    assert_eq!(inject["sideEffects"], "None");
}

#[test]
fn the_ha_overlay_runs_three_spread_replicas_and_fails_closed() {
    let ha = render("deploy/overlays/ha");
    let deployment = ha.one("Deployment", "pilot-discovery");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let anti = &deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
    assert!(anti.is_object(), "pod anti-affinity: {deployment}");
    let hpa = ha.one("HorizontalPodAutoscaler", "pilot-discovery");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "pilot-discovery");
    assert_eq!(hpa["spec"]["minReplicas"], 3);
    assert_eq!(hpa["spec"]["metrics"][0]["resource"]["name"], "cpu", "{hpa}");
    for (kind, name) in [
        ("ValidatingWebhookConfiguration", "pilot-validator"),
        ("MutatingWebhookConfiguration", "pilot-sidecar-injector"),
    ] {
        for webhook in ha.one(kind, name)["webhooks"].as_array().expect("webhooks") {
            assert_eq!(webhook["failurePolicy"], "Fail", "{kind} {name}");
        }
    }
    // The injector's own answer for a pod it cannot inject follows suit.
    let args = container(deployment)["args"].clone();
    let args: Vec<String> = serde_json::from_value(args).expect("args");
    let policy = args
        .iter()
        .position(|a| a == "--inject-failure-policy")
        .and_then(|i| args.get(i + 1));
    assert_eq!(policy.map(String::as_str), Some("fail"), "{args:?}");
    // The PDB keeps two of the three serving through a drain.
    let pdb = ha.one("PodDisruptionBudget", "pilot-discovery");
    assert_eq!(pdb["spec"]["minAvailable"], 2, "{pdb}");
}

#[test]
fn a_revision_runs_beside_the_default_one_with_its_own_names_and_pods() {
    let base = render("deploy/base");
    let canary = render("deploy/overlays/revision");
    // Only the revision's own objects: the cluster's (namespace, CRDs,
    // service account, RBAC) are the base's.
    let mut kinds: Vec<(String, String)> = canary
        .documents
        .iter()
        .map(|d| {
            (
                d["kind"].as_str().unwrap_or_default().to_string(),
                d["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    kinds.sort();
    let expected: Vec<(String, String)> = [
        ("ClusterRole", "pilot-discovery-validator-canary"),
        ("ClusterRoleBinding", "pilot-discovery-validator-canary"),
        ("ConfigMap", "pilot-mesh-canary"),
        ("Deployment", "pilot-discovery-canary"),
        ("MutatingWebhookConfiguration", "pilot-sidecar-injector-canary"),
        ("PodDisruptionBudget", "pilot-discovery-canary"),
        ("Service", "pilot-discovery-canary"),
        ("ValidatingWebhookConfiguration", "pilot-validator-canary"),
    ]
    .iter()
    .map(|(k, n)| (k.to_string(), n.to_string()))
    .collect();
    assert_eq!(kinds, expected);

    // Each revision's Service and PDB select its own pods only.
    let pods = |rendered: &Rendered, name: &str| {
        rendered.one("Deployment", name)["spec"]["template"]["metadata"]["labels"].clone()
    };
    let selects = |selector: &Value, labels: &Value| {
        selector
            .as_object()
            .is_some_and(|s| s.iter().all(|(k, v)| &labels[k] == v))
    };
    let (default_pods, canary_pods) = (
        pods(&base, "pilot-discovery"),
        pods(&canary, "pilot-discovery-canary"),
    );
    assert_eq!(canary_pods["istio.io/rev"], "canary");
    assert_eq!(default_pods["istio.io/rev"], "default");
    for (rendered, name, own, other) in [
        (&base, "pilot-discovery", &default_pods, &canary_pods),
        (&canary, "pilot-discovery-canary", &canary_pods, &default_pods),
    ] {
        for selector in [
            &rendered.one("Service", name)["spec"]["selector"],
            &rendered.one("PodDisruptionBudget", name)["spec"]["selector"]["matchLabels"],
            &rendered.one("Deployment", name)["spec"]["selector"]["matchLabels"],
        ] {
            assert!(selects(selector, own), "{name}: {selector} selects its own pods");
            assert!(
                !selects(selector, other),
                "{name}: {selector} selects the other revision's pods"
            );
        }
    }

    // The canary runs as revision canary, patches its own validator,
    // serves with its own certificate, and injects the namespaces
    // labelled for it, whose proxies connect to its Service.
    let deployment = canary.one("Deployment", "pilot-discovery-canary");
    let args: Vec<String> = serde_json::from_value(container(deployment)["args"].clone()).expect("args");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    assert_eq!(value("--revision").as_deref(), Some("canary"), "{args:?}");
    // Its ADS certificate names its own Service, and it may write its own
    // validator.
    let names = value("--xds-tls-dns-names").unwrap_or_default();
    assert!(
        names.split(',').all(|n| n.starts_with("pilot-discovery-canary.")),
        "{names}"
    );
    let grant = canary.one("ClusterRole", "pilot-discovery-validator-canary");
    assert_eq!(
        grant["rules"][0]["resourceNames"],
        json!(["pilot-validator-canary"])
    );
    assert_eq!(
        value("--validation-webhook-config").as_deref(),
        Some("pilot-validator-canary"),
        "{args:?}"
    );
    let secrets: Vec<&str> = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["secret"]["secretName"].as_str())
        .collect();
    assert!(secrets.contains(&"pilot-discovery-canary-tls"), "{secrets:?}");
    let injector = canary.one("MutatingWebhookConfiguration", "pilot-sidecar-injector-canary");
    assert_eq!(
        injector["webhooks"][0]["namespaceSelector"],
        json!({"matchLabels": {"istio.io/rev": "canary"}})
    );
    for (kind, name) in [
        ("MutatingWebhookConfiguration", "pilot-sidecar-injector-canary"),
        ("ValidatingWebhookConfiguration", "pilot-validator-canary"),
    ] {
        let service = &canary.one(kind, name)["webhooks"][0]["clientConfig"]["service"];
        assert_eq!(service["name"], "pilot-discovery-canary", "{kind}");
    }
    let mesh = canary.one("ConfigMap", "pilot-mesh-canary")["data"]["mesh.yaml"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        mesh.contains("discoveryAddress: pilot-discovery-canary.pilot-system.svc:15010"),
        "{mesh}"
    );
}

/// Rendered manifests: the YAML kubectl printed and its documents as JSON.
struct Rendered {
    yaml: String,
    documents: Vec<Value>,
}

impl Rendered {
    fn all(&self, kind: &str) -> Vec<&Value> {
        self.documents.iter().filter(|d| d["kind"] == kind).collect()
    }

    fn one(&self, kind: &str, name: &str) -> &Value {
        let found: Vec<&Value> = self
            .documents
            .iter()
            .filter(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .collect();
        assert_eq!(found.len(), 1, "one {kind} {name} in the rendered manifests");
        found[0]
    }
}

/// `kubectl kustomize DIR`, and its documents read by PyYAML (in the
/// kubernetes-validate environment) as JSON.
fn render(dir: &str) -> Rendered {
    let output = Command::new(tool("kubectl/bin/kubectl"))
        .arg("kustomize")
        .arg(workspace().join(dir))
        .output()
        .expect("kubectl runs (scripts/install-deps installs it)");
    assert!(
        output.status.success(),
        "kubectl kustomize {dir} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let yaml = String::from_utf8(output.stdout).expect("UTF-8 manifests");
    let mut python = Command::new(tool("kubernetes-validate/bin/python"))
        .args([
            "-c",
            "import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    use std::io::Write;
    python
        .stdin
        .take()
        .expect("stdin")
        .write_all(yaml.as_bytes())
        .expect("writing to python");
    let json = python.wait_with_output().expect("python's output");
    assert!(json.status.success(), "the rendered YAML of {dir} does not parse");
    let documents: Vec<Value> = serde_json::from_slice(&json.stdout).expect("JSON documents");
    Rendered { yaml, documents }
}

/// The one container of pilot-discovery's Deployment.
fn container(deployment: &Value) -> &Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    containers
        .iter()
        .find(|c| c["name"] == "discovery")
        .expect("the discovery container")
}

/// The Deployment's pod labels for the keys of `selector`.
fn pod_labels_subset(deployment: &Value, selector: &Value) -> Value {
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let keys = selector
        .as_object()
        .map(|o| o.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    Value::Object(
        keys.into_iter()
            .map(|k| (k.clone(), labels[&k].clone()))
            .collect(),
    )
}

/// A tool scripts/install-deps puts under .tools/.
fn tool(relative: &str) -> PathBuf {
    let path = workspace().join(".tools").join(relative);
    assert!(
        Path::new(&path).exists(),
        "{} is missing: run scripts/install-deps",
        path.display()
    );
    path
}

/// deploy/base/crds.yaml as pilot generates it: one JSON document (JSON is
/// YAML) per CRD, in the registry's order.
fn crds_yaml() -> String {
    let mut out = String::from(
        "# The CustomResourceDefinitions of every kind pilot-discovery serves, as\n\
         # pilot_store_k8s::crds(&pilot_api::default_registry()) generates them\n\
         # (what `pilot-discovery --install-crds` applies). Generated: do not edit;\n\
         # PILOT_WRITE_DEPLOY=1 cargo nextest run -p pilot-system-tests --test deploy\n\
         # rewrites it, and the test fails while it differs.\n",
    );
    for crd in pilot_store_k8s::crds(&pilot_api::default_registry()) {
        let mut value = serde_json::to_value(&crd).expect("a CRD as JSON");
        if let Some(object) = value.as_object_mut() {
            object.insert("apiVersion".into(), json!("apiextensions.k8s.io/v1"));
            object.insert("kind".into(), json!("CustomResourceDefinition"));
        }
        out.push_str("---\n");
        out.push_str(&serde_json::to_string_pretty(&value).expect("JSON"));
        out.push('\n');
    }
    out
}
