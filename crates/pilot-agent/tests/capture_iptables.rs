//! Real traffic capture: `pilot-agent iptables` rules in a network namespace
//! this test creates, a real Envoy under `pilot-agent proxy sidecar` as uid
//! 1337 on pilot-discovery's ADS, and
//! an application (curl as uid 1000) whose requests are proven captured and
//! routed by what the upstreams answer.
//!
//! Layout (nothing leaves the two namespaces):
//! - `pod` namespace: veth address 10.77.0.2, the application (uid 1000),
//!   a local server on 0.0.0.0:9080 (the pod's own app), Envoy (uid 1337);
//!   routes to 10.77.0.0/16 and the service VIPs 10.96.0.0/16 via the peer;
//! - pilot-discovery in the pod namespace on its loopback (127.0.0.1:8080
//!   REST, :15010 ADS: a loopback ADS needs no client credential);
//! - `peer` namespace: veth 10.77.0.1, on its loopback the reviews v1/v2/v3
//!   upstreams (10.77.1.1-3:9080) and servers outside the mesh (10.77.2.1,
//!   10.77.3.1). It also plays the caller of the pod's inbound side.
//!
//! Needs root (network namespaces, iptables, switching uid). When not root
//! it fails with that message (CI runs as root); it never passes vacuously.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::eventually;
use common::netns::{Lab, raw_envoy_binary, require_root, run, set_mode, text};
use pilot_test_support::workspace;

const POD_IP: &str = "10.77.0.2";
const PEER_IP: &str = "10.77.0.1";
const PILOT: &str = "127.0.0.1";
const REVIEWS_VIP: &str = "10.96.0.10";
const PRODUCTPAGE_VIP: &str = "10.96.0.20";
const APP_UID: &str = "1000";

/// Answers every GET with one JSON line: which server it is, whether the
/// request came through Envoy (Envoy's HTTP connection manager adds
/// `x-request-id`) and the caller's address. Arguments: `ADDR:PORT=NAME`...
const SERVER: &str = r#"
import http.server, json, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = (json.dumps({"server": self.server.name, "envoy": "x-request-id" in self.headers,
                            "peer": self.client_address[0]}) + "\n").encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
servers = []
for arg in sys.argv[1:]:
    where, name = arg.split("=")
    host, port = where.rsplit(":", 1)
    s = http.server.ThreadingHTTPServer((host, int(port)), H)
    s.name = name
    servers.append(s)
    threading.Thread(target=s.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"#;

const SERVICES: &str = r#"
services:
- hostname: reviews.default.svc.cluster.local
  address: 10.96.0.10
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances:
  - {address: 10.77.1.1, port: 9080, labels: {app: reviews, version: v1}}
  - {address: 10.77.1.2, port: 9080, labels: {app: reviews, version: v2}}
  - {address: 10.77.1.3, port: 9080, labels: {app: reviews, version: v3}}
- hostname: productpage.default.svc.cluster.local
  address: 10.96.0.20
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances:
  - {address: 10.77.0.2, port: 9080, labels: {app: productpage, version: v1}}
"#;

#[test]
fn captured_traffic_is_routed_by_the_mesh_rules() {
    require_root(
        "the capture test needs root: it creates network namespaces, applies iptables rules and runs \
         Envoy as uid 1337 (CI runs as root; elsewhere run it with sudo or skip it: \
         cargo nextest run -p pilot-agent -E 'not test(captured_traffic)')",
    );
    let envoy = raw_envoy_binary();
    let discovery = pilot_discovery_binary();
    let dir = tempfile::tempdir().unwrap();
    set_mode(dir.path(), 0o755);
    let agent = env!("CARGO_BIN_EXE_pilot-agent");

    let mut lab = Capture::new();

    // The servers in the peer namespace; pilot-discovery and the pod's own
    // application in the pod namespace.
    let services = dir.path().join("services.yaml");
    std::fs::write(&services, SERVICES).unwrap();
    lab.spawn(
        "pilot-discovery",
        lab.exec(&lab.pod)
            .arg(&discovery)
            .args(["--listen", &format!("{PILOT}:8080")])
            .args(["--xds-listen", &format!("{PILOT}:15010")])
            .arg("--services")
            .arg(&services)
            .args(["--log-level", "warn"]),
    );
    lab.spawn_server(
        &lab.peer.clone(),
        &[
            "10.77.1.1:9080=reviews-v1",
            "10.77.1.2:9080=reviews-v2",
            "10.77.1.3:9080=reviews-v3",
            "10.77.2.1:9080=excluded-cidr",
            "10.77.3.1:9080=outside-the-mesh",
            "10.77.3.1:7777=excluded-port",
            "10.77.3.1:7778=outside-the-mesh-tcp",
        ],
    );
    lab.spawn_server(&lab.pod.clone(), &["0.0.0.0:9080=productpage-app"]);
    eventually("pilot-discovery is ready", || {
        lab.curl_as_root(&lab.pod, &format!("http://{PILOT}:8080/readyz"), &[])
            .0
            == 200
    });
    for file in ["route-rule-reviews-80-20.yaml", "route-rule-reviews-test-v3.yaml"] {
        lab.create_rule(&workspace().join("examples/bookinfo").join(file));
    }

    // The capture rules: the init container `pilotctl kube-inject` adds to
    // this pod (its ports, its traffic annotations), run as it would run.
    let init_args = injected_init_args();
    let apply = |lab: &Capture| {
        let out = run(lab.exec(&lab.pod).arg(agent).args(&init_args));
        assert!(
            out.status.success(),
            "pilot-agent {init_args:?}: {}",
            text(&out.stderr)
        );
    };
    apply(&lab);
    // Applying again is a no-op: the same rules.
    let before = lab.saved_rules();
    assert!(!before.is_empty());
    apply(&lab);
    assert_eq!(before, lab.saved_rules(), "applying twice changed the rules");

    // The sidecar as injected: `pilot-agent proxy sidecar` as uid 1337
    // (Envoy, its child, too), in capture mode (REDIRECT, the default).
    let config_dir = dir.path().join("proxy");
    std::fs::create_dir(&config_dir).unwrap();
    std::os::unix::fs::chown(&config_dir, Some(1337), Some(1337)).unwrap();
    lab.spawn(
        "pilot-agent proxy sidecar",
        lab.lab
            .exec_pod(&lab.pod)
            .args(["setpriv", "--reuid", "1337", "--regid", "1337", "--clear-groups"])
            .args([agent, "proxy", "sidecar", "--envoy-binary"])
            .arg(&envoy)
            .arg("--config-dir")
            .arg(&config_dir)
            .args([
                "--ip",
                POD_IP,
                "--id",
                "productpage-v1.default",
                "--namespace",
                "default",
            ])
            .args(["--label", "app=productpage", "--label", "version=v1"])
            .args(["--discovery-address", &format!("{PILOT}:15010")])
            .args([
                "--admin-port",
                "15000",
                "--status-addr",
                "127.0.0.1:15020",
                "--concurrency",
                "1",
            ])
            .env_remove("INSTANCE_IP")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("PILOT_DISCOVERY_URL"),
    );
    eventually("the agent reports its proxy ready", || {
        lab.curl_as_root(&lab.pod, "http://127.0.0.1:15020/healthz/ready", &[])
            .0
            == 200
    });

    // The jason rule is the last one pushed: once it routes, both are in.
    eventually("Envoy routes captured requests by the pushed rules", || {
        let (status, body) = lab.app_get(&format!("http://{REVIEWS_VIP}:9080/"), &[("end-user", "jason")]);
        status == 200 && body.contains("reviews-v3")
    });

    // 1. The application's plain request to the reviews VIP is captured and
    //    split 80/20 by the bookinfo rule.
    let n = 1000;
    let counts = lab.app_spread(&format!("http://{REVIEWS_VIP}:9080/"), n, &[]);
    eprintln!("80/20 rule over {n} captured requests: {counts:?}");
    let v1 = counts.get("reviews-v1").copied().unwrap_or(0);
    let v2 = counts.get("reviews-v2").copied().unwrap_or(0);
    assert_eq!(
        v1 + v2,
        n,
        "every request answered by v1 or v2 through Envoy: {counts:?}"
    );
    // 80% of 1000 is 800; the standard deviation is about 12.6, so 740..860
    // is more than four deviations each way.
    assert!(
        (740..=860).contains(&v1),
        "v1 got {v1} of {n}, expected about 800: {counts:?}"
    );

    // 2. end-user: jason goes to v3.
    let counts = lab.app_spread(
        &format!("http://{REVIEWS_VIP}:9080/"),
        50,
        &[("end-user", "jason")],
    );
    assert_eq!(
        counts.get("reviews-v3"),
        Some(&50),
        "jason's requests: {counts:?}"
    );

    // 3. The FQDN host on the captured VIP routes the same way.
    let (status, body) = lab.app_get(
        &format!("http://{REVIEWS_VIP}:9080/"),
        &[
            ("host", "reviews.default.svc.cluster.local:9080"),
            ("end-user", "jason"),
        ],
    );
    assert_eq!((status, server(&body).0.as_str()), (200, "reviews-v3"), "{body}");

    // 4. Inbound: a request from the peer to the pod's address is captured
    //    and delivered to the local application through Envoy's inbound side.
    let inbound_before = lab.envoy_stat(&format!("listener.{POD_IP}_9080.downstream_cx_total"));
    let (status, body) = lab.curl_as_root(&lab.peer, &format!("http://{POD_IP}:9080/"), &[]);
    assert_eq!(status, 200, "{body}");
    let (name, through_envoy, peer) = server(&body);
    assert_eq!(name, "productpage-app");
    assert!(
        through_envoy,
        "inbound request reached the app without Envoy: {body}"
    );
    assert_eq!(
        peer, "127.0.0.1",
        "the inbound cluster delivers over loopback: {body}"
    );
    let inbound_after = lab.envoy_stat(&format!("listener.{POD_IP}_9080.downstream_cx_total"));
    assert!(
        inbound_after > inbound_before,
        "the inbound listener saw no connection"
    );

    // 5. The application calling its own service VIP is captured, and
    //    Envoy's connection to this pod's address comes back through the
    //    inbound side (Istio's loopback handling), not straight to the app.
    let inbound_before = inbound_after;
    let (status, body) = lab.app_get(&format!("http://{PRODUCTPAGE_VIP}:9080/"), &[]);
    assert_eq!(
        (status, server(&body).0.as_str()),
        (200, "productpage-app"),
        "{body}"
    );
    let inbound_after = lab.envoy_stat(&format!("listener.{POD_IP}_9080.downstream_cx_total"));
    assert!(
        inbound_after > inbound_before,
        "the call to the own VIP did not come back through the inbound listener"
    );

    // 6. Plain 127.0.0.1 is not captured.
    let (status, body) = lab.app_get("http://127.0.0.1:9080/", &[]);
    assert_eq!(status, 200, "{body}");
    assert!(!server(&body).1, "a call to 127.0.0.1 went through Envoy: {body}");

    // 7. The excluded CIDR and the excluded port bypass Envoy.
    let (status, body) = lab.app_get("http://10.77.2.1:9080/", &[]);
    assert_eq!(
        (status, server(&body).0.as_str(), server(&body).1),
        (200, "excluded-cidr", false)
    );
    let (status, body) = lab.app_get("http://10.77.3.1:7777/", &[]);
    assert_eq!(
        (status, server(&body).0.as_str(), server(&body).1),
        (200, "excluded-port", false)
    );

    // 8. Decided behaviour for a destination outside the mesh: on a port
    //    the mesh serves as HTTP (9080) Envoy answers 404 (no route for that
    //    host); on any other port the connection passes through unchanged.
    let (status, _) = lab.app_get("http://10.77.3.1:9080/", &[]);
    assert_eq!(status, 404, "an address no service has, on a mesh HTTP port");
    let passthrough_before = lab.envoy_stat("cluster.PassthroughCluster.upstream_cx_total");
    let (status, body) = lab.app_get("http://10.77.3.1:7778/", &[]);
    assert_eq!(
        (status, server(&body).0.as_str()),
        (200, "outside-the-mesh-tcp"),
        "{body}"
    );
    assert!(
        lab.envoy_stat("cluster.PassthroughCluster.upstream_cx_total") > passthrough_before,
        "the unknown TCP destination did not pass through Envoy"
    );

    // 9. No loop: Envoy's own upstream connections hit the proxy-uid return
    //    rule and are not captured again (else the requests above could not
    //    have reached the upstreams).
    let counters = run(lab.exec(&lab.pod).args(["iptables-save", "-c", "-t", "nat"]));
    let returned = text(&counters.stdout)
        .lines()
        .find(|l| l.contains("--uid-owner 1337") && l.contains("traffic of the proxy itself"))
        .map(|l| {
            l.trim_start_matches('[')
                .split(':')
                .next()
                .unwrap_or("0")
                .parse::<u64>()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    assert!(returned > 0, "no packet of Envoy's hit the proxy-uid return rule");

    // Cleanup removes exactly ours.
    let cleanup = run(lab.exec(&lab.pod).args([agent, "iptables", "--cleanup"]));
    assert!(cleanup.status.success(), "cleanup: {}", text(&cleanup.stderr));
    assert_eq!(
        lab.saved_rules(),
        Vec::<String>::new(),
        "rules left after --cleanup"
    );
}

/// The init container's arguments that pilot-inject gives this test's pod:
/// it serves 9080; 10.77.2.0/24 and port 7777 are excluded by annotation.
fn injected_init_args() -> Vec<String> {
    let mut pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "productpage-v1", "annotations": {
            "traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.77.2.0/24",
            "traffic.sidecar.istio.io/excludeOutboundPorts": "7777",
        }},
        "spec": {"containers": [{"name": "productpage", "image": "productpage", "ports": [{"containerPort": 9080}]}]},
    });
    pilot_inject::inject_object(&mut pod, &pilot_inject::InjectTemplate::default()).unwrap();
    let init = &pod["spec"]["initContainers"][0];
    assert_eq!(init["command"], serde_json::json!(["pilot-agent"]));
    serde_json::from_value(init["args"].clone()).unwrap()
}

/// The pod and peer namespaces ([`Lab`]) and this test's requests in them.
struct Capture {
    lab: Lab,
    pod: String,
    peer: String,
}

impl Capture {
    fn new() -> Capture {
        let mut lab = Lab::new("cap", &["pod", "peer"]);
        let (a, b) = lab.veth("pod", "peer");
        let (pod, peer) = (lab.ns("pod"), lab.ns("peer"));
        lab.sh(
            &pod,
            &format!(
                "ip addr add {POD_IP}/24 dev {a} && \
                 for net in 10.77.1.0/24 10.77.2.0/24 10.77.3.0/24 10.96.0.0/16; do \
                 ip route add $net via {PEER_IP}; done"
            ),
        );
        lab.sh(
            &peer,
            &format!(
                "ip addr add {PEER_IP}/24 dev {b} && \
                 for addr in 10.77.1.1 10.77.1.2 10.77.1.3 10.77.2.1 10.77.3.1; do \
                 ip addr add $addr/32 dev lo; done"
            ),
        );
        Capture { lab, pod, peer }
    }

    fn exec(&self, ns: &str) -> Command {
        self.lab.exec(ns)
    }

    fn spawn(&mut self, name: &str, command: &mut Command) {
        self.lab.spawn(name, command);
    }

    fn spawn_server(&mut self, ns: &str, listen: &[&str]) {
        self.lab.spawn_python(ns, SERVER, listen);
    }

    fn create_rule(&self, file: &Path) {
        let yaml = std::fs::read_to_string(file).unwrap();
        let value = pilot_model::document::parse_values(&file.display().to_string(), &yaml)
            .unwrap()
            .remove(0);
        let url = format!("http://{PILOT}:8080/apis/config.istio.io/v1alpha2/namespaces/default/routerules");
        let out = run(self.exec(&self.pod).args([
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

    /// `iptables-save -t nat`'s rules of ours in the pod namespace.
    fn saved_rules(&self) -> Vec<String> {
        let out = run(self.exec(&self.pod).args(["iptables-save", "-t", "nat"]));
        pilot_agent::iptables::rules::installed(&text(&out.stdout))
    }

    fn curl(&self, ns: &str, as_app: bool, urls: &[String], headers: &[(&str, &str)]) -> Output {
        let mut command = self.exec(ns);
        if as_app {
            command.args([
                "setpriv",
                "--reuid",
                APP_UID,
                "--regid",
                APP_UID,
                "--clear-groups",
            ]);
        }
        command.args(["curl", "-sS", "--max-time", "10", "-w", "%{http_code}\n"]);
        for (name, value) in headers {
            command.args(["-H", &format!("{name}: {value}")]);
        }
        command.args(urls);
        run(&mut command)
    }

    /// GET from the application (uid 1000 in the pod): status and body.
    fn app_get(&self, url: &str, headers: &[(&str, &str)]) -> (u16, String) {
        status_and_body(self.curl(&self.pod, true, &[url.to_string()], headers))
    }

    fn curl_as_root(&self, ns: &str, url: &str, headers: &[(&str, &str)]) -> (u16, String) {
        status_and_body(self.curl(ns, false, &[url.to_string()], headers))
    }

    /// `n` GETs from the application (one curl, kept-alive connections):
    /// how many each server answered (non-200 counted by status).
    fn app_spread(&self, url: &str, n: usize, headers: &[(&str, &str)]) -> BTreeMap<String, usize> {
        let urls = vec![url.to_string(); n];
        let out = self.curl(&self.pod, true, &urls, headers);
        let mut counts = BTreeMap::new();
        let mut lines = text(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
            .into_iter();
        while let Some(line) = lines.next() {
            // A 200 is a JSON line then the status line; anything else is
            // Envoy's body (maybe empty) ending in the status.
            let key = if line.starts_with('{') {
                let status = lines.next().unwrap_or_default();
                if status == "200" {
                    server(&line).0
                } else {
                    format!("status {status}")
                }
            } else {
                format!("status {}", &line[line.len().saturating_sub(3)..])
            };
            *counts.entry(key).or_default() += 1;
        }
        counts
    }

    fn envoy_stat(&self, name: &str) -> u64 {
        let (status, body) = self.curl_as_root(
            &self.pod,
            &format!("http://127.0.0.1:15000/stats?filter=^{name}$"),
            &[],
        );
        assert_eq!(status, 200, "{body}");
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// (server name, came through Envoy, caller address) of a server's answer.
fn server(body: &str) -> (String, bool, String) {
    let value: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_default();
    (
        value["server"].as_str().unwrap_or("").to_string(),
        value["envoy"].as_bool().unwrap_or(false),
        value["peer"].as_str().unwrap_or("").to_string(),
    )
}

fn status_and_body(out: Output) -> (u16, String) {
    let stdout = text(&out.stdout);
    let trimmed = stdout.trim_end_matches('\n');
    let (body, status) = trimmed.rsplit_once('\n').unwrap_or(("", trimmed));
    let status = status.get(status.len().saturating_sub(3)..).unwrap_or("");
    (
        status.parse().unwrap_or(0),
        format!("{body}{}", text(&out.stderr)),
    )
}

/// pilot-discovery, found beside this test or built (pilot-test-support).
fn pilot_discovery_binary() -> PathBuf {
    pilot_test_support::binary(pilot_test_support::PILOT_DISCOVERY)
}
