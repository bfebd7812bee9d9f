//! A Sidecar's ingress `tls` and `connectionPool` and its egress listener
//! on a Unix domain socket, through a real Envoy with real traffic (curl):
//! an ingress listener with `tls: SIMPLE` terminates HTTPS with the
//! certificate files it names (a CA made in the test), offers ALPN `h2`
//! and `http/1.1` (curl `--http2` speaks HTTP/2) and forwards the
//! request to its default endpoint in clear; one with `tls: MUTUAL`
//! refuses a client without a certificate and serves one with a
//! certificate its CA signed; the listener's `connectionPool` is its
//! cluster's circuit breaker; an egress listener bound to
//! `unix:///path` answers curl `--unix-socket` for the host it imports.

mod support;

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use pilot_api::default_registry;
use pilot_model::{ConfigStore, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::Envoy;
use pilot_test_support::certs::TestCerts;
use support::envoy::{eventually, free_port, upstream};

const A1: &str = "a1.a.svc.cluster.local";

/// curl with `args` (and a 10 s limit): (success, body).
fn curl(args: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl runs (scripts/install-deps installs it)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_tls_and_unix_socket_listeners_carry_real_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).expect("openssl makes the test CA");
    let socket = dir.path().join("a1.sock");
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    // a1 serves HTTP on one port.
    let a1_port = upstream("a1", Arc::new(AtomicU64::new(0)));
    let registry = MemoryServiceRegistry::new();
    let service = registry.add_service(Service::new(A1, vec![Port::new("http", a1_port, Protocol::Http)]));
    registry
        .add_instance(ServiceInstance::new(
            Arc::clone(&service),
            NetworkEndpoint::new(
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                a1_port,
                service.ports[0].clone(),
            ),
            pilot_model::Labels::new(),
        ))
        .unwrap();
    let backend = upstream("backend", Arc::new(AtomicU64::new(0)));
    let (simple, mutual) = (free_port(), free_port());
    let text = format!(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  ingress:
  - port: {{number: {simple}, protocol: HTTPS, name: https}}
    bind: 127.0.0.1
    captureMode: NONE
    defaultEndpoint: 127.0.0.1:{backend}
    tls: {{mode: SIMPLE, serverCertificate: {cert}, privateKey: {key}}}
    connectionPool: {{tcp: {{maxConnections: 7}}}}
  - port: {{number: {mutual}, protocol: HTTPS, name: https-mutual}}
    bind: 127.0.0.1
    captureMode: NONE
    defaultEndpoint: 127.0.0.1:{backend}
    tls: {{mode: MUTUAL, serverCertificate: {cert}, privateKey: {key}, caCertificates: {ca}}}
  egress:
  - port: {{number: 0, protocol: HTTP, name: http-uds}}
    bind: unix://{socket}
    hosts: [./a1.a.svc.cluster.local]
"#,
        cert = path(&certs.server_cert),
        key = path(&certs.server_key),
        ca = path(&certs.ca),
        socket = path(&socket),
    );
    let sidecar = document::parse("sidecar.yaml", &text, &default_registry())
        .unwrap()
        .remove(0);
    store.create(sidecar).await.unwrap();
    let (_server, xds_port) = support::server::serve(controller, Arc::new(registry));
    let envoy = Envoy::ads(
        "sidecar~10.99.0.1~client.a~a.svc.cluster.local",
        &[("INTERCEPTION_MODE", "NONE")],
        xds_port,
        false,
    )
    .expect("envoy starts (scripts/install-deps installs it)");

    tokio::task::spawn_blocking(move || {
        let ca = path(&certs.ca).to_string();
        let https = |port: u16, extra: &[&str]| {
            let url = format!("https://localhost:{port}/");
            let resolve = format!("localhost:{port}:127.0.0.1");
            let mut args = vec!["--resolve", &resolve, "--cacert", &ca];
            args.extend_from_slice(extra);
            args.push(&url);
            curl(&args)
        };
        // SIMPLE: HTTPS with the listener's certificate (curl verifies it
        // against the test CA), the backend answers in clear.
        eventually("HTTPS on the SIMPLE ingress listener reaches the backend", || {
            https(simple, &[]) == (true, "backend".into())
        });
        // ALPN: an HTTP/2 client negotiates h2 there and is served; one
        // speaking HTTP/1.1 only still is.
        assert_eq!(
            https(simple, &["--http2", "-w", "\n%{http_version}"]),
            (true, "backend\n2".into()),
            "curl --http2 negotiates h2 by ALPN"
        );
        assert_eq!(
            https(simple, &["--http1.1", "-w", "\n%{http_version}"]),
            (true, "backend\n1.1".into())
        );
        // Plain HTTP on that port is not served.
        let (ok, body) = curl(&[&format!("http://127.0.0.1:{simple}/")]);
        assert!(!ok || body != "backend", "plain HTTP is refused: {body}");
        // MUTUAL: a client with the CA's certificate is served, one
        // without is refused in the handshake.
        let (cert, key) = (path(&certs.client_cert), path(&certs.client_key));
        eventually("HTTPS with a client certificate on the MUTUAL listener", || {
            https(mutual, &["--cert", cert, "--key", key]) == (true, "backend".into())
        });
        let (ok, body) = https(mutual, &[]);
        assert!(
            !ok && body.is_empty(),
            "a client without a certificate is refused: {body}"
        );
        // The SIMPLE listener's own pool is its cluster's breaker.
        let clusters = envoy.admin("/clusters");
        assert!(
            clusters.contains(&format!(
                "inbound|{simple}||::default_priority::max_connections::7"
            )),
            "{clusters}"
        );
        // The Unix domain socket: a1 by its name.
        let socket = path(&socket).to_string();
        eventually("a1 answers on the egress listener's socket", || {
            curl(&["--unix-socket", &socket, &format!("http://{A1}/")]) == (true, "a1".into())
        });
        let (_, body) = curl(&["--unix-socket", &socket, "http://other.example.com/"]);
        assert_ne!(body, "a1", "only the imported host is routed there");
        drop(envoy);
    })
    .await
    .unwrap();
}
