//! The Gateway API's conformance through `pilot-agent proxy router`:
//! pilot-discovery with the conformance's backends (upstreams on
//! loopback), its shared Gateways and manifests of the corpus
//! `gateway-api` (`../shared/corpora/`), a router per Gateway served,
//! and the checks of what they answer and of the objects' status.
//!
//! The conformance's shared Gateways (its base manifests, not in the
//! corpus) are written here as the base writes them, with one difference:
//! `backend-namespaces` admits every namespace (`from: All`) where the
//! base selects namespaces by a label of the conformance's (pilot reads no
//! Namespace objects: a `Selector` admits namespaces by
//! `kubernetes.io/metadata.name` only). Each Gateway is served by a router
//! of its own (labelled with the Gateway's name, in its namespace), its
//! listener ports moved to free ones, and the routes' parentRef ports with
//! them.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pilot_test_support::certs::Pki;
use pilot_test_support::{FakeCluster, ProcessGuard, openssl_server, openssl_sni_server};
use serde_json::Value;

use super::grpc::Python;
use super::http_case::Case;
use super::tls::curl_https;
use super::upstreams::{echo_upstream, h2c_upstream, stream_upstream};
use super::{Agent, Discovery, eventually, free_port};

pub(crate) const INFRA: &str = "gateway-conformance-infra";

pub(crate) const WEB: &str = "gateway-conformance-web-backend";

pub(crate) const APP: &str = "gateway-conformance-app-backend";

/// pilot's GatewayClass under the conformance's name, and the shared
/// Gateways of the conformance's base.
pub(crate) const BASE: &str = "\
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
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: all-namespaces, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: gateway-conformance
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: same-namespace-with-https-listener, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: gateway-conformance
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    allowedRoutes: {namespaces: {from: Same}}
    tls: {certificateRefs: [{name: tls-checks-certificate}]}
  - name: https-with-hostname
    hostname: second-example.org
    port: 443
    protocol: HTTPS
    allowedRoutes: {namespaces: {from: Same}}
    tls: {certificateRefs: [{name: tls-checks-certificate}]}
  - name: https-with-wildcard-hostname
    hostname: \"*.wildcard.org\"
    port: 443
    protocol: HTTPS
    allowedRoutes: {namespaces: {from: Same}}
    tls: {certificateRefs: [{name: tls-checks-certificate}]}
  - name: https-with-hostname-matching-wildcard
    hostname: fourth-example.wildcard.org
    port: 443
    protocol: HTTPS
    allowedRoutes: {namespaces: {from: Same}}
    tls: {certificateRefs: [{name: tls-checks-certificate}]}
";

/// The Secrets of the conformance's base, as `--credentials-dir` holds
/// them: (namespace, name, the names its certificate is for), each signed
/// by the test CA, its subject its name.
pub(crate) const CERTIFICATES: [(&str, &str, &str); 5] = [
    (
        INFRA,
        "tls-checks-certificate",
        "DNS:example.org,DNS:second-example.org,DNS:unknown-example.org,DNS:*.wildcard.org,DNS:https-listener.org",
    ),
    (WEB, "certificate", "DNS:*.example.com,DNS:example.org"),
    (INFRA, "tls-terminate-checks-certificate", "DNS:tls.example.com"),
    (
        INFRA,
        "tls-validity-checks-certificate",
        "DNS:secure.test.com,DNS:example.org,DNS:second-example.org",
    ),
    // GatewayTLSBackendClientCertificate's: the routers' client
    // certificate towards CLIENT_CERT_BACKEND.
    (INFRA, "tls-checks-client-certificate", "DNS:client.example.com"),
];

/// The Service of GatewayTLSBackendClientCertificate (port 443): a TLS
/// server with `abc.example.com`'s certificate that completes a handshake
/// only with a client certificate signed by the conformance's CA, and
/// answers with a page naming it.
pub(crate) const CLIENT_CERT_BACKEND: &str = "tls-backend-with-client-cert-validation";

/// The Secret of GatewayInvalidTLSBackendConfiguration that holds no
/// certificate and key that load.
pub(crate) const MALFORMED_CERTIFICATE: &str = "malformed-client-certificate";

/// The Services of the conformance's BackendTLSPolicy cases (a port
/// named `btls`), all served by one TLS backend with a certificate for
/// `abc.example.com` signed by the test CA, which completes a handshake
/// only for that SNI.
pub(crate) const BACKEND_TLS_SERVICES: [(&str, u16); 14] = [
    ("backendtlspolicy-test", 443),
    ("backendtlspolicy-host-mismatch-test", 443),
    ("backendtlspolicy-cert-mismatch-test", 443),
    ("backendtlspolicy-reconcile-test", 443),
    ("backendtlspolicy-nonexistent-ca-certificate-ref-test", 443),
    ("backendtlspolicy-malformed-ca-certificate-ref-test", 443),
    ("backendtlspolicy-invalid-kind-test", 443),
    ("btls-terminate-tls-backend", 8443),
    ("backendtlspolicy-san-dns-test", 443),
    ("backendtlspolicy-san-dns-mismatch-test", 443),
    ("backendtlspolicy-san-uri-test", 443),
    ("backendtlspolicy-san-uri-mismatch-test", 443),
    ("backendtlspolicy-multiple-sans-test", 443),
    ("backendtlspolicy-multiple-mismatch-sans-test", 443),
];

/// More Services of that backend, whose ports' names BackendTLSPolicies'
/// `sectionName`s name (BackendTLSPolicyConflictResolution,
/// BackendTLSPolicyObservedGenerationBump).
pub(crate) const BACKEND_TLS_NAMED_PORTS: [(&str, &[(&str, u16)]); 4] = [
    (
        "backendtlspolicy-conflicted-without-section-name-test",
        &[("https", 443)],
    ),
    (
        "backendtlspolicy-conflicted-with-section-name-test",
        &[("https-1", 443)],
    ),
    (
        "backendtlspolicy-not-conflicted-test",
        &[("https-1", 443), ("https-2", 8443)],
    ),
    // BackendTLSPolicyObservedGenerationBump's.
    ("observed-generation-bump-test", &[("https", 443)]),
];

/// The ConfigMaps (of the infra namespace) the BackendTLSPolicy cases
/// name, as `--ca-bundles-dir` holds them: the test CA, another CA that
/// signed nothing the backends present, and a `ca.crt` that holds no
/// certificate.
pub(crate) const CA_BUNDLES: [&str; 3] = [
    "tls-checks-ca-certificate",
    "mismatch-ca-certificate",
    "malformed-ca-certificate",
];

/// The Services of BackendTLSPolicyGRPCRoute (port 443, named `btls`):
/// [`GRPC_TLS_BACKEND`] behind each.
pub(crate) const GRPC_BACKEND_TLS_SERVICES: [&str; 3] = [
    "backendtlspolicy-grpc-test",
    "backendtlspolicy-grpc-host-mismatch-test",
    "backendtlspolicy-grpc-cert-mismatch-test",
];

/// The gRPC server over TLS (a certificate for `abc.example.com`, signed
/// by the CA of `tls-checks-ca-certificate`) behind
/// [`GRPC_BACKEND_TLS_SERVICES`]: it answers with this name.
pub(crate) const GRPC_TLS_BACKEND: &str = "grpc-tls-backend";

/// The conformance's backends: (namespace, Service) answering with the
/// Service's name.
pub(crate) const BACKENDS: [(&str, &str); 6] = [
    (INFRA, "infra-backend-v1"),
    (INFRA, "infra-backend-v2"),
    (INFRA, "infra-backend-v3"),
    (WEB, "web-backend"),
    (APP, "app-backend-v1"),
    (APP, "app-backend-v2"),
];

/// The conformance's stream backends: (namespace, Service, port), each
/// answering a connection with its name and closing it. (`tcp-backend`,
/// beside them, speaks TLS with a certificate for `abc.example.com` on
/// 8443 and answers as they do on 3000.)
pub(crate) const STREAM_BACKENDS: [(&str, &str, u16); 10] = [
    (INFRA, "tcp-echo-attach-all", 3000),
    (WEB, "tcp-reference-grant-backend", 3000),
    (INFRA, "tcp-backend-v1", 3000),
    (INFRA, "tcp-backend-v2", 3000),
    (INFRA, "tcp-backend-v3", 3000),
    (INFRA, "tcp-attach-backend-1", 3000),
    (INFRA, "tcp-attach-backend-2", 3000),
    (INFRA, "tcp-echo-one", 3000),
    (INFRA, "tcp-echo-two", 3000),
    (INFRA, "tcp-echo-three", 3000),
];

/// The conformance's gRPC backends in its infra namespace (port 8080,
/// protocol `GRPC`), started by [`Conformance::with_grpc`] only.
pub(crate) const GRPC_BACKENDS: [&str; 3] = [
    "grpc-infra-backend-v1",
    "grpc-infra-backend-v2",
    "grpc-infra-backend-v3",
];

/// The conformance's TLS backends in its infra namespace (port 443),
/// each with a certificate for `*.example.com` whose subject is its name.
pub(crate) const TLS_BACKENDS: [&str; 2] = ["tls-backend", "tls-backend-2"];

/// The Service in front of the router of the `index`th Gateway served
/// (from 0): its hostname and cluster IP, the Gateway's addresses.
pub(crate) fn router_service(gateway: &str, index: usize) -> (String, String) {
    (
        format!("{gateway}-router.{INFRA}.svc.cluster.local"),
        format!("10.96.1.{}", index + 1),
    )
}

/// Backends beyond the HTTP and stream ones every case has.
#[derive(Default)]
struct Extras {
    /// The gRPC backends ([`GRPC_BACKENDS`]).
    grpc: bool,
    /// `infra-backend-v1`'s h2c and websocket ports.
    backend_protocols: bool,
    /// A (fake) Kubernetes cluster as a registry besides the services
    /// file (`--registry kubernetes`).
    kubernetes: bool,
}

/// pilot-discovery with the conformance's backends, the base Gateways
/// and the corpus manifests `names`, and a router per Gateway.
pub(crate) struct Conformance {
    discovery: Discovery,
    /// Per Gateway name and listener port as written, the port the
    /// listener serves on.
    ports: BTreeMap<(String, u16), u16>,
    /// Per Gateway name, its router.
    routers: BTreeMap<String, Agent>,
    /// The CA that signed `tcp-backend`'s certificate.
    ca: PathBuf,
    _tls_backends: Vec<ProcessGuard>,
    _python_backends: Vec<Python>,
    dir: tempfile::TempDir,
    /// The Kubernetes registry's cluster, when there is one (dropped after
    /// pilot-discovery).
    cluster: Option<FakeCluster>,
}

impl Conformance {
    /// Routers are started for the Gateways `served` only. `None` when
    /// the corpus is not there (a loud skip, a failure under `CI=true`).
    pub(crate) fn with(names: &[&str], served: &[&str]) -> Option<Conformance> {
        Conformance::with_upstreams(names, served, &super::named_upstream)
    }

    /// [`Conformance::with`], the HTTP backends' upstreams started by
    /// `upstream` (given the Service's name; its port).
    pub(crate) fn with_upstreams(
        names: &[&str],
        served: &[&str],
        upstream: &dyn Fn(&'static str) -> u16,
    ) -> Option<Conformance> {
        Conformance::build(names, served, upstream, Extras::default())
    }

    /// [`Conformance::with`], `infra-backend-v1` with the base's two
    /// other ports: `8081` (`kubernetes.io/h2c` in the base, HTTP2 here)
    /// served by an [`h2c_upstream`], and `8082` (`kubernetes.io/ws`, HTTP
    /// here) by `websocket.py`'s echo server.
    pub(crate) fn with_backend_protocols(names: &[&str], served: &[&str]) -> Option<Conformance> {
        let extras = Extras {
            backend_protocols: true,
            ..Extras::default()
        };
        Conformance::build(names, served, &super::named_upstream, extras)
    }

    /// [`Conformance::with`], with a fake Kubernetes cluster as a
    /// registry besides the services file ([`cluster`](Self::cluster)):
    /// its Services and EndpointSlices are the test's to write.
    pub(crate) fn with_kubernetes(names: &[&str], served: &[&str]) -> Option<Conformance> {
        let extras = Extras {
            kubernetes: true,
            ..Extras::default()
        };
        Conformance::build(names, served, &super::named_upstream, extras)
    }

    /// [`Conformance::with`] and the gRPC backends ([`GRPC_BACKENDS`],
    /// `server.py` answering each call with its name, the method and the
    /// metadata it got; and over TLS, [`GRPC_TLS_BACKEND`]).
    pub(crate) fn with_grpc(names: &[&str], served: &[&str]) -> Option<Conformance> {
        let extras = Extras {
            grpc: true,
            ..Extras::default()
        };
        Conformance::build(names, served, &super::named_upstream, extras)
    }

    fn build(
        names: &[&str],
        served: &[&str],
        upstream: &dyn Fn(&'static str) -> u16,
        extras: Extras,
    ) -> Option<Conformance> {
        let corpus = pilot_test_support::corpus("gateway-api")?;
        let dir = tempfile::tempdir().unwrap();
        let mut services = String::from("services:\n");
        // One port (named after its protocol, lowercased) served by `upstream`.
        let mut service = |namespace: &str, name: &str, port: u16, protocol: &str, upstream: u16| {
            let port_name = protocol.to_ascii_lowercase();
            services.push_str(&service_entry(
                namespace,
                name,
                &[(&port_name, port, protocol, upstream)],
            ));
        };
        let mut grpc_backends = Vec::new();
        let mut with_protocols = String::new();
        for (namespace, name) in BACKENDS {
            if extras.backend_protocols && name == "infra-backend-v1" {
                let websocket_port = super::free_port();
                grpc_backends.push(Python::websocket_server(name, websocket_port, dir.path()));
                with_protocols.push_str(&service_entry(
                    namespace,
                    name,
                    &[
                        ("http", 8080, "HTTP", upstream(name)),
                        ("second-port", 8081, "HTTP2", h2c_upstream(name)),
                        ("third-port", 8082, "HTTP", websocket_port),
                    ],
                ));
                continue;
            }
            service(namespace, name, 8080, "HTTP", upstream(name));
        }
        if extras.grpc {
            for name in GRPC_BACKENDS {
                let port = super::free_port();
                grpc_backends.push(Python::server(name, port, dir.path()));
                service(INFRA, name, 8080, "GRPC", port);
            }
        }
        let pki = Pki::new(dir.path());
        let ca = pki.ca("ca").unwrap();
        let certificate = pki
            .leaf(
                "abc",
                "ca",
                // The URI name for BackendTLSPolicySANValidation.
                "subjectAltName=DNS:abc.example.com,URI:spiffe://abc.example.com/test-identity\n\
                 extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
            )
            .unwrap();
        let (tls_port, tls_backend) = openssl_server(&certificate, None);
        let (client_cert_port, client_cert_backend) = openssl_server(&certificate, Some(&ca.cert));
        let mut tls_backends = vec![tls_backend, client_cert_backend];
        for (namespace, name, port) in STREAM_BACKENDS {
            service(namespace, name, port, "TCP", stream_upstream(name));
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
        services.push_str(&with_protocols);
        if extras.grpc {
            // BackendTLSPolicyGRPCRoute's backends: one gRPC server over
            // TLS, with `abc.example.com`'s certificate.
            let port = super::free_port();
            grpc_backends.push(Python::tls_server(
                GRPC_TLS_BACKEND,
                port,
                &certificate.cert,
                &certificate.key,
                dir.path(),
            ));
            for name in GRPC_BACKEND_TLS_SERVICES {
                services.push_str(&service_entry(INFRA, name, &[("btls", 443, "GRPC", port)]));
            }
        }
        // A Service in front of each served Gateway's router (its
        // instance, at the router's address, labelled as the router is),
        // as a Kubernetes Service selecting a Gateway's pods: the
        // Gateway's addresses ([`router_service`]).
        for (i, gateway) in served.iter().enumerate() {
            let (hostname, address) = router_service(gateway, i);
            services.push_str(&format!(
                "- hostname: {hostname}\n  address: {address}\n  \
                 ports: [{{name: http, port: 80, protocol: HTTP}}]\n  instances:\n  \
                 - {{address: 10.0.1.{n}, port: 80, labels: {{gateway.networking.k8s.io/gateway-name: {gateway}}}}}\n",
                n = i + 1
            ));
        }
        // tcp-backend: TLS on 8443, plain text on 3000 (answering each
        // connection with its name).
        services.push_str(&service_entry(
            INFRA,
            "tcp-backend",
            &[
                ("tls", 8443, "TCP", tls_port),
                ("plain", 3000, "TCP", stream_upstream("tcp-backend")),
            ],
        ));
        let (sni_port, sni_backend) = openssl_sni_server(&certificate, "abc.example.com");
        tls_backends.push(sni_backend);
        for (name, port) in BACKEND_TLS_SERVICES {
            services.push_str(&service_entry(INFRA, name, &[("btls", port, "TCP", sni_port)]));
        }
        for (name, ports) in BACKEND_TLS_NAMED_PORTS {
            let ports: Vec<(&str, u16, &str, u16)> = ports
                .iter()
                .map(|(port_name, port)| (*port_name, *port, "TCP", sni_port))
                .collect();
            services.push_str(&service_entry(INFRA, name, &ports));
        }
        services.push_str(&service_entry(
            INFRA,
            CLIENT_CERT_BACKEND,
            &[("https", 443, "TCP", client_cert_port)],
        ));
        let bundles = dir.path().join("ca-bundles");
        let other_ca = pki.ca("other-ca").unwrap();
        let pem = |path: &Path| std::fs::read_to_string(path).unwrap();
        let contents = [
            pem(&ca.cert),
            pem(&other_ca.cert),
            "not a certificate\n".to_string(),
        ];
        for (name, text) in CA_BUNDLES.into_iter().zip(contents) {
            let bundle = bundles.join(INFRA).join(name);
            std::fs::create_dir_all(&bundle).unwrap();
            std::fs::write(bundle.join("ca.crt"), text).unwrap();
        }
        let services_file = dir.path().join("services.yaml");
        std::fs::write(&services_file, services).unwrap();
        let credentials = dir.path().join("credentials");
        for (namespace, name, hosts) in CERTIFICATES {
            write_credential(&pki, &credentials, namespace, name, name, hosts);
        }
        let malformed = credentials.join(INFRA).join(MALFORMED_CERTIFICATE);
        std::fs::create_dir_all(&malformed).unwrap();
        for file in ["tls.crt", "tls.key"] {
            std::fs::write(malformed.join(file), "not PEM\n").unwrap();
        }
        let cluster = extras.kubernetes.then(FakeCluster::start);
        let mut args = vec![
            "--services",
            services_file.to_str().unwrap(),
            "--credentials-dir",
            credentials.to_str().unwrap(),
            "--ca-bundles-dir",
            bundles.to_str().unwrap(),
            "--credentials-poll-ms",
            "100",
        ];
        if cluster.is_some() {
            args.extend(["--registry", "kubernetes"]);
        }
        let env = cluster.as_ref().map(FakeCluster::env);
        let discovery = Discovery::start_with_env(&args, env.as_ref().map_or(&[], |env| &env[..]));

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
            _python_backends: grpc_backends,
            dir,
            cluster,
        })
    }

    /// The Kubernetes registry's cluster of a
    /// [`with_kubernetes`](Self::with_kubernetes) case.
    pub(crate) fn cluster(&self) -> &FakeCluster {
        self.cluster.as_ref().expect("a case with_kubernetes")
    }

    /// Replaces the Secret `namespace/name` of `--credentials-dir` with a
    /// new certificate for `hosts` whose subject is `subject`.
    pub(crate) fn rotate(&self, namespace: &str, name: &str, subject: &str, hosts: &str) {
        let pki = Pki::new(self.dir.path());
        write_credential(
            &pki,
            &self.dir.path().join("credentials"),
            namespace,
            name,
            subject,
            hosts,
        );
    }

    /// Writes `files` (name, content) as the Secret `namespace/name` of
    /// `--credentials-dir`, whatever they hold.
    pub(crate) fn write_secret(&self, namespace: &str, name: &str, files: &[(&str, &str)]) {
        let secret = self.dir.path().join("credentials").join(namespace).join(name);
        std::fs::create_dir_all(&secret).unwrap();
        for (file, text) in files {
            std::fs::write(secret.join(file), text).unwrap();
        }
    }

    /// An HTTPS GET of `/` through `gateway`'s listener written on
    /// `written` with SNI and Host `host`, the router's certificate
    /// verified against the test CA, presenting `client` (certificate and
    /// key files) if given: the status and the body, or `None` when the
    /// handshake failed.
    pub(crate) fn https_get_as(
        &self,
        gateway: &str,
        written: u16,
        host: &str,
        client: Option<&pilot_test_support::certs::Pair>,
    ) -> Option<(u16, String)> {
        let port = self.port(gateway, written);
        let mut command = std::process::Command::new("curl");
        command
            .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}", "--resolve"])
            .arg(format!("{host}:{port}:127.0.0.1"))
            .arg("--cacert")
            .arg(&self.ca);
        if let Some(client) = client {
            command
                .arg("--cert")
                .arg(&client.cert)
                .arg("--key")
                .arg(&client.key);
        }
        let out = command.arg(format!("https://{host}:{port}/")).output().unwrap();
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n')?;
        Some((code.trim().parse().ok()?, body.to_string()))
    }

    /// Writes `text` as the `ca.crt` of the ConfigMap `namespace/name` of
    /// `--ca-bundles-dir` (renamed into place, as the kubelet swaps a
    /// mounted ConfigMap's files).
    pub(crate) fn write_ca_bundle(&self, namespace: &str, name: &str, text: &str) {
        let bundle = self.dir.path().join("ca-bundles").join(namespace).join(name);
        std::fs::create_dir_all(&bundle).unwrap();
        let next = bundle.join(".ca.crt.next");
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, bundle.join("ca.crt")).unwrap();
    }

    /// The test CA's certificate (PEM).
    pub(crate) fn ca_pem(&self) -> String {
        std::fs::read_to_string(&self.ca).unwrap()
    }

    /// `(type, status, reason)` of a BackendTLSPolicy's conditions for its
    /// ancestor Gateway `gateway`, once it says `expected` (or, after the
    /// wait, whatever it says).
    pub(crate) fn policy_conditions(
        &self,
        name: &str,
        gateway: &str,
        expected: &[(String, String, String)],
    ) -> Vec<(String, String, String)> {
        let path = format!("/apis/gateway.networking.k8s.io/v1/namespaces/{INFRA}/backendtlspolicies/{name}");
        let said = || {
            let policy = self.object(&path);
            let mut said = policy["status"]["ancestors"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["ancestorRef"]["name"] == gateway)
                .map(|a| triples(&a["conditions"]))
                .unwrap_or_default();
            said.sort();
            said
        };
        let started = std::time::Instant::now();
        loop {
            let now = said();
            if now == expected || started.elapsed() > super::PATIENCE {
                return now;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// An HTTPS request through `gateway`'s listener written on `written`:
    /// TLS with SNI `sni`, the certificate verified against the test CA,
    /// then `GET path` with Host `host`: the status and body and the
    /// subject (CN) of the certificate the router presented, or `None`
    /// when the handshake or its verification failed.
    pub(crate) fn https_get(
        &self,
        gateway: &str,
        written: u16,
        sni: &str,
        host: &str,
        path: &str,
    ) -> Option<(u16, String, String)> {
        let port = self.port(gateway, written);
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "-v",
                "--max-time",
                "10",
                "-w",
                "\n%{http_code}",
                "--resolve",
            ])
            .arg(format!("{sni}:{port}:127.0.0.1"))
            .arg("--cacert")
            .arg(&self.ca)
            .arg("-H")
            .arg(format!("host: {host}"))
            .arg(format!("https://{sni}:{port}{path}"))
            .output()
            .unwrap();
        if !out.status.success() {
            return None;
        }
        let said = String::from_utf8_lossy(&out.stderr);
        let subject = said
            .lines()
            .find_map(|l| l.split_once("subject: CN=").map(|(_, n)| n.trim().to_string()))
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n')?;
        Some((code.trim().parse().ok()?, body.to_string(), subject))
    }

    /// Applies the manifest `text` (its ports as written).
    pub(crate) fn apply(&self, text: &str) {
        apply(
            &self.discovery,
            self.dir.path(),
            &move_parent_ports(text, &self.ports),
        );
    }

    /// Deletes the objects of the manifest `text`.
    pub(crate) fn delete(&self, text: &str) {
        pilotctl_file(&self.discovery, self.dir.path(), "delete", text);
    }

    /// The router serving Gateway `gateway`.
    pub(crate) fn router(&self, gateway: &str) -> &Agent {
        &self.routers[gateway]
    }

    /// Each listener's `attachedRoutes` of Gateway `gateway`, once its
    /// status says.
    pub(crate) fn attached_routes(&self, gateway: &str) -> Vec<Value> {
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
    pub(crate) fn expect(&self, gateway: &str, cases: &[(&str, &str, &str, u16)]) {
        self.expect_on(gateway, 80, cases);
    }

    /// [`expect`](Self::expect) on `gateway`'s listener written on
    /// `written`.
    pub(crate) fn expect_on(&self, gateway: &str, written: u16, cases: &[(&str, &str, &str, u16)]) {
        let port = self.port(gateway, written);
        let get = |host: &str, path: &str| match super::get_by_length(port, host, path) {
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
    pub(crate) fn expect_requests(&self, gateway: &str, cases: &[Request]) {
        let port = self.port(gateway, 80);
        let answered = |case: &Request| {
            let (status, body) = super::request_by_length(port, case.method, HOST, case.path, &case.headers);
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
                super::request_by_length(port, case.method, HOST, case.path, &case.headers),
                self.routers[gateway].log()
            );
        }
    }

    /// A websocket opened by `websocket.py`'s client through `gateway`'s
    /// listener written on port 80, to `path`: what the client answered
    /// (the echoes and the backend, or the error).
    pub(crate) fn websocket(&self, gateway: &str, path: &str) -> Value {
        let mut client = Python::websocket_client(self.dir.path());
        client.ask(&format!("ws://127.0.0.1:{}{path}", self.port(gateway, 80)))
    }

    /// Where Gateway `gateway`'s listener written on port `written`
    /// serves.
    pub(crate) fn port(&self, gateway: &str, written: u16) -> u16 {
        self.ports[&(gateway.to_string(), written)]
    }

    /// What a connection to `gateway`'s listener written on `written`
    /// reads before it closes.
    pub(crate) fn stream(&self, gateway: &str, written: u16) -> String {
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
    pub(crate) fn https(&self, gateway: &str, written: u16, host: &str) -> bool {
        curl_https(host, self.port(gateway, written), &self.ca, &[]).0
    }

    /// What a TLS connection through `gateway`'s listener written on
    /// `written` with SNI `sni` reads before it closes, the router's
    /// certificate verified against the test CA; `None` when the
    /// handshake or its verification fails.
    pub(crate) fn tls_stream(&self, gateway: &str, written: u16, sni: &str) -> Option<String> {
        self.tls_exchange(gateway, written, sni, b"")
    }

    /// [`tls_stream`](Self::tls_stream), sending `input` first.
    pub(crate) fn tls_exchange(
        &self,
        gateway: &str,
        written: u16,
        sni: &str,
        input: &[u8],
    ) -> Option<String> {
        use std::io::Write;
        let mut child = std::process::Command::new("openssl")
            .args([
                "s_client",
                "-quiet",
                "-ign_eof",
                "-verify_return_error",
                "-connect",
            ])
            .arg(format!("127.0.0.1:{}", self.port(gateway, written)))
            .args(["-servername", sni, "-verify_hostname", sni, "-CAfile"])
            .arg(&self.ca)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(input);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The TLS backend that answers a connection through `gateway`'s
    /// listener written on `written` with SNI `host`, its certificate
    /// verified against the test CA (`None` when none does).
    pub(crate) fn tls_backend(&self, gateway: &str, written: u16, host: &str) -> Option<String> {
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
    pub(crate) fn object(&self, path: &str) -> Value {
        let (code, body) = pilot_test_support::Discovery::get(&self.discovery, path);
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// `(type, status, reason)` of a route's conditions for its first
    /// parent, once written.
    pub(crate) fn route_conditions(&self, namespace: &str, name: &str) -> Vec<(String, String, String)> {
        self.route_conditions_of("httproutes", namespace, name)
    }

    /// [`route_conditions`](Self::route_conditions) of a route of
    /// `plural`.
    pub(crate) fn route_conditions_of(
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

/// The `--services` entry of the Service `namespace/name` with `ports`
/// (name, port, protocol, the loopback port of the upstream serving it).
fn service_entry(namespace: &str, name: &str, ports: &[(&str, u16, &str, u16)]) -> String {
    let mut entry = format!("- hostname: {name}.{namespace}.svc.cluster.local\n  ports:\n");
    for (port_name, port, protocol, _) in ports {
        entry.push_str(&format!(
            "  - {{name: {port_name}, port: {port}, protocol: {protocol}}}\n"
        ));
    }
    entry.push_str("  instances:\n");
    for (port_name, _, _, upstream) in ports {
        entry.push_str(&format!(
            "  - {{address: 127.0.0.1, port: {upstream}, portName: {port_name}, labels: {{app: {name}}}}}\n"
        ));
    }
    entry
}

/// Writes a certificate for `hosts` (subject `subject`, signed by the
/// test CA `ca`) and its key as the Secret `namespace/name` of the
/// credentials directory `root`, as a mounted Secret's files.
fn write_credential(pki: &Pki, root: &Path, namespace: &str, name: &str, subject: &str, hosts: &str) {
    let leaf = pki
        .leaf(
            subject,
            "ca",
            // A server's certificate, or a Gateway's client certificate.
            &format!(
                "subjectAltName={hosts}\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n"
            ),
        )
        .unwrap();
    let secret = root.join(namespace).join(name);
    std::fs::create_dir_all(&secret).unwrap();
    // Each file replaced whole (renamed into place), as the kubelet swaps
    // a mounted Secret's files: the reader never sees half of one.
    for (from, to) in [(&leaf.key, "tls.key"), (&leaf.cert, "tls.crt")] {
        let next = secret.join(format!(".{to}.next"));
        std::fs::copy(from, &next).unwrap();
        std::fs::rename(&next, secret.join(to)).unwrap();
    }
}

/// The host the matching cases send (the routes name no hostname).
pub(crate) const HOST: &str = "example.com";

/// A request of a matching case and what answers it: the backend (200),
/// or the status with no backend.
#[derive(Debug)]
pub(crate) struct Request {
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    backend: &'static str,
    status: u16,
}

/// `GET path`, expected to reach `backend`.
pub(crate) fn to(path: &'static str, backend: &'static str) -> Request {
    Request {
        method: "GET",
        path,
        headers: Vec::new(),
        backend,
        status: 200,
    }
}

/// `GET path`, expected to be answered `status` by the router.
pub(crate) fn answered(path: &'static str, status: u16) -> Request {
    Request {
        status,
        backend: "",
        ..to(path, "")
    }
}

impl Request {
    pub(crate) fn method(mut self, method: &'static str) -> Self {
        self.method = method;
        self
    }

    pub(crate) fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }
}

pub(crate) fn triples(conditions: &Value) -> Vec<(String, String, String)> {
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

pub(crate) fn said(type_: &str, status: &str, reason: &str) -> (String, String, String) {
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
pub(crate) fn move_parent_ports(document: &str, ports: &BTreeMap<(String, u16), u16>) -> String {
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
    pilotctl_file(discovery, dir, "apply", text);
}

/// `pilotctl VERB -f` a file holding `text`, which must succeed.
fn pilotctl_file(discovery: &Discovery, dir: &Path, verb: &str, text: &str) {
    let file = dir.join("conformance.yaml");
    std::fs::write(&file, text).unwrap();
    let done = pilot_test_support::pilotctl(
        Some(&discovery.url),
        &[verb, "-f", file.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(done.code, 0, "{verb}: {}{}", done.stdout, done.stderr);
}

pub(crate) const V1: &str = "infra-backend-v1";

pub(crate) const V2: &str = "infra-backend-v2";

pub(crate) const V3: &str = "infra-backend-v3";

impl Conformance {
    /// Waits until `gateway`'s listener written on `written` answers
    /// every case as expected, then checks each once more.
    pub(crate) fn expect_cases(&self, gateway: &str, written: u16, cases: &[Case]) {
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
                started.elapsed() < super::PATIENCE,
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

    /// [`expect_cases`](Self::expect_cases) over TLS on `gateway`'s
    /// listener written on `written`, with SNI `sni`.
    pub(crate) fn expect_cases_tls(&self, gateway: &str, written: u16, sni: &str, cases: &[Case]) {
        let port = self.port(gateway, written);
        let wrong = || -> Vec<String> {
            cases
                .iter()
                .filter_map(|case| {
                    case.check_tls(port, sni, &self.ca)
                        .err()
                        .map(|wrong| format!("{case:?}: {wrong}"))
                })
                .collect()
        };
        eventually(
            &format!("{gateway} to answer over TLS as the conformance expects"),
            || wrong().is_empty(),
        );
        let left = wrong();
        assert!(
            left.is_empty(),
            "{}\n{}",
            left.join("\n"),
            self.routers[gateway].log()
        );
    }

    /// [`Conformance::with_upstreams`] with [`echo_upstream`]s.
    pub(crate) fn echoing(names: &[&str], served: &[&str]) -> Option<Conformance> {
        Conformance::with_upstreams(names, served, &echo_upstream)
    }
}
