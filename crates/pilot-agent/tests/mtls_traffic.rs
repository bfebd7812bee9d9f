//! Mutual TLS between two workloads with real traffic, in network
//! namespaces this test creates on one bridge (10.78.0.0/24):
//!
//! - `cp`, the control plane's pod: pilot-discovery, ADS and its CA on
//!   10.78.0.10:15010 over TLS (tokens), REST on its loopback, signing
//!   with a root the test made and gave in `--ca-dir`, which each agent
//!   pins (`--mesh-root-file`);
//! - `pp`, productpage's pod (10.78.0.1): the capture rules of `pilot-agent
//!   iptables`, Envoy under `pilot-agent proxy sidecar` as uid 1337 with
//!   its certificates over SDS, the application as uid 1000 (curl);
//! - `rv`, reviews' pod (10.78.0.2): the same, its application on 9080
//!   answering with the `x-forwarded-client-cert` Envoy set;
//! - `out` (10.78.0.3): a client outside the mesh, plain curl.
//!
//! Each service account has its own token, so each agent can only obtain
//! its own identity. A DestinationRule gives reviews one request per
//! upstream connection, so every mesh request is one TLS handshake and the
//! counts below are exact.
//!
//! Needs root, as `capture_iptables.rs` does; fails with that message when
//! not root, never passes vacuously.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::netns::{Lab, raw_envoy_binary, require_root, run, set_mode, text};
use pilot_ca::{CaMaterial, CaOptions, CertificateAuthority, Csr, SpiffeId, WorkloadKey};
use pilot_test_support::{PATIENCE, eventually};

const PILOT_IP: &str = "10.78.0.10";
const PRODUCTPAGE_IP: &str = "10.78.0.1";
const REVIEWS_IP: &str = "10.78.0.2";
const OUTSIDE_IP: &str = "10.78.0.3";
const REVIEWS_VIP: &str = "10.96.0.10";
const ADMIN: &str = "admin-token-0123456789abcdef";
const APP_UID: &str = "1000";
const PRODUCTPAGE_ID: &str = "spiffe://cluster.local/ns/default/sa/productpage";
const NEEDS_ROOT: &str = "the mutual TLS traffic test needs root: network namespaces, iptables, \
    Envoy as uid 1337 (CI runs as root; elsewhere: cargo nextest run -p pilot-agent -E 'not binary(mtls_traffic)')";

/// Answers every GET with one JSON line: the server's name and the
/// `x-forwarded-client-cert` header Envoy set (the caller's identity).
const SERVER: &str = r#"
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = (json.dumps({"server": sys.argv[2], "xfcc": self.headers.get("x-forwarded-client-cert", "")}) + "\n").encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
s = http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H)
print("ready", flush=True)
s.serve_forever()
"#;

const SERVICES: &str = r#"
services:
- hostname: reviews.default.svc.cluster.local
  address: 10.96.0.10
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances:
  - {address: 10.78.0.2, port: 9080, serviceAccount: reviews,
     labels: {app: reviews, security.istio.io/tlsMode: istio}}
- hostname: productpage.default.svc.cluster.local
  address: 10.96.0.20
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances:
  - {address: 10.78.0.1, port: 9080, serviceAccount: productpage,
     labels: {app: productpage, security.istio.io/tlsMode: istio}}
"#;

#[test]
fn workloads_talk_mutual_tls_and_strict_refuses_plaintext() {
    require_root(NEEDS_ROOT);
    let mesh = Mesh::start(&[]);
    let n = 50;

    // 1. PERMISSIVE (no policy): each of productpage's calls to the reviews
    //    VIP is one mutual TLS handshake at reviews' Envoy, and reviews'
    //    application sees productpage's identity.
    let before = mesh.handshakes();
    let answered = (0..n)
        .filter(|_| {
            let (status, body) = mesh.mesh_get();
            status == 200 && xfcc(&body).contains(&format!("URI={PRODUCTPAGE_ID}"))
        })
        .count();
    let handshakes = mesh.handshakes() - before;
    eprintln!(
        "PERMISSIVE: {answered} of {n} mesh requests answered over mutual TLS, {handshakes} handshakes"
    );
    assert_eq!((answered, handshakes), (n, n as u64));

    //    A plaintext client outside the mesh is served, with no identity.
    let outside_url = format!("http://{REVIEWS_IP}:9080/");
    let served = (0..n)
        .filter(|_| {
            let (status, body) = mesh.outside(&[&outside_url]);
            status == 200 && xfcc(&body).is_empty()
        })
        .count();
    eprintln!("PERMISSIVE: {served} of {n} plaintext requests from outside the mesh served");
    assert_eq!(served, n);

    // 2. STRICT for the whole mesh (through the REST API): once pushed, the
    //    outside client is refused at the handshake, every one of its
    //    requests; the mesh's traffic goes on, every request answered.
    mesh.create(
        "security.istio.io/v1/namespaces/istio-system/peerauthentications",
        serde_json::json!({
            "apiVersion": "security.istio.io/v1",
            "kind": "PeerAuthentication",
            "metadata": {"name": "default", "namespace": "istio-system"},
            "spec": {"mtls": {"mode": "STRICT"}},
        }),
    );
    eventually("STRICT is pushed to reviews' Envoy", || {
        mesh.outside(&[&outside_url]).0 == 0
    });
    let refused = (0..n)
        .filter(|_| {
            let (status, body) = mesh.outside(&[&outside_url]);
            assert!(!body.contains("\"server\""), "the application answered: {body}");
            status == 0
        })
        .count();
    let before = mesh.handshakes();
    let answered = (0..n)
        .filter(|_| {
            let (status, body) = mesh.mesh_get();
            status == 200 && xfcc(&body).contains(&format!("URI={PRODUCTPAGE_ID}"))
        })
        .count();
    let handshakes = mesh.handshakes() - before;
    eprintln!(
        "STRICT: {refused} of {n} plaintext requests refused; {answered} of {n} mesh requests answered, \
         {handshakes} handshakes"
    );
    assert_eq!((refused, answered, handshakes), (n, n, n as u64));

    // 3. Certificates the STRICT Envoy must refuse: one from another root,
    //    one of the mesh's root that has expired; the same client with a
    //    valid certificate of the mesh's root is served (so the refusals
    //    are the certificates', not the client's).
    let https = format!("https://{REVIEWS_IP}:9080/");
    let tester = SpiffeId::new("cluster.local", "default", "tester").unwrap();
    let client = |name: &str, (cert, key): (String, String)| {
        let (cert_path, key_path) = (
            mesh.dir.path().join(format!("{name}.pem")),
            mesh.dir.path().join(format!("{name}.key")),
        );
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        let (cert_path, key_path) = (cert_path.display().to_string(), key_path.display().to_string());
        mesh.outside(&["-k", "--cert", &cert_path, "--key", &key_path, &https])
    };
    let other_root = pilot_ca::generate_root("cluster.local", Duration::from_secs(3600)).unwrap();
    let verify_failures = || mesh.reviews_stat(&format!("listener.{REVIEWS_IP}_9080.ssl.fail_verify_error"));
    let failures_before = verify_failures();
    let (status, body) = client("other-root", signed(&other_root, &tester));
    assert_eq!(status, 0, "a certificate of another root was accepted: {body}");
    let (status, body) = client("expired", expired(&mesh.ca, &tester));
    assert_eq!(status, 0, "an expired certificate was accepted: {body}");
    assert_eq!(
        verify_failures() - failures_before,
        2,
        "reviews' Envoy counts both as failed verifications"
    );
    let (status, body) = client("valid", signed(&mesh.ca, &tester));
    assert_eq!(status, 200, "a valid certificate of the mesh's root: {body}");
    assert!(
        xfcc(&body).contains("URI=spiffe://cluster.local/ns/default/sa/tester"),
        "{body}"
    );
}

#[test]
fn certificates_rotate_under_load_without_failed_requests() {
    require_root(NEEDS_ROOT);
    // 60 s certificates, renewed at half their life.
    let mesh = Mesh::start(&["--secret-ttl", "60s"]);
    let versions = |ns: &str| mesh.lab.envoy_stat(ns, "sds.default.update_success");
    let first = (versions(&mesh.pp), versions(&mesh.rv));

    // Continuous load from productpage's application until both Envoys
    // have taken two renewed certificates and the renewed client
    // certificates were seen on the wire (XFCC's hash of it changes).
    let stop = AtomicBool::new(false);
    let (sent, failed, hashes) = std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            let (mut sent, mut failed, mut hashes) = (0usize, Vec::new(), BTreeSet::new());
            while !stop.load(Ordering::SeqCst) {
                for (status, body) in mesh.mesh_batch(20) {
                    sent += 1;
                    match field(&xfcc(&body), "Hash") {
                        Some(hash) if status == 200 => {
                            hashes.insert(hash);
                        }
                        _ => failed.push(format!("{status} {body}")),
                    }
                }
            }
            (sent, failed, hashes)
        });
        let started = Instant::now();
        let deadline = PATIENCE * 3;
        while versions(&mesh.pp) < first.0 + 2 || versions(&mesh.rv) < first.1 + 2 {
            assert!(
                started.elapsed() < deadline && !load.is_finished(),
                "two rotations not seen within {deadline:?}: SDS versions {:?} -> {:?}",
                first,
                (versions(&mesh.pp), versions(&mesh.rv))
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // Traffic goes on over the last certificates for a while.
        std::thread::sleep(Duration::from_secs(3));
        stop.store(true, Ordering::SeqCst);
        load.join().unwrap()
    });
    let last = (versions(&mesh.pp), versions(&mesh.rv));
    eprintln!(
        "rotation: {sent} requests sent, {} failed; SDS versions of `default` productpage {} -> {}, reviews {} -> {}; \
         {} client certificates seen at reviews",
        failed.len(),
        first.0,
        last.0,
        first.1,
        last.1,
        hashes.len()
    );
    assert!(failed.is_empty(), "failed requests during rotation: {failed:?}");
    assert!(
        hashes.len() >= 3,
        "the first and two renewed client certificates were used: {hashes:?}"
    );
}

#[test]
fn the_mesh_root_renews_under_load_without_failed_requests() {
    require_root(NEEDS_ROOT);
    // A root of three minutes renewed when 135 s are left: a new root
    // about every 45 s, served with the old one and the cross-certificate
    // until the old one expires. Workload certificates of 20 s, renewed
    // every 10 s; the agents trust the first root on first use and pin
    // each new one through its cross-certificate.
    let mesh = Mesh::start_with(
        &["--secret-ttl", "20s"],
        Root::Renewed {
            ttl: "3m",
            renew_before: "135s",
        },
    );
    let first = (mesh.envoy_roots(&mesh.pp), mesh.envoy_roots(&mesh.rv));
    assert!(
        !first.0.is_empty() && !first.1.is_empty(),
        "no root served: {first:?}"
    );

    // Continuous load from productpage's application until both Envoys
    // hold a root neither held at first, and for a while after.
    let stop = AtomicBool::new(false);
    let (sent, failed) = std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            let (mut sent, mut failed) = (0usize, Vec::new());
            while !stop.load(Ordering::SeqCst) {
                for (status, body) in mesh.mesh_batch(20) {
                    sent += 1;
                    if status != 200 || !xfcc(&body).contains(&format!("URI={PRODUCTPAGE_ID}")) {
                        failed.push(format!("{status} {body}"));
                    }
                }
            }
            (sent, failed)
        });
        let renewed = |ns: &str, first: &BTreeSet<String>| mesh.envoy_roots(ns).difference(first).count() > 0;
        let started = Instant::now();
        let deadline = PATIENCE * 4;
        while !(renewed(&mesh.pp, &first.0) && renewed(&mesh.rv, &first.1)) {
            assert!(
                started.elapsed() < deadline && !load.is_finished(),
                "no new root served within {deadline:?}: roots {first:?} -> {:?}",
                (mesh.envoy_roots(&mesh.pp), mesh.envoy_roots(&mesh.rv))
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        // Traffic goes on while the certificates of the new root spread
        // (two renewals of each workload certificate).
        std::thread::sleep(Duration::from_secs(20));
        stop.store(true, Ordering::SeqCst);
        load.join().unwrap()
    });
    let last = (mesh.envoy_roots(&mesh.pp), mesh.envoy_roots(&mesh.rv));
    eprintln!(
        "root rotation: {sent} requests sent, {} failed; roots held by productpage {:?} -> {:?}, reviews {:?} -> {:?}",
        failed.len(),
        first.0,
        last.0,
        first.1,
        last.1
    );
    assert!(
        failed.is_empty(),
        "failed requests during the root rotation: {failed:?}"
    );
    assert!(sent > 0);
    // The agents pinned the new root (trust on first use, then the
    // cross-certificate): their stores hold more than the first root.
    for name in ["productpage", "reviews"] {
        let store = std::fs::read_to_string(mesh.dir.path().join(name).join("mesh-roots.pem")).unwrap();
        assert!(
            store.matches("BEGIN CERTIFICATE").count() >= 2,
            "{name}'s pinned roots: {store}"
        );
    }
}

/// The four pods and what runs in them, every sidecar ready and the
/// DestinationRule pushed.
struct Mesh {
    lab: Lab,
    dir: tempfile::TempDir,
    ca: CaMaterial,
    /// Whether the agents pin the test's root (`Root::Dir`).
    pin_root: bool,
    cp: String,
    pp: String,
    rv: String,
    out: String,
}

/// How pilot-discovery keeps its root.
#[derive(Clone, Copy)]
enum Root {
    /// The test's root in `--ca-dir`, pinned by each agent
    /// (`--mesh-root-file`).
    Dir,
    /// A self-signed root kept in memory, of this lifetime, renewed when
    /// less than `renew_before` is left (checked every second); the
    /// agents trust on first use and follow the rotations through the
    /// cross-certificates.
    Renewed {
        ttl: &'static str,
        renew_before: &'static str,
    },
}

impl Mesh {
    fn start(agent_args: &[&str]) -> Mesh {
        Mesh::start_with(agent_args, Root::Dir)
    }

    fn start_with(agent_args: &[&str], root: Root) -> Mesh {
        let dir = tempfile::tempdir().unwrap();
        set_mode(dir.path(), 0o755);
        let mut lab = Lab::new("mtls", &["hub", "cp", "pp", "rv", "out"]);
        let devices = lab.bridge(
            "hub",
            &[
                ("cp", &format!("{PILOT_IP}/24")),
                ("pp", &format!("{PRODUCTPAGE_IP}/24")),
                ("rv", &format!("{REVIEWS_IP}/24")),
                ("out", &format!("{OUTSIDE_IP}/24")),
            ],
        );
        let (cp, pp, rv, out) = (lab.ns("cp"), lab.ns("pp"), lab.ns("rv"), lab.ns("out"));
        // The service addresses are on the segment too (captured before
        // they would leave a pod).
        for (ns, device) in [(&pp, &devices[1]), (&rv, &devices[2])] {
            lab.sh(ns, &format!("ip route add 10.96.0.0/16 dev {device}"));
        }

        // The operator's CA in Istio's `cacerts` layout.
        let ca = pilot_ca::generate_root("cluster.local", Duration::from_secs(24 * 3600)).unwrap();
        let ca_dir = dir.path().join("cacerts");
        std::fs::create_dir(&ca_dir).unwrap();
        std::fs::write(ca_dir.join("ca-cert.pem"), &ca.cert_pem).unwrap();
        std::fs::write(ca_dir.join("ca-key.pem"), &ca.key_pem).unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::write(
            &tokens,
            format!(
                "{ADMIN} rw\nproductpage-token-0123456789 xds productpage namespace=default serviceAccount=productpage\n\
                 reviews-token-0123456789abcd xds reviews namespace=default serviceAccount=reviews\n"
            ),
        )
        .unwrap();
        let services = dir.path().join("services.yaml");
        std::fs::write(&services, SERVICES).unwrap();
        // ADS and the CA over TLS (server.pem names localhost), and the
        // mesh root pinned by each agent.
        common::certificates(dir.path());
        std::fs::write(dir.path().join("mesh-root.pem"), &ca.cert_pem).unwrap();
        for file in ["ca.pem", "mesh-root.pem"] {
            set_mode(&dir.path().join(file), 0o644);
        }
        lab.spawn(
            "pilot-discovery",
            lab.exec(&cp)
                .arg(pilot_test_support::binary(pilot_test_support::PILOT_DISCOVERY))
                .args(["--listen", "127.0.0.1:8080"])
                .args(["--xds-listen", &format!("{PILOT_IP}:15010")])
                .arg("--token-file")
                .arg(&tokens)
                .arg("--services")
                .arg(&services)
                .args(match root {
                    Root::Dir => vec!["--ca-dir".to_string(), ca_dir.display().to_string()],
                    Root::Renewed { ttl, renew_before } => [
                        "--ca-root-ttl",
                        ttl,
                        "--ca-root-renew-before",
                        renew_before,
                        "--ca-root-check-interval",
                        "1s",
                    ]
                    .map(String::from)
                    .to_vec(),
                })
                .arg("--xds-tls-cert")
                .arg(dir.path().join("server.pem"))
                .arg("--xds-tls-key")
                .arg(dir.path().join("server-key.pem"))
                .args(["--log-level", "warn"]),
        );
        lab.spawn_python(&rv, SERVER, &["9080", "reviews-app"]);
        eventually("pilot-discovery is ready", || {
            lab.curl(&cp, None, &["http://127.0.0.1:8080/readyz"]).0 == 200
        });
        let mesh = Mesh {
            lab,
            dir,
            ca,
            pin_root: matches!(root, Root::Dir),
            cp,
            pp,
            rv,
            out,
        };
        // One request per upstream connection to reviews: one handshake
        // per request.
        mesh.create(
            "networking.istio.io/v1/namespaces/default/destinationrules",
            serde_json::json!({
                "apiVersion": "networking.istio.io/v1",
                "kind": "DestinationRule",
                "metadata": {"name": "reviews", "namespace": "default"},
                "spec": {
                    "host": "reviews.default.svc.cluster.local",
                    "trafficPolicy": {"connectionPool": {"http": {"maxRequestsPerConnection": 1}}},
                },
            }),
        );
        let mut mesh = mesh;
        for (ns, ip, name, token) in [
            (
                mesh.pp.clone(),
                PRODUCTPAGE_IP,
                "productpage",
                "productpage-token-0123456789",
            ),
            (
                mesh.rv.clone(),
                REVIEWS_IP,
                "reviews",
                "reviews-token-0123456789abcd",
            ),
        ] {
            mesh.sidecar(&ns, ip, name, token, agent_args);
        }
        for ns in [&mesh.pp, &mesh.rv] {
            eventually("the agent reports its proxy ready", || {
                mesh.lab
                    .curl(ns, None, &["http://127.0.0.1:15020/healthz/ready"])
                    .0
                    == 200
            });
        }
        // Ready and the DestinationRule in: two requests, two handshakes.
        eventually(
            "productpage reaches reviews over mutual TLS, a connection a request",
            || {
                let before = mesh.handshakes();
                let ok = (0..2).all(|_| {
                    let (status, body) = mesh.mesh_get();
                    status == 200 && xfcc(&body).contains(&format!("URI={PRODUCTPAGE_ID}"))
                });
                ok && mesh.handshakes() == before + 2
            },
        );
        mesh
    }

    /// The capture rules and `pilot-agent proxy sidecar` (uid 1337) in
    /// `ns`, with the token of service account `name`.
    fn sidecar(&mut self, ns: &str, ip: &str, name: &str, token: &str, agent_args: &[&str]) {
        let agent = common::agent_binary();
        let out = run(self
            .lab
            .exec(ns)
            .arg(&agent)
            .args(["iptables", "--inbound-ports", "9080"]));
        assert!(out.status.success(), "iptables: {}", text(&out.stderr));
        let home = self.dir.path().join(name);
        std::fs::create_dir(&home).unwrap();
        let token_file = home.join("token");
        std::fs::write(&token_file, token).unwrap();
        for path in [&home, &token_file] {
            std::os::unix::fs::chown(path, Some(1337), Some(1337)).unwrap();
        }
        let mut command = self.lab.exec_pod(ns);
        command
            .args(["setpriv", "--reuid", "1337", "--regid", "1337", "--clear-groups"])
            .arg(&agent)
            .args(["proxy", "sidecar", "--envoy-binary"])
            .arg(raw_envoy_binary())
            .arg("--config-dir")
            .arg(&home)
            .args([
                "--ip",
                ip,
                "--id",
                &format!("{name}-v1.default"),
                "--namespace",
                "default",
            ])
            .args(["--service-account", name, "--label", &format!("app={name}")])
            .args(["--discovery-address", &format!("{PILOT_IP}:15010")])
            .arg("--discovery-token-file")
            .arg(&token_file)
            .arg("--discovery-ca-file")
            .arg(self.dir.path().join("ca.pem"))
            .args(["--discovery-server-name", "localhost"])
            .args(if self.pin_root {
                vec![
                    "--mesh-root-file".to_string(),
                    self.dir.path().join("mesh-root.pem").display().to_string(),
                ]
            } else {
                Vec::new()
            })
            .arg("--sds-socket")
            .arg(home.join("sds.sock"))
            .args(["--admin-port", "15000", "--status-addr", "127.0.0.1:15020"])
            .args(["--concurrency", "1"])
            .args(agent_args)
            .env_remove("INSTANCE_IP")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("PILOT_DISCOVERY_URL");
        self.lab.spawn(&format!("{name} sidecar"), &mut command);
    }

    /// Creates `object` at `/apis/<path>` through pilot-discovery's REST
    /// API (201 expected).
    fn create(&self, path: &str, object: serde_json::Value) {
        let (status, body) = self.lab.curl(
            &self.cp,
            None,
            &[
                "-H",
                "content-type: application/json",
                "-H",
                &format!("authorization: Bearer {ADMIN}"),
                "--data-binary",
                &object.to_string(),
                &format!("http://127.0.0.1:8080/apis/{path}"),
            ],
        );
        assert_eq!(status, 201, "creating {path}: {body}");
    }

    /// GET the reviews VIP from productpage's application.
    fn mesh_get(&self) -> (u16, String) {
        self.lab
            .curl(&self.pp, Some(APP_UID), &[&format!("http://{REVIEWS_VIP}:9080/")])
    }

    /// `n` GETs of the reviews VIP from productpage's application in one
    /// curl: each one's status and body.
    fn mesh_batch(&self, n: usize) -> Vec<(u16, String)> {
        let mut command = self.lab.exec(&self.pp);
        command
            .args([
                "setpriv",
                "--reuid",
                APP_UID,
                "--regid",
                APP_UID,
                "--clear-groups",
            ])
            .args(["curl", "-sS", "--max-time", "10", "-w", "%{http_code}\n"]);
        for _ in 0..n {
            command.arg(format!("http://{REVIEWS_VIP}:9080/"));
        }
        let out = run(&mut command);
        let stdout = text(&out.stdout);
        let mut answers = Vec::new();
        let mut lines = stdout.lines();
        // A 200 is a JSON line then its status line; anything else is the
        // status alone (curl printed why on stderr).
        while let Some(line) = lines.next() {
            if line.starts_with('{') {
                let status = lines.next().unwrap_or_default();
                answers.push((status.parse().unwrap_or(0), line.to_string()));
            } else {
                let status = line.get(line.len().saturating_sub(3)..).unwrap_or("");
                answers.push((
                    status.parse().unwrap_or(0),
                    format!("{line} {}", text(&out.stderr)),
                ));
            }
        }
        while answers.len() < n {
            answers.push((0, format!("no answer: {}", text(&out.stderr))));
        }
        answers
    }

    /// curl from outside the mesh, as root.
    fn outside(&self, args: &[&str]) -> (u16, String) {
        self.lab.curl(&self.out, None, args)
    }

    fn reviews_stat(&self, name: &str) -> u64 {
        self.lab.envoy_stat(&self.rv, name)
    }

    /// TLS handshakes completed at reviews' inbound listener.
    /// The serial numbers of the CA certificates (the trust bundle)
    /// `ns`'s Envoy holds (`/certs`).
    fn envoy_roots(&self, ns: &str) -> BTreeSet<String> {
        let (status, body) = self.lab.curl(ns, None, &["http://127.0.0.1:15000/certs"]);
        assert_eq!(status, 200, "{body}");
        let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        value["certificates"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|entry| entry["ca_cert"].as_array().cloned().unwrap_or_default())
            .filter_map(|cert| cert["serial_number"].as_str().map(String::from))
            .collect()
    }

    fn handshakes(&self) -> u64 {
        self.reviews_stat(&format!("listener.{REVIEWS_IP}_9080.ssl.handshake"))
    }
}

/// The `x-forwarded-client-cert` the application reported.
fn xfcc(body: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(body.trim()).unwrap_or_default();
    value["xfcc"].as_str().unwrap_or("").to_string()
}

/// One `KEY=value` of an XFCC element.
fn field(xfcc: &str, key: &str) -> Option<String> {
    xfcc.split(';')
        .find_map(|part| part.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
}

/// A certificate for `identity` signed by `ca`, valid for an hour, and
/// its key.
fn signed(ca: &CaMaterial, identity: &SpiffeId) -> (String, String) {
    let key = WorkloadKey::generate().unwrap();
    let csr = Csr::from_pem(&key.csr_pem(identity).unwrap()).unwrap();
    let authority = CertificateAuthority::new(ca, CaOptions::new("cluster.local")).unwrap();
    let issued = authority
        .sign(&csr, identity, Some(Duration::from_secs(3600)))
        .unwrap();
    (issued.cert_chain[0].clone(), key.private_key_pem())
}

/// A certificate for `identity` signed by `ca` that expired an hour ago,
/// and its key.
fn expired(ca: &CaMaterial, identity: &SpiffeId) -> (String, String) {
    let issuer =
        rcgen::Issuer::from_ca_cert_pem(&ca.cert_pem, rcgen::KeyPair::from_pem(&ca.key_pem).unwrap())
            .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.subject_alt_names = vec![rcgen::SanType::URI(identity.uri().as_str().try_into().unwrap())];
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(2);
    params.not_after = now - time::Duration::hours(1);
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}
