//! Conditions and validation messages on objects, as a user finds them
//! with real kubectl (`kubectl get virtualservice NAME -o yaml`), on the
//! memory store, on real etcd and on the fake Kubernetes API server: a
//! VirtualService bound only to a Gateway that does not exist has
//! `Reconciled` `False` with the `PLT0210` message, one whose second route
//! follows a catch-all has `Reconciled` `True` with the `PLT0211` warning;
//! once fixed (the Gateway created, the catch-all moved last) both lose
//! their messages. With two replicas on one API server, only the elected
//! one writes, and each status once: the sum of both replicas' status
//! writes is one per object, and the faulty object's `resourceVersion`
//! does not move while later rounds run. An `exportTo` that leaves out
//! every namespace with a proxy is reported once a real Envoy is
//! connected.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pilot_system_tests::{Mesh, Store};
use pilot_test_support::{Discovery, Envoy, FakeCluster, TestCerts, eventually, pilotctl, workspace};
use serde_json::Value;

const TOKEN: &str = "conditions-test-token-0123456789";

/// The issue's "tried as a new user" objects.
const FAULTY: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bookinfo, namespace: default}
spec:
  hosts: [bookinfo.example.com]
  gateways: [bookinfo-gateway]
  http:
  - route: [{destination: {host: productpage}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
  - name: jason
    match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: reviews}}]
"#;

/// The fix: the gateway defined, the catch-all last.
const FIXED: &str = r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: bookinfo-gateway, namespace: default}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [bookinfo.example.com]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - name: jason
    match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: reviews}}]
  - route: [{destination: {host: reviews}}]
"#;

/// An object with nothing wrong: its status is written after the faulty
/// ones were, so a round ran after theirs.
const MARKER: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - route: [{destination: {host: ratings}}]
"#;

/// Real kubectl with a kubeconfig, in a directory of its own.
struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn at(kubeconfig: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("kubeconfig");
        std::fs::copy(kubeconfig, &own).unwrap();
        Kubectl { dir, kubeconfig: own }
    }

    /// kubectl for a pilot-discovery over TLS with a bearer token.
    fn pilot(url: &str, ca: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: pilot\n  cluster:\n    server: {url}\n    certificate-authority: {}\n\
                 users:\n- name: operator\n  user:\n    token: {TOKEN}\ncontexts:\n- name: pilot\n  context:\n    cluster: pilot\n    user: operator\n    namespace: default\n\
                 current-context: pilot\n",
                ca.display()
            ),
        )
        .unwrap();
        Kubectl { dir, kubeconfig }
    }

    fn output(&self, args: &[&str]) -> Output {
        let kubectl = workspace().join(".tools/kubectl/bin/kubectl");
        assert!(
            kubectl.exists(),
            "{} is missing: run scripts/install-deps",
            kubectl.display()
        );
        Command::new(kubectl)
            .arg("--request-timeout=60s")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("cannot run kubectl")
    }

    fn ok(&self, args: &[&str]) -> String {
        let output = self.output(args);
        assert!(
            output.status.success(),
            "kubectl {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn apply(&self, text: &str) {
        let path = self.dir.path().join("apply.yaml");
        std::fs::write(&path, text).unwrap();
        // Server-side (the fake API server implements no other apply),
        // and no client-side validation (it serves no OpenAPI).
        self.ok(&[
            "apply",
            "--server-side",
            "--validate=false",
            "-f",
            path.to_str().unwrap(),
        ]);
    }

    /// `kubectl get virtualservice NAME -o json`, and then as YAML (what
    /// a user reads; as new as the JSON or newer).
    fn virtual_service(&self, name: &str) -> (String, Value) {
        let json = self.ok(&["get", "virtualservice", name, "-o", "json"]);
        let yaml = self.ok(&["get", "virtualservice", name, "-o", "yaml"]);
        (yaml, serde_json::from_str(&json).expect("kubectl's JSON"))
    }
}

/// The `Reconciled` condition of `object`, if any.
fn reconciled(object: &Value) -> Option<&Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Reconciled")
}

/// The codes of `object`'s validation messages.
fn codes(object: &Value) -> Vec<String> {
    object["status"]["validationMessages"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|m| m["type"]["code"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The faulty write shows in the status; the fix clears it. `before_fix`
/// runs while the faulty objects show their messages.
fn faulty_then_fixed(kubectl: &Kubectl, before_fix: impl FnOnce(&Kubectl)) {
    kubectl.apply(FAULTY);
    let mut bookinfo = (String::new(), Value::Null);
    eventually("bookinfo to show Reconciled False with PLT0210", || {
        bookinfo = kubectl.virtual_service("bookinfo");
        reconciled(&bookinfo.1).is_some_and(|c| c["status"] == "False")
    });
    let (yaml, object) = &bookinfo;
    let condition = reconciled(object).unwrap();
    assert_eq!(condition["reason"], "GatewayNotFound", "{yaml}");
    assert_eq!(
        condition["observedGeneration"], object["metadata"]["generation"],
        "{yaml}"
    );
    assert_eq!(codes(object), ["PLT0210"], "{yaml}");
    let message = &object["status"]["validationMessages"][0];
    assert_eq!(message["level"], "ERROR", "{yaml}");
    assert_eq!(message["type"]["name"], "GatewayNotFound", "{yaml}");
    assert_eq!(
        message["description"],
        "spec.gateways[0]: bound to the gateway default/bookinfo-gateway, which does not exist: this VirtualService applies nowhere",
        "{yaml}"
    );
    // What the user reads in the YAML.
    for line in [
        "type: Reconciled",
        "status: \"False\"",
        "code: PLT0210",
        "level: ERROR",
    ] {
        assert!(yaml.contains(line), "no {line:?} in:\n{yaml}");
    }
    // (kubectl folds long strings: the words, not the whole line.)
    assert!(
        yaml.contains("description: 'spec.gateways[0]: bound to the gateway default/bookinfo-gateway,")
            && yaml.contains("which does not exist: this VirtualService applies nowhere'"),
        "{yaml}"
    );
    let mut reviews = (String::new(), Value::Null);
    eventually("reviews to show the PLT0211 warning", || {
        reviews = kubectl.virtual_service("reviews");
        codes(&reviews.1) == ["PLT0211"]
    });
    let (yaml, object) = &reviews;
    assert_eq!(reconciled(object).unwrap()["status"], "True", "{yaml}");
    assert!(yaml.contains("level: WARNING"), "{yaml}");
    assert!(
        object["status"]["validationMessages"][0]["description"]
            .as_str()
            .unwrap_or_default()
            .starts_with("spec.http[1]: never matches: the earlier route spec.http[0] matches every request"),
        "{yaml}"
    );

    before_fix(kubectl);

    kubectl.apply(FIXED);
    eventually("both to lose their messages once fixed", || {
        let (_, bookinfo) = kubectl.virtual_service("bookinfo");
        let (_, reviews) = kubectl.virtual_service("reviews");
        [&bookinfo, &reviews].iter().all(|o| {
            codes(o).is_empty()
                && reconciled(o).is_some_and(|c| {
                    c["status"] == "True" && c["observedGeneration"] == o["metadata"]["generation"]
                })
        })
    });
    let (yaml, reviews) = kubectl.virtual_service("reviews");
    assert_eq!(reviews["metadata"]["generation"], 2, "{yaml}");
    assert!(!yaml.contains("validationMessages"), "{yaml}");
}

/// pilot-discovery over TLS with a token (kubectl sends tokens only over
/// TLS) on `store`, serving the bookinfo services, writing status every
/// 200 ms.
fn tls_server(mesh: &Mesh, store: &Store, dir: &Path) -> (Discovery, TestCerts) {
    let certs = TestCerts::generate(dir).expect("openssl (scripts/install-deps installs it)");
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN} rw operator\n")).unwrap();
    let server = mesh.discovery(
        store,
        &[
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
            "--token-file",
            tokens.to_str().unwrap(),
            "--status-interval",
            "200ms",
        ],
    );
    (server, certs)
}

#[test]
fn kubectl_shows_conditions_on_the_memory_store() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = Mesh::bookinfo();
    let (server, certs) = tls_server(&mesh, &Store::Memory, dir.path());
    faulty_then_fixed(&Kubectl::pilot(&server.url, &certs.ca), |_| {});
    server.terminate();
}

#[test]
fn kubectl_shows_conditions_on_etcd() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let mesh = Mesh::bookinfo();
    let (server, certs) = tls_server(&mesh, &Store::Etcd(&endpoint), dir.path());
    faulty_then_fixed(&Kubectl::pilot(&server.url, &certs.ca), |_| {});
    server.terminate();
}

/// `pilot_status_writes_total{result="written"}` of `server`.
fn written(server: &Discovery) -> u64 {
    let (code, metrics) = server.get("/metrics");
    assert_eq!(code, 200, "{metrics}");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("pilot_status_writes_total{result=\"written\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no written count in {metrics}"))
}

fn is_writer(server: &Discovery) -> bool {
    let (code, metrics) = server.get("/metrics");
    code == 200
        && metrics
            .lines()
            .find_map(|l| l.strip_prefix("pilot_status_writer "))
            .is_some_and(|v| v.trim() == "1")
}

#[test]
fn two_replicas_on_kubernetes_write_each_condition_once() {
    let cluster = FakeCluster::start();
    let store = Store::Kubernetes(&cluster);
    let mesh = Mesh::bookinfo();
    let a = mesh.replica(&store, "pilot-a");
    let b = mesh.replica(&store, "pilot-b");
    eventually("one replica to be elected status writer", || {
        is_writer(&a) || is_writer(&b)
    });
    assert_eq!(written(&a) + written(&b), 0, "nothing to write yet");
    let kubectl = Kubectl::at(cluster.kubeconfig());
    faulty_then_fixed(&kubectl, |kubectl| {
        let (_, bookinfo) = kubectl.virtual_service("bookinfo");
        let version = bookinfo["metadata"]["resourceVersion"].clone();
        // A later object's status written means later rounds ran over
        // the faulty ones too: they were not written again.
        kubectl.apply(MARKER);
        eventually("the marker's status to be written", || {
            let (_, marker) = kubectl.virtual_service("ratings");
            reconciled(&marker).is_some_and(|c| c["status"] == "True")
        });
        let (yaml, bookinfo) = kubectl.virtual_service("bookinfo");
        assert_eq!(
            bookinfo["metadata"]["resourceVersion"], version,
            "the condition was written again:\n{yaml}"
        );
        assert_eq!(
            written(&a) + written(&b),
            3,
            "one status write per object (bookinfo, reviews, ratings), by one replica"
        );
        assert!(written(&a) == 0 || written(&b) == 0, "both replicas wrote status");
    });
}

/// A VirtualService exported only to a namespace without proxies: with a
/// real Envoy connected in `default`, the server reports `PLT0214` in its
/// status and to `pilotctl analyze`; exported to `default` too, the
/// message goes.
#[test]
fn an_export_to_no_namespace_with_proxies_is_reported_once_a_proxy_is_known() {
    let mesh = Mesh::bookinfo();
    let server = mesh.discovery(&Store::Memory, &["--status-interval", "200ms"]);
    let url = Some(server.url.as_str());
    let exported = |to: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: reviews, namespace: default}}\n\
             spec:\n  hosts: [reviews]\n  exportTo: [{to}]\n  http:\n  - route: [{{destination: {{host: reviews}}}}]\n"
        )
    };
    let applied = pilotctl(url, &["apply", "-f", "-"], &[], Some(&exported("prod")));
    assert_eq!(applied.code, 0, "{applied:?}");
    let messages = || codes(&pilot_system_tests::get(url, "virtualservices", "reviews"));
    // No proxy yet: exportTo is not why nothing has it.
    eventually("the status to be written", || {
        reconciled(&pilot_system_tests::get(url, "virtualservices", "reviews")).is_some()
    });
    assert!(messages().is_empty(), "{:?}", messages());

    let _envoy = Envoy::ads(
        "sidecar~10.0.0.70~conditions.default~default.svc.cluster.local",
        &[("INTERCEPTION_MODE", "NONE")],
        server.xds_port,
        false,
    )
    .unwrap();
    eventually("PLT0214 once a proxy in default is connected", || {
        messages() == ["PLT0214"]
    });
    let object = pilot_system_tests::get(url, "virtualservices", "reviews");
    let description = object["status"]["validationMessages"][0]["description"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        description.starts_with("spec.exportTo: exported to prod and no connected proxy is in those namespaces (proxies are in default)"),
        "{object}"
    );
    let run = pilotctl(url, &["analyze"], &[], None);
    assert!(
        run.stdout.lines().any(|l| l
            .starts_with("warning PLT0214 VirtualService default/reviews spec.exportTo: exported to prod")),
        "{run:?}"
    );

    let applied = pilotctl(url, &["apply", "-f", "-"], &[], Some(&exported("prod, default")));
    assert_eq!(applied.code, 0, "{applied:?}");
    eventually("the message to go once exported to default", || {
        messages().is_empty()
    });
    server.terminate();
}

/// pilot's GatewayClass, a Gateway of it, an HTTPRoute attached both to
/// it and to the reviews Service (the mesh) with `backends`, and a
/// BackendTLSPolicy for reviews (verified with the system's trust
/// bundle: no ConfigMap to resolve).
fn gateway_api_objects(backends: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: pilot, namespace: default}}\n\
         spec: {{controllerName: pilot.io/gateway-controller}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: default}}\n\
         spec:\n  gatewayClassName: pilot\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n  - {{name: mysql, protocol: TCP, port: 3306}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: reviews, namespace: default}}\n\
         spec:\n  parentRefs:\n  - {{group: \"\", kind: Service, name: reviews}}\n  - {{name: edge, sectionName: http}}\n  \
         rules:\n  - backendRefs: {backends}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: reviews-tls, namespace: default}}\n\
         spec:\n  targetRefs: [{{group: \"\", kind: Service, name: reviews}}]\n  \
         validation: {{wellKnownCACertificates: System, hostname: reviews.example.com}}\n"
    )
}

/// `kubectl get RESOURCE NAME -o json`.
fn get(kubectl: &Kubectl, resource: &str, name: &str) -> Value {
    serde_json::from_str(&kubectl.ok(&["get", resource, name, "-o", "json"])).expect("kubectl's JSON")
}

/// The (type, status, reason, observedGeneration) of each condition.
fn conditions(list: &Value) -> Vec<(String, String, String, i64)> {
    list.as_array()
        .map(|list| {
            list.iter()
                .map(|c| {
                    let text = |field: &str| c[field].as_str().unwrap_or_default().to_string();
                    (
                        text("type"),
                        text("status"),
                        text("reason"),
                        c["observedGeneration"].as_i64().unwrap_or(-1),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn condition(type_: &str, status: &str, reason: &str, generation: i64) -> (String, String, String, i64) {
    (type_.into(), status.into(), reason.into(), generation)
}

/// The Gateway API's status, as `kubectl get -o yaml` shows it: the class
/// and Gateway accepted, the listener counting the route, the route's two
/// parents accepted and its references not resolved (a missing backend),
/// the BackendTLSPolicy accepted for the Gateway;
/// once the route is edited (generation 2) its references resolve and
/// every condition follows the generation.
fn gateway_api_status_follows_edits(kubectl: &Kubectl) {
    kubectl.apply(&gateway_api_objects(
        "[{name: reviews, port: 9080}, {name: gone, port: 9080}]",
    ));
    let mut route = Value::Null;
    eventually("the HTTPRoute's status to name both parents", || {
        route = get(kubectl, "httproute", "reviews");
        route["status"]["parents"]
            .as_array()
            .is_some_and(|p| p.len() == 2)
    });
    let parents = &route["status"]["parents"];
    for (i, parent) in [
        serde_json::json!({"group": "", "kind": "Service", "name": "reviews"}),
        serde_json::json!({"name": "edge", "sectionName": "http"}),
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(&parents[i]["parentRef"], parent, "{route}");
        assert_eq!(
            parents[i]["controllerName"], "pilot.io/gateway-controller",
            "{route}"
        );
        assert_eq!(
            conditions(&parents[i]["conditions"]),
            [
                condition("Accepted", "True", "Accepted", 1),
                condition("ResolvedRefs", "False", "BackendNotFound", 1)
            ],
            "{route}"
        );
    }
    let yaml = kubectl.ok(&["get", "httproute", "reviews", "-o", "yaml"]);
    for line in [
        "controllerName: pilot.io/gateway-controller",
        "reason: BackendNotFound",
        "type: ResolvedRefs",
    ] {
        assert!(yaml.contains(line), "no {line:?} in:\n{yaml}");
    }
    // The BackendTLSPolicy: one ancestor, the Gateway whose route sends
    // to reviews.
    let mut policy = Value::Null;
    eventually("the BackendTLSPolicy's status to name its Gateway", || {
        policy = get(kubectl, "backendtlspolicy", "reviews-tls");
        policy["status"]["ancestors"]
            .as_array()
            .is_some_and(|a| a.len() == 1)
    });
    let ancestor = &policy["status"]["ancestors"][0];
    assert_eq!(
        ancestor["ancestorRef"],
        serde_json::json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "default", "name": "edge"}),
        "{policy}"
    );
    assert_eq!(
        conditions(&ancestor["conditions"]),
        [
            condition("Accepted", "True", "Accepted", 1),
            condition("ResolvedRefs", "True", "ResolvedRefs", 1)
        ],
        "{policy}"
    );
    let class = get(kubectl, "gatewayclass", "pilot");
    assert_eq!(
        conditions(&class["status"]["conditions"])
            .into_iter()
            .filter(|c| c.0 == "Accepted")
            .collect::<Vec<_>>(),
        [condition("Accepted", "True", "Accepted", 1)],
        "{class}"
    );
    let gateway = get(kubectl, "gateways.gateway.networking.k8s.io", "edge");
    let listeners = &gateway["status"]["listeners"];
    assert_eq!(listeners[0]["name"], "http", "{gateway}");
    assert_eq!(listeners[0]["attachedRoutes"], 1, "{gateway}");
    assert_eq!(listeners[1]["attachedRoutes"], 0, "{gateway}");
    assert_eq!(
        listeners[1]["supportedKinds"],
        serde_json::json!([{"group": "gateway.networking.k8s.io", "kind": "TCPRoute"}]),
        "{gateway}"
    );

    kubectl.apply(&gateway_api_objects("[{name: reviews, port: 9080}]"));
    eventually("the edited route's references to resolve at generation 2", || {
        route = get(kubectl, "httproute", "reviews");
        route["status"]["parents"].as_array().is_some_and(|parents| {
            parents.len() == 2
                && parents.iter().all(|p| {
                    conditions(&p["conditions"])
                        == [
                            condition("Accepted", "True", "Accepted", 2),
                            condition("ResolvedRefs", "True", "ResolvedRefs", 2),
                        ]
                })
        })
    });
    assert_eq!(route["metadata"]["generation"], 2, "{route}");
}

#[test]
fn kubectl_shows_the_gateway_api_status_on_the_memory_store() {
    let dir = tempfile::tempdir().unwrap();
    let mesh = Mesh::bookinfo();
    let (server, certs) = tls_server(&mesh, &Store::Memory, dir.path());
    gateway_api_status_follows_edits(&Kubectl::pilot(&server.url, &certs.ca));
    server.terminate();
}

#[test]
fn kubectl_shows_the_gateway_api_status_on_etcd() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let mesh = Mesh::bookinfo();
    let (server, certs) = tls_server(&mesh, &Store::Etcd(&endpoint), dir.path());
    gateway_api_status_follows_edits(&Kubectl::pilot(&server.url, &certs.ca));
    server.terminate();
}

#[test]
fn kubectl_shows_the_gateway_api_status_on_kubernetes() {
    let cluster = FakeCluster::start();
    let mesh = Mesh::bookinfo();
    let server = mesh.replica(&Store::Kubernetes(&cluster), "pilot-a");
    eventually("the replica to be elected status writer", || is_writer(&server));
    gateway_api_status_follows_edits(&Kubectl::at(cluster.kubeconfig()));
}
