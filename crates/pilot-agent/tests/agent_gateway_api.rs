//! The Gateway API's Gateways served by `pilot-agent proxy router` (a
//! real Envoy) with real traffic: conformance cases of the Gateway
//! profile (HTTPRoute: simple same-namespace, cross-namespace, reference
//! grant, invalid cross-namespace backend, hostname intersection,
//! listener hostname matching, matching, exact path, method and query
//! parameter matching, matching across routes, retry (experimental);
//! TCPRoute: reference grant,
//! attach to every listener; TLSRoute: passthrough by SNI), their
//! manifests read from the
//! corpus `gateway-api` (`../shared/corpora/`), to upstreams that answer
//! with their name (the TLS one with its own certificate). The
//! expectation tables are those the upstream conformance tests state
//! (written here from them: request host and path, the backend that
//! answers or the status).
//!
//! The conformance's shared Gateways (its base manifests, not in the
//! corpus) are written here as the base writes them, with one difference:
//! `backend-namespaces` admits every namespace (`from: All`) where the
//! base selects namespaces by a label of the conformance's (pilot reads no
//! Namespace objects: a `Selector` admits namespaces by
//! `kubernetes.io/metadata.name` only). Each Gateway is served by a router of its
//! own (labelled with the Gateway's name, in its namespace), its listener
//! ports moved to free ones.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use common::tls::curl_https;
use common::{Agent, Discovery, eventually, free_port};
use pilot_test_support::certs::Pki;
use pilot_test_support::{ProcessGuard, openssl_server};
use serde_json::Value;

const INFRA: &str = "gateway-conformance-infra";
const WEB: &str = "gateway-conformance-web-backend";
const APP: &str = "gateway-conformance-app-backend";

/// pilot's GatewayClass under the conformance's name, and the shared
/// Gateways of the conformance's base.
const BASE: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gateway-conformance}
spec: {controllerName: pilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: same-namespace, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: gateway-conformance
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: backend-namespaces, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: gateway-conformance
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
";

/// The conformance's backends: (namespace, Service) answering with the
/// Service's name.
const BACKENDS: [(&str, &str); 6] = [
    (INFRA, "infra-backend-v1"),
    (INFRA, "infra-backend-v2"),
    (INFRA, "infra-backend-v3"),
    (WEB, "web-backend"),
    (APP, "app-backend-v1"),
    (APP, "app-backend-v2"),
];

/// The conformance's stream backends: (namespace, Service, port). A
/// `tcp-` Service answers each connection with its name and closes it;
/// `tcp-backend` speaks TLS with a certificate for `abc.example.com`.
const STREAM_BACKENDS: [(&str, &str, u16); 6] = [
    (INFRA, "tcp-backend", 8443),
    (INFRA, "tcp-echo-attach-all", 3000),
    (WEB, "tcp-reference-grant-backend", 3000),
    (INFRA, "tcp-backend-v1", 3000),
    (INFRA, "tcp-backend-v2", 3000),
    (INFRA, "tcp-backend-v3", 3000),
];

/// The conformance's TLS backends in its infra namespace (port 443),
/// each with a certificate for `*.example.com` whose subject is its name.
const TLS_BACKENDS: [&str; 2] = ["tls-backend", "tls-backend-2"];

/// pilot-discovery with the conformance's backends, the base Gateways
/// and the corpus manifests `names`, and a router per Gateway.
struct Conformance {
    discovery: Discovery,
    /// Per Gateway name and listener port as written, the port the
    /// listener serves on.
    ports: BTreeMap<(String, u16), u16>,
    /// Per Gateway name, its router.
    routers: BTreeMap<String, Agent>,
    /// The CA that signed `tcp-backend`'s certificate.
    ca: PathBuf,
    _tls_backends: Vec<ProcessGuard>,
    dir: tempfile::TempDir,
}

impl Conformance {
    /// Routers are started for the Gateways `served` only. `None` when
    /// the corpus is not there (a loud skip, a failure under `CI=true`).
    fn with(names: &[&str], served: &[&str]) -> Option<Conformance> {
        Conformance::with_upstreams(names, served, &common::named_upstream)
    }

    /// [`Conformance::with`], the HTTP backends' upstreams started by
    /// `upstream` (given the Service's name; its port).
    fn with_upstreams(
        names: &[&str],
        served: &[&str],
        upstream: &dyn Fn(&'static str) -> u16,
    ) -> Option<Conformance> {
        let corpus = pilot_test_support::corpus("gateway-api")?;
        let dir = tempfile::tempdir().unwrap();
        let mut services = String::from("services:\n");
        let mut service = |namespace: &str, name: &str, port: u16, protocol: &str, upstream: u16| {
            services.push_str(&format!(
                "- hostname: {name}.{namespace}.svc.cluster.local\n  ports: [{{name: {}, port: {port}, protocol: {protocol}}}]\n  \
                 instances:\n  - {{address: 127.0.0.1, port: {upstream}, labels: {{app: {name}}}}}\n",
                protocol.to_ascii_lowercase()
            ));
        };
        for (namespace, name) in BACKENDS {
            service(namespace, name, 8080, "HTTP", upstream(name));
        }
        let pki = Pki::new(dir.path());
        let ca = pki.ca("ca").unwrap();
        let certificate = pki
            .leaf(
                "abc",
                "ca",
                "subjectAltName=DNS:abc.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
            )
            .unwrap();
        let (tls_port, tls_backend) = openssl_server(&certificate, None);
        let mut tls_backends = vec![tls_backend];
        for (namespace, name, port) in STREAM_BACKENDS {
            let upstream = if name == "tcp-backend" {
                tls_port
            } else {
                stream_upstream(name)
            };
            service(namespace, name, port, "TCP", upstream);
        }
        // TLS backends known by their certificate's subject.
        for name in TLS_BACKENDS {
            let certificate = pki
                .leaf(
                    name,
                    "ca",
                    "subjectAltName=DNS:*.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
                )
                .unwrap();
            let (port, backend) = openssl_server(&certificate, None);
            tls_backends.push(backend);
            service(INFRA, name, 443, "TCP", port);
        }
        let services_file = dir.path().join("services.yaml");
        std::fs::write(&services_file, services).unwrap();
        let discovery = Discovery::start(&["--services", services_file.to_str().unwrap()]);

        let mut documents: Vec<String> = split(BASE);
        for name in names {
            let file = corpus.join(format!("gwapi_conformance.tests.{name}.yaml"));
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            documents.extend(split(&text));
        }
        // Each Gateway's listener ports moved to free ones of its own.
        let mut ports: BTreeMap<(String, u16), u16> = BTreeMap::new();
        for document in &mut documents {
            if let Some(gateway) = gateway_name(document) {
                *document = document
                    .lines()
                    .map(|line| move_port(line, &gateway, &mut ports))
                    .collect::<Vec<_>>()
                    .join("\n");
            }
        }
        // A route's parentRef port names a listener's port as written.
        for document in &mut documents {
            if gateway_name(document).is_none() {
                *document = move_parent_ports(document, &ports);
            }
        }
        apply(&discovery, dir.path(), &documents.join("\n---\n"));
        let routers = served
            .iter()
            .enumerate()
            .map(|(i, gateway)| {
                let agent = Agent::start(
                    "router",
                    &[
                        "--ip",
                        &format!("10.0.1.{}", i + 1),
                        "--id",
                        &format!("{gateway}-router.{INFRA}"),
                        "--namespace",
                        INFRA,
                        "--label",
                        &format!("gateway.networking.k8s.io/gateway-name={gateway}"),
                        "--discovery-address",
                        &format!("127.0.0.1:{}", discovery.xds_port),
                    ],
                );
                (gateway.to_string(), agent)
            })
            .collect();
        Some(Conformance {
            discovery,
            ports,
            routers,
            ca: ca.cert,
            _tls_backends: tls_backends,
            dir,
        })
    }

    /// Applies the manifest `text` (its ports as written).
    fn apply(&self, text: &str) {
        apply(
            &self.discovery,
            self.dir.path(),
            &move_parent_ports(text, &self.ports),
        );
    }

    /// Each listener's `attachedRoutes` of Gateway `gateway`, once its
    /// status says.
    fn attached_routes(&self, gateway: &str) -> Vec<Value> {
        let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/{gateway}");
        let mut attached = Vec::new();
        eventually(&format!("the status of Gateway {gateway}'s listeners"), || {
            let gateway = self.object(&path);
            attached = gateway["status"]["listeners"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|l| l["attachedRoutes"].clone())
                .collect();
            !attached.is_empty()
        });
        attached
    }

    /// Waits until `gateway` answers every case as expected, then checks
    /// each once more: `(host, path, backend or "", status)`.
    fn expect(&self, gateway: &str, cases: &[(&str, &str, &str, u16)]) {
        self.expect_on(gateway, 80, cases);
    }

    /// [`expect`](Self::expect) on `gateway`'s listener written on
    /// `written`.
    fn expect_on(&self, gateway: &str, written: u16, cases: &[(&str, &str, &str, u16)]) {
        let port = self.port(gateway, written);
        let get = |host: &str, path: &str| match common::get_by_length(port, host, path) {
            (200, body) => (200, body),
            (status, _) => (status, String::new()),
        };
        let answered = |case: &(&str, &str, &str, u16)| {
            let (host, path, backend, status) = *case;
            get(host, path) == (status, backend.to_string())
        };
        eventually(&format!("{gateway} to route as the conformance expects"), || {
            cases.iter().all(answered)
        });
        for case in cases {
            let (host, path, _, _) = case;
            assert!(
                answered(case),
                "{host}{path}: {:?}, expected {case:?}\n{}",
                get(host, path),
                self.routers[gateway].log()
            );
        }
    }

    /// Waits until `gateway` answers every request as expected, then
    /// checks each once more.
    fn expect_requests(&self, gateway: &str, cases: &[Request]) {
        let port = self.port(gateway, 80);
        let answered = |case: &Request| {
            let (status, body) = common::request_by_length(port, case.method, HOST, case.path, &case.headers);
            let backend = if status == 200 { body } else { String::new() };
            (status, backend) == (case.status, case.backend.to_string())
        };
        eventually(&format!("{gateway} to route as the conformance expects"), || {
            cases.iter().all(answered)
        });
        for case in cases {
            assert!(
                answered(case),
                "{case:?}: {:?}\n{}",
                common::request_by_length(port, case.method, HOST, case.path, &case.headers),
                self.routers[gateway].log()
            );
        }
    }

    /// Where Gateway `gateway`'s listener written on port `written`
    /// serves.
    fn port(&self, gateway: &str, written: u16) -> u16 {
        self.ports[&(gateway.to_string(), written)]
    }

    /// What a connection to `gateway`'s listener written on `written`
    /// reads before it closes.
    fn stream(&self, gateway: &str, written: u16) -> String {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port(gateway, written))) else {
            return String::new();
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut read = String::new();
        let _ = stream.read_to_string(&mut read);
        read
    }

    /// An HTTPS GET through `gateway`'s listener written on `written`
    /// with SNI `host`, verifying the certificate against the test CA:
    /// whether it succeeded.
    fn https(&self, gateway: &str, written: u16, host: &str) -> bool {
        curl_https(host, self.port(gateway, written), &self.ca, &[]).0
    }

    /// The TLS backend that answers a connection through `gateway`'s
    /// listener written on `written` with SNI `host`, its certificate
    /// verified against the test CA (`None` when none does).
    fn tls_backend(&self, gateway: &str, written: u16, host: &str) -> Option<String> {
        let port = self.port(gateway, written);
        let out = std::process::Command::new("curl")
            .args(["-sS", "-v", "-o", "/dev/null", "--max-time", "10", "--resolve"])
            .arg(format!("{host}:{port}:127.0.0.1"))
            .arg("--cacert")
            .arg(&self.ca)
            .arg(format!("https://{host}:{port}/"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return None;
        }
        said.lines()
            .find_map(|l| l.trim().strip_prefix("*  subject: CN="))
            .or_else(|| {
                said.lines()
                    .find_map(|l| l.split_once("subject: CN=").map(|(_, n)| n))
            })
            .map(|n| n.trim().to_string())
    }

    /// The object at REST `path` (`/apis/gateway.networking.k8s.io/...`).
    fn object(&self, path: &str) -> Value {
        let (code, body) = pilot_test_support::Discovery::get(&self.discovery, path);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// `(type, status, reason)` of a route's conditions for its first
    /// parent, once written.
    fn route_conditions(&self, namespace: &str, name: &str) -> Vec<(String, String, String)> {
        self.route_conditions_of("httproutes", namespace, name)
    }

    /// [`route_conditions`](Self::route_conditions) of a route of
    /// `plural`.
    fn route_conditions_of(
        &self,
        plural: &str,
        namespace: &str,
        name: &str,
    ) -> Vec<(String, String, String)> {
        let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/{plural}/{name}");
        let mut said = Vec::new();
        eventually(&format!("the status of HTTPRoute {namespace}/{name}"), || {
            let route = self.object(&path);
            said = triples(&route["status"]["parents"][0]["conditions"]);
            said.len() == 2
        });
        said
    }
}

/// The host the matching cases send (the routes name no hostname).
const HOST: &str = "example.com";

/// A request of a matching case and what answers it: the backend (200),
/// or the status with no backend.
#[derive(Debug)]
struct Request {
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    backend: &'static str,
    status: u16,
}

/// `GET path`, expected to reach `backend`.
fn to(path: &'static str, backend: &'static str) -> Request {
    Request {
        method: "GET",
        path,
        headers: Vec::new(),
        backend,
        status: 200,
    }
}

/// `GET path`, expected to be answered `status` by the router.
fn answered(path: &'static str, status: u16) -> Request {
    Request {
        status,
        backend: "",
        ..to(path, "")
    }
}

impl Request {
    fn method(mut self, method: &'static str) -> Self {
        self.method = method;
        self
    }

    fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
}

fn triples(conditions: &Value) -> Vec<(String, String, String)> {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != "Reconciled")
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or_default().to_string();
            (text("type"), text("status"), text("reason"))
        })
        .collect()
}

fn said(type_: &str, status: &str, reason: &str) -> (String, String, String) {
    (type_.to_string(), status.to_string(), reason.to_string())
}

/// The documents of a YAML stream.
fn split(text: &str) -> Vec<String> {
    text.split("\n---")
        .map(|d| d.trim_start_matches('-').trim().to_string())
        .filter(|d| d.lines().any(|l| l.starts_with("kind:")))
        .collect()
}

/// `line` of Gateway `gateway`'s document with a `port: N` moved to the
/// gateway's free port for N.
fn move_port(line: &str, gateway: &str, ports: &mut BTreeMap<(String, u16), u16>) -> String {
    let Some(at) = line.find("port: ") else {
        return line.to_string();
    };
    let digits: String = line[at + 6..].chars().take_while(char::is_ascii_digit).collect();
    let Ok(written) = digits.parse::<u16>() else {
        return line.to_string();
    };
    let port = *ports
        .entry((gateway.to_string(), written))
        .or_insert_with(free_port);
    format!("{}port: {port}{}", &line[..at], &line[at + 6 + digits.len()..])
}

/// `document` (a route's) with each `port: N` of its `parentRefs` moved
/// where its Gateway's listener written on N was moved.
fn move_parent_ports(document: &str, ports: &BTreeMap<(String, u16), u16>) -> String {
    // The indentation of `parentRefs:` while in it, and the parent's name.
    let mut parents: Option<usize> = None;
    let mut parent = String::new();
    let mut moved = Vec::new();
    for line in document.lines() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim_start();
        if parents.is_some_and(|at| indent < at || (indent == at && !text.starts_with('-'))) {
            parents = None;
        }
        if text == "parentRefs:" {
            parents = Some(indent);
        } else if parents.is_some() {
            let field = text.trim_start_matches("- ");
            if let Some(name) = field.strip_prefix("name:") {
                parent = name.trim().to_string();
            } else if let Some(port) = field.strip_prefix("port:")
                && let Ok(written) = port.trim().parse::<u16>()
                && let Some(served) = ports.get(&(parent.clone(), written))
            {
                moved.push(line.replace(&format!("port: {written}"), &format!("port: {served}")));
                continue;
            }
        }
        moved.push(line.to_string());
    }
    moved.join("\n")
}

/// An upstream answering each TCP connection with `name`, then closing
/// it; its port.
fn stream_upstream(name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(name.as_bytes());
        }
    });
    port
}

/// The name of a Gateway API Gateway document.
fn gateway_name(document: &str) -> Option<String> {
    if !document.lines().any(|l| l.trim() == "kind: Gateway") {
        return None;
    }
    if let Some(flow) = document.lines().find_map(|l| l.strip_prefix("metadata: {name: ")) {
        return flow.split([',', '}']).next().map(|n| n.trim().to_string());
    }
    let metadata = document.split("metadata:").nth(1)?;
    metadata
        .lines()
        .find_map(|l| l.trim().strip_prefix("name:"))
        .map(|n| n.trim().to_string())
}

fn apply(discovery: &Discovery, dir: &Path, text: &str) {
    let file = dir.join("conformance.yaml");
    std::fs::write(&file, text).unwrap();
    let applied = pilot_test_support::pilotctl(
        Some(&discovery.url),
        &["apply", "-f", file.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
}

#[test]
fn same_and_cross_namespace_routes_and_reference_grants() {
    let Some(conformance) = Conformance::with(
        &["httproute-simple-same-namespace", "httproute-cross-namespace"],
        &["same-namespace", "backend-namespaces"],
    ) else {
        return;
    };
    // HTTPRouteSimpleSameNamespace, HTTPRouteCrossNamespace.
    conformance.expect(
        "same-namespace",
        &[
            ("example.com", "/", "infra-backend-v1", 200),
            ("example.org", "/any/path", "infra-backend-v1", 200),
        ],
    );
    conformance.expect("backend-namespaces", &[("example.com", "/", "web-backend", 200)]);
    assert_eq!(
        conformance.route_conditions(WEB, "cross-namespace"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "gateway-conformance-infra-test"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    let gateway = conformance.object(&format!(
        "/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/gateways/same-namespace"
    ));
    let listener = &gateway["status"]["listeners"][0];
    assert_eq!(listener["attachedRoutes"], 1, "{gateway}");
    assert!(
        triples(&gateway["status"]["conditions"]).contains(&said("Programmed", "True", "Programmed")),
        "{gateway}"
    );
    assert!(
        triples(&listener["conditions"]).contains(&said("Programmed", "True", "Programmed")),
        "{gateway}"
    );
}

#[test]
fn a_backend_in_another_namespace_needs_a_reference_grant() {
    // HTTPRouteReferenceGrant: with the grant, the route reaches
    // web-backend; HTTPRouteInvalidCrossNamespaceBackendRef: without one,
    // ResolvedRefs is False (RefNotPermitted) and requests get 500.
    let Some(granted) = Conformance::with(&["httproute-reference-grant"], &["same-namespace"]) else {
        return;
    };
    granted.expect("same-namespace", &[("example.com", "/", "web-backend", 200)]);
    assert_eq!(
        granted.route_conditions(INFRA, "reference-grant"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    drop(granted);

    let Some(refused) = Conformance::with(
        &["httproute-invalid-cross-namespace-backend-ref"],
        &["same-namespace"],
    ) else {
        return;
    };
    refused.expect(
        "same-namespace",
        &[("example.com", "/", "", 500), ("example.com", "/any", "", 500)],
    );
    assert_eq!(
        refused.route_conditions(INFRA, "invalid-cross-namespace-backend-ref"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "False", "RefNotPermitted")
        ]
    );
}

#[test]
fn route_and_listener_hostnames_intersect() {
    let Some(conformance) = Conformance::with(
        &["httproute-hostname-intersection"],
        &[
            "httproute-hostname-intersection",
            "httproute-hostname-intersection-all",
        ],
    ) else {
        return;
    };
    // HTTPRouteHostnameIntersection.
    conformance.expect(
        "httproute-hostname-intersection",
        &[
            // A specific route hostname matching a listener's.
            ("very.specific.com", "/s1", "infra-backend-v1", 200),
            ("non.matching.com", "/s1", "", 404),
            ("foo.nonmatchingwildcard.io", "/s1", "", 404),
            ("foo.wildcard.io", "/s1", "", 404),
            ("very.specific.com", "/non-matching-prefix", "", 404),
            // Specific route hostnames under a listener's wildcard.
            ("foo.wildcard.io", "/s2", "infra-backend-v2", 200),
            ("bar.wildcard.io", "/s2", "infra-backend-v2", 200),
            ("foo.bar.wildcard.io", "/s2", "infra-backend-v2", 200),
            ("non.matching.com", "/s2", "", 404),
            ("wildcard.io", "/s2", "", 404),
            ("very.specific.com", "/s2", "", 404),
            // A route wildcard covering a listener's specific hostname.
            ("very.specific.com", "/s3", "infra-backend-v3", 200),
            ("foo.specific.com", "/s3", "", 404),
            ("foo.wildcard.io", "/s3", "", 404),
            // Wildcards meeting.
            ("foo.anotherwildcard.io", "/s4", "infra-backend-v1", 200),
            ("bar.anotherwildcard.io", "/s4", "infra-backend-v1", 200),
            ("foo.bar.anotherwildcard.io", "/s4", "infra-backend-v1", 200),
            ("anotherwildcard.io", "/s4", "", 404),
            ("foo.wildcard.io", "/s4", "", 404),
            // No hostname in common: not attached.
            ("specific.but.wrong.com", "/s5", "", 404),
            ("wildcard.io", "/s5", "", 404),
        ],
    );
    conformance.expect(
        "httproute-hostname-intersection-all",
        &[
            ("first.com", "/", "infra-backend-v2", 200),
            ("sub.first.com", "/", "infra-backend-v2", 200),
            ("second.com", "/", "infra-backend-v2", 200),
            ("sub.second.com", "/", "infra-backend-v2", 200),
            ("third.com", "/", "", 404),
        ],
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "no-intersecting-hosts"),
        [
            said("Accepted", "False", "NoMatchingListenerHostname"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_hostname_belongs_to_its_most_specific_listener() {
    let Some(conformance) = Conformance::with(
        &["httproute-listener-hostname-matching"],
        &["httproute-listener-hostname-matching"],
    ) else {
        return;
    };
    // HTTPRouteListenerHostnameMatching.
    conformance.expect(
        "httproute-listener-hostname-matching",
        &[
            ("bar.com", "/", "infra-backend-v1", 200),
            ("foo.bar.com", "/", "infra-backend-v2", 200),
            ("baz.bar.com", "/", "infra-backend-v3", 200),
            ("boo.bar.com", "/", "infra-backend-v3", 200),
            ("multiple.prefixes.bar.com", "/", "infra-backend-v3", 200),
            ("multiple.prefixes.foo.com", "/", "infra-backend-v3", 200),
            ("foo.com", "/", "", 404),
            ("no.matching.host", "/", "", 404),
        ],
    );
}

#[test]
fn a_tcp_listener_routes_connections_to_its_tcp_route_under_a_reference_grant() {
    // TCPRouteReferenceGrant: the route's backend is in another namespace,
    // whose ReferenceGrant admits TCPRoutes of the route's.
    let Some(conformance) =
        Conformance::with(&["tcproute-reference-grant"], &["tcp-reference-grant-gateway"])
    else {
        return;
    };
    eventually("the TCP listener to reach tcp-reference-grant-backend", || {
        conformance.stream("tcp-reference-grant-gateway", 9320) == "tcp-reference-grant-backend"
    });
    for _ in 0..10 {
        assert_eq!(
            conformance.stream("tcp-reference-grant-gateway", 9320),
            "tcp-reference-grant-backend"
        );
    }
}

#[test]
fn a_tcp_route_without_a_section_attaches_to_every_tcp_listener() {
    // TCPRouteParentRefAttachAll: one route, four listeners.
    let Some(conformance) =
        Conformance::with(&["tcproute-parentref-attach-all"], &["tcp-attach-all-gateway"])
    else {
        return;
    };
    for port in [9310, 9311, 9312, 9313] {
        eventually(&format!("listener {port} to reach tcp-echo-attach-all"), || {
            conformance.stream("tcp-attach-all-gateway", port) == "tcp-echo-attach-all"
        });
    }
    let attached = conformance.attached_routes("tcp-attach-all-gateway");
    assert_eq!(attached, vec![Value::from(1); 4]);
}

#[test]
fn a_tcp_routes_backends_share_its_connections_by_their_weights() {
    // TCPRouteWeightedRouting: 70, 30 and 0, over 1,000 connections (the
    // margin as for HTTPRouteWeight's).
    let gateway = "tcp-weighted-gateway";
    let Some(conformance) = Conformance::with(&["tcproute-weighted-routing"], &[gateway]) else {
        return;
    };
    eventually("the TCP listener to reach a backend", || {
        conformance.stream(gateway, 9300).starts_with("tcp-backend-v")
    });
    const CONNECTIONS: usize = 1000;
    let mut answered = BTreeMap::<String, usize>::new();
    for _ in 0..CONNECTIONS {
        *answered.entry(conformance.stream(gateway, 9300)).or_default() += 1;
    }
    eprintln!("{CONNECTIONS} connections answered by {answered:?}");
    let share = |backend: &str| answered.get(backend).copied().unwrap_or(0) * 1000 / CONNECTIONS;
    for (backend, weight) in [("tcp-backend-v1", 700), ("tcp-backend-v2", 300)] {
        assert!(
            share(backend).abs_diff(weight) <= 50,
            "{backend}: {}/1000, its weight {weight}/1000: {answered:?}",
            share(backend)
        );
    }
    assert_eq!(
        answered.get("tcp-backend-v3"),
        None,
        "a weight of 0: {answered:?}"
    );
    assert_eq!(answered.values().sum::<usize>(), CONNECTIONS, "{answered:?}");
    assert_eq!(
        conformance.route_conditions_of("tcproutes", INFRA, "tcp-weighted-route"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn a_tls_listener_passes_tls_through_by_sni() {
    // TLSRouteSimpleSameNamespace: abc.example.com reaches tcp-backend,
    // whose own certificate the client verifies (the router holds none).
    let Some(conformance) = Conformance::with(&["tlsroute-simple-same-namespace"], &["gateway-tlsroute"])
    else {
        return;
    };
    eventually("abc.example.com passed through to tcp-backend", || {
        conformance.https("gateway-tlsroute", 443, "abc.example.com")
    });
    assert!(
        !conformance.https("gateway-tlsroute", 443, "def.example.com"),
        "a name no TLSRoute holds is not passed through"
    );
    assert_eq!(
        conformance.route_conditions_of("tlsroutes", INFRA, "gateway-conformance-infra-test"),
        [
            said("Accepted", "True", "Accepted"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
}

#[test]
fn tls_routes_and_listeners_hostnames_intersect() {
    // TLSRouteHostnameIntersection: four Gateways (a listener's hostname
    // exact, a wildcard more and one less specific than the routes', and
    // none), each with routes to tls-backend and tls-backend-2.
    let gateways = [
        "gw-tlsroute-exact-hostname-x-1",
        "gw-tlsroute-more-specific-wc-hostname-x-2",
        "gw-tlsroute-less-specific-wc-hostname-x-3",
        "gw-tlsroute-empty-hostname-x-4",
    ];
    let Some(conformance) = Conformance::with(&["tlsroute-hostname-intersection"], &gateways) else {
        return;
    };
    let (one, two) = (Some("tls-backend"), Some("tls-backend-2"));
    // Per Gateway, each SNI and the backend it reaches.
    type Passed<'a> = Vec<(&'a str, Option<&'a str>)>;
    let cases: [(&str, Passed); 4] = [
        (
            gateways[0],
            vec![("abc.example.com", one), ("non.matching.com", None)],
        ),
        (
            gateways[1],
            vec![
                ("abc.example.com", one),
                ("other.example.com", two),
                ("non.matching.com", None),
            ],
        ),
        (
            gateways[2],
            vec![
                ("abc.example.com", one),
                ("other.example.com", two),
                ("non.matching.com", None),
            ],
        ),
        (
            gateways[3],
            vec![
                ("abc.example.com", one),
                ("other.example.com", two),
                ("non.matching.org", None),
            ],
        ),
    ];
    for (gateway, sni) in &cases {
        let answers = || -> Vec<Option<String>> {
            sni.iter()
                .map(|(host, _)| conformance.tls_backend(gateway, 443, host))
                .collect()
        };
        let expected: Vec<Option<String>> = sni.iter().map(|(_, b)| b.map(str::to_string)).collect();
        eventually(&format!("{gateway} to pass TLS through by SNI"), || {
            answers() == expected
        });
        assert_eq!(answers(), expected, "{gateway}: {sni:?}");
    }
    for route in [
        "tlsroute-more-specific-wc-hostname-x-1",
        "tlsroute-exact-hostname-x-2",
        "tlsroute-less-specific-wc-hostname-x-2",
        "tlsroute-exact-hostname-x-3",
        "tlsroute-more-specific-wc-hostname-x-3",
        "tlsroute-exact-hostname-x-4",
        "tlsroute-less-specific-wc-hostname-x-4",
    ] {
        assert_eq!(
            conformance.route_conditions_of("tlsroutes", INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
}

const V1: &str = "infra-backend-v1";
const V2: &str = "infra-backend-v2";
const V3: &str = "infra-backend-v3";

#[test]
fn requests_match_by_path_header_method_and_query_in_the_specifications_order() {
    // One manifest at a time (HTTPRouteMethodMatching's `GET` rule would
    // take the others' requests): HTTPRouteMatching,
    // HTTPRouteExactPathMatching, HTTPRouteMethodMatching,
    // HTTPRouteQueryParamMatching.
    let cases: [(&str, Vec<Request>); 4] = [
        (
            "httproute-matching",
            // A prefix matches whole segments; a header match beats a
            // bare prefix of the same length.
            vec![
                to("/", V1),
                to("/example", V1),
                to("/", V1).header("version", "one"),
                to("/v2", V2),
                to("/v2/example", V2),
                to("/", V2).header("version", "two"),
                to("/v2example", V1),
                to("/foo/v2/example", V1),
            ],
        ),
        (
            "httproute-exact-path-matching",
            // The whole path, its case; nothing else matches.
            vec![
                to("/one", V1),
                to("/two", V2),
                answered("/", 404),
                answered("/one/example", 404),
                answered("/two/", 404),
                answered("/Two", 404),
                answered("/onetwo", 404),
            ],
        ),
        (
            "httproute-method-matching",
            // A longer prefix beats a method match, which beats a header
            // match.
            vec![
                to("/", V1).method("POST"),
                to("/", V2),
                to("/path1", V1),
                to("/", V2).method("PUT").header("version", "one"),
                to("/path2", V3).method("POST").header("version", "two"),
                to("/path3", V1).method("PATCH"),
                to("/path4", V1).method("DELETE").header("version", "three"),
                to("/path5", V1).method("PATCH"),
                to("/", V2).method("PATCH").header("version", "four"),
                answered("/", 404).method("HEAD"),
                answered("/", 404).method("PUT"),
                answered("/path4", 404).method("DELETE"),
            ],
        ),
        (
            "httproute-query-param-matching",
            // Names and values are case-sensitive; more parameters win;
            // headers beat parameters; a longer prefix beats both.
            vec![
                to("/?animal=whale", V1),
                to("/?animal=dolphin", V2),
                to("/?animal=dolphin&color=blue", V3),
                to("/?ANIMAL=Whale", V3),
                to("/path1?animal=whale", V1),
                to("/?animal=whale", V2).header("version", "one"),
                to("/path2?animal=whale", V3).header("version", "two"),
                to("/path3?animal=shark", V1),
                to("/path4?animal=kraken", V1).header("version", "three"),
                to("/path5?animal=hydra", V1).header("version", "four"),
                to("/?animal=hydra", V3).header("version", "four"),
                to("/?animal=hydra", V2),
                answered("/?animal=whalesay", 404),
                answered("/?Animal=whale", 404),
                answered("/", 404),
            ],
        ),
    ];
    for (manifest, requests) in cases {
        let Some(conformance) = Conformance::with(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect_requests("same-namespace", &requests);
    }
}

#[test]
fn matches_across_routes_of_one_hostname_are_ordered_together() {
    // HTTPRouteMatchingAcrossRoutes.
    let Some(conformance) = Conformance::with(&["httproute-matching-across-routes"], &["same-namespace"])
    else {
        return;
    };
    conformance.expect(
        "same-namespace",
        &[
            ("example.com", "/", V1, 200),
            ("example.com", "/example", V1, 200),
            ("example.net", "/example", V1, 200),
            ("example.com", "/v2", V2, 200),
            ("example.com", "/v2/example", V2, 200),
            ("example.com", "/v2example", V1, 200),
            ("example.com", "/foo/v2/example", V1, 200),
            ("example.net", "/v2", V1, 200),
            ("example.org", "/", "", 404),
        ],
    );
    let port = conformance.port("same-namespace", 80);
    let header = |host: &str| common::request_by_length(port, "GET", host, "/", &[("version", "two")]);
    assert_eq!(header("example.com"), (200, V2.to_string()));
    assert_eq!(header("example.net"), (200, V1.to_string()));
}

/// An upstream that fails: a request for `...?fail=N&id=X[&status=S]`
/// is answered `S` (500 unless written) for the first N requests of id
/// X, then 200; each answer's body is `try K`, K the requests of X so
/// far. Its port.
fn failing_upstream(_name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let tries = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, u32>::new()));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let tries = std::sync::Arc::clone(&tries);
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    buffer.drain(..end);
                    let target = head.split(' ').nth(1).unwrap_or_default();
                    let query: BTreeMap<&str, &str> = target
                        .split_once('?')
                        .map(|(_, q)| q.split('&').filter_map(|p| p.split_once('=')).collect())
                        .unwrap_or_default();
                    let fail: u32 = query.get("fail").and_then(|n| n.parse().ok()).unwrap_or(0);
                    let status: u16 = query.get("status").and_then(|n| n.parse().ok()).unwrap_or(500);
                    let id = query.get("id").copied().unwrap_or_default().to_string();
                    let count = {
                        let mut tries = tries.lock().unwrap();
                        let count = tries.entry(id).or_default();
                        *count += 1;
                        *count
                    };
                    let status = if count <= fail { status } else { 200 };
                    let body = format!("try {count}");
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn a_rules_retry_tries_again_on_its_codes_as_many_times_as_it_says() {
    // HTTPRouteRetry (experimental): infra-backend-v3 fails as each
    // request asks; each request's id is used once.
    let Some(conformance) = Conformance::with_upstreams(&["httproute-retry"], &["same-namespace"], &|name| {
        if name == V3 {
            failing_upstream(name)
        } else {
            common::named_upstream(name)
        }
    }) else {
        return;
    };
    let port = conformance.port("same-namespace", 80);
    let send = |path: &str| common::request_by_length(port, "GET", HOST, path, &[]);
    let mut warm = 0;
    eventually("the retry routes to be served", || {
        warm += 1;
        send(&format!("/retry/code-all-attempts-2?id=warm-{warm}")).0 == 200
    });
    let cases = [
        // 500 is retried three times: the fourth try succeeds...
        ("/retry/code-500-attempts-3?fail=3&id=a", (200, "try 4")),
        // ...and a fifth is not made.
        ("/retry/code-500-attempts-3?fail=4&id=b", (500, "try 4")),
        // A code the rule does not name is not retried.
        (
            "/retry/code-500-attempts-3?fail=1&id=c&status=502",
            (502, "try 1"),
        ),
        // 5xx named: two retries.
        (
            "/retry/code-all-attempts-2?fail=2&id=d&status=503",
            (200, "try 3"),
        ),
        (
            "/retry/code-all-attempts-2?fail=3&id=e&status=504",
            (504, "try 3"),
        ),
    ];
    for (path, (status, body)) in cases {
        assert_eq!(send(path), (status, body.to_string()), "{path}");
    }
}

/// Every request an [`echo_upstream`] saw: its backend's name, path and
/// `x-tag` header (empty when none).
static SEEN: std::sync::Mutex<Vec<(String, String, String)>> = std::sync::Mutex::new(Vec::new());

/// How many requests for `path` tagged `tag` backend `name` saw.
fn seen(name: &str, path: &str, tag: &str) -> usize {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(n, p, t)| n == name && p == path && t == tag)
        .count()
}

/// An upstream answering every request 200 with what it saw, as JSON:
/// `backend` (`name`), `method`, `path`, `host` and `headers` (each by
/// its lowercased name, the values of a repeated header joined by `,`).
/// A request's `x-echo-set-header: Name:Value,Name:Value` asks it to
/// answer with those headers. Each request is noted in [`SEEN`]. Its
/// port.
fn echo_upstream(name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    buffer.drain(..end);
                    let mut lines = head.lines();
                    let mut start = lines.next().unwrap_or_default().split(' ');
                    let method = start.next().unwrap_or_default().to_string();
                    let path = start.next().unwrap_or_default().to_string();
                    let mut headers = BTreeMap::<String, String>::new();
                    for (field, value) in lines.filter_map(|l| l.split_once(':')) {
                        headers
                            .entry(field.trim().to_ascii_lowercase())
                            .and_modify(|v| {
                                v.push(',');
                                v.push_str(value.trim());
                            })
                            .or_insert_with(|| value.trim().to_string());
                    }
                    SEEN.lock().unwrap().push((
                        name.to_string(),
                        path.clone(),
                        headers.get("x-tag").cloned().unwrap_or_default(),
                    ));
                    let mut extra = String::new();
                    for pair in headers
                        .get("x-echo-set-header")
                        .into_iter()
                        .flat_map(|v| v.split(','))
                    {
                        if let Some((field, value)) = pair.split_once(':') {
                            extra.push_str(&format!("{field}: {value}\r\n"));
                        }
                    }
                    let body = serde_json::json!({
                        "backend": name,
                        "method": method,
                        "path": path,
                        "host": headers.get("host"),
                        "headers": headers,
                    })
                    .to_string();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A request of a filter's case and what the conformance expects of it:
/// the status, the backend that answers, what it saw, the answer's
/// headers and a redirect's location.
#[derive(Debug, Clone)]
struct Case {
    method: &'static str,
    host: &'static str,
    /// Whether the host is sent with the listener's port, as a client of
    /// a port other than its scheme's writes it.
    host_port: bool,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    /// Headers the backend is asked to answer with.
    backend_sends: Vec<(&'static str, &'static str)>,
    status: u16,
    /// The backend that answers ("" when none does).
    backend: &'static str,
    /// The path and host the backend saw.
    seen_path: &'static str,
    seen_host: &'static str,
    /// Headers the backend saw, and headers it must not have seen.
    seen: Vec<(&'static str, &'static str)>,
    unseen: Vec<&'static str>,
    /// Headers of the answer, and headers it must not have.
    answer: Vec<(&'static str, &'static str)>,
    unanswered: Vec<&'static str>,
    /// A redirect's `Location`: scheme, host, port and path.
    location: Option<(&'static str, &'static str, At, &'static str)>,
}

/// The port of a redirect's `Location`.
#[derive(Debug, Clone, Copy)]
enum At {
    /// The scheme's own: written or not.
    Scheme,
    /// The port of the listener the request came to (the one it serves
    /// on, where the test moved it; written unless the scheme's own).
    Listener,
    Port(u16),
}

/// `GET path` with host `example.com`, expected to reach
/// infra-backend-v1 as sent.
fn case(path: &'static str) -> Case {
    Case {
        method: "GET",
        host: HOST,
        host_port: false,
        path,
        headers: Vec::new(),
        backend_sends: Vec::new(),
        status: 200,
        backend: V1,
        seen_path: path,
        seen_host: HOST,
        seen: Vec::new(),
        unseen: Vec::new(),
        answer: Vec::new(),
        unanswered: Vec::new(),
        location: None,
    }
}

impl Case {
    fn method(mut self, method: &'static str) -> Self {
        self.method = method;
        self
    }
    fn host(mut self, host: &'static str) -> Self {
        self.host = host;
        self.seen_host = host;
        self
    }
    fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
    fn host_port(mut self) -> Self {
        self.host_port = true;
        self
    }
    fn backend_sends(mut self, name: &'static str, value: &'static str) -> Self {
        self.backend_sends.push((name, value));
        self
    }
    fn to(mut self, backend: &'static str) -> Self {
        self.backend = backend;
        self
    }
    fn seen_as(mut self, host: &'static str, path: &'static str) -> Self {
        self.seen_host = host;
        self.seen_path = path;
        self
    }
    fn seen(mut self, name: &'static str, value: &'static str) -> Self {
        self.seen.push((name, value));
        self
    }
    fn unseen(mut self, name: &'static str) -> Self {
        self.unseen.push(name);
        self
    }
    fn answer(mut self, name: &'static str, value: &'static str) -> Self {
        self.answer.push((name, value));
        self
    }
    fn unanswered(mut self, name: &'static str) -> Self {
        self.unanswered.push(name);
        self
    }
    /// Answered `status` by the router with a `Location` of `scheme`,
    /// `host`, `port` and `path`.
    fn redirect(
        mut self,
        status: u16,
        scheme: &'static str,
        host: &'static str,
        port: At,
        path: &'static str,
    ) -> Self {
        self.status = status;
        self.backend = "";
        self.location = Some((scheme, host, port, path));
        self
    }

    /// Sends the request to 127.0.0.1:`port`: what differs from the
    /// expectation, if anything.
    fn check(&self, port: u16) -> Result<(), String> {
        let mut headers = self.headers.clone();
        let sends = self
            .backend_sends
            .iter()
            .map(|(n, v)| format!("{n}:{v}"))
            .collect::<Vec<_>>()
            .join(",");
        if !sends.is_empty() {
            headers.push(("x-echo-set-header", &sends));
        }
        let host = match self.host_port {
            true => format!("{}:{port}", self.host),
            false => self.host.to_string(),
        };
        let answer = common::exchange(port, self.method, &host, self.path, &headers);
        let wrong = |what: String| Err(format!("{what}\nthe answer: {answer:?}"));
        if answer.status != self.status {
            return wrong(format!("status {}, expected {}", answer.status, self.status));
        }
        for (name, value) in &self.answer {
            if answer.headers.get(&name.to_ascii_lowercase()).map(String::as_str) != Some(value) {
                return wrong(format!("the answer's {name} is not {value}"));
            }
        }
        for name in &self.unanswered {
            if answer.headers.contains_key(&name.to_ascii_lowercase()) {
                return wrong(format!("the answer has {name}"));
            }
        }
        if let Some((scheme, host, _, path)) = self.location {
            let Some(location) = answer.headers.get("location") else {
                return wrong("no location".into());
            };
            let (got_scheme, rest) = location.split_once("://").unwrap_or_default();
            let (authority, got_path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
            let (got_host, got_port) = match authority.rsplit_once(':') {
                Some((h, p)) => (h, p.parse::<u16>().ok()),
                None => (authority, None),
            };
            let default = match scheme {
                "https" => 443,
                _ => 80,
            };
            let listener = port;
            let port_ok = match self.location.map(|(_, _, at, _)| at) {
                Some(At::Port(port)) => got_port == Some(port),
                Some(At::Listener) if listener != default => got_port == Some(listener),
                _ => got_port.is_none() || got_port == Some(default),
            };
            if (got_scheme, got_host, got_path) != (scheme, host, path) || !port_ok {
                return wrong(format!("location {location}, expected {:?}", self.location));
            }
        }
        if self.backend.is_empty() {
            return Ok(());
        }
        let Ok(echo) = serde_json::from_str::<Value>(&answer.body) else {
            return wrong("no backend answered".into());
        };
        let saw = |name: &str| {
            echo["headers"][name.to_ascii_lowercase()]
                .as_str()
                .map(str::to_string)
        };
        if echo["backend"] != self.backend {
            return wrong(format!("expected {}", self.backend));
        }
        if echo["path"] != self.seen_path || echo["host"] != self.seen_host {
            return wrong(format!(
                "the backend did not see {}{}",
                self.seen_host, self.seen_path
            ));
        }
        for (name, value) in self.headers.iter().chain(&self.seen) {
            // A header sent is seen as sent unless the case says what
            // becomes of it.
            let expected = self
                .seen
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map_or(*value, |(_, v)| *v);
            if self.unseen.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            if saw(name).as_deref() != Some(expected) {
                return wrong(format!("the backend did not see {name}: {expected}"));
            }
        }
        for name in &self.unseen {
            if saw(name).is_some() {
                return wrong(format!("the backend saw {name}"));
            }
        }
        Ok(())
    }
}

impl Conformance {
    /// Waits until `gateway`'s listener written on `written` answers
    /// every case as expected, then checks each once more.
    fn expect_cases(&self, gateway: &str, written: u16, cases: &[Case]) {
        let port = self.port(gateway, written);
        let started = std::time::Instant::now();
        // Until every case is answered as expected (the routes arrive
        // when they arrive), or patience ends with those that are not.
        loop {
            let wrong: Vec<String> = cases
                .iter()
                .filter_map(|case| case.check(port).err().map(|wrong| format!("{case:?}: {wrong}")))
                .collect();
            if wrong.is_empty() {
                break;
            }
            assert!(
                started.elapsed() < common::PATIENCE,
                "{gateway}: {} of {} cases not as expected:\n{}\n{}",
                wrong.len(),
                cases.len(),
                wrong.join("\n"),
                self.routers[gateway].log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        for case in cases {
            if let Err(wrong) = case.check(port) {
                panic!("{case:?}: {wrong}\n{}", self.routers[gateway].log());
            }
        }
    }

    /// [`Conformance::with_upstreams`] with [`echo_upstream`]s.
    fn echoing(names: &[&str], served: &[&str]) -> Option<Conformance> {
        Conformance::with_upstreams(names, served, &echo_upstream)
    }
}

/// The cases of HTTPRouteRequestHeaderModifier, which
/// HTTPRouteBackendRequestHeaderModifier shares (its filters on the
/// backendRef).
fn request_header_cases() -> Vec<Case> {
    vec![
        case("/set")
            .header("Some-Other-Header", "val")
            .seen("X-Header-Set", "set-overwrites-values"),
        case("/set")
            .header("Some-Other-Header", "val")
            .header("X-Header-Set", "some-other-value")
            .seen("X-Header-Set", "set-overwrites-values"),
        case("/add")
            .header("Some-Other-Header", "val")
            .seen("X-Header-Add", "add-appends-values"),
        case("/add")
            .header("Some-Other-Header", "val")
            .header("X-Header-Add", "some-other-value")
            .seen("X-Header-Add", "some-other-value,add-appends-values"),
        case("/remove")
            .header("X-Header-Remove", "val")
            .unseen("X-Header-Remove"),
        case("/multiple")
            .header("X-Header-Set-2", "set-val-2")
            .header("X-Header-Add-2", "add-val-2")
            .header("X-Header-Remove-2", "remove-val-2")
            .header("Another-Header", "another-header-val")
            .seen("X-Header-Set-1", "header-set-1")
            .seen("X-Header-Set-2", "header-set-2")
            .seen("X-Header-Add-1", "header-add-1")
            .seen("X-Header-Add-2", "add-val-2,header-add-2")
            .seen("X-Header-Add-3", "header-add-3")
            .unseen("X-Header-Remove-1")
            .unseen("X-Header-Remove-2"),
        // The filter's names are canonical, the request's lowercase.
        case("/case-insensitivity")
            .header("x-header-set", "original-val-set")
            .header("x-header-add", "original-val-add")
            .header("x-header-remove", "original-val-remove")
            .header("Another-Header", "another-header-val")
            .seen("X-Header-Set", "header-set")
            .seen("X-Header-Add", "original-val-add,header-add")
            .unseen("X-Header-Remove"),
    ]
}

/// The request header changes of the cases that pair another filter
/// with a RequestHeaderModifier.
fn modified(case: Case) -> Case {
    case.header("X-Header-Remove", "remove-val")
        .header("X-Header-Add-Append", "append-val-1")
        .seen("X-Header-Add", "header-val-1")
        .seen("X-Header-Add-Append", "append-val-1,header-val-2")
        .seen("X-Header-Set", "set-overwrites-values")
        .unseen("X-Header-Remove")
}

#[test]
fn request_and_response_header_modifiers_change_what_each_side_sees() {
    // HTTPRouteRequestHeaderModifier, HTTPRouteBackendRequestHeaderModifier
    // (the same route's name and cases: one after the other),
    // HTTPRouteResponseHeaderModifier.
    for manifest in [
        "httproute-request-header-modifier",
        "httproute-request-header-modifier-backend",
    ] {
        let Some(conformance) = Conformance::echoing(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect_cases("same-namespace", 80, &request_header_cases());
        assert_eq!(
            conformance.route_conditions(INFRA, "request-header-modifier"),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{manifest}"
        );
    }

    let Some(conformance) =
        Conformance::echoing(&["httproute-response-header-modifier"], &["same-namespace"])
    else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/set")
                .backend_sends("Some-Other-Header", "val")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Set", "set-overwrites-values"),
            case("/set")
                .backend_sends("Some-Other-Header", "val")
                .backend_sends("X-Header-Set", "some-other-value")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Set", "set-overwrites-values"),
            case("/add")
                .backend_sends("Some-Other-Header", "val")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Add", "add-appends-values"),
            case("/add")
                .backend_sends("Some-Other-Header", "val")
                .backend_sends("X-Header-Add", "some-other-value")
                .answer("Some-Other-Header", "val")
                .answer("X-Header-Add", "some-other-value,add-appends-values"),
            case("/remove")
                .backend_sends("X-Header-Remove", "val")
                .unanswered("X-Header-Remove"),
            case("/multiple")
                .backend_sends("X-Header-Set-2", "set-val-2")
                .backend_sends("X-Header-Add-2", "add-val-2")
                .backend_sends("X-Header-Remove-2", "remove-val-2")
                .backend_sends("Another-Header", "another-header-val")
                .backend_sends("X-Header-Remove-1", "val")
                .answer("X-Header-Set-1", "header-set-1")
                .answer("X-Header-Set-2", "header-set-2")
                .answer("X-Header-Add-1", "header-add-1")
                .answer("X-Header-Add-2", "add-val-2,header-add-2")
                .answer("X-Header-Add-3", "header-add-3")
                .answer("Another-Header", "another-header-val")
                .unanswered("X-Header-Remove-1")
                .unanswered("X-Header-Remove-2"),
            case("/case-insensitivity")
                .backend_sends("x-header-set", "original-val-set")
                .backend_sends("x-header-add", "original-val-add")
                .backend_sends("x-header-remove", "original-val-remove")
                .backend_sends("Another-Header", "another-header-val")
                .answer("X-Header-Set", "header-set")
                .answer("X-Header-Add", "original-val-add,header-add")
                .answer("X-Lowercase-Add", "lowercase-add")
                .answer("X-Mixedcase-Add-1", "mixedcase-add-1")
                .answer("X-Mixedcase-Add-2", "mixedcase-add-2")
                .answer("X-Uppercase-Add", "uppercase-add")
                .answer("Another-Header", "another-header-val")
                .unanswered("X-Header-Remove"),
            case("/response-and-request-header-modifiers")
                .header("X-Header-Remove", "remove-val")
                .header("X-Header-Add-Append", "append-val-1")
                .header("X-Header-Echo", "echo")
                .backend_sends("X-Header-Set-2", "set-val-2")
                .backend_sends("X-Header-Add-2", "add-val-2")
                .backend_sends("X-Header-Remove-2", "remove-val-2")
                .backend_sends("Another-Header", "another-header-val")
                .backend_sends("X-Header-Remove-1", "remove-val-1")
                .backend_sends("X-Header-Echo", "echo")
                .seen("X-Header-Add", "header-val-1")
                .seen("X-Header-Set", "set-overwrites-values")
                .seen("X-Header-Add-Append", "append-val-1,header-val-2")
                .unseen("X-Header-Remove")
                .answer("X-Header-Set-1", "header-set-1")
                .answer("X-Header-Set-2", "header-set-2")
                .answer("X-Header-Add-1", "header-add-1")
                .answer("X-Header-Add-2", "add-val-2,header-add-2")
                .answer("Another-Header", "another-header-val")
                .answer("X-Header-Echo", "echo")
                .unanswered("X-Header-Remove-1")
                .unanswered("X-Header-Remove-2"),
        ],
    );
}

#[test]
fn redirects_answer_with_the_location_and_status_the_filter_says() {
    // One manifest at a time (their paths overlap): HTTPRouteRedirectHostAndStatus,
    // HTTPRouteRedirectPath, HTTPRouteRedirectPort, HTTPRouteRedirectScheme,
    // HTTPRoute303Redirect, HTTPRoute307Redirect, HTTPRoute308Redirect.
    // The location keeps what the filter does not change (the request's
    // host, path and scheme); with neither port nor scheme, the port is
    // the listener's; with a scheme and no port, the scheme's own.
    let cases: [(&str, Vec<Case>); 7] = [
        (
            "httproute-redirect-host-and-status",
            vec![
                case("/hostname-redirect").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Listener,
                    "/hostname-redirect",
                ),
                case("/host-and-status").redirect(
                    301,
                    "http",
                    "example.org",
                    At::Listener,
                    "/host-and-status",
                ),
            ],
        ),
        (
            "httproute-redirect-path",
            vec![
                case("/original-prefix/lemon").redirect(
                    302,
                    "http",
                    HOST,
                    At::Listener,
                    "/replacement-prefix/lemon",
                ),
                case("/full/path/original").redirect(
                    302,
                    "http",
                    HOST,
                    At::Listener,
                    "/full-path-replacement",
                ),
                case("/path-and-host").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Listener,
                    "/replacement-prefix",
                ),
                case("/path-and-status").redirect(301, "http", HOST, At::Listener, "/replacement-prefix"),
                case("/full-path-and-host").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Listener,
                    "/replacement-full",
                ),
                case("/full-path-and-status").redirect(301, "http", HOST, At::Listener, "/replacement-full"),
            ],
        ),
        (
            "httproute-redirect-port",
            vec![
                case("/port").redirect(302, "http", HOST, At::Port(8083), "/port"),
                case("/port-and-host").redirect(302, "http", "example.org", At::Port(8083), "/port-and-host"),
                case("/port-and-status").redirect(301, "http", HOST, At::Port(8083), "/port-and-status"),
                case("/port-and-host-and-status").redirect(
                    302,
                    "http",
                    "example.org",
                    At::Port(8083),
                    "/port-and-host-and-status",
                ),
            ],
        ),
        (
            "httproute-redirect-scheme",
            vec![
                case("/scheme").redirect(302, "https", HOST, At::Scheme, "/scheme"),
                case("/scheme-and-host").redirect(
                    302,
                    "https",
                    "example.org",
                    At::Scheme,
                    "/scheme-and-host",
                ),
                case("/scheme-and-status").redirect(301, "https", HOST, At::Scheme, "/scheme-and-status"),
                case("/scheme-and-host-and-status").redirect(
                    302,
                    "https",
                    "example.org",
                    At::Scheme,
                    "/scheme-and-host-and-status",
                ),
            ],
        ),
        (
            "httproute-303-redirect",
            vec![
                case("/see-other")
                    .method("POST")
                    .redirect(303, "http", HOST, At::Listener, "/see-other"),
            ],
        ),
        (
            "httproute-307-redirect",
            vec![case("/temporary").redirect(307, "http", HOST, At::Listener, "/temporary")],
        ),
        (
            "httproute-308-redirect",
            vec![case("/permanent").redirect(308, "http", HOST, At::Listener, "/permanent")],
        ),
    ];
    for (manifest, cases) in cases {
        let Some(conformance) = Conformance::echoing(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect_cases("same-namespace", 80, &with_host_ports(cases));
    }
}

/// `cases`, and each again with the listener's port in its host (the
/// test's listeners are not on their scheme's port: a client writes it).
fn with_host_ports(cases: Vec<Case>) -> Vec<Case> {
    let ported: Vec<Case> = cases.iter().cloned().map(Case::host_port).collect();
    cases.into_iter().chain(ported).collect()
}

#[test]
fn rewrites_change_the_host_and_path_the_backend_sees() {
    // HTTPRouteRewriteHost, HTTPRouteRewritePath.
    let Some(conformance) = Conformance::echoing(&["httproute-rewrite-host"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/one")
                .host("rewrite.example")
                .seen_as("one.example.org", "/one"),
            case("/two")
                .host("rewrite.example")
                .to(V2)
                .seen_as("example.org", "/two"),
            modified(
                case("/rewrite-host-and-modify-headers")
                    .host("rewrite.example")
                    .to(V2)
                    .seen_as("test.example.org", "/rewrite-host-and-modify-headers"),
            ),
        ],
    );
    drop(conformance);

    let Some(conformance) = Conformance::echoing(&["httproute-rewrite-path"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[
            case("/prefix/one/two").seen_as(HOST, "/one/two"),
            case("/strip-prefix/three").seen_as(HOST, "/three"),
            case("/strip-prefix").seen_as(HOST, "/"),
            case("/full/one/two").seen_as(HOST, "/one"),
            modified(
                case("/full/rewrite-path-and-modify-headers/test")
                    .header("X-Header-Set", "set-val")
                    .seen_as(HOST, "/test"),
            ),
            modified(
                case("/prefix/rewrite-path-and-modify-headers/one")
                    .header("X-Header-Set", "set-val")
                    .seen_as(HOST, "/prefix/one"),
            ),
        ],
    );
}

#[test]
fn a_mirror_sends_each_request_to_its_backend_too() {
    // HTTPRouteRequestMirror: infra-backend-v1 answers; infra-backend-v2
    // must see each request (with the rule's header changes), once.
    let Some(conformance) = Conformance::echoing(&["httproute-request-mirror"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &[case("/mirror"), modified(case("/mirror-and-modify-headers"))],
    );
    let port = conformance.port("same-namespace", 80);
    const TAGS: [&str; 10] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"];
    for path in ["/mirror", "/mirror-and-modify-headers"] {
        for tag in TAGS {
            let answer = common::exchange(port, "GET", HOST, path, &[("x-tag", tag)]);
            assert_eq!(answer.status, 200, "{path} {tag}: {answer:?}");
            assert_eq!(
                seen(V1, path, tag),
                1,
                "{path} {tag}: infra-backend-v1 answered once"
            );
        }
        // The mirror's copies are sent beside the answer: each arrives,
        // once.
        eventually(&format!("infra-backend-v2 to see every {path}"), || {
            TAGS.iter().all(|tag| seen(V2, path, tag) >= 1)
        });
        for tag in TAGS {
            assert_eq!(seen(V2, path, tag), 1, "{path} {tag}: mirrored once");
        }
    }
}

#[test]
fn headers_and_path_kinds_choose_among_rules() {
    // HTTPRouteHeaderMatching: every header of a match must hold; the rule
    // with more header matches wins.
    let Some(conformance) = Conformance::with(&["httproute-header-matching"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_requests(
        "same-namespace",
        &[
            to("/", V1).header("Version", "one"),
            to("/", V2).header("Version", "two"),
            to("/", V1).header("Version", "two").header("Color", "orange"),
            to("/", V2).header("Version", "two").header("Color", "blue"),
            answered("/", 404).header("Color", "orange"),
            answered("/", 404).header("Some-Other-Header", "one"),
            to("/", V1).header("Color", "blue"),
            to("/", V1).header("Color", "green"),
            to("/", V2).header("Color", "red"),
            to("/", V2).header("Color", "yellow"),
            answered("/", 404).header("Color", "purple"),
        ],
    );
    drop(conformance);

    // HTTPRoutePathMatchOrder: exact before prefix, longer prefixes first.
    let Some(conformance) = Conformance::with(&["httproute-path-match-order"], &["same-namespace"]) else {
        return;
    };
    conformance.expect_requests(
        "same-namespace",
        &[
            to("/match/exact/one", V3),
            to("/match/exact", V2),
            to("/match", V1),
            to("/match/prefix/one/any", V2),
            to("/match/prefix/any", V1),
            to("/match/any", V3),
        ],
    );
}

#[test]
fn backends_share_a_rules_requests_by_their_weights() {
    // HTTPRouteWeight: 70, 30 and 0. Of 1,000 requests each backend's
    // share is within 5 points of its weight, and a weight of 0 gets
    // none. (5 points are 3.4 standard deviations of a 70/30 share of
    // 1,000 requests: about one run in 1,500 fails by chance; of 500
    // requests, one in 70 would.)
    let Some(conformance) = Conformance::with(&["httproute-weight"], &["same-namespace"]) else {
        return;
    };
    let port = conformance.port("same-namespace", 80);
    eventually("the weighted route to be served", || {
        common::get_by_length(port, HOST, "/").0 == 200
    });
    const REQUESTS: usize = 1000;
    let mut answered = BTreeMap::<String, usize>::new();
    for _ in 0..REQUESTS {
        let (status, backend) = common::get_by_length(port, HOST, "/");
        assert_eq!(status, 200, "{backend}");
        *answered.entry(backend).or_default() += 1;
    }
    eprintln!("{REQUESTS} requests answered by {answered:?}");
    // In thousandths.
    let share = |backend: &str| answered.get(backend).copied().unwrap_or(0) * 1000 / REQUESTS;
    for (backend, weight) in [(V1, 700), (V2, 300)] {
        assert!(
            share(backend).abs_diff(weight) <= 50,
            "{backend}: {}/1000, its weight {weight}/1000: {answered:?}",
            share(backend)
        );
    }
    assert_eq!(answered.get(V3), None, "a weight of 0: {answered:?}");
    assert_eq!(answered.values().sum::<usize>(), REQUESTS, "{answered:?}");
}

#[test]
fn a_backend_that_cannot_be_resolved_is_answered_500() {
    // One manifest at a time (each route takes `/`):
    // HTTPRouteInvalidNonExistentBackendRef, HTTPRouteInvalidBackendRefUnknownKind,
    // HTTPRoutePartiallyInvalidViaInvalidReferenceGrant (its other rule's
    // backend, granted, answers).
    // Per manifest: its route, ResolvedRefs's reason, and the requests.
    type Requests<'a> = Vec<(&'a str, &'a str, &'a str, u16)>;
    let cases: [(&str, &str, &str, Requests); 3] = [
        (
            "httproute-invalid-nonexistent-backendref",
            "invalid-nonexistent-backend-ref",
            "BackendNotFound",
            vec![(HOST, "/", "", 500)],
        ),
        (
            "httproute-invalid-backendref-unknown-kind",
            "invalid-backend-ref-unknown-kind",
            "InvalidKind",
            vec![(HOST, "/v2", "", 500)],
        ),
        (
            "httproute-partially-invalid-via-invalid-reference-grant",
            "invalid-reference-grant",
            "RefNotPermitted",
            vec![(HOST, "/v2", "", 500), (HOST, "/", "app-backend-v1", 200)],
        ),
    ];
    for (manifest, route, reason, requests) in cases {
        let Some(conformance) = Conformance::with(&[manifest], &["same-namespace"]) else {
            return;
        };
        conformance.expect("same-namespace", &requests);
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "False", reason)
            ],
            "{manifest}"
        );
    }
}

#[test]
fn routes_that_no_listener_takes_are_not_attached() {
    // HTTPRouteDisallowedKind (an HTTPRoute for a listener that takes
    // TLSRoutes only), HTTPRouteInvalidParentRefNotMatchingListenerPort,
    // HTTPRouteInvalidParentRefNotMatchingSectionName (their routes would
    // take `/`), beside HTTPRoutePathMatchOrder's route, which is
    // attached: its answers show the router has the Gateway's routes.
    let Some(conformance) = Conformance::with(
        &[
            "httproute-disallowed-kind",
            "httproute-invalid-parentref-not-matching-listener-port",
            "httproute-invalid-parentref-not-matching-section-name",
            "httproute-path-match-order",
        ],
        &["same-namespace"],
    ) else {
        return;
    };
    conformance.expect(
        "same-namespace",
        &[
            (HOST, "/match", V1, 200),
            (HOST, "/", "", 404),
            (HOST, "/any", "", 404),
        ],
    );
    assert_eq!(
        conformance.route_conditions(INFRA, "disallowed-kind"),
        [
            said("Accepted", "False", "NotAllowedByListeners"),
            said("ResolvedRefs", "True", "ResolvedRefs")
        ]
    );
    for route in [
        "httproute-listener-not-matching-route-port",
        "httproute-listener-not-matching-section-name",
    ] {
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "False", "NoMatchingParent"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
    assert_eq!(conformance.attached_routes("tlsroutes-only"), [Value::from(0)]);
    assert_eq!(
        conformance.attached_routes("same-namespace"),
        [Value::from(1)],
        "path-matching-order only"
    );
}

#[test]
fn a_route_for_a_port_is_served_by_that_ports_listeners_only() {
    // HTTPRouteListenerPortMatching: routes for ports 80, 8080 and 8090
    // (the last for one listener of two), each requested with the port in
    // its host, as a client of that port writes it.
    let gateway = "httproute-listener-port-matching";
    let Some(conformance) = Conformance::with(&[gateway], &[gateway]) else {
        return;
    };
    let port_8080 = conformance.port(gateway, 8080);
    let port_8090 = conformance.port(gateway, 8090);
    let foo_8080 = format!("foo.com:{port_8080}");
    let bar_8080 = format!("bar.com:{port_8080}");
    let foo_8090 = format!("foo.com:{port_8090}");
    let bar_8090 = format!("bar.com:{port_8090}");
    conformance.expect_on(gateway, 80, &[("foo.com", "/", V1, 200)]);
    conformance.expect_on(
        gateway,
        8080,
        &[(&foo_8080, "/", V2, 200), (&bar_8080, "/", V2, 200)],
    );
    conformance.expect_on(
        gateway,
        8090,
        &[(&foo_8090, "/", V3, 200), (&bar_8090, "/", "", 404)],
    );
    for route in ["backend-v1", "backend-v2", "backend-v3"] {
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{route}"
        );
    }
}

#[test]
fn a_changed_route_is_served_and_its_status_is_of_its_new_generation() {
    // HTTPRouteObservedGenerationBump: the route's backend changed from
    // infra-backend-v1 to infra-backend-v2.
    let manifest = "httproute-observed-generation-bump";
    let Some(conformance) = Conformance::with(&[manifest], &["same-namespace"]) else {
        return;
    };
    let path =
        format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/httproutes/observed-generation-bump");
    // The route's generation, once every condition is of it.
    let current = |what: &str| {
        let mut generation = Value::Null;
        eventually(what, || {
            let route = conformance.object(&path);
            generation = route["metadata"]["generation"].clone();
            let conditions = &route["status"]["parents"][0]["conditions"];
            triples(conditions)
                == [
                    said("Accepted", "True", "Accepted"),
                    said("ResolvedRefs", "True", "ResolvedRefs"),
                ]
                && conditions
                    .as_array()
                    .into_iter()
                    .flatten()
                    .all(|c| c["observedGeneration"] == generation)
        });
        generation
            .as_i64()
            .unwrap_or_else(|| panic!("no generation: {generation}"))
    };
    conformance.expect("same-namespace", &[(HOST, "/", V1, 200)]);
    let before = current("the route's conditions of its generation");

    let corpus = pilot_test_support::corpus("gateway-api").expect("read above");
    let text =
        std::fs::read_to_string(corpus.join(format!("gwapi_conformance.tests.{manifest}.yaml"))).unwrap();
    assert!(text.contains("name: infra-backend-v1"), "{text}");
    conformance.apply(&text.replace("name: infra-backend-v1", "name: infra-backend-v2"));
    conformance.expect("same-namespace", &[(HOST, "/", V2, 200)]);
    let after = current("the changed route's conditions of its new generation");
    assert!(after > before, "generation {before}, then {after}");
}

#[test]
fn a_parent_refs_port_moves_with_its_listener() {
    let ports = BTreeMap::from([
        (("gw".to_string(), 80), 41000),
        (("other".to_string(), 80), 42000),
    ]);
    let route = "\
spec:
  parentRefs:
  - name: gw
    port: 80
  - name: other
    sectionName: http
    port: 80
  - name: gw
    port: 81
  rules:
  - backendRefs:
    - name: gw
      port: 80";
    assert_eq!(
        move_parent_ports(route, &ports),
        "\
spec:
  parentRefs:
  - name: gw
    port: 41000
  - name: other
    sectionName: http
    port: 42000
  - name: gw
    port: 81
  rules:
  - backendRefs:
    - name: gw
      port: 80"
    );
}

#[test]
fn a_redirects_port_follows_its_scheme_or_its_listener() {
    // HTTPRouteRedirectPortAndScheme, its listeners on 80 and 8080 (its
    // third Gateway's listeners end TLS, which pilot does not serve). A
    // port written is kept; none with a scheme is the scheme's own; none
    // without one is the listener's.
    let Some(conformance) = Conformance::echoing(
        &["httproute-redirect-port-and-scheme"],
        &["same-namespace", "same-namespace-with-http-listener-on-8080"],
    ) else {
        return;
    };
    conformance.expect_cases(
        "same-namespace",
        80,
        &with_host_ports(vec![
            case("/scheme-nil-and-port-nil").redirect(
                302,
                "http",
                "example.org",
                At::Listener,
                "/scheme-nil-and-port-nil",
            ),
            case("/scheme-nil-and-port-80").redirect(
                302,
                "http",
                "example.org",
                At::Scheme,
                "/scheme-nil-and-port-80",
            ),
            case("/scheme-nil-and-port-8080").redirect(
                302,
                "http",
                "example.org",
                At::Port(8080),
                "/scheme-nil-and-port-8080",
            ),
            case("/scheme-https-and-port-nil").redirect(
                302,
                "https",
                "example.org",
                At::Scheme,
                "/scheme-https-and-port-nil",
            ),
            case("/scheme-https-and-port-443").redirect(
                302,
                "https",
                "example.org",
                At::Scheme,
                "/scheme-https-and-port-443",
            ),
            case("/scheme-https-and-port-8443").redirect(
                302,
                "https",
                "example.org",
                At::Port(8443),
                "/scheme-https-and-port-8443",
            ),
        ]),
    );
    conformance.expect_cases(
        "same-namespace-with-http-listener-on-8080",
        8080,
        &with_host_ports(vec![
            case("/scheme-nil-and-port-nil").redirect(
                302,
                "http",
                "example.org",
                At::Listener,
                "/scheme-nil-and-port-nil",
            ),
            case("/scheme-nil-and-port-80").redirect(
                302,
                "http",
                "example.org",
                At::Scheme,
                "/scheme-nil-and-port-80",
            ),
            case("/scheme-https-and-port-nil").redirect(
                302,
                "https",
                "example.org",
                At::Scheme,
                "/scheme-https-and-port-nil",
            ),
        ]),
    );
    for (gateway, route) in [
        ("same-namespace", "http-route-for-listener-on-port-80"),
        (
            "same-namespace-with-http-listener-on-8080",
            "http-route-for-listener-on-port-8080",
        ),
    ] {
        assert_eq!(
            conformance.route_conditions(INFRA, route),
            [
                said("Accepted", "True", "Accepted"),
                said("ResolvedRefs", "True", "ResolvedRefs")
            ],
            "{gateway}"
        );
    }
}
