//! `pilot-agent proxy router` serving gateway servers told apart by SNI,
//! with real traffic: an `AUTO_PASSTHROUGH` server forwards a TLS
//! connection to the subset its SNI names (`outbound_.<port>_.<subset>_.
//! <host>`, as a sidecar sends it) with no VirtualService, and one port
//! serves an HTTPS server terminated for `*.example.com` beside a `TLS`
//! server passing `passthrough.example.com` through.

mod common;

use std::process::{Command, Stdio};

use common::tls::curl_https;
use common::{Agent, Backend, Discovery, eventually, free_port};
use pilot_test_support::certs::Pki;
use pilot_test_support::openssl_server;

/// The subject of the certificate the server on `port` presents to a
/// client sending `sni`, or empty when the handshake fails.
fn subject_seen(port: u16, sni: &str) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", sni])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("subject="))
        .map(|s| s.replace(' ', ""))
        .unwrap_or_default()
}

fn apply(discovery: &Discovery, dir: &std::path::Path, text: &str) {
    let config = dir.join("config.yaml");
    std::fs::write(&config, text).unwrap();
    let applied = pilot_test_support::pilotctl(
        Some(&discovery.url),
        &["apply", "-f", config.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
}

fn router(discovery: &Discovery, id: &str, label: &str) -> Agent {
    Agent::start(
        "router",
        &[
            "--ip",
            "10.0.0.42",
            "--id",
            id,
            "--label",
            label,
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
        ],
    )
}

#[test]
fn auto_passthrough_reaches_the_subset_the_sni_names() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    pki.ca("ca").unwrap();
    let server = "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n";
    let (v1_cert, v2_cert) = (
        pki.leaf("v1", "ca", server).unwrap(),
        pki.leaf("v2", "ca", server).unwrap(),
    );
    let (v1_port, _v1) = openssl_server(&v1_cert, None);
    let (v2_port, _v2) = openssl_server(&v2_cert, None);
    let services = dir.path().join("services.yaml");
    std::fs::write(
        &services,
        format!(
            "services:\n- hostname: secure.default.svc.cluster.local\n  ports: [{{name: tls, port: 9443, protocol: TCP}}]\n  instances:\n  - {{address: 127.0.0.1, port: {v1_port}, labels: {{app: secure, version: v1}}}}\n  - {{address: 127.0.0.1, port: {v2_port}, labels: {{app: secure, version: v2}}}}\n"
        ),
    )
    .unwrap();
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let port = free_port();
    apply(
        &discovery,
        dir.path(),
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: cross-network, namespace: default}}
spec:
  selector: {{istio: eastwestgateway}}
  servers:
  - port: {{number: {port}, name: tls, protocol: TLS}}
    hosts: ["*.local"]
    tls: {{mode: AUTO_PASSTHROUGH}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: secure, namespace: default}}
spec:
  host: secure
  subsets:
  - {{name: v1, labels: {{version: v1}}}}
  - {{name: v2, labels: {{version: v2}}}}
"#
        ),
    );
    let agent = router(&discovery, "eastwest-1.default", "istio=eastwestgateway");
    let sni = |subset: &str| format!("outbound_.9443_.{subset}_.secure.default.svc.cluster.local");
    eventually("the v1 SNI reaching the v1 instance", || {
        subject_seen(port, &sni("v1")) == "CN=v1"
    });
    for _ in 0..5 {
        assert_eq!(subject_seen(port, &sni("v1")), "CN=v1", "{}", agent.log());
        assert_eq!(subject_seen(port, &sni("v2")), "CN=v2", "{}", agent.log());
    }
    // The whole service reaches both; a subset or a port no rule has, and
    // a plain host name, reach nothing.
    let mut seen: Vec<String> = (0..20).map(|_| subject_seen(port, &sni(""))).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, ["CN=v1", "CN=v2"]);
    assert_eq!(subject_seen(port, &sni("v3")), "");
    assert_eq!(
        subject_seen(port, "outbound_.9444_.v1_.secure.default.svc.cluster.local"),
        ""
    );
    assert_eq!(subject_seen(port, "secure.default.svc.cluster.local"), "");
}

#[test]
fn an_https_server_and_a_passthrough_server_share_one_port() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let ca = pki.ca("ca").unwrap();
    let gateway_cert = pki
        .leaf(
            "gateway",
            "ca",
            "subjectAltName=DNS:*.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let upstream_cert = pki
        .leaf(
            "upstream",
            "ca",
            "subjectAltName=DNS:passthrough.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let backend = Backend::start();
    let (tls_port, _tls_backend) = openssl_server(&upstream_cert, None);
    let services = dir.path().join("services.yaml");
    std::fs::write(
        &services,
        format!(
            "services:\n- hostname: backend.default.svc.cluster.local\n  ports: [{{name: http, port: {}, protocol: HTTP}}]\n  instances:\n  - {{address: 127.0.0.1, port: {}, labels: {{app: backend}}}}\n- hostname: tlsbackend.default.svc.cluster.local\n  ports: [{{name: tls, port: {}, protocol: TCP}}]\n  instances:\n  - {{address: 127.0.0.1, port: {tls_port}, labels: {{app: tlsbackend}}}}\n",
            free_port(),
            backend.port,
            free_port(),
        ),
    )
    .unwrap();
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let port = free_port();
    apply(
        &discovery,
        dir.path(),
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {port}, name: https, protocol: HTTPS}}
    hosts: ["*.example.com"]
    tls: {{mode: SIMPLE, serverCertificate: {cert}, privateKey: {key}}}
  - port: {{number: {port}, name: tls, protocol: TLS}}
    hosts: [passthrough.example.com]
    tls: {{mode: PASSTHROUGH}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: apps, namespace: default}}
spec:
  hosts: ["*.example.com"]
  gateways: [edge]
  http:
  - route: [{{destination: {{host: backend}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: passthrough, namespace: default}}
spec:
  hosts: [passthrough.example.com]
  gateways: [edge]
  tls:
  - match: [{{sniHosts: [passthrough.example.com]}}]
    route: [{{destination: {{host: tlsbackend}}}}]
"#,
            cert = gateway_cert.cert.display(),
            key = gateway_cert.key.display(),
        ),
    );
    let agent = router(&discovery, "gateway-3.default", "istio=ingressgateway");
    // Terminated with the gateway's certificate, routed by the HTTP route.
    eventually("app.example.com terminated and routed to the backend", || {
        curl_https("app.example.com", port, &ca.cert, &[]) == (true, "ok".to_string())
    });
    // Passed through on the same port: the upstream's certificate and page.
    eventually("passthrough.example.com passed through", || {
        let (ok, body) = curl_https("passthrough.example.com", port, &ca.cert, &[]);
        ok && body.contains("no client certificate available")
    });
    for _ in 0..5 {
        assert_eq!(
            curl_https("other.example.com", port, &ca.cert, &[]),
            (true, "ok".to_string()),
            "{}",
            agent.log()
        );
        let (ok, body) = curl_https("passthrough.example.com", port, &ca.cert, &[]);
        assert!(ok && body.contains("no client certificate available"), "{body}");
    }
}
