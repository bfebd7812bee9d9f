//! The Gateway API's ClusterIP matching with real captured traffic: an
//! HTTPRoute attached to a Service applies to the requests an application
//! sends to that Service's address, whatever their Host header, and not to
//! requests whose Host names the Service but which are sent to another
//! address. The route is the Gateway API's mesh conformance manifest
//! `mesh-frontend` (the corpus `gateway-api` at `../shared/corpora/`): on
//! `echo-v2`, a response header `X-Header-Set: set` and echo-v2 as the
//! backend. The expectation table is written here from what the
//! conformance's MeshFrontend and MeshFrontendHostname tests state, with
//! cases of our own for a Service without Gateway API routes (routed by
//! Host, as Istio routes) and an address no Service has; once the route
//! is deleted, the port routes by Host again.
//!
//! Layout (nothing leaves the two namespaces this test creates):
//! - `pod`: veth address 10.78.0.2, the application (curl as uid 1000),
//!   pilot-discovery on its loopback, `pilot-agent proxy sidecar` (Envoy,
//!   uid 1337) in namespace `gateway-conformance-mesh`, and the capture
//!   rules `pilot-agent iptables` applies (the injected init container's);
//!   routes to 10.78.0.0/16 and the Service addresses 10.96.0.0/16 via the
//!   peer;
//! - `peer`: veth 10.78.0.1, on its loopback the upstreams of echo-v1,
//!   echo-v2 and other (10.78.1.1-3:8080), answering with their name.
//!
//! Services: echo-v1 10.96.1.1, echo-v2 10.96.1.2, other 10.96.1.9, each
//! on port 80 (HTTP).
//!
//! Needs root (network namespaces, iptables, switching uid). When not root
//! it fails with that message (CI runs as root); it never passes vacuously.

mod common;

use common::eventually;
use common::netns::{Lab, raw_envoy_binary, require_root, run, set_mode, text};

const POD_IP: &str = "10.78.0.2";
const PEER_IP: &str = "10.78.0.1";
const PILOT: &str = "127.0.0.1";
const MESH: &str = "gateway-conformance-mesh";
const ECHO_V1: &str = "10.96.1.1";
const ECHO_V2: &str = "10.96.1.2";
const OTHER: &str = "10.96.1.9";
const ECHO_V2_POD: &str = "10.78.1.2";
/// An address no Service has.
const NOWHERE: &str = "10.78.3.1";
const APP_UID: &str = "1000";

/// Answers every GET with its name (the first argument `ADDR:PORT=NAME`
/// of each server).
const SERVER: &str = r#"
import http.server, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = self.server.name.encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
for arg in sys.argv[1:]:
    where, name = arg.split("=")
    host, port = where.rsplit(":", 1)
    s = http.server.ThreadingHTTPServer((host, int(port)), H)
    s.name = name
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"#;

fn services_yaml() -> String {
    let service = |name: &str, address: &str, upstream: &str| {
        format!(
            "- hostname: {name}.{MESH}.svc.cluster.local\n  address: {address}\n  ports: [{{name: http, port: 80, protocol: HTTP}}]\n  instances:\n  - {{address: {upstream}, port: 8080, labels: {{app: {name}}}}}\n"
        )
    };
    format!(
        "services:\n{}{}{}",
        service("echo-v1", ECHO_V1, "10.78.1.1"),
        service("echo-v2", ECHO_V2, ECHO_V2_POD),
        service("other", OTHER, "10.78.1.3"),
    )
}

/// What the application's GET of `http://ADDRESS/` with `Host: HOST` must
/// get: the status, the upstream that answered (none: no upstream), and
/// the route's response header `X-Header-Set` (none: absent).
struct Case {
    name: &'static str,
    address: &'static str,
    host: &'static str,
    status: u16,
    backend: Option<&'static str>,
    header_set: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    vec![
        // MeshFrontend: the Service's name, sent to its address.
        Case {
            name: "echo-v2's address, Host echo-v2",
            address: ECHO_V2,
            host: "echo-v2",
            status: 200,
            backend: Some("echo-v2"),
            header_set: Some("set"),
        },
        // MeshFrontend: a pod's address is not the Service's.
        Case {
            name: "echo-v2's pod, Host its address",
            address: "10.78.1.2:8080",
            host: "10.78.1.2:8080",
            status: 200,
            backend: Some("echo-v2"),
            header_set: None,
        },
        // MeshFrontendHostname: the address decides, not the Host.
        Case {
            name: "echo-v2's address, Host echo-v1",
            address: ECHO_V2,
            host: "echo-v1",
            status: 200,
            backend: Some("echo-v2"),
            header_set: Some("set"),
        },
        Case {
            name: "echo-v1's address, Host echo-v2",
            address: ECHO_V1,
            host: "echo-v2",
            status: 200,
            backend: Some("echo-v1"),
            header_set: None,
        },
        // Ours: the route applies by address with any Host, even one no
        // Service has.
        Case {
            name: "echo-v2's address, Host example.com",
            address: ECHO_V2,
            host: "example.com",
            status: 200,
            backend: Some("echo-v2"),
            header_set: Some("set"),
        },
        // Ours: echo-v1 and other have no Gateway API route: routed by
        // Host, as Istio routes, unless the Host names echo-v2 (whose
        // route applies only to its address): then by address.
        Case {
            name: "echo-v1's address, Host echo-v1",
            address: ECHO_V1,
            host: "echo-v1",
            status: 200,
            backend: Some("echo-v1"),
            header_set: None,
        },
        Case {
            name: "other's address, Host echo-v1",
            address: OTHER,
            host: "echo-v1",
            status: 200,
            backend: Some("echo-v1"),
            header_set: None,
        },
        Case {
            name: "other's address, Host echo-v2",
            address: OTHER,
            host: "echo-v2",
            status: 200,
            backend: Some("other"),
            header_set: None,
        },
        // Ours: an address no Service has, Host echo-v2: echo-v2's route
        // does not apply, and there is no Service to send it to (Envoy's
        // 503 for a route without a cluster).
        Case {
            name: "an address no Service has, Host echo-v2",
            address: NOWHERE,
            host: "echo-v2",
            status: 503,
            backend: None,
            header_set: None,
        },
    ]
}

#[test]
fn a_services_routes_apply_by_its_address_not_the_host_header() {
    require_root(
        "the ClusterIP matching test needs root: it creates network namespaces, applies iptables \
         rules and runs Envoy as uid 1337 (CI runs as root; elsewhere run it with sudo or skip it: \
         cargo nextest run -p pilot-agent -E 'not test(by_its_address)')",
    );
    let Some(corpus) = pilot_test_support::corpus("gateway-api") else {
        return;
    };
    let envoy = raw_envoy_binary();
    let discovery = pilot_test_support::binary(pilot_test_support::PILOT_DISCOVERY);
    let agent = env!("CARGO_BIN_EXE_pilot-agent");
    let dir = tempfile::tempdir().unwrap();
    set_mode(dir.path(), 0o755);

    let mut lab = Lab::new("cip", &["pod", "peer"]);
    let (a, b) = lab.veth("pod", "peer");
    let (pod, peer) = (lab.ns("pod"), lab.ns("peer"));
    lab.sh(
        &pod,
        &format!(
            "ip addr add {POD_IP}/24 dev {a} && \
             for net in 10.78.0.0/16 10.96.0.0/16; do ip route add $net via {PEER_IP}; done"
        ),
    );
    lab.sh(
        &peer,
        &format!(
            "ip addr add {PEER_IP}/24 dev {b} && \
             for addr in 10.78.1.1 10.78.1.2 10.78.1.3; do ip addr add $addr/32 dev lo; done"
        ),
    );
    lab.spawn_python(
        &peer,
        SERVER,
        &[
            "10.78.1.1:8080=echo-v1",
            "10.78.1.2:8080=echo-v2",
            "10.78.1.3:8080=other",
        ],
    );

    let services = dir.path().join("services.yaml");
    std::fs::write(&services, services_yaml()).unwrap();
    lab.spawn(
        "pilot-discovery",
        lab.exec(&pod)
            .arg(&discovery)
            .args(["--listen", &format!("{PILOT}:8080")])
            .args(["--xds-listen", &format!("{PILOT}:15010")])
            .arg("--services")
            .arg(&services)
            .args(["--log-level", "warn"]),
    );
    eventually("pilot-discovery is ready", || {
        lab.curl(&pod, None, &[&format!("http://{PILOT}:8080/readyz")]).0 == 200
    });
    create(
        &lab,
        &pod,
        &corpus.join("gwapi_conformance.tests.mesh.mesh-frontend.yaml"),
    );

    // The capture rules of the injected init container, then the sidecar
    // as injected (uid 1337, capture by REDIRECT).
    let init_args = injected_init_args();
    let out = run(lab.exec(&pod).arg(agent).args(&init_args));
    assert!(
        out.status.success(),
        "pilot-agent {init_args:?}: {}",
        text(&out.stderr)
    );
    let config_dir = dir.path().join("proxy");
    std::fs::create_dir(&config_dir).unwrap();
    std::os::unix::fs::chown(&config_dir, Some(1337), Some(1337)).unwrap();
    lab.spawn(
        "pilot-agent proxy sidecar",
        lab.exec_pod(&pod)
            .args(["setpriv", "--reuid", "1337", "--regid", "1337", "--clear-groups"])
            .args([agent, "proxy", "sidecar", "--envoy-binary"])
            .arg(&envoy)
            .arg("--config-dir")
            .arg(&config_dir)
            .args([
                "--ip",
                POD_IP,
                "--id",
                &format!("client.{MESH}"),
                "--namespace",
                MESH,
            ])
            .args(["--discovery-address", &format!("{PILOT}:15010")])
            .args(["--admin-port", "15000", "--status-addr", "127.0.0.1:15020"])
            .args(["--concurrency", "1"])
            .env_remove("INSTANCE_IP")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("PILOT_DISCOVERY_URL"),
    );
    eventually("the agent reports its proxy ready", || {
        lab.curl(&pod, None, &["http://127.0.0.1:15020/healthz/ready"]).0 == 200
    });
    eventually("echo-v2's route applies to its address", || {
        get(&lab, &pod, ECHO_V2, "echo-v2") == (200, "echo-v2".into(), "set".into())
    });

    let failures: Vec<String> = cases()
        .iter()
        .filter_map(|case| {
            let (status, body, header_set) = get(&lab, &pod, case.address, case.host);
            let backend_right = match case.backend {
                Some(backend) => body == backend,
                None => !["echo-v1", "echo-v2", "other"].contains(&body.as_str()),
            };
            let right =
                status == case.status && backend_right && header_set == case.header_set.unwrap_or_default();
            (!right).then(|| {
                format!(
                    "{}: got {status}, {body:?}, X-Header-Set {header_set:?}; want {}, {:?}, {:?}",
                    case.name, case.status, case.backend, case.header_set
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The route deleted, the port routes by Host again (the sidecar's
    // listener loses its chains by address).
    let url = format!(
        "http://{PILOT}:8080/apis/gateway.networking.k8s.io/v1/namespaces/{MESH}/httproutes/mesh-split-v1"
    );
    let (status, body) = lab.curl(&pod, None, &["-X", "DELETE", &url]);
    assert_eq!(status, 200, "{body}");
    eventually("echo-v2's address routes by Host again", || {
        get(&lab, &pod, ECHO_V2, "echo-v1") == (200, "echo-v1".into(), String::new())
    });
    assert_eq!(
        get(&lab, &pod, ECHO_V2, "echo-v2"),
        (200, "echo-v2".into(), String::new())
    );
}

/// The application's (uid 1000) GET of `http://ADDRESS/` with `Host: host`:
/// the status, the body (the upstream's name) and the response's
/// `X-Header-Set`.
fn get(lab: &Lab, pod: &str, address: &str, host: &str) -> (u16, String, String) {
    let out = run(lab
        .exec(pod)
        .args([
            "setpriv",
            "--reuid",
            APP_UID,
            "--regid",
            APP_UID,
            "--clear-groups",
        ])
        .args(["curl", "-sS", "--max-time", "10", "-H", &format!("host: {host}")])
        .args(["-w", "\n%{http_code}\n%header{x-header-set}"])
        .arg(format!("http://{address}/")));
    let stdout = text(&out.stdout);
    let mut lines = stdout.rsplitn(3, '\n');
    let header = lines.next().unwrap_or_default().trim().to_string();
    let status = lines.next().unwrap_or_default().trim().parse().unwrap_or(0);
    let body = lines.next().unwrap_or_default().trim().to_string();
    (status, body, header)
}

/// Creates the objects of the manifest `file` through pilot-discovery's
/// REST API.
fn create(lab: &Lab, pod: &str, file: &std::path::Path) {
    let yaml = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    for value in pilot_model::document::parse_values(&file.display().to_string(), &yaml).unwrap() {
        let url = format!(
            "http://{PILOT}:8080/apis/gateway.networking.k8s.io/v1/namespaces/{}/httproutes",
            value["metadata"]["namespace"].as_str().unwrap_or("default")
        );
        let out = run(lab.exec(pod).args([
            "curl",
            "-sS",
            "-o",
            "/dev/stderr",
            "-w",
            "%{http_code}",
            "-H",
            "content-type: application/json",
            "--data-binary",
            &value.to_string(),
            &url,
        ]));
        assert_eq!(
            text(&out.stdout),
            "201",
            "creating {}: {}",
            file.display(),
            text(&out.stderr)
        );
    }
}

/// The init container's arguments pilot-inject gives a pod serving 8080.
fn injected_init_args() -> Vec<String> {
    let mut pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client"},
        "spec": {"containers": [{"name": "client", "image": "client", "ports": [{"containerPort": 8080}]}]},
    });
    pilot_inject::inject_object(&mut pod, &pilot_inject::InjectTemplate::default()).unwrap();
    serde_json::from_value(pod["spec"]["initContainers"][0]["args"].clone()).unwrap()
}
