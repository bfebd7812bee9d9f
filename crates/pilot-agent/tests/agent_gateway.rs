//! `pilot-agent proxy router` as an ingress gateway with real traffic:
//! pilot-discovery with a backend service, a `Gateway` selecting the
//! router by its labels and a VirtualService bound to it; requests through
//! the gateway's port reach the backend by their Host, a host the gateway
//! does not serve gets 404, and the HTTPS server terminates TLS with its
//! certificate files.

mod common;

use std::process::Command;

use common::{Agent, Backend, Discovery, eventually, free_port};
use pilot_test_support::certs::Pki;

#[test]
fn a_router_serves_a_gateway_over_http_and_https() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let ca = pki.ca("ca").unwrap();
    let server = pki
        .leaf(
            "secure",
            "ca",
            "subjectAltName=DNS:secure.example.com\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
    let backend = Backend::start();
    let services = common::services_file(dir.path(), free_port(), backend.port);
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let (http_port, https_port) = (free_port(), free_port());
    let config = dir.path().join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {http_port}, name: http, protocol: HTTP}}
    hosts: [bookinfo.example.com]
  - port: {{number: {https_port}, name: https, protocol: HTTPS}}
    hosts: [secure.example.com]
    tls: {{mode: SIMPLE, serverCertificate: {cert}, privateKey: {key}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: backend, namespace: default}}
spec:
  hosts: [bookinfo.example.com, secure.example.com]
  gateways: [edge]
  http:
  - route: [{{destination: {{host: backend}}}}]
"#,
            cert = server.cert.display(),
            key = server.key.display(),
        ),
    )
    .unwrap();
    let applied = pilot_test_support::pilotctl(
        Some(&discovery.url),
        &["apply", "-f", config.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);

    let agent = Agent::start(
        "router",
        &[
            "--ip",
            "10.0.0.40",
            "--id",
            "gateway-1.default",
            "--label",
            "istio=ingressgateway",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
        ],
    );
    let through = |host: &str| {
        pilot_test_support::http::request(
            ([127, 0, 0, 1], http_port).into(),
            "GET",
            "/",
            &[("host", host)],
            b"",
        )
        .map(|a| (a.code, a.text()))
        .unwrap_or((0, String::new()))
    };
    eventually("the gateway routing bookinfo.example.com to the backend", || {
        through("bookinfo.example.com") == (200, "ok".to_string())
    });
    assert_eq!(
        through("bookinfo.example.com:80"),
        (200, "ok".to_string()),
        "the port in Host is ignored"
    );
    assert_eq!(through("other.example.com").0, 404, "{}", agent.log());

    let https = || {
        Command::new("curl")
            .args(["-sS", "--max-time", "10", "--resolve"])
            .arg(format!("secure.example.com:{https_port}:127.0.0.1"))
            .arg("--cacert")
            .arg(&ca.cert)
            .arg(format!("https://secure.example.com:{https_port}/"))
            .output()
            .unwrap()
    };
    eventually("the gateway terminating TLS for secure.example.com", || {
        let out = https();
        out.status.success() && out.stdout == b"ok"
    });
    // Plain HTTP on the TLS port is refused: TLS really is required.
    let plain = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{https_port}/"))
        .output()
        .unwrap();
    assert_ne!(String::from_utf8_lossy(&plain.stdout), "200");
}
